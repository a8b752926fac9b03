/*
 * dic_moe.cu — the MoE sub-layer's small ops (docs/architecture.md §4.7), device
 * versions of select.c di_route / di_swiglu and of moe.c's expert loop:
 *   dic_route         router scores, top-k with bias (or hash routing), weights
 *   dic_moe_dispatch  deterministic counting sort of the (token, slot) entries
 *   dic_swiglu        clamped SwiGLU times the routing weight
 *   dic_moe_combine   moe.c's fp32 sum: routed experts by increasing id, then
 *                     the shared expert, rounded to bf16 once
 * All bit-identical to the CPU (see each kernel for the argument).
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_moe_int.h"
#include "ops/cuda/dic_route.cuh"

/* ---- router ----------------------------------------------------------- */

#define RT_WARPS 4

/* One warp per token (dic_route.cuh: route_scores by the whole CTA, then route_token). */
static __global__ void __launch_bounds__(RT_WARPS * 32) k_route(int M, const float *logits, int E, const float *bias,
                                                               const int *fixed, const int32_t *tokens, int k,
                                                               float route_scale, float norm_eps, int normalize,
                                                               int *sel, float *w) {
    DIC_PDL_ENTER();
    __shared__ float s_sh[RT_WARPS][RT_MAXE];
    __shared__ float b_sh[RT_WARPS][RT_MAXE];
    __shared__ int sel_sh[RT_WARPS][32];
    const int wp = threadIdx.x >> 5;
    const int m0 = blockIdx.x * RT_WARPS, m = m0 + wp;
    /* the scores of the CTA's tokens by all its threads (at M = 1 each thread takes E / 128 of the
     * exp / log1p chains instead of a lane E / 32) */
    route_scores(M, m0, RT_WARPS, logits, NULL, E, 1.0f, bias, &s_sh[0][0], &b_sh[0][0], RT_MAXE, RT_WARPS * 32);
    __syncthreads();
    if (m >= M) return;
    route_token(m, s_sh[wp], b_sh[wp], E, fixed, tokens, k, route_scale, norm_eps, normalize, sel_sh[wp], sel, w);
}

extern "C" cudaError_t dic_route_ex(const dic_ctx *c, int M, const float *logits, int E, const float *bias,
                                    const int *fixed, const int32_t *tokens, int k, float route_scale, float norm_eps,
                                    int normalize, int *sel, float *w) {
    if (M <= 0) return cudaSuccess;
    if (E <= 0 || E > RT_MAXE || k <= 0 || k > 32 || k > E) return cudaErrorInvalidValue;
    DIC_LAUNCH(k_route, (M + RT_WARPS - 1) / RT_WARPS, RT_WARPS * 32, 0, c->stream, M, logits, E, bias, fixed, tokens, k,
                                                                          route_scale, norm_eps, normalize, sel, w);
    DIC_LAUNCH_CHECK();
}

extern "C" cudaError_t dic_route(const dic_ctx *c, int M, const float *logits, int E, const float *bias,
                                 const int *fixed, int k, float route_scale, float norm_eps, int *sel, float *w) {
    return dic_route_ex(c, M, logits, E, bias, fixed, NULL, k, route_scale, norm_eps, 1, sel, w);
}

/* ---- dispatch --------------------------------------------------------- */

/* Counts per expert (integer atomics: order-free), then the exclusive scan
 * into off[0..E]. One CTA of 1024 threads, E <= 1024. */
static __global__ void __launch_bounds__(1024) k_dispatch_count(int n, const int *sel, int E, int *off) {
    DIC_PDL_ENTER();
    __shared__ int cnt[1024];
    __shared__ int wsum[32];
    const int t = threadIdx.x;
    cnt[t] = 0;
    __syncthreads();
    for (int j = t; j < n; j += 1024) {
        int e = sel[j];
        if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
    }
    __syncthreads();
    int v = cnt[t], lane = t & 31, wid = t >> 5;
    for (int o = 1; o < 32; o <<= 1) { /* inclusive warp scan */
        int u = __shfl_up_sync(0xFFFFFFFFu, v, o);
        if (lane >= o) v += u;
    }
    if (lane == 31) wsum[wid] = v;
    __syncthreads();
    if (wid == 0) {
        int x = wsum[lane];
        for (int o = 1; o < 32; o <<= 1) {
            int u = __shfl_up_sync(0xFFFFFFFFu, x, o);
            if (lane >= o) x += u;
        }
        wsum[lane] = x - wsum[lane]; /* exclusive over warps */
    }
    __syncthreads();
    int incl = v + wsum[wid];
    if (t < E) off[t + 1] = incl;
    if (t == 0) off[0] = 0;
}

/* One warp per expert: scan the entries in increasing index with ballots, so
 * rows of an expert come in increasing (token * k + slot) order. */
static __global__ void k_dispatch_rows(int n, const int *sel, int E, const int *off, int *rows) {
    DIC_PDL_ENTER();
    const int e = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (e >= E) return;
    const int base = off[e], cnt = off[e + 1] - base;
    int done = 0;
    for (int j0 = 0; j0 < n && done < cnt; j0 += 32) {
        int j = j0 + lane;
        bool hit = j < n && sel[j] == e;
        uint32_t bal = __ballot_sync(0xFFFFFFFFu, hit);
        if (hit) rows[base + done + __popc(bal & ((1u << lane) - 1u))] = j;
        done += __popc(bal);
    }
}

extern "C" cudaError_t dic_moe_dispatch(const dic_ctx *c, int M, int k, const int *sel, int E, int *off, int *rows) {
    if (E <= 0 || E > 1024) return cudaErrorInvalidValue;
    int n = M > 0 ? M * k : 0;
    DIC_LAUNCH(k_dispatch_count, 1, 1024, 0, c->stream, n, sel, E, off);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    DIC_LAUNCH(k_dispatch_rows, (E + 7) / 8, 256, 0, c->stream, n, sel, E, off, rows);
    DIC_LAUNCH_CHECK();
}

/* ---- SwiGLU ----------------------------------------------------------- */

/* select.c: g, u clamped; h = g / (1 + exp(-g)) * u; h = rw * h; bf16. */
static __device__ __forceinline__ float swiglu1(float gv, float uv, float limit, const float *rw, int m) {
    if (limit > 0.0f) {
        uv = fminf(fmaxf(uv, -limit), limit);
        gv = fminf(gv, limit);
    }
    float h = gv / (1.0f + dic_expf(-gv)) * uv;
    if (rw) h = rw[m] * h;
    return h;
}

static __global__ void k_swiglu(const uint16_t *gate, const uint16_t *up, size_t ld, int I, float limit,
                                const float *rw, uint16_t *out, size_t ldo, int vec) {
    DIC_PDL_ENTER();
    const int m = blockIdx.y;
    const int i0 = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i0 >= I) return;
    const uint16_t *g = gate + (size_t)m * ld, *u = up + (size_t)m * ld;
    uint16_t *o = out + (size_t)m * ldo;
    if (vec) {
        /* code size (a cold instruction cache in the decode step): one rolled loop over the 8 values;
         * g / u shift down 16 bits per value, the outputs shift in from the top (same values, same bytes) */
        uint4 gq = *(const uint4 *)(g + i0), uq = *(const uint4 *)(u + i0), oq = make_uint4(0, 0, 0, 0);
#pragma unroll 1
        for (int e = 0; e < 8; e++) {
            const float h = swiglu1(dic_bf16_to_f32((uint16_t)(gq.x & 0xFFFFu)), dic_bf16_to_f32((uint16_t)(uq.x & 0xFFFFu)),
                                    limit, rw, m);
            gq = make_uint4(__funnelshift_r(gq.x, gq.y, 16), __funnelshift_r(gq.y, gq.z, 16),
                            __funnelshift_r(gq.z, gq.w, 16), gq.w >> 16);
            uq = make_uint4(__funnelshift_r(uq.x, uq.y, 16), __funnelshift_r(uq.y, uq.z, 16),
                            __funnelshift_r(uq.z, uq.w, 16), uq.w >> 16);
            oq = make_uint4(__funnelshift_r(oq.x, oq.y, 16), __funnelshift_r(oq.y, oq.z, 16),
                            __funnelshift_r(oq.z, oq.w, 16), (oq.w >> 16) | ((uint32_t)dic_f32_to_bf16(h) << 16));
        }
        *(uint4 *)(o + i0) = oq;
    } else {
#pragma unroll 1
        for (int i = i0; i < i0 + 8 && i < I; i++)
            o[i] = dic_f32_to_bf16(swiglu1(dic_bf16_to_f32(g[i]), dic_bf16_to_f32(u[i]), limit, rw, m));
    }
}

extern "C" cudaError_t dic_swiglu(const dic_ctx *c, int M, const uint16_t *gate, const uint16_t *up, size_t ld, int I,
                                  float limit, const float *rw, uint16_t *out, size_t ldo) {
    if (M <= 0 || I <= 0) return cudaSuccess;
    int vec = I % 8 == 0 && ld % 8 == 0 && ldo % 8 == 0 && ((uintptr_t)gate & 15) == 0 && ((uintptr_t)up & 15) == 0 &&
              ((uintptr_t)out & 15) == 0;
    dim3 grid((unsigned)((I + 8 * 128 - 1) / (8 * 128)), (unsigned)M);
    DIC_LAUNCH(k_swiglu, grid, 128, 0, c->stream, gate, up, ld, I, limit, rw, out, ldo, vec);
    DIC_LAUNCH_CHECK();
}

/* ---- combine ---------------------------------------------------------- */

#define CB_THREADS 128

/* moe.c: y = 0 (fp32); for e = 0..E-1, for each entry routed to e in
 * increasing (token, slot): y[token] += fp32(eo); then y += fp32(shared);
 * out = bf16(y). Per token that is: its valid slots sorted by (expert,
 * slot), added in that order, then the shared expert. */
static __global__ void __launch_bounds__(CB_THREADS) k_combine(int k, const int *sel, int E, const uint16_t *eo,
                                                               size_t lde, const uint16_t *shared, size_t lds, int d,
                                                               uint16_t *out, size_t ldo, int vec) {
    DIC_PDL_ENTER();
    __shared__ int ord[32];
    __shared__ int nord;
    const int m = blockIdx.y;
    if (threadIdx.x == 0) {
        int n = 0;
        for (int s = 0; s < k; s++) {
            int e = sel[(size_t)m * k + s];
            if (e < 0 || e >= E) continue;
            int p = n++; /* insertion by (expert, slot); slots arrive increasing */
            while (p > 0 && sel[(size_t)m * k + ord[p - 1]] > e) {
                ord[p] = ord[p - 1];
                p--;
            }
            ord[p] = s;
        }
        nord = n;
    }
    __syncthreads();
    const int i0 = (blockIdx.x * CB_THREADS + threadIdx.x) * 8;
    if (i0 >= d) return;
    const int n = nord;
    float acc[8];
#pragma unroll
    for (int t = 0; t < 8; t++) acc[t] = 0.0f;
    uint16_t *o = out + (size_t)m * ldo;
    if (vec) {
        float v[8];
        for (int r = 0; r < n; r++) {
            uint4 q = *(const uint4 *)(eo + ((size_t)m * k + ord[r]) * lde + i0);
            uint32_t qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                v[2 * j] = dic_bf16_to_f32((uint16_t)(qw[j] & 0xFFFFu));
                v[2 * j + 1] = dic_bf16_to_f32((uint16_t)(qw[j] >> 16));
            }
#pragma unroll
            for (int t = 0; t < 8; t++) acc[t] = __fadd_rn(acc[t], v[t]);
        }
        if (shared) {
            uint4 q = *(const uint4 *)(shared + (size_t)m * lds + i0);
            uint32_t qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                acc[2 * j] = __fadd_rn(acc[2 * j], dic_bf16_to_f32((uint16_t)(qw[j] & 0xFFFFu)));
                acc[2 * j + 1] = __fadd_rn(acc[2 * j + 1], dic_bf16_to_f32((uint16_t)(qw[j] >> 16)));
            }
        }
        uint32_t ow[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            ow[j] = (uint32_t)dic_f32_to_bf16(acc[2 * j]) | ((uint32_t)dic_f32_to_bf16(acc[2 * j + 1]) << 16);
        *(uint4 *)(o + i0) = make_uint4(ow[0], ow[1], ow[2], ow[3]);
    } else {
        for (int t = 0; t < 8 && i0 + t < d; t++) {
            float a = 0.0f;
            for (int r = 0; r < n; r++) a = __fadd_rn(a, dic_bf16_to_f32(eo[((size_t)m * k + ord[r]) * lde + i0 + t]));
            if (shared) a = __fadd_rn(a, dic_bf16_to_f32(shared[(size_t)m * lds + i0 + t]));
            o[i0 + t] = dic_f32_to_bf16(a);
        }
    }
}

extern "C" cudaError_t dic_moe_combine(const dic_ctx *c, int M, int k, const int *sel, int E, const uint16_t *eo,
                                       size_t lde, const uint16_t *shared, size_t lds, int d, uint16_t *out,
                                       size_t ldo) {
    if (M <= 0 || d <= 0) return cudaSuccess;
    if (k <= 0 || k > 32) return cudaErrorInvalidValue;
    int vec = d % 8 == 0 && lde % 8 == 0 && ldo % 8 == 0 && ((uintptr_t)eo & 15) == 0 && ((uintptr_t)out & 15) == 0 &&
              (!shared || (lds % 8 == 0 && ((uintptr_t)shared & 15) == 0));
    dim3 grid((unsigned)((d + 8 * CB_THREADS - 1) / (8 * CB_THREADS)), (unsigned)M);
    DIC_LAUNCH(k_combine, grid, CB_THREADS, 0, c->stream, k, sel, E, eo, lde, shared, lds, d, out, ldo, vec);
    DIC_LAUNCH_CHECK();
}
