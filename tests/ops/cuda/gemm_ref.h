/*
 * gemm_ref.h — the GPU GEMM tests' reference pieces (shared by gtest_gemm.c
 * and gtest_gemm_f16.c): the reference's activation quantisation per block
 * (gemm.c act_quant_row / round_e4m3, kept here as the formula) and the
 * activation generator.
 */
#ifndef DI_TESTS_GPU_GEMM_REF_H
#define DI_TESTS_GPU_GEMM_REF_H

#include <math.h>
#include <stdint.h>

#include "ops/cuda/gpu_util.h"
#include "io/numfmt.h"

/* gemm.c act_quant_row / round_e4m3, kept here as the reference formula. */
static inline float ref_round_e4m3(float v) {
    float a = fabsf(v), r;
    if (a < 0x1p-6f) {
        r = nearbyintf(a * 512.0f) * (1.0f / 512.0f);
    } else {
        uint32_t u = di_f32_bits(a);
        u += 0x7FFFFu + ((u >> 20) & 1u);
        u &= 0xFFF00000u;
        r = di_bits_f32(u);
    }
    return copysignf(r, v);
}
static inline void ref_quant_row(const uint16_t *x, int K, int blk, float *q, float *s) {
    const float inv448 = (float)(1.0 / 448.0);
    for (int b = 0; b < K / blk; b++) {
        const uint16_t *xb = x + (size_t)b * blk;
        float amax = 0.0f;
        for (int i = 0; i < blk; i++) {
            float a = fabsf(di_bf16_to_f32(xb[i]));
            if (a > amax) amax = a;
        }
        if (!(amax >= 1e-4f)) amax = 1e-4f;
        float sc = di_pow2_ceil(amax * inv448);
        s[b] = sc;
        for (int i = 0; i < blk; i++) {
            float v = di_bf16_to_f32(xb[i]) / sc;
            if (v > 448.0f) v = 448.0f;
            if (v < -448.0f) v = -448.0f;
            q[(size_t)b * blk + i] = ref_round_e4m3(v);
        }
    }
}

/* Activations with magnitudes spread over 2^-6 .. 2^4 (per value) and a few
 * all-tiny blocks (the 1e-4 floor). */
static inline void fill_act(uint16_t *A, int M, int K, size_t lda, int blk, uint64_t *s) {
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            float v = gt_rand_unit(s) * ldexpf(1.0f, (int)(gt_rand_u64(s) % 11) - 6);
            if ((k / blk) % 23 == 7 && m % 2) v *= 1e-6f;
            A[(size_t)m * lda + k] = di_f32_to_bf16(v);
        }
}

#endif
