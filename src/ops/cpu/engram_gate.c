/*
 * engram_gate.c — the Engram block's per-copy gating for a batch of tokens
 * (ops.h di_engram_gate_rows; architecture.md §5.8). The gate math and the
 * residual update run in fp32 and the result is rounded to BF16. Sums run in
 * a fixed order (8 interleaved partial sums, then a fixed tree), independent
 * of the batch. This file relies on ISO C's default of no floating-point
 * contraction (-std=c11).
 */
#include <math.h>

#include "io/numfmt.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

#define CLAMP_MIN 1e-6f /* the reference's clamp_value before the signed sqrt */

/* Σ a[i]·b[i] (b NULL: Σ a[i]²) with 8 interleaved partial sums and a fixed tree. */
static float sum8(const float *a, const float *b, const float *c, int n) {
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            float x = b ? a[i + j] * b[i + j] : a[i + j] * a[i + j];
            if (c) x = x * c[i + j];
            s[j] = s[j] + x;
        }
    for (; i < n; i++) {
        float x = b ? a[i] * b[i] : a[i] * a[i];
        if (c) x = x * c[i];
        s[i & 7] = s[i & 7] + x;
    }
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

/* One token: kv holds wkv's output rounded to BF16 (fp32 values); R is [hc][dim] BF16. */
static void gate_token(const float *qk, int dim, int hc, float eps, const float *kv, uint16_t *R, float *h,
                       float *gates) {
    const float inv_sqrt_dim = (float)pow((double)dim, -0.5);
    const float *value = kv + (int64_t)hc * dim;
    for (int k = 0; k < hc; k++) {
        const float *key = kv + (int64_t)k * dim;
        uint16_t *r = R + (int64_t)k * dim;
        for (int d = 0; d < dim; d++) h[d] = di_bf16_to_f32(r[d]);
        const float ms_h = sum8(h, NULL, NULL, dim) / (float)dim;
        const float ms_k = sum8(key, NULL, NULL, dim) / (float)dim;
        const float rstd = (1.0f / sqrtf(ms_h + eps)) * (1.0f / sqrtf(ms_k + eps));
        const float dot = sum8(h, qk + (int64_t)k * dim, key, dim) * rstd * inv_sqrt_dim;
        const float g = 1.0f / (1.0f + expf(-copysignf(sqrtf(fmaxf(fabsf(dot), CLAMP_MIN)), dot)));
        if (gates) gates[k] = g;
        for (int d = 0; d < dim; d++) r[d] = di_f32_to_bf16(h[d] + g * value[d]);
    }
}

void di_cpu_engram_gate_rows(di_exec *x, int M, const int64_t *rmap, const uint16_t *kv, size_t ldkv, uint16_t *R,
                             const float *qk, int dim, int hc, float eps, float *kvf, float *h, float *gates) {
    (void)x;
    for (int i = 0; i < M; i++) {
        int64_t t = rmap ? rmap[i] : i;
        di_bf16_to_f32_n(kv + (size_t)i * ldkv, (size_t)(hc + 1) * (size_t)dim, kvf);
        gate_token(qk, dim, hc, eps, kvf, R + t * hc * dim, h, gates ? gates + t * hc : NULL);
    }
}
