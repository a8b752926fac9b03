/* mhc.c — manifold-constrained hyper-connection arithmetic (§4.2) in fp32,
 * following the reference kernel's operation order: Sinkhorn split of the
 * mixes, the flatten-RMS scaling of the mixes, collapse (pre) and expand
 * (post + transposed comb). hc = 4. */
#include <math.h>

#include "io/numfmt.h"
#include "ops/cpu/elem.h"
#include "ops/cpu/mathf.h"
#include "ops/cpu/norm_kern.h"
#include "ops/cpu/vec.h"
#include "util/cpu.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

#define HC 4

void di_hc_sinkhorn(const float *mixes, const float *scale3, const float *base, int iters, float eps, float *pre,
                    float *post, float *comb) {
    /* the 24 exponentials first (one vector call): -z of the 8 sigmoids, then c - rowmax */
    float arg[24], ex[24];
    for (int j = 0; j < HC; j++) arg[j] = -(mixes[j] * scale3[0] + base[j]);
    for (int j = 0; j < HC; j++) arg[j + HC] = -(mixes[j + HC] * scale3[1] + base[j + HC]);
    float c[HC][HC];
    for (int j = 0; j < HC; j++)
        for (int k = 0; k < HC; k++) c[j][k] = mixes[j * HC + k + 2 * HC] * scale3[2] + base[j * HC + k + 2 * HC];
    for (int j = 0; j < HC; j++) {
        float mx = c[j][0];
        for (int k = 1; k < HC; k++) mx = fmaxf(mx, c[j][k]);
        for (int k = 0; k < HC; k++) arg[2 * HC + j * HC + k] = c[j][k] - mx;
    }
    di_expf_n(arg, ex, 24);
    for (int j = 0; j < HC; j++) pre[j] = 1.0f / (1.0f + ex[j]) + eps;
    for (int j = 0; j < HC; j++) post[j] = 2.0f * (1.0f / (1.0f + ex[j + HC]));
    /* row softmax + eps */
    for (int j = 0; j < HC; j++) {
        float s = 0.0f;
        for (int k = 0; k < HC; k++) {
            c[j][k] = ex[2 * HC + j * HC + k];
            s += c[j][k];
        }
        for (int k = 0; k < HC; k++) c[j][k] = c[j][k] / s + eps;
    }
    /* column normalise */
    for (int it = 0; it < iters; it++) {
        if (it > 0) {
            for (int j = 0; j < HC; j++) {
                float s = 0.0f;
                for (int k = 0; k < HC; k++) s += c[j][k];
                for (int k = 0; k < HC; k++) c[j][k] = c[j][k] / (s + eps);
            }
        }
        for (int k = 0; k < HC; k++) {
            float s = 0.0f;
            for (int j = 0; j < HC; j++) s += c[j][k];
            for (int j = 0; j < HC; j++) c[j][k] = c[j][k] / (s + eps);
        }
    }
    for (int j = 0; j < HC; j++)
        for (int k = 0; k < HC; k++) comb[j * HC + k] = c[j][k];
}

typedef struct sk_ctx {
    const float *mixes, *scale3, *base;
    int iters;
    float eps;
    float *pre, *post, *comb;
} sk_ctx;

/* Tokens in groups of 16 (one per lane); a group of fewer than 3 runs the
 * scalar code (a vector division costs about two scalar ones here). */
static void sk_rows(void *p, int m0, int m1) {
    sk_ctx *c = p;
    int vec = di_cpu_isa() == DI_ISA_AVX512;
    for (int g0 = m0; g0 < m1; g0 += 16) {
        int n = m1 - g0 < 16 ? m1 - g0 : 16;
        if (vec && n >= 3) {
            di_hc_sinkhorn16_avx512(c->mixes + (size_t)g0 * 24, n, c->scale3, c->base, c->iters, c->eps,
                                    c->pre + (size_t)g0 * 4, c->post + (size_t)g0 * 4, c->comb + (size_t)g0 * 16);
            continue;
        }
        for (int m = g0; m < g0 + n; m++)
            di_hc_sinkhorn(c->mixes + (size_t)m * 24, c->scale3, c->base, c->iters, c->eps, c->pre + (size_t)m * 4,
                           c->post + (size_t)m * 4, c->comb + (size_t)m * 16);
    }
}

void di_cpu_hc_sinkhorn_rows(di_exec *x, int M, const float *mixes, const float *scale3, const float *base, int iters,
                             float eps, float *pre, float *post, float *comb) {
    sk_ctx c = {mixes, scale3, base, iters, eps, pre, post, comb};
    di_par_rows(x, M, 400.0 * iters, sk_rows, &c);
}

typedef struct mix_ctx {
    const uint16_t *R;
    size_t ldr;
    int hcd;
    float eps;
    const float *in;
    int nmix;
    float *out;
} mix_ctx;

static void mix_rows(void *p, int m0, int m1) {
    mix_ctx *c = p;
    int vec = di_cpu_isa() == DI_ISA_AVX512 && c->hcd % 16 == 0;
    for (int g0 = m0; g0 < m1; g0 += 16) {
        int n = m1 - g0 < 16 ? m1 - g0 : 16;
        double ss[16];
        if (vec) { /* 16 rows at a time, one per lane (same sums) */
            const uint16_t *rows[16];
            for (int l = 0; l < 16; l++) rows[l] = c->R + (size_t)(g0 + (l < n ? l : n - 1)) * c->ldr;
            di_sumsq16_avx512(rows, c->hcd, ss);
        } else {
            for (int l = 0; l < n; l++) {
                const uint16_t *r = c->R + (size_t)(g0 + l) * c->ldr;
                ss[l] = 0;
                for (int i = 0; i < c->hcd; i++) {
                    double v = di_bf16_to_f32(r[i]);
                    ss[l] += v * v;
                }
            }
        }
        for (int l = 0; l < n; l++) {
            int m = g0 + l;
            float rs = 1.0f / sqrtf((float)(ss[l] / c->hcd) + c->eps);
            for (int j = 0; j < c->nmix; j++) c->out[(size_t)m * c->nmix + j] = c->in[(size_t)m * c->nmix + j] * rs;
        }
    }
}

void di_cpu_hc_scale_mixes(di_exec *x, int M, const uint16_t *R, size_t ldr, int hcd, float eps, const float *mixes_in,
                           int nmix, float *mixes_out) {
    mix_ctx c = {R, ldr, hcd, eps, mixes_in, nmix, mixes_out};
    di_par_rows(x, M, 2.0 * hcd, mix_rows, &c);
}

typedef struct coll_ctx {
    const float *pre;
    const uint16_t *R;
    size_t ldr;
    int d;
    uint16_t *y;
    size_t ldy;
} coll_ctx;

static void coll_rows(void *p, int m0, int m1) {
    coll_ctx *c = p;
    int vec = di_cpu_isa() == DI_ISA_AVX512 && c->d % 16 == 0;
    for (int m = m0; m < m1; m++) {
        const float *pr = c->pre + (size_t)m * HC;
        const uint16_t *r = c->R + (size_t)m * c->ldr;
        uint16_t *y = c->y + (size_t)m * c->ldy;
        if (vec) {
            di_hc_collapse_row_avx512(pr, r, c->d, y);
            continue;
        }
        for (int i = 0; i < c->d; i++) {
            float s = pr[0] * di_bf16_to_f32(r[i]);
            for (int k = 1; k < HC; k++) s += pr[k] * di_bf16_to_f32(r[(size_t)k * c->d + i]);
            y[i] = di_f32_to_bf16(s);
        }
    }
}

void di_cpu_hc_collapse(di_exec *x, int M, const float *pre, const uint16_t *R, size_t ldr, int d, uint16_t *y,
                        size_t ldy) {
    coll_ctx c = {pre, R, ldr, d, y, ldy};
    di_par_rows(x, M, 8.0 * d, coll_rows, &c);
}

typedef struct exp_ctx {
    const float *post, *comb;
    const uint16_t *f;
    size_t ldf;
    const uint16_t *R;
    uint16_t *Rout;
    size_t ldr;
    int d;
} exp_ctx;

static void exp_rows(void *p, int m0, int m1) {
    exp_ctx *c = p;
    int vec = di_cpu_isa() == DI_ISA_AVX512 && c->d % 16 == 0;
    for (int m = m0; m < m1; m++) {
        const float *po = c->post + (size_t)m * HC, *cb = c->comb + (size_t)m * HC * HC;
        const uint16_t *f = c->f + (size_t)m * c->ldf;
        const uint16_t *r = c->R + (size_t)m * c->ldr;
        uint16_t *o = c->Rout + (size_t)m * c->ldr;
        if (vec) {
            di_hc_expand_row_avx512(po, cb, f, r, o, c->d);
            continue;
        }
        for (int i = 0; i < c->d; i++) {
            float rv[HC], out[HC];
            for (int j = 0; j < HC; j++) rv[j] = di_bf16_to_f32(r[(size_t)j * c->d + i]);
            float fv = di_bf16_to_f32(f[i]);
            for (int k = 0; k < HC; k++) {
                float s = cb[0 * HC + k] * rv[0];
                for (int j = 1; j < HC; j++) s += cb[j * HC + k] * rv[j];
                out[k] = po[k] * fv + s;
            }
            for (int k = 0; k < HC; k++) o[(size_t)k * c->d + i] = di_f32_to_bf16(out[k]);
        }
    }
}

void di_cpu_hc_expand(di_exec *x, int M, const float *post, const float *comb, const uint16_t *f, size_t ldf,
                      const uint16_t *R, uint16_t *Rout, size_t ldr, int d) {
    exp_ctx c = {post, comb, f, ldf, R, Rout, ldr, d};
    di_par_rows(x, M, 24.0 * d, exp_rows, &c);
}
