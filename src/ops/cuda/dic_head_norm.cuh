/*
 * dic_head_norm.cuh — the query post-processing's per-head arithmetic (ops.h di_q_post), shared by
 * dic_norm_rope.cu (k_q_post) and dic_q_proj.cu (the fused query projection's epilogue): the same
 * functions, the same bits.
 */
#ifndef DI_OPS_CUDA_DIC_HEAD_NORM_CUH
#define DI_OPS_CUDA_DIC_HEAD_NORM_CUH

#include "ops/cuda/dic_common.cuh"

/* Eight bf16 values of a 16-byte vector, in order, as fp32. */
static __device__ __forceinline__ void dic_bf16x8_to_f32(uint4 u, float x[8]) {
    const uint32_t p[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int e = 0; e < 4; e++) {
        x[2 * e] = dic_bf16_to_f32((uint16_t)(p[e] & 0xFFFFu));
        x[2 * e + 1] = dic_bf16_to_f32((uint16_t)(p[e] >> 16));
    }
}

/* dic_head_rrms' end: the lane butterfly of the per-lane sums s, the bf16 mean, eps and reciprocal root. */
static __device__ __forceinline__ float dic_head_rrms_fin(float s, int hd, float eps) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) s = __fadd_rn(s, __shfl_xor_sync(0xFFFFFFFFu, s, o));
    const float mean = dic_round_bf16(__fdiv_rn(s, (float)hd));
    const float tt = dic_round_bf16(__fadd_rn(mean, eps));
    return dic_round_bf16(__fdiv_rn(1.0f, __fsqrt_rn(tt)));
}

/* The V4 head norm's reciprocal root, on every lane of a warp holding one head: lane L has the
 * 8-value chunks L and L + 32 in x[0], x[1] (zeros past the head). bf16(q_i^2) summed in fp32 over the
 * lane, then a fixed xor tree over the warp; mean, mean + eps and 1 / sqrt rounded to bf16 (the
 * order k_head_rmsnorm_warp rounds them). */
static __device__ __forceinline__ float dic_head_rrms(const float x[2][8], int hd, float eps) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 2; k++)
#pragma unroll
        for (int e = 0; e < 8; e++) s = __fadd_rn(s, dic_round_bf16(__fmul_rn(x[k][e], x[k][e])));
    return dic_head_rrms_fin(s, hd, eps);
}

/* One RoPE pair (a, b) by (cos, sin), each result rounded to bf16 (the CPU rope's order). */
static __device__ __forceinline__ void dic_rot_bf16(float *a, float *b, float cc, float ss) {
    const float re = fmaf(*a, cc, -__fmul_rn(*b, ss));
    const float im = fmaf(*a, ss, __fmul_rn(*b, cc));
    *a = dic_round_bf16(re);
    *b = dic_round_bf16(im);
}

#endif
