/* gtest_gemm_dec.c — the decode kernel (dic_gemm_f16.cu k_gemm_dec: plain FP8 / FP4 at M <= 8,
 * batch_invariant = 0) and dic_gemm_multi:
 *  - dic_gemm at M = 1, 2, 3, 8 on the V4-Flash decode shapes and odd N (1000, 520) against the
 *    CPU: every sampled element within 2^-10 of the absolute-value sum of its exact terms (double
 *    reference over the CPU-quantised activations, gtest_gemm_f16.c's bound), norm-wise <= 1e-4 vs
 *    that reference and vs di_gemm; bf16 output = bf16(fp32 output);
 *  - two launches bitwise equal; the kernel quantising its own rows (mode 3) bitwise equal to the
 *    quantisation launch + the same kernel (mode 1), to the two-launch k_gemm_f16 (mode 2) and to
 *    the default (mode 0, which picks 3 or 1);
 *  - the decode kernel really ran (dic_gemm_dec_status() is not -1: no launch was refused);
 *  - modes 3, 1 and 0 once more per case (the rows the variant table of lab/gemm names: the product's
 *    flags; the kernel's other variants are lab/gemm's, compared in gemm_dec_bench) bitwise equal to
 *    the first run;
 *  - the default kernel launched repeatedly gives the same bits again (gpu_gemm_dec_diag, the shapes
 *    of the timing diagnostics that moved to lab/gemm);
 *  - dic_gemm_multi (2 and 3 weights, odd N) bitwise equal to the separate dic_gemm calls, padding
 *    columns untouched, twice. */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gemm_ref.h"
#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/ops.h"

#define TOL_ELEM 0x1p-10
#define TOL_NORM 1e-4

static void d_gen(int fmt, int N, int K, uint8_t **w, size_t *wb, uint8_t **sc, size_t *sb, uint64_t *s) {
    *wb = fmt == DI_WFMT_FP8 ? (size_t)N * K : (size_t)N * K / 2;
    *sb = fmt == DI_WFMT_FP8 ? (size_t)((N + 127) / 128) * (K / 128) : (size_t)N * (K / 32);
    *w = malloc(*wb);
    *sc = malloc(*sb);
    for (size_t i = 0; i < *wb; i++) {
        uint8_t b = (uint8_t)gt_rand_u64(s);
        if (fmt == DI_WFMT_FP8 && (b & 0x7F) == 0x7F) b ^= 1;
        (*w)[i] = b;
    }
    for (size_t i = 0; i < *sb; i++) (*sc)[i] = (uint8_t)(118 + gt_rand_u64(s) % 12);
}
static double d_wv(int fmt, const uint8_t *w, const uint8_t *sc, int K, int n, int k) {
    if (fmt == DI_WFMT_FP8)
        return (double)di_e4m3_to_f32(w[(size_t)n * K + k]) * di_e8m0_to_f32(sc[(size_t)(n / 128) * (K / 128) + k / 128]);
    uint8_t b = w[(size_t)n * (K / 2) + k / 2];
    return (double)di_e2m1_to_f32((k & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15)) *
           di_e8m0_to_f32(sc[(size_t)n * (K / 32) + k / 32]);
}

/* run dic_gemm in decode mode `mode` (dic_gemm_dec_mode) into fresh fp32 + bf16 outputs */
static void d_run(dic_ctx *ctx, int mode, int M, const void *dA, size_t lda, const dic_wmat *dw, int act, size_t ldc,
                  float **C, uint16_t **C16) {
    dic_gemm_dec_mode(mode);
    float *dC = gt_dev_poison((size_t)M * ldc * 4);
    uint16_t *dC16 = gt_dev_poison((size_t)M * ldc * 2);
    CHECK(dC && dC16);
    CUDA_CHECK(dic_gemm(ctx, M, dA, lda, dw, act, dC, NULL, ldc));
    CUDA_CHECK(dic_gemm(ctx, M, dA, lda, dw, act, NULL, dC16, ldc));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    *C = gt_d2h(dC, (size_t)M * ldc * 4);
    *C16 = gt_d2h(dC16, (size_t)M * ldc * 2);
    cudaFree(dC), cudaFree(dC16);
    dic_gemm_dec_mode(0);
}

/* the rows of the former variant table (lab/gemm's now): {mode, flags, cps}; the product runs its own flags */
static const int dec_var[][3] = {
    {3, DIC_DEC_QV2, 0}, {3, DIC_DEC_ET, 0}, {3, DIC_DEC_WPOST, 0}, {3, DIC_DEC_QV2 | DIC_DEC_ET, 3},
    {1, DIC_DEC_ET, 0},  {1, DIC_DEC_QV2, 2}, {0, DIC_DEC_QV2 | DIC_DEC_ET | DIC_DEC_WPOST, 2}, {3, 0, 6},
    {3, DIC_DEC_PERS, 0}, {3, DIC_DEC_PERS | DIC_DEC_L2PF, 1}, {3, DIC_DEC_L2PF, 0},
    {0, DIC_DEC_PERS | DIC_DEC_L2PF | DIC_DEC_QV2 | DIC_DEC_ET, 3}, {1, DIC_DEC_PERS, 1},
};

static void dec_case(int fmt, int M, int N, int K, int act, uint64_t seed) {
    uint64_t s = seed;
    size_t lda = (size_t)K + 8, ldc = (size_t)N + 3;
    uint16_t *A = malloc((size_t)M * lda * 2);
    fill_act(A, M, K, lda, act, &s);
    uint8_t *w, *sc;
    size_t wb, sb;
    d_gen(fmt, N, K, &w, &wb, &sc, &sb, &s);
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, dic_gemm_scratch(M, N, K)));
    void *dA = gt_to_dev(A, (size_t)M * lda * 2), *dW = gt_to_dev(w, wb), *dS = gt_to_dev(sc, sb);
    CHECK(dA && dW && dS);
    dic_wmat dw = {fmt, N, K, fmt == DI_WFMT_FP8 ? 128 : 32, dW, dS};
    float *C, *C2, *Cq, *Co, *Ca;
    uint16_t *C16, *C16b, *C16q, *C16o, *C16a;
    d_run(&ctx, 3, M, dA, lda, &dw, act, ldc, &C, &C16);
    d_run(&ctx, 3, M, dA, lda, &dw, act, ldc, &C2, &C16b);
    CHECK_MSG(dic_gemm_dec_status() == 0, "dec N=%d K=%d: the decode kernel's launch was refused", N, K);
    d_run(&ctx, 1, M, dA, lda, &dw, act, ldc, &Cq, &C16q);
    d_run(&ctx, 2, M, dA, lda, &dw, act, ldc, &Co, &C16o);
    d_run(&ctx, 0, M, dA, lda, &dw, act, ldc, &Ca, &C16a);
    const size_t tot = (size_t)M * ldc;
    size_t d2 = gt_count_diff_u32(C, C2, tot), dq = gt_count_diff_u32(C, Cq, tot), dold = gt_count_diff_u32(C, Co, tot);
    CHECK_MSG(gt_count_diff_u32(C, Ca, tot) == 0 && gt_count_diff_u16(C16, C16a, tot) == 0,
              "dec %d M=%d N=%d K=%d: the default mode differs", fmt, M, N, K);
    CHECK_MSG(d2 == 0 && gt_count_diff_u16(C16, C16b, tot) == 0, "dec %d M=%d N=%d K=%d: two runs differ", fmt, M, N, K);
    CHECK_MSG(dq == 0, "dec %d M=%d N=%d K=%d: own quantisation vs quantisation launch: %zu outputs differ", fmt, M, N,
              K, dq);
    CHECK_MSG(dold == 0, "dec %d M=%d N=%d K=%d: vs k_gemm_f16: %zu outputs differ", fmt, M, N, K, dold);
    for (unsigned v = 0; v < sizeof dec_var / sizeof *dec_var && !di_test_failed(); v++) {
        float *Cv;
        uint16_t *C16v;
        d_run(&ctx, dec_var[v][0], M, dA, lda, &dw, act, ldc, &Cv, &C16v);
        CHECK_MSG(dic_gemm_dec_status() == 0, "dec variant %u: launch refused", v);
        size_t dv = gt_count_diff_u32(C, Cv, tot), dv16 = gt_count_diff_u16(C16, C16v, tot);
        CHECK_MSG(dv == 0 && dv16 == 0, "dec %d M=%d N=%d K=%d act=%d: variant mode %d flags %d cps %d: %zu / %zu outputs "
                  "differ", fmt, M, N, K, act, dec_var[v][0], dec_var[v][1], dec_var[v][2], dv, dv16);
        free(Cv), free(C16v);
    }
    di_wmat pw;
    di_exec x;
    CHECK(di_wmat_pack(&pw, (di_wfmt)fmt, w, sc, N, K, 128, NULL) == DEEPINFER_OK);
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    float *R = malloc((size_t)M * ldc * 4), *q = malloc((size_t)K * 4), *sa = malloc((size_t)(K / act) * 4);
    di_gemm(&x, M, A, lda, &pw, act, R, NULL, ldc);
    const int kb = fmt == DI_WFMT_FP8 ? (act < 128 ? act : 128) : 32;
    double num = 0, den = 0, num2 = 0, worst = 0;
    const int step = (double)N * K > 4e6 ? 7 : 1;
    for (int m = 0; m < M && !di_test_failed(); m++) {
        for (size_t n = (size_t)N; n < ldc; n++)
            CHECK_MSG(di_f32_bits(C[m * ldc + n]) == 0xFFFFFFFFu && C16[m * ldc + n] == 0xFFFF,
                      "dec %d M=%d N=%d: padding column %zu of row %d written", fmt, M, N, n, m);
        ref_quant_row(A + (size_t)m * lda, K, act, q, sa);
        for (int n = 0; n < N; n++) {
            size_t i = (size_t)m * ldc + n;
            CHECK_MSG(C[i] == C[i], "dec %d M=%d N=%d K=%d: C[%d][%d] NaN / unwritten", fmt, M, N, K, m, n);
            CHECK_MSG(C16[i] == di_f32_to_bf16(C[i]), "dec %d M=%d: bf16 out [%d][%d] 0x%04x != bf16(%a)", fmt, M, m, n,
                      C16[i], C[i]);
            if (di_test_failed()) break;
            if ((n + m) % step) continue;
            double ref = 0, abs = 0;
            for (int k0 = 0; k0 < K; k0 += kb) {
                double p = 0, pa = 0;
                for (int k = k0; k < k0 + kb; k++) {
                    double t = (double)q[k] * d_wv(fmt, w, sc, K, n, k);
                    p += t, pa += fabs(t);
                }
                ref += p * sa[k0 / act], abs += pa * sa[k0 / act];
            }
            double e = fabs(C[i] - ref);
            CHECK_MSG(e <= TOL_ELEM * abs + 1e-30, "dec %d M=%d N=%d K=%d act=%d: C[%d][%d] = %.9g, ref %.9g", fmt, M, N,
                      K, act, m, n, C[i], ref);
            if (di_test_failed()) break;
            if (abs > 0 && e / abs > worst) worst = e / abs;
            num += e * e, den += ref * ref;
            num2 += ((double)C[i] - R[i]) * ((double)C[i] - R[i]);
        }
    }
    if (!di_test_failed()) {
        double rel = sqrt(num / den), rel2 = sqrt(num2 / den);
        fprintf(stderr, "  dec %s M=%d N=%d K=%d act=%d: err/abs-sum %.1e, norm %.1e (double) %.1e (di_gemm); bitwise = "
                        "k_gemm_f16 = %d variants\n", fmt == DI_WFMT_FP8 ? "FP8" : "FP4", M, N, K, act, worst, rel, rel2,
                (int)(sizeof dec_var / sizeof *dec_var));
        CHECK_MSG(rel <= TOL_NORM && rel2 <= TOL_NORM, "dec %d M=%d N=%d K=%d: norm error %.3g / %.3g", fmt, M, N, K,
                  rel, rel2);
    }
    di_wmat_free(&pw);
    di_exec_free(&x);
    cudaFree(dA), cudaFree(dW), cudaFree(dS), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(A), free(w), free(sc), free(C), free(C2), free(Cq), free(Co), free(Ca), free(C16), free(C16b), free(C16q), free(C16o), free(C16a);
    free(R), free(q), free(sa);
}

static const int dec_ms[] = {1, 2, 3, 8};

TEST(gpu_gemm_dec_fp8) {
    static const int sh[][2] = {{2048, 4096}, {32768, 1024}, {4096, 8192}, {4096, 2048},
                                {1024, 4096}, {512, 4096},   {1000, 4096}, {520, 2048}};
    for (unsigned i = 0; i < sizeof sh / sizeof *sh; i++)
        for (unsigned j = 0; j < sizeof dec_ms / sizeof *dec_ms; j++) {
            dec_case(DI_WFMT_FP8, dec_ms[j], sh[i][0], sh[i][1], 128, 1000 + 10 * i + j);
            if (di_test_failed()) return;
        }
    dec_case(DI_WFMT_FP8, 3, 1000, 1024, 64, 1100); /* act 64: kb = 64 */
    if (di_test_failed()) return;
    dec_case(DI_WFMT_FP8, 2, 520, 384, 32, 1101); /* one group: no split; act 32 */
    if (di_test_failed()) return;
    /* V4.1's act blocks of 32 on its wq_b (k per CTA 1280) and wo_b (1408) shapes: mode 0 takes the quantisation
     * launch at M = 1 (the rule counts act blocks: 40 / 44 per CTA); every mode gives the same bits (dec_case) */
    CHECK_MSG(dic_gemm_dec_fused(1, 32768, 1280, 32, 132) == 0 && dic_gemm_dec_fused(1, 5120, 8192, 32, 132) == 0 &&
                  dic_gemm_dec_fused(2, 32768, 1280, 32, 132) == 0 &&
                  dic_gemm_dec_fused(1, 32768, 1024, 128, 132) == 1 && dic_gemm_dec_fused(2, 4096, 8192, 128, 132) == 1 &&
                  dic_gemm_dec_fused(3, 4096, 8192, 128, 132) == 0,
              "dic_gemm_dec_fused: unexpected choice");
    for (int M = 1; M <= 2 && !di_test_failed(); M++) {
        dec_case(DI_WFMT_FP8, M, 32768, 1280, 32, 1200 + M);
        if (!di_test_failed()) dec_case(DI_WFMT_FP8, M, 5120, 8192, 32, 1300 + M);
    }
    if (di_test_failed()) return;
    /* a shape the decode kernel refuses for its k range (one split of 2176 > 2048, like V4.1's Engram wkv,
     * N 25600 K 6144): dic_gemm_dec_fits says so, dic_gemm skips dec()'s quantisation and runs the fallback
     * (every mode: the quantisation launch + k_gemm_f16), within the tolerance and bitwise across modes */
    CHECK_MSG(!dic_gemm_dec_fits(17024, 2176, 132) && !dic_gemm_dec_fits(25600, 6144, 132) &&
                  dic_gemm_dec_fits(32768, 1280, 132) && dic_gemm_dec_fits(5120, 8192, 132),
              "dic_gemm_dec_fits: unexpected answer");
    dec_case(DI_WFMT_FP8, 1, 17024, 2176, 32, 1400);
}

TEST(gpu_gemm_dec_fp4) {
    static const int sh[][2] = {{2048, 4096}, {4096, 2048}, {1000, 4096}, {520, 2048}};
    for (unsigned i = 0; i < sizeof sh / sizeof *sh; i++)
        for (unsigned j = 0; j < sizeof dec_ms / sizeof *dec_ms; j++) {
            dec_case(DI_WFMT_FP4, dec_ms[j], sh[i][0], sh[i][1], 128, 2000 + 10 * i + j);
            if (di_test_failed()) return;
            dec_case(DI_WFMT_FP4, dec_ms[j], sh[i][0], sh[i][1], 32, 2500 + 10 * i + j);
            if (di_test_failed()) return;
        }
    dec_case(DI_WFMT_FP4, 8, 40, 1056, 32, 2900); /* K = 33 * 32: last chunk partial */
}

/* dic_gemm_multi: nw weights of one format and K from one activation vs nw dic_gemm calls */
static void multi_case(int fmt, int M, int K, int nw, const int *Ns, int act, uint64_t seed) {
    uint64_t s = seed;
    size_t lda = (size_t)K + 8;
    uint16_t *A = malloc((size_t)M * lda * 2);
    fill_act(A, M, K, lda, act, &s);
    int nmax = 0;
    for (int i = 0; i < nw; i++) nmax = Ns[i] > nmax ? Ns[i] : nmax;
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, dic_gemm_scratch(M, nmax, K)));
    void *dA = gt_to_dev(A, (size_t)M * lda * 2);
    dic_wmat dw[4];
    uint16_t *dm[4], *ds[4];
    size_t ldc[4];
    for (int i = 0; i < nw; i++) {
        uint8_t *w, *sc;
        size_t wb, sb;
        d_gen(fmt, Ns[i], K, &w, &wb, &sc, &sb, &s);
        dw[i] = (dic_wmat){fmt, Ns[i], K, fmt == DI_WFMT_FP8 ? 128 : 32, gt_to_dev(w, wb), gt_to_dev(sc, sb)};
        free(w), free(sc);
        ldc[i] = (size_t)Ns[i] + 5;
        dm[i] = gt_dev_poison((size_t)M * ldc[i] * 2);
        ds[i] = gt_dev_poison((size_t)M * ldc[i] * 2);
        CHECK(dw[i].w && dw[i].scale && dm[i] && ds[i]);
    }
    uint16_t *dv[4];
    for (int i = 0; i < nw; i++) CHECK((dv[i] = gt_dev_poison((size_t)M * ldc[i] * 2)) != NULL);
    CUDA_CHECK(dic_gemm_multi(&ctx, M, dA, lda, nw, dw, act, dm, ldc));
    CUDA_CHECK(dic_gemm_multi(&ctx, M, dA, lda, nw, dw, act, dv, ldc));
    for (int i = 0; i < nw; i++) CUDA_CHECK(dic_gemm(&ctx, M, dA, lda, &dw[i], act, NULL, ds[i], ldc[i]));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    CHECK_MSG(dic_gemm_dec_status() == 0, "multi: the decode kernel's launch was refused");
    for (int i = 0; i < nw && !di_test_failed(); i++) {
        uint16_t *a = gt_d2h(dm[i], (size_t)M * ldc[i] * 2), *b = gt_d2h(ds[i], (size_t)M * ldc[i] * 2);
        uint16_t *av = gt_d2h(dv[i], (size_t)M * ldc[i] * 2);
        size_t d = gt_count_diff_u16(a, b, (size_t)M * ldc[i]), d2 = gt_count_diff_u16(av, b, (size_t)M * ldc[i]);
        CHECK_MSG(d == 0, "multi %d M=%d K=%d: weight %d (N=%d): %zu outputs differ from dic_gemm", fmt, M, K, i, Ns[i], d);
        CHECK_MSG(d2 == 0, "multi %d M=%d K=%d: weight %d (N=%d), QV2|ET|PERS|L2PF: %zu outputs differ", fmt, M, K, i, Ns[i], d2);
        free(av);
        for (int m = 0; m < M; m++)
            for (size_t n = (size_t)Ns[i]; n < ldc[i]; n++)
                CHECK_MSG(a[m * ldc[i] + n] == 0xFFFF, "multi: padding column written");
        free(a), free(b);
    }
    if (!di_test_failed())
        fprintf(stderr, "  multi %s M=%d K=%d nw=%d: bitwise = separate dic_gemm\n", fmt == DI_WFMT_FP8 ? "FP8" : "FP4", M,
                K, nw);
    for (int i = 0; i < nw; i++)
        cudaFree((void *)dw[i].w), cudaFree((void *)dw[i].scale), cudaFree(dm[i]), cudaFree(ds[i]), cudaFree(dv[i]);
    cudaFree(dA), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(A);
}

TEST(gpu_gemm_dec_multi) {
    static const int attn[] = {1024, 512}, odd[] = {1000, 520, 64}, four[] = {512, 512, 1000, 520};
    for (unsigned j = 0; j < sizeof dec_ms / sizeof *dec_ms && !di_test_failed(); j++) {
        multi_case(DI_WFMT_FP8, dec_ms[j], 4096, 2, attn, 128, 3000 + j);
        if (!di_test_failed()) multi_case(DI_WFMT_FP8, dec_ms[j], 4096, 3, odd, 128, 3100 + j);
        if (!di_test_failed()) multi_case(DI_WFMT_FP4, dec_ms[j], 2048, 4, four, 32, 3200 + j);
    }
    if (!di_test_failed()) multi_case(DI_WFMT_FP8, 9, 4096, 2, attn, 128, 3300); /* M > 8: separate calls */
}

/* the default kernel, launched once per former timing diagnostic (lab/gemm's now), gives the same bits
 * every time (no state left behind between launches) */
static void diag_case(int fmt, int M, int N, int K, uint64_t seed) {
    static const int dg[] = {DIC_DEC_NOQ, DIC_DEC_NOCL, DIC_DEC_BARE, DIC_DEC_BARE | DIC_DEC_NOW,
                             DIC_DEC_NOQ | DIC_DEC_NOCL, DIC_DEC_BARE | DIC_DEC_NOCL | DIC_DEC_NOW};
    uint64_t s = seed;
    size_t lda = (size_t)K, ldc = (size_t)N;
    uint16_t *A = malloc((size_t)M * lda * 2);
    fill_act(A, M, K, lda, 128, &s);
    uint8_t *w, *sc;
    size_t wb, sb;
    d_gen(fmt, N, K, &w, &wb, &sc, &sb, &s);
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, dic_gemm_scratch(M, N, K)));
    void *dA = gt_to_dev(A, (size_t)M * lda * 2), *dW = gt_to_dev(w, wb), *dS = gt_to_dev(sc, sb);
    CHECK(dA && dW && dS);
    dic_wmat dw = {fmt, N, K, fmt == DI_WFMT_FP8 ? 128 : 32, dW, dS};
    float *C0, *C1;
    uint16_t *H0, *H1;
    d_run(&ctx, 3, M, dA, lda, &dw, 128, ldc, &C0, &H0);
    for (unsigned i = 0; i < sizeof dg / sizeof *dg && !di_test_failed(); i++) {
        float *Cx;
        uint16_t *Hx;
        d_run(&ctx, 3, M, dA, lda, &dw, 128, ldc, &Cx, &Hx);
        CHECK_MSG(dic_gemm_dec_status() == 0, "diag %d N=%d K=%d M=%d: launch refused", dg[i], N, K, M);
        CHECK_MSG(gt_count_diff_u32(C0, Cx, (size_t)M * ldc) == 0 && gt_count_diff_u16(H0, Hx, (size_t)M * ldc) == 0,
                  "diag run %u N=%d K=%d M=%d: the default kernel gave other bits", i, N, K, M);
        free(Cx), free(Hx);
    }
    d_run(&ctx, 3, M, dA, lda, &dw, 128, ldc, &C1, &H1);
    CHECK_MSG(gt_count_diff_u32(C0, C1, (size_t)M * ldc) == 0 && gt_count_diff_u16(H0, H1, (size_t)M * ldc) == 0,
              "diag N=%d K=%d M=%d: the default after the diagnostics differs", N, K, M);
    if (!di_test_failed()) fprintf(stderr, "  diag %s M=%d N=%d K=%d: %d diagnostics ran\n", fmt == DI_WFMT_FP8 ? "FP8" : "FP4",
                                   M, N, K, (int)(sizeof dg / sizeof *dg));
    cudaFree(dA), cudaFree(dW), cudaFree(dS), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(A), free(w), free(sc), free(C0), free(C1), free(H0), free(H1);
}

TEST(gpu_gemm_dec_diag) {
    diag_case(DI_WFMT_FP8, 1, 512, 4096, 4000);
    if (!di_test_failed()) diag_case(DI_WFMT_FP8, 8, 4096, 8192, 4001);
    if (!di_test_failed()) diag_case(DI_WFMT_FP8, 1, 32768, 1024, 4002);
    if (!di_test_failed()) diag_case(DI_WFMT_FP4, 2, 2048, 4096, 4003);
}
