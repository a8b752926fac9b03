/* bench_ck.cuh — the checked CUDA call of the standalone .cu benches (prim_bench, stream_bench): on an error,
 * print where and what, and return 1 from the calling function (main). */
#ifndef DI_BENCH_GPU_BENCH_CK_CUH
#define DI_BENCH_GPU_BENCH_CK_CUH

#include <cuda_runtime.h>
#include <stdio.h>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

#endif
