/* gemm_float_bench.c — BF16 / F32 weight GEMMs (dic_gemm_float_fast_launch, the
 * batch_invariant == 0 kernels; and the mode-1 kernels for comparison): d2d copy
 * ceiling first; decode shapes (GB/s of weight bytes, weights rotated over > 200 MB
 * so L2 does not serve them; event-timed median per call and a CUDA graph of 32
 * calls per call); prefill shapes (TFLOP/s) against cuBLASLt BF16 (bf16 out) in
 * the same run. Usage: gemm_float_bench [quick] */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "bench_util.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_gemm_int.h"

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
    int M, nw, path;
    dic_wmat *w;
    void *A, *C;
} gcase;

static void gemm_body(void *p, int i) {
    gcase *g = p;
    CK(dic_gemm_float_fast_launch(st, g->M, g->A, (size_t)g->w[0].k, &g->w[i % g->nw], NULL, g->C,
                                  (size_t)g->w[0].n, g->path));
}

static const char *pname(int p) {
    return p == DIC_GEMMF_PATH_AUTO ? "auto" : p == DIC_GEMMF_PATH_GEMV ? "gemv" : p == DIC_GEMMF_PATH_MMA ? "mma"
           : p == DIC_GEMMF_PATH_MMA64 ? "mma64" : p == DIC_GEMMF_PATH_MMA128 ? "mma128" : "old(mode1)";
}

/* One row: fmt 0 bf16 / 1 f32, M x N x K, a path; decode rows get GB/s, all get TFLOP/s. */
static double run_case(int fmt, int M, int N, int K, int path, int reps, int graph) {
    size_t wb = (size_t)N * K * (fmt ? 4 : 2);
    int nw = (int)((200u << 20) / wb) + 1;
    if (nw > 16) nw = 16;
    gcase g = {M, nw, path, malloc(sizeof(dic_wmat) * nw), NULL, NULL};
    for (int i = 0; i < nw; i++) {
        void *dw;
        CK(cudaMalloc(&dw, wb));
        fill_w(dw, (size_t)N * K, fmt, 1 + i);
        g.w[i] = (dic_wmat){fmt, N, K, 0, dw, NULL};
    }
    CK(cudaMalloc(&g.A, (size_t)M * K * 2));
    fill_w(g.A, (size_t)M * K, 0, 99);
    CK(cudaMalloc(&g.C, (size_t)M * N * 2));
    double ms = event_ms(gemm_body, &g, reps);
    double gms = graph ? graph_ms(gemm_body, &g, 32) : 0;
    double tf = 2.0 * M * N * K / (ms * 1e-3) / 1e12, gbs = wb / (ms * 1e-3) / 1e9;
    double gg = graph ? wb / (gms * 1e-3) / 1e9 : 0;
    printf("%-5s M=%-5d N=%-6d K=%-5d %-10s | %9.4f ms %7.0f GB/s %5.2f copy | graph %8.4f ms %5.2f copy | %7.2f TFLOP/s\n",
           fmt ? "f32" : "bf16", M, N, K, pname(path), ms, gbs, gbs / copy_gbs, gms, graph ? gg / copy_gbs : 0, tf);
    fflush(stdout);
    for (int i = 0; i < nw; i++) cudaFree((void *)g.w[i].w);
    cudaFree(g.A), cudaFree(g.C), free(g.w);
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

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "quick");
    CK(cudaStreamCreate(&st));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    { /* copy ceiling: 1 GiB d2d, bytes read + written */
        size_t cb = (size_t)1 << 30;
        void *s, *d;
        CK(cudaMalloc(&s, cb));
        CK(cudaMalloc(&d, cb));
        float t[12];
        for (int i = 0; i < 14; i++) {
            CK(cudaEventRecord(e0, st));
            CK(cudaMemcpyAsync(d, s, cb, cudaMemcpyDeviceToDevice, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            if (i >= 2) CK(cudaEventElapsedTime(&t[i - 2], e0, e1));
        }
        qsort(t, 12, sizeof *t, cmpf);
        copy_gbs = 2.0 * cb / (t[6] * 1e-3) / 1e9;
        printf("d2d copy 1 GiB: %.4f ms, %.0f GB/s (the ceiling below)\n", t[6], copy_gbs);
        cudaFree(s), cudaFree(d);
    }
    printf("-- decode (GB/s of weight bytes; graph = per call in a graph of 32)\n");
    static const int f32n[] = {24, 4};
    for (int i = 0; i < 2; i++) {
        run_case(1, 1, f32n[i], 16384, DIC_GEMMF_PATH_AUTO, 200, 1);
        run_case(1, 8, f32n[i], 16384, DIC_GEMMF_PATH_AUTO, 200, 1);
        run_case(1, 1, f32n[i], 16384, DIC_GEMMF_PATH_OLD, 20, 0);
    }
    static const int bn[] = {1024, 512, 256, 64};
    for (int i = 0; i < 4; i++) {
        run_case(0, 1, bn[i], 4096, DIC_GEMMF_PATH_AUTO, 200, 1);
        run_case(0, 8, bn[i], 4096, DIC_GEMMF_PATH_AUTO, 200, 1);
    }
    static const int sm[] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) { /* the GEMV / tensor-core crossover */
        run_case(0, sm[i], 1024, 4096, DIC_GEMMF_PATH_GEMV, 200, 1);
        run_case(0, sm[i], 1024, 4096, DIC_GEMMF_PATH_MMA, 200, 1);
        run_case(0, sm[i], 129280, 4096, DIC_GEMMF_PATH_GEMV, 20, 0);
        run_case(0, sm[i], 129280, 4096, DIC_GEMMF_PATH_MMA, 20, 0);
    }
    run_case(0, 1, 1024, 4096, DIC_GEMMF_PATH_OLD, 100, 1);
    run_case(0, 16, 1024, 4096, DIC_GEMMF_PATH_MMA, 200, 1);
    run_case(0, 1, 129280, 4096, DIC_GEMMF_PATH_OLD, 30, 0);
    run_case(0, 8, 129280, 4096, DIC_GEMMF_PATH_OLD, 10, 0);
    run_case(0, 16, 129280, 4096, DIC_GEMMF_PATH_MMA, 20, 0);
    run_case(0, 64, 129280, 4096, DIC_GEMMF_PATH_AUTO, 20, 0);
    run_case(0, 64, 129280, 4096, DIC_GEMMF_PATH_MMA128, 20, 0);
    run_case(0, 64, 1024, 4096, DIC_GEMMF_PATH_AUTO, 100, 1);
    run_case(1, 64, 24, 16384, DIC_GEMMF_PATH_AUTO, 100, 1);
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
