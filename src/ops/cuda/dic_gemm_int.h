/*
 * dic_gemm_int.h — internal interface between the GEMM files (dic_gemm*.cu):
 * the activation-quantisation scratch layout, the weight-pointer table the
 * grouped launches pass by value, and the per-format launchers.
 */
#ifndef DI_OPS_CUDA_DIC_GEMM_INT_H
#define DI_OPS_CUDA_DIC_GEMM_INT_H

#include "ops/cuda/dic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most experts one grouped launch takes (V4.1-Flash has 384). */
#define DIC_GEMM_MAXE 512

/* Weight pointers per expert (a kernel parameter, ~8 KB: no device copy, so
 * the launch stays graph-capturable). */
typedef struct dic_gemm_wtab {
    const void *w[DIC_GEMM_MAXE];
    const uint8_t *s[DIC_GEMM_MAXE];
} dic_gemm_wtab;

/* Quantisation scratch: e4m3 rows of ldq = round_up(K, 16) bytes, then
 * (256-aligned) fp32 scales [rows][K / act_block]. */
static inline size_t dic_gemm_ldq(int K) { return ((size_t)K + 15) & ~(size_t)15; }
static inline size_t dic_gemm_qbytes(int M, int K) { return ((size_t)M * dic_gemm_ldq(K) + 255) & ~(size_t)255; }

/* Quantise rows i < M (i < *count when count != NULL) of A: source row
 * rows[i] (or i), into q + i*ldq and s + i*(K/blk). */
cudaError_t dic_gemm_quant(cudaStream_t st, int M, const uint16_t *A, size_t lda, int K, int blk, const int *rows,
                           const int *count, uint8_t *q, float *s);

/* FP8 / FP4 weights over quantised activations (dic_gemm_mma.cu). E = 1 and
 * off = rows = NULL: plain rows 0..M-1. Else grouped (dic.h). */
cudaError_t dic_gemm_q_launch(cudaStream_t st, int E, const dic_gemm_wtab *wt, int fmt, int N, int K, int wblock,
                              int act_block, int M, const int *off, const int *rows, const uint8_t *q,
                              const float *sa, float *C32, uint16_t *C16, size_t ldc);

/* The same with the kernel chosen: path 0 = the dispatch above, 1 = the
 * mma.sync tiles (any M), 2 = the wgmma kernel (FP8, plain rows, sm_90a:
 * cudaErrorInvalidValue where dic_gemm_wgmma_usable says no). For tests. */
cudaError_t dic_gemm_q_launch_path(cudaStream_t st, int E, const dic_gemm_wtab *wt, int fmt, int N, int K, int wblock,
                                   int act_block, int M, const int *off, const int *rows, const uint8_t *q,
                                   const float *sa, float *C32, uint16_t *C16, size_t ldc, int path);

/* FP8 prefill on wgmma + TMA (dic_gemm_wgmma.cu): usable on this device for
 * these shapes; the launch over quantised activations q (row stride ldq). */
int dic_gemm_wgmma_usable(int N, int K);
int dic_gemm_wgmma_maps(const void *q, size_t ldq, int M, const void *w, int N, int K); /* test diagnostics */
cudaError_t dic_gemm_q_wgmma_launch(cudaStream_t st, const void *w, const uint8_t *ws, int N, int K, int wblock,
                                    int act_block, int kb, int M, const uint8_t *q, size_t ldq, const float *sa,
                                    float *C32, uint16_t *C16, size_t ldc);

/* BF16 / F32 weights (dic_gemm_float.cu): the CPU's summation order, bitwise. */
cudaError_t dic_gemm_float_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                  float *C32, uint16_t *C16, size_t ldc);

#ifdef __cplusplus
}
#endif
#endif
