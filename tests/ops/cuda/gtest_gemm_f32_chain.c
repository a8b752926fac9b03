/* gtest_gemm_f32_chain.c — the mode-1 F32-weight chain kernel (dic_gemm_f32_chain.cu,
 * dic_gemm with batch_invariant = 1, fmt F32, N <= DIC_F32_CHAIN_MAXN) against the CPU
 * di_gemm, bit for bit (both run c = fmaf(a[k], w[n][k], c) in k order per output):
 *  - M = 1, 2, 3, 8, 33 (and 1024 on the mHC shapes), N = 4, 24, 25, 64, K = 16384, 4096,
 *    100 (a partial last chunk, K % 8 != 0), 1; fp32 and bf16 outputs;
 *  - strided rows (lda % 8 == 0: 16-byte pieces; lda = K + 3 and W at a 4-byte offset: the
 *    element-wise staging), ldc = N + 3 (padding keeps its poison); K = 1000: a partial
 *    last chunk of whole pieces;
 *  - the old kernel (dic_gemm_f32_chain_enable(0): k_gemm_float) gives the same bits. */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/ops.h"

/* misalign: lda = K + 3 and W 4 bytes past a 16-byte boundary (else lda = K rounded up to 8,
 * plus 8, W aligned: 16-byte pieces, the last one element-wise when K % 8 != 0) */
static void chain_case(int M, int N, int K, int misalign, uint64_t seed) {
    uint64_t s = seed;
    const size_t lda = misalign ? (size_t)K + 3 : (((size_t)K + 7) & ~(size_t)7) + 8, ldc = (size_t)N + 3;
    uint16_t *A = malloc((size_t)M * lda * 2);
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_rand_unit(&s));
    float *w = malloc((size_t)N * K * 4);
    gt_fill_f32(w, (size_t)N * K, 0.05f, &s);

    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 0));
    ctx.batch_invariant = 1;
    void *dA = gt_to_dev(A, (size_t)M * lda * 2);
    uint8_t *dWb = NULL;
    CHECK(cudaMalloc((void **)&dWb, (size_t)N * K * 4 + 16) == cudaSuccess);
    float *dW = (float *)(dWb + (misalign ? 4 : 0));
    CUDA_CHECK(cudaMemcpy(dW, w, (size_t)N * K * 4, cudaMemcpyHostToDevice));
    float *dC = gt_dev_poison((size_t)M * ldc * 4), *dCo = gt_dev_poison((size_t)M * ldc * 4);
    uint16_t *dC16 = gt_dev_poison((size_t)M * ldc * 2);
    CHECK(dA && dC && dCo && dC16);
    dic_wmat dw = {1, N, K, 0, dW, NULL};
    CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, 0, dC, NULL, ldc));
    CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, 0, NULL, dC16, ldc));
    const int old = M * (double)N * K <= 2e8; /* the old kernel is slow: small cases only */
    if (old) {
        dic_gemm_f32_chain_enable(0);
        CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, 0, dCo, NULL, ldc));
        dic_gemm_f32_chain_enable(1);
    }
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    float *C = gt_d2h(dC, (size_t)M * ldc * 4), *Co = gt_d2h(dCo, (size_t)M * ldc * 4);
    uint16_t *C16 = gt_d2h(dC16, (size_t)M * ldc * 2);
    CHECK(C && Co && C16);

    di_wmat pw;
    di_exec x;
    CHECK(di_wmat_pack(&pw, DI_WFMT_F32, w, NULL, N, K, 0, NULL) == DEEPINFER_OK);
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    float *R = malloc((size_t)M * ldc * 4);
    uint16_t *R16 = malloc((size_t)M * ldc * 2);
    di_gemm(&x, M, A, lda, &pw, 0, R, NULL, ldc);
    di_gemm(&x, M, A, lda, &pw, 0, NULL, R16, ldc);

    for (int m = 0; m < M; m++) {
        for (size_t n = (size_t)N; n < ldc; n++)
            CHECK_MSG(di_f32_bits(C[m * ldc + n]) == 0xFFFFFFFFu && C16[m * ldc + n] == 0xFFFF,
                      "M=%d N=%d K=%d: padding column %zu of row %d was written", M, N, K, n, m);
        for (int n = 0; n < N; n++) {
            size_t i = (size_t)m * ldc + n;
            int ok = di_f32_bits(C[i]) == di_f32_bits(R[i]) && C16[i] == R16[i] &&
                     (!old || di_f32_bits(Co[i]) == di_f32_bits(R[i]));
            CHECK_MSG(ok, "M=%d N=%d K=%d mis=%d: C[%d][%d] gpu %a (bf16 0x%04x), cpu %a (0x%04x), old kernel %a",
                          M, N, K, misalign, m, n, C[i], C16[i], R[i], R16[i], old ? Co[i] : 0.0f);
        }
    }
    di_wmat_free(&pw);
    di_exec_free(&x);
    cudaFree(dA), cudaFree(dWb), cudaFree(dC), cudaFree(dCo), cudaFree(dC16);
    cudaStreamDestroy(ctx.stream);
    free(A), free(w), free(C), free(Co), free(C16), free(R), free(R16);
}

TEST(gpu_gemm_f32_chain_bitwise) {
    static const int ms[] = {1, 2, 3, 8, 33}, ns[] = {4, 24, 25, 64}, ks[] = {16384, 4096, 100, 1};
    uint64_t seed = 7000;
    for (unsigned a = 0; a < sizeof ms / sizeof *ms; a++)
        for (unsigned b = 0; b < sizeof ns / sizeof *ns; b++)
            for (unsigned c = 0; c < sizeof ks / sizeof *ks; c++) {
                chain_case(ms[a], ns[b], ks[c], 0, seed++);
                if (di_test_failed()) return;
                if (ks[c] != 16384 || ms[a] <= 3) { /* the element-wise staging */
                    chain_case(ms[a], ns[b], ks[c], 1, seed++);
                    if (di_test_failed()) return;
                }
            }
}

TEST(gpu_gemm_f32_chain_prefill) { /* prefill: the mHC mixes and head at M = 1024, and odd tiles */
    chain_case(1024, 24, 16384, 0, 7500);
    if (di_test_failed()) return;
    chain_case(1024, 4, 16384, 0, 7501);
    if (di_test_failed()) return;
    chain_case(1024, 25, 4096, 1, 7502);
    if (di_test_failed()) return;
    chain_case(97, 64, 100, 0, 7503);
    if (di_test_failed()) return;
    chain_case(257, 24, 16384, 0, 7504);
    if (di_test_failed()) return;
    chain_case(8, 24, 1000, 0, 7505);
    if (di_test_failed()) return;
    chain_case(65, 24, 1000, 1, 7506);
    if (di_test_failed()) return;
    chain_case(1, 64, 16384, 1, 7507);
}
