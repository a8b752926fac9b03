/* attention.c — sparse attention with a per-head sink (§3.6): online softmax
 * over blocks of 64 gathered KV rows in the caller's index order, logits in
 * fp32, probabilities rounded to bf16 before P.V, fp32 denominator, the sink
 * added to the denominator only. Work is split over (row, group of heads);
 * a head's arithmetic never depends on the split. */
#include <math.h>

#include "io/numfmt.h"
#include "ops/cpu/attn_kern.h"
#include "ops/cpu/mathf.h"
#include "ops/cpu/vec.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

#define BLOCK 64
#define HGROUP DI_ATTN_HGROUP
#define MAX_HD 1024

typedef struct attn_ctx {
    const uint16_t *q;
    size_t ldq;
    int nheads, hd;
    const uint16_t *const *kv;
    size_t kv_stride;
    const int *n_idx;
    const float *sink;
    float scale;
    uint16_t *out;
    size_t ldo;
    int groups; /* head groups per row */
} attn_ctx;

typedef float (*dot_fn)(const uint16_t *, const uint16_t *, int);
typedef void (*axpy_fn)(float *, float, const uint16_t *, int);

static void attend(const attn_ctx *c, int m, int h0, int h1) {
    float o[HGROUP][MAX_HD];
    if (di_vec_use_avx512() && c->hd % 16 == 0) {
        di_attend_avx512(c->q + (size_t)m * c->ldq + (size_t)h0 * c->hd, h1 - h0, c->hd, c->kv + (size_t)m * c->kv_stride,
                         c->n_idx[m], c->sink + h0, c->scale, c->out + (size_t)m * c->ldo + (size_t)h0 * c->hd, &o[0][0]);
        return;
    }
    /* the ISA kernels of vec.h, chosen once per call (identical arithmetic) */
    dot_fn dot = di_vdot_bf16;
    axpy_fn axpy = di_vaxpy_bf16;
    float mx[HGROUP], den[HGROUP], logit[HGROUP][BLOCK + 1];
    int nh = h1 - h0, hd = c->hd;
    const uint16_t *const *kv = c->kv + (size_t)m * c->kv_stride;
    int n = c->n_idx[m];
    for (int h = 0; h < nh; h++) {
        mx[h] = -INFINITY;
        den[h] = 0.0f;
        for (int d = 0; d < hd; d++) o[h][d] = 0.0f;
    }
    for (int b0 = 0; b0 < n; b0 += BLOCK) {
        int bn = n - b0 < BLOCK ? n - b0 : BLOCK;
        for (int h = 0; h < nh; h++) {
            const uint16_t *qh = c->q + (size_t)m * c->ldq + (size_t)(h0 + h) * hd;
            float bmax = -INFINITY;
            for (int j = 0; j < bn; j++) {
                const uint16_t *k = kv[b0 + j];
                float l = k ? dot(qh, k, hd) * c->scale : -INFINITY;
                logit[h][j] = l;
                if (l > bmax) bmax = l;
            }
            float nmax = bmax > mx[h] ? bmax : mx[h];
            /* A block with no valid entry before any valid one leaves the
             * running max at -inf: keep the state (all-zero) unchanged. */
            float a = 1.0f, sum = 0.0f;
            if (nmax == -INFINITY) {
                for (int j = 0; j < bn; j++) logit[h][j] = 0.0f;
            } else {
                /* p_j = exp(l_j - M') and a = exp(M - M') in one vector call */
                for (int j = 0; j < bn; j++) logit[h][j] -= nmax;
                logit[h][bn] = mx[h] - nmax;
                di_expf_n(logit[h], logit[h], bn + 1);
                a = logit[h][bn];
                for (int j = 0; j < bn; j++) sum += logit[h][j];
            }
            den[h] = den[h] * a + sum;
            mx[h] = nmax;
            di_vscale(o[h], a, hd);
        }
        for (int j = 0; j < bn; j++) {
            const uint16_t *v = kv[b0 + j];
            if (!v) continue; /* a zero row adds nothing */
            for (int h = 0; h < nh; h++) {
                float p = di_round_bf16(logit[h][j]);
                if (p != 0.0f) axpy(o[h], p, v, hd);
            }
        }
    }
    for (int h = 0; h < nh; h++) {
        float d = den[h] + di_expf(c->sink[h0 + h] - mx[h]);
        uint16_t *y = c->out + (size_t)m * c->ldo + (size_t)(h0 + h) * hd;
        for (int i = 0; i < hd; i++) y[i] = di_f32_to_bf16(o[h][i] / d);
    }
}

typedef struct attn_par {
    attn_ctx *c;
    int M;
} attn_par;

static void attn_par_task(void *p, int t, int n) {
    attn_par *ap = p;
    attn_ctx *c = ap->c;
    size_t b, e;
    di_split_range((size_t)ap->M * (size_t)c->groups, t, n, &b, &e);
    for (size_t i = b; i < e; i++) {
        int m = (int)(i / (size_t)c->groups), g = (int)(i % (size_t)c->groups);
        int h0 = g * HGROUP, h1 = h0 + HGROUP < c->nheads ? h0 + HGROUP : c->nheads;
        attend(c, m, h0, h1);
    }
}

void di_cpu_sparse_attn(di_exec *x, int M, const uint16_t *q, size_t ldq, int nheads, int hd, const uint16_t *const *kv,
                        size_t kv_stride, const int *n_idx, const float *sink, float scale, uint16_t *out, size_t ldo) {
    if (M <= 0) return;
    attn_ctx c = {q, ldq, nheads, hd, kv, kv_stride, n_idx, sink, scale, out, ldo, (nheads + HGROUP - 1) / HGROUP};
    double work = 0;
    for (int m = 0; m < M; m++) work += 2.0 * n_idx[m] * nheads * hd;
    attn_par ap = {&c, M};
    di_threadpool *tp = x ? x->tp : NULL;
    di_threadpool_run_n(tp, di_chunks_for(tp, work, (double)(1 << 17), M * c.groups), attn_par_task, &ap);
}
