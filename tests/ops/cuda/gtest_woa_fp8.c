/* gtest_woa_fp8.c — FP8 storage, BF16 math (dic.h DIC_WFMT_FP8B, the grouped
 * wo_a on the device): random e4m3 weight groups with random e8m0 block
 * scales, kept as FP8 bytes + scales, against the same groups dequantised on
 * the host to BF16 exactly as the weight loader does (numfmt.c
 * di_dequant_fp8_block, then di_f32_to_bf16) and uploaded as BF16. Every
 * path must give the BF16 matrix's outputs BIT FOR BIT (the in-kernel
 * dequantisation is exact and the sums are the BF16 kernels'):
 *  - dic_gemm_blockdiag in both modes (fast: the GEMV at M <= 4, the
 *    tensor-core tiles above, the per-group fallback; mode 1: one k_mma
 *    launch with the M-free split, or per-group dic_gemm), fp32 and bf16 outputs, padding
 *    columns untouched, at M = 1, 2, 3, 8, 33, 64, 256;
 *  - dic_gemm of one FP8B group, and every forced fast path
 *    (dic_gemm_float_fast_launch GEMV / MMA64 / MMA128 / OLD);
 *  - V4 blocks (128) and V4.1 blocks (32) with realistic scales (the fast
 *    dequantisation), and scales over [0, 200] (bf16 subnormals: the
 *    per-element path), K tails (K % 128 != 0, K % 64 != 0).
 * EXCEPT fast-mode dic_gemm_blockdiag at M <= 4: it takes dic_gemm_fp8w_gemv.cu (16-byte
 * e4m3 loads, block-scaled fp32 partial sums: the same weight values, another summation
 * order), which promises the fast BF16 kernels' GEMM tolerance (gtest_gemm_fast_float.c:
 * every element |d| <= 2^-10 sum_k |a_k w_k|, norm-wise 1e-4) against the BF16 matrix's fast
 * path, not its bits; there the test checks the tolerance, and the bitwise FP8B GEMV
 * (dic_gemm_fp8w_gemv_enable(0)) is still compared bit for bit. gpu_woa_fp8_gemv: the new
 * kernel at M = 1..4 on V4 / V4.1 layouts, run-to-run determinism, rows independent of M.
 * Likewise fast-mode dic_gemm_blockdiag at 4 < M <= dic_gemm_fp8w_mma_maxm_get() with R % 16 == 0
 * and K % 64 == 0: dic_gemm_fp8w_mma.cu (weights converted in registers, tensor-core sums): the
 * tolerance, and with it switched off (dic_gemm_fp8w_mma_maxm(4)) k_mma F8 bit for bit.
 * gpu_woa_fp8_mma: that kernel at M = 5..8, 16, 31, 64, 100, 128, 256, 1024 on V4 /
 * V4.1 layouts, odd M, small odd shapes, run-to-run determinism. Mode 1 (every M) stays bitwise:
 * one k_mma launch over the groups with the M-free split (dic_gemm_float_inv_launch's chains; rows
 * against the row alone: gtest_gemm_inv_float.c gpu_gemm_inv_woa_fp8b). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "io/numfmt.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/ops.h"

typedef struct woa_set {
    int G, R, K, B;
    void **dbf, **d8, **ds;     /* device: BF16 rows, e4m3 bytes, scale bytes per group */
    uint16_t **hbf;             /* host: the BF16 rows per group */
    dic_wmat *wbf, *w8;
} woa_set;

static void set_make(woa_set *t, int G, int R, int K, int B, int slo, int shi, uint64_t *s) {
    memset(t, 0, sizeof *t);
    t->G = G, t->R = R, t->K = K, t->B = B;
    t->dbf = calloc((size_t)G, sizeof(void *)), t->d8 = calloc((size_t)G, sizeof(void *));
    t->ds = calloc((size_t)G, sizeof(void *)), t->hbf = calloc((size_t)G, sizeof(uint16_t *));
    t->wbf = calloc((size_t)G, sizeof(dic_wmat)), t->w8 = calloc((size_t)G, sizeof(dic_wmat));
    const size_t nk = (size_t)R * K;
    for (int g = 0; g < G; g++) {
        t->hbf[g] = malloc(nk * 2);
        CHECK(t->hbf[g]);
        CHECK(gt_fp8b_make(R, K, B, slo, shi, s, t->hbf[g], &t->d8[g], &t->ds[g], &t->w8[g]));
        t->dbf[g] = gt_to_dev(t->hbf[g], nk * 2);
        CHECK(t->dbf[g]);
        t->wbf[g] = (dic_wmat){0, R, K, 0, t->dbf[g], NULL};
    }
}

static void set_free(woa_set *t) {
    for (int g = 0; g < t->G; g++) cudaFree(t->dbf[g]), cudaFree(t->d8[g]), cudaFree(t->ds[g]), free(t->hbf[g]);
    free(t->hbf), free(t->dbf), free(t->d8), free(t->ds), free(t->wbf), free(t->w8);
}

/* op: 0 blockdiag over all groups; 1 dic_gemm of group 0; 2.. forced fast path (op - 2 + 1 =
 * DIC_GEMMF_PATH_GEMV ..) on group 0. Runs BF16 then FP8B into poisoned outputs, compares
 * the fp32 and the bf16 outputs (with their padding) bit for bit. */
#define WT_TOL_ELEM 0x1p-10
#define WT_TOL_NORM 1e-4

/* The FP8B outputs o32 / o16 (row stride ldc, G groups of R columns over K) against the BF16
 * matrix's fp32 outputs r32 within the fast GEMM tolerance; padding keeps its poison; the bf16
 * output is bf16 of the fp32 one. */
static void check_tol(const woa_set *t, int G, int M, const uint16_t *A, size_t lda, const float *o32,
                      const uint16_t *o16, const float *r32, size_t ldc, const char *what) {
    const int K = t->K, N = G * t->R;
    double num = 0, den = 0, worst = 0;
    const int step = M > 16 ? M / 16 : 1; /* large M: 16 rows spread over M, and the last (host time) */
    for (int m = 0; m < M; m = m + step < M || m == M - 1 ? m + step : M - 1) {
        for (size_t n = (size_t)N; n < ldc; n++)
            CHECK_MSG(di_f32_bits(o32[m * ldc + n]) == 0xFFFFFFFFu && o16[m * ldc + n] == 0xFFFF,
                      "%s M=%d: padding column %zu of row %d was written", what, M, n, m);
        for (int n = 0; n < N; n++) {
            const size_t i = (size_t)m * ldc + (size_t)n;
            CHECK_MSG(o32[i] == o32[i], "%s M=%d: C[%d][%d] NaN / unwritten", what, M, m, n);
            CHECK_MSG(o16[i] == di_f32_to_bf16(o32[i]), "%s M=%d: bf16 out [%d][%d] 0x%04x != bf16(%a)", what, M, m,
                      n, o16[i], o32[i]);
            if (di_test_failed()) return;
            const int g = n / t->R, nl = n - g * t->R;
            const uint16_t *wr = t->hbf[g] + (size_t)nl * K, *ar = A + (size_t)m * lda + (size_t)g * K;
            double abs = 0;
            for (int k = 0; k < K; k++) abs += fabs((double)di_bf16_to_f32(ar[k]) * di_bf16_to_f32(wr[k]));
            const double d = (double)o32[i] - r32[i];
            num += d * d, den += (double)r32[i] * r32[i];
            CHECK_MSG(fabs(d) <= WT_TOL_ELEM * abs + 1e-30, "%s M=%d: C[%d][%d] fp8b %.9g bf16 %.9g (|d| %.3g > %.3g)",
                      what, M, m, n, o32[i], r32[i], fabs(d), WT_TOL_ELEM * abs);
            if (di_test_failed()) return;
            if (abs > 0 && fabs(d) / abs > worst) worst = fabs(d) / abs;
        }
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    fprintf(stderr, "  %s G=%d R=%d K=%d B=%d M=%d: max |d|/abs-sum %.2e, norm rel %.2e\n", what, G, t->R, K, t->B, M,
            worst, rel);
    CHECK_MSG(rel <= WT_TOL_NORM, "%s M=%d: norm-wise error %.3g", what, M, rel);
}

/* 1 when fast-mode dic_gemm_blockdiag takes a kernel of its own for FP8B (the GEMV at M <= 4, the
 * tensor-core kernel above): the GEMM tolerance, not the BF16 bits */
static int fast_new(const woa_set *t, int op, int mode, int M) {
    if (op != 0 || mode != 0) return 0;
    if (M <= 4) return t->R % 2 == 0;
    return M <= dic_gemm_fp8w_mma_maxm_get() && t->R % 16 == 0 && t->K % 64 == 0;
}

/* newk: fast blockdiag on the kernels of its own where fast_new (tolerance), else on the bitwise path */
static void run_case1(const woa_set *t, int op, int mode, int M, uint64_t *s, int newk) {
    const int G = op == 0 ? t->G : 1, K = t->K;
    const size_t lda = (size_t)G * K + 8, ldc = (size_t)G * t->R + 4;
    uint16_t *A = malloc((size_t)M * lda * 2);
    CHECK(A);
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_normal(s));
    void *dA = gt_to_dev(A, (size_t)M * lda * 2);
    dic_ctx ctx;
    /* room for the groups' BF16 copy (fast mode above the mma's M range converts into the scratch) */
    CHECK(dA && gt_ctx(&ctx, (size_t)t->G * (size_t)t->R * (size_t)t->K * 2 + 4096));
    ctx.batch_invariant = mode;
    float *out32[2];
    uint16_t *out16[2];
    for (int v = 0; v < 2; v++) {
        const dic_wmat *W = v ? t->w8 : t->wbf;
        float *dC = gt_dev_poison((size_t)M * ldc * 4);
        uint16_t *dC16 = gt_dev_poison((size_t)M * ldc * 2);
        CHECK(dC && dC16);
        for (int o = 0; o < 2; o++) {
            float *c32 = o ? NULL : dC;
            uint16_t *c16 = o ? dC16 : NULL;
            if (op == 0) CUDA_SYNC_CHECK(dic_gemm_blockdiag(&ctx, M, dA, lda, G, W, K, 0, c32, c16, ldc));
            else if (op == 1) CUDA_SYNC_CHECK(dic_gemm(&ctx, M, dA, lda, W, 0, c32, c16, ldc));
            else CUDA_SYNC_CHECK(dic_gemm_float_fast_launch(ctx.stream, M, dA, lda, W, c32, c16, ldc, op - 1));
        }
        out32[v] = gt_d2h(dC, (size_t)M * ldc * 4);
        out16[v] = gt_d2h(dC16, (size_t)M * ldc * 2);
        CHECK(out32[v] && out16[v]);
        cudaFree(dC), cudaFree(dC16);
    }
    const int tol = newk && fast_new(t, op, mode, M);
    if (tol) {
        check_tol(t, G, M, A, lda, out32[1], out16[1], out32[0], ldc, M <= 4 ? "blockdiag fp8 gemv" : "blockdiag fp8 mma");
        for (int v = 0; v < 2; v++) free(out32[v]), free(out16[v]);
        free(A);
        cudaFree(dA), cudaFree(ctx.scratch);
        cudaStreamDestroy(ctx.stream);
        return;
    }
    size_t d32 = gt_count_diff_u32(out32[0], out32[1], (size_t)M * ldc);
    size_t d16 = gt_count_diff_u16(out16[0], out16[1], (size_t)M * ldc);
    size_t nz = 0;
    for (size_t i = 0; i < (size_t)M * ldc; i++) nz += out32[0][i] != 0.0f;
    static const char *opn[] = {"blockdiag", "gemm", "gemv", "mma", "mma64", "mma128", "old"};
    fprintf(stderr, "  %s%s G=%d R=%d K=%d B=%d M=%d mode %d: fp32 diffs %zu, bf16 diffs %zu (%zu nonzero)\n", opn[op],
            op == 0 && mode == 0 && M <= 4 ? " (bitwise fp8b gemv)" : op == 0 && mode == 0 ? " (bitwise k_mma F8)" : "",
            G, t->R, K, t->B, M, mode, d32, d16, nz);
    CHECK_MSG(d32 == 0 && d16 == 0, "%s G=%d R=%d K=%d B=%d M=%d mode %d: FP8B differs from BF16 in %zu fp32 / %zu bf16",
              opn[op], G, t->R, K, t->B, M, mode, d32, d16);
    CHECK_MSG(nz > (size_t)M * (size_t)G * (size_t)t->R / 2, "%s M=%d: outputs mostly zero", opn[op], M);
    for (int v = 0; v < 2; v++) free(out32[v]), free(out16[v]);
    free(A);
    cudaFree(dA), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
}

static void run_case(const woa_set *t, int op, int mode, int M, uint64_t *s) {
    if (fast_new(t, op, mode, M)) { /* the FP8 kernel of its own (tolerance), then the bitwise path */
        run_case1(t, op, mode, M, s, 1);
        dic_gemm_fp8w_gemv_enable(0);
        dic_gemm_fp8w_mma_maxm(4);
        dic_gemm_fp8w_via_bf16_enable(0);
        run_case1(t, op, mode, M, s, 0);
        dic_gemm_fp8w_gemv_enable(1);
        dic_gemm_fp8w_mma_maxm(0);
        dic_gemm_fp8w_via_bf16_enable(1);
        return;
    }
    run_case1(t, op, mode, M, s, 1); /* fast mode above the mma's range: the BF16 copy (bitwise) */
    if (op == 0 && mode == 0 && M > 4) { /* and the k_mma F8 tiles it falls back to (bitwise) */
        dic_gemm_fp8w_via_bf16_enable(0);
        run_case1(t, op, mode, M, s, 0);
        dic_gemm_fp8w_via_bf16_enable(1);
    }
}

static const int MS[] = {1, 2, 3, 8, 33, 64, 256};
#define NMS ((int)(sizeof MS / sizeof MS[0]))

TEST(gpu_woa_fp8_v4) { /* V4-Flash wo_a: 8 x [1024, 4096], 128 x 128 blocks, realistic scales */
    uint64_t s = 6001;
    woa_set t;
    set_make(&t, 8, 1024, 4096, 128, 100, 134, &s);
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < NMS; i++) run_case(&t, 0, mode, MS[i], &s);
    set_free(&t);
}

TEST(gpu_woa_fp8_v41) { /* V4.1 blocks 32 x 32 (scales per 32 rows and 32 inputs) */
    uint64_t s = 6002;
    woa_set t;
    set_make(&t, 8, 1024, 4096, 32, 100, 134, &s);
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < NMS; i++) run_case(&t, 0, mode, MS[i], &s);
    set_free(&t);
}

TEST(gpu_woa_fp8_scales) { /* scales 0..200: bf16 subnormal weights (the per-element path), huge ones */
    uint64_t s = 6003;
    woa_set t;
    set_make(&t, 4, 256, 512, 32, 0, 200, &s);
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < NMS; i++) run_case(&t, 0, mode, MS[i], &s);
    set_free(&t);
    set_make(&t, 2, 128, 1024, 128, 0, 12, &s); /* all tiny: every weight near or below 2^-126 */
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < NMS; i++) run_case(&t, 0, mode, MS[i], &s);
    set_free(&t);
}

TEST(gpu_woa_fp8_tails) { /* K tails (K % 128 = 80, K % 64 = 16), 16-blocks; per-group fallback (R % 128) */
    uint64_t s = 6004;
    woa_set t;
    set_make(&t, 3, 128, 208, 16, 110, 130, &s);
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < NMS; i++) run_case(&t, 0, mode, MS[i], &s);
    set_free(&t);
    set_make(&t, 2, 64, 256, 32, 110, 130, &s); /* fast mode M > 4: one dic_gemm per group */
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < NMS; i++) run_case(&t, 0, mode, MS[i], &s);
    set_free(&t);
}

TEST(gpu_woa_fp8_paths) { /* one group through dic_gemm and every forced fast path */
    uint64_t s = 6005;
    woa_set t;
    set_make(&t, 1, 1024, 4096, 128, 100, 134, &s);
    static const int mp[] = {1, 3, 8, 16, 64};
    for (int i = 0; i < 5; i++) {
        for (int mode = 0; mode < 2; mode++) run_case(&t, 1, mode, mp[i], &s);
        for (int op = 2; op <= 6; op++) {
            if (op == 2 && mp[i] > 16) continue; /* the BF16 GEMV takes at most 16 rows */
            run_case(&t, op, 0, mp[i], &s);
        }
    }
    set_free(&t);
    set_make(&t, 1, 200, 336, 16, 110, 130, &s); /* odd N, K % 64 = 16 */
    for (int i = 0; i < 5; i++)
        for (int op = 1; op <= 6; op++) {
            if (op == 2 && mp[i] > 16) continue;
            run_case(&t, op, op == 1 ? 1 : 0, mp[i], &s);
        }
    set_free(&t);
}

/* The FP8 GEMV (dic_gemm_fp8w_gemv.cu) through fast-mode dic_gemm_blockdiag at M = 1..4: within
 * tolerance of the BF16 matrix's fast path (run_case), the same launch twice gives the same
 * bits, and rows do not depend on M (the design keeps every row's chain to itself): the M = 1,
 * 2, 3 outputs equal the first rows of the M = 4 launch bit for bit. */
static void gemv_rows(const woa_set *t, dic_ctx *ctx, int M, const void *dA, size_t lda, size_t ldc, float **out) {
    *out = NULL;
    float *dC = gt_dev_poison((size_t)M * ldc * 4);
    CHECK(dC);
    CUDA_SYNC_CHECK(dic_gemm_blockdiag(ctx, M, dA, lda, t->G, t->w8, t->K, 0, dC, NULL, ldc));
    *out = gt_d2h(dC, (size_t)M * ldc * 4);
    CHECK(*out);
    cudaFree(dC);
}

static void gemv_rows_case(const woa_set *t, uint64_t *s) {
    const size_t lda = (size_t)t->G * t->K + 8, ldc = (size_t)t->G * t->R + 4;
    uint16_t *A = malloc(4 * lda * 2);
    CHECK(A);
    for (size_t i = 0; i < 4 * lda; i++) A[i] = di_f32_to_bf16(gt_normal(s));
    void *dA = gt_to_dev(A, 4 * lda * 2);
    dic_ctx ctx;
    /* room for the groups' BF16 copy (fast mode above the mma's M range converts into the scratch) */
    CHECK(dA && gt_ctx(&ctx, (size_t)t->G * (size_t)t->R * (size_t)t->K * 2 + 4096));
    ctx.batch_invariant = 0;
    float *r4 = NULL, *r4b = NULL;
    gemv_rows(t, &ctx, 4, dA, lda, ldc, &r4);
    gemv_rows(t, &ctx, 4, dA, lda, ldc, &r4b);
    CHECK(r4 && r4b);
    size_t nd = gt_count_diff_u32(r4, r4b, 4 * ldc);
    CHECK_MSG(nd == 0, "fp8 gemv B=%d M=4: second run differs in %zu outputs", t->B, nd);
    for (int M = 1; M <= 3; M++) {
        float *r = NULL;
        gemv_rows(t, &ctx, M, dA, lda, ldc, &r);
        CHECK(r);
        nd = gt_count_diff_u32(r, r4, (size_t)M * ldc);
        fprintf(stderr, "  fp8 gemv B=%d: rows of M=%d vs the first rows of M=4: %zu diffs\n", t->B, M, nd);
        CHECK_MSG(nd == 0, "fp8 gemv B=%d: M=%d rows differ from M=4's in %zu outputs", t->B, M, nd);
        free(r);
    }
    free(r4), free(r4b), free(A);
    cudaFree(dA), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
}

TEST(gpu_woa_fp8_gemv) {
    uint64_t s = 6006;
    woa_set t;
    static const int bl[] = {128, 32}; /* V4, V4.1 */
    for (int b = 0; b < 2; b++) {
        set_make(&t, 8, 1024, 4096, bl[b], 100, 134, &s);
        for (int M = 1; M <= 4; M++) run_case1(&t, 0, 0, M, &s, 1);
        gemv_rows_case(&t, &s);
        set_free(&t);
    }
    set_make(&t, 3, 130, 1552, 16, 100, 134, &s); /* R % 4 = 2, K % 512 = 16 (one lane of the tail slot) */
    for (int M = 1; M <= 4; M++) run_case1(&t, 0, 0, M, &s, 1);
    gemv_rows_case(&t, &s);
    set_free(&t);
}

/* The FP8 tensor-core kernel (dic_gemm_fp8w_mma.cu) through fast-mode dic_gemm_blockdiag: within
 * tolerance of the BF16 matrix's fast path at M = 5..8, 16, 31, 64, 100, 128, 256, 1024 (16 rows
 * per warp up to M = 64, 32 above); the same launch twice gives the same bits. */
static void mma_det_case(const woa_set *t, int M, uint64_t *s) {
    const size_t lda = (size_t)t->G * t->K + 8, ldc = (size_t)t->G * t->R + 4;
    uint16_t *A = malloc((size_t)M * lda * 2);
    CHECK(A);
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_normal(s));
    void *dA = gt_to_dev(A, (size_t)M * lda * 2);
    dic_ctx ctx;
    /* room for the groups' BF16 copy (fast mode above the mma's M range converts into the scratch) */
    CHECK(dA && gt_ctx(&ctx, (size_t)t->G * (size_t)t->R * (size_t)t->K * 2 + 4096));
    ctx.batch_invariant = 0;
    float *r1 = NULL, *r2 = NULL;
    gemv_rows(t, &ctx, M, dA, lda, ldc, &r1);
    gemv_rows(t, &ctx, M, dA, lda, ldc, &r2);
    CHECK(r1 && r2);
    const size_t nd = gt_count_diff_u32(r1, r2, (size_t)M * ldc);
    fprintf(stderr, "  fp8 mma B=%d M=%d: second run differs in %zu outputs\n", t->B, M, nd);
    CHECK_MSG(nd == 0, "fp8 mma B=%d M=%d: second run differs in %zu outputs", t->B, M, nd);
    free(r1), free(r2), free(A);
    cudaFree(dA), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
}

TEST(gpu_woa_fp8_mma) {
    uint64_t s = 6007;
    woa_set t;
    static const int bl[] = {128, 32}; /* V4, V4.1 */
    static const int ms[] = {5, 6, 7, 8, 16, 31, 64, 100, 128};
    for (int b = 0; b < 2; b++) {
        set_make(&t, 8, 1024, 4096, bl[b], 100, 134, &s);
        for (int i = 0; i < (int)(sizeof ms / sizeof *ms); i++) run_case1(&t, 0, 0, ms[i], &s, 1);
        run_case1(&t, 0, 0, 256, &s, 1); /* 32 rows per warp (TPW 2), 4 token chunks */
        if (b == 0) run_case1(&t, 0, 0, 1024, &s, 1);
        mma_det_case(&t, 7, &s);
        mma_det_case(&t, 64, &s);
        set_free(&t);
    }
    set_make(&t, 3, 48, 192, 16, 100, 140, &s); /* small odd shape: 9 row tiles (the last CTA: tiles 9..11 idle), 3 spans (halves of 2 and 1), scales > 134 */
    static const int ms2[] = {5, 13, 70, 128};
    for (int i = 0; i < 4; i++) run_case(&t, 0, 0, ms2[i], &s);
    run_case1(&t, 0, 0, 300, &s, 1); /* R = 48: 16 rows per warp at every M */
    set_free(&t);
}
