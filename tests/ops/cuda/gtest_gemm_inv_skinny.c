/* gtest_gemm_inv_skinny.c — the batch-invariant mode's skinny BF16 / FP8B GEMM (dic_gemm_float_skinny.cu,
 * M <= DIC_SKINNY_MAXM; docs/kernels/gemm-float.md) against the k_mma product it replaces
 * (dic_gemm_skinny_enable(0)), at the V4-Flash and V4.1-Flash BF16 / FP8B shapes:
 *  - dispatch: at M = 1 .. 16 dic_gemm / dic_gemm_blockdiag in mode 1 launch the skinny kernel (its
 *    launch counter moves), at M = 17 and with it disabled they do not;
 *  - bits: at every M = 1 .. 17 (rows drawn at random from a pool, so each row has other random rows
 *    around it) the outputs, fp32 and bf16, equal k_mma's bit for bit (poisoned outputs: every element
 *    written, nothing past N), and every row equals the same row computed alone (M = 1);
 *  - tolerance: sampled outputs of the rows alone against a double reference over the exact BF16
 *    weights (|d| <= 2^-10 sum |a w|, gtest_gemm_inv_float.c's bound);
 *  - geometry: forced warps per CTA, n8 tiles per unit and units per warp (dic_gemm_skinny_tune) give the
 *    same bits (k_mma's) at M = 1, 5, 16;
 *  - lm_head: the fused greedy argmax (dic_gemm_argmax) at M = 1 .. 8 takes the skinny kernel; its
 *    logits equal dic_gemm's and k_mma's bit for bit and its ids are their first maximum.
 * Shapes (docs/architecture.md sec. 2.5, 2.6): compressor wkv / wgate (1024 / 512 x d), the indexer's
 * compressor (256 x 4096), indexer weights_proj (64 x 4096, 32 x 5120), router gates (384 / 128 x 5120),
 * indexer wk (128 x 512), the DSpark confidence head (1 x 5376) and markov head (129280 x 256), wo_a (8
 * FP8B groups of 1024 x 4096, V4 128- and V4.1 32-blocks; one FP8B group through dic_gemm), lm_head
 * (129280 x 4096 / 5120), and a shape with column and k tails (203 x 1000). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/numfmt.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/gpu_util.h"
#include "ops/ops.h"

#define SK_TOL_ELEM 0x1p-10
#define SK_MAXM 17 /* DIC_SKINNY_MAXM + 1: the dispatch boundary */
#define SK_POOL 24

/* The weights of one product: G groups of R x K (BF16, or FP8B with B x B blocks when B > 0), on the
 * device, and (small shapes) their exact BF16 values on the host. */
typedef struct sk_mat {
    int G, R, K, B;
    dic_wmat W[8];
    uint16_t *hw[8]; /* NULL: not kept (lm_head sizes) */
    void *dev[16];
} sk_mat;

/* bf16 bits with |w| in [2^-7, 2^-3), random sign and mantissa (no float conversion: fast at lm_head sizes) */
static void sk_fill_w(uint16_t *w, size_t n, uint64_t *s) {
    for (size_t i = 0; i < n; i++) {
        const uint64_t r = gt_rand_u64(s);
        w[i] = (uint16_t)((r & 0x8000u) | ((120u + (unsigned)((r >> 16) & 3u)) << 7) | (r & 0x7Fu));
    }
}

static void sk_make(sk_mat *t, int G, int R, int K, int B, int keep, uint64_t *s) {
    memset(t, 0, sizeof *t);
    t->G = G, t->R = R, t->K = K, t->B = B;
    const size_t nk = (size_t)R * K;
    for (int g = 0; g < G; g++) {
        if (B == 0) {
            uint16_t *h = malloc(nk * 2);
            CHECK(h);
            sk_fill_w(h, nk, s);
            t->dev[2 * g] = gt_to_dev(h, nk * 2);
            CHECK(t->dev[2 * g]);
            t->W[g] = (dic_wmat){0, R, K, 0, t->dev[2 * g], NULL};
            if (keep) t->hw[g] = h;
            else free(h);
            continue;
        }
        t->hw[g] = malloc(nk * 2);
        CHECK(t->hw[g]);
        /* e8m0 scales 2^-9 .. 2^-4 */
        CHECK(gt_fp8b_make(R, K, B, 118, 123, s, t->hw[g], &t->dev[2 * g], &t->dev[2 * g + 1], &t->W[g]));
    }
}

static void sk_free(sk_mat *t) {
    for (int g = 0; g < t->G; g++) free(t->hw[g]), cudaFree(t->dev[2 * g]), cudaFree(t->dev[2 * g + 1]);
}

static void sk_launch(dic_ctx *ctx, const sk_mat *t, int M, const void *dA, size_t lda, float *c32, uint16_t *c16,
                      size_t ldc) {
    if (t->G == 1) CUDA_SYNC_CHECK(dic_gemm(ctx, M, dA, lda, t->W, 0, c32, c16, ldc));
    else CUDA_SYNC_CHECK(dic_gemm_blockdiag(ctx, M, dA, lda, t->G, t->W, t->K, 0, c32, c16, ldc));
}

/* Rows idx[0..M) of the pool P through one launch, fp32 and bf16 out; *nsk: skinny launches made. */
static void sk_run(dic_ctx *ctx, const sk_mat *t, const uint16_t *P, size_t lda, const int *idx, int M, size_t ldc,
                   float **o32, uint16_t **o16, unsigned long long *nsk) {
    uint16_t *A = malloc((size_t)M * lda * 2);
    CHECK(A);
    for (int m = 0; m < M; m++) memcpy(A + (size_t)m * lda, P + (size_t)idx[m] * lda, lda * 2);
    void *dA = gt_to_dev(A, (size_t)M * lda * 2);
    float *dC = gt_dev_poison((size_t)M * ldc * 4);
    uint16_t *dC16 = gt_dev_poison((size_t)M * ldc * 2);
    CHECK(dA && dC && dC16);
    const unsigned long long n0 = dic_gemm_skinny_launches();
    sk_launch(ctx, t, M, dA, lda, dC, NULL, ldc);
    sk_launch(ctx, t, M, dA, lda, NULL, dC16, ldc);
    *nsk = dic_gemm_skinny_launches() - n0;
    *o32 = gt_d2h(dC, (size_t)M * ldc * 4);
    *o16 = gt_d2h(dC16, (size_t)M * ldc * 2);
    CHECK(*o32 && *o16);
    cudaFree(dA), cudaFree(dC), cudaFree(dC16);
    free(A);
}

/* Sampled outputs of the rows alone against the double reference (needs the host weights). */
static void sk_tol(const sk_mat *t, const char *name, const uint16_t *P, size_t lda, float *const *alone,
                   int np) {
    const int N = t->G * t->R, K = t->K;
    const long long step = (long long)np * N / 4000 + 1;
    long long cnt = 0;
    for (int p = 0; p < np; p++)
        for (int n = 0; n < N; n++) {
            if (cnt++ % step) continue;
            const int g = n / t->R, r = n % t->R;
            const uint16_t *w = t->hw[g] + (size_t)r * K, *a = P + (size_t)p * lda + (size_t)g * K;
            double ref = 0, abs = 0;
            for (int k = 0; k < K; k++) {
                const double x = (double)di_bf16_to_f32(a[k]) * di_bf16_to_f32(w[k]);
                ref += x, abs += fabs(x);
            }
            const double d = fabs(alone[p][n] - ref);
            CHECK_MSG(d <= SK_TOL_ELEM * abs + 1e-30, "%s: row %d col %d gpu %.9g ref %.9g (|d| %.3g > %.3g)", name,
                      p, n, alone[p][n], ref, d, SK_TOL_ELEM * abs);
            if (di_test_failed()) return;
        }
}

/* The whole check of one product at M = 1 .. maxm (maxm <= SK_MAXM). */
static void sk_case(const char *name, const sk_mat *t, int maxm, uint64_t *s) {
    const int N = t->G * t->R;
    const size_t lda = (size_t)t->G * t->K + 8, ldc = (size_t)N + 3;
    uint16_t *P = malloc((size_t)SK_POOL * lda * 2);
    CHECK(P);
    for (size_t i = 0; i < (size_t)SK_POOL * lda; i++) P[i] = di_f32_to_bf16(gt_normal(s));
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 4096));
    ctx.batch_invariant = 1;
    dic_gemm_skinny_enable(1);
    float *a32[SK_POOL];
    uint16_t *a16[SK_POOL];
    unsigned long long nsk = 0;
    for (int p = 0; p < SK_POOL; p++) {
        sk_run(&ctx, t, P, lda, &p, 1, ldc, &a32[p], &a16[p], &nsk);
        if (di_test_failed()) return;
        CHECK_MSG(nsk == 2, "%s: M=1 did not take the skinny kernel (%llu launches)", name, nsk);
        if (di_test_failed()) return;
    }
    if (t->hw[0]) sk_tol(t, name, P, lda, a32, 4);
    int idx[SK_MAXM];
    for (int M = 1; M <= maxm && !di_test_failed(); M++) {
        for (int m = 0; m < M; m++) idx[m] = (int)(gt_rand_u64(s) % SK_POOL);
        float *c32, *k32;
        uint16_t *c16, *k16;
        dic_gemm_skinny_enable(1);
        sk_run(&ctx, t, P, lda, idx, M, ldc, &c32, &c16, &nsk);
        if (di_test_failed()) return;
        const int skm = t->G > 1 ? DIC_SKINNY_BLOCKDIAG_MAXM : DIC_SKINNY_MAXM;
        CHECK_MSG(nsk == (M <= skm ? 2u : 0u), "%s M=%d: %llu skinny launches", name, M, nsk);
        dic_gemm_skinny_enable(0);
        sk_run(&ctx, t, P, lda, idx, M, ldc, &k32, &k16, &nsk);
        if (di_test_failed()) return;
        CHECK_MSG(nsk == 0, "%s M=%d: skinny launched while disabled", name, M);
        dic_gemm_skinny_enable(1);
        const size_t dk = gt_count_diff_u32(c32, k32, (size_t)M * ldc) + gt_count_diff_u16(c16, k16, (size_t)M * ldc);
        CHECK_MSG(dk == 0, "%s M=%d: %zu outputs differ from k_mma's mode-1 product", name, M, dk);
        size_t bad = 0;
        int first = -1;
        for (int m = 0; m < M; m++) {
            const size_t d = gt_count_diff_u32(c32 + (size_t)m * ldc, a32[idx[m]], ldc) +
                             gt_count_diff_u16(c16 + (size_t)m * ldc, a16[idx[m]], ldc);
            if (d && first < 0) first = m;
            bad += d;
        }
        CHECK_MSG(bad == 0, "%s M=%d: %zu outputs differ from the rows alone (first row %d)", name, M, bad, first);
        free(c32), free(c16), free(k32), free(k16);
    }
    if (!di_test_failed()) fprintf(stderr, "  skinny %s: M = 1 .. %d = k_mma mode 1 bitwise, rows alone\n", name, maxm);
    for (int p = 0; p < SK_POOL; p++) free(a32[p]), free(a16[p]);
    free(P);
    cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
}

static void sk_shape(const char *name, int G, int R, int K, int B, uint64_t seed) {
    uint64_t s = seed;
    sk_mat t;
    sk_make(&t, G, R, K, B, 1, &s);
    if (!di_test_failed()) sk_case(name, &t, SK_MAXM, &s);
    sk_free(&t);
}

/* dic_gemm_argmax in mode 1 at M = 1 .. DIC_AM_MAXM: the skinny kernel; logits = dic_gemm's = k_mma's,
 * ids = their first maximum. */
static void sk_argmax(const char *name, const sk_mat *t, uint64_t *s) {
    const int N = t->R, K = t->K;
    const size_t lda = (size_t)K, ldc = (size_t)N;
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 4096));
    ctx.batch_invariant = 1;
    for (int M = 1; M <= DIC_AM_MAXM && !di_test_failed(); M++) {
        uint16_t *A = malloc((size_t)M * lda * 2);
        CHECK(A);
        for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_normal(s));
        void *dA = gt_to_dev(A, (size_t)M * lda * 2);
        float *d1 = gt_dev_poison((size_t)M * ldc * 4), *d2 = gt_dev_poison((size_t)M * ldc * 4);
        float *d3 = gt_dev_poison((size_t)M * ldc * 4);
        int32_t *dids = gt_dev_poison((size_t)M * 4);
        CHECK(dA && d1 && d2 && d3 && dids);
        dic_gemm_skinny_enable(1);
        CHECK_MSG(dic_gemm_argmax_ok(&ctx, M, dA, lda, t->W, ldc), "%s M=%d: no fused argmax in mode 1", name, M);
        CUDA_SYNC_CHECK(dic_gemm(&ctx, M, dA, lda, t->W, 0, d1, NULL, ldc));
        const unsigned long long n0 = dic_gemm_skinny_launches();
        CUDA_SYNC_CHECK(dic_gemm_argmax(&ctx, M, dA, lda, t->W, d2, ldc, dids));
        CHECK_MSG(dic_gemm_skinny_launches() == n0 + 1, "%s M=%d: the fused argmax did not take the skinny kernel",
                  name, M);
        dic_gemm_skinny_enable(0);
        CUDA_SYNC_CHECK(dic_gemm(&ctx, M, dA, lda, t->W, 0, d3, NULL, ldc));
        dic_gemm_skinny_enable(1);
        float *c1 = gt_d2h(d1, (size_t)M * ldc * 4), *c2 = gt_d2h(d2, (size_t)M * ldc * 4);
        float *c3 = gt_d2h(d3, (size_t)M * ldc * 4);
        int32_t *ids = gt_d2h(dids, (size_t)M * 4);
        CHECK(c1 && c2 && c3 && ids);
        const size_t nd = gt_count_diff_u32(c1, c2, (size_t)M * ldc), nk = gt_count_diff_u32(c1, c3, (size_t)M * ldc);
        CHECK_MSG(nd == 0, "%s M=%d: fused logits differ from dic_gemm in %zu", name, M, nd);
        CHECK_MSG(nk == 0, "%s M=%d: skinny logits differ from k_mma's in %zu", name, M, nk);
        for (int m = 0; m < M; m++) {
            int best = 0;
            for (int n = 1; n < N; n++)
                if (c1[(size_t)m * ldc + n] > c1[(size_t)m * ldc + best]) best = n;
            CHECK_MSG(ids[m] == best, "%s M=%d row %d: id %d, first maximum %d", name, M, m, ids[m], best);
        }
        free(A), free(c1), free(c2), free(c3), free(ids);
        cudaFree(dA), cudaFree(d1), cudaFree(d2), cudaFree(d3), cudaFree(dids);
    }
    if (!di_test_failed()) fprintf(stderr, "  skinny %s: fused argmax M = 1 .. %d\n", name, DIC_AM_MAXM);
    cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
}

static void sk_lm(const char *name, int K, uint64_t seed) {
    uint64_t s = seed;
    sk_mat t;
    sk_make(&t, 1, 129280, K, 0, 0, &s);
    if (!di_test_failed()) sk_case(name, &t, SK_MAXM, &s);
    if (!di_test_failed()) sk_argmax(name, &t, &s);
    sk_free(&t);
}

TEST(gpu_gemm_inv_skinny_v4) { /* V4-Flash (d = 4096) BF16 GEMMs */
    sk_shape("V4 compressor wkv 1024x4096", 1, 1024, 4096, 0, 101);
    sk_shape("V4 compressor wkv 512x4096", 1, 512, 4096, 0, 102);
    sk_shape("V4 indexer compressor 256x4096 (and router gate)", 1, 256, 4096, 0, 103);
    sk_shape("V4 indexer wproj 64x4096", 1, 64, 4096, 0, 104);
    sk_shape("odd 203x1000 (column and k tails)", 1, 203, 1000, 0, 105);
}

TEST(gpu_gemm_inv_skinny_v41) { /* V4.1 (d = 5120) BF16 GEMMs */
    sk_shape("V4.1 compressor 1024x5120", 1, 1024, 5120, 0, 111);
    sk_shape("V4.1 compressor wkv 512x5120", 1, 512, 5120, 0, 112);
    sk_shape("V4.1 router gate 384x5120", 1, 384, 5120, 0, 113);
    sk_shape("V4.1 DSpark gate 128x5120", 1, 128, 5120, 0, 114);
    sk_shape("V4.1 indexer wproj 32x5120", 1, 32, 5120, 0, 115);
    sk_shape("V4.1 indexer wk 128x512", 1, 128, 512, 0, 116);
    sk_shape("V4.1 DSpark confidence head 1x5376", 1, 1, 5376, 0, 117);
    sk_shape("V4.1 DSpark markov head 129280x256", 1, 129280, 256, 0, 118);
}

TEST(gpu_gemm_inv_skinny_fp8b) { /* wo_a: 8 FP8B groups (dic_gemm_blockdiag), one group through dic_gemm */
    sk_shape("V4 wo_a fp8b 8x1024x4096 B128", 8, 1024, 4096, 128, 121);
    sk_shape("V4.1 wo_a fp8b 8x1024x4096 B32", 8, 1024, 4096, 32, 122);
    sk_shape("one fp8b group 1024x4096 B128 (dic_gemm)", 1, 1024, 4096, 128, 123);
}

TEST(gpu_gemm_inv_skinny_lm_v4) { /* V4 lm_head 129280 x 4096, and its fused argmax */
    sk_lm("V4 lm_head 129280x4096", 4096, 131);
}

TEST(gpu_gemm_inv_skinny_lm_v41) { /* V4.1 lm_head 129280 x 5120 and its fused argmax */
    sk_lm("V4.1 lm_head 129280x5120", 5120, 141);
}

/* Forced geometries (warps per CTA, n8 tiles per unit, units per warp) change no bit: k_mma's outputs at
 * M = 1, 5, 16, split (S = 8, S = 4 over 8 groups) and unsplit (S = 1) launches. */
TEST(gpu_gemm_inv_skinny_tunings) {
    static const int tw[][3] = {{1, 1, 1}, {4, 2, 2}, {16, 2, 0}, {2, 1, 3}, {8, 1, 0}, {0, 2, 5}};
    static const struct { const char *name; int G, R, K, B; } sh[] = {
        {"1024x4096", 1, 1024, 4096, 0}, {"wo_a fp8b 8x1024x4096 B128", 8, 1024, 4096, 128},
        {"markov 129280x256", 1, 129280, 256, 0}, {"203x1000", 1, 203, 1000, 0}};
    static const int ms[3] = {1, 5, 16};
    uint64_t s = 151;
    for (unsigned j = 0; j < sizeof sh / sizeof *sh && !di_test_failed(); j++) {
        sk_mat t;
        sk_make(&t, sh[j].G, sh[j].R, sh[j].K, sh[j].B, 0, &s);
        const int N = sh[j].G * sh[j].R;
        const size_t lda = (size_t)sh[j].G * sh[j].K, ldc = (size_t)N;
        dic_ctx ctx;
        CHECK(gt_ctx(&ctx, 4096));
        ctx.batch_invariant = 1;
        uint16_t *P = malloc((size_t)16 * lda * 2);
        CHECK(P);
        for (size_t i = 0; i < (size_t)16 * lda; i++) P[i] = di_f32_to_bf16(gt_normal(&s));
        const int idx[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
        for (int mi = 0; mi < 3 && !di_test_failed(); mi++) {
            /* wo_a (block-diagonal) takes the skinny kernel to DIC_SKINNY_BLOCKDIAG_MAXM rows */
            const int M = sh[j].G > 1 && ms[mi] > DIC_SKINNY_BLOCKDIAG_MAXM ? DIC_SKINNY_BLOCKDIAG_MAXM : ms[mi];
            float *k32, *c32;
            uint16_t *k16, *c16;
            unsigned long long nsk;
            dic_gemm_skinny_enable(0);
            sk_run(&ctx, &t, P, lda, idx, M, ldc, &k32, &k16, &nsk);
            dic_gemm_skinny_enable(1);
            if (di_test_failed()) return;
            for (unsigned v = 0; v < sizeof tw / sizeof *tw && !di_test_failed(); v++) {
                dic_gemm_skinny_tune(tw[v][0], tw[v][1], tw[v][2]);
                sk_run(&ctx, &t, P, lda, idx, M, ldc, &c32, &c16, &nsk);
                dic_gemm_skinny_tune(0, 0, 0);
                if (di_test_failed()) return;
                const size_t d =
                    gt_count_diff_u32(c32, k32, (size_t)M * ldc) + gt_count_diff_u16(c16, k16, (size_t)M * ldc);
                CHECK_MSG(nsk == 2 || (tw[v][0] && nsk == 0), "%s M=%d tune %d/%d/%d: %llu skinny launches",
                          sh[j].name, M, tw[v][0], tw[v][1], tw[v][2], nsk);
                CHECK_MSG(d == 0, "%s M=%d tune %d/%d/%d: %zu outputs differ from k_mma's", sh[j].name, M, tw[v][0],
                          tw[v][1], tw[v][2], d);
                free(c32), free(c16);
            }
            free(k32), free(k16);
        }
        if (!di_test_failed()) fprintf(stderr, "  skinny %s: forced geometries = k_mma bitwise\n", sh[j].name);
        free(P);
        cudaFree(ctx.scratch);
        cudaStreamDestroy(ctx.stream);
        sk_free(&t);
    }
}
