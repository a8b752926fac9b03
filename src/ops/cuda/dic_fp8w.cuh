/*
 * dic_fp8w.cuh — FP8 storage, BF16 math (dic.h DIC_WFMT_FP8B): an e4m3 byte b
 * of a block with e8m0 scale byte s stands for the BF16 weight
 * bf16(e4m3(b) * 2^(s-127)), the value the host's load-time dequantisation
 * gives (numfmt.c di_dequant_fp8_block, then di_f32_to_bf16). The BF16 GEMM
 * kernels (dic_gemm_float.cu, dic_gemm_float_fast.cu) read the bytes and
 * compute with exactly these values, so their outputs are bitwise those of
 * the BF16 matrix.
 *
 * The fp32 product e4m3 * 2^(s-127) is exact for every s < 255 (at least
 * 2^-9 * 2^-127 = 2^-136 > 2^-149; at most 448 * 2^127, which overflows to
 * inf on both sides alike). It is a bf16 value (the rounding is the identity)
 * whenever it is zero or at least 2^-126 and finite: 10 <= s <= 246 for
 * every byte (the fast path: hardware e4m3 -> f16, f16 -> f32, one multiply).
 * Other scales take the host's sequence per element (bf16 subnormals round).
 * NaN bytes (0x7F, 0xFF) give a NaN weight on either path (outputs NaN, as
 * with the BF16 matrix).
 */
#ifndef DI_OPS_CUDA_DIC_FP8W_CUH
#define DI_OPS_CUDA_DIC_FP8W_CUH

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_f16_widen.cuh"

static __device__ __forceinline__ float fp8w_h2f(uint32_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)h));
    return f;
}

/* 1 when every e4m3 byte times 2^(s-127) is a bf16 value already */
static __device__ __forceinline__ bool fp8w_fast(uint32_t s) { return s - 10u <= 236u; }

/* One weight, any scale: the host's sequence. */
static __device__ __forceinline__ float fp8w_one(uint32_t b, uint32_t s) {
    return dic_round_bf16(__fmul_rn(dic_e4m3_to_f32((uint8_t)b), dic_e8m0_to_f32((uint8_t)s)));
}

/* 4 e4m3 bytes of x (low byte first, k increasing) with scale byte s -> 4 weights. */
static __device__ __forceinline__ void fp8w_x4(uint32_t x, uint32_t s, float *o) {
    if (fp8w_fast(s)) {
        const float sc = __uint_as_float(s << 23);
        const uint32_t p0 = cvt_e4m3x2(x & 0xFFFFu), p1 = cvt_e4m3x2(x >> 16);
        o[0] = __fmul_rn(fp8w_h2f(p0 & 0xFFFFu), sc);
        o[1] = __fmul_rn(fp8w_h2f(p0 >> 16), sc);
        o[2] = __fmul_rn(fp8w_h2f(p1 & 0xFFFFu), sc);
        o[3] = __fmul_rn(fp8w_h2f(p1 >> 16), sc);
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++) o[i] = fp8w_one((x >> (8 * i)) & 0xFFu, s);
    }
}

/* Two weights (floats holding bf16 values) -> a bf16 pair word (low half: lo). */
static __device__ __forceinline__ uint32_t fp8w_pack(float lo, float hi) {
    return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);
}

#endif
