/*
 * dic_gemm_quant.cuh — the activation quantisation's rounding step, shared by
 * dic_gemm_quant.cu (the quantisation launch), dic_gemm_f16.cu (the decode
 * kernel that quantises its own k range) and dic_moe_decode.cu (the routed
 * experts at decode): the same function, the same bits.
 */
#ifndef DI_OPS_CUDA_DIC_GEMM_QUANT_CUH
#define DI_OPS_CUDA_DIC_GEMM_QUANT_CUH

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

#endif
