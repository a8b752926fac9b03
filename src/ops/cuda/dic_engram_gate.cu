/*
 * dic_engram_gate.cu — the Engram block's per-copy gating for a batch of
 * tokens (ops.h di_engram_gate_rows; src/ops/cpu/engram_gate.c;
 * docs/kernels/engram-gate.md).
 *
 * engram_gate.c's sum8 adds element i into partial i & 7 in increasing i
 * (the tail too), so partial j is the sequential sum of the elements
 * i = j mod 8: lanes 0-7 of warp 0 run the partials of mean(h^2), lanes
 * 8-15 of mean(key^2), lanes 16-23 of h . qk . key, then lane 0 adds them
 * in sum8's tree. The rest is the CPU's expression in its order; 1/sqrt(dim)
 * is computed on the host with the CPU's pow. The gate's exponential is
 * libm expf on the CPU; here exp in double rounded once (equal to glibc's
 * expf except for rare 1-ulp cases). Rows of R of distinct tokens must not
 * alias (rmap a map into distinct rows). Both batch modes take this kernel.
 */
#include <math.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"

#define CLAMP_MIN 1e-6f

static __device__ __forceinline__ float tree8(const float *s) {
    return __fadd_rn(__fadd_rn(__fadd_rn(s[0], s[4]), __fadd_rn(s[2], s[6])),
                     __fadd_rn(__fadd_rn(s[1], s[5]), __fadd_rn(s[3], s[7])));
}

/*
 * k_engram_gate_cta: the loads off the serial chain (docs/kernels/engram-gate.md §1). One CTA of
 * EGC_T threads per (token, copy): in chunks of EGC_CH values all threads load the chunk (every load
 * in flight before any product, egc_fill) and compute the three products of each element (the same
 * __fmul_rn expressions as the CPU) into shared memory, then lanes 0-23 of warp 0 add them to their
 * partials in sum8's element order (partial j of a sum: elements d = j mod 8, increasing d) while the
 * other warps fill the next chunk (double buffer). The gate is lane 0's, the update is spread over
 * the CTA. Independent of M.
 */
#define EGC_T 256
#define EGC_CH 1024 /* a multiple of 8: a chunk keeps every element's partial index d & 7 */

/* The three products of the elements d0 + e of one chunk, e = t0 + NT i (i < ceil(EGC_CH / NT)): every load
 * of the chunk issued before any product is stored (registers), then engram_gate.c's __fmul_rn expressions. */
template <int NT>
static __device__ __forceinline__ void egc_fill(float (*prod)[EGC_CH], const uint16_t *r, const uint16_t *key,
                                                const float *q, int d0, int dim, int t0) {
    constexpr int IT = (EGC_CH + NT - 1) / NT;
    float h[IT], kf[IT], qv[IT];
#pragma unroll
    for (int i = 0; i < IT; i++) {
        const int e = t0 + NT * i, d = d0 + e;
        const bool ok = e < EGC_CH && d < dim;
        h[i] = ok ? dic_bf16_to_f32(r[d]) : 0.0f;
        kf[i] = ok ? dic_bf16_to_f32(key[d]) : 0.0f;
        qv[i] = ok ? q[d] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < IT; i++) {
        const int e = t0 + NT * i;
        if (e < EGC_CH && d0 + e < dim) {
            prod[0][e] = __fmul_rn(h[i], h[i]);
            prod[1][e] = __fmul_rn(kf[i], kf[i]);
            prod[2][e] = __fmul_rn(__fmul_rn(h[i], qv[i]), kf[i]);
        }
    }
}

static __global__ void __launch_bounds__(EGC_T)
    k_engram_gate_cta(int M, const int64_t *rmap, const uint16_t *kv0, size_t ldkv, uint16_t *R, const float *qk,
                      int dim, int hc, float eps, float inv_sqrt_dim, float *gates) {
    DIC_PDL_ENTER();
    __shared__ float prod[2][3][EGC_CH];
    __shared__ float part[24];
    __shared__ float gsh;
    const int tid = threadIdx.x, lane = tid & 31, wp = tid >> 5;
    const int u = blockIdx.x; /* (token, copy) */
    const int i = u / hc, k = u % hc;
    const int64_t t = rmap ? rmap[i] : i;
    const uint16_t *kv = kv0 + (size_t)i * ldkv;
    const uint16_t *key = kv + (size_t)k * dim, *value = kv + (size_t)hc * dim;
    uint16_t *r = R + ((size_t)t * hc + k) * dim;
    const float *q = qk + (size_t)k * dim;
    const int nch = (dim + EGC_CH - 1) / EGC_CH;
    egc_fill<EGC_T>(prod[0], r, key, q, 0, dim, tid); /* chunk 0 by every thread */
    __syncthreads();
    float s = 0.0f; /* lane < 24 of warp 0: partial (lane & 7) of sum (lane >> 3) */
    const int j = lane & 7, which = lane >> 3;
    for (int c = 0; c < nch; c++) {
        const int b = c & 1, d0 = c * EGC_CH;
        if (wp == 0) {
            if (lane < 24) {
                const int n = dim - d0 < EGC_CH ? dim - d0 : EGC_CH;
                const float *pv = prod[b][which];
#pragma unroll 8
                for (int e = j; e < n; e += 8) s = __fadd_rn(s, pv[e]);
            }
        } else if (c + 1 < nch) { /* warps 1..: the next chunk */
            egc_fill<EGC_T - 32>(prod[b ^ 1], r, key, q, d0 + EGC_CH, dim, tid - 32);
        }
        __syncthreads();
    }
    if (wp == 0 && lane < 24) part[lane] = s;
    __syncthreads();
    if (tid == 0) { /* engram_gate.c's gate, in its order */
        const float ms_h = __fdiv_rn(tree8(part), (float)dim);
        const float ms_k = __fdiv_rn(tree8(part + 8), (float)dim);
        const float rstd = __fmul_rn(__fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms_h, eps))),
                                     __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms_k, eps))));
        const float dot = __fmul_rn(__fmul_rn(tree8(part + 16), rstd), inv_sqrt_dim);
        const float z = copysignf(__fsqrt_rn(fmaxf(fabsf(dot), CLAMP_MIN)), dot);
        const float g = __fdiv_rn(1.0f, __fadd_rn(1.0f, __double2float_rn(exp((double)-z))));
        if (gates) gates[(size_t)t * hc + k] = g;
        gsh = g;
    }
    __syncthreads();
    const float g = gsh;
    /* the update, 4 elements per thread per round: their loads before their stores (r and value are not
     * known to be disjoint: one at a time, each load would wait for the previous store) */
    for (int d0 = 0; d0 < dim; d0 += 4 * EGC_T) {
        uint16_t rv[4], vv[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int d = d0 + tid + EGC_T * i;
            rv[i] = d < dim ? r[d] : (uint16_t)0;
            vv[i] = d < dim ? value[d] : (uint16_t)0;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int d = d0 + tid + EGC_T * i;
            if (d < dim) r[d] = dic_f32_to_bf16(__fadd_rn(dic_bf16_to_f32(rv[i]), __fmul_rn(g, dic_bf16_to_f32(vv[i]))));
        }
    }
}

extern "C" cudaError_t dic_engram_gate_rows(const dic_ctx *c, int M, const int64_t *rmap, const uint16_t *kv,
                                            size_t ldkv, uint16_t *R, const float *qk, int dim, int hc, float eps,
                                            float *gates) {
    if (M <= 0 || hc <= 0) return cudaSuccess;
    if (dim <= 0) return cudaErrorInvalidValue;
    const float inv_sqrt_dim = (float)pow((double)dim, -0.5); /* engram_gate.c, on the host */
    const long long units = (long long)M * hc;
    if (units > 0x7FFFFFFFLL) return cudaErrorInvalidValue; /* one CTA per (token, copy): the grid's x limit */
    DIC_LAUNCH(k_engram_gate_cta, (unsigned)units, EGC_T, 0, c->stream, M, rmap, kv, ldkv, R, qk, dim, hc, eps,
               inv_sqrt_dim, gates);
    DIC_LAUNCH_CHECK();
}
