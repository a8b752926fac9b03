/* gtest_gemm_fast_float.c — the batch_invariant == 0 BF16 / F32 weight GEMMs
 * (dic_gemm_float_fast.cu) against the CPU di_gemm:
 *  - every checked element: |gpu - cpu| <= 2^-10 * sum_k |a_k w_k| (the FP8
 *    element bound of gtest_gemm.c; large cases on a sample of elements), and
 *    norm-wise ||gpu - cpu|| / ||cpu|| <= 1e-4 over all elements (gtest_gemm.c
 *    TOL_NORM); measured errors are printed (expected ~1e-7 .. 1e-6: both sides
 *    are fp32 sums, in different orders);
 *  - the bf16 output equals bf16(fp32 output) bit for bit; padding columns
 *    (ldc > N) keep their poison;
 *  - determinism: a second launch gives the same bits;
 *  - the GEMV kernel (M <= 16, F32 at every M): row r alone (M = 1) equals row r
 *    of the M = 8 launch (and of M = 64 / 1024 for F32) bit for bit (the K split
 *    depends on N and K only; the variant flags change timing, not sums);
 *  - the GEMV at the shapes of the lab's variant table (gpu_gemm_fast_gemv_variants) and the
 *    block-diagonal product (one GEMV launch at M <= 4, one tensor-core launch
 *    above, whose row bits may depend on M like plain k_mma). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/ops.h"

#define FF_TOL_ELEM 0x1p-10
#define FF_TOL_NORM 1e-4

static const char *fname(int f) { return f == 0 ? "BF16" : "F32"; }

/* One shape: M rows, weights N x K (fmt 0 bf16, 1 f32), through dic_gemm with
 * batch_invariant = 0 (or the given fast path). Returns nothing; CHECKs. */
static void ff_case(int fmt, int M, int N, int K, int path, uint64_t seed) {
    uint64_t s = seed;
    size_t lda = (size_t)K + 8, ldc = (size_t)N + 3;
    uint16_t *A = malloc((size_t)M * lda * 2);
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_normal(&s));
    size_t wb = (size_t)N * K * (fmt ? 4 : 2);
    void *w = malloc(wb);
    if (fmt) gt_fill_f32(w, (size_t)N * K, 0.05f, &s);
    else gt_fill_bf16(w, (size_t)N * K, 0.05f, &s);

    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 256));
    ctx.batch_invariant = 0;
    void *dA = gt_to_dev(A, (size_t)M * lda * 2), *dW = gt_to_dev(w, wb);
    float *dC = gt_dev_poison((size_t)M * ldc * 4);
    uint16_t *dC16 = gt_dev_poison((size_t)M * ldc * 2);
    CHECK(dA && dW && dC && dC16);
    dic_wmat dw = {fmt, N, K, 0, dW, NULL};
    if (path == DIC_GEMMF_PATH_AUTO) {
        CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, 0, dC, NULL, ldc));
        CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, 0, NULL, dC16, ldc));
    } else {
        CUDA_CHECK(dic_gemm_float_fast_launch(ctx.stream, M, dA, lda, &dw, dC, NULL, ldc, path));
        CUDA_CHECK(dic_gemm_float_fast_launch(ctx.stream, M, dA, lda, &dw, NULL, dC16, ldc, path));
    }
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    float *C = gt_d2h(dC, (size_t)M * ldc * 4);
    uint16_t *C16 = gt_d2h(dC16, (size_t)M * ldc * 2);
    CHECK(C && C16);
    /* determinism: again, same bits */
    CUDA_CHECK(cudaMemset(dC, 0xFF, (size_t)M * ldc * 4));
    if (path == DIC_GEMMF_PATH_AUTO) CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, 0, dC, NULL, ldc));
    else CUDA_CHECK(dic_gemm_float_fast_launch(ctx.stream, M, dA, lda, &dw, dC, NULL, ldc, path));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    float *C2 = gt_d2h(dC, (size_t)M * ldc * 4);
    CHECK(C2);
    size_t nd = gt_count_diff_u32(C, C2, (size_t)M * ldc);
    CHECK_MSG(nd == 0, "%s M=%d N=%d K=%d: second run differs in %zu outputs", fname(fmt), M, N, K, nd);

    /* CPU */
    di_wmat pw;
    di_exec x;
    CHECK(di_wmat_pack(&pw, (di_wfmt)fmt, w, NULL, N, K, 0, NULL) == DEEPINFER_OK);
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    float *R = malloc((size_t)M * ldc * 4);
    di_gemm(&x, M, A, lda, &pw, 0, R, NULL, ldc);

    double num = 0, den = 0, worst = 0;
    long long step = (long long)((double)M * N * K / 2e8) + 1, cnt = 0;
    for (int m = 0; m < M; m++) {
        for (size_t n = (size_t)N; n < ldc; n++)
            CHECK_MSG(di_f32_bits(C[m * ldc + n]) == 0xFFFFFFFFu && C16[m * ldc + n] == 0xFFFF,
                      "%s M=%d N=%d K=%d: padding column %zu of row %d was written", fname(fmt), M, N, K, n, m);
        for (int n = 0; n < N; n++) {
            size_t i = (size_t)m * ldc + n;
            CHECK_MSG(C[i] == C[i], "%s M=%d N=%d K=%d: C[%d][%d] NaN / unwritten", fname(fmt), M, N, K, m, n);
            CHECK_MSG(C16[i] == di_f32_to_bf16(C[i]), "%s M=%d N=%d K=%d: bf16 out [%d][%d] 0x%04x != bf16(%a)",
                      fname(fmt), M, N, K, m, n, C16[i], C[i]);
            if (di_test_failed()) goto out;
            double d = (double)C[i] - R[i];
            num += d * d;
            den += (double)R[i] * R[i];
            if (cnt++ % step) continue;
            double abs = 0;
            for (int k = 0; k < K; k++) {
                double wv = fmt ? ((const float *)w)[(size_t)n * K + k]
                                : di_bf16_to_f32(((const uint16_t *)w)[(size_t)n * K + k]);
                abs += fabs(di_bf16_to_f32(A[(size_t)m * lda + k]) * wv);
            }
            CHECK_MSG(fabs(d) <= FF_TOL_ELEM * abs + 1e-30,
                      "%s M=%d N=%d K=%d: C[%d][%d] gpu %.9g cpu %.9g (|d| %.3g > bound %.3g)", fname(fmt), M, N, K,
                      m, n, C[i], R[i], fabs(d), FF_TOL_ELEM * abs);
            if (di_test_failed()) goto out;
            if (abs > 0 && fabs(d) / abs > worst) worst = fabs(d) / abs;
        }
    }
    {
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        fprintf(stderr, "  fast %s M=%d N=%d K=%d path %d: max |d|/abs-sum %.2e, norm rel %.2e\n", fname(fmt), M, N,
                K, path, worst, rel);
        CHECK_MSG(rel <= FF_TOL_NORM, "%s M=%d N=%d K=%d: norm-wise error %.3g", fname(fmt), M, N, K, rel);
    }
out:
    di_wmat_free(&pw);
    di_exec_free(&x);
    cudaFree(dA), cudaFree(dW), cudaFree(dC), cudaFree(dC16), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(A), free(w), free(C), free(C16), free(C2), free(R);
}

TEST(gpu_gemm_fast_f32) {
    static const int ms[] = {1, 3, 8, 17, 64, 1024};
    for (unsigned i = 0; i < sizeof ms / sizeof *ms; i++) {
        ff_case(1, ms[i], 24, 16384, 0, 100 + i); /* mHC mixes */
        if (di_test_failed()) return;
        ff_case(1, ms[i], 4, 16384, 0, 200 + i);
        if (di_test_failed()) return;
        ff_case(1, ms[i], 33, 100, 0, 300 + i); /* K tail inside a chunk, N not a multiple of 4 */
        if (di_test_failed()) return;
    }
    ff_case(1, 5, 7, 101, 0, 400); /* K % 4 != 0: the mode-1 kernel */
}

TEST(gpu_gemm_fast_bf16_small_m) {
    static const int ms[] = {1, 3, 8, 16};
    for (unsigned i = 0; i < sizeof ms / sizeof *ms; i++) {
        ff_case(0, ms[i], 1024, 4096, 0, 500 + i);
        if (di_test_failed()) return;
        ff_case(0, ms[i], 64, 4096, 0, 600 + i);
        if (di_test_failed()) return;
        ff_case(0, ms[i], 131, 136, 0, 700 + i); /* K tail, odd N */
        if (di_test_failed()) return;
    }
    for (unsigned i = 0; i < sizeof ms / sizeof *ms; i++) { /* both kernels at every small M, whatever auto picks */
        ff_case(0, ms[i], 1024, 4096, DIC_GEMMF_PATH_GEMV, 510 + i);
        if (di_test_failed()) return;
        ff_case(0, ms[i], 131, 136, DIC_GEMMF_PATH_GEMV, 710 + i);
        if (di_test_failed()) return;
        ff_case(0, ms[i], 1024, 4096, DIC_GEMMF_PATH_MMA, 520 + i);
        if (di_test_failed()) return;
        ff_case(0, ms[i], 131, 136, DIC_GEMMF_PATH_MMA, 720 + i);
        if (di_test_failed()) return;
    }
    ff_case(0, 8, 129280, 4096, 0, 800); /* lm_head */
    if (di_test_failed()) return;
    ff_case(0, 1, 129280, 4096, DIC_GEMMF_PATH_GEMV, 802);
    if (di_test_failed()) return;
    ff_case(0, 3, 9, 130, 0, 801); /* K % 8 != 0: the mode-1 kernel */
}

/* The decode shapes of V4-Flash (router N=256 with fp32 out, compressor / indexer
 * projections) at the batch sizes of decode: M = 1, 2 (GEMV), 8, 64 (tensor cores). */
TEST(gpu_gemm_fast_bf16_decode_shapes) {
    static const int ns[] = {256, 512, 64, 1024};
    static const int ms[] = {1, 2, 8, 64};
    for (unsigned i = 0; i < 4; i++)
        for (unsigned j = 0; j < 4; j++) {
            ff_case(0, ms[j], ns[i], 4096, 0, 1100 + 4 * i + j);
            if (di_test_failed()) return;
        }
}

/* The product's GEMV (its own K split and flags) at the shapes and seeds of the former variant table
 * (the forced splits and flags are lab/gemm's, gemm_float_bench), within the bounds; N = 1024 gives a
 * warp several batches. */
TEST(gpu_gemm_fast_gemv_variants) {
    for (unsigned v = 0; v < 15; v++) {
        ff_case(0, 1, 256, 4096, DIC_GEMMF_PATH_GEMV, 1200 + v);
        if (!di_test_failed()) ff_case(0, 1, 1024, 4096, DIC_GEMMF_PATH_GEMV, 1220 + v);
        if (!di_test_failed()) ff_case(0, 2, 131, 136, DIC_GEMMF_PATH_GEMV, 1240 + v);
        if (!di_test_failed()) ff_case(1, 1, 24, 16384, DIC_GEMMF_PATH_GEMV, 1260 + v);
        if (di_test_failed()) return;
    }
}

TEST(gpu_gemm_fast_bf16_mma) {
    ff_case(0, 17, 1024, 4096, 0, 900);
    if (di_test_failed()) return;
    ff_case(0, 64, 12935, 4096, 0, 901); /* lm_head-like at batch 64 (BM = 64) */
    if (di_test_failed()) return;
    ff_case(0, 1024, 1024, 4096, 0, 902);
    if (di_test_failed()) return;
    ff_case(0, 1024, 64, 4096, 0, 903); /* split K over a cluster */
    if (di_test_failed()) return;
    ff_case(0, 300, 200, 72, 0, 904); /* M, N, K tails */
    if (di_test_failed()) return;
    ff_case(0, 1000, 520, 1032, DIC_GEMMF_PATH_MMA128, 905);
    if (di_test_failed()) return;
    ff_case(0, 65, 136, 4096, DIC_GEMMF_PATH_MMA64, 906);
}

/* Row r of the GEMV kernel (forced) alone equals row r of a larger launch, bitwise. */
static void rows_case(int fmt, int N, int K, const int *ms, int nms, uint64_t seed) {
    const int MB = ms[nms - 1], r1 = 5;
    uint64_t s = seed;
    size_t lda = (size_t)K + 8, ldc = (size_t)N;
    uint16_t *A = malloc((size_t)MB * lda * 2);
    for (size_t i = 0; i < (size_t)MB * lda; i++) A[i] = di_f32_to_bf16(gt_normal(&s));
    size_t wb = (size_t)N * K * (fmt ? 4 : 2);
    void *w = malloc(wb);
    if (fmt) gt_fill_f32(w, (size_t)N * K, 0.05f, &s);
    else gt_fill_bf16(w, (size_t)N * K, 0.05f, &s);
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 256));
    void *dA = gt_to_dev(A, (size_t)MB * lda * 2), *dW = gt_to_dev(w, wb);
    float *dC = gt_dev_poison((size_t)MB * ldc * 4);
    CHECK(dA && dW && dC);
    dic_wmat dw = {fmt, N, K, 0, dW, NULL};
    float *one = malloc(ldc * 4), *got = malloc((size_t)MB * ldc * 4);
    const int P = DIC_GEMMF_PATH_GEMV;
    CUDA_SYNC_CHECK(dic_gemm_float_fast_launch(ctx.stream, 1, (const uint16_t *)dA + (size_t)r1 * lda, lda, &dw, dC,
                                               NULL, ldc, P));
    CUDA_CHECK(cudaMemcpy(one, dC, ldc * 4, cudaMemcpyDeviceToHost));
    for (int j = 0; j < nms; j++) {
        CUDA_CHECK(cudaMemset(dC, 0xFF, (size_t)MB * ldc * 4));
        CUDA_SYNC_CHECK(dic_gemm_float_fast_launch(ctx.stream, ms[j], dA, lda, &dw, dC, NULL, ldc, P));
        CUDA_CHECK(cudaMemcpy(got, dC, (size_t)ms[j] * ldc * 4, cudaMemcpyDeviceToHost));
        size_t d = gt_count_diff_u32(one, got + (size_t)r1 * ldc, (size_t)N);
        CHECK_MSG(d == 0, "%s N=%d K=%d: row %d at M=1 differs from M=%d in %zu of %d outputs", fname(fmt), N, K, r1,
                  ms[j], d, N);
    }
    fprintf(stderr, "  rows %s N=%d K=%d: row %d bitwise equal at M=1 and M up to %d\n", fname(fmt), N, K, r1, MB);
    cudaFree(dA), cudaFree(dW), cudaFree(dC), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(A), free(w), free(one), free(got);
}

TEST(gpu_gemm_fast_rows_independent) {
    static const int mb[] = {6, 8, 16};
    static const int mf[] = {8, 16, 17, 64, 1024};
    rows_case(0, 1024, 4096, mb, 3, 1000);
    rows_case(0, 131, 136, mb, 3, 1001);
    rows_case(0, 8192, 4096, mb, 3, 1004); /* lm_head-like: several GV_U batches per warp at M = 1 */
    rows_case(1, 24, 16384, mf, 5, 1002);
    rows_case(1, 4, 16384, mf, 5, 1003);
}

/* Block-diagonal launch (dic_gemm_blockdiag, the grouped wo_a): G groups of
 * R x gk weights over A's column blocks, one GEMV launch in fast mode,
 * against the CPU di_gemm_blockdiag (= G di_gemm calls) within the element
 * bound; mode 1 F32 (per-group dic_gemm, the CPU's order) bit for bit, mode 1 BF16 (k_mma with the
 * M-free split, gtest_gemm_inv_float.c) within the element bound. */
static void blockdiag_case(int fmt, int M, int G, int R, int gk, uint64_t seed) {
    uint64_t s = seed;
    size_t lda = (size_t)G * gk + 8, ldc = (size_t)G * R + 4;
    uint16_t *A = malloc((size_t)M * lda * 2);
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_normal(&s));
    size_t wb = (size_t)R * gk * (fmt ? 4 : 2);
    void **w = malloc((size_t)G * sizeof *w), **dW = malloc((size_t)G * sizeof *dW);
    dic_wmat *dw = malloc((size_t)G * sizeof *dw);
    di_wmat *pw = malloc((size_t)G * sizeof *pw);
    for (int g = 0; g < G; g++) {
        w[g] = malloc(wb);
        if (fmt) gt_fill_f32(w[g], (size_t)R * gk, 0.05f, &s);
        else gt_fill_bf16(w[g], (size_t)R * gk, 0.05f, &s);
        dW[g] = gt_to_dev(w[g], wb);
        CHECK(dW[g]);
        dw[g] = (dic_wmat){fmt, R, gk, 0, dW[g], NULL};
        CHECK(di_wmat_pack(&pw[g], (di_wfmt)fmt, w[g], NULL, R, gk, 0, NULL) == DEEPINFER_OK);
    }
    di_exec x;
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    float *ref = malloc((size_t)M * ldc * 4), *got = NULL, *got1 = NULL;
    di_gemm_blockdiag(&x, M, A, lda, G, pw, gk, 0, ref, NULL, ldc);
    void *dA = gt_to_dev(A, (size_t)M * lda * 2);
    float *dC = gt_dev_poison((size_t)M * ldc * 4);
    CHECK(dA && dC);
    for (int mode = 0; mode < 2; mode++) {
        dic_ctx ctx;
        CHECK(gt_ctx(&ctx, 256));
        ctx.batch_invariant = mode;
        CUDA_CHECK(cudaMemset(dC, 0xFF, (size_t)M * ldc * 4));
        CUDA_SYNC_CHECK(dic_gemm_blockdiag(&ctx, M, dA, lda, G, dw, gk, 0, dC, NULL, ldc));
        float *C = gt_d2h(dC, (size_t)M * ldc * 4);
        CHECK(C);
        double num = 0, den = 0;
        size_t bad = 0;
        for (int m = 0; m < M; m++) {
            for (size_t n = (size_t)G * R; n < ldc; n++) bad += di_f32_bits(C[m * ldc + n]) != 0xFFFFFFFFu;
            for (int n = 0; n < G * R; n++) {
                int g = n / R;
                double mag = 0;
                for (int k = 0; k < gk; k++)
                    mag += fabs((double)di_bf16_to_f32(A[m * lda + (size_t)g * gk + k]) * di_wmat_get(&pw[g], n % R, k));
                double d = (double)C[m * ldc + n] - ref[m * ldc + n];
                num += d * d, den += (double)ref[m * ldc + n] * ref[m * ldc + n];
                if (mode == 1 && fmt == 1 ? d != 0 : fabs(d) > FF_TOL_ELEM * mag) bad++;
            }
        }
        double nrm = den > 0 ? sqrt(num / den) : 0;
        fprintf(stderr, "  blockdiag %s M=%d G=%d R=%d gk=%d mode %d: norm err %.2e\n", fname(fmt), M, G, R, gk, mode,
                nrm);
        CHECK_MSG(bad == 0 && nrm <= FF_TOL_NORM, "blockdiag %s M=%d G=%d mode %d: %zu outputs out of bounds (norm %.2e)",
                  fname(fmt), M, G, mode, bad, nrm);
        if (mode == 0) got = C;
        else got1 = C;
        cudaFree(ctx.scratch);
        cudaStreamDestroy(ctx.stream);
    }
    for (int g = 0; g < G; g++) free(w[g]), cudaFree(dW[g]), di_wmat_free(&pw[g]);
    free(w), free(dW), free(dw), free(pw), free(A), free(ref), free(got), free(got1);
    cudaFree(dA), cudaFree(dC);
}

TEST(gpu_gemm_blockdiag) {
    blockdiag_case(0, 1, 8, 1024, 4096, 2000); /* V4-Flash wo_a at decode */
    blockdiag_case(0, 3, 4, 256, 512, 2001);
    blockdiag_case(0, 2, 8, 1024, 4096, 2004);
    blockdiag_case(0, 8, 8, 1024, 4096, 2005); /* one tensor-core launch (M > 4, R % 128 == 0) */
    blockdiag_case(0, 64, 8, 256, 1024, 2006);
    blockdiag_case(0, 9, 3, 128, 200, 2007);   /* tensor cores: M, K tails */
    blockdiag_case(0, 9, 2, 64, 136, 2002);    /* per-group fallback (M > 4, R % 128 != 0) */
    blockdiag_case(1, 2, 3, 24, 1024, 2003);
}
