/*
 * eval_ppl.h — `deepinfer eval perplexity`: the perplexity of a text file.
 *
 * The text (raw bytes, one document) is tokenized without BOS and scored
 * as [BOS] + tokens (eval_rolling.h): in one window when tokens + 1 fit the
 * model's context (or --window), else in windows of `window` positions
 * every `stride` tokens (default window / 2), only the new tokens of each
 * window scored. perplexity = exp(nll_sum / tokens); bits_per_byte =
 * nll_sum / ln 2 / bytes of the file.
 */
#ifndef DI_TOOLS_EVAL_PPL_H
#define DI_TOOLS_EVAL_PPL_H

#include <stdio.h>

#include "eval/eval_model.h"
#include "eval/eval_report.h"

typedef struct ev_ppl_result {
    double nll_sum, perplexity, bits_per_byte;
    int64_t tokens, greedy, bytes;
    int windows, window, stride;
} ev_ppl_result;

/* Score text[0..len) (window/stride 0 = the defaults above); loads the model. On an engine in
 * compact mode: DEEPINFER_ERR_UNSUPPORTED, the message starting with EV_NEEDS_PROMPT_LOGPROBS. */
deepinfer_status ev_perplexity(ev_model *m, const char *text, size_t len, int window, int stride, ev_ppl_result *r,
                               di_error *err);

/* The report members (without braces) and the table line. */
void ev_ppl_json(ev_buf *b, const ev_ppl_result *r);
void ev_ppl_table(FILE *f, const ev_ppl_result *r);

#endif
