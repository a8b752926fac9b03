/* eval_rolling.c — sliding-window NLL of a token stream (eval_rolling.h). */
#include "eval/eval_rolling.h"

#include <stdlib.h>
#include <string.h>

deepinfer_status ev_rolling_check(const ev_model *m, int window, int stride, di_error *err) {
    if (window < 2 || window > m->context)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "--window %d must be in [2, %lld] (the model's context)",
                            window, (long long)m->context);
    if (stride < 1 || stride > window - 1)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "--stride %d must be in [1, %d] (window - 1)", stride,
                            window - 1);
    return DEEPINFER_OK;
}

deepinfer_status ev_rolling(ev_model *m, const int32_t *t, int T, int window, int stride, ev_rolling_result *out,
                            di_error *err) {
    memset(out, 0, sizeof *out);
    deepinfer_status st = ev_rolling_check(m, window, stride, err);
    if (st) return st;
    if (T < 1) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "the text has no tokens");
    int nw = 0;
    for (int b = 0;; b += stride) { /* count the windows */
        nw++;
        if (b + window - 1 >= T) break;
    }
    ev_seq *s = calloc((size_t)nw, sizeof *s);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)nw * (size_t)window);
    double *lp = malloc(sizeof(double) * (size_t)nw * (size_t)window);
    uint8_t *gr = malloc((size_t)nw * (size_t)window);
    if (!s || !ids || !lp || !gr) {
        free(s), free(ids), free(lp), free(gr);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "eval: out of memory for %d windows", nw);
    }
    int prev = 0, w = 0;
    for (int b = 0;; b += stride, w++) {
        int end = b + window - 1 < T ? b + window - 1 : T;
        int32_t *v = ids + (size_t)w * window;
        v[0] = m->bos;
        memcpy(v + 1, t + b, sizeof(int32_t) * (size_t)(end - b));
        s[w] = (ev_seq){.ids = v, .n = end - b + 1, .score_from = 1 + prev - b, .lp = lp + (size_t)w * window,
                        .greedy = gr + (size_t)w * window};
        prev = end;
        if (end == T) break;
    }
    st = ev_score(m, s, nw, err);
    for (int i = 0; !st && i < nw; i++)
        for (int p = s[i].score_from; p < s[i].n; p++) {
            out->nll_sum -= s[i].lp[p];
            out->greedy += s[i].greedy[p];
            out->tokens++;
        }
    out->windows = nw, out->window = window, out->stride = stride;
    free(s), free(ids), free(lp), free(gr);
    return st;
}
