/* gtest_gemm_f16.c — the fast-mode FP8 / FP4 kernels (dic_gemm_f16.cu, a
 * dic_ctx with batch_invariant = 0) against the CPU:
 *  - dic_gemm: every element within 2^-10 of the absolute-value sum of its
 *    exact terms (double reference over the CPU-quantised activations),
 *    norm-wise <= 1e-4 vs that reference and vs di_gemm (gtest_gemm.c's FP8
 *    tolerance); bf16 output = bf16(fp32 output); padding columns untouched;
 *    two runs bitwise equal; a row alone (M = 1) bitwise equal to the same
 *    row inside M <= 64 rows;
 *  - dic_gemm_grouped (rows[] indirection) and dic_gemm2_grouped_seg
 *    (gathered rows): every routed row against di_gemm on its expert's rows
 *    (bf16 tolerance of gtest_gemm.c's grouped test), experts with no rows,
 *    max_rows above the routed rows, two runs bitwise equal, rows and
 *    columns outside the output keep their poison. */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gemm_ref.h"
#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

#define TOL_ELEM 0x1p-10
#define TOL_NORM 1e-4

static void f_gen_weights(int fmt, int N, int K, int B, uint8_t **w, size_t *wb, uint8_t **sc, size_t *sb, uint64_t *s) {
    *wb = fmt == DI_WFMT_FP8 ? (size_t)N * K : (size_t)N * K / 2;
    *sb = fmt == DI_WFMT_FP8 ? (size_t)((N + B - 1) / B) * (K / B) : (size_t)N * (K / 32);
    *w = malloc(*wb);
    *sc = malloc(*sb);
    for (size_t i = 0; i < *wb; i++) {
        uint8_t b = (uint8_t)gt_rand_u64(s);
        if (fmt == DI_WFMT_FP8 && (b & 0x7F) == 0x7F) b ^= 1;
        (*w)[i] = b;
    }
    for (size_t i = 0; i < *sb; i++) (*sc)[i] = (uint8_t)(118 + gt_rand_u64(s) % 12);
}
static float f_wv(int fmt, const uint8_t *w, int K, int n, int k) {
    if (fmt == DI_WFMT_FP8) return di_e4m3_to_f32(w[(size_t)n * K + k]);
    uint8_t b = w[(size_t)n * (K / 2) + k / 2];
    return di_e2m1_to_f32((k & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15));
}
static float f_wsc(int fmt, const uint8_t *sc, int K, int B, int n, int k) {
    if (fmt == DI_WFMT_FP8) return di_e8m0_to_f32(sc[(size_t)(n / B) * (K / B) + k / B]);
    return di_e8m0_to_f32(sc[(size_t)n * (K / 32) + k / 32]);
}

/* ---- dense ----------------------------------------------------------------- */

static void f16_case(int fmt, int M, int N, int K, int B, int act, uint64_t seed) {
    uint64_t s = seed;
    size_t lda = (size_t)K + 8, ldc = (size_t)N + 3;
    uint16_t *A = malloc((size_t)M * lda * 2);
    fill_act(A, M, K, lda, act, &s);
    uint8_t *w, *sc;
    size_t wb, sb;
    f_gen_weights(fmt, N, K, B, &w, &wb, &sc, &sb, &s);
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, dic_gemm_scratch(M, N, K)));
    ctx.batch_invariant = 0;
    void *dA = gt_to_dev(A, (size_t)M * lda * 2), *dW = gt_to_dev(w, wb), *dS = gt_to_dev(sc, sb);
    float *dC = gt_dev_poison((size_t)M * ldc * 4), *dC2 = gt_dev_poison((size_t)M * ldc * 4);
    uint16_t *dC16 = gt_dev_poison((size_t)M * ldc * 2);
    CHECK(dA && dW && dS && dC && dC2 && dC16);
    dic_wmat dw = {fmt, N, K, fmt == DI_WFMT_FP8 ? B : 32, dW, dS};
    CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, act, dC, NULL, ldc));
    CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, act, NULL, dC16, ldc));
    CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, act, dC2, NULL, ldc));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    float *C = gt_d2h(dC, (size_t)M * ldc * 4), *C2 = gt_d2h(dC2, (size_t)M * ldc * 4);
    uint16_t *C16 = gt_d2h(dC16, (size_t)M * ldc * 2);
    CHECK(C && C2 && C16);
    size_t nd = gt_count_diff_u32(C, C2, (size_t)M * ldc);
    CHECK_MSG(nd == 0, "f16 %d M=%d N=%d K=%d: two runs differ in %zu outputs", fmt, M, N, K, nd);
    if (M > 1 && M <= 64) { /* the last row alone: same bits */
        const int r = M - 1;
        float *d1 = gt_dev_poison(ldc * 4);
        CHECK(d1);
        CUDA_SYNC_CHECK(dic_gemm(&ctx, 1, (const uint16_t *)dA + (size_t)r * lda, lda, &dw, act, d1, NULL, ldc));
        float *c1 = gt_d2h(d1, ldc * 4);
        CHECK(c1);
        size_t d = gt_count_diff_u32(c1, C + (size_t)r * ldc, (size_t)N);
        CHECK_MSG(d == 0, "f16 %d M=%d N=%d K=%d: row %d alone differs in %zu outputs", fmt, M, N, K, r, d);
        cudaFree(d1), free(c1);
    }
    di_wmat pw;
    di_exec x;
    CHECK(di_wmat_pack(&pw, (di_wfmt)fmt, w, sc, N, K, B, NULL) == DEEPINFER_OK);
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    float *R = malloc((size_t)M * ldc * 4);
    di_gemm(&x, M, A, lda, &pw, act, R, NULL, ldc);
    int kb = fmt == DI_WFMT_FP8 ? (act < B ? act : B) : 32;
    float *q = malloc((size_t)K * 4), *sa = malloc((size_t)(K / act) * 4);
    double num = 0, den = 0, num2 = 0, worst = 0;
    long long step = (double)M * N * K > 2e9 ? 5 : 1, cnt = 0;
    for (int m = 0; m < M; m++) {
        for (size_t n = (size_t)N; n < ldc; n++)
            CHECK_MSG(di_f32_bits(C[m * ldc + n]) == 0xFFFFFFFFu && C16[m * ldc + n] == 0xFFFF,
                      "f16 %d M=%d N=%d: padding column %zu of row %d written", fmt, M, N, n, m);
        ref_quant_row(A + (size_t)m * lda, K, act, q, sa);
        for (int n = 0; n < N; n++) {
            size_t i = (size_t)m * ldc + n;
            CHECK_MSG(C[i] == C[i], "f16 %d M=%d N=%d K=%d: C[%d][%d] NaN / unwritten", fmt, M, N, K, m, n);
            CHECK_MSG(C16[i] == di_f32_to_bf16(C[i]), "f16 %d M=%d: bf16 out [%d][%d] 0x%04x != bf16(%a)", fmt, M, m,
                      n, C16[i], C[i]);
            if (di_test_failed()) goto done;
            if (cnt++ % step) continue;
            double ref = 0, abs = 0;
            for (int k0 = 0; k0 < K; k0 += kb) {
                double p = 0, pa = 0;
                for (int k = k0; k < k0 + kb; k++) {
                    double t = (double)q[k] * f_wv(fmt, w, K, n, k);
                    p += t, pa += fabs(t);
                }
                double f = (double)sa[k0 / act] * f_wsc(fmt, sc, K, B, n, k0);
                ref += p * f, abs += pa * f;
            }
            double e = fabs(C[i] - ref);
            CHECK_MSG(e <= TOL_ELEM * abs + 1e-30, "f16 %d M=%d N=%d K=%d B=%d act=%d: C[%d][%d] = %.9g, ref %.9g",
                      fmt, M, N, K, B, act, m, n, C[i], ref);
            if (di_test_failed()) goto done;
            if (abs > 0 && e / abs > worst) worst = e / abs;
            num += e * e, den += ref * ref;
            num2 += ((double)C[i] - R[i]) * ((double)C[i] - R[i]);
        }
    }
    {
        double rel = sqrt(num / den), rel2 = sqrt(num2 / den);
        fprintf(stderr, "  f16 %s M=%d N=%d K=%d B=%d act=%d: max err/abs-sum %.2e; norm rel %.2e vs double, %.2e vs di_gemm\n",
                fmt == DI_WFMT_FP8 ? "FP8" : "FP4", M, N, K, B, act, worst, rel, rel2);
        CHECK_MSG(rel <= TOL_NORM && rel2 <= TOL_NORM, "f16 %d M=%d N=%d K=%d: norm error %.3g / %.3g", fmt, M, N, K,
                  rel, rel2);
    }
done:
    di_wmat_free(&pw);
    di_exec_free(&x);
    cudaFree(dA), cudaFree(dW), cudaFree(dS), cudaFree(dC), cudaFree(dC2), cudaFree(dC16), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(A), free(w), free(sc), free(C), free(C2), free(C16), free(R), free(q), free(sa);
}

static const int f16_ms[] = {1, 3, 8, 17, 64};

TEST(gpu_gemm_f16_fp8) {
    for (unsigned i = 0; i < sizeof f16_ms / sizeof *f16_ms; i++) {
        f16_case(DI_WFMT_FP8, f16_ms[i], 1000, 4096, 128, 128, 100 + i); /* V4 blocks, N % 64 != 0 */
        if (di_test_failed()) return;
        f16_case(DI_WFMT_FP8, f16_ms[i], 77, 1120, 32, 32, 200 + i); /* V4.1 blocks, K % 128 != 0 */
        if (di_test_failed()) return;
    }
    f16_case(DI_WFMT_FP8, 5, 200, 1024, 32, 128, 301); /* kb = 32 < act */
    if (di_test_failed()) return;
    f16_case(DI_WFMT_FP8, 9, 200, 1024, 128, 64, 302); /* kb = 64 */
    if (di_test_failed()) return;
    f16_case(DI_WFMT_FP8, 2, 4096, 8192, 128, 128, 303); /* wo_b: split K */
    if (di_test_failed()) return;
    f16_case(DI_WFMT_FP8, 1, 1000, 256, 64, 64, 304); /* one chunk, V4.1 64 blocks */
}

TEST(gpu_gemm_f16_fp4) {
    for (unsigned i = 0; i < sizeof f16_ms / sizeof *f16_ms; i++) {
        f16_case(DI_WFMT_FP4, f16_ms[i], 2048, 4096, 32, 128, 400 + i); /* V4 w1 */
        if (di_test_failed()) return;
        f16_case(DI_WFMT_FP4, f16_ms[i], 333, 2304, 32, 32, 500 + i); /* V4.1 */
        if (di_test_failed()) return;
        f16_case(DI_WFMT_FP4, f16_ms[i], 40, 1056, 32, 32, 600 + i); /* K = 33 * 32 */
        if (di_test_failed()) return;
    }
    f16_case(DI_WFMT_FP4, 100, 300, 2048, 32, 128, 700); /* M > 64: 64-row tiles, the splits walked in each CTA */
    if (di_test_failed()) return;
    f16_case(DI_WFMT_FP4, 1024, 136, 1024, 32, 32, 701);
}

/* ---- grouped ----------------------------------------------------------------- */

static void f16_grouped_case(int fmt, int E, int T, int N, int K, int B, int act, int extra, uint64_t seed) {
    uint64_t s = seed;
    const int k = 6, R = T * k, max_rows = R + extra;
    size_t lda = (size_t)K + 16, ldc = (size_t)N + 5;
    uint16_t *A = malloc((size_t)max_rows * lda * 2);
    fill_act(A, max_rows, K, lda, act, &s);
    int *sel = malloc((size_t)R * sizeof(int));
    for (int t = 0; t < T; t++)
        for (int j = 0; j < k; j++) {
            int e, dup;
            do {
                e = (int)(gt_rand_u64(&s) % (uint64_t)E);
                dup = e % 5 == 3 && E > 5; /* some experts never chosen */
                for (int j2 = 0; j2 < j; j2++) dup |= sel[t * k + j2] == e;
            } while (dup);
            sel[t * k + j] = e;
        }
    int *off = calloc((size_t)E + 1, sizeof(int)), *rows = malloc((size_t)max_rows * sizeof(int));
    for (int i = 0; i < R; i++) off[sel[i] + 1]++;
    for (int e = 0; e < E; e++) off[e + 1] += off[e];
    int *fillc = calloc((size_t)E, sizeof(int));
    for (int i = 0; i < R; i++) rows[off[sel[i]] + fillc[sel[i]]++] = i;
    for (int i = R; i < max_rows; i++) rows[i] = -1000000;
    /* gathered copy for the seg form: row p = A row rows[p] */
    uint16_t *Ag = malloc((size_t)max_rows * lda * 2);
    memcpy(Ag, A, (size_t)max_rows * lda * 2);
    for (int p = 0; p < R; p++) memcpy(Ag + (size_t)p * lda, A + (size_t)rows[p] * lda, (size_t)K * 2);

    uint8_t **w = malloc((size_t)E * sizeof *w), **sc = malloc((size_t)E * sizeof *sc), **w2 = malloc((size_t)E * sizeof *w2),
            **sc2 = malloc((size_t)E * sizeof *sc2);
    size_t wb = 0, sb = 0;
    dic_wmat *dw = malloc((size_t)E * sizeof *dw), *dw2 = malloc((size_t)E * sizeof *dw2);
    int wblock = fmt == DI_WFMT_FP8 ? B : 32;
    for (int e = 0; e < E; e++) {
        f_gen_weights(fmt, N, K, B, &w[e], &wb, &sc[e], &sb, &s);
        f_gen_weights(fmt, N, K, B, &w2[e], &wb, &sc2[e], &sb, &s);
        dw[e] = (dic_wmat){fmt, N, K, wblock, gt_to_dev(w[e], wb), gt_to_dev(sc[e], sb)};
        dw2[e] = (dic_wmat){fmt, N, K, wblock, gt_to_dev(w2[e], wb), gt_to_dev(sc2[e], sb)};
        CHECK(dw[e].w && dw[e].scale && dw2[e].w && dw2[e].scale);
    }
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, dic_gemm_scratch(max_rows, N, K)));
    ctx.batch_invariant = 0;
    void *dA = gt_to_dev(A, (size_t)max_rows * lda * 2), *dAg = gt_to_dev(Ag, (size_t)max_rows * lda * 2);
    int *doff = gt_to_dev(off, ((size_t)E + 1) * sizeof(int)), *drows = gt_to_dev(rows, (size_t)max_rows * sizeof(int));
    size_t cb = (size_t)max_rows * ldc * 2;
    uint16_t *dC = gt_dev_poison(cb), *dCb = gt_dev_poison(cb), *dS1 = gt_dev_poison(cb), *dS2 = gt_dev_poison(cb);
    CHECK(dA && dAg && doff && drows && dC && dCb && dS1 && dS2);
    CUDA_SYNC_CHECK(dic_gemm_grouped(&ctx, E, dw, doff, drows, max_rows, dA, lda, act, dC, ldc));
    CUDA_SYNC_CHECK(dic_gemm_grouped(&ctx, E, dw, doff, drows, max_rows, dA, lda, act, dCb, ldc));
    CUDA_SYNC_CHECK(dic_gemm2_grouped_seg(&ctx, E, dw, dw2, doff, max_rows, dAg, lda, act, dS1, dS2, ldc));
    uint16_t *C = gt_d2h(dC, cb), *Cb = gt_d2h(dCb, cb), *S1 = gt_d2h(dS1, cb), *S2 = gt_d2h(dS2, cb);
    CHECK(C && Cb && S1 && S2);
    size_t nd = gt_count_diff_u16(C, Cb, (size_t)max_rows * ldc);
    CHECK_MSG(nd == 0, "grouped f16: two runs differ in %zu outputs", nd);

    di_exec x;
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    double num = 0, den = 0;
    size_t bad = 0, bad_seg = 0;
    for (int e = 0; e < E; e++) {
        int me = off[e + 1] - off[e];
        if (!me) continue;
        uint16_t *Ae = malloc((size_t)me * K * 2);
        for (int i = 0; i < me; i++) memcpy(Ae + (size_t)i * K, A + (size_t)rows[off[e] + i] * lda, (size_t)K * 2);
        for (int which = 0; which < 2; which++) {
            di_wmat pw;
            CHECK(di_wmat_pack(&pw, (di_wfmt)fmt, which ? w2[e] : w[e], which ? sc2[e] : sc[e], N, K, B, NULL) ==
                  DEEPINFER_OK);
            float *Re = malloc((size_t)me * N * 4);
            di_gemm(&x, me, Ae, (size_t)K, &pw, act, Re, NULL, (size_t)N);
            for (int i = 0; i < me; i++) {
                int r = rows[off[e] + i], p = off[e] + i;
                float rmax = 0;
                for (int n = 0; n < N; n++) rmax = fmaxf(rmax, fabsf(Re[(size_t)i * N + n]));
                for (int n = 0; n < N; n++) {
                    float c = Re[(size_t)i * N + n];
                    float sg = di_bf16_to_f32((which ? S2 : S1)[(size_t)p * ldc + n]);
                    if (!(fabsf(sg - c) <= 0x1p-8f * fabsf(c) + 1e-4f * rmax)) {
                        if (bad_seg++ < 4)
                            fprintf(stderr, "  seg W%d expert %d row %d col %d: gpu %.7g di_gemm %.7g\n", which + 1, e,
                                    p, n, sg, c);
                    }
                    if (which) continue;
                    float g = di_bf16_to_f32(C[(size_t)r * ldc + n]);
                    if (!(fabsf(g - c) <= 0x1p-8f * fabsf(c) + 1e-4f * rmax)) {
                        if (bad++ < 4)
                            fprintf(stderr, "  grouped expert %d row %d (A row %d) col %d: gpu %.7g di_gemm %.7g\n", e,
                                    i, r, n, g, c);
                    }
                    num += ((double)g - c) * ((double)g - c), den += (double)c * c;
                }
            }
            di_wmat_free(&pw);
            free(Re);
        }
        free(Ae);
    }
    size_t bad_pad = 0;
    for (int r = 0; r < max_rows; r++)
        for (size_t n = 0; n < ldc; n++) {
            int outside = r >= R || n >= (size_t)N;
            if (outside && (C[(size_t)r * ldc + n] != 0xFFFF || S1[(size_t)r * ldc + n] != 0xFFFF ||
                            S2[(size_t)r * ldc + n] != 0xFFFF))
                bad_pad++;
        }
    fprintf(stderr, "  grouped f16 %s E=%d T=%d max_rows=%d N=%d K=%d B=%d act=%d: norm rel %.2e vs di_gemm (bf16 out)\n",
            fmt == DI_WFMT_FP8 ? "FP8" : "FP4", E, T, max_rows, N, K, B, act, den > 0 ? sqrt(num / den) : 0.0);
    CHECK_MSG(bad == 0 && bad_seg == 0 && bad_pad == 0,
              "grouped f16 E=%d T=%d N=%d K=%d: %zu grouped / %zu seg outside tolerance, %zu padding written", E, T, N,
              K, bad, bad_seg, bad_pad);
    di_exec_free(&x);
    for (int e = 0; e < E; e++) {
        cudaFree((void *)dw[e].w), cudaFree((void *)dw[e].scale), cudaFree((void *)dw2[e].w), cudaFree((void *)dw2[e].scale);
        free(w[e]), free(sc[e]), free(w2[e]), free(sc2[e]);
    }
    cudaFree(dA), cudaFree(dAg), cudaFree(doff), cudaFree(drows), cudaFree(dC), cudaFree(dCb), cudaFree(dS1);
    cudaFree(dS2), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(A), free(Ag), free(sel), free(off), free(rows), free(fillc), free(w), free(sc), free(w2), free(sc2), free(dw);
    free(dw2), free(C), free(Cb), free(S1), free(S2);
}

TEST(gpu_gemm_f16_grouped) {
    f16_grouped_case(DI_WFMT_FP4, 256, 1, 2048, 4096, 32, 128, 0, 5001); /* V4 decode, 1 token */
    if (di_test_failed()) return;
    f16_grouped_case(DI_WFMT_FP4, 256, 8, 300, 4096, 32, 128, 7, 5002); /* max_rows > routed rows */
    if (di_test_failed()) return;
    f16_grouped_case(DI_WFMT_FP4, 384, 3, 96, 5120, 32, 32, 2, 5003); /* V4.1 decode */
    if (di_test_failed()) return;
    f16_grouped_case(DI_WFMT_FP4, 64, 16, 200, 1056, 32, 32, 3, 5004); /* 96 rows: split off, NT = 1 */
    if (di_test_failed()) return;
    f16_grouped_case(DI_WFMT_FP8, 16, 300, 256, 1024, 128, 128, 5, 5005); /* prefill-sized: NT = 8 */
    if (di_test_failed()) return;
    f16_grouped_case(DI_WFMT_FP4, 8, 200, 160, 2304, 32, 32, 0, 5006);
    if (di_test_failed()) return;
    f16_grouped_case(DI_WFMT_FP8, 32, 40, 136, 1120, 32, 32, 1, 5007); /* V4.1 FP8 blocks, NT = 1..2 */
}
