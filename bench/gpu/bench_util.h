/*
 * bench_util.h — helpers shared by the GPU benches (the .c files here): a CUDA
 * call check that stops the bench with the failing call, and the float
 * comparison for medians (qsort).
 */
#ifndef DI_BENCH_GPU_BENCH_UTIL_H
#define DI_BENCH_GPU_BENCH_UTIL_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

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

#endif
