/*
 * dic_engram_gate.cu — the Engram block's per-copy gating for a batch of
 * tokens (ops.h di_engram_gate_rows; src/ops/cpu/engram_gate.c).
 *
 * One warp per (token, copy). engram_gate.c's sum8 adds element i into
 * partial i & 7 in increasing i (the tail too), so partial j is the
 * sequential sum of the elements i = j mod 8: lanes 0-7 run the partials of
 * mean(h^2), lanes 8-15 of mean(key^2), lanes 16-23 of h . qk . key, then
 * lane 0 adds them in sum8's tree. The rest is the CPU's expression in its
 * order; 1/sqrt(dim) is computed on the host with the CPU's pow. The gate's
 * exponential is libm expf on the CPU; here exp in double rounded once
 * (equal to glibc's expf except for rare 1-ulp cases). Rows of R of distinct
 * tokens must not alias (rmap a map into distinct rows).
 */
#include <math.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"

#define EG_WARPS 4
#define CLAMP_MIN 1e-6f

static __device__ __forceinline__ float tree8(const float *s) {
    return __fadd_rn(__fadd_rn(__fadd_rn(s[0], s[4]), __fadd_rn(s[2], s[6])),
                     __fadd_rn(__fadd_rn(s[1], s[5]), __fadd_rn(s[3], s[7])));
}

static __global__ void __launch_bounds__(EG_WARPS * 32)
    k_engram_gate(int M, const int64_t *rmap, const uint16_t *kv0, size_t ldkv, uint16_t *R, const float *qk, int dim,
                  int hc, float eps, float inv_sqrt_dim, float *gates) {
    DIC_PDL_ENTER();
    __shared__ float part[EG_WARPS][24];
    const int wp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long u = (long long)blockIdx.x * EG_WARPS + wp; /* (token, copy) */
    const bool live = u < (long long)M * hc;
    const int i = live ? (int)(u / hc) : 0, k = live ? (int)(u % hc) : 0;
    const int64_t t = rmap ? rmap[i] : i;
    const uint16_t *kv = kv0 + (size_t)i * ldkv;
    const uint16_t *key = kv + (size_t)k * dim, *value = kv + (size_t)hc * dim;
    uint16_t *r = R + ((size_t)t * hc + k) * dim;
    const float *q = qk + (size_t)k * dim;
    if (live && lane < 24) {
        const int j = lane & 7, which = lane >> 3;
        float s = 0.0f;
        for (int d = j; d < dim; d += 8) {
            float x;
            if (which == 0) {
                float h = dic_bf16_to_f32(r[d]);
                x = __fmul_rn(h, h);
            } else if (which == 1) {
                float kf = dic_bf16_to_f32(key[d]);
                x = __fmul_rn(kf, kf);
            } else {
                x = __fmul_rn(__fmul_rn(dic_bf16_to_f32(r[d]), q[d]), dic_bf16_to_f32(key[d]));
            }
            s = __fadd_rn(s, x);
        }
        part[wp][lane] = s;
    }
    __syncwarp();
    if (!live) return;
    float g = 0.0f;
    if (lane == 0) {
        const float ms_h = __fdiv_rn(tree8(part[wp]), (float)dim);
        const float ms_k = __fdiv_rn(tree8(part[wp] + 8), (float)dim);
        const float rstd = __fmul_rn(__fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms_h, eps))),
                                     __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms_k, eps))));
        const float dot = __fmul_rn(__fmul_rn(tree8(part[wp] + 16), rstd), inv_sqrt_dim);
        const float z = copysignf(__fsqrt_rn(fmaxf(fabsf(dot), CLAMP_MIN)), dot);
        g = __fdiv_rn(1.0f, __fadd_rn(1.0f, __double2float_rn(exp((double)-z))));
        if (gates) gates[(size_t)t * hc + k] = g;
    }
    g = __shfl_sync(0xFFFFFFFFu, g, 0);
    for (int d = lane; d < dim; d += 32)
        r[d] = dic_f32_to_bf16(__fadd_rn(dic_bf16_to_f32(r[d]), __fmul_rn(g, dic_bf16_to_f32(value[d]))));
}

extern "C" cudaError_t dic_engram_gate_rows(const dic_ctx *c, int M, const int64_t *rmap, const uint16_t *kv,
                                            size_t ldkv, uint16_t *R, const float *qk, int dim, int hc, float eps,
                                            float *gates) {
    if (M <= 0 || hc <= 0) return cudaSuccess;
    if (dim <= 0) return cudaErrorInvalidValue;
    const float inv_sqrt_dim = (float)pow((double)dim, -0.5); /* engram_gate.c, on the host */
    const long long units = (long long)M * hc;
    DIC_LAUNCH(k_engram_gate, (unsigned)((units + EG_WARPS - 1) / EG_WARPS), EG_WARPS * 32, 0, c->stream, 
        M, rmap, kv, ldkv, R, qk, dim, hc, eps, inv_sqrt_dim, gates);
    DIC_LAUNCH_CHECK();
}
