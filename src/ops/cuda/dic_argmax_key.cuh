/*
 * dic_argmax_key.cuh — the greedy argmax as an order on 64-bit keys, for kernels that fuse the argmax into
 * their product (dic_gemm_float_fast.cu k_gemv_am / k_mma_am, dic_gemv_stream.cu): the unsigned order of
 * the keys is dic_argmax's (dic_sample.cu "better"): larger value first, NaN counted as -inf, -0 == +0,
 * ties to the lower column. So the maximum of a set of keys (e.g. by integer atomicMax, in any order) is
 * the argmax; key 0 never occurs ("no value").
 */
#ifndef DI_OPS_CUDA_DIC_ARGMAX_KEY_CUH
#define DI_OPS_CUDA_DIC_ARGMAX_KEY_CUH

#include <stdint.h>

static __device__ __forceinline__ unsigned long long dic_argmax_key(float v, int col) {
    uint32_t u = __float_as_uint(v);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) u = 0xFF800000u; /* NaN: -inf */
    if (u == 0x80000000u) u = 0u;                           /* -0: +0 */
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);         /* never 0 */
    return (unsigned long long)u << 32 | (uint32_t)~(uint32_t)col;
}

#endif
