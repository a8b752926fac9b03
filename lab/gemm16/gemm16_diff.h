/*
 * gemm16_diff.h — gemm16_bench's device-side comparison of fp32 outputs.
 */
#ifndef DI_LAB_GEMM16_DIFF_H
#define DI_LAB_GEMM16_DIFF_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Over n fp32 words (device): nd_dev[0] = how many differ between a and b, nd_dev[1] = the largest
 * difference in fp32 ulp (ordered bit patterns; a NaN or an unwritten 0xFFFFFFFF shows as huge). */
cudaError_t g16_count_diff(cudaStream_t st, const uint32_t *a, const uint32_t *b, size_t n,
                           unsigned long long *nd_dev);

#ifdef __cplusplus
}
#endif
#endif
