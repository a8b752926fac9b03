/*
 * gemm16_diff.cu — the bench's bitwise comparison of two fp32 outputs on the device (gemm16_diff.h).
 */
#include "gemm16_diff.h"

/* ordered integer of an fp32 bit pattern (ulp distance = difference of two of these) */
static __device__ __forceinline__ long long g16_ord(uint32_t u) {
    return (u >> 31) ? -(long long)(u & 0x7FFFFFFFu) : (long long)u;
}

static __global__ void k_g16_count_diff(const uint32_t *a, const uint32_t *b, size_t n, unsigned long long *nd) {
    unsigned long long c = 0, mx = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (a[i] != b[i]) {
            const long long d = g16_ord(a[i]) - g16_ord(b[i]);
            const unsigned long long ad = (unsigned long long)(d < 0 ? -d : d);
            c++;
            mx = ad > mx ? ad : mx;
        }
    for (int o = 16; o; o >>= 1) {
        c += __shfl_xor_sync(0xFFFFFFFFu, c, o);
        const unsigned long long t = __shfl_xor_sync(0xFFFFFFFFu, mx, o);
        mx = t > mx ? t : mx;
    }
    if ((threadIdx.x & 31) == 0 && c) {
        atomicAdd(nd, c);
        atomicMax(nd + 1, mx);
    }
}

extern "C" cudaError_t g16_count_diff(cudaStream_t st, const uint32_t *a, const uint32_t *b, size_t n,
                                      unsigned long long *nd_dev) {
    cudaError_t e = cudaMemsetAsync(nd_dev, 0, 2 * sizeof *nd_dev, st);
    if (e != cudaSuccess || !n) return e;
    k_g16_count_diff<<<1024, 256, 0, st>>>(a, b, n, nd_dev);
    return cudaGetLastError();
}
