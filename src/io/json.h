/*
 * json.h — a strict RFC 8259 JSON parser into an arena-allocated tree.
 *
 * Used for config.json, safetensors headers, tokenizer.json, JSON schemas
 * and request bodies, so it is written for untrusted input: bounded nesting
 * depth, byte-exact strings (embedded NULs allowed, lengths explicit), UTF-8
 * validated, every error reported with line and column. Numbers keep their
 * source text so callers can read exact integers (int64) or compare schema
 * numbers without double rounding.
 *
 * Object members keep source order; duplicate keys are kept (lookups return
 * the last one, as most JSON readers do).
 */
#ifndef DI_IO_JSON_H
#define DI_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"
#include "util/error.h"

typedef enum di_json_type {
    DI_JSON_NULL = 0,
    DI_JSON_FALSE,
    DI_JSON_TRUE,
    DI_JSON_NUMBER,
    DI_JSON_STRING,
    DI_JSON_ARRAY,
    DI_JSON_OBJECT
} di_json_type;

typedef struct di_json di_json;

struct di_json {
    di_json_type type;
    uint32_t count;      /* array elements / object members */
    /* For object members: the key (unescaped, NUL-terminated, may contain NULs). */
    const char *key;
    size_t key_len;
    /* STRING: unescaped bytes (NUL-terminated; str_len excludes it).
     * NUMBER: the source text of the number (NUL-terminated). */
    const char *str;
    size_t str_len;
    double num;          /* NUMBER: value as double */
    int64_t i64;         /* NUMBER: exact value when is_int */
    int is_int;          /* NUMBER: 1 if the text is an integer that fits int64 */
    di_json *items;      /* ARRAY/OBJECT: `count` contiguous children */
    size_t offset;       /* byte offset of the value in the source */
};

typedef struct di_json_options {
    int max_depth;       /* 0 = 256 */
    size_t max_bytes;    /* 0 = unlimited; arena memory limit for the tree */
} di_json_options;

typedef struct di_json_doc {
    di_arena arena;
    di_json *root;
} di_json_doc;

/* Parse `len` bytes of `text` (need not be NUL-terminated). On success
 * *doc is a new document (free with di_json_free). Errors give the line and
 * column, e.g. "line 3, column 14: expected ',' or '}' in object". */
deepinfer_status di_json_parse(const char *text, size_t len, const di_json_options *opt,
                               di_json_doc **doc, di_error *err);

void di_json_free(di_json_doc *doc);

/* Member lookup (last duplicate wins); NULL if `obj` is not an object or lacks the key. */
const di_json *di_json_get(const di_json *obj, const char *key);

/* Array element, NULL if out of range or not an array. */
const di_json *di_json_at(const di_json *arr, size_t i);

/* Typed helpers: return 1 and set *out when `v` has the right type, else 0. */
int di_json_as_i64(const di_json *v, int64_t *out);   /* integer numbers only */
int di_json_as_f64(const di_json *v, double *out);    /* any number */
int di_json_as_bool(const di_json *v, int *out);
int di_json_is_string(const di_json *v);

/* "null", "boolean", "number", "string", "array", "object". */
const char *di_json_type_name(di_json_type t);

/* Compute 1-based line and column of a byte offset in `text`. */
void di_json_line_col(const char *text, size_t len, size_t offset, int *line, int *col);

#endif
