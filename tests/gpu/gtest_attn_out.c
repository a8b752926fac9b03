/* gtest_attn_out.c — the attention output projection in one launch (dic.h dic_attn_out_gemm,
 * dic_attn_out.cu; ops.h di_attn_out_gemm): wo_a groups (FP8B: e4m3 bytes + e8m0 block scales,
 * BF16 math) then wo_b (FP8, z quantised per act_block). For V4-Flash dims (G = 8, R = 1024,
 * K = 4096, d = 4096, blocks 128, act_block 128) and a small odd shape (G = 3, R = 96, K = 192,
 * d = 200, wo_a blocks 64, wo_b blocks 32, act_block 32), at M = 1, 2, 3, 4, 8:
 *  - the fused launch (dic_attn_out_fused, forced up to M = 8) against the fast-mode two-launch
 *    sequence (dic_gemm_blockdiag + dic_gemm): z bitwise at M <= 4 (the same GEMV chain), within
 *    the GEMM tolerance at M = 8; the output within the GEMM tolerance (another fp32 order of the
 *    wo_b sums over the same quantised z);
 *  - against the CPU op (di_attn_out_gemm on packed BF16 wo_a rows and the FP8 wo_b): tolerance;
 *  - run to run bitwise (also after 40 back-to-back launches: the barrier's epoch counter);
 *    row 0 alone = row 0 of the batch, bitwise (rows independent);
 *  - dic_attn_out_gemm in mode 1, with the fusion switched off, and with BF16 wo_a rows (the
 *    fused kernel refuses them): bitwise the two launches of the same mode. */
#include <stdio.h>
#include <string.h>

#include "gpu_util.h"
#include "io/numfmt.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/ops.h"

typedef struct ao_set {
    int G, R, K, N, Ba, Bb, ab;
    uint8_t **wa8, **sa8; /* host wo_a e4m3 / scales per group */
    uint16_t **wabf;      /* host wo_a BF16 rows per group */
    uint8_t *wb8, *sb8;   /* host wo_b */
    dic_wmat *da8, *dabf, db;
    void **dev; /* device buffers to free */
    int ndev;
} ao_set;

static void *ao_dev(ao_set *t, const void *h, size_t n) {
    void *d = gt_to_dev(h, n);
    t->dev[t->ndev++] = d;
    return d;
}

static void ao_make(ao_set *t, int G, int R, int K, int N, int Ba, int Bb, int ab, uint64_t *s) {
    memset(t, 0, sizeof *t);
    t->G = G, t->R = R, t->K = K, t->N = N, t->Ba = Ba, t->Bb = Bb, t->ab = ab;
    t->wa8 = calloc((size_t)G, sizeof(void *)), t->sa8 = calloc((size_t)G, sizeof(void *));
    t->wabf = calloc((size_t)G, sizeof(void *));
    t->da8 = calloc((size_t)G, sizeof(dic_wmat)), t->dabf = calloc((size_t)G, sizeof(dic_wmat));
    t->dev = calloc((size_t)(4 * G + 4), sizeof(void *));
    const size_t nk = (size_t)R * K, ns = (size_t)((R + Ba - 1) / Ba) * (size_t)(K / Ba);
    float *f = malloc(nk * 4);
    for (int g = 0; g < G; g++) {
        t->wa8[g] = malloc(nk), t->sa8[g] = malloc(ns), t->wabf[g] = malloc(nk * 2);
        for (size_t i = 0; i < nk; i++) {
            uint8_t b;
            do b = (uint8_t)gt_rand_u64(s); while ((b & 0x7F) == 0x7F);
            t->wa8[g][i] = b;
        }
        for (size_t i = 0; i < ns; i++) t->sa8[g][i] = (uint8_t)(110 + (int)(gt_rand_u64(s) % 10));
        di_dequant_fp8_block(t->wa8[g], t->sa8[g], (size_t)R, (size_t)K, (size_t)Ba, f);
        for (size_t i = 0; i < nk; i++) t->wabf[g][i] = di_f32_to_bf16(f[i]);
        t->da8[g] = (dic_wmat){DIC_WFMT_FP8B, R, K, Ba, ao_dev(t, t->wa8[g], nk), ao_dev(t, t->sa8[g], ns)};
        t->dabf[g] = (dic_wmat){0, R, K, 0, ao_dev(t, t->wabf[g], nk * 2), NULL};
    }
    free(f);
    const int K2 = G * R;
    const size_t nb = (size_t)N * K2, nsb = (size_t)((N + Bb - 1) / Bb) * (size_t)(K2 / Bb);
    t->wb8 = malloc(nb), t->sb8 = malloc(nsb);
    for (size_t i = 0; i < nb; i++) {
        uint8_t b;
        do b = (uint8_t)gt_rand_u64(s); while ((b & 0x7F) == 0x7F);
        t->wb8[i] = b;
    }
    for (size_t i = 0; i < nsb; i++) t->sb8[i] = (uint8_t)(112 + (int)(gt_rand_u64(s) % 8));
    t->db = (dic_wmat){2, N, K2, Bb, ao_dev(t, t->wb8, nb), ao_dev(t, t->sb8, nsb)};
}

static void ao_free(ao_set *t) {
    for (int i = 0; i < t->ndev; i++) cudaFree(t->dev[i]);
    for (int g = 0; g < t->G; g++) free(t->wa8[g]), free(t->sa8[g]), free(t->wabf[g]);
    free(t->wa8), free(t->sa8), free(t->wabf), free(t->da8), free(t->dabf), free(t->dev), free(t->wb8), free(t->sb8);
}

/* outputs of one call: z [M][ldz], out [M][ldc] on the host (caller frees) */
typedef struct ao_out {
    uint16_t *z, *c;
} ao_out;

/* how: 0 fused launch, 1 dic_gemm_blockdiag + dic_gemm, 2 dic_attn_out_gemm. Poisoned outputs. */
static int ao_run(const ao_set *t, dic_ctx *ctx, int how, int M, const void *dA, size_t lda, const dic_wmat *wa,
                  size_t ldz, size_t ldc, ao_out *o) {
    uint16_t *dZ = gt_dev_poison((size_t)M * ldz * 2), *dC = gt_dev_poison((size_t)M * ldc * 2);
    if (!dZ || !dC) return 0;
    cudaError_t e;
    if (how == 0) e = dic_attn_out_fused(ctx, M, dA, lda, t->G, wa, t->K, &t->db, t->ab, dZ, ldz, dC, ldc);
    else if (how == 1) {
        e = dic_gemm_blockdiag(ctx, M, dA, lda, t->G, wa, t->K, 0, NULL, dZ, ldz);
        if (e == cudaSuccess) e = dic_gemm(ctx, M, dZ, ldz, &t->db, t->ab, NULL, dC, ldc);
    } else e = dic_attn_out_gemm(ctx, M, dA, lda, t->G, wa, t->K, &t->db, t->ab, dZ, ldz, dC, ldc);
    if (e != cudaSuccess || cudaStreamSynchronize(ctx->stream) != cudaSuccess) {
        fprintf(stderr, "  ao_run how %d M=%d: %s\n", how, M, cudaGetErrorString(e != cudaSuccess ? e : cudaGetLastError()));
        cudaFree(dZ), cudaFree(dC);
        return 0;
    }
    o->z = gt_d2h(dZ, (size_t)M * ldz * 2), o->c = gt_d2h(dC, (size_t)M * ldc * 2);
    cudaFree(dZ), cudaFree(dC);
    return o->z && o->c;
}

/* x (bf16 [M][ld], n columns) against y within |d| <= 2^-7 |y| (a bf16 ulp) + tol_abs * absum[m][n] element-wise and
 * rel_norm norm-wise; absum[m * n + j] = sum_k |in_k w_k| (double, host); the padding of x keeps 0xFFFF */
static void ao_close(const char *what, int M, int n, size_t ld, const uint16_t *x, const uint16_t *y,
                     const double *absum, double tol_abs, double rel_norm) {
    double num = 0, den = 0, worst = 0;
    for (int m = 0; m < M; m++) {
        for (size_t j = (size_t)n; j < ld; j++)
            CHECK_MSG(x[m * ld + j] == 0xFFFF, "%s M=%d: padding [%d][%zu] written", what, M, m, j);
        for (int j = 0; j < n; j++) {
            const double a = di_bf16_to_f32(x[m * ld + j]), b = di_bf16_to_f32(y[m * ld + j]);
            const double d = fabs(a - b), lim = 0x1p-7 * fabs(b) + tol_abs * absum[(size_t)m * n + j] + 1e-30;
            CHECK_MSG(a == a, "%s M=%d: [%d][%d] NaN / unwritten", what, M, m, j);
            CHECK_MSG(tol_abs < 0 || d <= lim, "%s M=%d: [%d][%d] %.9g vs %.9g (|d| %.3g > %.3g)", what, M, m, j, a, b, d, lim);
            if (di_test_failed()) return;
            num += (a - b) * (a - b), den += b * b;
            if (absum[(size_t)m * n + j] > 0 && d / absum[(size_t)m * n + j] > worst) worst = d / absum[(size_t)m * n + j];
        }
    }
    const double rel = den > 0 ? sqrt(num / den) : 0;
    fprintf(stderr, "  %s M=%d: max |d|/abs-sum %.2e, norm rel %.2e\n", what, M, worst, rel);
    CHECK_MSG(rel <= rel_norm, "%s M=%d: norm-wise %.3g > %.3g", what, M, rel, rel_norm);
}

/* abs-sums of the two products for the tolerances: za[m][g*R + r] over wo_a (from A),
 * ca[m][n] over wo_b (from z as given, bf16 [M][ldz]) */
static void ao_absums(const ao_set *t, int M, const uint16_t *A, size_t lda, const uint16_t *z, size_t ldz, double *za,
                      double *ca) {
    const int K2 = t->G * t->R;
    float *wf = malloc((size_t)t->N * K2 * 4);
    di_dequant_fp8_block(t->wb8, t->sb8, (size_t)t->N, (size_t)K2, (size_t)t->Bb, wf);
    for (int m = 0; m < M; m++) {
        for (int g = 0; g < t->G; g++)
            for (int r = 0; r < t->R; r++) {
                double s = 0;
                const uint16_t *w = t->wabf[g] + (size_t)r * t->K, *a = A + (size_t)m * lda + (size_t)g * t->K;
                for (int k = 0; k < t->K; k++) s += fabs((double)di_bf16_to_f32(a[k]) * di_bf16_to_f32(w[k]));
                za[(size_t)m * K2 + (size_t)g * t->R + r] = s;
            }
        for (int n = 0; n < t->N; n++) {
            double s = 0;
            for (int k = 0; k < K2; k++) s += fabs((double)di_bf16_to_f32(z[(size_t)m * ldz + k]) * wf[(size_t)n * K2 + k]);
            ca[(size_t)m * t->N + n] = s;
        }
    }
    free(wf);
}

static void ao_case(const ao_set *t, int M, int cpu, uint64_t *s) {
    const int K2 = t->G * t->R;
    const size_t lda = (size_t)t->G * t->K + 8, ldz = (size_t)K2 + 8, ldc = (size_t)t->N + 6;
    uint16_t *A = malloc((size_t)M * lda * 2);
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_normal(s));
    void *dA = gt_to_dev(A, (size_t)M * lda * 2);
    dic_ctx ctx;
    CHECK(dA && gt_ctx(&ctx, dic_gemm_scratch(M, t->N, K2) + (size_t)t->G * t->R * t->K * 2 + 4096));
    dic_attn_out_tune(8, 0); /* the fused launch up to M = 8 */
    ao_out f, f2, r, g1, g0, gb, gbr;
    memset(&f, 0, sizeof f), memset(&f2, 0, sizeof f2), memset(&r, 0, sizeof r);
    memset(&g1, 0, sizeof g1), memset(&g0, 0, sizeof g0), memset(&gb, 0, sizeof gb), memset(&gbr, 0, sizeof gbr);
    CHECK(dic_attn_out_fusable(&ctx, M, dA, lda, t->G, t->da8, t->K, &t->db, t->ab, (const uint16_t *)dA, ldz, ldc));
    CHECK(ao_run(t, &ctx, 0, M, dA, lda, t->da8, ldz, ldc, &f));
    CHECK(ao_run(t, &ctx, 1, M, dA, lda, t->da8, ldz, ldc, &r));
    if (di_test_failed()) goto out;
    { /* z: bitwise the GEMV's at M <= 4 (same chain), tolerance above */
        double *za = malloc((size_t)M * K2 * 8), *ca = malloc((size_t)M * t->N * 8);
        ao_absums(t, M, A, lda, r.z, ldz, za, ca);
        if (M <= 4) {
            size_t dz = gt_bits("z fused vs blockdiag", f.z, r.z, (size_t)M, ldz, ldz, 2);
            CHECK_MSG(dz == 0, "G=%d R=%d M=%d: fused z differs from the GEMV's in %zu values", t->G, t->R, M, dz);
        } else ao_close("z fused vs blockdiag", M, K2, ldz, f.z, r.z, za, 0x1p-10, 2e-3);
        /* the output: same quantised z at M <= 4 (only the wo_b fp32 order differs): element-wise;
         * at M = 8 z's own roundings may move a quantised value by an e4m3 step: norm-wise here, and
         * element-wise against the CPU's wo_b over the fused z below */
        ao_close("out fused vs 2 launches", M, t->N, ldc, f.c, r.c, ca, M <= 4 ? 0x1p-9 : -1.0, M <= 4 ? 4e-3 : 2e-2);
        if (cpu && !di_test_failed()) { /* the CPU op on the BF16 rows + FP8 wo_b */
            di_wmat *pa = calloc((size_t)t->G, sizeof *pa), pb;
            for (int g = 0; g < t->G; g++)
                CHECK(di_wmat_pack(&pa[g], DI_WFMT_BF16, t->wabf[g], NULL, t->R, t->K, 0, NULL) == DEEPINFER_OK);
            CHECK(di_wmat_pack(&pb, DI_WFMT_FP8, t->wb8, t->sb8, t->N, K2, t->Bb, NULL) == DEEPINFER_OK);
            di_exec x;
            CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
            uint16_t *cz = malloc((size_t)M * ldz * 2), *cc = malloc((size_t)M * ldc * 2), *cf = malloc((size_t)M * ldc * 2);
            memset(cz, 0xFF, (size_t)M * ldz * 2), memset(cc, 0xFF, (size_t)M * ldc * 2), memset(cf, 0xFF, (size_t)M * ldc * 2);
            di_attn_out_gemm(&x, M, A, lda, t->G, pa, t->K, &pb, t->ab, cz, ldz, cc, ldc);
            ao_close("z fused vs CPU", M, K2, ldz, f.z, cz, za, 0x1p-10, 2e-3);
            ao_close("out fused vs CPU op", M, t->N, ldc, f.c, cc, ca, -1.0, 2e-2);
            /* phase 2 alone: the CPU's di_gemm over the fused z (same quantised values) */
            double *za2 = malloc((size_t)M * K2 * 8), *ca2 = malloc((size_t)M * t->N * 8);
            ao_absums(t, M, A, lda, f.z, ldz, za2, ca2);
            di_gemm(&x, M, f.z, ldz, &pb, t->ab, NULL, cf, ldc);
            ao_close("out fused vs CPU wo_b(fused z)", M, t->N, ldc, f.c, cf, ca2, 0x1p-9, 4e-3);
            free(za2), free(ca2);
            di_exec_free(&x);
            for (int g = 0; g < t->G; g++) di_wmat_free(&pa[g]);
            di_wmat_free(&pb), free(pa), free(cz), free(cc), free(cf);
        }
        free(za), free(ca);
    }
    if (di_test_failed()) goto out;
    /* determinism: again, and after 40 back-to-back launches (the barrier counter's epochs) */
    for (int i = 0; i < 40; i++)
        CUDA_CHECK(dic_attn_out_fused(&ctx, M, dA, lda, t->G, t->da8, t->K, &t->db, t->ab, (uint16_t *)ctx.scratch,
                                      ldz, (uint16_t *)ctx.scratch + (size_t)M * ldz + 64, ldc));
    CHECK(ao_run(t, &ctx, 0, M, dA, lda, t->da8, ldz, ldc, &f2));
    CHECK(gt_bits("fused run to run z", f.z, f2.z, (size_t)M, ldz, ldz, 2) == 0);
    CHECK(gt_bits("fused run to run out", f.c, f2.c, (size_t)M, ldc, ldc, 2) == 0);
    if (M > 1) { /* row 0 alone */
        ao_out f1;
        memset(&f1, 0, sizeof f1);
        CHECK(ao_run(t, &ctx, 0, 1, dA, lda, t->da8, ldz, ldc, &f1));
        CHECK_MSG(gt_bits("row 0 alone z", f1.z, f.z, 1, ldz, ldz, 2) == 0, "M=%d: row 0's z depends on M", M);
        CHECK_MSG(gt_bits("row 0 alone out", f1.c, f.c, 1, ldc, ldc, 2) == 0, "M=%d: row 0 depends on M", M);
        free(f1.z), free(f1.c);
    }
    /* the op: fast mode = the fused launch; fusion off = the two launches; mode 1 = mode-1 two launches */
    CHECK(ao_run(t, &ctx, 2, M, dA, lda, t->da8, ldz, ldc, &g0));
    CHECK(gt_bits("op fast vs fused", g0.c, f.c, (size_t)M, ldc, ldc, 2) == 0);
    free(g0.z), free(g0.c);
    dic_attn_out_enable(0);
    CHECK(ao_run(t, &ctx, 2, M, dA, lda, t->da8, ldz, ldc, &g0));
    dic_attn_out_enable(1);
    CHECK(gt_bits("op fusion off vs 2 launches", g0.c, r.c, (size_t)M, ldc, ldc, 2) == 0);
    CHECK(gt_bits("op fusion off vs 2 launches (z)", g0.z, r.z, (size_t)M, ldz, ldz, 2) == 0);
    /* BF16 wo_a rows: refused by the fused kernel, the op gives the two launches */
    CHECK(!dic_attn_out_fusable(&ctx, M, dA, lda, t->G, t->dabf, t->K, &t->db, t->ab, (const uint16_t *)dA, ldz, ldc));
    CHECK(ao_run(t, &ctx, 2, M, dA, lda, t->dabf, ldz, ldc, &gb));
    CHECK(ao_run(t, &ctx, 1, M, dA, lda, t->dabf, ldz, ldc, &gbr));
    CHECK(gt_bits("op bf16 rows vs 2 launches", gb.c, gbr.c, (size_t)M, ldc, ldc, 2) == 0);
    ctx.batch_invariant = 1;
    CHECK(ao_run(t, &ctx, 2, M, dA, lda, t->da8, ldz, ldc, &g1));
    free(r.z), free(r.c);
    memset(&r, 0, sizeof r);
    CHECK(ao_run(t, &ctx, 1, M, dA, lda, t->da8, ldz, ldc, &r));
    CHECK(gt_bits("op mode 1 vs 2 launches", g1.c, r.c, (size_t)M, ldc, ldc, 2) == 0);
    CHECK(gt_bits("op mode 1 vs 2 launches (z)", g1.z, r.z, (size_t)M, ldz, ldz, 2) == 0);
    fprintf(stderr, "  G=%d R=%d K=%d N=%d M=%d: fused ok, op paths bitwise\n", t->G, t->R, t->K, t->N, M);
out:
    dic_attn_out_tune(0, 0);
    free(f.z), free(f.c), free(f2.z), free(f2.c), free(r.z), free(r.c), free(g1.z), free(g1.c), free(g0.z), free(g0.c);
    free(gb.z), free(gb.c), free(gbr.z), free(gbr.c);
    free(A);
    cudaFree(dA), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
}

static const int AO_MS[] = {1, 2, 3, 4, 8};

TEST(gpu_attn_out_v4) { /* V4-Flash: G = 8, R = 1024, K = 4096, d = 4096, blocks 128, act_block 128 */
    uint64_t s = 7101;
    dic_attn_out_enable(1); /* opt-in path (off by default: slower than the two launches, GEMM-FLOAT-NOTES) */
    ao_set t;
    ao_make(&t, 8, 1024, 4096, 4096, 128, 128, 128, &s);
    for (int i = 0; i < 5; i++) ao_case(&t, AO_MS[i], AO_MS[i] != 2 && AO_MS[i] != 4, &s);
    ao_free(&t);
}

TEST(gpu_attn_out_odd) { /* small odd shape: K2 = 288 (a 512-k slot's tail), 3 groups, N = 200 */
    uint64_t s = 7102;
    dic_attn_out_enable(1);
    ao_set t;
    ao_make(&t, 3, 96, 192, 200, 64, 32, 32, &s);
    for (int i = 0; i < 5; i++) ao_case(&t, AO_MS[i], 1, &s);
    ao_free(&t);
}
