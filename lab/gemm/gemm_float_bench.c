/* gemm_float_bench.c — BF16 / F32 weight GEMMs (dic_gemm_float_fast_launch, the
 * batch_invariant == 0 kernels; and the mode-1 kernels for comparison): d2d copy
 * ceiling first; decode shapes (event-timed median per call and a CUDA graph of up to
 * 256 calls, each on other weights rotating over 256 MB so L2 does not serve them: us per
 * call, the copy floor and floor / graph; GEMV variants through the lab's copy of the kernels,
 * lab_gemm_float_fast_tune in gemm_float_fast_variants.cu, each checked bitwise against the product's
 * launch: "=" / "!=", expected "!=" only for another K split);
 * prefill shapes (TFLOP/s) against cuBLASLt BF16 (bf16 out) in
 * the same run. Usage: gemm_float_bench [quick | woa | woa8 | chain | lmarg | inv | skinny]; inv: the mode-1 BF16
 * path (DIC_GEMMF_PATH_INV) against fast AUTO at the V4 / V4.1 BF16 shapes and wo_a, decode and prefill,
 * after skinny (alone: `skinny`): the mode-1 skinny kernel vs k_mma mode 1 vs fast AUTO at M <= 16;
 * woa: only the grouped wo_a (G = 8 x N 1024 x K 4096) at M = 1, 2, 3, 4, 8, 64 (mode 1: 1, 8, 64), BF16 storage vs FP8 storage
 * (dic.h DIC_WFMT_FP8B; same bits except the fast FP8 GEMV at M <= 4, dic_gemm_fp8w_gemv.cu,
 * also timed against the bitwise k_gemv F8 it replaces), fast mode and mode 1; chain: the mode-1
 * F32 GEMM (dic_gemm_f32_chain.cu) against the old k_gemm_float at the mHC shapes; lmarg: the
 * lm_head with the greedy argmax, unfused (dic_gemm + dic_argmax) vs fused (dic_gemm_argmax); woa8: the mode-1
 * FP8B wo_a at M = 1 .. 8, the product vs the lab's FP8B skinny variants (skinny_f8_variants.cu, bitwise) vs
 * the fast mode. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "bench_util.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_gemm_int.h"
#include "gemm_lab.h"

#define LTCK(x)                                                                                 \
    do {                                                                                        \
        cublasStatus_t s_ = (x);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                      \
            fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_);   \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)


/* bf16 values |v| in [2^-7, 2^-5), random sign; or fp32 the same magnitudes */
static void fill_w(void *d, size_t n, int f32, unsigned seed) {
    size_t eb = f32 ? 4 : 2;
    unsigned char *h = malloc(n * eb);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        unsigned short b = (unsigned short)(0x3C00u | (s & 0x03FFu) | (s & 0x8000u));
        if (f32) {
            unsigned u = (unsigned)b << 16 | (unsigned)((s >> 20) & 0xFFFF);
            memcpy(h + i * 4, &u, 4);
        } else {
            memcpy(h + i * 2, &b, 2);
        }
    }
    CK(cudaMemcpy(d, h, n * eb, cudaMemcpyHostToDevice));
    free(h);
}

static cudaStream_t st;
static cudaEvent_t e0, e1;
static double copy_gbs;

static double graph_ms(void (*body)(void *, int), void *arg, int calls) {
    cudaGraph_t gr;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < calls; i++) body(arg, i);
    CK(cudaStreamEndCapture(st, &gr));
    return graph_median_ms(st, gr, e0, e1) / calls;
}

static double event_ms(void (*body)(void *, int), void *arg, int reps) {
    for (int i = 0; i < 3; i++) body(arg, i);
    float *t = malloc(sizeof(float) * reps);
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0, st));
        body(arg, r);
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[r], e0, e1));
    }
    qsort(t, reps, sizeof *t, cmpf);
    double ms = t[reps / 2];
    free(t);
    return ms;
}

typedef struct gcase {
    int M, nw, path, G, f32out, per_group;
    dic_wmat *w; /* nw x G */
    void *A, *C;
    dic_ctx *ctx;
    int lab; /* 1: the lab's copy of the kernels (the tuned variants), 0: the product's */
} gcase;

static void gemm_body(void *p, int i) {
    gcase *g = p;
    dic_wmat *w = &g->w[(size_t)(i % g->nw) * g->G];
    float *c32 = g->f32out ? g->C : NULL;
    uint16_t *c16 = g->f32out ? NULL : g->C;
    if (g->G > 1) { /* block-diagonal: one launch (dic_gemm_blockdiag) or the old per-group launches */
        size_t lda = (size_t)g->G * w->k, ldc = (size_t)g->G * w->n;
        if (!g->per_group) {
            if (g->lab) CK(lab_gemm_blockdiag(g->ctx, g->M, g->A, lda, g->G, w, w->k, 0, c32, c16, ldc));
            else CK(dic_gemm_blockdiag(g->ctx, g->M, g->A, lda, g->G, w, w->k, 0, c32, c16, ldc));
            return;
        }
        for (int k = 0; k < g->G; k++)
            CK(dic_gemm_float_fast_launch(st, g->M, (const uint16_t *)g->A + (size_t)k * w->k, lda, &w[k],
                                          c32 ? c32 + (size_t)k * w->n : NULL, c16 ? c16 + (size_t)k * w->n : NULL,
                                          ldc, DIC_GEMMF_PATH_AUTO));
        return;
    }
    if (g->lab) CK(lab_gemm_float_fast_launch(st, g->M, g->A, (size_t)w->k, w, c32, c16, (size_t)w->n, g->path));
    else CK(dic_gemm_float_fast_launch(st, g->M, g->A, (size_t)w->k, w, c32, c16, (size_t)w->n, g->path));
}

static const char *pname(int p) {
    return p == DIC_GEMMF_PATH_AUTO ? "auto" : p == DIC_GEMMF_PATH_GEMV ? "gemv" : p == DIC_GEMMF_PATH_MMA ? "mma"
           : p == DIC_GEMMF_PATH_MMA64 ? "mma64" : p == DIC_GEMMF_PATH_MMA128 ? "mma128"
           : p == DIC_GEMMF_PATH_INV ? "inv(mode1)" : "old(mode1)";
}

/* Weight pool for decode rows: every call of a graph reads different weights, rotating over
 * 256 MB (> the 50 MB L2), as in a decode step where every weight is read once. */
#define POOL_B ((size_t)256 << 20)
static void *pool;

static int g_mode; /* dic_ctx.batch_invariant of the decode rows */

/* One decode row: G groups (1: plain) of N x K weights (fmt 0 bf16 / 1 f32 / 4 FP8B: e4m3 bytes
 * with e8m0 scales per 128 x 128 block, all 2^-7), M rows, a path,
 * the GEMV tuning (wpc, cy, flags; 0 = auto), f32out: fp32 output (else bf16); per_group: the
 * block-diagonal product as G launches (the old fallback). Prints event us, graph us per call,
 * the copy floor (weight bytes / copy ceiling) and floor / graph. */
static double dec_row(const char *label, int fmt, int M, int N, int K, int G, int path, int wpc, int cy, int flags,
                      int f32out, int per_group, int reps) {
    static dic_ctx ctx;
    static void *f8_scratch; /* FP8B rows: room for the groups' BF16 copy (fast mode above the mma's M range) */
    ctx.stream = st, ctx.num_sms = 132, ctx.batch_invariant = g_mode;
    const int f8 = fmt == DIC_WFMT_FP8B;
    const size_t f8_cap = (size_t)G * N * K * 2 + 4096;
    if (f8 && !f8_scratch) CK(cudaMalloc(&f8_scratch, (size_t)96 << 20));
    ctx.scratch = f8 && f8_cap <= ((size_t)96 << 20) ? f8_scratch : NULL;
    ctx.scratch_cap = ctx.scratch ? (size_t)96 << 20 : 0;
    size_t eb = fmt == 1 ? 4 : f8 ? 1 : 2, wb = (size_t)N * K * eb, wbc = wb * G;
    size_t sb = f8 ? (size_t)((N + 127) / 128) * (size_t)(K / 128) : 0; /* scale bytes per group */
    int nw = wbc <= POOL_B / 4 ? (int)(POOL_B / wbc) : 1;
    if (nw > 256) nw = 256;
    void *own = NULL;
    if (nw == 1) {
        CK(cudaMalloc(&own, wbc));
        CK(cudaMemset(own, 0x3C, wbc));
    }
    uint8_t *sc = NULL;
    if (f8) {
        CK(cudaMalloc((void **)&sc, sb * (size_t)nw * G));
        CK(cudaMemset(sc, 120, sb * (size_t)nw * G));
    }
    gcase g = {M, nw, path, G, f32out, per_group, malloc(sizeof(dic_wmat) * nw * G), NULL, NULL, &ctx, 0};
    for (int i = 0; i < nw; i++)
        for (int k = 0; k < G; k++)
            g.w[i * G + k] = (dic_wmat){fmt, N, K, f8 ? 128 : 0, (char *)(own ? own : pool) + i * wbc + k * wb,
                                        f8 ? sc + ((size_t)i * G + k) * sb : NULL};
    CK(cudaMalloc(&g.A, (size_t)M * K * G * 2));
    fill_w(g.A, (size_t)M * K * G, 0, 99);
    CK(cudaMalloc(&g.C, (size_t)M * N * G * 4));
    g.lab = wpc || cy || flags;
    lab_gemm_float_fast_tune(wpc, cy, flags);
    double ms = event_ms(gemm_body, &g, reps);
    int calls = nw < 32 ? (wbc > ((size_t)256 << 20) ? 12 : 32) : nw;
    double gms = graph_ms(gemm_body, &g, calls);
    const char *same = "";
    if (g.lab) { /* the lab variant's output against the product's, one call each on weights 0 */
        const size_t ob = (size_t)M * N * G * (f32out ? 4 : 2);
        void *h1 = malloc(ob), *h2 = malloc(ob);
        gemm_body(&g, 0);
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(h1, g.C, ob, cudaMemcpyDeviceToHost));
        g.lab = 0;
        gemm_body(&g, 0);
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(h2, g.C, ob, cudaMemcpyDeviceToHost));
        same = memcmp(h1, h2, ob) ? " !=" : " =";
        free(h1), free(h2);
    }
    lab_gemm_float_fast_tune(0, 0, 0);
    double floor_us = (wbc + sb * G) / (copy_gbs * 1e9) * 1e6;
    printf("%-26s %-4s M=%-3d N=%-6d K=%-5d G=%d %-4s w%d c%d f%-2d | event %8.2f us | graph %8.2f us | floor %7.2f us"
           " | %4.2f%s\n",
           label, fmt == 1 ? "f32" : f8 ? "fp8b" : "bf16", M, N, K, G, pname(path), wpc, cy, flags & 7, ms * 1e3,
           gms * 1e3, floor_us, floor_us / (gms * 1e3), same);
    fflush(stdout);
    if (own) cudaFree(own);
    if (sc) cudaFree(sc);
    cudaFree(g.A), cudaFree(g.C), free(g.w);
    return gms;
}

/* lm_head + greedy argmax at decode (V4: N = 129280, K = 4096, BF16, fp32 logits): graph us per
 * call of the GEMM alone, the GEMM then dic_argmax (today's decode step), the fused launch
 * (dic_gemm_argmax) and dic_argmax alone; 12 calls per graph on one 1.06 GB weight (HBM each
 * call). The fused ids are checked against the unfused ones once. */
typedef struct amcase {
    int M, N, K, what; /* 0 gemm, 1 gemm + argmax, 2 fused, 3 argmax */
    dic_wmat w;
    void *A;
    float *C;
    int32_t *ids;
    dic_ctx *ctx;
} amcase;

static void am_body(void *p, int i) {
    amcase *a = p;
    (void)i;
    if (a->what == 0 || a->what == 1)
        CK(dic_gemm_float_fast_launch(st, a->M, a->A, (size_t)a->K, &a->w, a->C, NULL, (size_t)a->N,
                                      DIC_GEMMF_PATH_AUTO));
    if (a->what == 1 || a->what == 3) CK(dic_argmax(a->ctx, a->M, a->C, (size_t)a->N, a->N, a->ids));
    if (a->what == 2) CK(dic_gemm_argmax(a->ctx, a->M, a->A, (size_t)a->K, &a->w, a->C, (size_t)a->N, a->ids));
}

static void lmarg_rows(void) {
    const int N = 129280, K = 4096, ms[3] = {1, 2, 8};
    static dic_ctx ctx;
    ctx.stream = st, ctx.num_sms = 132, ctx.batch_invariant = 0;
    void *W;
    CK(cudaMalloc(&W, (size_t)N * K * 2));
    fill_w(W, (size_t)N * K, 0, 5);
    const double floor_us = (double)N * K * 2 / (copy_gbs * 1e9) * 1e6;
    printf("-- lm_head N=%d K=%d bf16 + greedy argmax: graph us per call (12 calls per graph), floor = weight bytes /"
           " copy ceiling = %.1f us\n", N, K, floor_us);
    for (int t = 0; t < 3; t++) {
        amcase a = {ms[t], N, K, 0, {0, N, K, 0, W, NULL}, NULL, NULL, NULL, &ctx};
        CK(cudaMalloc(&a.A, (size_t)a.M * K * 2));
        fill_w(a.A, (size_t)a.M * K, 0, 77);
        CK(cudaMalloc((void **)&a.C, (size_t)a.M * N * 4));
        CK(cudaMalloc((void **)&a.ids, 2 * DIC_AM_MAXM * 4));
        if (!dic_gemm_argmax_ok(&ctx, a.M, a.A, (size_t)K, &a.w, (size_t)N)) {
            printf("lm_head+argmax M=%d: the fused launch does not apply\n", a.M);
            cudaFree(a.A), cudaFree(a.C), cudaFree(a.ids);
            continue;
        }
        int32_t h[2 * DIC_AM_MAXM];
        a.what = 1;
        am_body(&a, 0);
        CK(cudaMemcpyAsync(a.ids + DIC_AM_MAXM, a.ids, (size_t)a.M * 4, cudaMemcpyDeviceToDevice, st));
        a.what = 2;
        am_body(&a, 0);
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(h, a.ids, sizeof h, cudaMemcpyDeviceToHost));
        const int same = !memcmp(h, h + DIC_AM_MAXM, (size_t)a.M * 4);
        double us[4];
        for (int w = 0; w < 4; w++) {
            a.what = w;
            for (int i = 0; i < 2; i++) am_body(&a, i); /* warm-up */
            us[w] = graph_ms(am_body, &a, 12) * 1e3;
        }
        printf("lm_head+argmax M=%d | gemm %8.2f us | gemm+argmax %8.2f us | fused %8.2f us | argmax alone %6.2f us |"
               " fused saves %6.2f us | ids %s\n",
               a.M, us[0], us[1], us[2], us[3], us[1] - us[2], same ? "equal" : "DIFFER");
        fflush(stdout);
        cudaFree(a.A), cudaFree(a.C), cudaFree(a.ids);
    }
    cudaFree(W);
}

/* Mode-1 F32 chain rows (dic_gemm_f32_chain.cu) against the old k_gemm_float
 * (dic_gemm_f32_chain_enable(0)), same bits: graph us per call, `calls` calls per graph on
 * weights rotating over the pool (L2 does not hold them), fp32 out. Floors: the serial
 * chain K x 4 cycles at the SM clock, and the weight bytes / copy ceiling. */
static void chain_row(const char *label, int M, int N, int K, int calls_new, int calls_old) {
    static dic_ctx ctx;
    ctx.stream = st, ctx.num_sms = 132, ctx.batch_invariant = 1;
    const size_t wb = (size_t)N * K * 4;
    int nw = (int)(POOL_B / wb);
    if (nw > 256) nw = 256;
    gcase g = {M, nw, DIC_GEMMF_PATH_OLD, 1, 1, 0, malloc(sizeof(dic_wmat) * nw), NULL, NULL, &ctx, 0};
    for (int i = 0; i < nw; i++) g.w[i] = (dic_wmat){1, N, K, 0, (char *)pool + i * wb, NULL};
    CK(cudaMalloc(&g.A, (size_t)M * K * 2));
    fill_w(g.A, (size_t)M * K, 0, 99);
    CK(cudaMalloc(&g.C, (size_t)M * N * 4));
    int clk_khz = 0, dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, dev));
    const double chain_us = 4.0 * K / (clk_khz * 1e3) * 1e6, byte_us = wb / (copy_gbs * 1e9) * 1e6;
    for (int i = 0; i < 3; i++) gemm_body(&g, i); /* warm-up (and the smem attribute) */
    const double t_new = graph_ms(gemm_body, &g, calls_new < nw ? calls_new : nw) * 1e3;
    dic_gemm_f32_chain_enable(0);
    gemm_body(&g, 0);
    const double t_old = graph_ms(gemm_body, &g, calls_old < nw ? calls_old : nw) * 1e3;
    dic_gemm_f32_chain_enable(1);
    CK(cudaStreamSynchronize(st));
    printf("%-22s f32 M=%-5d N=%-3d K=%-6d | chain %8.2f us | old k_gemm_float %8.2f us | old/new %6.1fx |"
           " chain floor %6.2f us (4 cy x K at %d MHz), bytes floor %6.2f us | floor/new %.2f\n",
           label, M, N, K, t_new, t_old, t_old / t_new, chain_us, clk_khz / 1000, byte_us,
           (chain_us > byte_us ? chain_us : byte_us) / t_new);
    fflush(stdout);
    cudaFree(g.A), cudaFree(g.C), free(g.w);
}

/* One prefill row (TFLOP/s; event-timed, no graph). */
static double run_case(int fmt, int M, int N, int K, int path, int reps, int graph) {
    size_t wb = (size_t)N * K * (fmt ? 4 : 2);
    (void)graph;
    void *dw;
    CK(cudaMalloc(&dw, wb));
    fill_w(dw, (size_t)N * K, fmt, 1);
    dic_wmat w = {fmt, N, K, 0, dw, NULL};
    gcase g = {M, 1, path, 1, 0, 0, &w, NULL, NULL, NULL, 0};
    CK(cudaMalloc(&g.A, (size_t)M * K * 2));
    fill_w(g.A, (size_t)M * K, 0, 99);
    CK(cudaMalloc(&g.C, (size_t)M * N * 4));
    double ms = event_ms(gemm_body, &g, reps);
    double tf = 2.0 * M * N * K / (ms * 1e-3) / 1e12;
    printf("%-5s M=%-5d N=%-6d K=%-5d %-10s | %9.4f ms | %7.2f TFLOP/s\n", fmt ? "f32" : "bf16", M, N, K, pname(path),
           ms, tf);
    fflush(stdout);
    cudaFree(dw), cudaFree(g.A), cudaFree(g.C);
    return ms;
}

/* cuBLASLt BF16: D[M][N] (row-major, bf16) = act[M][K] W[N][K]^T (gemm_bench.c's setup, mode 0). */
static double time_lt(cublasLtHandle_t h, int M, int N, int K, void *wsp, size_t wsz, int reps) {
    void *W, *A, *D;
    CK(cudaMalloc(&W, (size_t)N * K * 2));
    CK(cudaMalloc(&A, (size_t)M * K * 2));
    CK(cudaMalloc(&D, (size_t)M * N * 2));
    fill_w(W, (size_t)N * K, 0, 11), fill_w(A, (size_t)M * K, 0, 12);
    cublasLtMatmulDesc_t op;
    LTCK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
    LTCK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA));
    LTCK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB));
    cublasLtMatrixLayout_t la, lb, ld;
    LTCK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, N, K));
    LTCK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K));
    LTCK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    LTCK(cublasLtMatmulPreferenceCreate(&pref));
    LTCK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz));
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    double ms = -1;
    if (cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &nres) == CUBLAS_STATUS_SUCCESS &&
        nres > 0) {
        float alpha = 1.0f, beta = 0.0f;
        for (int i = 0; i < 3; i++)
            LTCK(cublasLtMatmul(h, op, &alpha, W, la, A, lb, &beta, D, ld, D, ld, &res.algo, wsp, wsz, st));
        float *t = malloc(sizeof(float) * reps);
        for (int r = 0; r < reps; r++) {
            CK(cudaEventRecord(e0, st));
            LTCK(cublasLtMatmul(h, op, &alpha, W, la, A, lb, &beta, D, ld, D, ld, &res.algo, wsp, wsz, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&t[r], e0, e1));
        }
        qsort(t, reps, sizeof *t, cmpf);
        ms = t[reps / 2];
        free(t);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    cudaFree(W), cudaFree(A), cudaFree(D);
    return ms;
}

/* Mode-1 BF16 / FP8B rows at M = 1, 2, 4, 8, 16: the skinny kernel (dic_gemm_float_skinny.cu, the default
 * at M <= 16) vs k_mma mode 1 (dic_gemm_skinny_enable(0); the same bits) vs fast AUTO, each row's graph
 * us per call (dec_row's lines), then a summary: bytes (weights + scales), the HBM floor at 4.8 TB/s,
 * the achieved GB/s and floor / time of each. Then the fused lm_head argmax in mode 1 (skinny vs
 * k_mma_am) at M = 1, 8. */
#define HBM_GBS 4800.0
static void skinny_rows(void) {
    printf("-- mode 1 skinny vs k_mma mode 1 vs fast auto (graph us per call; floor at the copy ceiling %.0f GB/s;"
           " summary: HBM floor at %.0f GB/s)\n", copy_gbs, HBM_GBS);
    static const struct { const char *name; int fmt, G, N, K; } sh[] = {
        {"V4 compressor 1024x4096", 0, 1, 1024, 4096}, {"V4 compressor 512x4096", 0, 1, 512, 4096},
        {"V4 idx compressor / gate 256x4096", 0, 1, 256, 4096}, {"V4 indexer wproj 64x4096", 0, 1, 64, 4096},
        {"V4 lm_head 129280x4096", 0, 1, 129280, 4096}, {"V4.1 compressor 1024x5120", 0, 1, 1024, 5120},
        {"V4.1 compressor 512x5120", 0, 1, 512, 5120}, {"V4.1 gate 384x5120", 0, 1, 384, 5120},
        {"V4.1 indexer wproj 32x5120", 0, 1, 32, 5120}, {"V4.1 indexer wk 128x512", 0, 1, 128, 512},
        {"V4.1 lm_head 129280x5120", 0, 1, 129280, 5120}, {"V4.1 markov head 129280x256", 0, 1, 129280, 256},
        {"wo_a fp8b 8x1024x4096", DIC_WFMT_FP8B, 8, 1024, 4096}};
    static const int ms[] = {1, 2, 4, 8, 16};
    static char sum[sizeof sh / sizeof *sh][5][512];
    for (unsigned j = 0; j < sizeof sh / sizeof *sh; j++) {
        const int f8 = sh[j].fmt == DIC_WFMT_FP8B, lm = sh[j].N > 100000, reps = lm ? 5 : 30;
        const double bytes = (double)sh[j].G * sh[j].N * sh[j].K * (f8 ? 1 : 2) +
                             (f8 ? (double)sh[j].G * (sh[j].N / 128) * (sh[j].K / 128) : 0);
        const double hbm_us = bytes / (HBM_GBS * 1e9) * 1e6;
        for (int i = 0; i < 5; i++) {
            const int M = ms[i], path1 = sh[j].G > 1 ? DIC_GEMMF_PATH_AUTO : DIC_GEMMF_PATH_INV;
            double t[3];
            g_mode = 1;
            dic_gemm_skinny_enable(1);
            t[0] = dec_row("inv skinny", sh[j].fmt, M, sh[j].N, sh[j].K, sh[j].G, path1, 0, 0, 0, lm, 0, reps);
            dic_gemm_skinny_enable(0);
            t[1] = dec_row("inv k_mma", sh[j].fmt, M, sh[j].N, sh[j].K, sh[j].G, path1, 0, 0, 0, lm, 0, reps);
            dic_gemm_skinny_enable(1);
            g_mode = 0;
            t[2] = dec_row("fast auto", sh[j].fmt, M, sh[j].N, sh[j].K, sh[j].G, DIC_GEMMF_PATH_AUTO, 0, 0, 0, lm, 0,
                           reps);
            snprintf(sum[j][i], sizeof sum[j][i],
                     "%-34s M=%-2d | %9.1f MB hbm floor %8.2f us | skinny %8.2f us %6.0f GB/s %4.2f | k_mma %8.2f"
                     " us %4.2f | fast %8.2f us %4.2f | k_mma/skinny %5.2f fast/skinny %5.2f",
                     sh[j].name, M, bytes / 1e6, hbm_us, t[0] * 1e3, bytes / (t[0] * 1e-3) / 1e9,
                     hbm_us / (t[0] * 1e3), t[1] * 1e3, hbm_us / (t[1] * 1e3), t[2] * 1e3, hbm_us / (t[2] * 1e3),
                     t[1] / t[0], t[2] / t[0]);
        }
    }
    printf("-- summary (floor / time at 4.8 TB/s)\n");
    for (unsigned j = 0; j < sizeof sh / sizeof *sh; j++)
        for (int i = 0; i < 5; i++) printf("%s\n", sum[j][i]);
    /* geometry sweep (dic_gemm_skinny_tune: warps per CTA, n8 tiles per unit, units per warp; 0 = auto; no
     * bit changes, gtest_gemm_inv_skinny.c gpu_gemm_inv_skinny_tunings) on three shapes */
    static const struct { int j, M, w, nt, u; } tv[] = {
        {0, 1, 1, 2, 0}, {0, 1, 4, 2, 0}, {0, 1, 2, 1, 0}, {0, 16, 1, 2, 0}, {0, 16, 4, 2, 0},
        {4, 1, 8, 2, 0}, {4, 1, 16, 1, 0}, {4, 1, 16, 2, 2}, {4, 8, 8, 2, 0}, {4, 16, 4, 2, 0},
        {12, 1, 4, 2, 1}, {12, 1, 2, 2, 0}, {12, 1, 8, 2, 0}, {12, 16, 4, 2, 1}, {12, 16, 4, 1, 0}};
    g_mode = 1;
    for (unsigned v = 0; v < sizeof tv / sizeof *tv; v++) {
        const int j = tv[v].j, lm = sh[j].N > 100000;
        char lab[64];
        snprintf(lab, sizeof lab, "skinny w%d nt%d u%d", tv[v].w, tv[v].nt, tv[v].u);
        dic_gemm_skinny_tune(tv[v].w, tv[v].nt, tv[v].u);
        const int path = sh[j].G > 1 ? DIC_GEMMF_PATH_AUTO : DIC_GEMMF_PATH_INV;
        dec_row(lab, sh[j].fmt, tv[v].M, sh[j].N, sh[j].K, sh[j].G, path, 0, 0, 0, lm, 0, lm ? 5 : 30);
        dic_gemm_skinny_tune(0, 0, 0);
    }
    g_mode = 0;
    /* the fused lm_head argmax in mode 1: skinny vs k_mma_am */
    static dic_ctx ctx;
    ctx.stream = st, ctx.num_sms = 132, ctx.batch_invariant = 1;
    static const int ks[2] = {4096, 5120}, am[2] = {1, 8};
    for (int ki = 0; ki < 2; ki++) {
        const int N = 129280, K = ks[ki];
        void *W;
        CK(cudaMalloc(&W, (size_t)N * K * 2));
        fill_w(W, (size_t)N * K, 0, 5);
        for (int i = 0; i < 2; i++) {
            amcase a = {am[i], N, K, 2, {0, N, K, 0, W, NULL}, NULL, NULL, NULL, &ctx};
            CK(cudaMalloc(&a.A, (size_t)a.M * K * 2));
            fill_w(a.A, (size_t)a.M * K, 0, 77);
            CK(cudaMalloc((void **)&a.C, (size_t)a.M * N * 4));
            CK(cudaMalloc((void **)&a.ids, 2 * DIC_AM_MAXM * 4));
            double us[2];
            for (int sk = 0; sk < 2; sk++) {
                dic_gemm_skinny_enable(!sk);
                for (int r = 0; r < 2; r++) am_body(&a, r);
                us[sk] = graph_ms(am_body, &a, 12) * 1e3;
            }
            dic_gemm_skinny_enable(1);
            printf("mode 1 lm_head+argmax K=%d M=%d | skinny %8.2f us | k_mma_am %8.2f us | hbm floor %7.2f us\n", K,
                   a.M, us[0], us[1], (double)N * K * 2 / (HBM_GBS * 1e9) * 1e6);
            fflush(stdout);
            cudaFree(a.A), cudaFree(a.C), cudaFree(a.ids);
        }
        cudaFree(W);
    }
}

/* woa8: the mode-1 FP8B wo_a (G = 8 x R = 1024 x K = 4096, e4m3 with e8m0 scales per wblock x wblock:
 * V4 128, V4.1 32) at M = 1, 2, 4, 8: the product (dic_gemm_blockdiag in mode 1: the skinny kernel,
 * dic_gemm_float_skinny.cu), each lab variant (skinny_f8_variants.cu) checked bitwise against it (fp32 and
 * bf16 outputs, weight set 0: random e4m3 bytes without NaN, random scales with some of the slow path),
 * and the fast mode's kernel (dic_gemm_fp8w_gemv.cu at M <= 4, dic_gemm_fp8w_mma.cu above: other bits).
 * Probe variants (lab_skinny_f8_probe) stream the weights with no arithmetic: the memory cost alone.
 * Graph us per call (bf16 out, 28 calls over 7 weight sets, 235 MB), GB/s of weights + scales, floor / time
 * at the HBM floor (HBM_GBS). */
#define W8_G 8
#define W8_R 1024
#define W8_K 4096
#define W8_SETS 7
typedef struct w8case {
    int M, v, f32out; /* v: -1 the product in mode 1, -2 the fast mode, >= 0 a lab variant */
    dic_wmat *w;      /* W8_SETS x W8_G */
    void *A, *C;
    dic_ctx *ctx;
} w8case;

static void w8_body(void *p, int i) {
    w8case *c = p;
    const dic_wmat *w = &c->w[(size_t)(i % W8_SETS) * W8_G];
    const size_t lda = (size_t)W8_G * W8_K, ldc = (size_t)W8_G * W8_R;
    float *c32 = c->f32out ? c->C : NULL;
    uint16_t *c16 = c->f32out ? NULL : c->C;
    if (c->v >= 0) {
        CK(lab_skinny_f8_launch(c->v, st, c->M, c->A, lda, w, W8_G, W8_K, c32, c16, ldc));
        return;
    }
    c->ctx->batch_invariant = c->v == -1;
    CK(dic_gemm_blockdiag(c->ctx, c->M, c->A, lda, W8_G, w, W8_K, 0, c32, c16, ldc));
}

/* one call on weight set 0 into host memory (ob bytes) */
static void w8_once(w8case *c, void *h, size_t ob) {
    CK(cudaMemset(c->C, 0xFF, ob));
    w8_body(c, 0);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(h, c->C, ob, cudaMemcpyDeviceToHost));
}

static void woa8_rows(void) {
    static dic_ctx ctx;
    ctx.stream = st, ctx.num_sms = 132;
    const size_t wbytes = (size_t)W8_G * W8_R * W8_K;
    printf("-- woa8: mode-1 FP8B wo_a G=%d x %d x %d, product (skinny) vs lab variants (bitwise) vs fast mode;"
           " graph us per call (bf16 out), GB/s, floor/time at %.0f GB/s\n", W8_G, W8_R, W8_K, HBM_GBS);
    uint8_t *w;
    CK(cudaMalloc((void **)&w, wbytes * W8_SETS));
    { /* set 0: random e4m3 bytes without the NaN codes; the other sets copies of it */
        uint8_t *h = malloc(wbytes);
        unsigned long long s = 0x243F6A8885A308D3ull;
        for (size_t i = 0; i < wbytes; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            uint8_t b = (uint8_t)(s >> 24);
            if ((b & 0x7F) == 0x7F) b ^= 0x01;
            h[i] = b;
        }
        CK(cudaMemcpy(w, h, wbytes, cudaMemcpyHostToDevice));
        for (int k = 1; k < W8_SETS; k++) CK(cudaMemcpy(w + wbytes * k, w, wbytes, cudaMemcpyDeviceToDevice));
        free(h);
    }
    static const int wbs[2] = {128, 32}, ms[4] = {1, 2, 4, 8};
    const int nv = lab_skinny_f8_variants();
    for (int bi = 0; bi < 2; bi++) {
        const int wb = wbs[bi];
        const size_t sb = (size_t)(W8_R / wb) * (W8_K / wb); /* scale bytes per group */
        uint8_t *sc, *hs = malloc(sb * W8_G * W8_SETS);
        CK(cudaMalloc((void **)&sc, sb * W8_G * W8_SETS));
        unsigned long long s = 0x9E3779B97F4A7C15ull + (unsigned long long)wb;
        for (size_t i = 0; i < sb * W8_G * W8_SETS; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            uint8_t v = (uint8_t)(116 + (s >> 40) % 9); /* 2^-11 .. 2^-3: the fast path */
            if (i < sb * W8_G && i % 53 == 7) v = 5;    /* set 0: some of the slow path (bf16 subnormals) */
            if (i < sb * W8_G && i % 89 == 11) v = 140;
            hs[i] = v;
        }
        CK(cudaMemcpy(sc, hs, sb * W8_G * W8_SETS, cudaMemcpyHostToDevice));
        free(hs);
        dic_wmat *wm = malloc(sizeof(dic_wmat) * W8_SETS * W8_G);
        for (int k = 0; k < W8_SETS; k++)
            for (int g = 0; g < W8_G; g++)
                wm[k * W8_G + g] = (dic_wmat){DIC_WFMT_FP8B, W8_R, W8_K, wb,
                                              w + wbytes * k + (size_t)g * W8_R * W8_K,
                                              sc + sb * ((size_t)k * W8_G + g)};
        const double bytes = (double)wbytes + (double)sb * W8_G;
        const double hbm_us = bytes / (HBM_GBS * 1e9) * 1e6;
        for (int mi = 0; mi < 4; mi++) {
            const int M = ms[mi];
            w8case c = {M, -1, 1, wm, NULL, NULL, &ctx};
            CK(cudaMalloc(&c.A, (size_t)M * W8_G * W8_K * 2));
            fill_w(c.A, (size_t)M * W8_G * W8_K, 0, 31 + M);
            const size_t on = (size_t)M * W8_G * W8_R;
            CK(cudaMalloc(&c.C, on * 4));
            float *r32 = malloc(on * 4), *h32 = malloc(on * 4);
            uint16_t *r16 = malloc(on * 2), *h16 = malloc(on * 2);
            const unsigned long long l0 = dic_gemm_skinny_launches();
            c.f32out = 1, w8_once(&c, r32, on * 4);
            c.f32out = 0, w8_once(&c, r16, on * 2);
            const int sk = dic_gemm_skinny_launches() > l0;
            for (int v = -1; v < nv + 1; v++) {
                const int vv = v == nv ? -2 : v;
                c.v = vv;
                char same[64] = "";
                if (vv >= 0 && lab_skinny_f8_probe(vv)) snprintf(same, sizeof same, " probe: zeros, no bits");
                else if (vv >= 0) {
                    c.f32out = 1, w8_once(&c, h32, on * 4);
                    c.f32out = 0, w8_once(&c, h16, on * 2);
                    size_t d32 = 0, d16 = 0;
                    for (size_t i = 0; i < on; i++) {
                        d32 += memcmp(&r32[i], &h32[i], 4) != 0;
                        d16 += r16[i] != h16[i];
                    }
                    snprintf(same, sizeof same, " %s f32 %zu bf16 %zu", d32 || d16 ? "DIFF" : "same", d32, d16);
                }
                c.f32out = 0;
                for (int r = 0; r < 2; r++) w8_body(&c, r);
                const double us = graph_ms(w8_body, &c, 4 * W8_SETS) * 1e3;
                printf("wo_a fp8b B%-3d M=%d | %-22s | graph %7.2f us %6.0f GB/s %4.2f of floor %5.2f us%s%s\n", wb, M,
                       vv == -1 ? (sk ? "product mode 1 skinny" : "product mode 1 (k_mma)")
                       : vv == -2 ? (M <= 4 ? "fast fp8w gemv" : "fast fp8w mma") : lab_skinny_f8_name(vv),
                       us, bytes / (us * 1e-6) / 1e9, hbm_us / us, hbm_us, same[0] ? " |" : "", same);
                fflush(stdout);
            }
            free(r32), free(h32), free(r16), free(h16);
            cudaFree(c.A), cudaFree(c.C);
        }
        free(wm);
        cudaFree(sc);
    }
    cudaFree(w);
}

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "quick");
    CK(cudaStreamCreate(&st));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    copy_gbs = copy_ceiling_gbs(st, e0, e1);
    CK(cudaMalloc(&pool, POOL_B));
    CK(cudaMemset(pool, 0x3C, POOL_B));
    const int A_ = DIC_GEMMF_PATH_AUTO, F = DIC_GV_FORCE, LATE = F | DIC_GV_LATE, NOPRE = F | DIC_GV_NOPRE,
              PIPE = F | DIC_GV_PIPE, NPP = F | DIC_GV_NOPRE | DIC_GV_PIPE;
    if (argc > 1 && !strcmp(argv[1], "chain")) { /* mode-1 F32 weights: chain kernel vs k_gemm_float */
        printf("-- mode 1 F32 GEMM (bitwise di_gemm): graph us per call, weights rotating over 256 MB\n");
        chain_row("mHC mix decode", 1, 24, 16384, 64, 16);
        chain_row("mHC head decode", 1, 4, 16384, 64, 16);
        chain_row("mHC mix b8", 8, 24, 16384, 64, 16);
        chain_row("mHC mix b64", 64, 24, 16384, 32, 8);
        chain_row("mHC mix prefill", 1024, 24, 16384, 16, 4);
        chain_row("mHC head prefill", 1024, 4, 16384, 16, 4);
        chain_row("N=64 prefill", 1024, 64, 16384, 16, 2);
        chain_row("K=4096", 1, 24, 4096, 64, 16);
        cudaFree(pool);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "lmarg")) { /* lm_head + argmax: unfused vs fused */
        lmarg_rows();
        cudaFree(pool);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "woa8")) { /* the mode-1 FP8B wo_a: product vs lab variants vs fast */
        woa8_rows();
        cudaFree(pool);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "skinny")) { /* the skinny section of inv alone */
        skinny_rows();
        cudaFree(pool);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "inv")) { /* the mode-1 BF16 GEMMs (k_mma, M-free split) vs fast AUTO */
        skinny_rows();
        printf("-- mode 1 (inv: k_mma with the split from N and K) vs fast auto at the V4 / V4.1 BF16 shapes: graph us"
               " per call; wo_a G=8 both modes; then prefill TFLOP/s\n");
        static const int sn[] = {512, 1024, 64, 128, 129280, 512, 1024, 32}, sk[] = {4096, 4096, 4096, 512, 4096,
                                                                                     5120, 5120, 5120};
        static const int dm[] = {1, 2, 4, 8, 16, 64};
        for (int j = 0; j < 8; j++)
            for (int i = 0; i < 6; i++)
                for (int p = 0; p < 2; p++)
                    dec_row(p ? "inv" : "fast", 0, dm[i], sn[j], sk[j], 1, p ? DIC_GEMMF_PATH_INV : A_, 0, 0, 0,
                            sn[j] > 100000, 0, sn[j] > 100000 ? 5 : 30);
        static const int wm[] = {1, 2, 4, 8, 64, 256, 1024};
        for (int i = 0; i < 7; i++)
            for (g_mode = 0; g_mode < 2; g_mode++)
                dec_row(g_mode ? "wo_a inv" : "wo_a fast", DIC_WFMT_FP8B, wm[i], 1024, 4096, 8, A_, 0, 0, 0, 0, 0,
                        wm[i] >= 1024 ? 5 : 30);
        g_mode = 0;
        static const int pm[] = {1024, 8192};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 8; j++) {
                if (sn[j] > 100000 && pm[i] > 1024) continue;
                run_case(0, pm[i], sn[j], sk[j], A_, 5, 0);
                run_case(0, pm[i], sn[j], sk[j], DIC_GEMMF_PATH_INV, 5, 0);
            }
        cudaFree(pool);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "woa")) { /* the grouped wo_a: BF16 storage vs FP8 storage */
        printf("-- wo_a G=8 x N=1024 x K=4096: graph us per call (weights rotating over 256 MB), floor = weight bytes"
               " (+ scales) / copy ceiling %.0f GB/s; last column floor / graph. bf16 = BF16 storage (67.1 MB),"
               " fp8b = FP8 storage (33.6 MB); mode 1: same bits; fast fp8 gemv / fp8 mma: the GEMM tolerance\n", copy_gbs);
        /* fast fp8b: M <= 4 the FP8 GEMV (dic_gemm_fp8w_gemv.cu), M > 4 the FP8 tensor-core kernel
         * (dic_gemm_fp8w_mma.cu; up to DIC_W8M_MAXM, above: k_mma F8). Extra rows: "k_gemv F8"
         * (the bitwise FP8B GEMV, dic_gemm_fp8w_gemv_enable(0)), "k_mma F8" (the bitwise tiles,
         * dic_gemm_fp8w_mma_maxm(4)). */
        static const int wm[] = {1, 2, 3, 4, 5, 8, 16, 32, 64, 128, 256, 1024, 4096}, wm1[] = {1, 2, 8, 16, 64};
        const int nwm = (int)(sizeof wm / sizeof *wm), nwm1 = (int)(sizeof wm1 / sizeof *wm1);
        for (g_mode = 0; g_mode < 2; g_mode++)
            for (int i = 0; i < (g_mode ? nwm1 : nwm); i++) {
                const int M = g_mode ? wm1[i] : wm[i], mx = dic_gemm_fp8w_mma_maxm_get();
                for (int f = 0; f < 2; f++)
                    dec_row(g_mode ? "wo_a mode 1" : !f ? "wo_a fast" : M <= 4 ? "wo_a fast fp8 gemv"
                                                     : M <= mx ? "wo_a fast fp8 mma"
                                                     : M >= DIC_W8_VIA_BF16_MINM ? "wo_a fast fp8 via bf16"
                                                                                 : "wo_a fast k_mma F8",
                            f ? DIC_WFMT_FP8B : 0, M, 1024, 4096, 8, A_, 0, 0, 0, 0, 0, M >= 1024 ? 5 : 30);
                if (g_mode) continue;
                if (M == 1 || M == 2 || M == 4) {
                    dic_gemm_fp8w_gemv_enable(0);
                    dec_row("wo_a fast k_gemv F8", DIC_WFMT_FP8B, M, 1024, 4096, 8, A_, 0, 0, 0, 0, 0, 30);
                    dic_gemm_fp8w_gemv_enable(1);
                }
                if (M == 8 || M == 64 || M == 256 || M == 1024) { /* the FP8B tiles it replaces */
                    dic_gemm_fp8w_mma_maxm(4);
                    dic_gemm_fp8w_via_bf16_enable(0);
                    dec_row("wo_a fast k_mma F8", DIC_WFMT_FP8B, M, 1024, 4096, 8, A_, 0, 0, 0, 0, 0,
                            M >= 1024 ? 5 : 30);
                    dic_gemm_fp8w_via_bf16_enable(1);
                    dic_gemm_fp8w_mma_maxm(0);
                }
            }
        cudaFree(pool);
        return 0;
    }
    printf("-- decode: graph us per call (each call new weights, rotating over 256 MB); floor = weight bytes / copy;"
           " last column floor / graph. w/c = GEMV K split (warps per CTA / CTAs per cluster, 0 = auto), f = flags"
           " (1 late weights, 2 no-pre act, 4 pipe)\n");
    dec_row("fixed cost (tiny)", 0, 1, 4, 64, 1, A_, 0, 0, 0, 0, 0, 50);
    dec_row("fixed cost (tiny) late", 0, 1, 4, 64, 1, A_, 0, 0, LATE, 0, 0, 50);
    static const int bn[] = {64, 256, 512, 1024};
    for (int i = 0; i < 4; i++) {
        int N = bn[i];
        dec_row("small auto", 0, 1, N, 4096, 1, A_, 0, 0, 0, 0, 0, 50);
        dec_row("small auto late", 0, 1, N, 4096, 1, A_, 0, 0, LATE, 0, 0, 50);
        dec_row("small split", 0, 1, N, 4096, 1, A_, 8, 1, 0, 0, 0, 50);
        dec_row("small split", 0, 1, N, 4096, 1, A_, 8, 2, 0, 0, 0, 50);
        dec_row("small split", 0, 1, N, 4096, 1, A_, 8, 4, 0, 0, 0, 50);
        dec_row("small split", 0, 1, N, 4096, 1, A_, 4, 1, 0, 0, 0, 50);
        dec_row("small split", 0, 1, N, 4096, 1, A_, 4, 2, 0, 0, 0, 50);
        dec_row("small split nopre", 0, 1, N, 4096, 1, A_, 8, 1, NOPRE, 0, 0, 50);
    }
    dec_row("router f32 out auto", 0, 1, 256, 4096, 1, A_, 0, 0, 0, 1, 0, 50);
    dec_row("router f32 out", 0, 1, 256, 4096, 1, A_, 8, 1, 0, 1, 0, 50);
    dec_row("router f32 out", 0, 1, 256, 4096, 1, A_, 8, 2, 0, 1, 0, 50);
    static const int bm[] = {2, 8, 64};
    for (int i = 0; i < 3; i++) {
        dec_row("small M>1 auto", 0, bm[i], 256, 4096, 1, A_, 0, 0, 0, 1, 0, 50);
        dec_row("small M>1 auto", 0, bm[i], 1024, 4096, 1, A_, 0, 0, 0, 0, 0, 50);
    }
    dec_row("wo_a blockdiag auto", 0, 1, 1024, 4096, 8, A_, 0, 0, 0, 0, 0, 30);
    dec_row("wo_a blockdiag late", 0, 1, 1024, 4096, 8, A_, 0, 0, LATE, 0, 0, 30);
    dec_row("wo_a blockdiag pipe", 0, 1, 1024, 4096, 8, A_, 0, 0, PIPE, 0, 0, 30);
    dec_row("wo_a blockdiag nopre", 0, 1, 1024, 4096, 8, A_, 0, 0, NOPRE, 0, 0, 30);
    dec_row("wo_a blockdiag nopre+pipe", 0, 1, 1024, 4096, 8, A_, 0, 0, NPP, 0, 0, 30);
    dec_row("wo_a blockdiag", 0, 1, 1024, 4096, 8, A_, 2, 1, 0, 0, 0, 30);
    dec_row("wo_a blockdiag nopre", 0, 1, 1024, 4096, 8, A_, 2, 1, NOPRE, 0, 0, 30);
    dec_row("wo_a blockdiag nopre", 0, 1, 1024, 4096, 8, A_, 1, 2, NOPRE, 0, 0, 30);
    dec_row("wo_a blockdiag auto", 0, 2, 1024, 4096, 8, A_, 0, 0, 0, 0, 0, 30);
    for (int i = 1; i < 3; i++) {
        dec_row("wo_a blockdiag auto", 0, bm[i], 1024, 4096, 8, A_, 0, 0, 0, 0, 0, 30);
        dec_row("wo_a blockdiag per-group", 0, bm[i], 1024, 4096, 8, A_, 0, 0, 0, 0, 1, 30);
    }
    dec_row("lm_head auto", 0, 1, 129280, 4096, 1, A_, 0, 0, 0, 0, 0, 10);
    dec_row("lm_head late", 0, 1, 129280, 4096, 1, A_, 0, 0, LATE, 0, 0, 10);
    dec_row("lm_head pipe", 0, 1, 129280, 4096, 1, A_, 0, 0, PIPE, 0, 0, 10);
    dec_row("lm_head nopre", 0, 1, 129280, 4096, 1, A_, 0, 0, NOPRE, 0, 0, 10);
    dec_row("lm_head nopre+pipe", 0, 1, 129280, 4096, 1, A_, 0, 0, NPP, 0, 0, 10);
    dec_row("lm_head nopre", 0, 1, 129280, 4096, 1, A_, 2, 1, NOPRE, 0, 0, 10);
    dec_row("lm_head auto", 0, 2, 129280, 4096, 1, A_, 0, 0, 0, 0, 0, 10);
    dec_row("lm_head auto", 0, 8, 129280, 4096, 1, A_, 0, 0, 0, 0, 0, 10);
    dec_row("lm_head mma128", 0, 8, 129280, 4096, 1, DIC_GEMMF_PATH_MMA128, 0, 0, 0, 0, 0, 10);
    dec_row("lm_head auto", 0, 64, 129280, 4096, 1, A_, 0, 0, 0, 0, 0, 10);
    dec_row("lm_head mma128", 0, 64, 129280, 4096, 1, DIC_GEMMF_PATH_MMA128, 0, 0, 0, 0, 0, 10);
    dec_row("mHC f32 auto", 1, 1, 24, 16384, 1, A_, 0, 0, 0, 1, 0, 50);
    dec_row("mHC f32 late", 1, 1, 24, 16384, 1, A_, 0, 0, LATE, 1, 0, 50);
    dec_row("mHC f32 auto", 1, 8, 24, 16384, 1, A_, 0, 0, 0, 1, 0, 50);
    cudaFree(pool);
    if (quick) return 0;

    printf("-- prefill (TFLOP/s), ours vs cuBLASLt BF16 (bf16 out)\n");
    cublasLtHandle_t lt;
    LTCK(cublasLtCreate(&lt));
    size_t wsz = 64u << 20;
    void *wsp;
    CK(cudaMalloc(&wsp, wsz));
    struct { int M, N, K; } pf[] = {{1024, 1024, 4096}, {1024, 512, 4096}, {1024, 256, 4096}, {1024, 64, 4096},
                                    {4096, 4096, 4096}, {8192, 8192, 4096}, {4096, 1024, 4096}, {64, 1024, 4096}};
    for (unsigned i = 0; i < sizeof pf / sizeof *pf; i++) {
        double ms = run_case(0, pf[i].M, pf[i].N, pf[i].K, DIC_GEMMF_PATH_AUTO, 20, 0);
        double lms = time_lt(lt, pf[i].M, pf[i].N, pf[i].K, wsp, wsz, 20);
        double fl = 2.0 * pf[i].M * pf[i].N * pf[i].K;
        printf("   cuBLASLt bf16 M=%d N=%d K=%d: %.4f ms %.1f TFLOP/s; ours/Lt speed %.2f\n", pf[i].M, pf[i].N,
               pf[i].K, lms, fl / (lms * 1e-3) / 1e12, lms / ms);
    }
    run_case(0, 4096, 4096, 4096, DIC_GEMMF_PATH_MMA64, 10, 0);
    run_case(1, 1024, 24, 16384, DIC_GEMMF_PATH_AUTO, 20, 0);
    run_case(1, 1024, 4, 16384, DIC_GEMMF_PATH_AUTO, 20, 0);
    run_case(1, 1024, 24, 16384, DIC_GEMMF_PATH_OLD, 5, 0);
    cudaFree(wsp);
    cublasLtDestroy(lt);
    return 0;
}
