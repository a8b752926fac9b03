/* gtest_gemv_stream.c — the bulk-copy stream GEMV (dic_gemv_stream.cu, the fast-mode lm_head):
 * - every output against a double-precision reference (|c - ref| <= 1e-5 * sum |a w| + 1e-30), over
 *   the stage geometries (K = 4096: 4 rows per stage; 5120: rows of 10 KB; 272: 8 rows; 16384: one
 *   row, every warp on it), M = 1, 2, N below and above the grid (CTAs without rows), padding columns
 *   (ldc > N) left untouched;
 * - a row's bits do not depend on M (row m of an M-row launch == the 1-row launch of that row);
 * - the fused argmax == dic_argmax on the kernel's own logits (random, ties, +-inf and NaN patterns),
 *   on repeated launches and graph replays (the last CTA resets the keys and the counter);
 * - the AUTO dispatch (dic_gemm, fast mode) and dic_gemm_argmax take it at the lm_head's size
 *   (129280 x 4096) and give its bits; switched off they do not; the refusals. */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_gemm_int.h"

enum { GP_RANDOM, GP_TIES, GP_INF };

typedef struct gs_data {
    int M, N, K;
    size_t lda, ldc;
    uint16_t *A, *W;
    void *dA, *dW;
} gs_data;

static int gs_make(gs_data *d, int M, int N, int K, int pat, uint64_t seed) {
    uint64_t s = seed;
    memset(d, 0, sizeof *d);
    d->M = M, d->N = N, d->K = K, d->lda = (size_t)K + 8, d->ldc = (size_t)N + 5;
    d->A = malloc((size_t)M * d->lda * 2), d->W = malloc((size_t)N * K * 2);
    if (!d->A || !d->W) return 0;
    for (size_t i = 0; i < (size_t)M * d->lda; i++) d->A[i] = di_f32_to_bf16(gt_normal(&s));
    if (pat == GP_TIES) { /* rows from 3 distinct ones: many equal maxima, the lowest column must win */
        uint16_t *base = malloc((size_t)3 * K * 2);
        if (!base) return 0;
        gt_fill_bf16(base, (size_t)3 * K, 0.05f, &s);
        for (int n = 0; n < N; n++) memcpy(d->W + (size_t)n * K, base + (size_t)(n * 7 % 3) * K, (size_t)K * 2);
        free(base);
    } else {
        gt_fill_bf16(d->W, (size_t)N * K, 0.05f, &s);
    }
    if (pat == GP_INF) { /* activation 0 = +inf / -inf / finite by row; weight column 0 zero at n % 5 == 0 (NaN) */
        for (int n = 0; n < N; n++) d->W[(size_t)n * K] = n % 5 == 0 ? 0 : di_f32_to_bf16(n % 2 ? -0.02f : 0.01f);
        for (int m = 0; m < M; m++)
            if (m % 3) d->A[(size_t)m * d->lda] = m % 3 == 1 ? 0x7F80 : 0xFF80;
    }
    d->dA = gt_to_dev(d->A, (size_t)M * d->lda * 2), d->dW = gt_to_dev(d->W, (size_t)N * K * 2);
    return d->dA && d->dW;
}

static void gs_free(gs_data *d) {
    cudaFree(d->dA), cudaFree(d->dW);
    free(d->A), free(d->W);
}

/* C (M x ldc fp32, host) against the double reference; returns the number of bad values */
static size_t gs_check_ref(const gs_data *d, const float *C) {
    size_t bad = 0;
    for (int m = 0; m < d->M; m++)
        for (int n = 0; n < d->N; n++) {
            double ref = 0, mag = 0;
            const uint16_t *a = d->A + (size_t)m * d->lda, *w = d->W + (size_t)n * d->K;
            for (int k = 0; k < d->K; k++) {
                const double p = (double)di_bf16_to_f32(a[k]) * (double)di_bf16_to_f32(w[k]);
                ref += p, mag += fabs(p);
            }
            const double c = C[(size_t)m * d->ldc + n];
            const int ok = ref != ref ? c != c : (isinf(ref) ? c == ref : fabs(c - ref) <= 1e-5 * mag + 1e-30);
            if (!ok && bad++ < 3) fprintf(stderr, "    [%d][%d]: %.9g vs reference %.9g\n", m, n, c, ref);
        }
    for (int m = 0; m < d->M; m++) /* padding: the poison (0xFFFFFFFF) */
        for (size_t n = (size_t)d->N; n < d->ldc; n++) {
            uint32_t u;
            memcpy(&u, &C[(size_t)m * d->ldc + n], 4);
            if (u != 0xFFFFFFFFu && bad++ < 3) fprintf(stderr, "    padding [%d][%zu] written\n", m, n);
        }
    return bad;
}

static void gs_case(int M, int N, int K, uint64_t seed) {
    gs_data d;
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 0));
    const int ok = gs_make(&d, M, N, K, GP_RANDOM, seed);
    CHECK(ok);
    const dic_wmat w = {0, N, K, 0, d.dW, NULL};
    float *dC = gt_dev_poison((size_t)M * d.ldc * 4), *d1 = gt_dev_poison(d.ldc * 4);
    CHECK(dC && d1);
    CHECK_MSG(dic_gemv_stream_fits(M, d.dA, d.lda, &w, d.ldc), "M=%d N=%d K=%d: refused", M, N, K);
    if (!ok || !dC || !d1) goto out;
    CUDA_CHECK(dic_gemv_stream_launch(ctx.stream, ctx.num_sms, M, d.dA, d.lda, &w, dC, d.ldc, NULL));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    float *C = gt_d2h(dC, (size_t)M * d.ldc * 4);
    CHECK(C);
    if (C) {
        const size_t bad = gs_check_ref(&d, C);
        CHECK_MSG(bad == 0, "M=%d N=%d K=%d: %zu values off the reference", M, N, K, bad);
        /* row m alone gives the same bits */
        for (int m = 0; m < M && bad == 0; m++) {
            CUDA_CHECK(dic_gemv_stream_launch(ctx.stream, ctx.num_sms, 1, (const uint16_t *)d.dA + (size_t)m * d.lda,
                                              d.lda, &w, d1, d.ldc, NULL));
            CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
            float *R = gt_d2h(d1, d.ldc * 4);
            CHECK(R);
            if (!R) break;
            const size_t nb = gt_bits("row alone", C + (size_t)m * d.ldc, R, 1, d.ldc, (size_t)N, 4);
            CHECK_MSG(nb == 0, "M=%d N=%d K=%d: row %d differs from its 1-row launch in %zu values", M, N, K, m, nb);
            free(R);
        }
        fprintf(stderr, "  M=%d N=%-6d K=%-5d: %s\n", M, N, K, bad ? "FAIL" : "ok");
    }
    free(C);
out:
    cudaFree(dC), cudaFree(d1);
    gs_free(&d);
    cudaStreamDestroy(ctx.stream);
}

TEST(gpu_gemv_stream_ref) {
    for (int m = 1; m <= DIC_GS_MAXM; m++) gs_case(m, 1000, 4096, 31 + m);
    gs_case(2, 777, 5120, 41);  /* 10 KB rows: 2 per stage (16 warps) or 4 (8 warps) */
    gs_case(2, 300, 272, 42);   /* 8 rows per stage */
    gs_case(2, 50, 16384, 43);  /* one row per stage, 8 warps on it; fewer rows than CTAs */
    gs_case(1, 3, 4096, 44);    /* 3 rows: most CTAs own none */
    gs_case(2, 20011, 4096, 45); /* ~150 rows per CTA: many ring turns, a partial last stage */
}

/* the argmax: ids == dic_argmax over the kernel's own logits; eager twice, graph replayed twice */
static void gs_am_case(int M, int N, int K, int pat, uint64_t seed) {
    gs_data d;
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 0));
    const int ok = gs_make(&d, M, N, K, pat, seed);
    CHECK(ok);
    const dic_wmat w = {0, N, K, 0, d.dW, NULL};
    float *dC = gt_dev_poison((size_t)M * d.ldc * 4), *dR = gt_dev_poison((size_t)M * d.ldc * 4);
    int32_t *dids = gt_dev_poison((size_t)M * 4), *dref = gt_dev_poison((size_t)M * 4);
    CHECK(dC && dR && dids && dref);
    if (!ok || !dC || !dR || !dids || !dref) goto out;
    CUDA_CHECK(dic_gemv_stream_launch(ctx.stream, ctx.num_sms, M, d.dA, d.lda, &w, dR, d.ldc, NULL));
    CUDA_CHECK(dic_argmax(&ctx, M, dR, d.ldc, N, dref));
    CUDA_CHECK(dic_gemv_stream_launch(ctx.stream, ctx.num_sms, M, d.dA, d.lda, &w, dC, d.ldc, dids));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    float *C = gt_d2h(dC, (size_t)M * d.ldc * 4), *R = gt_d2h(dR, (size_t)M * d.ldc * 4);
    int32_t *ref = gt_d2h(dref, (size_t)M * 4), *ids = gt_d2h(dids, (size_t)M * 4);
    CHECK(C && R && ref && ids);
    if (C && R && ref && ids) {
        const size_t bad = gt_bits("logits with ids vs without", C, R, (size_t)M, d.ldc, d.ldc, 4);
        CHECK_MSG(bad == 0, "M=%d N=%d pattern %d: %zu logits differ with the argmax", M, N, pat, bad);
        CHECK_MSG(!memcmp(ids, ref, (size_t)M * 4), "M=%d N=%d pattern %d: ids differ from dic_argmax's", M, N, pat);
        fprintf(stderr, "  argmax M=%d N=%-6d pattern %d: ids", M, N, pat);
        for (int m = 0; m < M; m++) fprintf(stderr, " %d%s", ids[m], ids[m] == ref[m] ? "" : "(!)");
        fprintf(stderr, "\n");
    }
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeGlobal));
    cudaError_t ce = dic_gemv_stream_launch(ctx.stream, ctx.num_sms, M, d.dA, d.lda, &w, dC, d.ldc, dids);
    CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &g));
    CUDA_CHECK(ce);
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int r = 0; r < 4 && ref; r++) {
        CUDA_CHECK(cudaMemsetAsync(dids, 0xFF, (size_t)M * 4, ctx.stream));
        if (r < 2) CUDA_CHECK(dic_gemv_stream_launch(ctx.stream, ctx.num_sms, M, d.dA, d.lda, &w, dC, d.ldc, dids));
        else CUDA_CHECK(cudaGraphLaunch(ge, ctx.stream));
        CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        int32_t *again = gt_d2h(dids, (size_t)M * 4);
        CHECK(again);
        CHECK_MSG(again && !memcmp(again, ref, (size_t)M * 4), "M=%d N=%d pattern %d: %s %d gives other ids", M, N,
                  pat, r < 2 ? "launch" : "graph replay", r);
        free(again);
    }
    cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
    free(C), free(R), free(ref), free(ids);
out:
    cudaFree(dC), cudaFree(dR), cudaFree(dids), cudaFree(dref);
    gs_free(&d);
    cudaStreamDestroy(ctx.stream);
}

TEST(gpu_gemv_stream_argmax) {
    for (int p = GP_RANDOM; p <= GP_INF; p++) {
        gs_am_case(1, 1000, 4096, p, 51 + p);
        gs_am_case(2, 1000, 272, p, 54 + p);
        gs_am_case(2, 20011, 4096, p, 57 + p);
    }
    gs_am_case(2, 7, 4096, GP_TIES, 60); /* fewer rows than CTAs */
}

/* The lm_head's size: the AUTO dispatch and dic_gemm_argmax take the stream kernel (same bits,
 * same ids as dic_argmax); refusals. */
TEST(gpu_gemv_stream_dispatch) {
    const int N = 129280, K = 4096;
    gs_data d;
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 0));
    const int ok = gs_make(&d, 2, N, K, GP_RANDOM, 71);
    CHECK(ok);
    const dic_wmat w = {0, N, K, 0, d.dW, NULL};
    float *dS = gt_dev_poison(2 * d.ldc * 4), *dG = gt_dev_poison(2 * d.ldc * 4), *dF = gt_dev_poison(2 * d.ldc * 4);
    int32_t *dids = gt_dev_poison(2 * 4), *dref = gt_dev_poison(2 * 4);
    CHECK(dS && dG && dF && dids && dref);
    if (!ok || !dS || !dG || !dF || !dids || !dref) goto out;
    for (int M = 1; M <= 2; M++) {
        CHECK(dic_gemv_stream_auto(M, d.dA, d.lda, &w, d.ldc));
        CHECK_MSG(dic_gemm_argmax_ok(&ctx, M, d.dA, d.lda, &w, d.ldc), "M=%d: the fused lm_head refused", M);
        CUDA_CHECK(dic_gemv_stream_launch(ctx.stream, ctx.num_sms, M, d.dA, d.lda, &w, dS, d.ldc, NULL));
        CUDA_CHECK(dic_gemm(&ctx, M, d.dA, d.lda, &w, 0, dG, NULL, d.ldc));
        CUDA_CHECK(dic_argmax(&ctx, M, dS, d.ldc, N, dref));
        CUDA_CHECK(dic_gemm_argmax(&ctx, M, d.dA, d.lda, &w, dF, d.ldc, dids));
        CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        float *S = gt_d2h(dS, (size_t)M * d.ldc * 4), *G = gt_d2h(dG, (size_t)M * d.ldc * 4);
        float *F = gt_d2h(dF, (size_t)M * d.ldc * 4);
        int32_t *ids = gt_d2h(dids, (size_t)M * 4), *ref = gt_d2h(dref, (size_t)M * 4);
        CHECK(S && G && F && ids && ref);
        if (S && G && F && ids && ref) {
            CHECK_MSG(gt_bits("AUTO vs stream", G, S, (size_t)M, d.ldc, (size_t)N, 4) == 0,
                      "M=%d: dic_gemm's AUTO logits are not the stream kernel's", M);
            CHECK_MSG(gt_bits("fused vs stream", F, S, (size_t)M, d.ldc, (size_t)N, 4) == 0,
                      "M=%d: dic_gemm_argmax's logits are not the stream kernel's", M);
            CHECK_MSG(!memcmp(ids, ref, (size_t)M * 4), "M=%d: fused ids differ from dic_argmax's", M);
            if (M == 1) { /* one row against the double reference (the whole matrix: ~0.5 G products) */
                gs_data one = d;
                one.M = 1;
                CHECK_MSG(gs_check_ref(&one, S) == 0, "lm_head size: values off the reference");
            }
        }
        free(S), free(G), free(F), free(ids), free(ref);
    }
    /* refusals */
    dic_wmat bad = w;
    bad.fmt = 1;
    CHECK(!dic_gemv_stream_fits(1, d.dA, d.lda, &bad, d.ldc));
    bad = w, bad.k = 4100;
    CHECK(!dic_gemv_stream_fits(1, d.dA, d.lda, &bad, d.ldc));
    CHECK(!dic_gemv_stream_fits(DIC_GS_MAXM + 1, d.dA, d.lda, &w, d.ldc));
    CHECK(!dic_gemv_stream_fits(1, (const uint16_t *)d.dA + 4, d.lda, &w, d.ldc));
    CHECK(!dic_gemv_stream_fits(1, d.dA, d.lda, &w, (size_t)N - 1));
    bad = w, bad.k = 5120; /* V4.1's lm_head: 20 KB stages, measured slower: not the AUTO dispatch's */
    CHECK(dic_gemv_stream_fits(1, d.dA, d.lda, &bad, d.ldc) && !dic_gemv_stream_auto(1, d.dA, d.lda, &bad, d.ldc));
    bad = w, bad.n = 1000; /* small matrices: not the AUTO dispatch's */
    CHECK(dic_gemv_stream_fits(1, d.dA, d.lda, &bad, d.ldc) && !dic_gemv_stream_auto(1, d.dA, d.lda, &bad, d.ldc));
    ctx.batch_invariant = 1; /* mode 1 fuses on the tensor-core tiles instead (gtest_gemm_inv_float.c) */
    CHECK(dic_gemm_argmax_ok(&ctx, 1, d.dA, d.lda, &w, d.ldc));
    CUDA_CHECK(cudaGetLastError());
out:
    cudaFree(dS), cudaFree(dG), cudaFree(dF), cudaFree(dids), cudaFree(dref);
    gs_free(&d);
    cudaStreamDestroy(ctx.stream);
}
