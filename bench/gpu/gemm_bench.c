/* gemm_bench.c — GEMM timings on the GPU (first cut; cuBLASLt ceilings not
 * yet here): device-to-device copy bandwidth (bytes read + written), then
 * dic_gemm at decode sizes (M = 1, 8) on V4-Flash weight shapes with the
 * achieved GB/s of weight bytes (weights rotated over > 60 MB so L2 does not
 * serve them), and at prefill sizes (TFLOP/s). CUDA events, warm-up,
 * median of the reps. A compact table comes last. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/cuda/dic.h"
#include "ops/cuda/dic_gemm_int.h"

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));  \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static int cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

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
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < GR; i++) CK(dic_gemm(c, M, A, K, &w[i % nw], act, NULL, C, N));
        CK(cudaStreamEndCapture(c->stream, &gr));
        CK(cudaGraphInstantiate(&ge, gr, 0));
        CK(cudaGraphLaunch(ge, c->stream));
        float tg[10];
        for (int r = 0; r < 10; r++) {
            CK(cudaEventRecord(e0, c->stream));
            CK(cudaGraphLaunch(ge, c->stream));
            CK(cudaEventRecord(e1, c->stream));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&tg[r], e0, e1));
        }
        qsort(tg, 10, sizeof *tg, cmpf);
        g_graph_ms = tg[5] / GR;
        cudaGraphExecDestroy(ge), cudaGraphDestroy(gr);
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
    cudaGraph_t gr;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < GR; i++) CK(dic_gemm_grouped(c, E, w, doff[i % NR], drows[i % NR], R, A, K, 128, C, N));
    CK(cudaStreamEndCapture(c->stream, &gr));
    CK(cudaGraphInstantiate(&ge, gr, 0));
    CK(cudaGraphLaunch(ge, c->stream));
    float tg[10];
    for (int r = 0; r < 10; r++) {
        CK(cudaEventRecord(e0, c->stream));
        CK(cudaGraphLaunch(ge, c->stream));
        CK(cudaEventRecord(e1, c->stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&tg[r], e0, e1));
    }
    qsort(tg, 10, sizeof *tg, cmpf);
    g_graph_ms = tg[5] / GR;
    cudaGraphExecDestroy(ge), cudaGraphDestroy(gr);
    for (int e = 0; e < E; e++) cudaFree((void *)w[e].w), cudaFree((void *)w[e].scale);
    for (int q = 0; q < NR; q++) cudaFree(doff[q]), cudaFree(drows[q]);
    cudaFree(A), cudaFree(C), free(w), free(t);
    *bytes_out = bytes;
    return ms;
}

int main(void) {
    int dev = 0;
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, dev));
    printf("device: %s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
    dic_ctx c = {0};
    CK(cudaStreamCreate(&c.stream));
    c.scratch_cap = (size_t)160 << 20; /* M = K = 8192: 64 MiB of e4m3 + scales; decode split partials */
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
    for (int j = 0; j < 2; j++) { /* lm_head bf16: the largest single decode read */
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
            cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
            for (int i = 0; i < GR; i++) {
                if (v == 0) CK(dic_gemm_quant(c.stream, 1, A, 8192, 8192, 128, NULL, NULL, q, sa, cnt, 256));
                else {
                    dic_gemm_wtab wt;
                    wt.w[0] = (uint8_t *)dw + (size_t)(i % 8) * 4096 * 8192, wt.s[0] = ds;
                    CK(dic_gemm_q_launch(c.stream, 1, &wt, 2, 4096, 8192, 128, 128, 1, NULL, NULL, q, sa, part, cnt,
                                         NULL, C, 4096));
                }
            }
            CK(cudaStreamEndCapture(c.stream, &gr));
            CK(cudaGraphInstantiate(&ge, gr, 0));
            CK(cudaGraphLaunch(ge, c.stream));
            float tg[10];
            for (int r = 0; r < 10; r++) {
                CK(cudaEventRecord(e0, c.stream));
                CK(cudaGraphLaunch(ge, c.stream));
                CK(cudaEventRecord(e1, c.stream));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&tg[r], e0, e1));
            }
            qsort(tg, 10, sizeof *tg, cmpf);
            row *r = &tab[ntab++];
            snprintf(r->name, 64, v == 0 ? "diag: quant only M=1 K=8192" : "diag: q_launch only M=1 wo_b (8 rot)");
            r->ms = tg[5] / GR, r->msg = tg[5] / GR;
            r->gbs = v ? 4096.0 * 8192 / (r->ms * 1e-3) / 1e9 : 0, r->ratio = r->gbs / copy_gbs;
            cudaGraphExecDestroy(ge), cudaGraphDestroy(gr);
        }
        cudaFree(A), cudaFree(dw), cudaFree(ds), cudaFree(C);
    }
    int toks[] = {1, 64};
    for (int j = 0; j < 2; j++) { /* routed experts, V4-Flash decode: E = 256, top-6, FP4 w1 */
        double bytes;
        double ms = time_grouped(&c, toks[j], 2048, 4096, 200, &bytes);
        row *r = &tab[ntab++];
        snprintf(r->name, 64, "grp T=%d E=256 top6 fp4 2048x4096", toks[j]);
        r->ms = ms, r->gbs = bytes / (ms * 1e-3) / 1e9, r->ratio = r->gbs / copy_gbs, r->msg = g_graph_ms;
        r->tflops = 2.0 * toks[j] * 6 * 2048.0 * 4096 / (ms * 1e-3) / 1e12;
    }
    int big[][3] = {{4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 32768, 1024}, {4096, 4096, 8192}};
    for (unsigned i = 0; i < 4; i++) {
        size_t wb;
        int M = big[i][0], N = big[i][1], K = big[i][2];
        double ms = time_gemm(&c, M, N, K, 2, 128, 128, 20, &wb);
        row *r = &tab[ntab++];
        snprintf(r->name, 64, "fp8 M=%d N=%d K=%d", M, N, K);
        r->ms = ms, r->tflops = 2.0 * M * N * K / (ms * 1e-3) / 1e12, r->gbs = 0, r->ratio = 0;
    }
    printf("\n%-36s %10s %10s %10s %8s %10s %8s\n", "case", "ms", "GB/s(w)", "TFLOP/s", "/copy", "graph ms",
           "g/copy");
    for (int i = 0; i < ntab; i++) {
        double gr = tab[i].msg > 0 && tab[i].gbs > 0 ? tab[i].gbs * tab[i].ms / tab[i].msg / copy_gbs : 0;
        printf("%-36s %10.4f %10.1f %10.2f %8.2f %10.4f %8.2f\n", tab[i].name, tab[i].ms, tab[i].gbs, tab[i].tflops,
               tab[i].ratio, tab[i].msg, gr);
    }
    return 0;
}
