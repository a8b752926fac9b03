/* gtest_gemm_f16_wg.c — the f16 wgmma FP8 GEMM (dic_gemm_f16_wg.cu), the large-M member of the
 * batch-invariant f16 family:
 *  - every output row at M = 65, 129, 700 and 2049 (token tiles 64 and 128) bitwise equal to the same row
 *    computed alone by dic_gemm in fast mode at M = 1 (k_gemm_dec), fp32 and bf16 outputs, on V4-Flash
 *    shapes with split-K (wq_a K 4096: 8 splits) and without (K 1024), an N tail (N 1000), V4's
 *    128-value and V4.1's 32-value activation blocks, and activations with tiny blocks (the scale floor);
 *  - output columns beyond N and the row padding of ldc untouched;
 *  - dic_gemm in fast mode with 32-value blocks above M = 64 (it dispatches to this kernel) bitwise the
 *    rows alone as well;
 *  - refusals (cudaErrorNotSupported, nothing written): FP4 weights, K % 128 != 0, a short scratch.
 * Skips with its reason off sm_90 (wgmma). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gemm_ref.h"
#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/ops.h"

static void w_gen(int N, int K, uint8_t **w, uint8_t **sc, size_t *sb, uint64_t *s) {
    *sb = (size_t)((N + 127) / 128) * (K / 128);
    *w = malloc((size_t)N * K);
    *sc = malloc(*sb);
    for (size_t i = 0; i < (size_t)N * K; i++) {
        uint8_t b = (uint8_t)gt_rand_u64(s);
        if ((b & 0x7F) == 0x7F) b ^= 1;
        (*w)[i] = b;
    }
    for (size_t i = 0; i < *sb; i++) (*sc)[i] = (uint8_t)(118 + gt_rand_u64(s) % 12);
}

static int wg_supported(void) {
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    return major == 9 && minor == 0;
}

static void wg_case(int N, int K, int act, int M, uint64_t seed) {
    uint64_t s = seed;
    const size_t lda = (size_t)K + 8, ldc = (size_t)N + 3;
    uint8_t *w, *sc;
    size_t sb;
    w_gen(N, K, &w, &sc, &sb, &s);
    uint16_t *A = malloc((size_t)M * lda * 2);
    fill_act(A, M, K, lda, act, &s);
    void *dw = gt_to_dev(w, (size_t)N * K), *dsc = gt_to_dev(sc, sb), *dA = gt_to_dev(A, (size_t)M * lda * 2);
    dic_ctx ctx;
    size_t scr = dic_gemm_scratch(M, N, K);
    CHECK(gt_ctx(&ctx, scr) && dw && dsc && dA);
    const dic_wmat W = {DI_WFMT_FP8, N, K, 128, dw, dsc};
    CHECK_MSG(dic_gemm_f16_wg_ok(&W, act), "dic_gemm_f16_wg refuses N %d K %d act %d", N, K, act);
    /* the reference: each row alone, fast mode, M = 1 (k_gemm_dec) */
    float *dR = gt_dev_poison((size_t)M * ldc * 4);
    uint16_t *dR16 = gt_dev_poison((size_t)M * ldc * 2);
    for (int m = 0; m < M; m++) {
        CUDA_CHECK(dic_gemm(&ctx, 1, (const uint16_t *)dA + (size_t)m * lda, lda, &W, act, dR + (size_t)m * ldc, NULL, ldc));
        CUDA_CHECK(dic_gemm(&ctx, 1, (const uint16_t *)dA + (size_t)m * lda, lda, &W, act, NULL, dR16 + (size_t)m * ldc, ldc));
    }
    float *R = gt_d2h(dR, (size_t)M * ldc * 4);
    uint16_t *R16 = gt_d2h(dR16, (size_t)M * ldc * 2);
    for (int tn = 64; tn <= 128 && !di_test_failed(); tn += 64) {
        float *dC = gt_dev_poison((size_t)M * ldc * 4);
        uint16_t *dC16 = gt_dev_poison((size_t)M * ldc * 2);
        CUDA_CHECK(dic_gemm_f16_wg(ctx.stream, ctx.num_sms, &W, act, M, dA, lda, ctx.scratch, ctx.scratch_cap, dC, NULL,
                                   ldc, tn));
        CUDA_CHECK(dic_gemm_f16_wg(ctx.stream, ctx.num_sms, &W, act, M, dA, lda, ctx.scratch, ctx.scratch_cap, NULL,
                                   dC16, ldc, tn));
        CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        float *C = gt_d2h(dC, (size_t)M * ldc * 4);
        uint16_t *C16 = gt_d2h(dC16, (size_t)M * ldc * 2);
        size_t bad = gt_bits("fp32", C, R, (size_t)M, ldc, (size_t)N, 4);
        size_t bad16 = gt_bits("bf16", C16, R16, (size_t)M, ldc, (size_t)N, 2);
        size_t pad = 0;
        for (int m = 0; m < M; m++)
            for (size_t j = (size_t)N; j < ldc; j++)
                pad += ((const uint32_t *)C)[(size_t)m * ldc + j] != 0xFFFFFFFFu || C16[(size_t)m * ldc + j] != 0xFFFFu;
        CHECK_MSG(!bad && !bad16, "N %d K %d act %d M %d tile %d: %zu fp32 / %zu bf16 outputs differ from the rows alone",
                  N, K, act, M, tn, bad, bad16);
        CHECK_MSG(!pad, "N %d K %d M %d tile %d: %zu padding words written", N, K, M, tn, pad);
        free(C), free(C16);
        cudaFree(dC), cudaFree(dC16);
    }
    if (act < 128 && !di_test_failed()) { /* dic_gemm fast mode dispatches here above M = 64 */
        float *dC = gt_dev_poison((size_t)M * ldc * 4);
        CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &W, act, dC, NULL, ldc));
        CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        float *C = gt_d2h(dC, (size_t)M * ldc * 4);
        size_t bad = gt_bits("dic_gemm fp32", C, R, (size_t)M, ldc, (size_t)N, 4);
        CHECK_MSG(!bad, "dic_gemm fast, N %d K %d act %d M %d: %zu outputs differ from the rows alone", N, K, act, M, bad);
        free(C);
        cudaFree(dC);
    }
    free(R), free(R16), free(w), free(sc), free(A);
    cudaFree(dR), cudaFree(dR16), cudaFree(dw), cudaFree(dsc), cudaFree(dA), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
}

TEST(gpu_gemm_f16_wg_rows_alone) {
    if (!wg_supported()) {
        di_test_skip("wgmma needs sm_90a");
        return;
    }
    static const int Ms[] = {65, 129, 700, 2049};
    for (int i = 0; i < 4 && !di_test_failed(); i++) {
        wg_case(1024, 4096, 128, Ms[i], 7001 + i); /* wq_a, 8 splits */
        if (!di_test_failed()) wg_case(1024, 4096, 32, Ms[i], 7101 + i);
    }
    if (!di_test_failed()) wg_case(1000, 1024, 128, 300, 7201); /* one split, N tail */
    if (!di_test_failed()) wg_case(1000, 1024, 32, 300, 7202);
}

TEST(gpu_gemm_f16_wg_refusals) {
    if (!wg_supported()) {
        di_test_skip("wgmma needs sm_90a");
        return;
    }
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, dic_gemm_scratch(256, 256, 1024)));
    uint8_t *dw = gt_dev_poison(256 * 1024), *dsc = gt_dev_poison(2 * 8 * 32);
    uint16_t *dA = gt_dev_poison(256 * 1024 * 2);
    float *dC = gt_dev_poison(256 * 256 * 4);
    const dic_wmat fp4 = {DI_WFMT_FP4, 256, 1024, 32, dw, dsc}, k96 = {DI_WFMT_FP8, 256, 96, 128, dw, dsc},
                   ok = {DI_WFMT_FP8, 256, 1024, 128, dw, dsc};
    CHECK(!dic_gemm_f16_wg_ok(&fp4, 32) && !dic_gemm_f16_wg_ok(&k96, 32) && dic_gemm_f16_wg_ok(&ok, 128));
    CHECK(dic_gemm_f16_wg(ctx.stream, ctx.num_sms, &fp4, 32, 256, dA, 1024, ctx.scratch, ctx.scratch_cap, dC, NULL, 256, 0) ==
          cudaErrorNotSupported);
    CHECK(dic_gemm_f16_wg(ctx.stream, ctx.num_sms, &ok, 128, 256, dA, 1024, ctx.scratch,
                          dic_gemm_f16_wg_scratch(256, 1024) - 1, dC, NULL, 256, 0) == cudaErrorNotSupported);
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    uint32_t *C = gt_d2h(dC, 256 * 256 * 4);
    size_t touched = 0;
    for (size_t i = 0; i < 256 * 256; i++) touched += C[i] != 0xFFFFFFFFu;
    CHECK_MSG(!touched, "a refused call wrote %zu outputs", touched);
    free(C);
    cudaFree(dw), cudaFree(dsc), cudaFree(dA), cudaFree(dC), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
}
