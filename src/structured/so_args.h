/*
 * so_args.h — structured-output request arguments and the one call that
 * compiles them against a vocabulary.
 *
 * In the sampling params (DESIGN.md §3):
 *   "so_args": {"schema_type": "regex" | "json" | "ebnf",
 *               "schema": "<text>"            (json: text or an object),
 *               "whitespace_max": 20,         (json: whitespace bytes allowed
 *                                              between tokens; 0 = compact)
 *               "lenient": false,             (json: ignore unsupported
 *                                              keywords instead of failing)
 *               "start_after_think": false}   (constrain only after </think>)
 * Unknown members are an error (a typo must not silently drop a constraint).
 *
 * Semantics: regex = full match of the whole output (ECMAScript-like syntax,
 * regex.h); json = the output is one JSON value valid against the schema
 * (draft 2020-12 / draft-07, json_schema.h), no leading/trailing whitespace;
 * ebnf = GBNF with entry rule `root` (gbnf.h).
 */
#ifndef DI_STRUCTURED_SO_ARGS_H
#define DI_STRUCTURED_SO_ARGS_H

#include <stddef.h>

#include "io/json.h"
#include "structured/grammar.h"

typedef enum so_schema_type { SO_SCHEMA_REGEX = 0, SO_SCHEMA_JSON = 1, SO_SCHEMA_EBNF = 2 } so_schema_type;

typedef struct so_args {
    so_schema_type type;
    const char *schema;   /* text (for json: the schema's JSON text) */
    size_t schema_len;
    int whitespace_max;   /* -1: default (20) */
    int lenient;
    int start_after_think;
} so_args;

/* Read so_args from a parsed JSON object. Strings point into `obj` (or into
 * `a` for a json schema given as an object, re-serialised there). */
deepinfer_status so_args_from_json(const di_json *obj, di_arena *a, so_args *out, di_error *err);

/* Compile to a grammar over vocab `v`; errors say what is wrong and where. */
deepinfer_status so_compile(so_vocab *v, const so_args *args, so_grammar **out, di_error *err);

#endif
