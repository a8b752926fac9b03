/*
 * dic_gemm_fp8w_gemv.cu — fast-mode (dic_ctx.batch_invariant == 0) block-diagonal GEMV over
 * FP8B weights (dic.h DIC_WFMT_FP8B: e4m3 bytes + e8m0 block scales, FP8 storage with BF16
 * math; the grouped wo_a) at M <= 4, one launch over the G groups:
 *   C[m][g*R + n] = sum_k A[m][g*gk + k] * w_g[n][k],  w = bf16(e4m3(byte) * 2^(s-127)),
 * the BF16 matrix's weights (dic_fp8w.cuh). Within the GEMM tolerance of the BF16 fast
 * kernels (dic_gemm_float_fast.cu), not bitwise: another fp32 summation order.
 *
 * Layout: a warp owns PAIRS of adjacent columns (n, n + 1) of one group and the whole K of
 * both (no split-K, no cross-warp reduction). A "slot" is 512 k: lane l reads the 16 e4m3
 * bytes k = 512 s + 16 l .. + 15 of each of the two columns with one 16-byte load
 * (ld.global.nc.L1::no_allocate: the weights stream past L1, where the activations stay);
 * a warp instruction reads 512 contiguous bytes of a column. A batch is U slots x 2 columns
 * (U = 4 at M = 1: 8 KB in flight per warp over the two batches; U = 2 at M = 2..4, for
 * registers: no spills at the 128 of 2 CTAs per SM), two
 * batches in flight per warp (double buffer), and the first two are issued BEFORE
 * griddepcontrol.wait (weights and scales are constants; the activations are read after
 * it). A warp walks ppw consecutive pairs (about 2 CTAs of 8 warps per SM: 8192 columns
 * -> 4096 pairs, 256 CTAs, 2 pairs per warp on 132 SMs).
 *
 * Arithmetic per lane, slot, column and row: the 16 bytes lie in one scale block (wblock % 16
 * == 0), so with s in [10, 246] (dic_fp8w.cuh fp8w_fast: every e4m3 * 2^(s-127) is then a
 * normal bf16 value, i.e. the BF16 matrix's weight exactly) the lane sums
 * p = e4m3(b_0) a_0 + ... + e4m3(b_15) a_15 in fp32 in increasing k (hardware e4m3 -> f16
 * pairs, f16 -> f32: exact) and adds p * 2^(s-127) with one fmaf (the product by a power of
 * two is exact; this is the sum of the BF16 weights' products in this order, up to the
 * products' own roundings). Other scales (subnormal or huge weights) take the host's
 * sequence per element (fp8w_one: the bf16 weight) and add p with multiplier 1.
 * Activations: bf16 from L1/L2 (__ldg, 2 x 16 bytes per row per slot, shared by the pair).
 * Reduction: acc over the slots in increasing k, then a fixed 32-lane xor butterfly
 * (16, 8, 4, 2, 1). No atomics: deterministic; every row's chain depends only on that row,
 * K and the lane map, so a row's bits do NOT depend on M, on the other rows or on the grid.
 */
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_fp8w.cuh"
#include "ops/cuda/dic_gemm_int.h"

#define W8_T 256    /* 8 warps */
#define W8_SLOT 512 /* k per slot: 32 lanes x 16 bytes */

static __device__ __forceinline__ uint4 w8_ld16(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}
static __device__ __forceinline__ float w8_lo(uint32_t x) { return __uint_as_float(x << 16); }
static __device__ __forceinline__ float w8_hi(uint32_t x) { return __uint_as_float(x & 0xFFFF0000u); }

/* 16 e4m3 bytes of v (low byte first, k increasing) -> their fp32 values (exact, unscaled) */
static __device__ __forceinline__ void w8_e4m3x16(const uint4 v, float *o) {
    const uint32_t x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint32_t p0 = cvt_e4m3x2(x[j] & 0xFFFFu), p1 = cvt_e4m3x2(x[j] >> 16);
        o[4 * j + 0] = fp8w_h2f(p0 & 0xFFFFu);
        o[4 * j + 1] = fp8w_h2f(p0 >> 16);
        o[4 * j + 2] = fp8w_h2f(p1 & 0xFFFFu);
        o[4 * j + 3] = fp8w_h2f(p1 >> 16);
    }
}
/* Division by a runtime divisor d (1 <= d <= INT32_MAX) of 0 <= n < 2^31 with a host-made magic
 * (the multiply-high method, e.g. PyTorch's IntDivider): q = (umulhi(n, m) + n) >> s. Index
 * arithmetic only (a div.s32 is ~20 SASS instructions; the kernel had ~30 of them). */
typedef struct w8_div {
    uint32_t m, s;
} w8_div;
static w8_div w8_div_make(int d) {
    w8_div r;
    uint32_t sh = 0;
    while (sh < 31 && (1u << sh) < (uint32_t)d) sh++;
    r.s = sh;
    r.m = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << sh) - (uint64_t)d)) / (uint64_t)d + 1u);
    return r;
}
static __device__ __forceinline__ int w8_q(int n, w8_div d) {
    return (int)((__umulhi((uint32_t)n, d.m) + (uint32_t)n) >> d.s);
}

/* MR: rows computed (M <= MR); U: slots per batch. P pairs in all; warp gw takes pairs
 * gw * ppw .. + ppw - 1 (< P). R: columns per group (even), gk: activation columns per group. */
template <int MR, int U>
static __global__ void __launch_bounds__(W8_T, 2)
    k_gemv_fp8w(int M, int K, const uint16_t *__restrict__ A, size_t lda, const __grid_constant__ dic_gv_tab tab,
                int R, int gk, int P, int ppw, float *C32, uint16_t *C16, size_t ldc, w8_div dnb,
                w8_div dR, w8_div dwb) {
    const int lane = threadIdx.x & 31;
    const int gw = blockIdx.x * (W8_T / 32) + (threadIdx.x >> 5);
    const int pw0 = gw * ppw, np = max(0, min(ppw, P - pw0));
    const int nsl = (K + W8_SLOT - 1) / W8_SLOT, nb = (nsl + U - 1) / U, T = np * nb;
    const int wb = tab.wb, kb = K / wb;

    /* batch t: pair pw0 + t / nb, slots (t % nb) * U .. + U - 1 */
    auto ld = [&](uint4 (&w)[2][U], uint32_t (&sc)[U], int t) {
        /* slots past K (and batches past T) keep stale registers: comp reads only slots with k < K
         * of batches t < T, all loaded here */
        if (t >= T) return;
        const int i = w8_q(t, dnb), h = t - i * nb;
        const int n = 2 * (pw0 + i), grp = w8_q(n, dR), nl = n - grp * R;
        const uint8_t *w0 = (const uint8_t *)tab.w[grp] + (size_t)nl * (size_t)K;
        const uint8_t *srow = tab.s[grp] + (size_t)w8_q(nl, dwb) * (size_t)kb; /* nl, nl + 1: one scale row */
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int k = (h * U + u) * W8_SLOT + lane * 16;
            if (k < K) {
                w[0][u] = w8_ld16(w0 + k);
                w[1][u] = w8_ld16(w0 + K + k);
                sc[u] = __ldg(srow + w8_q(k, dwb));
            }
        }
    };

    float acc[2][MR];
#pragma unroll
    for (int c = 0; c < 2; c++)
#pragma unroll
        for (int m = 0; m < MR; m++) acc[c][m] = 0.0f;

    /* Code size (decode steps run this kernel with a cold instruction cache): the slot loop is
     * rolled (slot u's registers are selected), and a slow-scale slot takes a rolled
     * per-element loop. Every chain performs the same fmaf sequence as the unrolled form:
     * p = fmaf(a_e, w_e, p) for e = 0..15, then acc = fmaf(p, mul, acc). */
    auto comp = [&](const uint4 (&w)[2][U], const uint32_t (&sc)[U], int t) {
        const int i = w8_q(t, dnb), h = t - i * nb;
        const int n = 2 * (pw0 + i), grp = w8_q(n, dR);
        const uint16_t *Ag = A + (size_t)grp * (size_t)gk;
#pragma unroll 1
        for (int u = 0; u < U; u++) {
            const int k = (h * U + u) * W8_SLOT + lane * 16;
            if (k < K) { /* lane-divergent only at a K tail */
                uint4 x0 = w[0][0], x1 = w[1][0];
                uint32_t s = sc[0];
#pragma unroll
                for (int v = 1; v < U; v++)
                    if (u == v) x0 = w[0][v], x1 = w[1][v], s = sc[v];
                if (fp8w_fast(s)) {
                    const float mul = __uint_as_float(s << 23); /* 2^(s-127), normal */
                    float wf[2][16];
                    w8_e4m3x16(x0, wf[0]);
                    w8_e4m3x16(x1, wf[1]);
#pragma unroll
                    for (int m = 0; m < MR; m++) {
                        if (m < M) {
                            const uint16_t *ar = Ag + (size_t)m * lda + k;
                            const uint4 a0 = __ldg((const uint4 *)ar), a1 = __ldg((const uint4 *)(ar + 8));
                            const uint32_t aw[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
                            for (int c = 0; c < 2; c++) {
                                float p = 0.0f;
#pragma unroll
                                for (int e = 0; e < 8; e++) {
                                    p = fmaf(w8_lo(aw[e]), wf[c][2 * e], p);
                                    p = fmaf(w8_hi(aw[e]), wf[c][2 * e + 1], p);
                                }
                                acc[c][m] = fmaf(p, mul, acc[c][m]);
                            }
                        }
                    }
                } else { /* rare: the host's sequence per weight (fp8w_one), multiplier 1 */
                    float p[2][MR];
#pragma unroll
                    for (int c = 0; c < 2; c++)
#pragma unroll
                        for (int m = 0; m < MR; m++) p[c][m] = 0.0f;
#pragma unroll 1
                    for (int e = 0; e < 16; e++) {
                        const int j = e >> 2, sh = 8 * (e & 3);
                        const uint32_t d0 = j == 0 ? x0.x : j == 1 ? x0.y : j == 2 ? x0.z : x0.w;
                        const uint32_t d1 = j == 0 ? x1.x : j == 1 ? x1.y : j == 2 ? x1.z : x1.w;
                        const float wv[2] = {fp8w_one((d0 >> sh) & 0xFFu, s), fp8w_one((d1 >> sh) & 0xFFu, s)};
#pragma unroll
                        for (int m = 0; m < MR; m++) {
                            if (m < M) {
                                const float a = __uint_as_float((uint32_t)__ldg(Ag + (size_t)m * lda + k + e) << 16);
#pragma unroll
                                for (int c = 0; c < 2; c++) p[c][m] = fmaf(a, wv[c], p[c][m]);
                            }
                        }
                    }
#pragma unroll
                    for (int c = 0; c < 2; c++)
#pragma unroll
                        for (int m = 0; m < MR; m++)
                            if (m < M) acc[c][m] = fmaf(p[c][m], 1.0f, acc[c][m]);
                }
            }
        }
        if (h == nb - 1) { /* the pair's last batch (warp-uniform): reduce, store, restart */
#pragma unroll
            for (int c = 0; c < 2; c++)
#pragma unroll
                for (int m = 0; m < MR; m++) {
                    float v = acc[c][m];
                    v += __shfl_xor_sync(0xFFFFFFFFu, v, 16);
                    v += __shfl_xor_sync(0xFFFFFFFFu, v, 8);
                    v += __shfl_xor_sync(0xFFFFFFFFu, v, 4);
                    v += __shfl_xor_sync(0xFFFFFFFFu, v, 2);
                    v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
                    if (lane == c * MR + m && m < M) {
                        const size_t o = (size_t)m * ldc + (size_t)(n + c);
                        if (C32) C32[o] = v;
                        else C16[o] = dic_f32_to_bf16(v);
                    }
                    acc[c][m] = 0.0f;
                }
        }
    };

    uint4 wa[2][U] = {}, wbuf[2][U] = {};
    uint32_t sa[U] = {}, sbuf[U] = {};
    ld(wa, sa, 0);
    ld(wbuf, sbuf, 1);
    DIC_PDL_ENTER();
    for (int t = 0; t < T; t += 2) {
        comp(wa, sa, t);
        ld(wa, sa, t + 2);
        if (t + 1 < T) {
            comp(wbuf, sbuf, t + 1);
            ld(wbuf, sbuf, t + 3);
        }
    }
}

static int g_w8_off; /* bench / tests: 1 = dic_gemm_blockdiag keeps the bitwise FP8B GEMV */
extern "C" void dic_gemm_fp8w_gemv_enable(int on) { g_w8_off = !on; }
extern "C" int dic_gemm_fp8w_gemv_enabled(void) { return !g_w8_off; }

extern "C" cudaError_t dic_gemm_fp8w_gemv_g(cudaStream_t st, int num_sms, int M, const uint16_t *A, size_t lda,
                                            const dic_wmat *W, int G, int gk, float *C32, uint16_t *C16,
                                            size_t ldc) {
    if (M <= 0 || G <= 0) return cudaSuccess;
    if (M > 4 || G > DIC_GV_MAXG || W->fmt != DIC_WFMT_FP8B) return cudaErrorInvalidValue;
    const int R = W->n, K = W->k, wb = W->wblock;
    if (R <= 0 || R % 2 || K <= 0 || wb <= 0 || wb % 16 || K % wb || ((uintptr_t)A & 15) || lda % 8 || gk % 8)
        return cudaErrorInvalidValue;
    dic_gv_tab tab;
    if (dic_fp8b_tab(W, G, &tab) != cudaSuccess) return cudaErrorInvalidValue;
    /* about 2 CTAs (16 warps) per SM, each warp ppw whole pairs */
    const int P = G * R / 2, nsm = num_sms > 0 ? num_sms : 132, target = 2 * nsm * (W8_T / 32);
    const int ppw = (P + target - 1) / target;
    const unsigned grid = (unsigned)((P + (W8_T / 32) * ppw - 1) / ((W8_T / 32) * ppw));
    void (*fn)(int, int, const uint16_t *, size_t, const dic_gv_tab, int, int, int, int, float *, uint16_t *,
               size_t, w8_div, w8_div, w8_div) = M == 1 ? k_gemv_fp8w<1, 4> : M == 2 ? k_gemv_fp8w<2, 2> : k_gemv_fp8w<4, 2>;
    const int U = M == 1 ? 4 : 2, nb = ((K + W8_SLOT - 1) / W8_SLOT + U - 1) / U; /* the kernel's nb */
    DIC_LAUNCH(fn, grid, W8_T, 0, st, M, K, A, lda, tab, R, gk, P, ppw, C32, C16, ldc, w8_div_make(nb),
               w8_div_make(R), w8_div_make(wb));
    DIC_LAUNCH_CHECK();
}
