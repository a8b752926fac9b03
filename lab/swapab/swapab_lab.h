/*
 * swapab_lab.h — the swap-AB wgmma e4m3 decode GEMV draft (swapab_dec.cu) as swapab_bench.c calls it.
 */
#ifndef DI_LAB_SWAPAB_LAB_H
#define DI_LAB_SWAPAB_LAB_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C32[m][n] (row stride ldc) for m < M <= 64 over FP8 weights w [N][K] (e8m0 scales ws [ceil(N/128)][nwb =
 * K / 128]) and the activations dic_gemm_quant made: q (e4m3, row stride ldq), sa [M][nsa = K / 128].
 * act_block = wblock = 128 only (v3's case). kg = 0: one chain over K (v3's bits); kg = 512: K groups on
 * separate CTAs into part [K / kg][M][N] (device), added in order by a second launch (swapab_dec.cu).
 * cudaErrorNotSupported off sm_90. */
typedef struct sab_args {
    int N, K, M, act_block, wblock, nwb, nsa;
    const uint8_t *w, *ws, *q;
    size_t ldq;
    const float *sa;
    float *C32;
    size_t ldc;
    int kg;
    float *part;
} sab_args;
cudaError_t lab_sab_launch(cudaStream_t st, const sab_args *a);

#ifdef __cplusplus
}
#endif
#endif
