/* cu_probe.c — device measurements for `deepinfer bench` (backend.h
 * di_backend_copy_gbs / di_backend_fp8_tflops / di_backend_mem_info), in the
 * same process as the measured forward. */
#include <stdint.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "ops/cuda/cu_glue.h"
#include "ops/cuda/dic.h"

int di_cuda_mem_info(size_t *free_b, size_t *total_b) {
    return cudaMemGetInfo(free_b, total_b) == cudaSuccess ? 0 : -1;
}

/* Best of 5 cudaMemcpy device-to-device of `bytes`, (read + written) / s in GB/s. */
double di_cuda_copy_gbs(size_t bytes) {
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double best = -1;
    if (cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes) || cudaEventCreate(&e0) || cudaEventCreate(&e1)) goto out;
    cudaMemset(a, 1, bytes);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice); /* warm */
    for (int r = 0; r < 5; r++) {
        float ms = 0;
        cudaEventRecord(e0, 0);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(e1, 0);
        if (cudaEventSynchronize(e1) || cudaEventElapsedTime(&ms, e0, e1)) goto out;
        double g = 2.0 * (double)bytes / (ms * 1e-3) / 1e9;
        if (g > best) best = g;
    }
out:
    cudaGetLastError();
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return best;
}

/* Best of 5 dic_gemm (M = N = K = n, e4m3 weights with 128x128 e8m0 blocks,
 * bf16 activations quantised per 128 like the forward, bf16 out), TFLOP/s
 * of 2 n^3. batch_invariant 1: the kernels the forward uses (cu_exec.c sets
 * it on every exec); 0: the fastest FP8 path (wgmma for M > 64 on sm_90). */
double di_cuda_fp8_tflops(int n, int batch_invariant) {
    size_t N = (size_t)n, sb = (N / 128) * (N / 128), scr = dic_gemm_scratch(n, n, n);
    void *w = NULL, *s = NULL, *A = NULL, *C = NULL, *sc = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double best = -1;
    int dev = 0;
    dic_ctx c = {0};
    if (cudaMalloc(&w, N * N) || cudaMalloc(&s, sb) || cudaMalloc(&A, N * N * 2) || cudaMalloc(&C, N * N * 2) ||
        cudaMalloc(&sc, scr ? scr : 256) || cudaStreamCreate(&st) || cudaEventCreate(&e0) || cudaEventCreate(&e1))
        goto out;
    cudaMemset(w, 0x38, N * N);     /* e4m3 1.0 */
    cudaMemset(s, 120, sb);         /* 2^-7 */
    cudaMemset(A, 0x3C, N * N * 2); /* bf16 0x3C3C ~ 0.0115 */
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&c.num_sms, cudaDevAttrMultiProcessorCount, dev);
    c.stream = st, c.scratch = sc, c.scratch_cap = scr ? scr : 256, c.batch_invariant = batch_invariant;
    dic_wmat W = {.fmt = 2, .n = n, .k = n, .wblock = 128, .w = w, .scale = s};
    if (dic_gemm(&c, n, A, N, &W, 128, NULL, C, N)) goto out; /* warm */
    for (int r = 0; r < 5; r++) {
        float ms = 0;
        cudaEventRecord(e0, st);
        dic_gemm(&c, n, A, N, &W, 128, NULL, C, N);
        cudaEventRecord(e1, st);
        if (cudaEventSynchronize(e1) || cudaEventElapsedTime(&ms, e0, e1)) goto out;
        double t = 2.0 * (double)N * (double)N * (double)N / (ms * 1e-3) / 1e12;
        if (t > best) best = t;
    }
out:
    cudaGetLastError();
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (st) cudaStreamDestroy(st);
    cudaFree(w), cudaFree(s), cudaFree(A), cudaFree(C), cudaFree(sc);
    return best;
}
