/*
 * eval_rolling.h — the NLL of a whole token stream: perplexity of a text and
 * lm-evaluation-harness's loglikelihood_rolling.
 *
 * Every window is [BOS] + up to window-1 tokens of the stream, starting at
 * token k*stride; window k scores only the tokens after the previous
 * window's end (the first scores all of its tokens), so every token is
 * scored exactly once, with at least window-1-stride tokens of context
 * (except at the start). stride = window-1 gives disjoint windows (the
 * demo recipe's evaluation: tools/reference/evaluate.py). A stream that fits
 * (tokens + 1 <= window) is one window.
 */
#ifndef DI_TOOLS_EVAL_ROLLING_H
#define DI_TOOLS_EVAL_ROLLING_H

#include "eval/eval_model.h"

typedef struct ev_rolling_result {
    double nll_sum;     /* -sum log p, nats */
    int64_t tokens;     /* tokens scored (the whole stream) */
    int64_t greedy;     /* of them, the argmax */
    int windows, window, stride;
} ev_rolling_result;

/* Check window/stride: window in [2, context], stride in [1, window-1]. */
deepinfer_status ev_rolling_check(const ev_model *m, int window, int stride, di_error *err);

/* Score t[0..T) (T >= 1); the model must be loaded with room for `window` positions. */
deepinfer_status ev_rolling(ev_model *m, const int32_t *t, int T, int window, int stride, ev_rolling_result *out,
                            di_error *err);

#endif
