/*
 * dic_gemm_quant.cuh — the activation quantisation's rounding step, shared by
 * dic_gemm_quant.cu (the quantisation launch), dic_gemm_f16.cu (the decode
 * kernel that quantises its own k range) and dic_moe_decode.cu (the routed
 * experts at decode): the same function, the same bits.
 */
#ifndef DI_OPS_CUDA_DIC_GEMM_QUANT_CUH
#define DI_OPS_CUDA_DIC_GEMM_QUANT_CUH

#include <cuda_fp16.h>

/* gemm.c round_e4m3: RNE to the e4m3 grid of |v| <= 448, as fp32. */
static __device__ __forceinline__ float round_e4m3(float v) {
    float a = fabsf(v), r;
    if (a < 0.015625f) {
        r = __fmul_rn(rintf(__fmul_rn(a, 512.0f)), 0.001953125f); /* m * 2^-9 */
    } else {
        uint32_t u = __float_as_uint(a);
        u += 0x7FFFFu + ((u >> 20) & 1u);
        u &= 0xFFF00000u;
        r = __uint_as_float(u);
    }
    return copysignf(r, v);
}

/* gemm.c's act-block scale from the block's largest |x|: max(amax, 1e-4) / 448 rounded up to a power
 * of two (so 1 / s is exact and x * (1 / s) is the correctly rounded x / s). */
static __device__ __forceinline__ float dic_act_scale(float amax) {
    if (!(amax >= 1e-4f)) amax = 1e-4f;
    return dic_pow2_ceil(__fmul_rn(amax, (float)(1.0 / 448.0)));
}

/* y = x / s clamped to +-448 and rounded to the e4m3 grid (round_e4m3), as an fp32. */
static __device__ __forceinline__ float dic_e4m3_clamp_round(float y) {
    if (y > 448.0f) y = 448.0f;
    if (y < -448.0f) y = -448.0f;
    return round_e4m3(y);
}

/* The same value as the f16 bit pattern the HMMA kernels take (exact: e4m3 values are f16 values). */
static __device__ __forceinline__ uint32_t dic_e4m3_f16(float y) {
    return __half_as_ushort(__float2half_rn(dic_e4m3_clamp_round(y)));
}

/* dic_e4m3_f16 of two values as f16x2 (lo in the low half) by cvt.rn.satfinite.e4m3x2.f32 (RNE with
 * subnormals, saturating to +-448, infinities included: the same value as the clamp + round_e4m3 above
 * for every non-NaN input; a NaN stays a NaN) and cvt.rn.f16x2.e4m3x2 (exact): 2 instructions per
 * value pair instead of ~20 per value (sm_89 and later). */
static __device__ __forceinline__ uint32_t dic_e4m3x2_f16x2(float lo, float hi) {
    unsigned short b;
    uint32_t r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(b) : "f"(hi), "f"(lo));
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(b));
    return r;
}

#endif
