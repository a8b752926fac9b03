/*
 * dic_gemm_quant.cu — per-row activation quantisation of dic_gemm (ops.h
 * di_gemm, docs/architecture.md §3.2), bit for bit the CPU's (gemm.c
 * act_quant_row, quant_avx512.c): per block of `blk` values
 * amax = max(max|x|, 1e-4) (NaN ignored), s = pow2_ceil(amax * fp32(1/448)),
 * q = e4m3_RNE(clamp(x / s, ±448)). One warp per (row, block).
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_gemm_quant.cuh"

static __global__ void k_act_quant(const uint16_t *A, size_t lda, int M, int K, int blk, const int *rows,
                                   const int *count, uint8_t *q, size_t ldq, float *s, int *cnt, int ncnt) {
    DIC_PDL_ENTER();
    const int nsa = K / blk;
    long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (gid < ncnt) cnt[gid] = 0;
    long long warp = gid >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= (long long)M * nsa) return;
    int i = (int)(warp / nsa), b = (int)(warp % nsa);
    if (count && i >= *count) return;
    int r = rows ? rows[i] : i;
    const uint16_t *x = A + (size_t)r * lda + (size_t)b * blk;
    float amax = 0.0f;
    for (int j = lane; j < blk; j += 32) {
        float a = fabsf(dic_bf16_to_f32(x[j]));
        if (a > amax) amax = a;
    }
    for (int o = 16; o; o >>= 1) {
        float t = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
        if (t > amax) amax = t; /* max is exact in any order */
    }
    const float sc = dic_act_scale(amax);
    if (lane == 0) s[(size_t)i * nsa + b] = sc;
    uint8_t *qb = q + (size_t)i * ldq + (size_t)b * blk;
    for (int j = lane; j < blk; j += 32) {
        /* x / s: exact unless subnormal; RNE either way; then on the e4m3 grid, so the byte is exact */
        qb[j] = dic_f32_to_e4m3(dic_e4m3_clamp_round(__fdiv_rn(dic_bf16_to_f32(x[j]), sc)));
    }
}

extern "C" cudaError_t dic_gemm_quant(cudaStream_t st, int M, const uint16_t *A, size_t lda, int K, int blk,
                                      const int *rows, const int *count, uint8_t *q, float *s, int *cnt,
                                      int ncnt) {
    if (M <= 0) return cudaSuccess;
    if (blk <= 0 || K % blk) return cudaErrorInvalidValue;
    long long warps = (long long)M * (K / blk);
    long long blocks = (warps * 32 + 255) / 256, cb = ((long long)ncnt + 255) / 256;
    if (cb > blocks) blocks = cb;
    DIC_LAUNCH(k_act_quant, (unsigned)blocks, 256, 0, st, A, lda, M, K, blk, rows, count, q, dic_gemm_ldq(K), s, cnt, ncnt);
    DIC_LAUNCH_CHECK();
}

extern "C" size_t dic_gemm_scratch(int M, int N, int K) {
    if (M <= 0 || K <= 0 || N <= 0) return 0;
    /* partials for up to DIC_GEMM_SPLIT_MAXM rows: a buffer sized for M serves every smaller M too */
    int mp = M < DIC_GEMM_SPLIT_MAXM ? M : DIC_GEMM_SPLIT_MAXM;
    const size_t mma = dic_gemm_qbytes(M, K) + dic_gemm_sbytes(M, K) + dic_gemm_partbytes(mp, N, K);
    const size_t wg = M > DIC_GEMM_SPLIT_MAXM ? dic_gemm_f16_wg_scratch(M, K) : 0; /* dic_gemm_f16_wg.cu */
    return mma > wg ? mma : wg;
}
