/* norm.c — RMSNorm (weight multiplied in fp32 before the bf16 cast, §3.4)
 * and the V4 per-head query normalisation computed in BF16 (§4.4 step 2). */
#include <math.h>

#include "io/numfmt.h"
#include "ops/cpu/vec.h"
#include "ops/ops.h"

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

void di_rmsnorm(di_exec *x, int M, const uint16_t *in, size_t ldx, const float *w, int D, float eps, uint16_t *out,
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

void di_head_rmsnorm_bf16(di_exec *x, int M, uint16_t *q, size_t ld, int nheads, int hd, float eps) {
    hnorm_ctx c = {q, ld, nheads, hd, eps};
    di_par_rows(x, M, 4.0 * nheads * hd, hnorm_rows, &c);
}
