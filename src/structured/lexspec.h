/*
 * lexspec.h — the lexeme spec language: a canonical text form of a lexeme's
 * regular language, used both to build its DFA and as its identity in the
 * vocab-wide registry and mask cache.
 *
 *   R<n>:<regex>   the n-byte regex, full match, UTF-8 text
 *   J<n>:<regex>   a JSON string literal whose decoded value fully matches
 *                  the regex, in canonical encoding ('"' ... '"')
 *   S<n>:<regex>   same, but JSON Schema `pattern` search semantics
 *   &<A><B>        intersection of two specs
 *   -<A><B>        A minus B
 *   |<A><B>        union
 *   ~<A><B>        A minus B, where A is the generic JSON string and B a finite
 *                  set of its strings (object keys already named): the mask
 *                  cache may use A's states (see mask.c)
 *   M<m>:          JSON integers (optionally written with ".0+") divisible by m
 */
#ifndef DI_STRUCTURED_LEXSPEC_H
#define DI_STRUCTURED_LEXSPEC_H

#include <stddef.h>

#include "structured/dfa.h"

/* Compile a spec; state classes are computed for tokens up to `depth` bytes. */
deepinfer_status so_lexspec_compile(const char *spec, size_t len, int depth, so_dfa **out, di_error *err);

/* Length of the first complete spec at s (for taking apart ~<A><B>). */
size_t so_lexspec_operand_len(const char *s, size_t len);

#endif
