/*
 * pyjson.h — JSON text exactly as Python's json.dumps(v, ensure_ascii=False)
 * writes it, which the DeepSeek chat encoders use for tool schemas and
 * non-string tool arguments: ", " and ": " separators, object keys in
 * source order (a repeated key keeps its first position and its last
 * value, as a Python dict does), non-ASCII kept as UTF-8, control
 * characters as \uXXXX (lowercase hex), integers verbatim, other numbers
 * as Python's float repr (shortest round-trip: 1.0, 1e-05, 1e+16,
 * Infinity).
 */
#ifndef DI_TOKENIZER_PYJSON_H
#define DI_TOKENIZER_PYJSON_H

#include "io/json.h"
#include "tokenizer/sbuf.h"

void di_pyjson_dump(di_sbuf *b, const di_json *v);
void di_pyjson_string(di_sbuf *b, const char *s, size_t n);
/* Python repr() of a float, as json.dumps writes it. */
void di_pyjson_float(di_sbuf *b, double x);

/* Iterate an object's members with Python-dict semantics: calls fn for
 * each distinct key at its first position with its last value. */
typedef void (*di_pyjson_member_fn)(void *ctx, const di_json *key_member, const di_json *value);
void di_pyjson_members(const di_json *obj, di_pyjson_member_fn fn, void *ctx);

#endif
