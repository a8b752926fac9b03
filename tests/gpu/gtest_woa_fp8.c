/* gtest_woa_fp8.c — FP8 storage, BF16 math (dic.h DIC_WFMT_FP8B, the grouped
 * wo_a on the device): random e4m3 weight groups with random e8m0 block
 * scales, kept as FP8 bytes + scales, against the same groups dequantised on
 * the host to BF16 exactly as the weight loader does (numfmt.c
 * di_dequant_fp8_block, then di_f32_to_bf16) and uploaded as BF16. Every
 * path must give the BF16 matrix's outputs BIT FOR BIT (the in-kernel
 * dequantisation is exact and the sums are the BF16 kernels'):
 *  - dic_gemm_blockdiag in both modes (fast: the GEMV at M <= 4, the
 *    tensor-core tiles above, the per-group fallback; mode 1: per-group
 *    dic_gemm on the CPU-order kernels), fp32 and bf16 outputs, padding
 *    columns untouched, at M = 1, 2, 3, 8, 33, 64, 256;
 *  - dic_gemm of one FP8B group, and every forced fast path
 *    (dic_gemm_float_fast_launch GEMV / MMA64 / MMA128 / OLD);
 *  - V4 blocks (128) and V4.1 blocks (32) with realistic scales (the fast
 *    dequantisation), and scales over [0, 200] (bf16 subnormals: the
 *    per-element path), K tails (K % 128 != 0, K % 64 != 0). */
#include <stdio.h>
#include <string.h>

#include "gpu_util.h"
#include "io/numfmt.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/ops.h"

typedef struct woa_set {
    int G, R, K, B;
    void **dbf, **d8, **ds;     /* device: BF16 rows, e4m3 bytes, scale bytes per group */
    dic_wmat *wbf, *w8;
} woa_set;

static void set_make(woa_set *t, int G, int R, int K, int B, int slo, int shi, uint64_t *s) {
    memset(t, 0, sizeof *t);
    t->G = G, t->R = R, t->K = K, t->B = B;
    t->dbf = calloc((size_t)G, sizeof(void *)), t->d8 = calloc((size_t)G, sizeof(void *));
    t->ds = calloc((size_t)G, sizeof(void *));
    t->wbf = calloc((size_t)G, sizeof(dic_wmat)), t->w8 = calloc((size_t)G, sizeof(dic_wmat));
    const size_t nk = (size_t)R * K, ns = (size_t)((R + B - 1) / B) * (size_t)(K / B);
    uint8_t *w = malloc(nk), *sc = malloc(ns);
    float *f = malloc(nk * 4);
    uint16_t *h = malloc(nk * 2);
    CHECK(w && sc && f && h);
    for (int g = 0; g < G; g++) {
        for (size_t i = 0; i < nk; i++) {
            uint8_t b;
            do b = (uint8_t)gt_rand_u64(s); while ((b & 0x7F) == 0x7F); /* no NaN codes */
            w[i] = b;
        }
        for (size_t i = 0; i < ns; i++) sc[i] = (uint8_t)(slo + (int)(gt_rand_u64(s) % (uint64_t)(shi - slo + 1)));
        di_dequant_fp8_block(w, sc, (size_t)R, (size_t)K, (size_t)B, f);
        for (size_t i = 0; i < nk; i++) h[i] = di_f32_to_bf16(f[i]);
        t->dbf[g] = gt_to_dev(h, nk * 2), t->d8[g] = gt_to_dev(w, nk), t->ds[g] = gt_to_dev(sc, ns);
        CHECK(t->dbf[g] && t->d8[g] && t->ds[g]);
        t->wbf[g] = (dic_wmat){0, R, K, 0, t->dbf[g], NULL};
        t->w8[g] = (dic_wmat){DIC_WFMT_FP8B, R, K, B, t->d8[g], (const uint8_t *)t->ds[g]};
    }
    free(w), free(sc), free(f), free(h);
}

static void set_free(woa_set *t) {
    for (int g = 0; g < t->G; g++) cudaFree(t->dbf[g]), cudaFree(t->d8[g]), cudaFree(t->ds[g]);
    free(t->dbf), free(t->d8), free(t->ds), free(t->wbf), free(t->w8);
}

/* op: 0 blockdiag over all groups; 1 dic_gemm of group 0; 2.. forced fast path (op - 2 + 1 =
 * DIC_GEMMF_PATH_GEMV ..) on group 0. Runs BF16 then FP8B into poisoned outputs, compares
 * the fp32 and the bf16 outputs (with their padding) bit for bit. */
static void run_case(const woa_set *t, int op, int mode, int M, uint64_t *s) {
    const int G = op == 0 ? t->G : 1, K = t->K;
    const size_t lda = (size_t)G * K + 8, ldc = (size_t)G * t->R + 4;
    uint16_t *A = malloc((size_t)M * lda * 2);
    CHECK(A);
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_normal(s));
    void *dA = gt_to_dev(A, (size_t)M * lda * 2);
    dic_ctx ctx;
    CHECK(dA && gt_ctx(&ctx, 256));
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
    size_t d32 = gt_count_diff_u32(out32[0], out32[1], (size_t)M * ldc);
    size_t d16 = gt_count_diff_u16(out16[0], out16[1], (size_t)M * ldc);
    size_t nz = 0;
    for (size_t i = 0; i < (size_t)M * ldc; i++) nz += out32[0][i] != 0.0f;
    static const char *opn[] = {"blockdiag", "gemm", "gemv", "mma", "mma64", "mma128", "old"};
    fprintf(stderr, "  %s G=%d R=%d K=%d B=%d M=%d mode %d: fp32 diffs %zu, bf16 diffs %zu (%zu nonzero)\n", opn[op],
            G, t->R, K, t->B, M, mode, d32, d16, nz);
    CHECK_MSG(d32 == 0 && d16 == 0, "%s G=%d R=%d K=%d B=%d M=%d mode %d: FP8B differs from BF16 in %zu fp32 / %zu bf16",
              opn[op], G, t->R, K, t->B, M, mode, d32, d16);
    CHECK_MSG(nz > (size_t)M * (size_t)G * (size_t)t->R / 2, "%s M=%d: outputs mostly zero", opn[op], M);
    for (int v = 0; v < 2; v++) free(out32[v]), free(out16[v]);
    free(A);
    cudaFree(dA), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
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
