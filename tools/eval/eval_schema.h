/*
 * eval_schema.h — is a generated text valid against a JSON schema?
 *
 * The check is the structured-outputs compiler itself (src/structured):
 * the schema is compiled to its grammar (so_compile, the same grammar
 * constrained generation runs) and the output's bytes, blanks at both ends
 * trimmed, must be accepted through to an accepting state
 * (so_matcher_accept_bytes + so_matcher_is_accepting), with up to 1000
 * whitespace bytes allowed between tokens; the text must also parse as JSON
 * (io/json.h). src/structured has no separate validate call: a grammar
 * that accepts exactly the schema's instances is the validator.
 */
#ifndef DI_TOOLS_EVAL_SCHEMA_H
#define DI_TOOLS_EVAL_SCHEMA_H

#include <stddef.h>

#include "structured/vocab.h"
#include "util/error.h"

/* *valid = 1 when text[0..n) is a JSON value valid against `schema`, *parses = 1 when it is JSON at all.
 * Fails (an error naming the problem) only when the schema does not compile. */
deepinfer_status ev_schema_check(so_vocab *v, const char *schema, size_t schema_len, const char *text, size_t n,
                                 int *valid, int *parses, di_error *err);

#endif
