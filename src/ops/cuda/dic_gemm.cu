/*
 * dic_gemm.cu — dic_gemm and dic_gemm_grouped (dic.h): argument checks,
 * activation quantisation into the context's scratch, then the per-format
 * kernels (dic_gemm_mma.cu: FP8 / FP4; dic_gemm_float.cu: BF16 / F32).
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"

static int misaligned(const void *p) { return ((uintptr_t)p & 15) != 0; }

/* The decode kernel in its configured mode (dic_gemm_dec_mode): 0 picks 3 or 1 by
 * dic_gemm_dec_fused; 3 quantises in the kernel, 1 after the quantisation launch (into q / s). cudaErrorNotSupported: not applicable, nothing launched. */
static cudaError_t dec(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int nw, const dic_wmat *W,
                       int act_block, float *const *C32, uint16_t *const *C16, const size_t *ldc, uint8_t *q, float *s) {
    int mode = dic_gemm_dec_status();
    if (mode != 0 && mode != 1 && mode != 3) return cudaErrorNotSupported;
    if (!dic_gemm_dec_fits(W[0].n, W[0].k, c->num_sms)) return cudaErrorNotSupported; /* before any launch */
    if (mode == 0) mode = dic_gemm_dec_fused(M, W[0].n, W[0].k, act_block, c->num_sms) ? 3 : 1;
    if (mode == 1) { /* (bench) a refusal after this launch only costs the fallback's own quantisation */
        cudaError_t e = dic_gemm_quant(c->stream, M, A, lda, W[0].k, act_block, NULL, NULL, q, s, NULL, 0);
        if (e != cudaSuccess) return e;
    }
    return dic_gemm_dec_launch(c->stream, c->num_sms, nw, W, act_block, M, A, lda, mode == 1 ? q : NULL, s, C32, C16, ldc);
}

extern "C" cudaError_t dic_gemm(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                int act_block, float *C32, uint16_t *C16, size_t ldc) {
    if (M <= 0) return cudaSuccess;
    if (!W || (!C32) == (!C16)) return cudaErrorInvalidValue;
    if (W->fmt == 0 || W->fmt == 1 || W->fmt == DIC_WFMT_FP8B) /* FP8B: BF16 math (dic.h) */
        return c->batch_invariant ? dic_gemm_float_inv_launch(c->stream, M, A, lda, W, C32, C16, ldc)
                                  : dic_gemm_float_fast_launch(c->stream, M, A, lda, W, C32, C16, ldc, DIC_GEMMF_PATH_AUTO);
    if (W->fmt != 2 && W->fmt != 3) return cudaErrorInvalidValue;
    const int K = W->k;
    if (act_block <= 0 || K % act_block || K % 32 || misaligned(W->w) || c->scratch_cap < dic_gemm_scratch(M, W->n, K))
        return cudaErrorInvalidValue;
    uint8_t *q = (uint8_t *)c->scratch;
    float *s = (float *)(q + dic_gemm_qbytes(M, K));
    if (M <= 8) { /* decode kernel: one launch, k_gemm_f16's bits (dic_gemm_f16.cu k_gemm_dec) */
        cudaError_t e = dec(c, M, A, lda, 1, W, act_block, &C32, &C16, &ldc, q, s);
        if (e != cudaErrorNotSupported) return e;
    }
    /* FP8 above the split bound: the f16 wgmma kernel (dic_gemm_f16_wg.cu), the bits of the f16 HMMA kernels
     * below, in the batch-invariant mode; in fast mode with 32-value activation blocks (V4.1), where it is at
     * least as fast as wgmma e4m3 v2 (docs/kernels/gemm-prefill.md), so fast mode's FP8 rows are invariant there */
    if (M > DIC_GEMM_SPLIT_MAXM && (c->batch_invariant || act_block < 128) && dic_gemm_f16_wg_ok(W, act_block)) {
        cudaError_t e = dic_gemm_f16_wg(c->stream, c->num_sms, W, act_block, M, A, lda, c->scratch, c->scratch_cap,
                                        C32, C16, ldc, 0);
        if (e != cudaErrorNotSupported) return e;
    }
    float *part = NULL;
    int *cnt = NULL, ncnt = 0;
    if (dic_gemm_partbytes(M, W->n, K)) {
        part = (float *)(q + dic_gemm_qbytes(M, K) + dic_gemm_sbytes(M, K));
        cnt = (int *)((uint8_t *)part + (((size_t)dic_gemm_ngroups(K) * M * W->n * 4 + 255) & ~(size_t)255));
        ncnt = (int)dic_gemm_ncnt(M, W->n);
    }
    cudaError_t e = dic_gemm_quant(c->stream, M, A, lda, K, act_block, NULL, NULL, q, s, cnt, ncnt);
    if (e != cudaSuccess) return e;
    dic_gemm_wtab wt;
    wt.w[0] = W->w;
    wt.s[0] = W->scale;
    /* The f16 HMMA kernels with the M-free split (dic_gemm_f16.cu): every FP8 / FP4 row in the
     * batch-invariant mode that the f16 wgmma kernel above does not take (FP4, shapes it refuses), and the
     * fast mode's FP8 M <= 64 and FP4 rows (the same bits). */
    if (c->batch_invariant || M <= DIC_GEMM_SPLIT_MAXM || W->fmt == 3)
        return dic_gemm_f16_launch(c->stream, c->num_sms, 1, &wt, W->fmt, W->n, K, W->wblock, act_block, M, NULL,
                                   NULL, q, s, part, cnt, ncnt, C32, C16, ldc, 1);
    /* fast mode, FP8 above M = 64: wgmma e4m3 (other bits, docs/determinism.md §7) */
    return dic_gemm_q_launch(c->stream, 1, &wt, W->fmt, W->n, K, W->wblock, act_block, M, NULL, NULL, q, s, part,
                             cnt, C32, C16, ldc, DIC_GEMM_PATH_FAST);
}

extern "C" cudaError_t dic_gemm_grouped(const dic_ctx *c, int E, const dic_wmat *W, const int *off, const int *rows,
                                        int max_rows, const uint16_t *A, size_t lda, int act_block, uint16_t *C16,
                                        size_t ldc) {
    if (E <= 0 || max_rows <= 0) return cudaSuccess;
    if (E > DIC_GEMM_MAXE || !C16) return cudaErrorInvalidValue;
    const int fmt = W[0].fmt, N = W[0].n, K = W[0].k, wb = W[0].wblock;
    if ((fmt != 2 && fmt != 3) || act_block <= 0 || K % act_block || K % 32 ||
        c->scratch_cap < dic_gemm_scratch(max_rows, N, K))
        return cudaErrorInvalidValue;
    dic_gemm_wtab local; /* host copy, passed by value into the launch's parameters */
    dic_gemm_wtab *tab = &local;
    for (int e = 0; e < E; e++) {
        if (W[e].fmt != fmt || W[e].n != N || W[e].k != K || W[e].wblock != wb || misaligned(W[e].w))
            return cudaErrorInvalidValue;
        tab->w[e] = W[e].w;
        tab->s[e] = W[e].scale;
    }
    uint8_t *q = (uint8_t *)c->scratch;
    float *s = (float *)(q + dic_gemm_qbytes(max_rows, K));
    float *part = NULL;
    int *cnt = NULL, ncnt = 0;
    if (dic_gemm_partbytes(max_rows, N, K)) {
        part = (float *)(q + dic_gemm_qbytes(max_rows, K) + dic_gemm_sbytes(max_rows, K));
        cnt = (int *)((uint8_t *)part + (((size_t)dic_gemm_ngroups(K) * max_rows * N * 4 + 255) & ~(size_t)255));
        ncnt = (int)dic_gemm_ncnt(max_rows, N);
    }
    cudaError_t e = dic_gemm_quant(c->stream, max_rows, A, lda, K, act_block, rows, off + E, q, s, cnt, ncnt);
    if (e != cudaSuccess) return e;
    /* batch-invariant: the M-free split (an expert row's bits independent of E, max_rows and the
     * other experts' rows); fast: the split sized by the launch */
    return dic_gemm_f16_launch(c->stream, c->num_sms, E, tab, fmt, N, K, wb, act_block, max_rows, off, rows, q, s,
                               part, cnt, ncnt, NULL, C16, ldc, c->batch_invariant);
}

extern "C" cudaError_t dic_gemm_multi(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int nw, const dic_wmat *W,
                                      int act_block, uint16_t *const *C16, const size_t *ldc) {
    if (M <= 0 || nw <= 0) return cudaSuccess;
    if (!W || !C16 || !ldc) return cudaErrorInvalidValue;
    if (M <= 8 && nw <= 4) {
        int nmax = 0, ok = 1;
        for (int i = 0; i < nw; i++) {
            ok &= (W[i].fmt == 2 || W[i].fmt == 3) && W[i].fmt == W[0].fmt && W[i].k == W[0].k && C16[i] != NULL;
            if (W[i].n > nmax) nmax = W[i].n;
        }
        const int K = W[0].k;
        if (ok && act_block > 0 && K % act_block == 0 && K % 32 == 0 && c->scratch_cap >= dic_gemm_scratch(M, nmax, K)) {
            uint8_t *q = (uint8_t *)c->scratch;
            cudaError_t e = dec(c, M, A, lda, nw, W, act_block, NULL, C16, ldc, q, (float *)(q + dic_gemm_qbytes(M, K)));
            if (e != cudaErrorNotSupported) return e;
        }
    }
    for (int i = 0; i < nw; i++) { /* nw separate products (the shared launch's bits) */
        cudaError_t e = dic_gemm(c, M, A, lda, &W[i], act_block, NULL, C16[i], ldc[i]);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
