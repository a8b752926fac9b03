/*
 * bench_util.h — helpers shared by the GPU benches (the .c files here): a CUDA
 * call check that stops the bench with the failing call, and the float
 * comparison for medians (qsort), the replay timing of a captured graph,
 * the d2d copy ceiling, a fast-mode op context, a xorshift generator.
 */
#ifndef DI_BENCH_GPU_BENCH_UTIL_H
#define DI_BENCH_GPU_BENCH_UTIL_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/dic.h"

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));  \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static inline int cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Instantiate a captured graph, replay it once to warm up, then time 10
 * replays with events: the median in ms. Destroys the graph. */
static inline double graph_median_ms(cudaStream_t st, cudaGraph_t gr, cudaEvent_t e0, cudaEvent_t e1) {
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, gr, 0));
    CK(cudaGraphLaunch(ge, st));
    float tg[10];
    for (int r = 0; r < 10; r++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&tg[r], e0, e1));
    }
    qsort(tg, 10, sizeof *tg, cmpf);
    cudaGraphExecDestroy(ge), cudaGraphDestroy(gr);
    return tg[5];
}

/* The copy ceiling: a 1 GiB device-to-device copy timed 12 times after 2
 * warm-ups, bytes read + written over the median time, in GB/s; prints it. */
static inline double copy_ceiling_gbs(cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1) {
    size_t cb = (size_t)1 << 30;
    void *s, *d;
    CK(cudaMalloc(&s, cb));
    CK(cudaMalloc(&d, cb));
    CK(cudaMemset(s, 1, cb));
    float t[12];
    for (int i = 0; i < 14; i++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaMemcpyAsync(d, s, cb, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        if (i >= 2) CK(cudaEventElapsedTime(&t[i - 2], e0, e1));
    }
    qsort(t, 12, sizeof *t, cmpf);
    double gbs = 2.0 * cb / (t[6] * 1e-3) / 1e9;
    printf("d2d copy 1 GiB: %.4f ms, %.0f GB/s (the ceiling below)\n", t[6], gbs);
    cudaFree(s), cudaFree(d);
    return gbs;
}

/* A fast-mode op context (batch_invariant 0) on a new stream with `scratch`
 * bytes of device scratch; prints the device line. */
static inline void bench_ctx_init(dic_ctx *c, size_t scratch) {
    int dev = 0;
    CK(cudaGetDevice(&dev));
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, dev));
    printf("device: %s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
    memset(c, 0, sizeof *c);
    CK(cudaStreamCreate(&c->stream));
    c->scratch_cap = scratch;
    CK(cudaMalloc(&c->scratch, c->scratch_cap));
    c->num_sms = p.multiProcessorCount;
    c->batch_invariant = 0;
}

/* xorshift64: the benches' reproducible random stream. */
static unsigned long long bench_rs = 88172645463325252ull;
static inline unsigned rnd(void) {
    bench_rs ^= bench_rs << 13, bench_rs ^= bench_rs >> 7, bench_rs ^= bench_rs << 17;
    return (unsigned)(bench_rs >> 11);
}

#endif
