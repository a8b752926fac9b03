/*
 * engram_fp8.c — activation quantisation and the scalar FP8 GEMM of Engram's
 * private linear, plus ISA dispatch (see engram_fp8.h for the numerics).
 */
#include "model/engram_fp8.h"

#include <math.h>

#include "io/numfmt.h"
#include "util/cpu.h"

void di_engram_fp8_quant(const float *x, int64_t m, int k, float *xq, float *sx) {
    const int nb = k / DI_ENGRAM_QBLOCK;
    for (int64_t i = 0; i < m; i++)
        for (int b = 0; b < nb; b++) {
            const float *xb = x + i * k + b * DI_ENGRAM_QBLOCK;
            float amax = 1e-4f;
            for (int j = 0; j < DI_ENGRAM_QBLOCK; j++) amax = fmaxf(amax, fabsf(xb[j]));
            float s = di_pow2_ceil(amax * (1.0f / 448.0f));
            sx[i * nb + b] = s;
            for (int j = 0; j < DI_ENGRAM_QBLOCK; j++) {
                float v = xb[j] / s; /* exact: s is a power of two */
                v = v > 448.0f ? 448.0f : v < -448.0f ? -448.0f : v;
                xq[i * k + b * DI_ENGRAM_QBLOCK + j] = di_round_e4m3(v);
            }
        }
}

/* P for one 32-block in the fixed order of engram_fp8.h. */
static float block_dot(const float *x, const float *w) {
    float l[16], t8[8], t4[4], t2[2];
    for (int j = 0; j < 16; j++) l[j] = x[j] * w[j] + x[j + 16] * w[j + 16]; /* products are exact */
    for (int j = 0; j < 8; j++) t8[j] = l[j] + l[j + 8];
    for (int j = 0; j < 4; j++) t4[j] = t8[j] + t8[j + 4];
    for (int j = 0; j < 2; j++) t2[j] = t4[j] + t4[j + 2];
    return t2[0] + t2[1];
}

static void gemm_scalar(const float *xq, const float *sx, int64_t m, const uint8_t *w, const uint8_t *wscale, int k,
                        int j0, int j1, int n, float *y) {
    const int nb = k / DI_ENGRAM_QBLOCK;
    float wf[DI_ENGRAM_QBLOCK];
    for (int j = j0; j < j1; j++) {
        const uint8_t *srow = wscale + (int64_t)(j / DI_ENGRAM_QBLOCK) * nb;
        for (int64_t i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                for (int t = 0; t < DI_ENGRAM_QBLOCK; t++)
                    wf[t] = di_e4m3_to_f32(w[(int64_t)j * k + b * DI_ENGRAM_QBLOCK + t]);
                float p = block_dot(xq + i * k + b * DI_ENGRAM_QBLOCK, wf);
                acc = acc + p * (sx[i * nb + b] * di_e8m0_to_f32(srow[b]));
            }
            y[i * n + j] = acc;
        }
    }
}

void di_engram_fp8_gemm(const float *xq, const float *sx, int64_t m, const uint8_t *w, const uint8_t *wscale, int n,
                        int k, float *y) {
    const int groups = n / 16;
    const di_isa isa = di_cpu_isa();
    int done = 0;
    if (groups && isa == DI_ISA_AVX512) {
        di_engram_fp8_gemm16_avx512(xq, sx, m, w, wscale, n, k, 0, groups, y);
        done = groups * 16;
    } else if (groups && isa == DI_ISA_AVX2) {
        di_engram_fp8_gemm16_avx2(xq, sx, m, w, wscale, n, k, 0, groups, y);
        done = groups * 16;
    }
    gemm_scalar(xq, sx, m, w, wscale, k, done, n, n, y);
}
