/*
 * gemm16_lab.h — the batch-invariant prefill GEMM candidate of issue #26 (gemm16.cu): FP8 weights on
 * wgmma m64nNk16 f16 that claims k_gemm_dec's bits (dic_gemm fast mode at M = 1) for every row at
 * every M. docs/kernels/gemm-prefill.md "Plan: one f16 family", docs/determinism.md §7.1.
 */
#ifndef DI_LAB_GEMM16_LAB_H
#define DI_LAB_GEMM16_LAB_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* k_gemm_f16 / k_gemm_dec's split-K rule for a plain launch (the product's dic_gemm_dec_splits,
 * dic_gemm_int.h): the number of splits and the k per split (a multiple of 128) from (N, K, SMs) only. */
int g16_splits(int N, int K, int num_sms, int *kper);

/* The widened activations: e4m3 rows q (dic_gemm_quant's output, row stride ldq) -> f16 rows of K
 * values (row stride K), each 32-k group permuted into k_gemm_f16's slot order (gemm16.cu header). */
cudaError_t g16_widen(cudaStream_t st, int M, int K, const uint8_t *q, size_t ldq, uint16_t *x16);

/* C = the FP8 product over x16 (g16_widen's rows) and sa (dic_gemm_quant's scales [M][K / act_block]);
 * W e4m3 [N][K], ws e8m0 [ceil(N / wblock)][K / wblock]. Exactly one of C32 / C16. tn: the token tile
 * (64 or 128; 0 = 128). num_sms: the SM count (the split rule and the persistent grid). Refuses
 * (cudaErrorInvalidValue) K % 128, wblock < 128, act_block not a power of two in [32, 128]. */
cudaError_t g16_gemm(cudaStream_t st, int num_sms, const void *W, const uint8_t *ws, int N, int K, int wblock,
                     int act_block, int M, const uint16_t *x16, const float *sa, float *C32, uint16_t *C16,
                     size_t ldc, int tn);

/* Bench helper over n fp32 words (device): nd_dev[0] = how many differ between a and b, nd_dev[1] = the
 * largest difference in fp32 ulp (ordered bit patterns; a NaN or an unwritten 0xFFFFFFFF shows as huge). */
cudaError_t g16_count_diff(cudaStream_t st, const uint32_t *a, const uint32_t *b, size_t n,
                           unsigned long long *nd_dev);

#ifdef __cplusplus
}
#endif
#endif
