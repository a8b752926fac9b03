/* compact_quality.c — compact vs exact prefill figures (compact_quality.h). */
#include "score/compact_quality.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Prompt i: prompt_len + (i * 37) % 89 pseudo-random text ids (never the image token). */
static int make_prompt(int32_t *p, int i, int prompt_len, const di_model_config *c) {
    int n = prompt_len + (i * 37) % 89, V = (int)c->vocab_size;
    uint32_t x = 0x9e3779b9u * (uint32_t)(i + 1);
    for (int t = 0; t < n; t++) {
        x = x * 1664525u + 1013904223u;
        p[t] = 3 + (int32_t)((x >> 9) % (uint32_t)(V - 3));
        if (p[t] == c->image_token_id) p[t] = 3;
    }
    return n;
}

static double row_std(const float *v, int n) {
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) s += v[i], s2 += (double)v[i] * v[i];
    double m = s / n, var = s2 / n - m * m;
    return var > 0 ? sqrt(var) : 0;
}

deepinfer_status di_compact_quality_run(const di_score_model *m, int n_prompts, int prompt_len, int steps, int64_t keep,
                                        di_compact_quality *out, di_error *err) {
    memset(out, 0, sizeof *out);
    if (n_prompts < 1 || prompt_len < 1 || steps < 0 || keep < 1)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "compact quality: need >= 1 prompt of >= 1 token, steps >= 0 and keep >= 1");
    const di_model_config *c = m->cfg;
    int V = (int)c->vocab_size;
    int32_t *p = malloc(sizeof(int32_t) * (size_t)(prompt_len + 89));
    if (!p) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "compact quality: out of memory");
    deepinfer_status st = DEEPINFER_OK;
    int64_t agree = 0, agree_first = 0, scored = 0;
    out->prompt_len_min = 1 << 30;
    for (int i = 0; i < n_prompts && !st; i++) {
        int n = make_prompt(p, i, prompt_len, c);
        if (n < out->prompt_len_min) out->prompt_len_min = n;
        if (n > out->prompt_len_max) out->prompt_len_max = n;
        di_score_result ex = {0}, cp = {0};
        di_score_req r = {.prompt = p, .n_prompt = n, .steps = steps};
        if ((st = di_score_run(m, &r, &ex, err))) break;
        di_score_req rc = {.prompt = p, .n_prompt = n, .force_ids = ex.argmax, .n_force = steps, .yoco_keep = keep};
        if ((st = di_score_run(m, &rc, &cp, err))) {
            di_score_result_free(&ex);
            break;
        }
        double sum = 0;
        for (int v = 0; v < V; v++) {
            double d = fabs((double)ex.logits[v] - cp.logits[v]);
            sum += d;
            if (d > out->first_max_abs) out->first_max_abs = d;
        }
        out->first_mean_abs += sum / V;
        out->first_logit_std += row_std(ex.logits, V);
        agree_first += ex.argmax[0] == cp.argmax[0];
        for (int k = 0; k <= steps; k++, scored++) agree += ex.argmax[k] == cp.argmax[k];
        di_score_result_free(&ex);
        di_score_result_free(&cp);
    }
    free(p);
    if (st) return st;
    out->n_prompts = n_prompts;
    out->steps = steps;
    out->keep = keep;
    out->first_mean_abs /= n_prompts;
    out->first_logit_std /= n_prompts;
    out->first_agree = (double)agree_first / n_prompts;
    out->greedy_agree = (double)agree / (double)scored;
    return DEEPINFER_OK;
}
