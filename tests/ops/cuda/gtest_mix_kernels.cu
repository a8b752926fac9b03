/* gtest_mix_kernels.cu — test-only kernel: the device Philox Gumbel noise
 * of dic_common.cuh over a range of vocabulary ids (gtest_mix.c). */
#include "ops/cuda/dic_common.cuh"

static __global__ void k_gumbel(uint64_t seed, uint32_t stream, uint64_t pos, uint32_t purpose, int n, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = dic_gumbel_at(seed, stream, pos, purpose, (uint32_t)i);
}

extern "C" cudaError_t gt_run_gumbel(uint64_t seed, uint32_t stream, uint64_t pos, uint32_t purpose, int n,
                                     float *out) {
    k_gumbel<<<(n + 255) / 256, 256>>>(seed, stream, pos, purpose, n, out);
    return cudaGetLastError();
}
