/*
 * engram_fp8.h — a small FP8 linear private to Engram (engram.wkv), working
 * directly on the checkpoint bytes (no repacking, so the 157 MB matrix is
 * used in place from the mmap). It is meant to be replaced by the general
 * FP8 GEMM of src/ops/ once that exists; nothing else should call it.
 *
 * Numerics (architecture.md §3.2, V4.1): each activation row is quantised in
 * blocks of 32 along K: amax = max(max|x|, 1e-4), s = 2^ceil(log2(amax ·
 * fp32(1/448))) from the fp32 bits, q = e4m3_RNE(clamp(x / s, ±448)). The
 * weight is e4m3 with e8m0 scales per 32×32 tile. Per K-block the partial sum
 * P = Σ q·w is formed in fp32 (products of e4m3 values are exact), then
 * y += P · (s_x · s_w), K-blocks in increasing order. The summation order
 * inside a block is fixed (identical on the scalar, AVX2 and AVX-512 paths,
 * so results are bit-identical and batch-invariant):
 *   l[j] = p[j] + p[j+16] (j < 16);  t8[j] = l[j] + l[j+8];
 *   t4[j] = t8[j] + t8[j+4];  t2[j] = t4[j] + t4[j+2];  P = t2[0] + t2[1].
 */
#ifndef DI_MODEL_ENGRAM_FP8_H
#define DI_MODEL_ENGRAM_FP8_H

#include <stdint.h>

#define DI_ENGRAM_QBLOCK 32 /* activation block and weight tile of V4.1 */

/* Quantise m rows of k fp32 values (k % 32 == 0): xq[m][k] receives the
 * e4m3 values (as exact fp32), sx[m][k/32] the power-of-two block scales. */
void di_engram_fp8_quant(const float *x, int64_t m, int k, float *xq, float *sx);

/* y[i][j] = Σ_k x[i][k] · W[j][k] for i < m, j < n (fp32 out, row stride n),
 * from quantised activations (di_engram_fp8_quant). W: e4m3 bytes [n][k];
 * wscale: e8m0 bytes [ceil(n/32)][k/32]. */
void di_engram_fp8_gemm(const float *xq, const float *sx, int64_t m, const uint8_t *w, const uint8_t *wscale, int n,
                        int k, float *y);

/* Per-ISA kernels over output rows [j0, j0 + 16·groups) (j0 % 16 == 0), for
 * the rows of x in [0, m). Internal to engram_fp8*.c. */
void di_engram_fp8_gemm16_avx2(const float *xq, const float *sx, int64_t m, const uint8_t *w, const uint8_t *wscale,
                               int n, int k, int j0, int groups, float *y);
void di_engram_fp8_gemm16_avx512(const float *xq, const float *sx, int64_t m, const uint8_t *w,
                                 const uint8_t *wscale, int n, int k, int j0, int groups, float *y);

#endif
