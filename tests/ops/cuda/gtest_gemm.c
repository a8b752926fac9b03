/* gtest_gemm.c — the CUDA GEMMs (dic_gemm*.cu) against the CPU ops:
 *  - activation quantisation: bitwise equal to the CPU's (scalar gemm.c
 *    formula, and the AVX-512 rows kernel where this CPU has it);
 *  - F32 weights: bitwise equal to di_gemm (same summation order); BF16 weights (batch-invariant
 *    mode: the tensor-core tiles, another fp32 order) within 2^-10 of each element's absolute-value
 *    sum and 1e-4 norm-wise of di_gemm;
 *  - FP8 / FP4 weights (tensor cores, their own order inside a K block):
 *    every element within 2^-10 of its absolute-value sum of the exact
 *    terms of a double-precision reference built from the CPU-quantised
 *    activations and the dequantised weights, norm-wise relative error
 *    <= 1e-4 vs that reference and vs di_gemm (packed with di_wmat_pack);
 *    the bf16 output equals bf16(fp32 output) bit for bit;
 *  - batch invariance (batch_invariant = 1): every row at M = 1 .. 2049
 *    bitwise equal to the row alone, and to the fast mode where it runs
 *    the same kernels (M <= 64; FP4 at every M);
 *  - grouped GEMM: every routed row against di_gemm on the expert's rows,
 *    bitwise against per-expert dense dic_gemm calls (and so against the
 *    row alone) and against a launch with a larger row bound; untouched
 *    rows and padding keep their poison.
 * Outputs are poisoned (0xFF) first; measured errors are printed. */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gemm_ref.h"
#include "ops/cuda/gpu_util.h"
#include "ops/cpu/gemm_kern.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/ops.h"
#include "util/cpu.h"

#define TOL_ELEM 0x1p-10 /* |gpu - ref| <= TOL_ELEM * sum |terms| */
#define TOL_NORM 1e-4    /* ||gpu - ref|| / ||ref|| */
#define TOL_ELEM_WGMMA 0x1p-9
#define TOL_NORM_WGMMA 1e-3

/* Random weights in the released format: w (bytes), s (e8m0 scale bytes). */
static void gen_weights(int fmt, int N, int K, int B, uint8_t **w, size_t *wb, uint8_t **sc, size_t *sb, uint64_t *s) {
    *sc = NULL;
    *sb = 0;
    if (fmt == DI_WFMT_FP8) {
        *wb = (size_t)N * K;
        *sb = (size_t)((N + B - 1) / B) * (K / B);
    } else if (fmt == DI_WFMT_FP4) {
        *wb = (size_t)N * K / 2;
        *sb = (size_t)N * (K / 32);
    } else {
        *wb = (size_t)N * K * (fmt == DI_WFMT_F32 ? 4 : 2);
    }
    *w = malloc(*wb);
    if (fmt == DI_WFMT_FP8 || fmt == DI_WFMT_FP4) {
        for (size_t i = 0; i < *wb; i++) {
            uint8_t b = (uint8_t)gt_rand_u64(s);
            if (fmt == DI_WFMT_FP8 && (b & 0x7F) == 0x7F) b ^= 1; /* no NaN */
            (*w)[i] = b;
        }
        *sc = malloc(*sb);
        for (size_t i = 0; i < *sb; i++) (*sc)[i] = (uint8_t)(118 + gt_rand_u64(s) % 12);
    } else if (fmt == DI_WFMT_BF16) {
        gt_fill_bf16((uint16_t *)*w, (size_t)N * K, 0.05f, s);
    } else {
        gt_fill_f32((float *)*w, (size_t)N * K, 0.05f, s);
    }
}

/* Weight element without / with its scale. */
static float wv(int fmt, const uint8_t *w, int K, int n, int k) {
    if (fmt == DI_WFMT_FP8) return di_e4m3_to_f32(w[(size_t)n * K + k]);
    uint8_t b = w[(size_t)n * (K / 2) + k / 2];
    return di_e2m1_to_f32((k & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15));
}
static float wsc(int fmt, const uint8_t *sc, int K, int B, int n, int k) {
    if (fmt == DI_WFMT_FP8) return di_e8m0_to_f32(sc[(size_t)(n / B) * (K / B) + k / B]);
    return di_e8m0_to_f32(sc[(size_t)n * (K / 32) + k / 32]);
}

/* ---- quantisation ------------------------------------------------------- */

static void quant_case(int M, int K, int blk, uint64_t seed) {
    size_t lda = (size_t)K + 24;
    uint16_t *A = malloc((size_t)M * lda * 2);
    uint64_t s = seed;
    fill_act(A, M, K, lda, blk, &s);
    /* special values: exact e4m3 midpoints after scaling, ±448 boundary, zeros */
    for (int k = 0; k < K && k < 64; k++) A[k] = di_f32_to_bf16((float)(k - 32) * 0.0703125f);
    uint16_t *dA = gt_to_dev(A, (size_t)M * lda * 2);
    size_t ldq = dic_gemm_ldq(K), nsa = (size_t)(K / blk);
    uint8_t *dq = gt_dev_poison((size_t)M * ldq);
    float *ds = gt_dev_poison((size_t)M * nsa * 4);
    CHECK(dA && dq && ds);
    CUDA_SYNC_CHECK(dic_gemm_quant(0, M, dA, lda, K, blk, NULL, NULL, dq, ds, NULL, 0));
    uint8_t *q = malloc((size_t)M * ldq);
    float *sg = malloc((size_t)M * nsa * 4), *qr = malloc((size_t)K * 4), *sr = malloc(nsa * 4);
    CUDA_CHECK(cudaMemcpy(q, dq, (size_t)M * ldq, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(sg, ds, (size_t)M * nsa * 4, cudaMemcpyDeviceToHost));
    for (int m = 0; m < M; m++) {
        ref_quant_row(A + (size_t)m * lda, K, blk, qr, sr);
        for (size_t b = 0; b < nsa; b++)
            CHECK_MSG(di_f32_bits(sr[b]) == di_f32_bits(sg[(size_t)m * nsa + b]),
                      "quant M=%d K=%d blk=%d: scale row %d block %zu: gpu %a cpu %a", M, K, blk, m, b,
                      sg[(size_t)m * nsa + b], sr[b]);
        for (int k = 0; k < K; k++) {
            float g = di_e4m3_to_f32(q[(size_t)m * ldq + k]);
            CHECK_MSG(di_f32_bits(g) == di_f32_bits(qr[k]),
                      "quant M=%d K=%d blk=%d: row %d k %d (x=%a): gpu e4m3 0x%02x = %a, cpu %a", M, K, blk, m, k,
                      di_bf16_to_f32(A[(size_t)m * lda + k]), q[(size_t)m * ldq + k], g, qr[k]);
        }
    }
    if (di_cpu_isa() == DI_ISA_AVX512 && blk % 16 == 0) { /* the CPU's vector path too */
        size_t qs = (size_t)K;
        uint16_t *qa = malloc((size_t)M * qs * 2);
        float *sa = malloc((size_t)M * nsa * 4);
        di_act_quant_rows_avx512(A, lda, M, K, blk, qa, qs, sa, nsa);
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++) {
                uint16_t g = (uint16_t)(di_f32_bits(di_e4m3_to_f32(q[(size_t)m * ldq + k])) >> 16);
                CHECK_MSG(g == qa[(size_t)m * qs + k], "quant vs AVX-512: row %d k %d: 0x%04x vs 0x%04x", m, k, g,
                          qa[(size_t)m * qs + k]);
            }
        CHECK_MSG(gt_count_diff_u32(sa, sg, (size_t)M * nsa) == 0, "quant vs AVX-512: scales differ");
        free(qa);
        free(sa);
    }
    cudaFree(dA);
    cudaFree(dq);
    cudaFree(ds);
    free(A), free(q), free(sg), free(qr), free(sr);
}

TEST(gpu_gemm_act_quant_bitwise) {
    quant_case(1, 4096, 128, 11);
    if (di_test_failed()) return;
    quant_case(3, 7168, 128, 12);
    if (di_test_failed()) return;
    quant_case(17, 5120, 32, 13);
    if (di_test_failed()) return;
    quant_case(5, 96, 32, 14);
    if (di_test_failed()) return;
    quant_case(257, 2048, 64, 15);
}

/* ---- dense GEMM ------------------------------------------------------------ */

static const char *fmt_name(int f) { return f == 0 ? "BF16" : f == 1 ? "F32" : f == 2 ? "FP8" : "FP4"; }

static void gemm_case(int fmt, int M, int N, int K, int B, int act, uint64_t seed) {
    uint64_t s = seed;
    size_t lda = (size_t)K + 8, ldc = (size_t)N + 3;
    uint16_t *A = malloc((size_t)M * lda * 2);
    fill_act(A, M, K, lda, act > 0 ? act : 32, &s);
    if (fmt <= 1) /* unquantised: keep magnitudes moderate (no denormal products) */
        for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = di_f32_to_bf16(gt_rand_unit(&s));
    uint8_t *w, *sc;
    size_t wb, sb;
    int wblock = fmt == DI_WFMT_FP8 ? B : fmt == DI_WFMT_FP4 ? 32 : 0;
    gen_weights(fmt, N, K, B, &w, &wb, &sc, &sb, &s);

    /* GPU */
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, dic_gemm_scratch(M, N, K)));
    if (fmt <= 1) ctx.batch_invariant = 1; /* the bitwise kernels (mode 0: gtest_gemm_fast_float.c) */
    void *dA = gt_to_dev(A, (size_t)M * lda * 2), *dW = gt_to_dev(w, wb), *dS = sc ? gt_to_dev(sc, sb) : NULL;
    float *dC = gt_dev_poison((size_t)M * ldc * 4);
    uint16_t *dC16 = gt_dev_poison((size_t)M * ldc * 2);
    CHECK(dA && dW && dC && dC16 && (!sc || dS));
    dic_wmat dw = {fmt, N, K, wblock, dW, dS};
    if (fmt == DI_WFMT_FP8 && M > 64 && dic_gemm_wgmma_usable(N, K)) {
        int mf = dic_gemm_wgmma_maps(ctx.scratch, dic_gemm_ldq(K), M, dW, N, K);
        CHECK_MSG(mf == 0, "FP8 M=%d N=%d K=%d: wgmma tensor maps failed (mask %d; scratch %p, W %p)", M, N, K, mf,
                  ctx.scratch, dW);
    }
    CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, act, dC, NULL, ldc));
    CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw, act, NULL, dC16, ldc));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    float *C = malloc((size_t)M * ldc * 4);
    uint16_t *C16 = malloc((size_t)M * ldc * 2);
    CUDA_CHECK(cudaMemcpy(C, dC, (size_t)M * ldc * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(C16, dC16, (size_t)M * ldc * 2, cudaMemcpyDeviceToHost));

    /* CPU di_gemm */
    di_wmat pw;
    di_exec x;
    CHECK(di_wmat_pack(&pw, (di_wfmt)fmt, w, sc, N, K, B, NULL) == DEEPINFER_OK);
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    float *R = malloc((size_t)M * ldc * 4);
    uint16_t *R16 = malloc((size_t)M * ldc * 2);
    di_gemm(&x, M, A, lda, &pw, act, R, NULL, ldc);
    di_gemm(&x, M, A, lda, &pw, act, NULL, R16, ldc);

    for (int m = 0; m < M; m++)
        for (size_t n = (size_t)N; n < ldc; n++)
            CHECK_MSG(di_f32_bits(C[m * ldc + n]) == 0xFFFFFFFFu && C16[m * ldc + n] == 0xFFFF,
                      "%s M=%d N=%d K=%d: padding column %zu of row %d was written", fmt_name(fmt), M, N, K, n, m);
    if (fmt == DI_WFMT_BF16) {
        /* mode 1 BF16: the tensor-core tiles with the M-free split (dic_gemm_float_inv_launch), another fp32
         * order than di_gemm's: every element within TOL_ELEM of its absolute-value sum, norm-wise TOL_NORM,
         * the bf16 output bf16 of the fp32 one (rows alone: gtest_gemm_inv_float.c) */
        double num = 0, den = 0, worst = 0;
        for (int m = 0; m < M && !di_test_failed(); m++)
            for (int n = 0; n < N; n++) {
                size_t i = (size_t)m * ldc + n;
                double abs = 0;
                for (int k = 0; k < K; k++)
                    abs += fabs((double)di_bf16_to_f32(A[(size_t)m * lda + k]) *
                                di_bf16_to_f32(((const uint16_t *)w)[(size_t)n * K + k]));
                const double d = (double)C[i] - R[i];
                num += d * d, den += (double)R[i] * R[i];
                if (abs > 0 && fabs(d) / abs > worst) worst = fabs(d) / abs;
                CHECK_MSG(fabs(d) <= TOL_ELEM * abs + 1e-30 && C16[i] == di_f32_to_bf16(C[i]),
                          "BF16 M=%d N=%d K=%d: C[%d][%d] gpu %a (bf16 0x%04x), cpu %a (|d| %.3g, bound %.3g)", M, N,
                          K, m, n, C[i], C16[i], R[i], fabs(d), TOL_ELEM * abs);
                if (di_test_failed()) break;
            }
        const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        fprintf(stderr, "  BF16 M=%d N=%d K=%d mode 1: max |d|/abs-sum %.2e, norm rel %.2e vs di_gemm\n", M, N, K, worst,
                rel);
        CHECK_MSG(rel <= TOL_NORM, "BF16 M=%d N=%d K=%d: norm-wise error %.3g", M, N, K, rel);
    } else if (fmt == DI_WFMT_F32) {
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                size_t i = (size_t)m * ldc + n;
                CHECK_MSG(di_f32_bits(C[i]) == di_f32_bits(R[i]) && C16[i] == R16[i],
                          "%s M=%d N=%d K=%d: C[%d][%d] gpu %a (bf16 0x%04x), cpu %a (0x%04x)", fmt_name(fmt), M, N,
                          K, m, n, C[i], C16[i], R[i], R16[i]);
            }
    } else {
        /* double reference over the CPU-quantised activations; large cases on a sample */
        int kb = fmt == DI_WFMT_FP8 ? (act < B ? act : B) : 32;
        /* the wgmma kernel (FP8, M > 64 on sm_90a): Hopper's wgmma adds e4m3 products into fp32 with fewer
         * kept bits than mma.sync (measured ~2e-4 norm-wise at K = 128), so its bounds are 10x / 2x wider
         * — still under the bf16 output's rounding (2^-9) */
        int on_wgmma = fmt == DI_WFMT_FP8 && M > 64 && dic_gemm_wgmma_usable(N, K);
        double tol_norm = on_wgmma ? TOL_NORM_WGMMA : TOL_NORM, tol_elem = on_wgmma ? TOL_ELEM_WGMMA : TOL_ELEM;
        float *q = malloc((size_t)K * 4), *sa = malloc((size_t)(K / act) * 4);
        double num = 0, den = 0, num2 = 0, worst = 0;
        int wm = -1, wn = -1;
        long long step = (double)M * N * K > 4e9 ? 7 : 1;
        long long cnt = 0;
        for (int m = 0; m < M; m++) {
            ref_quant_row(A + (size_t)m * lda, K, act, q, sa);
            for (int n = 0; n < N; n++) {
                size_t i = (size_t)m * ldc + n;
                CHECK_MSG(C[i] == C[i], "%s M=%d N=%d K=%d: C[%d][%d] not written (NaN)", fmt_name(fmt), M, N, K, m,
                          n);
                CHECK_MSG(C16[i] == di_f32_to_bf16(C[i]), "%s M=%d N=%d K=%d: bf16 out [%d][%d] 0x%04x != bf16(%a)",
                          fmt_name(fmt), M, N, K, m, n, C16[i], C[i]);
                if (cnt++ % step) continue;
                double ref = 0, abs = 0;
                for (int k0 = 0; k0 < K; k0 += kb) {
                    double p = 0, pa = 0;
                    for (int k = k0; k < k0 + kb; k++) {
                        double t = (double)q[k] * wv(fmt, w, K, n, k);
                        p += t;
                        pa += fabs(t);
                    }
                    double f = (double)sa[k0 / act] * wsc(fmt, sc, K, B, n, k0);
                    ref += p * f;
                    abs += pa * f;
                }
                double e = fabs(C[i] - ref);
                CHECK_MSG(e <= tol_elem * abs + 1e-30,
                          "%s M=%d N=%d K=%d B=%d act=%d: C[%d][%d] = %.9g, reference %.9g (error %.3g, bound %.3g)",
                          fmt_name(fmt), M, N, K, B, act, m, n, C[i], ref, e, tol_elem * abs);
                if (abs > 0 && e / abs > worst) worst = e / abs, wm = m, wn = n;
                num += e * e;
                den += ref * ref;
                num2 += ((double)C[i] - R[i]) * ((double)C[i] - R[i]);
            }
        }
        double rel = sqrt(num / den), rel2 = sqrt(num2 / den);
        fprintf(stderr, "  %s M=%d N=%d K=%d B=%d act=%d: max err/abs-sum %.2e at [%d][%d]; norm rel %.2e vs double, %.2e vs di_gemm\n",
                fmt_name(fmt), M, N, K, B, act, worst, wm, wn, rel, rel2);
        CHECK_MSG(rel <= tol_norm && rel2 <= tol_norm, "%s M=%d N=%d K=%d: norm-wise error %.3g vs double, %.3g vs di_gemm",
                  fmt_name(fmt), M, N, K, rel, rel2);
        free(q), free(sa);
    }
    di_wmat_free(&pw);
    di_exec_free(&x);
    cudaFree(dA), cudaFree(dW), cudaFree(dS), cudaFree(dC), cudaFree(dC16);
    cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(A), free(w), free(sc), free(C), free(C16), free(R), free(R16);
}

static const int gemm_ms[] = {1, 3, 16, 17, 64, 65, 257};

/* V4-Flash: FP8 128x128 blocks, activation blocks of 128. */
TEST(gpu_gemm_fp8_v4) {
    for (unsigned i = 0; i < sizeof gemm_ms / sizeof *gemm_ms; i++) {
        gemm_case(DI_WFMT_FP8, gemm_ms[i], 1024, 4096, 128, 128, 100 + i); /* wq_a */
        if (di_test_failed()) return;
        gemm_case(DI_WFMT_FP8, gemm_ms[i], 300, 640, 128, 128, 200 + i); /* N not a tile multiple */
        if (di_test_failed()) return;
    }
    gemm_case(DI_WFMT_FP8, 2, 4096, 8192, 128, 128, 301); /* wo_b */
    if (di_test_failed()) return;
    gemm_case(DI_WFMT_FP8, 4100, 256, 1024, 128, 128, 302); /* many rows */
}

/* V4.1-Flash: FP8 32x32 blocks, activation blocks of 32; K not a multiple of 128. */
TEST(gpu_gemm_fp8_v41) {
    for (unsigned i = 0; i < sizeof gemm_ms / sizeof *gemm_ms; i++) {
        gemm_case(DI_WFMT_FP8, gemm_ms[i], 1280, 5120, 32, 32, 400 + i); /* wq_a */
        if (di_test_failed()) return;
        gemm_case(DI_WFMT_FP8, gemm_ms[i], 77, 1120, 32, 32, 500 + i);
        if (di_test_failed()) return;
    }
    gemm_case(DI_WFMT_FP8, 5, 200, 1024, 32, 128, 601); /* act_block 128 > B: kb = 32 */
    if (di_test_failed()) return;
    gemm_case(DI_WFMT_FP8, 70, 200, 1024, 128, 64, 602); /* kb = 64 */
    if (di_test_failed()) return;
    gemm_case(DI_WFMT_FP8, 4099, 96, 1120, 32, 32, 603);
}

/* FP8 prefill on the wgmma kernel (dic_gemm_wgmma.cu, chosen by dic_gemm for
 * M > 64 on sm_90a): shapes with K tails (K % 128 != 0), N and M not tile
 * multiples, kb = 32 / 64 / 128, against the double reference and di_gemm. */
TEST(gpu_gemm_fp8_wgmma) {
    static const struct { int M, N, K, B, act; } cs[] = {
        {65, 128, 128, 128, 128},   {128, 256, 1024, 128, 128}, {129, 300, 640, 128, 128},
        {257, 1000, 4096, 128, 128}, {300, 77, 1120, 32, 32},   {130, 200, 1024, 128, 64},
        {200, 136, 1056, 32, 32},   {513, 520, 2048, 128, 128}, {96, 4096, 512, 32, 32},
    };
    for (unsigned i = 0; i < sizeof cs / sizeof *cs; i++) {
        gemm_case(DI_WFMT_FP8, cs[i].M, cs[i].N, cs[i].K, cs[i].B, cs[i].act, 3000 + i);
        if (di_test_failed()) return;
    }
    /* the shapes ran on whatever dic_gemm picks here; not on wgmma unless it is usable */
    if (!dic_gemm_wgmma_usable(128, 128)) SKIP("wgmma not usable on this device (needs compute capability 9.x and cuTensorMapEncodeTiled)");
}

/* wgmma kernel vs the mma.sync tile kernel on the same quantised rows: the
 * number of outputs whose bits differ is printed (measured on the H200: nearly
 * all; the two instructions round the e4m3 sums differently), and a row's bits
 * must not depend on the other rows (the first rows alone, M = 3, forced onto
 * the wgmma kernel, give the same bits as inside M rows). */
static void wgmma_bits_case(int M, int N, int K, int B, int act, uint64_t seed) {
    uint64_t s = seed;
    size_t lda = (size_t)K, ldc = (size_t)N + 1;
    uint16_t *A = malloc((size_t)M * lda * 2);
    fill_act(A, M, K, lda, act, &s);
    uint8_t *w, *sc;
    size_t wb, sb;
    gen_weights(DI_WFMT_FP8, N, K, B, &w, &wb, &sc, &sb, &s);
    void *dA = gt_to_dev(A, (size_t)M * lda * 2), *dW = gt_to_dev(w, wb), *dS = gt_to_dev(sc, sb);
    uint8_t *dq = gt_dev_poison(dic_gemm_qbytes(M, K));
    float *dsa = gt_dev_poison((size_t)M * (K / act) * 4);
    float *d1 = gt_dev_poison((size_t)M * ldc * 4), *d2 = gt_dev_poison((size_t)M * ldc * 4),
          *d3 = gt_dev_poison((size_t)M * ldc * 4), *d4 = gt_dev_poison((size_t)M * ldc * 4);
    CHECK(dA && dW && dS && dq && dsa && d1 && d2 && d3 && d4);
    CHECK_MSG(dic_gemm_wgmma_usable(N, K), "wgmma M=%d N=%d K=%d: shape not usable (the test's cases must be)", M, N, K);
    dic_gemm_wtab *wt = malloc(sizeof *wt);
    wt->w[0] = dW, wt->s[0] = dS;
    CUDA_SYNC_CHECK(dic_gemm_quant(0, M, dA, lda, K, act, NULL, NULL, dq, dsa, NULL, 0));
    CUDA_SYNC_CHECK(dic_gemm_q_launch(0, 1, wt, DI_WFMT_FP8, N, K, B, act, M, NULL, NULL, dq, dsa, NULL, NULL, d1, NULL,
                                      ldc, DIC_GEMM_PATH_TILES));
    CUDA_SYNC_CHECK(dic_gemm_q_launch(0, 1, wt, DI_WFMT_FP8, N, K, B, act, M, NULL, NULL, dq, dsa, NULL, NULL, d2, NULL,
                                      ldc, DIC_GEMM_PATH_WGMMA));
    CUDA_SYNC_CHECK(dic_gemm_q_launch(0, 1, wt, DI_WFMT_FP8, N, K, B, act, 3, NULL, NULL, dq, dsa, NULL, NULL, d3, NULL,
                                      ldc, DIC_GEMM_PATH_WGMMA));
    CUDA_SYNC_CHECK(dic_gemm_q_wgmma_launch(0, dW, dS, N, K, B, act, act < B ? act : B, M, dq, dic_gemm_ldq(K), dsa,
                                            d4, NULL, ldc, 2)); /* v2 (the first schedule v1: lab/gemm) */
    float *c1 = malloc((size_t)M * ldc * 4), *c2 = malloc((size_t)M * ldc * 4), *c3 = malloc((size_t)M * ldc * 4);
    float *c4 = malloc((size_t)M * ldc * 4);
    CUDA_CHECK(cudaMemcpy(c4, d4, (size_t)M * ldc * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(c1, d1, (size_t)M * ldc * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(c2, d2, (size_t)M * ldc * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(c3, d3, (size_t)M * ldc * 4, cudaMemcpyDeviceToHost));
    size_t diff = 0, diff3 = 0, first = (size_t)-1;
    size_t dv = gt_count_diff_u32(c4, c2, (size_t)M * ldc); /* v2 and the dispatch's (v3 where it applies): same operations, same bits */
    CHECK_MSG(dv == 0, "wgmma v2 vs dispatch M=%d N=%d K=%d: %zu outputs differ in bits", M, N, K, dv);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            size_t i = (size_t)m * ldc + n;
            if (di_f32_bits(c1[i]) != di_f32_bits(c2[i])) {
                if (first == (size_t)-1) first = i;
                diff++;
            }
            if (m < 3 && di_f32_bits(c3[i]) != di_f32_bits(c2[i])) diff3++;
        }
    for (int m = 3; m < M; m++) /* M = 3 launch: rows past 3 untouched */
        for (int n = 0; n < N; n++) CHECK_MSG(di_f32_bits(c3[(size_t)m * ldc + n]) == 0xFFFFFFFFu, "row %d written", m);
    fprintf(stderr, "  wgmma vs mma.sync tiles M=%d N=%d K=%d B=%d act=%d: %zu of %lld outputs differ in bits; M=3 vs M=%d: %zu\n",
            M, N, K, B, act, diff, (long long)M * N, M, diff3);
    CHECK_MSG(diff3 == 0, "wgmma: row bits depend on M (%zu differ)", diff3);
    if (diff) /* reported, not failed: Hopper's wgmma keeps fewer bits of the e4m3 sums than mma.sync */
        fprintf(stderr, "  first differing [%zu][%zu]: wgmma %a, mma.sync %a\n", first / ldc, first % ldc, c2[first],
                c1[first]);
    cudaFree(dA), cudaFree(dW), cudaFree(dS), cudaFree(dq), cudaFree(dsa), cudaFree(d1), cudaFree(d2), cudaFree(d3), cudaFree(d4);
    free(A), free(w), free(sc), free(wt), free(c1), free(c2), free(c3), free(c4);
}

TEST(gpu_gemm_fp8_wgmma_bits) {
    if (!dic_gemm_wgmma_usable(128, 128)) SKIP("wgmma not usable on this device (needs compute capability 9.x and cuTensorMapEncodeTiled)");
    wgmma_bits_case(300, 520, 4096, 128, 128, 4001);
    wgmma_bits_case(150, 200, 1120, 32, 32, 4002);
    wgmma_bits_case(70, 136, 1024, 128, 64, 4003);
}

/* FP4 routed-expert shapes: V4 (act 128) and V4.1 (act 32). */
TEST(gpu_gemm_fp4) {
    for (unsigned i = 0; i < sizeof gemm_ms / sizeof *gemm_ms; i++) {
        gemm_case(DI_WFMT_FP4, gemm_ms[i], 2048, 4096, 32, 128, 700 + i); /* V4 w1/w3 */
        if (di_test_failed()) return;
        gemm_case(DI_WFMT_FP4, gemm_ms[i], 333, 2304, 32, 32, 800 + i); /* V4.1 w2 input */
        if (di_test_failed()) return;
        gemm_case(DI_WFMT_FP4, gemm_ms[i], 40, 1056, 32, 32, 900 + i); /* K = 33 * 32 */
        if (di_test_failed()) return;
    }
    gemm_case(DI_WFMT_FP4, 4096, 128, 2048, 32, 128, 950);
}

TEST(gpu_gemm_bf16_f32_mode1) { /* F32: bitwise di_gemm; BF16: the GEMM tolerance (k_mma, M-free split) */
    for (unsigned i = 0; i < sizeof gemm_ms / sizeof *gemm_ms; i++) {
        gemm_case(DI_WFMT_BF16, gemm_ms[i], 256, 4096, 0, 0, 1000 + i); /* router gate */
        if (di_test_failed()) return;
        gemm_case(DI_WFMT_BF16, gemm_ms[i], 129, 130, 0, 0, 1100 + i);
        if (di_test_failed()) return;
        gemm_case(DI_WFMT_F32, gemm_ms[i], 24, 16384, 0, 0, 1200 + i); /* hc fn */
        if (di_test_failed()) return;
        gemm_case(DI_WFMT_F32, gemm_ms[i], 33, 101, 0, 0, 1300 + i);
        if (di_test_failed()) return;
        gemm_case(DI_WFMT_BF16, gemm_ms[i], 300, 1000, 0, 0, 1400 + i); /* decode kernel: K % 32 tail */
        if (di_test_failed()) return;
    }
    gemm_case(DI_WFMT_BF16, 8, 1029, 4096, 0, 0, 1500); /* lm_head-like, M at the decode kernel's bound */
}

/* ---- batch invariance ---------------------------------------------------------
 * The batch-invariant contract (docs/determinism.md §7): every FP8 / FP4 row's bits are a function
 * of that row alone. Each row r < MB is computed alone (M = 1, the decode kernel k_gemm_dec); then
 * rows 0..M-1 at every M of inv_ms (the decode kernel, the f16 tiles with split CTAs, the tiles with
 * the splits walked inside a CTA) must equal them bitwise (fp32 and bf16 outputs), and the fast mode
 * (the same kernels at M <= 64) must give the same bits there. */
static const int inv_ms[] = {1, 2, 7, 8, 9, 33, 64, 65, 129, 700, 2049};
#define INV_MB 2049

static void invariance_case(int fmt, int N, int K, int B, int act, uint64_t seed) {
    const int MB = INV_MB;
    uint64_t s = seed;
    size_t lda = (size_t)K + 8, ldc = (size_t)N;
    uint16_t *A = malloc((size_t)MB * lda * 2);
    fill_act(A, MB, K, lda, act, &s);
    uint8_t *w, *sc;
    size_t wb, sb;
    gen_weights(fmt, N, K, B, &w, &wb, &sc, &sb, &s);
    dic_ctx ctx, fast;
    CHECK(gt_ctx(&ctx, dic_gemm_scratch(MB, N, K)));
    ctx.batch_invariant = 1;
    fast = ctx; /* the same stream and scratch, fast mode */
    fast.batch_invariant = 0;
    void *dA = gt_to_dev(A, (size_t)MB * lda * 2), *dW = gt_to_dev(w, wb), *dS = gt_to_dev(sc, sb);
    float *dC = gt_dev_poison((size_t)MB * ldc * 4);
    uint16_t *dC16 = gt_dev_poison((size_t)MB * ldc * 2);
    CHECK(dA && dW && dS && dC && dC16);
    dic_wmat dw = {fmt, N, K, fmt == DI_WFMT_FP8 ? B : 32, dW, dS};
    float *alone = malloc((size_t)MB * ldc * 4), *got = malloc((size_t)MB * ldc * 4);
    uint16_t *got16 = malloc((size_t)MB * ldc * 2);
    for (int r = 0; r < MB; r++) /* every row alone */
        CUDA_CHECK(dic_gemm(&ctx, 1, (const uint16_t *)dA + (size_t)r * lda, lda, &dw, act, dC + (size_t)r * ldc, NULL,
                            ldc));
    CUDA_SYNC_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(alone, dC, (size_t)MB * ldc * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < (size_t)MB * ldc; i++)
        CHECK_MSG(alone[i] == alone[i], "invariance: M=1 output %zu NaN / unwritten", i);
    for (unsigned j = 0; j < sizeof inv_ms / sizeof *inv_ms && !di_test_failed(); j++) {
        const int M = inv_ms[j];
        for (int mode = 1; mode >= 0; mode--) {
            if (mode == 0 && (M > DIC_GEMM_SPLIT_MAXM && fmt == DI_WFMT_FP8)) continue; /* fast FP8 above 64: wgmma */
            dic_ctx *c = mode ? &ctx : &fast;
            CUDA_CHECK(cudaMemset(dC, 0xFF, (size_t)MB * ldc * 4));
            CUDA_CHECK(cudaMemset(dC16, 0xFF, (size_t)MB * ldc * 2));
            CUDA_CHECK(dic_gemm(c, M, dA, lda, &dw, act, dC, NULL, ldc));
            CUDA_SYNC_CHECK(dic_gemm(c, M, dA, lda, &dw, act, NULL, dC16, ldc));
            CUDA_CHECK(cudaMemcpy(got, dC, (size_t)M * ldc * 4, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(got16, dC16, (size_t)M * ldc * 2, cudaMemcpyDeviceToHost));
            size_t d = 0, d16 = 0, first = (size_t)-1;
            for (size_t i = 0; i < (size_t)M * ldc; i++) {
                if (di_f32_bits(got[i]) != di_f32_bits(alone[i])) {
                    if (!d) first = i;
                    d++;
                }
                d16 += got16[i] != di_f32_to_bf16(alone[i]);
            }
            CHECK_MSG(d == 0 && d16 == 0,
                      "%s N=%d K=%d B=%d act=%d %s mode: M=%d differs from the rows alone in %zu fp32 / %zu bf16 "
                      "outputs (first: row %zu col %zu)",
                      fmt_name(fmt), N, K, B, act, mode ? "invariant" : "fast", M, d, d16,
                      first == (size_t)-1 ? 0 : first / ldc, first == (size_t)-1 ? 0 : first % ldc);
            if (di_test_failed()) break;
        }
    }
    fprintf(stderr, "  invariance %s N=%d K=%d B=%d act=%d: M=1..2049 rows bitwise = alone (fast mode too at M <= 64%s)\n",
            fmt_name(fmt), N, K, B, act, fmt == DI_WFMT_FP4 ? " and FP4 above" : "");
    cudaFree(dA), cudaFree(dW), cudaFree(dS), cudaFree(dC), cudaFree(dC16), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(A), free(w), free(sc), free(alone), free(got), free(got16);
}

TEST(gpu_gemm_batch_invariance) {
    invariance_case(DI_WFMT_FP8, 1024, 4096, 128, 128, 3001); /* V4 wq_a: 8 splits */
    if (di_test_failed()) return;
    invariance_case(DI_WFMT_FP8, 4096, 8192, 128, 128, 3007); /* V4 wo_b-like: the split at large N */
    if (di_test_failed()) return;
    invariance_case(DI_WFMT_FP8, 300, 1120, 32, 32, 3002); /* V4.1 blocks, K % 128 != 0, N tail */
    if (di_test_failed()) return;
    invariance_case(DI_WFMT_FP8, 1000, 5120, 128, 32, 3008); /* V4.1: act block 32 under 128 weight blocks */
    if (di_test_failed()) return;
    invariance_case(DI_WFMT_FP8, 200, 1024, 128, 64, 3003); /* kb = 64 */
    if (di_test_failed()) return;
    invariance_case(DI_WFMT_FP4, 2048, 4096, 32, 128, 3004); /* V4 expert w1 */
    if (di_test_failed()) return;
    invariance_case(DI_WFMT_FP4, 333, 2304, 32, 32, 3005); /* V4.1, N tail */
    if (di_test_failed()) return;
    invariance_case(DI_WFMT_FP8, 96, 384, 128, 128, 3006); /* one K group: no split */
}

/* ---- grouped ----------------------------------------------------------------- */

static void grouped_case(int fmt, int E, int T, int N, int K, int B, int act, int bitwise_vs_dense, uint64_t seed) {
    uint64_t s = seed;
    const int k = 6, R = T * k, max_rows = R + 5;
    size_t lda = (size_t)K + 16, ldc = (size_t)N + 5;
    uint16_t *A = malloc((size_t)R * lda * 2);
    fill_act(A, R, K, lda, act, &s);
    /* routing: distinct experts per token, experts with e % 5 == 3 never chosen */
    int *sel = malloc((size_t)R * sizeof(int));
    for (int t = 0; t < T; t++)
        for (int j = 0; j < k; j++) {
            int e, dup;
            do {
                e = (int)(gt_rand_u64(&s) % (uint64_t)E);
                dup = e % 5 == 3 && E > 5;
                for (int j2 = 0; j2 < j; j2++) dup |= sel[t * k + j2] == e;
            } while (dup);
            sel[t * k + j] = e;
        }
    int *off = calloc((size_t)E + 1, sizeof(int)), *rows = malloc((size_t)max_rows * sizeof(int));
    for (int i = 0; i < R; i++) off[sel[i] + 1]++;
    for (int e = 0; e < E; e++) off[e + 1] += off[e];
    int *fill = calloc((size_t)E, sizeof(int));
    for (int i = 0; i < R; i++) rows[off[sel[i]] + fill[sel[i]]++] = i;
    for (int i = R; i < max_rows; i++) rows[i] = -1000000; /* never read */

    uint8_t **w = malloc((size_t)E * sizeof *w), **sc = malloc((size_t)E * sizeof *sc);
    size_t wb = 0, sb = 0;
    dic_wmat *dw = malloc((size_t)E * sizeof *dw);
    int wblock = fmt == DI_WFMT_FP8 ? B : 32;
    for (int e = 0; e < E; e++) {
        gen_weights(fmt, N, K, B, &w[e], &wb, &sc[e], &sb, &s);
        dw[e] = (dic_wmat){fmt, N, K, wblock, gt_to_dev(w[e], wb), gt_to_dev(sc[e], sb)};
        CHECK(dw[e].w && dw[e].scale);
    }
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, dic_gemm_scratch(max_rows, N, K)));
    ctx.batch_invariant = 1; /* the invariant grouped kernels (gtest_gemm_f16.c tests the fast ones) */
    void *dA = gt_to_dev(A, (size_t)R * lda * 2);
    int *doff = gt_to_dev(off, ((size_t)E + 1) * sizeof(int)), *drows = gt_to_dev(rows, (size_t)max_rows * sizeof(int));
    uint16_t *dC = gt_dev_poison((size_t)R * ldc * 2);
    CHECK(dA && doff && drows && dC);
    CUDA_SYNC_CHECK(dic_gemm_grouped(&ctx, E, dw, doff, drows, max_rows, dA, lda, act, dC, ldc));
    uint16_t *C = malloc((size_t)R * ldc * 2);
    CUDA_CHECK(cudaMemcpy(C, dC, (size_t)R * ldc * 2, cudaMemcpyDeviceToHost));
    { /* the launch's row bound (max_rows, so its tiles and split placement) larger: the same bits */
        const int big = max_rows + 700;
        int *rows2 = malloc((size_t)big * sizeof(int));
        memcpy(rows2, rows, (size_t)max_rows * sizeof(int));
        for (int i = max_rows; i < big; i++) rows2[i] = -1000000;
        dic_ctx c2;
        int *drows2 = gt_to_dev(rows2, (size_t)big * sizeof(int));
        uint16_t *dC2 = gt_dev_poison((size_t)R * ldc * 2), *C2 = malloc((size_t)R * ldc * 2);
        CHECK(gt_ctx(&c2, dic_gemm_scratch(big, N, K)) && drows2 && dC2);
        c2.batch_invariant = 1;
        CUDA_SYNC_CHECK(dic_gemm_grouped(&c2, E, dw, doff, drows2, big, dA, lda, act, dC2, ldc));
        CUDA_CHECK(cudaMemcpy(C2, dC2, (size_t)R * ldc * 2, cudaMemcpyDeviceToHost));
        CHECK_MSG(memcmp(C, C2, (size_t)R * ldc * 2) == 0, "grouped %s E=%d T=%d: max_rows %d and %d give other bits",
                  fmt_name(fmt), E, T, max_rows, big);
        cudaFree(drows2), cudaFree(dC2), cudaFree(c2.scratch), cudaStreamDestroy(c2.stream);
        free(rows2), free(C2);
    }

    di_exec x;
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    double num = 0, den = 0;
    for (int e = 0; e < E; e++) {
        int me = off[e + 1] - off[e];
        if (!me) continue;
        uint16_t *Ae = malloc((size_t)me * K * 2);
        for (int i = 0; i < me; i++) memcpy(Ae + (size_t)i * K, A + (size_t)rows[off[e] + i] * lda, (size_t)K * 2);
        di_wmat pw;
        CHECK(di_wmat_pack(&pw, (di_wfmt)fmt, w[e], sc[e], N, K, B, NULL) == DEEPINFER_OK);
        float *Re = malloc((size_t)me * N * 4);
        di_gemm(&x, me, Ae, (size_t)K, &pw, act, Re, NULL, (size_t)N);
        uint16_t *Ge = NULL;
        if (bitwise_vs_dense) { /* the same kernel on the gathered rows: same bits */
            void *dAe = gt_to_dev(Ae, (size_t)me * K * 2);
            uint16_t *dGe = gt_dev_poison((size_t)me * N * 2);
            dic_ctx c1;
            size_t scr = dic_gemm_scratch(me, N, K), scr1 = dic_gemm_scratch(1, N, K);
            CHECK(gt_ctx(&c1, scr > scr1 ? scr : scr1) && dAe && dGe);
            c1.batch_invariant = 1; /* M-free: a row's bits are its own, whatever launch it is in */
            CUDA_SYNC_CHECK(dic_gemm(&c1, me, dAe, (size_t)K, &dw[e], act, NULL, dGe, (size_t)N));
            Ge = malloc((size_t)me * N * 2);
            CUDA_CHECK(cudaMemcpy(Ge, dGe, (size_t)me * N * 2, cudaMemcpyDeviceToHost));
            /* the expert's last row alone (M = 1): the dense launch above must not hide an M dependence */
            CUDA_CHECK(cudaMemset(dGe, 0xFF, (size_t)N * 2));
            CUDA_SYNC_CHECK(dic_gemm(&c1, 1, (const uint16_t *)dAe + (size_t)(me - 1) * K, (size_t)K, &dw[e], act, NULL,
                                     dGe, (size_t)N));
            uint16_t *G1 = malloc((size_t)N * 2);
            CUDA_CHECK(cudaMemcpy(G1, dGe, (size_t)N * 2, cudaMemcpyDeviceToHost));
            CHECK_MSG(memcmp(G1, Ge + (size_t)(me - 1) * N, (size_t)N * 2) == 0,
                      "grouped %s E=%d: expert %d row %d: dense M=%d differs from the row alone", fmt_name(fmt), E, e,
                      me - 1, me);
            free(G1);
            cudaFree(dAe), cudaFree(dGe), cudaFree(c1.scratch), cudaStreamDestroy(c1.stream);
        }
        for (int i = 0; i < me; i++) {
            int r = rows[off[e] + i];
            float rmax = 0;
            for (int n = 0; n < N; n++) rmax = fmaxf(rmax, fabsf(Re[(size_t)i * N + n]));
            for (int n = 0; n < N; n++) {
                float g = di_bf16_to_f32(C[(size_t)r * ldc + n]), c = Re[(size_t)i * N + n];
                CHECK_MSG(fabsf(g - c) <= 0x1p-8f * fabsf(c) + 1e-4f * rmax,
                          "grouped %s E=%d T=%d N=%d K=%d: expert %d row %d (A row %d) col %d: gpu %.7g, di_gemm %.7g",
                          fmt_name(fmt), E, T, N, K, e, i, r, n, g, c);
                if (Ge)
                    CHECK_MSG(C[(size_t)r * ldc + n] == Ge[(size_t)i * N + n],
                              "grouped %s E=%d: expert %d row %d col %d: 0x%04x, dense dic_gemm 0x%04x", fmt_name(fmt),
                              E, e, i, n, C[(size_t)r * ldc + n], Ge[(size_t)i * N + n]);
                num += ((double)g - c) * ((double)g - c);
                den += (double)c * c;
            }
        }
        di_wmat_free(&pw);
        free(Ae), free(Re), free(Ge);
    }
    for (int r = 0; r < R; r++)
        for (size_t n = (size_t)N; n < ldc; n++)
            CHECK_MSG(C[(size_t)r * ldc + n] == 0xFFFF, "grouped: padding column %zu of row %d written", n, r);
    fprintf(stderr, "  grouped %s E=%d T=%d N=%d K=%d B=%d act=%d: norm rel %.2e vs di_gemm (bf16 out)\n",
            fmt_name(fmt), E, T, N, K, B, act, sqrt(num / den));
    di_exec_free(&x);
    for (int e = 0; e < E; e++) cudaFree((void *)dw[e].w), cudaFree((void *)dw[e].scale), free(w[e]), free(sc[e]);
    cudaFree(dA), cudaFree(doff), cudaFree(drows), cudaFree(dC), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(A), free(sel), free(off), free(rows), free(fill), free(w), free(sc), free(dw), free(C);
}

TEST(gpu_gemm_grouped) {
    grouped_case(DI_WFMT_FP4, 256, 8, 300, 4096, 32, 128, 1, 2001); /* V4 decode */
    if (di_test_failed()) return;
    grouped_case(DI_WFMT_FP4, 384, 3, 96, 5120, 32, 32, 1, 2002); /* V4.1 decode */
    if (di_test_failed()) return;
    grouped_case(DI_WFMT_FP8, 16, 300, 256, 1024, 128, 128, 1, 2003); /* prefill-sized: splits inside a CTA */
    if (di_test_failed()) return;
    grouped_case(DI_WFMT_FP8, 32, 40, 200, 1120, 32, 32, 1, 2005); /* V4.1 FP8 blocks, K % 128 != 0 */
    if (di_test_failed()) return;
    grouped_case(DI_WFMT_FP4, 8, 200, 160, 2304, 32, 32, 1, 2004);
}
