/* elem_model.c — small per-row helpers of the model forward (ops.h
 * di_scale_bf16_f32, di_hc_pre_onehot, di_hc_head_pre, di_hc_mean,
 * di_add_bcast_bf16, di_engram_gather_rows). One IEEE operation per step, so
 * every backend can give the same bits. */
#include <math.h>

#include "io/numfmt.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

void di_cpu_scale_bf16_f32(di_exec *x, float *v, size_t n, float scale) {
    (void)x;
    for (size_t i = 0; i < n; i++) v[i] = di_round_bf16(di_round_bf16(v[i]) * scale);
}

void di_cpu_hc_pre_onehot(di_exec *x, int M, float *pre) {
    (void)x;
    for (int m = 0; m < M; m++) {
        float *p = pre + (size_t)m * 4;
        p[0] = 1.0f;
        p[1] = p[2] = p[3] = 0.0f;
    }
}

void di_cpu_hc_head_pre(di_exec *x, int M, const float *mixes, int hc, float scale0, const float *base, float eps,
                        float *pre) {
    (void)x;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < hc; k++) {
            float z = mixes[(size_t)m * hc + k] * scale0 + base[k];
            pre[(size_t)m * 4 + k] = 1.0f / (1.0f + expf(-z)) + eps;
        }
}

void di_cpu_hc_mean(di_exec *x, int M, const uint16_t *R, int hc, int d, uint16_t *out, size_t ldo) {
    (void)x;
    for (int i = 0; i < M; i++) {
        const uint16_t *r = R + (size_t)i * hc * d;
        uint16_t *o = out + (size_t)i * ldo;
        for (int j = 0; j < d; j++) {
            float s = di_bf16_to_f32(r[j]);
            for (int k = 1; k < hc; k++) s += di_bf16_to_f32(r[(size_t)k * d + j]);
            o[j] = di_f32_to_bf16(s / (float)hc);
        }
    }
}

void di_cpu_add_bcast_bf16(di_exec *x, int M, const uint16_t *e0, int hc, int d, uint16_t *R) {
    (void)x;
    for (int i = 0; i < M; i++)
        for (int k = 0; k < hc; k++) {
            uint16_t *r = R + ((size_t)i * hc + k) * d;
            const uint16_t *e = e0 + (size_t)i * d;
            for (int j = 0; j < d; j++) r[j] = di_f32_to_bf16(di_bf16_to_f32(e[j]) + di_bf16_to_f32(r[j]));
        }
}

void di_cpu_engram_gather_rows(di_exec *x, int M, const int64_t *ids, int64_t ids_stride, int ncols,
                               const uint8_t *table, const uint8_t *scale, int hd, uint16_t *out) {
    (void)x;
    enum { SB = 32 };
    const int nsb = hd / SB;
    float v[SB];
    for (int m = 0; m < M; m++)
        for (int c = 0; c < ncols; c++) {
            int64_t id = ids[(int64_t)m * ids_stride + c];
            const uint8_t *row = table + id * hd;
            const uint8_t *sc = scale + id * nsb;
            uint16_t *o = out + ((size_t)m * ncols + (size_t)c) * (size_t)hd;
            for (int b = 0; b < nsb; b++) {
                const float s = di_e8m0_to_f32(sc[b]);
                di_e4m3_to_f32_n(row + b * SB, SB, v);
                for (int j = 0; j < SB; j++) o[b * SB + j] = di_f32_to_bf16(v[j] * s);
            }
        }
}

void di_cpu_add_bf16_f32_x(di_exec *x, float *y, const uint16_t *v, size_t n) {
    (void)x;
    di_add_bf16_f32(y, v, n);
}

void di_cpu_add_f32_x(di_exec *x, float *out, const float *a, const float *b, size_t n) {
    (void)x;
    di_add_f32(out, a, b, n);
}

void di_cpu_f32_to_bf16_x(di_exec *x, const float *in, uint16_t *y, size_t n) {
    (void)x;
    di_f32_to_bf16_n(in, y, n);
}
