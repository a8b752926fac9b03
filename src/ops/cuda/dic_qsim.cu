/*
 * dic_qsim.cu — the quantisation simulations and the 128-point Hadamard
 * rotation (ops.h di_qat_fp8, di_qat_fp4, di_qat_fp4_e4m3, di_hadamard128;
 * docs/architecture.md §3.5), bit-identical to src/ops/cpu/qsim.c: every value
 * goes through qsim.c's fp32 operations; the block max is order-free.
 */
#include "ops/cuda/dic_common.cuh"

enum { QS_FP8 = 0, QS_FP4 = 1, QS_FP4_E4M3 = 2 };

/* One warp per block of `blk` values of one row. One instantiation per kind and rolled loops
 * (less code to fetch cold in the decode step; the same operations). */
template <int kind>
static __global__ void k_qat(int M, uint16_t *v, size_t ld, int n, int blk) {
    DIC_PDL_ENTER();
    int nb = n / blk;
    long long wid = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (wid >= (long long)M * nb) return;
    uint16_t *x = v + (size_t)(wid / nb) * ld + (size_t)(wid % nb) * blk;
    float amax = 0.0f;
#pragma unroll 1
    for (int i = lane; i < blk; i += 32) amax = fmaxf(amax, fabsf(dic_bf16_to_f32(x[i])));
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    float s, lim;
    if constexpr (kind == QS_FP8) {
        amax = fmaxf(amax, 1e-4f);
        s = dic_pow2_ceil(__fmul_rn(amax, (float)(1.0 / 448.0)));
        lim = 448.0f;
    } else if constexpr (kind == QS_FP4) {
        amax = fmaxf(amax, 6.0f * 0x1p-126f);
        s = dic_pow2_ceil(__fmul_rn(amax, (float)(1.0 / 6.0)));
        lim = 6.0f;
    } else { /* e4m3 scale: a true division, then e4m3 RNE (saturating) */
        amax = fmaxf(amax, 6.0f * 0x1p-9f);
        s = dic_e4m3_to_f32(dic_f32_to_e4m3(__fdiv_rn(amax, 6.0f)));
        lim = 6.0f;
    }
#pragma unroll 1
    for (int i = lane; i < blk; i += 32) {
        float q = __fdiv_rn(dic_bf16_to_f32(x[i]), s);
        q = fminf(fmaxf(q, -lim), lim);
        float r = kind == QS_FP8 ? dic_e4m3_to_f32(dic_f32_to_e4m3(q)) : dic_e2m1_to_f32(dic_f32_to_e2m1(q));
        x[i] = dic_f32_to_bf16(__fmul_rn(r, s));
    }
}

static cudaError_t qat(const dic_ctx *c, int M, uint16_t *v, size_t ld, int n, int blk, int kind) {
    if (blk <= 0) return cudaErrorInvalidValue;
    long long warps = (long long)M * (n / blk);
    if (warps <= 0) return cudaSuccess;
    const unsigned nb = (unsigned)((warps + 7) / 8);
    if (kind == QS_FP8) DIC_LAUNCH(k_qat<QS_FP8>, nb, 256, 0, c->stream, M, v, ld, n, blk);
    else if (kind == QS_FP4) DIC_LAUNCH(k_qat<QS_FP4>, nb, 256, 0, c->stream, M, v, ld, n, blk);
    else DIC_LAUNCH(k_qat<QS_FP4_E4M3>, nb, 256, 0, c->stream, M, v, ld, n, blk);
    DIC_LAUNCH_CHECK();
}

extern "C" cudaError_t dic_qat_fp8(const dic_ctx *c, int M, uint16_t *v, size_t ld, int n, int blk) {
    return qat(c, M, v, ld, n, blk, QS_FP8);
}
extern "C" cudaError_t dic_qat_fp4(const dic_ctx *c, int M, uint16_t *v, size_t ld, int n, int blk) {
    return qat(c, M, v, ld, n, blk, QS_FP4);
}
extern "C" cudaError_t dic_qat_fp4_e4m3(const dic_ctx *c, int M, uint16_t *v, size_t ld, int n, int blk) {
    return qat(c, M, v, ld, n, blk, QS_FP4_E4M3);
}

/* Walsh-Hadamard of 128 values: one warp per vector, lane L holds values
 * 4L .. 4L+3. Stages h = 1, 2 are inside a lane, h = 4 .. 64 pair lanes
 * L and L ^ (h/4); the lower element gets a + b, the upper a - b (a = the
 * lower element), the same butterflies as qsim.c. */
static __global__ void k_hadamard(int M, uint16_t *v, size_t ld, int nvec) {
    DIC_PDL_ENTER();
    long long wid = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (wid >= (long long)M * nvec) return;
    uint16_t *x = v + (size_t)(wid / nvec) * ld + (size_t)(wid % nvec) * 128 + 4 * lane;
    float t[4];
#pragma unroll
    for (int r = 0; r < 4; r++) t[r] = dic_bf16_to_f32(x[r]);
#pragma unroll
    for (int h = 1; h < 4; h *= 2)
#pragma unroll
        for (int r = 0; r < 4; r++)
            if (!(r & h)) {
                float a = t[r], b = t[r + h];
                t[r] = __fadd_rn(a, b);
                t[r + h] = __fsub_rn(a, b);
            }
#pragma unroll
    for (int hl = 1; hl < 32; hl *= 2) {
        int upper = (lane & hl) != 0;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            float p = __shfl_xor_sync(0xFFFFFFFFu, t[r], hl);
            t[r] = upper ? __fsub_rn(p, t[r]) : __fadd_rn(t[r], p);
        }
    }
    const float scale = (float)(1.0 / 11.313708498984761); /* fp32(1/sqrt(128)), qsim.c */
#pragma unroll
    for (int r = 0; r < 4; r++) x[r] = dic_f32_to_bf16(__fmul_rn(t[r], scale));
}

extern "C" cudaError_t dic_hadamard128(const dic_ctx *c, int M, uint16_t *v, size_t ld, int nvec) {
    long long warps = (long long)M * nvec;
    if (warps <= 0) return cudaSuccess;
    DIC_LAUNCH(k_hadamard, (unsigned)((warps + 7) / 8), 256, 0, c->stream, M, v, ld, nvec);
    DIC_LAUNCH_CHECK();
}
