/*
 * dic_moe_route.cu — batched MoE routing, dispatch with inverse, gather and
 * combine of the device-shaped forward (ops.h di_route_rows,
 * di_moe_dispatch, di_moe_gather, di_moe_combine; src/ops/cpu/moe_route.c).
 * Dispatch, gather and combine are bit-identical to the CPU; the router
 * shares dic_route's softplus (dic_moe.cu: each libm step evaluated in double
 * and rounded once), so its scores can differ from glibc's by 1 ulp.
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"
#include "ops/cuda/dic_moe_int.h"

static __global__ void k_div_f32(float *v, size_t n, float d) {
    DIC_PDL_ENTER();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += step) v[i] = __fdiv_rn(v[i], d);
}

extern "C" cudaError_t dic_route_rows(const dic_ctx *c, int M, float *logits, int E, float temp, const float *bias,
                                      const int32_t *tid2eid, const int32_t *tokens, int k, float route_scale,
                                      float norm_eps, int normalize, int *sel, float *w) {
    if (M <= 0) return cudaSuccess;
    if (temp != 1.0f) { /* the logits divided in place, as the CPU */
        size_t n = (size_t)M * (size_t)E, blocks = (n + 255) / 256;
        if (blocks > 65536) blocks = 65536;
        DIC_LAUNCH(k_div_f32, (unsigned)blocks, 256, 0, c->stream, logits, n, temp);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    if (tid2eid && !tokens) return cudaErrorInvalidValue;
    return dic_route_ex(c, M, logits, E, bias, tid2eid, tid2eid ? tokens : NULL, k, route_scale, norm_eps, normalize,
                        sel, w);
}

/* inv[rows[i]] = i for the dispatched entries i < off[E]. */
static __global__ void k_dispatch_inv(int n, const int *off, int E, const int *rows, int *inv) {
    DIC_PDL_ENTER();
    const int cnt = min(off[E], n);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < cnt; i += gridDim.x * blockDim.x) inv[rows[i]] = i;
}

extern "C" cudaError_t dic_moe_dispatch_inv(const dic_ctx *c, int M, int k, const int *sel, int E, int *off,
                                            int *rows, int *inv) {
    cudaError_t e = dic_moe_dispatch(c, M, k, sel, E, off, rows);
    if (e != cudaSuccess) return e;
    const int n = M > 0 ? M * k : 0;
    if (n <= 0) return cudaSuccess;
    int blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    DIC_LAUNCH(k_dispatch_inv, blocks, 256, 0, c->stream, n, off, E, rows, inv);
    DIC_LAUNCH_CHECK();
}

/* One CTA per entry (grid-stride): xe[i] = xn[rows[i] / k], erw[i] = rw[rows[i]]. */
static __global__ void k_moe_gather(int n_max, const int *off, int E, const int *rows, int k, const uint16_t *xn,
                                    size_t ldx, int d, const float *rw, uint16_t *xe, size_t lde, float *erw) {
    DIC_PDL_ENTER();
    const int n = min(off[E], n_max);
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
        const int r = rows[i];
        const uint16_t *s = xn + (size_t)(r / k) * ldx;
        uint16_t *o = xe + (size_t)i * lde;
        if (((uintptr_t)s & 15) == 0 && ((uintptr_t)o & 15) == 0 && d % 8 == 0) {
            for (int j = threadIdx.x; j < d / 8; j += blockDim.x) ((uint4 *)o)[j] = ((const uint4 *)s)[j];
        } else {
            for (int j = threadIdx.x; j < d; j += blockDim.x) o[j] = s[j];
        }
        if (threadIdx.x == 0) erw[i] = rw[r];
    }
}

extern "C" cudaError_t dic_moe_gather(const dic_ctx *c, int n_max, const int *off, int E, const int *rows, int k,
                                      const uint16_t *xn, size_t ldx, int d, const float *rw, uint16_t *xe,
                                      size_t lde, float *erw) {
    if (n_max <= 0) return cudaSuccess;
    if (k <= 0 || E <= 0) return cudaErrorInvalidValue;
    int blocks = n_max < 65535 ? n_max : 65535;
    DIC_LAUNCH(k_moe_gather, blocks, 128, 0, c->stream, n_max, off, E, rows, k, xn, ldx, d, rw, xe, lde, erw);
    DIC_LAUNCH_CHECK();
}

/* y[m] = 0, then += fp32(eo[at]) for row m's entries in increasing inv
 * (the CPU's insertion sort of at most 64 slots). One thread per column. */
#define CI_THREADS 256
#define CI_KMAX 64

static __global__ void __launch_bounds__(CI_THREADS) k_combine_inv(int k, const int *inv, const uint16_t *eo,
                                                                   size_t ldo, int d, float *y) {
    DIC_PDL_ENTER();
    __shared__ int at[CI_KMAX];
    const int m = blockIdx.y;
    const int kk = k < CI_KMAX ? k : CI_KMAX;
    if (threadIdx.x == 0)
        for (int i = 0; i < kk; i++) {
            int v = inv[(size_t)m * k + i], j = i;
            for (; j > 0 && at[j - 1] > v; j--) at[j] = at[j - 1];
            at[j] = v;
        }
    __syncthreads();
    const int col = blockIdx.x * CI_THREADS + threadIdx.x;
    if (col >= d) return;
    float acc = 0.0f;
    for (int i = 0; i < kk; i++) acc = __fadd_rn(acc, dic_bf16_to_f32(eo[(size_t)at[i] * ldo + col]));
    y[(size_t)m * d + col] = acc;
}

extern "C" cudaError_t dic_moe_combine_inv(const dic_ctx *c, int M, int k, const int *inv, const uint16_t *eo,
                                           size_t ldo, int d, float *y) {
    if (M <= 0 || d <= 0) return cudaSuccess;
    if (k < 0 || M > 65535) return cudaErrorInvalidValue;
    dim3 grid((unsigned)((d + CI_THREADS - 1) / CI_THREADS), (unsigned)M);
    DIC_LAUNCH(k_combine_inv, grid, CI_THREADS, 0, c->stream, k, inv, eo, ldo, d, y);
    DIC_LAUNCH_CHECK();
}
