/* select.c — the small per-token selection ops: compressor softmax pooling
 * (§4.5), lightning-indexer BF16 scores and top-k (§4.6, §3.7), the MoE
 * router and the clamped SwiGLU (§4.7). */
#include <math.h>
#include <stdlib.h>

#include "io/numfmt.h"
#include "ops/cpu/elem.h"
#include "ops/cpu/mathf.h"
#include "ops/cpu/vec.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "util/cpu.h"

void di_softmax_pool(const float *kv, const float *score, size_t ld, int S, int D, float *out) {
    if (di_cpu_isa() == DI_ISA_AVX512) {
        di_softmax_pool_avx512(kv, score, ld, S, D, out);
        return;
    }
    for (int d = 0; d < D; d++) {
        float mx = -INFINITY;
        for (int s = 0; s < S; s++) mx = fmaxf(mx, score[(size_t)s * ld + d]);
        float e[256], sum = 0.0f;
        for (int s = 0; s < S; s++) {
            e[s] = di_expf(score[(size_t)s * ld + d] - mx);
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

/* "a ranks before b": higher score, then lower index (a total order, so the
 * selection is unique whatever the algorithm). NaN ranks last. */
static inline int ranks_before(const float *score, int a, int b) {
    float x = score[a], y = score[b];
    if (x > y) return 1;
    if (x < y) return 0;
    if (x == y) return a < b;
    return y != y && (x == x || a < b); /* NaNs last */
}

/* Sift the worst-ranked element to the root of a heap of n indices. */
static void sift_down(const float *score, int *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && ranks_before(score, h[w], h[l])) w = l;
        if (r < n && ranks_before(score, h[w], h[r])) w = r;
        if (w == i) return;
        int t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* The first j' in [j, n) that ranks before an element of score y at an
 * earlier index: score > y, or y is NaN and the score is not (ties never
 * do: the earlier index wins). n if there is none. */
static int next_better(const float *score, int j, int n, float y) {
    if (di_cpu_isa() == DI_ISA_AVX512) return di_next_better_avx512(score, j, n, y);
    for (; j < n; j++)
        if (score[j] > y || (y != y && score[j] == score[j])) return j;
    return n;
}

int di_topk_desc(const float *score, int n, int k, int *idx) {
    int cnt = k < n ? k : n;
    if (cnt <= 0) return 0;
    if ((int64_t)n * cnt <= 65536) {
        /* small: insertion into a sorted prefix */
        int filled = 0;
        for (int j = 0; j < n; j++) {
            if (filled == cnt && (j = next_better(score, j, n, score[idx[cnt - 1]])) >= n) break;
            int pos = filled < cnt ? filled : cnt - 1;
            while (pos > 0 && ranks_before(score, j, idx[pos - 1])) {
                idx[pos] = idx[pos - 1];
                pos--;
            }
            idx[pos] = j;
            if (filled < cnt) filled++;
        }
        return cnt;
    }
    /* large: a heap of the best cnt with the worst at the root, then heap-sort */
    for (int j = 0; j < cnt; j++) idx[j] = j;
    for (int i = cnt / 2 - 1; i >= 0; i--) sift_down(score, idx, cnt, i);
    for (int j = cnt; (j = next_better(score, j, n, score[idx[0]])) < n; j++) {
        idx[0] = j;
        sift_down(score, idx, cnt, 0);
    }
    for (int end = cnt - 1; end > 0; end--) { /* worst goes to the end: best-first order */
        int t = idx[0];
        idx[0] = idx[end];
        idx[end] = t;
        sift_down(score, idx, end, 0);
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
    int vec = di_cpu_isa() == DI_ISA_AVX512;
    for (int m = m0; m < m1; m++) {
        const uint16_t *g = c->gate + (size_t)m * c->ld, *u = c->up + (size_t)m * c->ld;
        uint16_t *o = c->out + (size_t)m * c->ldo;
        if (vec) {
            di_swiglu_row_avx512(g, u, c->I, c->limit, c->rw ? c->rw + m : NULL, o);
            continue;
        }
        for (int i = 0; i < c->I; i++) {
            float gv = di_bf16_to_f32(g[i]), uv = di_bf16_to_f32(u[i]);
            if (c->limit > 0.0f) {
                uv = fminf(fmaxf(uv, -c->limit), c->limit);
                gv = fminf(gv, c->limit);
            }
            float h = gv / (1.0f + di_expf(-gv)) * uv;
            if (c->rw) h = c->rw[m] * h;
            o[i] = di_f32_to_bf16(h);
        }
    }
}

void di_cpu_swiglu(di_exec *x, int M, const uint16_t *gate, const uint16_t *up, size_t ld, int I, float limit,
                   const float *rw, uint16_t *out, size_t ldo) {
    swiglu_ctx c = {gate, up, ld, I, limit, rw, out, ldo};
    di_par_rows(x, M, 20.0 * I, swiglu_rows, &c);
}
