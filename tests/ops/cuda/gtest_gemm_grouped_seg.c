/* gtest_gemm_grouped_seg.c — dic_gemm_grouped_seg / dic_gemm2_grouped_seg: each expert's slice
 * bitwise vs dic_gemm on the same rows and within the GEMM tolerance of the CPU's di_gemm
 * (src/ops/cpu/gemm_grouped.c).
 * Outputs poisoned with 0xFF bytes; each test runs all its shapes, prints shape, element and both
 * values of the first mismatches, then fails (split from gtest_model_ops.c by family). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/model_ops_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

/* ---------------------------------------------------- grouped GEMM ---- */

/* Random released-format weights (FP8: e4m3 + e8m0 per BxB block; FP4:
 * packed e2m1 + e8m0 per 32). */
static void gen_w(int fmt, int N, int K, int B, uint8_t **w, size_t *wb, uint8_t **sc, size_t *sb, uint64_t *s) {
    *wb = fmt == DI_WFMT_FP8 ? (size_t)N * K : (size_t)N * K / 2;
    *sb = fmt == DI_WFMT_FP8 ? (size_t)((N + B - 1) / B) * (K / B) : (size_t)N * (K / 32);
    *w = malloc(*wb), *sc = malloc(*sb);
    for (size_t i = 0; i < *wb; i++) {
        uint8_t b = (uint8_t)gt_rand_u64(s);
        if (fmt == DI_WFMT_FP8 && (b & 0x7F) == 0x7F) b ^= 1;
        (*w)[i] = b;
    }
    for (size_t i = 0; i < *sb; i++) (*sc)[i] = (uint8_t)(118 + gt_rand_u64(s) % 12);
}

/* dic_gemm_grouped_seg / dic_gemm2_grouped_seg: each expert's slice bitwise
 * equal to dic_gemm (batch-invariant) on the same rows, within the GEMM
 * tolerance of di_gemm2_grouped, rows past off[E] untouched. */
static void grouped_seg_case(int fmt, int E, int R, int N, int K, int B, int act, uint64_t seed) {
    uint64_t s = seed;
    const int max_rows = R + 7;
    size_t lda = (size_t)K + 16, ldc = (size_t)N + 5;
    uint16_t *A = malloc((size_t)max_rows * lda * 2);
    for (size_t i = 0; i < (size_t)max_rows * lda; i++)
        A[i] = di_f32_to_bf16(gt_rand_unit(&s) * ldexpf(1.0f, urand(&s, 11) - 6));
    int *off = calloc((size_t)E + 1, 4);
    for (int i = 0; i < R; i++) off[1 + (urand(&s, 3) ? urand(&s, E / 4 + 1) : urand(&s, E))]++; /* skewed, gaps */
    for (int e = 0; e < E; e++) off[e + 1] += off[e];
    uint8_t **w1 = malloc((size_t)E * sizeof *w1), **s1 = malloc((size_t)E * sizeof *s1);
    uint8_t **w2 = malloc((size_t)E * sizeof *w2), **s2 = malloc((size_t)E * sizeof *s2);
    dic_wmat *d1 = malloc((size_t)E * sizeof *d1), *d2 = malloc((size_t)E * sizeof *d2);
    di_wmat *p1 = calloc((size_t)E, sizeof *p1), *p2 = calloc((size_t)E, sizeof *p2);
    size_t wb, sb;
    int wblock = fmt == DI_WFMT_FP8 ? B : 32;
    for (int e = 0; e < E; e++) {
        gen_w(fmt, N, K, B, &w1[e], &wb, &s1[e], &sb, &s);
        gen_w(fmt, N, K, B, &w2[e], &wb, &s2[e], &sb, &s);
        d1[e] = (dic_wmat){fmt, N, K, wblock, gt_to_dev(w1[e], wb), gt_to_dev(s1[e], sb)};
        d2[e] = (dic_wmat){fmt, N, K, wblock, gt_to_dev(w2[e], wb), gt_to_dev(s2[e], sb)};
        CHECK(d1[e].w && d1[e].scale && d2[e].w && d2[e].scale);
        CHECK(di_wmat_pack(&p1[e], (di_wfmt)fmt, w1[e], s1[e], N, K, B, NULL) == DEEPINFER_OK);
        CHECK(di_wmat_pack(&p2[e], (di_wfmt)fmt, w2[e], s2[e], N, K, B, NULL) == DEEPINFER_OK);
    }
    /* CPU */
    uint16_t *c1 = malloc((size_t)max_rows * ldc * 2), *c2 = malloc((size_t)max_rows * ldc * 2),
             *c3 = malloc((size_t)max_rows * ldc * 2);
    di_exec x;
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    di_gemm2_grouped(&x, E, p1, p2, off, A, lda, act, c1, c2, ldc);
    di_gemm_grouped(&x, E, p1, off, A, lda, act, c3, ldc);
    di_exec_free(&x);
    /* GPU */
    dic_ctx c;
    CHECK(gt_ctx(&c, dic_gemm_scratch(max_rows, N, K)));
    c.batch_invariant = 1; /* bitwise vs dic_gemm: the invariant kernels (gtest_gemm_f16.c tests the fast ones) */
    void *dA = gt_to_dev(A, (size_t)max_rows * lda * 2);
    int *doff = gt_to_dev(off, ((size_t)E + 1) * 4);
    size_t cb = (size_t)max_rows * ldc * 2;
    uint16_t *g1 = gt_dev_poison(cb), *g2 = gt_dev_poison(cb), *g3 = gt_dev_poison(cb);
    CHECK(dA && doff && g1 && g2 && g3);
    CUDA_SYNC_CHECK(dic_gemm2_grouped_seg(&c, E, d1, d2, doff, max_rows, dA, lda, act, g1, g2, ldc));
    CUDA_SYNC_CHECK(dic_gemm_grouped_seg(&c, E, d1, doff, max_rows, dA, lda, act, g3, ldc));
    uint16_t *h1 = gt_d2h(g1, cb), *h2 = gt_d2h(g2, cb), *h3 = gt_d2h(g3, cb);
    CHECK(h1 && h2 && h3);
    size_t bad_dense = 0, bad_tol = 0, bad_pad = 0;
    double num = 0, den = 0;
    for (int e = 0; e < E; e++) {
        int me = off[e + 1] - off[e];
        if (!me) continue;
        for (int which = 0; which < 2; which++) {
            const dic_wmat *dw = which ? &d2[e] : &d1[e];
            dic_ctx c1x;
            CHECK(gt_ctx(&c1x, dic_gemm_scratch(me, N, K)));
            c1x.batch_invariant = 1;
            uint16_t *dG = gt_dev_poison((size_t)me * N * 2);
            CHECK(dG);
            CUDA_SYNC_CHECK(dic_gemm(&c1x, me, (const uint16_t *)dA + (size_t)off[e] * lda, lda, dw, act, NULL, dG, (size_t)N));
            uint16_t *G = gt_d2h(dG, (size_t)me * N * 2);
            CHECK(G);
            const uint16_t *seg = which ? h2 : h1, *cpu = which ? c2 : c1;
            for (int i = 0; i < me; i++) {
                size_t r = (size_t)off[e] + i;
                float rmax = 0;
                for (int n = 0; n < N; n++) rmax = fmaxf(rmax, fabsf(di_bf16_to_f32(cpu[r * ldc + n])));
                for (int n = 0; n < N; n++) {
                    uint16_t gv = seg[r * ldc + n];
                    if (gv != G[(size_t)i * N + n] || (!which && h3[r * ldc + n] != gv)) {
                        if (bad_dense < 4)
                            fprintf(stderr, "  grouped_seg W%d expert %d row %zu col %d: seg %04x, gemm-only seg %04x, "
                                    "dense dic_gemm %04x\n", which + 1, e, r, n, gv, h3[r * ldc + n], G[(size_t)i * N + n]);
                        bad_dense++;
                    }
                    float a = di_bf16_to_f32(gv), b = di_bf16_to_f32(cpu[r * ldc + n]);
                    if (!(fabsf(a - b) <= 0x1p-7f * fabsf(b) + 1e-3f * rmax)) {
                        if (bad_tol < 4)
                            fprintf(stderr, "  grouped_seg W%d expert %d row %zu col %d: gpu %.7g cpu %.7g\n", which + 1,
                                    e, r, n, a, b);
                        bad_tol++;
                    }
                    num += ((double)a - b) * ((double)a - b), den += (double)b * b;
                }
            }
            cudaFree(dG), cudaFree(c1x.scratch), cudaStreamDestroy(c1x.stream), free(G);
        }
    }
    for (size_t r = 0; r < (size_t)max_rows; r++)
        for (size_t n = 0; n < ldc; n++) {
            int outside = r >= (size_t)off[E] || n >= (size_t)N;
            if (outside && (h1[r * ldc + n] != 0xFFFF || h2[r * ldc + n] != 0xFFFF || h3[r * ldc + n] != 0xFFFF)) {
                if (bad_pad < 4) fprintf(stderr, "  grouped_seg: row %zu col %zu outside the output written\n", r, n);
                bad_pad++;
            }
        }
    fprintf(stderr, "  grouped_seg fmt=%d E=%d R=%d N=%d K=%d: norm rel %.2e vs di_gemm2_grouped\n", fmt, E, R, N, K,
            den > 0 ? sqrt(num / den) : 0.0);
    CHECK_MSG(bad_dense == 0 && bad_tol == 0 && bad_pad == 0,
              "grouped_seg fmt=%d E=%d R=%d N=%d K=%d B=%d act=%d: %zu differ from dic_gemm, %zu outside the CPU "
              "tolerance, %zu padding values written", fmt, E, R, N, K, B, act, bad_dense, bad_tol, bad_pad);
    for (int e = 0; e < E; e++) {
        cudaFree((void *)d1[e].w), cudaFree((void *)d1[e].scale), cudaFree((void *)d2[e].w), cudaFree((void *)d2[e].scale);
        di_wmat_free(&p1[e]), di_wmat_free(&p2[e]);
        free(w1[e]), free(s1[e]), free(w2[e]), free(s2[e]);
    }
    cudaFree(dA), cudaFree(doff), cudaFree(g1), cudaFree(g2), cudaFree(g3), cudaFree(c.scratch);
    cudaStreamDestroy(c.stream);
    free(A), free(off), free(w1), free(s1), free(w2), free(s2), free(d1), free(d2), free(p1), free(p2);
    free(c1), free(c2), free(c3), free(h1), free(h2), free(h3);
}

TEST(gpu_gemm_grouped_seg) {
    grouped_seg_case(DI_WFMT_FP4, 256, 48, 256, 4096, 32, 128, 3001); /* V4 decode, 8 tokens x 6 */
    if (di_test_failed()) return;
    grouped_seg_case(DI_WFMT_FP4, 384, 18, 96, 5120, 32, 32, 3002); /* V4.1 decode */
    if (di_test_failed()) return;
    grouped_seg_case(DI_WFMT_FP8, 16, 1800, 256, 1024, 128, 128, 3003); /* prefill-sized: tiles */
    if (di_test_failed()) return;
    grouped_seg_case(DI_WFMT_FP4, 8, 70, 160, 2304, 32, 32, 3004); /* odd N */
}
