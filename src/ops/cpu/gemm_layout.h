/*
 * gemm_layout.h — the packed weight layouts of the CPU GEMM (internal to
 * src/ops/cpu). Weights are repacked once at load into "panels" of 16 output
 * rows; the kernels keep one output row per 32-bit lane, so a K step is a
 * broadcast of the activation and one multiply-accumulate per 16 outputs,
 * and no horizontal reduction is ever needed. The byte order inside a 64-byte
 * chunk is chosen so that the AVX-512 decoders (table permutes + unpacks)
 * emit lanes in output-row order; the scalar and AVX2 kernels read the same
 * layout through the position functions below. Rows past N are zero.
 *
 * FP8 (e4m3): panel P holds rows 16P..16P+15; chunk c covers k = 4c..4c+3
 *   (k-pairs 2c, 2c+1) and is 64 bytes at P*(K/4)*64 + c*64. Byte
 *   16L + 8q + j (L < 4, q < 2, j < 8) = W[16P + (8L+j)/2][4c + 2q + (j&1)].
 *   Scales: fp32 [ceil(N/B)][K/B] (B = block, a multiple of 16).
 * FP4 (e2m1, one packed byte = one k-pair): chunk c covers k-pairs 4c..4c+3
 *   (k = 8c..8c+7), 64 bytes at P*(K/8)*64 + c*64. Byte 16L + 4q + j
 *   (L, q, j < 4) = packed byte (pair 4c+q) of row 16P + 4L + j.
 *   Scales: fp32 [npanels][K/32][16] (one per row and 32 inputs).
 * BF16: pair p of panel P is 32 halfwords at (P*(K/2) + p)*32; halfword
 *   2l + e = W[16P + l][2p + e].
 * F32: column k of panel P is 16 floats at (P*K + k)*16; float l = W[16P+l][k].
 */
#ifndef DI_OPS_CPU_GEMM_LAYOUT_H
#define DI_OPS_CPU_GEMM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define DI_PANEL 16

/* Byte offset inside an FP8 chunk of (lane l, k offset kk in 0..3). */
static inline int di_fp8_pos(int l, int kk) {
    int q = kk >> 1, e = kk & 1;
    int L = l >> 2, j = 2 * (l & 3) + e;
    return 16 * L + 8 * q + j;
}

/* Byte offset inside an FP4 chunk of (lane l, pair offset q in 0..3). */
static inline int di_fp4_pos(int l, int q) { return 16 * (l >> 2) + 4 * q + (l & 3); }

#endif
