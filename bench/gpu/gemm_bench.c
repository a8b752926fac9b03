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

typedef struct row { char name[64]; double ms, gbs, tflops, ratio; } row;
static row tab[64];
static int ntab;

/* median ms of reps of dic_gemm over nw rotating weight copies */
static double time_gemm(dic_ctx *c, int M, int N, int K, int fmt, int B, int act, int reps, size_t *wbytes_out) {
    size_t wb = fmt == 2 ? (size_t)N * K : (size_t)N * K / 2;
    size_t sb = fmt == 2 ? (size_t)((N + B - 1) / B) * (K / B) : (size_t)N * (K / 32);
    int nw = (int)((200u << 20) / wb) + 1;
    if (nw > 16) nw = 16;
    dic_wmat *w = malloc(sizeof *w * nw);
    for (int i = 0; i < nw; i++) {
        void *dw, *ds;
        CK(cudaMalloc(&dw, wb));
        CK(cudaMalloc(&ds, sb));
        fill(dw, wb, 1 + i);
        CK(cudaMemset(ds, 127, sb));
        w[i] = (dic_wmat){fmt, N, K, fmt == 2 ? B : 32, dw, ds};
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
    for (int i = 0; i < nw; i++) cudaFree((void *)w[i].w), cudaFree((void *)w[i].scale);
    cudaFree(A), cudaFree(C), free(w), free(t);
    *wbytes_out = wb + sb;
    return ms;
}

int main(void) {
    int dev = 0;
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, dev));
    printf("device: %s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
    dic_ctx c = {0};
    CK(cudaStreamCreate(&c.stream));
    c.scratch_cap = (size_t)160 << 20; /* M = K = 8192: 64 MiB of e4m3 + scales */
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
    printf("\n%-36s %10s %10s %10s %8s\n", "case", "ms", "GB/s(w)", "TFLOP/s", "/copy");
    for (int i = 0; i < ntab; i++)
        printf("%-36s %10.4f %10.1f %10.2f %8.2f\n", tab[i].name, tab[i].ms, tab[i].gbs, tab[i].tflops, tab[i].ratio);
    return 0;
}
