/* gtest_lm_argmax.c — dic_gemm_argmax (dic_gemm_float_fast.cu): the decode lm_head's BF16
 * GEMM with the greedy argmax of its fp32 logits in one launch (fast mode, M <= 8), against
 * the unfused pair it replaces: dic_gemm (the AUTO fast kernels) then dic_argmax on its
 * logits. The logits must be the unfused ones bit for bit (padding columns keep their
 * poison), the ids dic_argmax's exactly (NaN counts as -inf, ties to the lowest id), also on
 * repeated launches and graph replays (the last CTA resets the keys and the counter).
 * Shapes: V = 1000 (not a multiple of any CTA tile) and 129280 (V4's vocabulary), M = 1
 * (the GEMV: not fused below DIC_AM_MINM_DEF, so the unfused pair's ids against a host argmax), 2..4 on the GEMV at small N * K, else the tensor-core tiles; patterns:
 * random, ties (rows of a few distinct weight rows), infinities and NaN (an infinite
 * activation against weights of both signs and zeros), rows that are all -inf / NaN.
 * gpu_graph_*_fast (gtest_graph.c) run the fused path inside recorded decode steps. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_gemm_int.h"

enum { PAT_RANDOM, PAT_TIES, PAT_INF, PAT_NEGINF };

/* One case; returns nothing; CHECKs. */
static void am_case(int M, int V, int K, int pat, size_t pad, uint64_t seed) {
    uint64_t s = seed;
    const size_t lda = (size_t)K + 8, ldc = (size_t)V + pad;
    uint16_t *A = malloc((size_t)M * lda * 2), *W = malloc((size_t)V * K * 2);
    CHECK(A && W);
    if (!A || !W) return;
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_normal(&s));
    if (pat == PAT_TIES) { /* 5 distinct rows: class 0 (zeros) below 0.7 V, classes 1..4 spread above */
        uint16_t *base = malloc((size_t)4 * K * 2);
        gt_fill_bf16(base, (size_t)4 * K, 0.05f, &s);
        for (int n = 0; n < V; n++) {
            uint16_t *row = W + (size_t)n * K;
            if (n < V * 7 / 10) memset(row, 0, (size_t)K * 2);
            else memcpy(row, base + (size_t)((n * 2654435761u >> 7) % 4) * K, (size_t)K * 2);
        }
        free(base);
    } else {
        gt_fill_bf16(W, (size_t)V * K, 0.05f, &s);
    }
    if (pat == PAT_INF || pat == PAT_NEGINF) {
        /* column k = 0 of W: 0 (NaN against an infinite activation) for n % 7 == 0, negative else,
         * positive at three ids (PAT_INF only); activation 0 of row m: +inf (m % 3 == 1), -inf
         * (m % 3 == 2) or finite */
        for (int n = 0; n < V; n++) W[(size_t)n * K] = n % 7 == 0 ? 0 : di_f32_to_bf16(-0.03f);
        if (pat == PAT_INF) {
            const int pos[3] = {V - 5, V / 2 + 3, 333 % V};
            for (int i = 0; i < 3; i++) W[(size_t)pos[i] * K] = di_f32_to_bf16(0.02f);
        }
        for (int m = 0; m < M; m++)
            if (m % 3) A[(size_t)m * lda] = m % 3 == 1 ? 0x7F80 : 0xFF80;
    }
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 0));
    ctx.batch_invariant = 0;
    void *dA = gt_to_dev(A, (size_t)M * lda * 2), *dW = gt_to_dev(W, (size_t)V * K * 2);
    float *dC = gt_dev_poison((size_t)M * ldc * 4), *dR = gt_dev_poison((size_t)M * ldc * 4);
    int32_t *dids = gt_dev_poison((size_t)M * 4), *dref = gt_dev_poison((size_t)M * 4);
    CHECK(dA && dW && dC && dR && dids && dref);
    const dic_wmat dw = {0, V, K, 0, dW, NULL};
    const int ok = dic_gemm_argmax_ok(&ctx, M, dA, lda, &dw, ldc);
    if (!ok && M < DIC_AM_MINM_DEF) {
        /* the product does not fuse the GEMV's argmax at this M: its unfused pair, the ids against a host
         * argmax of the logits (NaN as -inf, ties to the lowest id) */
        CHECK(dic_gemm_argmax(&ctx, M, dA, lda, &dw, dC, ldc, dids) == cudaErrorNotSupported);
        CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, 0, dR, NULL, ldc));
        CUDA_CHECK(dic_argmax(&ctx, M, dR, ldc, V, dref));
        CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        float *R = gt_d2h(dR, (size_t)M * ldc * 4);
        int32_t *ref = gt_d2h(dref, (size_t)M * 4);
        CHECK(R && ref);
        for (int m = 0; R && ref && m < M; m++) {
            int best_i = 0;
            float best = -INFINITY;
            for (int n = 0; n < V; n++) {
                const float v = isnan(R[(size_t)m * ldc + n]) ? -INFINITY : R[(size_t)m * ldc + n];
                if (v > best) best = v, best_i = n;
            }
            CHECK_MSG(ref[m] == best_i, "M=%d V=%d K=%d pattern %d row %d: dic_argmax %d, host %d", M, V, K, pat, m,
                      ref[m], best_i);
        }
        free(R), free(ref);
        goto out;
    }
    CHECK_MSG(ok, "M=%d V=%d K=%d: dic_gemm_argmax_ok refuses the shape", M, V, K);
    if (!ok) goto out;

    /* the unfused pair */
    CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, 0, dR, NULL, ldc));
    CUDA_CHECK(dic_argmax(&ctx, M, dR, ldc, V, dref));
    /* fused */
    CUDA_CHECK(dic_gemm_argmax(&ctx, M, dA, lda, &dw, dC, ldc, dids));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    float *C = gt_d2h(dC, (size_t)M * ldc * 4), *R = gt_d2h(dR, (size_t)M * ldc * 4);
    int32_t *ids = gt_d2h(dids, (size_t)M * 4), *ref = gt_d2h(dref, (size_t)M * 4);
    CHECK(C && R && ids && ref);
    if (C && R && ids && ref) {
        size_t bad = gt_bits("logits fused vs unfused", C, R, (size_t)M, ldc, ldc, 4); /* padding: both poison */
        CHECK_MSG(bad == 0, "M=%d V=%d K=%d pattern %d: %zu logits differ from the unfused GEMM's", M, V, K, pat, bad);
        int nid = 0;
        for (int m = 0; m < M; m++)
            if (ids[m] != ref[m]) {
                if (nid++ < 3) fprintf(stderr, "    row %d: fused id %d, dic_argmax %d\n", m, ids[m], ref[m]);
            }
        CHECK_MSG(nid == 0, "M=%d V=%d K=%d pattern %d: %d ids differ from dic_argmax's", M, V, K, pat, nid);
        fprintf(stderr, "  M=%d V=%-6d K=%-4d pattern %d: ids", M, V, K, pat);
        for (int m = 0; m < M; m++) fprintf(stderr, " %d", ids[m]);
        fprintf(stderr, "\n");
    }
    /* again (the keys and the counter were reset), eagerly twice and as a graph replayed twice */
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeGlobal));
    cudaError_t ce = dic_gemm_argmax(&ctx, M, dA, lda, &dw, dC, ldc, dids);
    CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &g));
    CUDA_CHECK(ce);
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int r = 0; r < 4 && ref; r++) {
        CUDA_CHECK(cudaMemsetAsync(dids, 0xFF, (size_t)M * 4, ctx.stream));
        if (r < 2) CUDA_CHECK(dic_gemm_argmax(&ctx, M, dA, lda, &dw, dC, ldc, dids));
        else CUDA_CHECK(cudaGraphLaunch(ge, ctx.stream));
        CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        int32_t *again = gt_d2h(dids, (size_t)M * 4);
        CHECK(again);
        CHECK_MSG(again && !memcmp(again, ref, (size_t)M * 4), "M=%d V=%d pattern %d: %s %d gives other ids", M, V,
                  pat, r < 2 ? "launch" : "graph replay", r);
        free(again);
    }
    cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
    free(C), free(R), free(ids), free(ref);
out:
    cudaFree(dA), cudaFree(dW), cudaFree(dC), cudaFree(dR), cudaFree(dids), cudaFree(dref);
    cudaStreamDestroy(ctx.stream);
    free(A), free(W);
}

TEST(gpu_lm_argmax_v1000) {
    static const int ms[] = {1, 2, 3, 5, 8};
    for (int p = PAT_RANDOM; p <= PAT_NEGINF; p++)
        for (unsigned i = 0; i < sizeof ms / sizeof *ms; i++) am_case(ms[i], 1000, 256, p, p == PAT_RANDOM ? 3 : 0, 11 + p);
    am_case(1, 1000, 264, PAT_RANDOM, 0, 5); /* K not a multiple of the 64-k chunk */
    am_case(8, 1000, 264, PAT_TIES, 0, 6);
}

TEST(gpu_lm_argmax_v129280) {
    am_case(1, 129280, 256, PAT_RANDOM, 0, 21);
    am_case(1, 129280, 256, PAT_TIES, 0, 22);
    am_case(2, 129280, 256, PAT_TIES, 0, 23);
    am_case(8, 129280, 256, PAT_INF, 0, 24);
    am_case(4, 129280, 256, PAT_RANDOM, 0, 25);
    am_case(1, 8200, 4096, PAT_RANDOM, 0, 26); /* a warp walks 8 batches of chunks, as in the lm_head */
}

/* Where the fused launch does not apply it refuses and launches nothing: mode 1 with a K split, the GEMV below
 * DIC_AM_MINM_DEF, M > DIC_AM_MAXM, other formats, a K split of the tensor-core tiles. */
TEST(gpu_lm_argmax_refusals) {
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 0));
    void *dA = gt_dev_poison((size_t)16 * 4096 * 2), *dW = gt_dev_poison((size_t)1000 * 4096 * 2);
    float *dC = gt_dev_poison((size_t)16 * 1000 * 4);
    int32_t *dids = gt_dev_poison(16 * 4);
    CHECK(dA && dW && dC && dids);
    dic_wmat dw = {0, 1000, 256, 0, dW, NULL};
    CHECK(dic_gemm_argmax_ok(&ctx, 2, dA, 256, &dw, 1000));
    /* mode 1: the tensor-core tiles where the M-free K split is 1 (8 column tiles of 4 k-steps: yes),
     * at every M <= DIC_AM_MAXM; 64 k-steps: the split is 8, refused */
    ctx.batch_invariant = 1;
    CHECK(dic_gemm_argmax_ok(&ctx, 1, dA, 256, &dw, 1000) && dic_gemm_argmax_ok(&ctx, 2, dA, 256, &dw, 1000));
    CHECK(!dic_gemm_argmax_ok(&ctx, DIC_AM_MAXM + 1, dA, 256, &dw, 1000));
    dw.k = 4096;
    CHECK(!dic_gemm_argmax_ok(&ctx, 1, dA, 4096, &dw, 1000));
    CHECK(dic_gemm_argmax(&ctx, 1, dA, 4096, &dw, dC, 1000, dids) == cudaErrorNotSupported);
    dw.k = 256;
    ctx.batch_invariant = 0;
    /* the GEMV fuses from M = DIC_AM_MINM_DEF (the stream kernel at every M: gtest_gemv_stream.c) */
    CHECK(dic_gemm_argmax_ok(&ctx, 1, dA, 256, &dw, 1000) == (1 >= DIC_AM_MINM_DEF));
    CHECK(dic_gemm_argmax_ok(&ctx, 2, dA, 256, &dw, 1000) == (2 >= DIC_AM_MINM_DEF));
    CHECK(!dic_gemm_argmax_ok(&ctx, DIC_AM_MAXM + 1, dA, 256, &dw, 1000));
    dw.k = 4096; /* M = 8: 8 column tiles of 64 k-steps: the mma splits K (S > 1) */
    CHECK(!dic_gemm_argmax_ok(&ctx, 8, dA, 4096, &dw, 1000));
    dw.k = 256, dw.fmt = 1;
    CHECK(!dic_gemm_argmax_ok(&ctx, 1, dA, 256, &dw, 1000));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    CUDA_CHECK(cudaGetLastError());
    cudaFree(dA), cudaFree(dW), cudaFree(dC), cudaFree(dids);
    cudaStreamDestroy(ctx.stream);
}
