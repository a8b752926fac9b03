/* gtest_kernels.cu — test-only kernels: the device number-format and exp
 * helpers of dic_common.cuh evaluated over arrays (gtest_common.c). */
#include "ops/cuda/dic_common.cuh"

static __global__ void k_expf(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = dic_expf(x[i]);
}
static __global__ void k_formats(const float *x, uint8_t *e4m3, uint8_t *e2m1, uint16_t *bf16, float *p2, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        e4m3[i] = dic_f32_to_e4m3(x[i]);
        e2m1[i] = dic_f32_to_e2m1(x[i]);
        bf16[i] = dic_f32_to_bf16(x[i]);
        p2[i] = x[i] > 0 ? dic_pow2_ceil(x[i]) : 0.0f;
    }
}
static __global__ void k_decode(float *e4m3, float *e2m1, float *e8m0) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i < 256) {
        e4m3[i] = dic_e4m3_to_f32((uint8_t)i);
        e8m0[i] = dic_e8m0_to_f32((uint8_t)i);
    }
    if (i < 16) e2m1[i] = dic_e2m1_to_f32((uint32_t)i);
}

extern "C" cudaError_t gt_run_expf(const float *x, float *y, int n) {
    k_expf<<<(n + 255) / 256, 256>>>(x, y, n);
    return cudaGetLastError();
}
extern "C" cudaError_t gt_run_formats(const float *x, uint8_t *e4m3, uint8_t *e2m1, uint16_t *bf16, float *p2, int n) {
    k_formats<<<(n + 255) / 256, 256>>>(x, e4m3, e2m1, bf16, p2, n);
    return cudaGetLastError();
}
extern "C" cudaError_t gt_run_decode(float *e4m3, float *e2m1, float *e8m0) {
    k_decode<<<1, 256>>>(e4m3, e2m1, e8m0);
    return cudaGetLastError();
}
