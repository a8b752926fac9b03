/*
 * eval_extract.h — the answer of a generation task, as GSM8K-style
 * evaluations take it:
 *   - with a regex (PCRE2 syntax): its first match in the output; the
 *     first capture group when the pattern has one, else the whole match;
 *   - without: the last number in the output (-?digits with optional
 *     thousands commas and decimals), compared as a number: commas dropped
 *     and trailing decimal zeros trimmed on both sides ("1,200.50" == "1200.5").
 */
#ifndef DI_TOOLS_EVAL_EXTRACT_H
#define DI_TOOLS_EVAL_EXTRACT_H

#include <stddef.h>

/* Extract into out (NUL-terminated, at most cap-1 bytes); returns 1 if found,
 * 0 if not (out = ""), -1 for a regex that does not compile (out = the message). */
int ev_extract(const char *text, size_t n, const char *regex, char *out, size_t cap);

/* 1 if the extracted answer equals `answer` under the rule above (number rule without a regex, else equal after
 * trimming blanks). */
int ev_answer_matches(const char *extracted, const char *answer, int by_number);

#endif
