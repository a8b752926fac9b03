/* select.c — the small per-token selection ops: compressor softmax pooling
 * (§4.5), lightning-indexer BF16 scores and top-k (§4.6, §3.7), the MoE
 * router and the clamped SwiGLU (§4.7). */
#include <math.h>
#include <stdlib.h>

#include "io/numfmt.h"
#include "ops/cpu/vec.h"
#include "ops/ops.h"

void di_softmax_pool(const float *kv, const float *score, size_t ld, int S, int D, float *out) {
    for (int d = 0; d < D; d++) {
        float mx = -INFINITY;
        for (int s = 0; s < S; s++) mx = fmaxf(mx, score[(size_t)s * ld + d]);
        float e[256], sum = 0.0f;
        for (int s = 0; s < S; s++) {
            e[s] = expf(score[(size_t)s * ld + d] - mx);
            sum += e[s];
        }
        float acc = 0.0f;
        for (int s = 0; s < S; s++) acc += kv[(size_t)s * ld + d] * (e[s] / sum);
        out[d] = acc;
    }
}

void di_index_scores(const uint16_t *q, int nh, const float *w, const uint16_t *k, size_t ldk, int n, float *score) {
    if (di_vec_use_avx512()) {
        di_index_scores_avx512(q, nh, w, k, ldk, n, score);
        return;
    }
    for (int j = 0; j < n; j++) {
        float s = 0.0f;
        for (int h = 0; h < nh; h++) {
            float dotv = di_round_bf16(di_vdot_bf16(q + (size_t)h * 128, k + (size_t)j * ldk, 128));
            if (dotv < 0.0f) dotv = 0.0f;
            s += di_round_bf16(dotv * w[h]);
        }
        score[j] = di_round_bf16(s);
    }
}

int di_topk_desc(const float *score, int n, int k, int *idx) {
    int cnt = k < n ? k : n;
    /* selection by repeated insertion into a sorted prefix: O(n * cnt), fine
     * for the sizes here (n visible rows, cnt <= 512) */
    int filled = 0;
    for (int j = 0; j < n; j++) {
        float v = score[j];
        if (filled == cnt && !(v > score[idx[cnt - 1]])) continue;
        int pos = filled < cnt ? filled : cnt - 1;
        while (pos > 0 && v > score[idx[pos - 1]]) {
            idx[pos] = idx[pos - 1];
            pos--;
        }
        idx[pos] = j;
        if (filled < cnt) filled++;
    }
    return cnt;
}

void di_route(const float *logits, int E, const float *bias, const int *fixed, int k, float route_scale, float norm_eps,
              int *sel, float *w) {
    float s[1024], b[1024];
    for (int e = 0; e < E; e++) {
        float l = logits[e];
        float sp = l > 20.0f ? l : log1pf(expf(l));
        s[e] = sqrtf(sp);
        b[e] = bias ? s[e] + bias[e] : s[e];
    }
    if (fixed) {
        for (int i = 0; i < k; i++) sel[i] = fixed[i];
    } else {
        di_topk_desc(b, E, k, sel);
    }
    float sum = 0.0f;
    for (int i = 0; i < k; i++) sum += s[sel[i]];
    sum += norm_eps;
    for (int i = 0; i < k; i++) w[i] = s[sel[i]] / sum * route_scale;
}

typedef struct swiglu_ctx {
    const uint16_t *gate, *up;
    size_t ld;
    int I;
    float limit;
    const float *rw;
    uint16_t *out;
    size_t ldo;
} swiglu_ctx;

static void swiglu_rows(void *p, int m0, int m1) {
    swiglu_ctx *c = p;
    for (int m = m0; m < m1; m++) {
        const uint16_t *g = c->gate + (size_t)m * c->ld, *u = c->up + (size_t)m * c->ld;
        uint16_t *o = c->out + (size_t)m * c->ldo;
        for (int i = 0; i < c->I; i++) {
            float gv = di_bf16_to_f32(g[i]), uv = di_bf16_to_f32(u[i]);
            if (c->limit > 0.0f) {
                uv = fminf(fmaxf(uv, -c->limit), c->limit);
                gv = fminf(gv, c->limit);
            }
            float h = gv / (1.0f + expf(-gv)) * uv;
            if (c->rw) h = c->rw[m] * h;
            o[i] = di_f32_to_bf16(h);
        }
    }
}

void di_swiglu(di_exec *x, int M, const uint16_t *gate, const uint16_t *up, size_t ld, int I, float limit,
               const float *rw, uint16_t *out, size_t ldo) {
    swiglu_ctx c = {gate, up, ld, I, limit, rw, out, ldo};
    di_par_rows(x, M, 20.0 * I, swiglu_rows, &c);
}
