/*
 * dic_elem_model.cu — small per-row helpers of the model forward (ops.h
 * di_scale_bf16_f32, di_hc_pre_onehot, di_hc_head_pre, di_hc_mean,
 * di_add_bcast_bf16, di_engram_gather_rows; src/ops/cpu/elem_model.c). One
 * IEEE operation per step as the CPU writes it: bit-identical, except
 * dic_hc_head_pre's exponential (the CPU calls libm expf; here exp in double
 * rounded once to fp32, which equals glibc's expf except for rare 1-ulp
 * cases).
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"

#define GRID_STRIDE(i, n)                                                                                              \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

static unsigned blocks_for(size_t n) {
    size_t b = (n + 255) / 256;
    return (unsigned)(b > 65536 ? 65536 : b < 1 ? 1 : b);
}

static __global__ void k_scale_bf16_f32(float *v, size_t n, float scale) {
    DIC_PDL_ENTER();
    GRID_STRIDE(i, n) v[i] = dic_round_bf16(__fmul_rn(dic_round_bf16(v[i]), scale));
}

extern "C" cudaError_t dic_scale_bf16_f32(const dic_ctx *c, float *v, size_t n, float scale) {
    if (n == 0) return cudaSuccess;
    DIC_LAUNCH(k_scale_bf16_f32, blocks_for(n), 256, 0, c->stream, v, n, scale);
    DIC_LAUNCH_CHECK();
}

static __global__ void k_hc_pre_onehot(int M, float *pre) {
    DIC_PDL_ENTER();
    GRID_STRIDE(i, (size_t)M * 4) pre[i] = (i & 3) ? 0.0f : 1.0f;
}

extern "C" cudaError_t dic_hc_pre_onehot(const dic_ctx *c, int M, float *pre) {
    if (M <= 0) return cudaSuccess;
    DIC_LAUNCH(k_hc_pre_onehot, blocks_for((size_t)M * 4), 256, 0, c->stream, M, pre);
    DIC_LAUNCH_CHECK();
}

/* libm expf stand-in: exp in double, rounded once. */
static __device__ __forceinline__ float expf_cr(float x) { return __double2float_rn(exp((double)x)); }

static __global__ void k_hc_head_pre(int M, const float *mixes, int hc, float scale0, const float *base, float eps,
                                     float *pre) {
    DIC_PDL_ENTER();
    GRID_STRIDE(i, (size_t)M * hc) {
        const size_t m = i / hc;
        const int k = (int)(i % hc);
        float z = __fadd_rn(__fmul_rn(mixes[i], scale0), base[k]);
        pre[m * 4 + k] = __fadd_rn(__fdiv_rn(1.0f, __fadd_rn(1.0f, expf_cr(-z))), eps);
    }
}

extern "C" cudaError_t dic_hc_head_pre(const dic_ctx *c, int M, const float *mixes, int hc, float scale0,
                                       const float *base, float eps, float *pre) {
    if (M <= 0 || hc <= 0) return cudaSuccess;
    if (hc > 4) return cudaErrorInvalidValue;
    DIC_LAUNCH(k_hc_head_pre, blocks_for((size_t)M * hc), 256, 0, c->stream, M, mixes, hc, scale0, base, eps, pre);
    DIC_LAUNCH_CHECK();
}

static __global__ void k_hc_mean(int M, const uint16_t *R, int hc, int d, uint16_t *out, size_t ldo) {
    DIC_PDL_ENTER();
    GRID_STRIDE(t, (size_t)M * d) {
        const size_t i = t / d, j = t % d;
        const uint16_t *r = R + i * hc * d;
        float s = dic_bf16_to_f32(r[j]);
        for (int k = 1; k < hc; k++) s = __fadd_rn(s, dic_bf16_to_f32(r[(size_t)k * d + j]));
        out[i * ldo + j] = dic_f32_to_bf16(__fdiv_rn(s, (float)hc));
    }
}

extern "C" cudaError_t dic_hc_mean(const dic_ctx *c, int M, const uint16_t *R, int hc, int d, uint16_t *out,
                                   size_t ldo) {
    if (M <= 0 || d <= 0) return cudaSuccess;
    if (hc <= 0) return cudaErrorInvalidValue;
    DIC_LAUNCH(k_hc_mean, blocks_for((size_t)M * d), 256, 0, c->stream, M, R, hc, d, out, ldo);
    DIC_LAUNCH_CHECK();
}

static __global__ void k_add_bcast_bf16(int M, const uint16_t *e0, int hc, int d, uint16_t *R) {
    DIC_PDL_ENTER();
    GRID_STRIDE(t, (size_t)M * hc * d) {
        const size_t j = t % d, i = t / ((size_t)hc * d);
        R[t] = dic_f32_to_bf16(__fadd_rn(dic_bf16_to_f32(e0[i * d + j]), dic_bf16_to_f32(R[t])));
    }
}

extern "C" cudaError_t dic_add_bcast_bf16(const dic_ctx *c, int M, const uint16_t *e, int hc, int d, uint16_t *R) {
    if (M <= 0 || hc <= 0 || d <= 0) return cudaSuccess;
    DIC_LAUNCH(k_add_bcast_bf16, blocks_for((size_t)M * hc * d), 256, 0, c->stream, M, e, hc, d, R);
    DIC_LAUNCH_CHECK();
}

/* out[(m * ncols + c)][j] = bf16(e4m3(table[id][j]) * e8m0(scale[id][j / 32])). */
static __global__ void k_engram_gather(int M, const int64_t *ids, int64_t ids_stride, int ncols, const uint8_t *table,
                                       const uint8_t *scale, int hd, uint16_t *out) {
    DIC_PDL_ENTER();
    const int nsb = hd / 32;
    GRID_STRIDE(t, (size_t)M * ncols * hd) {
        const size_t r = t / hd;
        const int j = (int)(t % hd);
        if (j >= nsb * 32) continue; /* the CPU converts whole 32-value blocks only */
        const int m = (int)(r / ncols), col = (int)(r % ncols);
        const int64_t id = ids[(int64_t)m * ids_stride + col];
        const float s = dic_e8m0_to_f32(scale[id * nsb + j / 32]);
        out[t] = dic_f32_to_bf16(__fmul_rn(__fmul_rn(dic_e4m3_to_f32(table[id * hd + j]), 1.0f), s));
    }
}

extern "C" cudaError_t dic_engram_gather_rows(const dic_ctx *c, int M, const int64_t *ids, int64_t ids_stride,
                                              int ncols, const uint8_t *table, const uint8_t *scale, int hd,
                                              uint16_t *out) {
    if (M <= 0 || ncols <= 0 || hd <= 0) return cudaSuccess;
    DIC_LAUNCH(k_engram_gather, blocks_for((size_t)M * ncols * hd), 256, 0, c->stream, M, ids, ids_stride, ncols, table,
                                                                               scale, hd, out);
    DIC_LAUNCH_CHECK();
}
