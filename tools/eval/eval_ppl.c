/* eval_ppl.c — perplexity and bits per byte of a text (eval_ppl.h). */
#include "eval/eval_ppl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval_rolling.h"

deepinfer_status ev_perplexity(ev_model *m, const char *text, size_t len, int window, int stride, ev_ppl_result *r,
                               di_error *err) {
    memset(r, 0, sizeof *r);
    int32_t *ids = NULL;
    int T = 0;
    deepinfer_status st = ev_encode(m, text, len, &ids, &T, err);
    if (st) return st;
    if (T < 1) {
        free(ids);
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "the text has no tokens");
    }
    if (!window) window = (int64_t)T + 1 <= m->context ? T + 1 : (int)m->context;
    if (!stride) stride = (int64_t)T + 1 <= window ? window - 1 : window / 2;
    ev_rolling_result rr;
    if (!(st = ev_rolling_check(m, window, stride, err)) && !(st = ev_model_load(m, window, err))) {
        if (ev_model_compact(m))
            st = di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "%s: %s", EV_NEEDS_PROMPT_LOGPROBS, EV_NEEDS_PROMPT_LOGPROBS_MSG);
        else st = ev_rolling(m, ids, T, window, stride, &rr, err);
    }
    free(ids);
    if (st) return st;
    r->nll_sum = rr.nll_sum;
    r->tokens = rr.tokens;
    r->greedy = rr.greedy;
    r->bytes = (int64_t)len;
    r->windows = rr.windows, r->window = rr.window, r->stride = rr.stride;
    r->perplexity = exp(rr.nll_sum / (double)rr.tokens);
    r->bits_per_byte = len ? rr.nll_sum / log(2.0) / (double)len : NAN;
    return DEEPINFER_OK;
}

void ev_ppl_json(ev_buf *b, const ev_ppl_result *r) {
    ev_printf(b, "\"perplexity\": ");
    ev_json_num(b, r->perplexity);
    ev_printf(b, ", \"tokens\": %lld, \"bits_per_byte\": ", (long long)r->tokens);
    ev_json_num(b, r->bits_per_byte);
    ev_printf(b, ", \"nll_sum\": ");
    ev_json_num(b, r->nll_sum);
    ev_printf(b, ", \"nll_per_token\": ");
    ev_json_num(b, r->nll_sum / (double)r->tokens);
    ev_printf(b, ", \"bytes\": %lld, \"windows\": %d, \"window\": %d, \"stride\": %d, \"greedy_fraction\": ",
              (long long)r->bytes, r->windows, r->window, r->stride);
    ev_json_num(b, (double)r->greedy / (double)r->tokens);
}

void ev_ppl_table(FILE *f, const ev_ppl_result *r) {
    fprintf(f, "%-12s %10s %10s %10s %8s %12s\n", "perplexity", "bits/byte", "tokens", "bytes", "windows", "window/stride");
    fprintf(f, "%-12.4f %10.4f %10lld %10lld %8d %6d/%d\n", r->perplexity, r->bits_per_byte, (long long)r->tokens,
            (long long)r->bytes, r->windows, r->window, r->stride);
}
