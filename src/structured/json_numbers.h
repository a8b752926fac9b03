/*
 * json_numbers.h — exact decimal arithmetic for JSON Schema numeric keywords:
 * comparison of JSON number texts, and regexes for numbers within bounds
 * (plain decimal notation, no exponent), equal to a value, or with a
 * multipleOf constraint.
 */
#ifndef DI_STRUCTURED_JSON_NUMBERS_H
#define DI_STRUCTURED_JSON_NUMBERS_H

#include <stddef.h>

#include "structured/json_write.h"

/* A decimal as sign * 0.D * 10^E (D without leading/trailing zeros; D empty
 * means zero). */
typedef struct so_dec {
    int neg;
    char d[408];
    int nd;
    int e;
} so_dec;

/* Parse JSON number text; 0 if malformed or too long/large (> 400 digits
 * once written out in plain notation). */
int so_dec_parse(const char *s, size_t n, so_dec *out);

/* -1, 0, 1 */
int so_dec_cmp(const so_dec *a, const so_dec *b);

/* 1 if a is an integer. */
int so_dec_is_int(const so_dec *a);

/* Append a regex matching the numbers x (JSON syntax without exponent, no
 * "-0") with lo <(=) x <(=) hi, as a lexeme spec (lexspec.h), or return 0 if
 * the set is empty. lo/hi may be NULL (unbounded). integer: only integral
 * values (written with an optional ".0+" fraction). */
int so_number_range_spec(so_buf *out, const so_dec *lo, int lo_excl, const so_dec *hi, int hi_excl, int integer);

/* Regex (no anchors) matching every plain-notation spelling of value a. */
int so_number_eq_regex(so_buf *out, const so_dec *a);

#endif
