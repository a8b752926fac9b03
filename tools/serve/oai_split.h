/*
 * oai_split.h — a choice's generated text split into what OpenAI clients
 * read: reasoning (the text before </think> in thinking mode, in
 * reasoning_content), content, and DSML tool calls (when the request has
 * tools). Works incrementally on the engine's cumulative text, so a stream
 * never shows part of "</think>" or of a tool-call block as content: a
 * suffix that could still become one is held back until the next step (or
 * the end, where `final` releases it).
 */
#ifndef DI_SERVE_OAI_SPLIT_H
#define DI_SERVE_OAI_SPLIT_H

#include <stddef.h>

#include "serve/dsml.h"

typedef struct oai_span {
    size_t off, len;   /* bytes of the cumulative text */
} oai_span;

typedef struct oai_split {
    int tools;         /* look for tool-call blocks */
    int in_reasoning;  /* before </think> */
    size_t pos;        /* text consumed so far */
    long dsml_at;      /* >= 0: a tool-call block starts here (held back until the end) */
} oai_split;

void oai_split_init(oai_split *s, int thinking, int tools);

/* Advance over text[0..n) (cumulative, n never shrinks). New reasoning and
 * content are returned as spans of `text` (content may follow reasoning
 * when </think> was crossed). With final = 1 nothing is held back; a
 * complete tool-call block is parsed into *calls (count returned in
 * *n_calls, free with dsml_free), a malformed one becomes content. */
void oai_split_step(oai_split *s, const char *text, size_t n, int final, oai_span *reasoning, oai_span *content,
                    dsml_call **calls, int *n_calls);

#endif
