/* gtest_gemm_inv_float.c — the batch-invariant (default) mode's BF16 / FP8B weight GEMMs
 * (dic_gemm_float_fast.cu dic_gemm_float_inv_launch, dic_gemm_blockdiag, dic_gemm_argmax;
 * docs/determinism.md sec. 7) at the V4-Flash and V4.1 shapes:
 *  - row invariance: every row of a launch at M = 1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65,
 *    128, 129, 300, 2048 (rows drawn at random from a pool of up to 160, so each row has other
 *    random rows around it) equals bit for bit the same row computed alone (M = 1), fp32 and bf16 outputs;
 *  - tolerance: the rows computed alone against a double reference over the exact BF16 weights,
 *    every sampled element |d| <= 2^-10 sum_k |a_k w_k| and norm-wise <= 1e-4 (the fast float
 *    GEMMs' bounds, gtest_gemm_fast_float.c);
 *  - the fused lm_head argmax (dic_gemm_argmax) in this mode: its logits equal dic_gemm's bit for bit
 *    and its ids are the first maximum of those logits.
 * Shapes: compressor wkv (N = 512 / 1024, K = d), indexer wproj (N = 64 / 32, K = d), the indexer
 * compressor's wk (N = 128, K = 512), wo_a (8 FP8B groups of 1024 x 4096: V4 128-blocks, V4.1
 * 32-blocks; and one FP8B group through dic_gemm), lm_head (N = 129280, M <= 65). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/numfmt.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/gpu_util.h"
#include "ops/ops.h"

#define IV_TOL_ELEM 0x1p-10
#define IV_TOL_NORM 1e-4

static const int IV_MS[] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 300, 2048};

/* One product under test: G groups (G = 1: dic_gemm; G > 1: dic_gemm_blockdiag, group g reads
 * activation columns g * K ..), each R x K, device weights W[g]; host BF16 values hw[g] (R x K). */
typedef struct iv_op {
    int G, R, K;
    const dic_wmat *W;
    uint16_t *const *hw;
    const char *name;
} iv_op;

static void iv_launch(dic_ctx *ctx, const iv_op *op, int M, const void *dA, size_t lda, float *c32, uint16_t *c16,
                      size_t ldc) {
    if (op->G == 1) CUDA_SYNC_CHECK(dic_gemm(ctx, M, dA, lda, op->W, 0, c32, c16, ldc));
    else CUDA_SYNC_CHECK(dic_gemm_blockdiag(ctx, M, dA, lda, op->G, op->W, op->K, 0, c32, c16, ldc));
}

/* Rows of the pool P (host, P x lda) through one launch of M rows idx[0..M): fp32 and bf16 outputs. */
static void iv_run(dic_ctx *ctx, const iv_op *op, const uint16_t *P, size_t lda, const int *idx, int M, size_t ldc,
                   float **o32, uint16_t **o16) {
    uint16_t *A = malloc((size_t)M * lda * 2);
    CHECK(A);
    for (int m = 0; m < M; m++) memcpy(A + (size_t)m * lda, P + (size_t)idx[m] * lda, lda * 2);
    void *dA = gt_to_dev(A, (size_t)M * lda * 2);
    float *dC = gt_dev_poison((size_t)M * ldc * 4);
    uint16_t *dC16 = gt_dev_poison((size_t)M * ldc * 2);
    CHECK(dA && dC && dC16);
    iv_launch(ctx, op, M, dA, lda, dC, NULL, ldc);
    iv_launch(ctx, op, M, dA, lda, NULL, dC16, ldc);
    *o32 = gt_d2h(dC, (size_t)M * ldc * 4);
    *o16 = gt_d2h(dC16, (size_t)M * ldc * 2);
    CHECK(*o32 && *o16);
    cudaFree(dA), cudaFree(dC), cudaFree(dC16);
    free(A);
}

/* The rows computed alone (pool row p: alone32[p], alone16[p]) against the double reference. */
static void iv_tol(const iv_op *op, const uint16_t *P, size_t lda, int np, float *const *alone32,
                   uint16_t *const *alone16, size_t ldc) {
    const int N = op->G * op->R, K = op->K;
    const long long step = (long long)((double)np * N * K / 1.5e8) + 1;
    double num = 0, den = 0, worst = 0;
    long long cnt = 0;
    for (int p = 0; p < np; p++) {
        const uint16_t *a = P + (size_t)p * lda;
        for (int n = 0; n < N; n++) {
            const float v = alone32[p][n];
            CHECK_MSG(v == v, "%s: row %d col %d NaN / unwritten", op->name, p, n);
            CHECK_MSG(alone16[p][n] == di_f32_to_bf16(v), "%s: bf16 out [%d][%d] 0x%04x != bf16(%a)", op->name, p, n,
                      alone16[p][n], v);
            for (size_t c = (size_t)N; c < ldc; c++)
                CHECK_MSG(di_f32_bits(alone32[p][c]) == 0xFFFFFFFFu, "%s: padding column %zu written", op->name, c);
            if (di_test_failed()) return;
            if (cnt++ % step) continue;
            const int g = n / op->R, r = n % op->R;
            const uint16_t *w = op->hw[g] + (size_t)r * K, *ag = a + (size_t)g * K;
            double ref = 0, abs = 0;
            for (int k = 0; k < K; k++) {
                const double t = (double)di_bf16_to_f32(ag[k]) * di_bf16_to_f32(w[k]);
                ref += t, abs += fabs(t);
            }
            const double d = v - ref;
            num += d * d, den += ref * ref;
            CHECK_MSG(fabs(d) <= IV_TOL_ELEM * abs + 1e-30, "%s: row %d col %d gpu %.9g ref %.9g (|d| %.3g > %.3g)",
                      op->name, p, n, v, ref, fabs(d), IV_TOL_ELEM * abs);
            if (di_test_failed()) return;
            if (abs > 0 && fabs(d) / abs > worst) worst = fabs(d) / abs;
        }
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    fprintf(stderr, "  inv %s: alone rows vs double: max |d|/abs-sum %.2e, norm rel %.2e\n", op->name, worst, rel);
    CHECK_MSG(rel <= IV_TOL_NORM, "%s: norm-wise error %.3g", op->name, rel);
}

/* The whole check for one product up to maxm rows (the entries of IV_MS not above it). */
static void iv_case(const iv_op *op, int maxm, uint64_t *s) {
    const int N = op->G * op->R;
    const size_t lda = (size_t)op->G * op->K + 8, ldc = (size_t)N + 3;
    const int np = maxm < 160 ? maxm : 160; /* pool rows (a launch of M rows draws M of them at random) */
    uint16_t *P = malloc((size_t)np * lda * 2);
    CHECK(P);
    for (size_t i = 0; i < (size_t)np * lda; i++) P[i] = di_f32_to_bf16(gt_normal(s));
    dic_ctx ctx;
    /* room for the FP8B groups' BF16 copy (dic_gemm_blockdiag at large M) */
    CHECK(gt_ctx(&ctx, op->W[0].fmt == DIC_WFMT_FP8B ? (size_t)op->G * op->R * op->K * 2 + 4096 : 4096));
    ctx.batch_invariant = 1;
    float **a32 = calloc((size_t)np, sizeof(float *));
    uint16_t **a16 = calloc((size_t)np, sizeof(uint16_t *));
    CHECK(a32 && a16);
    for (int p = 0; p < np; p++) iv_run(&ctx, op, P, lda, &p, 1, ldc, &a32[p], &a16[p]);
    iv_tol(op, P, lda, np < 24 ? np : 24, a32, a16, ldc);
    int *idx = malloc((size_t)maxm * sizeof(int));
    CHECK(idx);
    for (size_t t = 0; t < sizeof IV_MS / sizeof IV_MS[0] && !di_test_failed(); t++) {
        const int M = IV_MS[t];
        if (M > maxm) break;
        for (int m = 0; m < M; m++) idx[m] = (int)(gt_rand_u64(s) % (uint64_t)np);
        float *c32;
        uint16_t *c16;
        iv_run(&ctx, op, P, lda, idx, M, ldc, &c32, &c16);
        size_t bad = 0;
        int first = -1;
        for (int m = 0; m < M; m++) {
            const size_t d = gt_count_diff_u32(c32 + (size_t)m * ldc, a32[idx[m]], ldc) +
                             gt_count_diff_u16(c16 + (size_t)m * ldc, a16[idx[m]], ldc);
            if (d && first < 0) first = m;
            bad += d;
        }
        CHECK_MSG(bad == 0, "%s M=%d: %zu outputs differ from the rows computed alone (first row %d, pool row %d)",
                  op->name, M, bad, first, first >= 0 ? idx[first] : -1);
        free(c32), free(c16);
    }
    fprintf(stderr, "  inv %s: M = 1 .. %d, every row bitwise its own\n", op->name, maxm);
    for (int p = 0; p < np; p++) free(a32[p]), free(a16[p]);
    free(a32), free(a16), free(idx), free(P);
    cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
}

/* A BF16 matrix (or G FP8B groups with B x B e8m0 blocks when B > 0) of R x K per group, host BF16 values. */
typedef struct iv_mat {
    int G;
    dic_wmat W[8];
    uint16_t *hw[8];
    void *dev[16];
} iv_mat;

static void mat_make(iv_mat *t, int G, int R, int K, int B, uint64_t *s) {
    memset(t, 0, sizeof *t);
    t->G = G;
    const size_t nk = (size_t)R * K;
    for (int g = 0; g < G; g++) {
        t->hw[g] = malloc(nk * 2);
        CHECK(t->hw[g]);
        if (B == 0) {
            gt_fill_bf16(t->hw[g], nk, 0.05f, s);
            t->dev[2 * g] = gt_to_dev(t->hw[g], nk * 2);
            CHECK(t->dev[2 * g]);
            t->W[g] = (dic_wmat){0, R, K, 0, t->dev[2 * g], NULL};
            continue;
        }
        /* e8m0 scales 2^-9 .. 2^-4 */
        CHECK(gt_fp8b_make(R, K, B, 118, 123, s, t->hw[g], &t->dev[2 * g], &t->dev[2 * g + 1], &t->W[g]));
    }
}

static void mat_free(iv_mat *t) {
    for (int g = 0; g < t->G; g++) free(t->hw[g]), cudaFree(t->dev[2 * g]), cudaFree(t->dev[2 * g + 1]);
}

static void iv_shape(const char *name, int G, int R, int K, int B, int maxm, uint64_t seed) {
    uint64_t s = seed;
    iv_mat t;
    mat_make(&t, G, R, K, B, &s);
    const iv_op op = {G, R, K, t.W, t.hw, name};
    if (!di_test_failed()) iv_case(&op, maxm, &s);
    mat_free(&t);
}

TEST(gpu_gemm_inv_bf16_v4) { /* V4-Flash (d = 4096) BF16 GEMMs */
    iv_shape("V4 compressor wkv 512x4096", 1, 512, 4096, 0, 2048, 11);
    iv_shape("V4 compressor wkv 1024x4096", 1, 1024, 4096, 0, 2048, 12);
    iv_shape("V4 indexer wproj 64x4096", 1, 64, 4096, 0, 2048, 13);
    iv_shape("V4 indexer compressor wk 128x512", 1, 128, 512, 0, 2048, 14);
}

TEST(gpu_gemm_inv_bf16_v41) { /* V4.1 (d = 5120) BF16 GEMMs */
    iv_shape("V4.1 compressor wkv 512x5120", 1, 512, 5120, 0, 2048, 21);
    iv_shape("V4.1 compressor wkv 1024x5120", 1, 1024, 5120, 0, 2048, 22);
    iv_shape("V4.1 indexer wproj 32x5120", 1, 32, 5120, 0, 2048, 23);
    iv_shape("odd 200x1000", 1, 200, 1000, 0, 300, 24); /* column and k tails */
}

TEST(gpu_gemm_inv_lm_head) { /* lm_head: N = 129280, rows up to 65 (the decode and verify rows) */
    iv_shape("V4 lm_head 129280x4096", 1, 129280, 4096, 0, 65, 31);
    iv_shape("V4.1 lm_head 129280x5120", 1, 129280, 5120, 0, 65, 32);
}

TEST(gpu_gemm_inv_woa_fp8b) { /* wo_a: 8 FP8B groups of 1024 x 4096 (V4 128-blocks, V4.1 32-blocks) */
    iv_shape("V4 wo_a fp8b 8x1024x4096 B128", 8, 1024, 4096, 128, 2048, 41);
    iv_shape("V4.1 wo_a fp8b 8x1024x4096 B32", 8, 1024, 4096, 32, 2048, 42);
    iv_shape("one fp8b group 1024x4096 B128 (dic_gemm)", 1, 1024, 4096, 128, 300, 43);
}

/* dic_gemm_argmax in the invariant mode: logits bitwise dic_gemm's, ids their first maximum. */
TEST(gpu_gemm_inv_lm_argmax) {
    uint64_t s = 51;
    const int Ks[2] = {4096, 5120}, N = 129280;
    for (int ki = 0; ki < 2 && !di_test_failed(); ki++) {
        const int K = Ks[ki];
        iv_mat t;
        mat_make(&t, 1, N, K, 0, &s);
        dic_ctx ctx;
        CHECK(gt_ctx(&ctx, 4096));
        ctx.batch_invariant = 1;
        for (int M = 1; M <= DIC_AM_MAXM && !di_test_failed(); M++) {
            const size_t lda = (size_t)K, ldc = (size_t)N;
            uint16_t *A = malloc((size_t)M * lda * 2);
            CHECK(A);
            for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_normal(&s));
            void *dA = gt_to_dev(A, (size_t)M * lda * 2);
            float *d1 = gt_dev_poison((size_t)M * ldc * 4), *d2 = gt_dev_poison((size_t)M * ldc * 4);
            int32_t *dids = gt_dev_poison((size_t)M * 4);
            CHECK(dA && d1 && d2 && dids);
            CHECK_MSG(dic_gemm_argmax_ok(&ctx, M, dA, lda, t.W, ldc), "K=%d M=%d: no fused argmax in mode 1", K, M);
            CUDA_SYNC_CHECK(dic_gemm(&ctx, M, dA, lda, t.W, 0, d1, NULL, ldc));
            CUDA_SYNC_CHECK(dic_gemm_argmax(&ctx, M, dA, lda, t.W, d2, ldc, dids));
            float *c1 = gt_d2h(d1, (size_t)M * ldc * 4), *c2 = gt_d2h(d2, (size_t)M * ldc * 4);
            int32_t *ids = gt_d2h(dids, (size_t)M * 4);
            CHECK(c1 && c2 && ids);
            const size_t nd = gt_count_diff_u32(c1, c2, (size_t)M * ldc);
            CHECK_MSG(nd == 0, "K=%d M=%d: fused logits differ from dic_gemm in %zu", K, M, nd);
            for (int m = 0; m < M; m++) {
                int best = 0;
                for (int n = 1; n < N; n++)
                    if (c1[(size_t)m * ldc + n] > c1[(size_t)m * ldc + best]) best = n;
                CHECK_MSG(ids[m] == best, "K=%d M=%d row %d: id %d, first maximum %d", K, M, m, ids[m], best);
            }
            free(A), free(c1), free(c2), free(ids);
            cudaFree(dA), cudaFree(d1), cudaFree(d2), cudaFree(dids);
        }
        cudaFree(ctx.scratch);
        cudaStreamDestroy(ctx.stream);
        mat_free(&t);
    }
}
