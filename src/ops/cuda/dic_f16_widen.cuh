/*
 * dic_f16_widen.cuh — e4m3 and e2m1 weights widened to f16 pairs for the
 * HMMA m16n8k16 f16 -> fp32 decode kernels (dic_gemm_f16.cu,
 * dic_moe_decode.cu): both conversions are exact.
 */
#ifndef DI_OPS_CUDA_DIC_F16_WIDEN_CUH
#define DI_OPS_CUDA_DIC_F16_WIDEN_CUH

#include <stdint.h>

/* Two e4m3 bytes (low byte first) -> f16x2 (hardware conversion). */
static __device__ __forceinline__ uint32_t cvt_e4m3x2(uint32_t v16) {
    uint32_t r;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"((unsigned short)v16));
    return r;
}

/* 8 e2m1 nibbles (element j in bits 4j..4j+3) -> f16x2 pairs (j, j + 4) (low half: element j), each
 * value times 2^-14, exact: magnitude bits to f16 bits 9..11, sign to bit 15. */
static __device__ __forceinline__ void e2m1x8_f16(uint32_t w, uint32_t p[4]) {
    const uint32_t M = 0x0E000E00u, SG = 0x80008000u;
    p[0] = ((w << 9) & M) | ((w << 12) & SG);
    p[1] = ((w << 5) & M) | ((w << 8) & SG);
    p[2] = ((w << 1) & M) | ((w << 4) & SG);
    p[3] = ((w >> 3) & M) | (w & SG);
}

#endif
