/*
 * gbnf.h — GBNF grammars (the llama.cpp / XGrammar EBNF dialect) into the
 * grammar IR. Errors give line and column.
 */
#ifndef DI_STRUCTURED_GBNF_H
#define DI_STRUCTURED_GBNF_H

#include "structured/grammar.h"

/* Parse `text` into builder `b` (initialised by the caller); *root is the
 * nonterminal of rule `root`. */
deepinfer_status so_gbnf_build(const char *text, size_t len, so_gb *b, int32_t *root, di_error *err);

#endif
