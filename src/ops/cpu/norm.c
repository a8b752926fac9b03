/* norm.c — RMSNorm (weight multiplied in fp32 before the bf16 cast, §3.4)
 * and the V4 per-head query normalisation computed in BF16 (§4.4 step 2). */
#include <math.h>

#include "io/numfmt.h"
#include "ops/cpu/norm_kern.h"
#include "ops/cpu/vec.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "util/cpu.h"

typedef struct norm_ctx {
    const uint16_t *in;
    size_t ldx, ldy;
    const float *w;
    int D;
    float eps;
    uint16_t *out;
} norm_ctx;

static void norm_rows(void *p, int m0, int m1) {
    norm_ctx *c = p;
    if (di_cpu_isa() == DI_ISA_AVX512 && c->D % 16 == 0) {
        /* 16 rows at a time: the sums across rows, the output along each row */
        for (int g0 = m0; g0 < m1; g0 += 16) {
            int n = m1 - g0 < 16 ? m1 - g0 : 16;
            const uint16_t *rows[16];
            double ss[16];
            for (int l = 0; l < 16; l++) rows[l] = c->in + (size_t)(g0 + (l < n ? l : n - 1)) * c->ldx;
            di_sumsq16_avx512(rows, c->D, ss);
            for (int l = 0; l < n; l++) {
                float r = 1.0f / sqrtf((float)(ss[l] / c->D) + c->eps);
                di_rmsnorm_out_avx512(rows[l], c->w, c->D, r, c->out + (size_t)(g0 + l) * c->ldy);
            }
        }
        return;
    }
    for (int m = m0; m < m1; m++) {
        const uint16_t *x = c->in + (size_t)m * c->ldx;
        uint16_t *y = c->out + (size_t)m * c->ldy;
        double ss = 0;
        for (int i = 0; i < c->D; i++) {
            double v = di_bf16_to_f32(x[i]);
            ss += v * v;
        }
        float var = (float)(ss / c->D);
        float r = 1.0f / sqrtf(var + c->eps);
        for (int i = 0; i < c->D; i++) {
            float v = di_bf16_to_f32(x[i]) * r;
            if (c->w) v = c->w[i] * v;
            y[i] = di_f32_to_bf16(v);
        }
    }
}

void di_cpu_rmsnorm(di_exec *x, int M, const uint16_t *in, size_t ldx, const float *w, int D, float eps, uint16_t *out,
                    size_t ldy) {
    norm_ctx c = {in, ldx, ldy, w, D, eps, out};
    di_par_rows(x, M, 4.0 * D, norm_rows, &c);
}

typedef struct hnorm_ctx {
    uint16_t *q;
    size_t ld;
    int nheads, hd;
    float eps;
} hnorm_ctx;

static void hnorm_rows(void *p, int m0, int m1) {
    hnorm_ctx *c = p;
    if (di_cpu_isa() == DI_ISA_AVX512 && c->hd % 16 == 0) {
        /* 16 (row, head) vectors at a time, one per lane */
        int total = (m1 - m0) * c->nheads;
        for (int g0 = 0; g0 < total; g0 += 16) {
            int n = total - g0 < 16 ? total - g0 : 16;
            uint16_t *seqs[16];
            for (int l = 0; l < 16; l++) {
                int s = g0 + (l < n ? l : n - 1);
                seqs[l] = c->q + (size_t)(m0 + s / c->nheads) * c->ld + (size_t)(s % c->nheads) * c->hd;
            }
            di_head_rmsnorm16_avx512(seqs, n, c->hd, c->eps);
        }
        return;
    }
    for (int m = m0; m < m1; m++)
        for (int h = 0; h < c->nheads; h++) {
            uint16_t *q = c->q + (size_t)m * c->ld + (size_t)h * c->hd;
            float s = 0.0f;
            for (int i = 0; i < c->hd; i++) {
                float v = di_bf16_to_f32(q[i]);
                s += di_round_bf16(v * v);
            }
            float mean = di_round_bf16(s / (float)c->hd);
            float t = di_round_bf16(mean + c->eps);
            float r = di_round_bf16(1.0f / sqrtf(t));
            for (int i = 0; i < c->hd; i++) q[i] = di_f32_to_bf16(di_bf16_to_f32(q[i]) * r);
        }
}

void di_cpu_head_rmsnorm_bf16(di_exec *x, int M, uint16_t *q, size_t ld, int nheads, int hd, float eps) {
    hnorm_ctx c = {q, ld, nheads, hd, eps};
    di_par_rows(x, M, 4.0 * nheads * hd, hnorm_rows, &c);
}
