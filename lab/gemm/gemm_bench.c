/* gemm_bench.c — GEMM timings on the GPU: device-to-device copy bandwidth (bytes read + written), then
 * dic_gemm at decode sizes (M = 1, 8) on V4-Flash weight shapes with the
 * achieved GB/s of weight bytes (weights rotated over > 60 MB so L2 does not
 * serve them), and at prefill sizes (TFLOP/s). CUDA events, warm-up,
 * median of the reps. Then the prefill peer table: our FP8 kernels (wgmma,
 * and the mma.sync tiles, on pre-quantised activations; and the whole
 * dic_gemm with the activation quantisation) against cuBLASLt FP8 e4m3
 * (per-tensor scales; and the 128x128 / 1x128 block-scaled mode where
 * cuBLASLt offers it) and BF16, bf16 output. A compact table comes last. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublasLt.h>
#include <string.h>

#include "bench_util.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_gemm_int.h"
#include "gemm_lab.h"


static void fill(void *d, size_t bytes, unsigned seed) {
    unsigned char *h = malloc(bytes);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < bytes; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        unsigned char b = (unsigned char)s;
        h[i] = (b & 0x7F) == 0x7F ? (unsigned char)(b ^ 1) : b; /* no e4m3 NaN */
    }
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    free(h);
}

typedef struct row { char name[64]; double ms, gbs, tflops, ratio, msg; } row;
static row tab[64];
static int ntab;

/* bf16 weights: finite, moderate values (random sign and mantissa, exponent 2^-7 .. 2^0) */
static void fill_bf16(void *d, size_t n, unsigned seed) {
    unsigned short *h = malloc(n * 2);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        h[i] = (unsigned short)((s & 0x807F) | ((0x78 + (s >> 8) % 8) << 7));
    }
    CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
}

static double g_graph_ms; /* per call, from a graph of GR calls (launch gaps amortised) */
#define GR 32

/* median ms of reps of dic_gemm over nw rotating weight copies */
static double time_gemm(dic_ctx *c, int M, int N, int K, int fmt, int B, int act, int reps, size_t *wbytes_out) {
    size_t wb = fmt == 2 ? (size_t)N * K : fmt == 3 ? (size_t)N * K / 2 : (size_t)N * K * 2;
    size_t sb = fmt == 2 ? (size_t)((N + B - 1) / B) * (K / B) : fmt == 3 ? (size_t)N * (K / 32) : 16;
    int nw = (int)((200u << 20) / wb) + 1;
    if (nw > 16) nw = 16;
    dic_wmat *w = malloc(sizeof *w * nw);
    for (int i = 0; i < nw; i++) {
        void *dw, *ds;
        CK(cudaMalloc(&dw, wb));
        CK(cudaMalloc(&ds, sb));
        if (fmt == 0) fill_bf16(dw, wb / 2, 1 + i);
        else fill(dw, wb, 1 + i);
        CK(cudaMemset(ds, 127, sb));
        w[i] = (dic_wmat){fmt, N, K, fmt == 2 ? B : 32, dw, fmt == 0 ? NULL : ds};
    }
    void *A, *C;
    CK(cudaMalloc(&A, (size_t)M * K * 2));
    CK(cudaMemset(A, 0x3F, (size_t)M * K * 2)); /* bf16 ~0.75: non-zero */
    CK(cudaMalloc(&C, (size_t)M * N * 2));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) CK(dic_gemm(c, M, A, K, &w[i % nw], act, NULL, C, N));
    float *t = malloc(sizeof(float) * reps);
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0, c->stream));
        CK(dic_gemm(c, M, A, K, &w[r % nw], act, NULL, C, N));
        CK(cudaEventRecord(e1, c->stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[r], e0, e1));
    }
    qsort(t, reps, sizeof *t, cmpf);
    double ms = t[reps / 2];
    /* graph of GR calls over the rotating copies, median of 10 replays */
    g_graph_ms = 0;
    if (M <= 64) {
        cudaGraph_t gr;
        CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < GR; i++) CK(dic_gemm(c, M, A, K, &w[i % nw], act, NULL, C, N));
        CK(cudaStreamEndCapture(c->stream, &gr));
        g_graph_ms = graph_median_ms(c->stream, gr, e0, e1) / GR;
    }
    for (int i = 0; i < nw; i++) cudaFree((void *)w[i].w), cudaFree((void *)w[i].scale);
    cudaFree(A), cudaFree(C), free(w), free(t);
    *wbytes_out = wb + (fmt == 0 ? 0 : sb);
    return ms;
}

/* Grouped decode: E = 256 FP4 experts (N x K), top-6 routing of T tokens,
 * 16 routings rotated (the 6 experts of one token are 25 MB: L2 would hold
 * them). Bytes: the distinct experts each routing touches, weights + scales. */
static double time_grouped(dic_ctx *c, int T, int N, int K, int reps, double *bytes_out) {
    enum { E = 256, KS = 6, NR = 16 };
    const int R = T * KS;
    size_t wb = (size_t)N * K / 2, sb = (size_t)N * (K / 32);
    dic_wmat *w = malloc(sizeof *w * E);
    for (int e = 0; e < E; e++) {
        void *dw, *ds;
        CK(cudaMalloc(&dw, wb));
        CK(cudaMalloc(&ds, sb));
        if (e < 8) fill(dw, wb, 100 + e);
        else CK(cudaMemcpy(dw, w[e % 8].w, wb, cudaMemcpyDeviceToDevice));
        CK(cudaMemset(ds, 127, sb));
        w[e] = (dic_wmat){3, N, K, 32, dw, ds};
    }
    int *doff[NR], *drows[NR];
    double bytes = 0;
    unsigned long long s = 12345;
    for (int q = 0; q < NR; q++) {
        int *sel = malloc(sizeof(int) * R), off[E + 1] = {0}, *rows = malloc(sizeof(int) * R), fillc[E] = {0};
        for (int t = 0; t < T; t++)
            for (int j = 0; j < KS; j++) {
                int e, dup;
                do {
                    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                    e = (int)(s % E);
                    dup = 0;
                    for (int j2 = 0; j2 < j; j2++) dup |= sel[t * KS + j2] == e;
                } while (dup);
                sel[t * KS + j] = e;
            }
        for (int i = 0; i < R; i++) off[sel[i] + 1]++;
        int active = 0;
        for (int e = 0; e < E; e++) active += off[e + 1] > 0, off[e + 1] += off[e];
        for (int i = 0; i < R; i++) rows[off[sel[i]] + fillc[sel[i]]++] = i;
        bytes += (double)active * (wb + sb) / NR;
        CK(cudaMalloc((void **)&doff[q], sizeof off));
        CK(cudaMalloc((void **)&drows[q], sizeof(int) * R));
        CK(cudaMemcpy(doff[q], off, sizeof off, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(drows[q], rows, sizeof(int) * R, cudaMemcpyHostToDevice));
        free(sel), free(rows);
    }
    void *A, *C;
    CK(cudaMalloc(&A, (size_t)R * K * 2));
    CK(cudaMemset(A, 0x3F, (size_t)R * K * 2));
    CK(cudaMalloc(&C, (size_t)R * N * 2));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) CK(dic_gemm_grouped(c, E, w, doff[i], drows[i], R, A, K, 128, C, N));
    float *t = malloc(sizeof(float) * reps);
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0, c->stream));
        CK(dic_gemm_grouped(c, E, w, doff[r % NR], drows[r % NR], R, A, K, 128, C, N));
        CK(cudaEventRecord(e1, c->stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[r], e0, e1));
    }
    qsort(t, reps, sizeof *t, cmpf);
    double ms = t[reps / 2];
    g_graph_ms = 0;
    if (T <= 64) {
        cudaGraph_t gr;
        CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < GR; i++) CK(dic_gemm_grouped(c, E, w, doff[i % NR], drows[i % NR], R, A, K, 128, C, N));
        CK(cudaStreamEndCapture(c->stream, &gr));
        g_graph_ms = graph_median_ms(c->stream, gr, e0, e1) / GR;
    }
    for (int e = 0; e < E; e++) cudaFree((void *)w[e].w), cudaFree((void *)w[e].scale);
    for (int q = 0; q < NR; q++) cudaFree(doff[q]), cudaFree(drows[q]);
    cudaFree(A), cudaFree(C), free(w), free(t);
    *bytes_out = bytes;
    return ms;
}


#define LTCK(x)                                                                                 \
    do {                                                                                        \
        cublasStatus_t s_ = (x);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                      \
            fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_);   \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static void fill_bf16_small(void *d, size_t n, unsigned seed) {
    unsigned short *h = malloc(n * 2);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        h[i] = (unsigned short)(0x3C00u | (s & 0x03FFu) | (s & 0x8000u)); /* |v| in [2^-7, 2^-5) */
    }
    CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
}

static double median_ms(float *t, int n) {
    qsort(t, n, sizeof *t, cmpf);
    return t[n / 2];
}

/* cuBLASLt D[M][N] (row-major, bf16) = act[M][K] * W[N][K]^T: column-major
 * D^T = op_T(W) * act^T. mode 0: BF16; 1: FP8 e4m3, per-tensor scales;
 * 2: FP8 with W 128x128 blocks and act 1x128 blocks (fp32 scales). Returns
 * the median ms, or -1 where cuBLASLt has no algorithm. */
static double time_lt(cublasLtHandle_t h, cudaStream_t st, int M, int N, int K, int mode, void *wsp, size_t wsz,
                      int reps) {
    int fp8 = mode >= 1;
    size_t eb = fp8 ? 1 : 2;
    void *W, *A, *D, *sW, *sA;
    CK(cudaMalloc(&W, (size_t)N * K * eb));
    CK(cudaMalloc(&A, (size_t)M * K * eb));
    CK(cudaMalloc(&D, (size_t)M * N * 2));
    size_t ns = (size_t)((M > N ? M : N) + 127) * ((K + 127) / 128) + 16;
    CK(cudaMalloc(&sW, ns * 4));
    CK(cudaMalloc(&sA, ns * 4));
    {
        float *one = malloc(ns * 4);
        for (size_t i = 0; i < ns; i++) one[i] = 1.0f;
        CK(cudaMemcpy(sW, one, ns * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(sA, one, ns * 4, cudaMemcpyHostToDevice));
        free(one);
    }
    if (fp8) fill(W, (size_t)N * K, 11), fill(A, (size_t)M * K, 12);
    else fill_bf16_small(W, (size_t)N * K, 11), fill_bf16_small(A, (size_t)M * K, 12);
    cudaDataType_t ty = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    cublasLtMatmulDesc_t op;
    LTCK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
    LTCK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA));
    LTCK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB));
    if (fp8) {
        LTCK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sW, sizeof sW));
        LTCK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sA, sizeof sA));
    }
    if (mode == 2) {
        cublasLtMatmulMatrixScale_t ma = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                                    mb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        if (cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma) !=
                CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb) !=
                CUBLAS_STATUS_SUCCESS) {
            cublasLtMatmulDescDestroy(op);
            cudaFree(W), cudaFree(A), cudaFree(D), cudaFree(sW), cudaFree(sA);
            return -1;
        }
    }
    cublasLtMatrixLayout_t la, lb, ld;
    LTCK(cublasLtMatrixLayoutCreate(&la, ty, K, N, K));
    LTCK(cublasLtMatrixLayoutCreate(&lb, ty, K, M, K));
    LTCK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    LTCK(cublasLtMatmulPreferenceCreate(&pref));
    LTCK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz));
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &nres);
    double ms = -1;
    if (hs == CUBLAS_STATUS_SUCCESS && nres > 0) {
        float alpha = 1.0f, beta = 0.0f;
        float *t = malloc(sizeof(float) * reps);
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        int ok = 1;
        for (int i = 0; i < 3 && ok; i++)
            ok = cublasLtMatmul(h, op, &alpha, W, la, A, lb, &beta, D, ld, D, ld, &res.algo, wsp, wsz, st) ==
                 CUBLAS_STATUS_SUCCESS;
        for (int r = 0; r < reps && ok; r++) {
            CK(cudaEventRecord(e0, st));
            LTCK(cublasLtMatmul(h, op, &alpha, W, la, A, lb, &beta, D, ld, D, ld, &res.algo, wsp, wsz, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&t[r], e0, e1));
        }
        CK(cudaStreamSynchronize(st));
        if (ok) ms = median_ms(t, reps);
        else fprintf(stderr, "cuBLASLt mode %d M=%d N=%d K=%d: matmul failed\n", mode, M, N, K);
        free(t);
        cudaEventDestroy(e0), cudaEventDestroy(e1);
    } else {
        fprintf(stderr, "cuBLASLt mode %d M=%d N=%d K=%d: no algorithm (status %d, %d results)\n", mode, M, N, K,
                (int)hs, nres);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    cudaFree(W), cudaFree(A), cudaFree(D), cudaFree(sW), cudaFree(sA);
    return ms;
}

/* Our FP8 kernel alone on pre-quantised activations (path: DIC_GEMM_PATH_*,
 * dic_gemm_int.h). bf16 out, W 128x128 blocks. */
/* path: a DIC_GEMM_PATH_* of the product's dic_gemm_q_launch, or LAB_WGMMA_V1: the lab's first wgmma schedule */
#define LAB_WGMMA_V1 (-1)
static cudaError_t ours_launch(dic_ctx *c, const dic_gemm_wtab *wt, int M, int N, int K, const uint8_t *q,
                               const float *sa, void *C, int path) {
    if (path == LAB_WGMMA_V1)
        return lab_gemm_q_wgmma_launch(c->stream, wt->w[0], wt->s[0], N, K, 128, 128, 128, M, q, dic_gemm_ldq(K), sa,
                                       NULL, C, N, 1);
    return dic_gemm_q_launch(c->stream, 1, wt, 2, N, K, 128, 128, M, NULL, NULL, q, sa, NULL, NULL, NULL, C, N, path);
}
static double time_ours_kernel(dic_ctx *c, int M, int N, int K, int path, int reps) {
    void *W, *S, *A, *C;
    size_t sb = (size_t)((N + 127) / 128) * (K / 128);
    CK(cudaMalloc(&W, (size_t)N * K));
    CK(cudaMalloc(&S, sb));
    CK(cudaMalloc(&A, (size_t)M * K * 2));
    CK(cudaMalloc(&C, (size_t)M * N * 2));
    fill(W, (size_t)N * K, 21);
    CK(cudaMemset(S, 127, sb));
    fill_bf16_small(A, (size_t)M * K, 22);
    uint8_t *q = (uint8_t *)c->scratch;
    float *sa = (float *)(q + dic_gemm_qbytes(M, K));
    CK(dic_gemm_quant(c->stream, M, A, K, K, 128, NULL, NULL, q, sa, NULL, 0));
    dic_gemm_wtab *wt = malloc(sizeof *wt);
    wt->w[0] = W, wt->s[0] = S;
    float *t = malloc(sizeof(float) * reps);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++)
        CK(ours_launch(c, wt, M, N, K, q, sa, C, path));
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0, c->stream));
        CK(ours_launch(c, wt, M, N, K, q, sa, C, path));
        CK(cudaEventRecord(e1, c->stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[r], e0, e1));
    }
    double ms = median_ms(t, reps);
    if (path == LAB_WGMMA_V1) { /* v1 claims the product's bits (docs/kernels/gemm-prefill.md) */
        void *C2;
        CK(cudaMalloc(&C2, (size_t)M * N * 2));
        CK(ours_launch(c, wt, M, N, K, q, sa, C2, DIC_GEMM_PATH_WGMMA));
        CK(cudaStreamSynchronize(c->stream));
        uint16_t *h1 = malloc((size_t)M * N * 2), *h2 = malloc((size_t)M * N * 2);
        CK(cudaMemcpy(h1, C, (size_t)M * N * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h2, C2, (size_t)M * N * 2, cudaMemcpyDeviceToHost));
        size_t nd = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) nd += h1[i] != h2[i];
        printf("  (lab wgmma v1 vs the product's wgmma, M=%d N=%d K=%d: %zu outputs differ)\n", M, N, K, nd);
        free(h1), free(h2), cudaFree(C2);
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    cudaFree(W), cudaFree(S), cudaFree(A), cudaFree(C), free(wt), free(t);
    return ms;
}

int main(int argc, char **argv) {
    const int decode_only = argc > 1 && !strcmp(argv[1], "decode"); /* skip the prefill / cuBLASLt table */
    int dev = 0;
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, dev));
    printf("device: %s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
    dic_ctx c = {0};
    CK(cudaStreamCreate(&c.stream));
    c.scratch_cap = (size_t)288 << 20; /* M = 16384, K = 8192: 128 MiB of e4m3 + scales; decode split partials */
    CK(cudaMalloc(&c.scratch, c.scratch_cap));
    c.num_sms = p.multiProcessorCount;

    /* copy ceiling */
    size_t cb = (size_t)2 << 30;
    void *s, *d;
    CK(cudaMalloc(&s, cb));
    CK(cudaMalloc(&d, cb));
    CK(cudaMemset(s, 1, cb));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float t[20];
    for (int i = 0; i < 22; i++) {
        CK(cudaEventRecord(e0, c.stream));
        CK(cudaMemcpyAsync(d, s, cb, cudaMemcpyDeviceToDevice, c.stream));
        CK(cudaEventRecord(e1, c.stream));
        CK(cudaEventSynchronize(e1));
        if (i >= 2) CK(cudaEventElapsedTime(&t[i - 2], e0, e1));
    }
    qsort(t, 20, sizeof *t, cmpf);
    double copy_gbs = 2.0 * cb / (t[10] * 1e-3) / 1e9;
    cudaFree(s), cudaFree(d);
    snprintf(tab[ntab].name, 64, "d2d copy 2 GiB");
    tab[ntab].ms = t[10], tab[ntab].gbs = copy_gbs, tab[ntab].ratio = 1.0, ntab++;

    struct { const char *name; int fmt, N, K, B, act; } shp[] = {
        {"fp8 wq_a 1024x4096", 2, 1024, 4096, 128, 128}, {"fp8 wq_b 32768x1024", 2, 32768, 1024, 128, 128},
        {"fp8 wo_a 8192x4096", 2, 8192, 4096, 128, 128}, {"fp8 wo_b 4096x8192", 2, 4096, 8192, 128, 128},
        {"fp8 shexp w1 2048x4096", 2, 2048, 4096, 128, 128}, {"fp4 expert w1 2048x4096", 3, 2048, 4096, 32, 128},
        {"fp4 expert w2 4096x2048", 3, 4096, 2048, 32, 128},
    };
    int ms_dec[] = {1, 8};
    for (unsigned i = 0; i < sizeof shp / sizeof *shp; i++)
        for (int j = 0; j < 2; j++) {
            size_t wb;
            double ms = time_gemm(&c, ms_dec[j], shp[i].N, shp[i].K, shp[i].fmt, shp[i].B, shp[i].act, 200, &wb);
            row *r = &tab[ntab++];
            snprintf(r->name, 64, "M=%d %s", ms_dec[j], shp[i].name);
            r->ms = ms, r->gbs = wb / (ms * 1e-3) / 1e9, r->ratio = r->gbs / copy_gbs;
            r->tflops = 2.0 * ms_dec[j] * shp[i].N * shp[i].K / (ms * 1e-3) / 1e12;
            r->msg = g_graph_ms;
        }
    for (int j = 0; j < 2 && !decode_only; j++) { /* lm_head bf16: the largest single decode read */
        size_t wb;
        double ms = time_gemm(&c, ms_dec[j], 129280, 4096, 0, 0, 0, 50, &wb);
        row *r = &tab[ntab++];
        snprintf(r->name, 64, "M=%d bf16 lm_head 129280x4096", ms_dec[j]);
        r->ms = ms, r->gbs = wb / (ms * 1e-3) / 1e9, r->ratio = r->gbs / copy_gbs, r->msg = g_graph_ms;
        r->tflops = 2.0 * ms_dec[j] * 129280.0 * 4096 / (ms * 1e-3) / 1e12;
    }
    { /* diagnostics: the quantisation launch alone, and the GEMM launch alone (wo_b shape), graph of GR */
        void *A;
        CK(cudaMalloc(&A, 8192 * 2));
        CK(cudaMemset(A, 0x3F, 8192 * 2));
        uint8_t *q = (uint8_t *)c.scratch;
        float *sa = (float *)(q + dic_gemm_qbytes(1, 8192));
        float *part = (float *)(q + dic_gemm_qbytes(1, 8192) + dic_gemm_sbytes(1, 8192));
        int *cnt = (int *)((uint8_t *)part + (((size_t)16 * 4096 * 4 + 255) & ~(size_t)255));
        void *dw, *ds, *C;
        CK(cudaMalloc(&dw, (size_t)4096 * 8192 * GR));
        CK(cudaMalloc(&ds, 4096));
        CK(cudaMalloc(&C, 4096 * 2));
        fill(dw, (size_t)4096 * 8192, 7);
        CK(cudaMemset(ds, 127, 4096));
        CK(dic_gemm_quant(c.stream, 1, A, 8192, 8192, 128, NULL, NULL, q, sa, cnt, (int)dic_gemm_ncnt(1, 4096)));
        for (int v = 0; v < 2; v++) {
            cudaGraph_t gr;
            CK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
            for (int i = 0; i < GR; i++) {
                if (v == 0) CK(dic_gemm_quant(c.stream, 1, A, 8192, 8192, 128, NULL, NULL, q, sa, cnt, 256));
                else {
                    dic_gemm_wtab wt;
                    wt.w[0] = (uint8_t *)dw + (size_t)(i % 8) * 4096 * 8192, wt.s[0] = ds;
                    CK(dic_gemm_q_launch(c.stream, 1, &wt, 2, 4096, 8192, 128, 128, 1, NULL, NULL, q, sa, part, cnt,
                                         NULL, C, 4096, DIC_GEMM_PATH_INVARIANT));
                }
            }
            CK(cudaStreamEndCapture(c.stream, &gr));
            double med = graph_median_ms(c.stream, gr, e0, e1);
            row *r = &tab[ntab++];
            snprintf(r->name, 64, v == 0 ? "diag: quant only M=1 K=8192" : "diag: q_launch only M=1 wo_b (8 rot)");
            r->ms = med / GR, r->msg = med / GR;
            r->gbs = v ? 4096.0 * 8192 / (r->ms * 1e-3) / 1e9 : 0, r->ratio = r->gbs / copy_gbs;
        }
        cudaFree(A), cudaFree(dw), cudaFree(ds), cudaFree(C);
    }
    /* the fast f16 kernels (dic_gemm_f16.cu) at M = 64, and the invariant kernels (batch_invariant = 1)
     * on the same shapes for comparison in this run */
    struct { const char *name; int fmt, N, K, B, act, M, inv; } f16r[] = {
        {"fp8 wo_b 4096x8192", 2, 4096, 8192, 128, 128, 64, 0},  {"fp4 expert w1 2048x4096", 3, 2048, 4096, 32, 128, 64, 0},
        {"fp8 wq_b 32768x1024", 2, 32768, 1024, 128, 128, 64, 0}, {"fp8 wo_b 4096x8192", 2, 4096, 8192, 128, 128, 1, 1},
        {"fp8 wq_b 32768x1024", 2, 32768, 1024, 128, 128, 1, 1},  {"fp8 wq_a 1024x4096", 2, 1024, 4096, 128, 128, 1, 1},
        {"fp4 expert w1 2048x4096", 3, 2048, 4096, 32, 128, 1, 1}, {"fp8 wo_b 4096x8192", 2, 4096, 8192, 128, 128, 64, 1},
    };
    for (unsigned i = 0; i < sizeof f16r / sizeof *f16r; i++) {
        size_t wb;
        c.batch_invariant = f16r[i].inv;
        double ms = time_gemm(&c, f16r[i].M, f16r[i].N, f16r[i].K, f16r[i].fmt, f16r[i].B, f16r[i].act, 100, &wb);
        c.batch_invariant = 0;
        row *r = &tab[ntab++];
        snprintf(r->name, 64, "%sM=%d %s", f16r[i].inv ? "inv " : "", f16r[i].M, f16r[i].name);
        r->ms = ms, r->gbs = wb / (ms * 1e-3) / 1e9, r->ratio = r->gbs / copy_gbs, r->msg = g_graph_ms;
        r->tflops = 2.0 * f16r[i].M * f16r[i].N * f16r[i].K / (ms * 1e-3) / 1e12;
    }
    /* routed experts, V4-Flash: E = 256, top-6, FP4 w1 (one of w1 / w3); T = 1024: a prefill sub-batch.
     * inv: the invariant kernels (batch_invariant = 1) in the same run */
    struct { int T, inv, reps; } grp[] = {{1, 0, 200}, {64, 0, 100}, {1024, 0, 20}, {1, 1, 100}, {64, 1, 50}, {1024, 1, 3}};
    for (unsigned j = 0; j < sizeof grp / sizeof *grp; j++) {
        double bytes;
        c.batch_invariant = grp[j].inv;
        double ms = time_grouped(&c, grp[j].T, 2048, 4096, grp[j].reps, &bytes);
        c.batch_invariant = 0;
        row *r = &tab[ntab++];
        snprintf(r->name, 64, "%sgrp T=%d E=256 top6 fp4 2048x4096", grp[j].inv ? "inv " : "", grp[j].T);
        r->ms = ms, r->gbs = bytes / (ms * 1e-3) / 1e9, r->ratio = r->gbs / copy_gbs, r->msg = g_graph_ms;
        r->tflops = 2.0 * grp[j].T * 6 * 2048.0 * 4096 / (ms * 1e-3) / 1e12;
    }
    printf("\n%-36s %10s %10s %10s %8s %10s %8s\n", "case", "ms", "GB/s(w)", "TFLOP/s", "/copy", "graph ms",
           "g/copy");
    for (int i = 0; i < ntab; i++) {
        double gr = tab[i].msg > 0 && tab[i].gbs > 0 ? tab[i].gbs * tab[i].ms / tab[i].msg / copy_gbs : 0;
        printf("%-36s %10.4f %10.1f %10.2f %8.2f %10.4f %8.2f\n", tab[i].name, tab[i].ms, tab[i].gbs, tab[i].tflops,
               tab[i].ratio, tab[i].msg, gr);
    }

    if (decode_only) return 0;
    /* prefill: ours vs cuBLASLt (TFLOP/s; ratio = ours wgmma kernel / cuBLASLt FP8 per-tensor) */
    cublasLtHandle_t lt;
    LTCK(cublasLtCreate(&lt));
    size_t wsz = (size_t)64 << 20;
    void *wsp;
    CK(cudaMalloc(&wsp, wsz));
    struct { const char *name; int M, N, K; } big[] = {
        {"4096^3", 4096, 4096, 4096},          {"8192^3", 8192, 8192, 8192},
        {"wq_a  M4096 1024x4096", 4096, 1024, 4096}, {"wq_b  M4096 32768x1024", 4096, 32768, 1024},
        {"wo_a  M4096 8192x4096", 4096, 8192, 4096}, {"wo_b  M4096 4096x8192", 4096, 4096, 8192},
        {"shexp M4096 2048x4096", 4096, 2048, 4096}, {"wo_b  M16384 4096x8192", 16384, 4096, 8192},
    };
    const int nb = (int)(sizeof big / sizeof *big);
    printf("\n%-26s %8s %8s %8s %8s | %8s %8s %8s | %6s %6s\n", "prefill TFLOP/s", "wgmma2", "wgmma1", "mma.sync", "dic_gemm",
           "Lt fp8", "Lt fp8bk", "Lt bf16", "ours/Lt", "/Ltbk");
    for (int i = 0; i < nb; i++) {
        int M = big[i].M, N = big[i].N, K = big[i].K;
        double fl = 2.0 * M * N * K / 1e9; /* GFLOP: / ms -> TFLOP/s */
        size_t wb;
        double t_wg = time_ours_kernel(&c, M, N, K, DIC_GEMM_PATH_WGMMA, 30);
        double t_wg1 = time_ours_kernel(&c, M, N, K, LAB_WGMMA_V1, 30);
        double t_mma = time_ours_kernel(&c, M, N, K, DIC_GEMM_PATH_TILES, 10);
        double t_full = time_gemm(&c, M, N, K, 2, 128, 128, 20, &wb);
        double t_l8 = time_lt(lt, c.stream, M, N, K, 1, wsp, wsz, 30), t_lb = time_lt(lt, c.stream, M, N, K, 2, wsp, wsz, 30);
        double t_l16 = time_lt(lt, c.stream, M, N, K, 0, wsp, wsz, 30);
#define TF(t) ((t) > 0 ? fl / (t) : 0.0)
        printf("%-26s %8.1f %8.1f %8.1f %8.1f | %8.1f %8.1f %8.1f | %6.2f %6.2f\n", big[i].name, TF(t_wg), TF(t_wg1), TF(t_mma),
               TF(t_full), TF(t_l8), TF(t_lb), TF(t_l16), t_l8 > 0 ? t_l8 / t_wg : 0.0, t_lb > 0 ? t_lb / t_wg : 0.0);
        fflush(stdout);
    }
    cudaFree(wsp);
    cublasLtDestroy(lt);
    return 0;
}
