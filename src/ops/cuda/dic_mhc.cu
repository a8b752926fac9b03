/*
 * dic_mhc.cu — manifold-constrained hyper-connections (docs/architecture.md §4.2,
 * hc = 4), the device versions of src/ops/cpu/mhc.c. Every output element
 * performs the CPU's fp32 operations in the CPU's order (separate multiplies
 * and adds: -fmad=false), so results are bit-identical.
 *
 * The one reduction, the double sum of squares in dic_hc_scale_mixes, runs in
 * a fixed tree order here and sequentially on the CPU. bf16 squares are exact
 * in double (16-bit significands) and every partial sum is exact while the
 * row's largest |x| / smallest non-zero |x| < ~2^11 (hcd <= 2^15); beyond
 * that only squares under 2^-37 of the running sum lose bits, so both sums
 * agree to ~2^-50 relative and the fp32 value (float)(ss / hcd) they round to
 * is the same unless the double lands within that distance of an fp32
 * rounding boundary (~2^-26 per row). The GPU test counts such rows.
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"
#include "ops/cuda/dic_mhc_int.cuh"

#include <stdlib.h>
#include <string.h>

/* ---- scale_mixes: one CTA per row ------------------------------------- */

#define SM_THREADS 256

static __global__ void __launch_bounds__(SM_THREADS) k_scale_mixes(const uint16_t *R, size_t ldr, int hcd, float eps,
                                                                   const float *in, int nmix, float *out, int vec) {
    DIC_PDL_ENTER();
    const int m = blockIdx.x;
    const uint16_t *r = R + (size_t)m * ldr;
    double ss = 0.0;
    if (vec) { /* 8 bf16 per 16-byte load */
        const uint4 *r4 = (const uint4 *)r;
        for (int i = threadIdx.x; i < hcd / 8; i += SM_THREADS) {
            uint4 q = r4[i];
            uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                double a = dic_bf16_to_f32((uint16_t)(w[j] & 0xFFFFu));
                double b = dic_bf16_to_f32((uint16_t)(w[j] >> 16));
                ss = __dadd_rn(ss, __dmul_rn(a, a));
                ss = __dadd_rn(ss, __dmul_rn(b, b));
            }
        }
    } else {
        for (int i = threadIdx.x; i < hcd; i += SM_THREADS) {
            double a = dic_bf16_to_f32(r[i]);
            ss = __dadd_rn(ss, __dmul_rn(a, a));
        }
    }
    /* fixed-shape tree: warp butterfly, then warp 0 over the 8 warp sums */
    for (int o = 16; o > 0; o >>= 1) ss = __dadd_rn(ss, __shfl_xor_sync(0xFFFFFFFFu, ss, o));
    __shared__ double part[SM_THREADS / 32];
    __shared__ float rs_sh;
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        double v = threadIdx.x < SM_THREADS / 32 ? part[threadIdx.x] : 0.0;
        for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
        if (threadIdx.x == 0) {
            rs_sh = hc_mix_rs(v, hcd, eps);
        }
    }
    __syncthreads();
    const float rs = rs_sh;
    for (int j = threadIdx.x; j < nmix; j += SM_THREADS)
        out[(size_t)m * nmix + j] = __fmul_rn(in[(size_t)m * nmix + j], rs);
}

extern "C" cudaError_t dic_hc_scale_mixes(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int hcd, float eps,
                                          const float *mixes_in, int nmix, float *mixes_out) {
    if (M <= 0) return cudaSuccess;
    int vec = hcd % 8 == 0 && ldr % 8 == 0 && ((uintptr_t)R & 15) == 0;
    DIC_LAUNCH(k_scale_mixes, M, SM_THREADS, 0, c->stream, R, ldr, hcd, eps, mixes_in, nmix, mixes_out, vec);
    DIC_LAUNCH_CHECK();
}

/* ---- Sinkhorn rows (k_sinkhorn): sk_group per 16-lane group (dic_mhc_int.cuh) ---- */

#define SK_ROWS_PER_CTA 8 /* 128 threads */

static __global__ void __launch_bounds__(16 * SK_ROWS_PER_CTA)
    k_sinkhorn(int M, const float *mixes, const float *scale3, const float *base, int iters, float eps, float *pre,
               float *post, float *comb) {
    DIC_PDL_ENTER();
    const int lane = threadIdx.x & 15;
    const int m0 = blockIdx.x * SK_ROWS_PER_CTA + (threadIdx.x >> 4);
    const int m = m0 < M ? m0 : M - 1; /* surplus groups redo the last row, write nothing */
    sk_group(lane, mixes + (size_t)m * 24, scale3, base, iters, eps, m0 < M, pre + (size_t)m * HC,
             post + (size_t)m * HC, comb + (size_t)m * HC * HC);
}

extern "C" cudaError_t dic_hc_sinkhorn_rows(const dic_ctx *c, int M, const float *mixes, const float *scale3,
                                            const float *base, int iters, float eps, float *pre, float *post,
                                            float *comb) {
    if (M <= 0) return cudaSuccess;
    DIC_LAUNCH(k_sinkhorn, (M + SK_ROWS_PER_CTA - 1) / SK_ROWS_PER_CTA, 16 * SK_ROWS_PER_CTA, 0, c->stream, 
        M, mixes, scale3, base, iters, eps, pre, post, comb);
    DIC_LAUNCH_CHECK();
}

/* ---- collapse / expand: 8 columns per thread, grid (column blocks, M) --- */

static __global__ void k_collapse(const float *pre, const uint16_t *R, size_t ldr, int d, uint16_t *y, size_t ldy,
                                  int vec) {
    DIC_PDL_ENTER();
    const int m = blockIdx.y;
    const int i0 = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i0 >= d) return;
    float p[HC];
#pragma unroll
    for (int k = 0; k < HC; k++) p[k] = pre[(size_t)m * HC + k];
    const uint16_t *r = R + (size_t)m * ldr;
    uint16_t *yo = y + (size_t)m * ldy;
    if (vec) {
        float a[HC][8], o[8];
#pragma unroll
        for (int k = 0; k < HC; k++) unpack8(*(const uint4 *)(r + (size_t)k * d + i0), a[k]);
#pragma unroll
        for (int t = 0; t < 8; t++) o[t] = collapse1(p, a[0][t], a[1][t], a[2][t], a[3][t]);
        *(uint4 *)(yo + i0) = pack8(o);
    } else {
        for (int i = i0; i < i0 + 8 && i < d; i++)
            yo[i] = dic_f32_to_bf16(collapse1(p, dic_bf16_to_f32(r[i]), dic_bf16_to_f32(r[(size_t)d + i]),
                                              dic_bf16_to_f32(r[2 * (size_t)d + i]),
                                              dic_bf16_to_f32(r[3 * (size_t)d + i])));
    }
}

extern "C" cudaError_t dic_hc_collapse(const dic_ctx *c, int M, const float *pre, const uint16_t *R, size_t ldr,
                                       int d, uint16_t *y, size_t ldy) {
    if (M <= 0 || d <= 0) return cudaSuccess;
    int vec = d % 8 == 0 && ldr % 8 == 0 && ldy % 8 == 0 && ((uintptr_t)R & 15) == 0 && ((uintptr_t)y & 15) == 0;
    dim3 grid((unsigned)((d + 8 * 128 - 1) / (8 * 128)), (unsigned)M);
    DIC_LAUNCH(k_collapse, grid, 128, 0, c->stream, pre, R, ldr, d, y, ldy, vec);
    DIC_LAUNCH_CHECK();
}

/* Each thread reads all four copies at its columns before writing them, so
 * Rout may equal R (in place), as on the CPU. */
static __global__ void k_expand(const float *post, const float *comb, const uint16_t *f, size_t ldf,
                                const uint16_t *R, uint16_t *Rout, size_t ldr, int d, int vec) {
    DIC_PDL_ENTER();
    const int m = blockIdx.y;
    const int i0 = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i0 >= d) return;
    float po[HC], cb[HC * HC];
#pragma unroll
    for (int k = 0; k < HC; k++) po[k] = post[(size_t)m * HC + k];
#pragma unroll
    for (int k = 0; k < HC * HC; k++) cb[k] = comb[(size_t)m * HC * HC + k];
    const uint16_t *r = R + (size_t)m * ldr, *fr = f + (size_t)m * ldf;
    uint16_t *o = Rout + (size_t)m * ldr;
    if (vec) {
        float a[HC][8], fv[8], res[HC][8];
#pragma unroll
        for (int k = 0; k < HC; k++) unpack8(*(const uint4 *)(r + (size_t)k * d + i0), a[k]);
        unpack8(*(const uint4 *)(fr + i0), fv);
#pragma unroll
        for (int t = 0; t < 8; t++) {
            float rv[HC] = {a[0][t], a[1][t], a[2][t], a[3][t]}, out[HC];
            expand1(po, cb, fv[t], rv, out);
#pragma unroll
            for (int k = 0; k < HC; k++) res[k][t] = out[k];
        }
#pragma unroll
        for (int k = 0; k < HC; k++) *(uint4 *)(o + (size_t)k * d + i0) = pack8(res[k]);
    } else {
        for (int i = i0; i < i0 + 8 && i < d; i++) {
            float rv[HC], out[HC];
#pragma unroll
            for (int j = 0; j < HC; j++) rv[j] = dic_bf16_to_f32(r[(size_t)j * d + i]);
            expand1(po, cb, dic_bf16_to_f32(fr[i]), rv, out);
#pragma unroll
            for (int k = 0; k < HC; k++) o[(size_t)k * d + i] = dic_f32_to_bf16(out[k]);
        }
    }
}

extern "C" cudaError_t dic_hc_expand(const dic_ctx *c, int M, const float *post, const float *comb,
                                     const uint16_t *f, size_t ldf, const uint16_t *R, uint16_t *Rout, size_t ldr,
                                     int d) {
    if (M <= 0 || d <= 0) return cudaSuccess;
    int vec = d % 8 == 0 && ldr % 8 == 0 && ldf % 8 == 0 && ((uintptr_t)R & 15) == 0 && ((uintptr_t)Rout & 15) == 0 &&
              ((uintptr_t)f & 15) == 0;
    dim3 grid((unsigned)((d + 8 * 128 - 1) / (8 * 128)), (unsigned)M);
    DIC_LAUNCH(k_expand, grid, 128, 0, c->stream, post, comb, f, ldf, R, Rout, ldr, d, vec);
    DIC_LAUNCH_CHECK();
}

/* ---- fused transition (ops.h di_hc_transition, both modes) -------------
 * The work, in the layout of its first kernel (k_transition, now in lab/mhc; k_transition2 below is the
 * product's, docs/kernels/mhc.md). One launch: grid (S = d / HT_CW column slices, row tiles of HT_MT rows).
 * A CTA owns columns [i0, i0 + 32) of all four copies of its tile's rows:
 *   A  expand them in place (k_expand's arithmetic, bf16 R written back), keep
 *      the bf16 values in shared memory, and the double sum of their squares;
 *   B  the 24 partial dot products with its fn slice (12 KB, loaded before the
 *      PDL wait: weights), fp32 fmaf chain of 4 per lane, then a fixed 32-lane
 *      xor tree; partials to scratch;
 *   the last CTA of a tile to arrive (atomic counter, reset by that CTA) then
 *   C  adds the partials slice by slice in a fixed order (lane j sums slices
 *      j, j + 32, ..., then a fixed xor tree) and scales them
 *      (k_scale_mixes' arithmetic); the double sums of squares likewise: bf16
 *      squares are exact in double, so the order changes nothing except in
 *      the rare cases dic_hc_scale_mixes' header describes;
 *   D  Sinkhorn (sk_group, k_sinkhorn's code), pre / pre_in;
 *   E  collapse (k_collapse's arithmetic) and RMSNorm of the rows (k_rmsnorm's
 *      arithmetic and its ambiguity fallback: the CPU's bits).
 * So only the fp32 sums of the mixes differ from the unfused kernels (F32 GEMM
 * tolerance); the slicing depends on d only, so a row's bits do not depend on
 * M or on the other rows. Deterministic: no float atomics. The counters are
 * module state shared by every launch; launches on one stream are serialised
 * by the PDL wait (every kernel waits for its predecessor before touching
 * memory), which is the only way the engine launches (one stream). */

/* ---- fused transition, second version (k_transition2) -------------------
 * The same work and the same rounding points as k_transition, with a shorter
 * serial tail (docs/kernels/mhc.md):
 *   - CW columns per CTA (16, 32 or 64: 256, 128 or 64 CTAs at d = 4096) and
 *     a.mtr rows per tile (1, 2 or 4); the fn slice is still loaded before
 *     the PDL wait (weights: no kernel writes them);
 *   - the last CTA of a tile loads all the tile's partials at once (every
 *     thread up to 3 x 16 independent L2 loads, one round trip) instead of
 *     output by output; output o of the tile is summed by L lanes (L = 8, 16
 *     or 32 by S = d / CW only): lane l adds slices l, l + L, ... in order,
 *     then a fixed xor tree over the L lanes; the double sums of squares the
 *     same way over 64 lanes;
 *   - pre needs only the 4 sigmoids: with a.ovl, warps 0-1 run the Sinkhorn
 *     (post, comb) while warps 2-7 compute pre (same expression as sk_group,
 *     sk_pre1), keep it in shared memory (no global round trip) and run the
 *     collapse + RMSNorm; without a.ovl the Sinkhorn runs first and all 8
 *     warps do the collapse + RMSNorm;
 *   - the RMSNorm's sum of squares takes k_rmsnorm's decision (fixed tree,
 *     then the CPU order where the rounding is ambiguous), so x / xn have the
 *     sequence's bits whatever the thread layout.
 * Mixes: the fp32 order depends on CW and d only (not on M, the tile rows or
 * a.ovl), so a row's bits do not depend on M, and variants with the same CW
 * give the same bits. Deterministic (no float atomics); counters as above. */

#define H2_T 256
#define H2_EV 4 /* collapse items (16-byte vectors) in flight per thread */

static __device__ unsigned int g_ht2_cnt[HT_MAXT];


/* libm expf stand-in of dic_hc_head_pre (dic_elem_model.cu): exp in double, rounded once. */
static __device__ __forceinline__ float h2_expf_cr(float x) { return __double2float_rn(exp((double)x)); }

/* The head's pre_k = sigmoid(mix_k * scale0 + base_k) + eps: k_hc_head_pre's expression. OOL = 1: the division
 * through dic_fdiv_ool (code size: the lean head's one copy); the same operation. */
template <int OOL = 0>
static __device__ __forceinline__ float h2_head_pre1(const float *mx, int k, float scale0, const float *base,
                                                     float eps) {
    const float z = __fadd_rn(__fmul_rn(mx[k], scale0), base[k]);
    const float den = __fadd_rn(1.0f, h2_expf_cr(-z));
    return __fadd_rn(OOL ? dic_fdiv_ool(1.0f, den) : __fdiv_rn(1.0f, den), eps);
}

/* NMIX = HT_NMIX (24): the transition. NMIX = HC (4): the V4 output head (dic_hc_head: mixes, scale_mixes,
 * head_pre in place of the Sinkhorn; pre written; collapse with it). NMIX = 0: the V4.1 output head (no mixes:
 * collapse with the carried a.pre_in, nothing written but R, x and xn). The head variants take the whole
 * block of E (no Sinkhorn warps). */
/* ET = 1 (lab/mhc's variant 8, the transition only, NMIX = HT_NMIX; no product launch takes it): the same arithmetic with a
 * shorter dependent chain after the PDL wait:
 *   - before the wait, each CTA prefetches its slice of the norm weights into L2 (weights);
 *   - the arrival is cooperative_groups' grid-sync pattern: __syncthreads, then thread 0 alone fences, adds and
 *     (last CTA) fences again, __syncthreads (bar.sync orders the other threads' partial stores before thread
 *     0's fence: cumulativity), instead of a fence in every thread before and after;
 *   - the last CTA issues the tile's R rows (the collapse's input, written by every CTA's expand) into dynamic
 *     shared memory with cp.async.cg right at the handoff, in flight together with the partial loads (one L2
 *     round trip for both instead of two in a row); the host takes ET only when mt * HC * d * 2 <= 32 KB, so
 *     E always runs in one pass;
 *   - E loads its norm weights into registers at its start (beside the collapse) instead of after the
 *     RMSNorm's scale (one dependent round trip less at the end);
 *   - the Sinkhorn's sums skip the leading 0 + (sk_sum4n: same bits).
 * Bits: the same as ET = 0 with CW = 32 (the mixes' order, pre, post, comb, x, xn), so variant 8 equals 1, 2, 5,
 * 6, 7 bit for bit. */
extern __shared__ __align__(16) uint8_t h2_dsm[];

/* The tile row of item it < mt * nv (nv items per row): with at most 2 rows per tile (LEAN) a compare instead of
 * the integer division by the run-time nv (code size: ~20 instructions per division site); the same value. */
template <int MTX> static __device__ __forceinline__ int h2_row(int it, int nv) {
    return MTX == 2 ? (int)(it >= nv) : it / nv;
}

/* LEAN = 1: the decode step's instantiation (code size: docs/kernels/small-kernels.md): at most 2 rows per tile (the host's
 * mtr <= 2: ht_auto_mt at M <= 4) and, in the transition, the Sinkhorn beside the collapse (a.ovl) fixed at
 * compile time; the same operations in the same order as LEAN = 0 (the same bits). */
template <int CW, int NMIX, int ET = 0, int LEAN = 0>
static __global__ void __launch_bounds__(H2_T, 2) k_transition2(const ht_args a) {
    constexpr bool HEAD = NMIX != HT_NMIX;
    constexpr int MTX = LEAN ? 2 : HT_MT; /* rows per tile at most */
    constexpr int LPM = CW < 32 ? CW : 32; /* lanes per mix in B */
    constexpr int G = CW / LPM;            /* float4 of fn per lane and mix */
    constexpr int MPR = H2_T / LPM;        /* mixes per round */
    constexpr int NU = (NMIX + MPR - 1) / MPR;
    constexpr int NUA = NU > 0 ? NU : 1;
    constexpr int NMA = NMIX > 0 ? NMIX : 1;
    constexpr int CV = CW / 4; /* float4 per copy */
    __shared__ __align__(16) float sr[HT_MT][HC * CW];
    __shared__ float smix[HT_MT][NMA];
    __shared__ float spre[HT_MT][HC];
    __shared__ double sss[H2_T / 16];
    __shared__ double sred[H2_T / 32][HT_MT];
    __shared__ float srs[HT_MT];
    __shared__ int last_sh;
    const unsigned full = 0xFFFFFFFFu;
    const int t = threadIdx.x, lane = t & 31;
    const int S = gridDim.x, s = blockIdx.x, tile = blockIdx.y;
    const int d = a.d, hcd = HC * d;
    const int i0 = s * CW, r0 = tile * a.mtr, m0 = r0; /* r0: first row of the tile in this launch */
    const int mt = min(a.mtr, a.M - m0);
    /* the fn slice: mix n = u * MPR + t / LPM, float4 e = (t % LPM) * G + g -> copy e / CV, columns 4 (e % CV) */
    const int li = t % LPM, ng = t / LPM;
    float4 wv[NUA][G];
#pragma unroll
    for (int u = 0; u < NU; u++)
#pragma unroll
        for (int g = 0; g < G; g++) {
            const int n = u * MPR + ng, e = li * G + g;
            wv[u][g] = n < NMIX ? __ldg((const float4 *)(a.fn + (size_t)n * hcd + (size_t)(e / CV) * d + i0 +
                                                            4 * (e % CV)))
                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    if (ET && a.norm_w && t == 0 && tile == 0) /* this slice of the norm weights into L2 (CW * 4 bytes) */
        asm volatile("prefetch.global.L2 [%0];" ::"l"(a.norm_w + i0));
    DIC_PDL_ENTER();

    /* A: thread = (row t / CW, column t % CW): expand in place, bf16 values to shared, sum of squares */
    {
        constexpr int SG = CW < 32 ? CW : 32; /* lanes of one xor tree */
        const int mm = t / CW, c = t % CW, i = i0 + c;
        double ss = 0.0;
        if (mm < mt) {
            const int m = m0 + mm;
            uint16_t *r = a.R + (size_t)m * a.ldr;
            float rv[HC];
            ht_expand_col(a, m, i, d, r, rv);
#pragma unroll
            for (int j = 0; j < HC; j++) {
                sr[mm][j * CW + c] = rv[j];
                const double v = rv[j];
                ss = __dadd_rn(ss, __dmul_rn(v, v));
            }
        }
        if (t < MTX * CW) { /* whole groups of SG lanes */
#pragma unroll 1
            for (int o = SG / 2; o > 0; o >>= 1) ss = __dadd_rn(ss, __shfl_xor_sync(full, ss, o));
            if (t % SG == 0) sss[t / SG] = ss;
        }
    }
    __syncthreads();
    if (NMIX > 0 && t < mt) { /* the row's sum of squares over its CW columns */
        const double v = CW > 32 ? __dadd_rn(sss[2 * t], sss[2 * t + 1]) : sss[t];
        a.ssp[(size_t)(r0 + t) * S + s] = v;
    }

    /* B: partial mixes, fmaf chain over the lane's 4 G values, fixed xor tree over LPM lanes; the rounds u rolled
     * (code size), their fn values selected from the register array (not indexed: no local memory) */
#pragma unroll 1
    for (int u = 0; u < NU; u++) {
        const int n = u * MPR + ng;
        if (u * MPR >= NMIX || (NU * MPR > NMIX && u == NU - 1 && (u * MPR + (t & ~31) / LPM) >= NMIX))
            continue; /* whole warps past the last mix */
        float4 wu[G];
#pragma unroll
        for (int x = 0; x < NUA; x++)
            if (x == u) {
#pragma unroll
                for (int g = 0; g < G; g++) wu[g] = wv[x][g];
            }
#pragma unroll 1
        for (int mm = 0; mm < mt; mm++) {
            float acc = 0.0f;
#pragma unroll
            for (int g = 0; g < G; g++) {
                const int e = li * G + g;
                const float4 r4 = *(const float4 *)&sr[mm][(e / CV) * CW + 4 * (e % CV)];
                acc = g == 0 ? __fmul_rn(wu[g].x, r4.x) : fmaf(wu[g].x, r4.x, acc);
                acc = fmaf(wu[g].y, r4.y, acc);
                acc = fmaf(wu[g].z, r4.z, acc);
                acc = fmaf(wu[g].w, r4.w, acc);
            }
#pragma unroll 1
            for (int o = LPM / 2; o > 0; o >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(full, acc, o));
            if (li == 0 && n < NMIX) a.part[((size_t)(r0 + mm) * NMIX + n) * S + s] = acc;
        }
    }

    /* arrival: the last CTA of the tile goes on */
    if (ET) { /* cooperative_groups' grid-sync pattern: one fence on each side, by thread 0 */
        __syncthreads();
        if (t == 0) {
            __threadfence();
            const unsigned prev = atomicAdd(&g_ht2_cnt[tile], 1u);
            last_sh = prev == (unsigned)S - 1;
            if (last_sh) {
                g_ht2_cnt[tile] = 0; /* ready for the next launch */
                __threadfence();
            }
        }
        __syncthreads();
        if (!last_sh) return;
    } else {
        __threadfence();
        __syncthreads();
        if (t == 0) {
            const unsigned prev = atomicAdd(&g_ht2_cnt[tile], 1u);
            last_sh = prev == (unsigned)S - 1;
            if (last_sh) g_ht2_cnt[tile] = 0; /* ready for the next launch */
        }
        __syncthreads();
        if (!last_sh) return;
        __threadfence();
    }
    if (ET) { /* the tile's R rows into shared memory (16-byte cp.async.cg: L2, as __ldcg), beside the partials */
        const int rch = HC * d / 8, nch = mt * rch;
        const uint32_t sb = (uint32_t)__cvta_generic_to_shared(h2_dsm);
#pragma unroll 1
        for (int c = t; c < nch; c += H2_T) {
            const int mm = c / rch, j = c - mm * rch;
            const uint16_t *src = a.R + (size_t)(m0 + mm) * a.ldr + 8 * (size_t)j;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sb + 16u * (uint32_t)c), "l"(src)
                         : "memory");
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    }

    /* C: all partials of the tile in flight at once, then the fixed-order sums */
    if (NMIX > 0) {
        /* sums of squares: 64 lanes per row, lane l adds slices l, l + 64, ... (S <= 512: 8 each) */
        /* (code size: the slice tests j = l + stride * c < S as c < a per-lane count, the loads through a running
         * pointer: the same loads and adds) */
        double sv[8];
        const int sm = t >> 6, sl = t & 63;
        const int ns = (S - sl + 63) >> 6; /* sl + 64 c < S  <=>  c < ns */
        {
            const double *ps = a.ssp + (size_t)(r0 + sm) * S + sl;
            const int nsl = sm < mt ? ns : 0;
#pragma unroll
            for (int c = 0; c < 8; c++) sv[c] = c < nsl ? __ldcg(ps + 64 * c) : 0.0;
        }
        const int lg = S <= 128 ? 3 : S <= 256 ? 4 : 5, L = 1 << lg, P = H2_T / L, nout = mt * NMIX;
        const int ol = t >> lg, ll = t & (L - 1);
        const int nc = (S - ll + L - 1) >> lg; /* ll + L c < S  <=>  c < nc */
        /* P outputs per rolled round (code size: docs/kernels/small-kernels.md); the next round's loads are issued before this
         * round's sums (at M = 1 the 24 outputs take one round) */
        /* the loop is rotated so that one copy of the 16 loads serves every round (code size): step ob issues
         * round ob + P's loads (none past the last round) and sums round ob (none at ob = -P) */
        float x[16];
#pragma unroll 1
        for (int ob = -P; ob < nout; ob += P) {
            const int o = ob + ol, on = o + P;
            const int ncl = on < nout ? nc : 0;
            const float *pp = a.part + ((size_t)r0 * NMIX + on) * S + ll;
            float xn[16];
#pragma unroll
            for (int c = 0; c < 16; c++) {
                xn[c] = c < ncl ? __ldcg(pp) : 0.0f;
                pp += L;
            }
            if (ob >= 0) {
                float v = 0.0f;
#pragma unroll
                for (int c = 0; c < 16; c++)
                    if (c < nc) v = __fadd_rn(v, x[c]);
#pragma unroll 1
                for (int o2 = L / 2; o2 > 0; o2 >>= 1) v = __fadd_rn(v, __shfl_xor_sync(full, v, o2));
                if (ll == 0 && o < nout) smix[o / NMA][o % NMA] = v;
            }
#pragma unroll
            for (int c = 0; c < 16; c++) x[c] = xn[c];
        }
        double v = 0.0;
#pragma unroll
        for (int c = 0; c < 8; c++)
            if (c < ns) v = __dadd_rn(v, sv[c]);
#pragma unroll 1
        for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(full, v, o));
        if (lane == 0) sss[t >> 5] = v;
        __syncthreads();
        if (t < mt) srs[t] = hc_mix_rs<LEAN>(__dadd_rn(sss[2 * t], sss[2 * t + 1]), hcd, a.rms_eps); /* k_scale_mixes' */
        __syncthreads();
#pragma unroll 1
        for (int o = t; o < mt * NMIX; o += H2_T) {
            const int mm = o / NMA, n = o % NMA;
            const float v2 = __fmul_rn(smix[mm][n], srs[mm]);
            smix[mm][n] = v2;
            a.mixes[(size_t)(m0 + mm) * NMIX + n] = v2;
        }
        if (ET) asm volatile("cp.async.wait_all;\n" ::: "memory"); /* this thread's R copies (barrier below) */
        __syncthreads();
    }

    /* D: Sinkhorn on warps 0-1 (16 lanes per row; surplus groups redo the last row); not in the head */
    const int ovl = !HEAD && (LEAN || a.ovl);
    const int nE = ovl ? H2_T - 64 : H2_T;
    if (!HEAD && t < 64) {
        const int g = t >> 4, mm = g < mt ? g : mt - 1;
        const size_t m = (size_t)(m0 + mm);
        sk_group(t & 15, smix[mm], a.scale3, a.base, a.iters, a.hc_eps, g < mt, NULL, a.post + m * HC,
                 a.comb + m * HC * HC, ET);
        if (ovl) return;
    }
    if (!HEAD && !ovl) __syncthreads();

    /* E (threads te < nE): pre (shared), collapse (bf16 x) and RMSNorm (bf16 xn) of the tile's rows */
    const int te = t - (H2_T - nE), we = te >> 5;
    if (NMIX == 0 && te < mt * HC) { /* V4.1 head: the carried pre */
        const int mm = te / HC, k = te % HC;
        spre[mm][k] = a.pre_in[(size_t)(m0 + mm) * HC + k];
    } else if (NMIX > 0 && te < mt * HC) { /* the collapse's pre: this site's, or (chain) the carried one, then carry this site's */
        const int mm = te / HC, k = te % HC;
        const size_t i = (size_t)(m0 + mm) * HC + k;
        const float p = HEAD ? h2_head_pre1<LEAN>(smix[mm], k, a.scale0, a.base, a.hc_eps)
                             : sk_pre1(smix[mm], k, a.scale3[0], a.base, a.hc_eps);
        a.pre[i] = p;
        if (!HEAD && a.pre_in) {
            spre[mm][k] = a.pre_in[i];
            a.pre_in[i] = p;
        } else {
            spre[mm][k] = p;
        }
    }
    h2_bar(nE);
    const int nv = d / 8, ni = mt * nv;
    const int one = ni <= nE * H2_EV; /* all items in one pass: x stays in registers */
    double ssq[MTX];
#pragma unroll
    for (int r = 0; r < MTX; r++) ssq[r] = 0.0;
    uint4 keep[H2_EV] = {};
    float wk[ET ? H2_EV : 1][8]; /* ET: the norm weights of the thread's items, loaded now (one pass) */
    if (ET && one && a.norm_w) {
#pragma unroll
        for (int e = 0; e < H2_EV; e++) {
            const int it = te + e * nE;
            if (it < ni) {
                const int iv = it % nv;
#pragma unroll
                for (int q = 0; q < 8; q++) wk[ET ? e : 0][q] = __ldg(a.norm_w + 8 * iv + q);
            }
        }
    }
    /* one item (8 columns of a row) per rolled step (code size: docs/kernels/small-kernels.md); without ET the next item's four R
     * loads are issued before this item's arithmetic, so two items' loads are in flight */
#pragma unroll 1
    for (int b = te; b < ni; b += nE * H2_EV) {
        uint4 rq[HC], rn[HC];
        if (!ET) {
            const int mm = h2_row<MTX>(b, nv), iv = b - mm * nv;
            const uint16_t *r = a.R + (size_t)(m0 + mm) * a.ldr + 8 * iv;
#pragma unroll
            for (int k = 0; k < HC; k++) rq[k] = __ldcg((const uint4 *)(r + (size_t)k * d));
        }
#pragma unroll 1
        for (int e = 0; e < H2_EV; e++) {
            const int it = b + e * nE;
            if (it >= ni) break;
            if (!ET && e + 1 < H2_EV && it + nE < ni) {
                const int mn = h2_row<MTX>(it + nE, nv), ivn = it + nE - mn * nv;
                const uint16_t *r = a.R + (size_t)(m0 + mn) * a.ldr + 8 * ivn;
#pragma unroll
                for (int k = 0; k < HC; k++) rn[k] = __ldcg((const uint4 *)(r + (size_t)k * d));
            }
            const int mm = h2_row<MTX>(it, nv), iv = it - mm * nv;
            const float p[HC] = {spre[mm][0], spre[mm][1], spre[mm][2], spre[mm][3]};
            float rr[HC][8], o[8];
            const uint4 *st = (const uint4 *)h2_dsm + ((size_t)mm * HC * d + 8 * (size_t)iv) / 8; /* ET: stash */
#pragma unroll
            for (int k = 0; k < HC; k++) unpack8(ET ? st[(size_t)k * d / 8] : rq[k], rr[k]);
#pragma unroll
            for (int q = 0; q < 8; q++) o[q] = collapse1(p, rr[0][q], rr[1][q], rr[2][q], rr[3][q]);
            const uint4 pk = pack8(o);
#pragma unroll
            for (int x = 0; x < H2_EV; x++)
                if (x == e) keep[x] = pk; /* a register array: selected, not indexed */
            if (!ET && a.norm_w) /* this item's norm weights into L2 for the RMSNorm below (32 bytes) */
                asm volatile("prefetch.global.L2 [%0];" ::"l"(a.norm_w + 8 * iv));
            *(uint4 *)(a.xo + (size_t)(m0 + mm) * a.ldx + 8 * iv) = pk;
            float xf[8];
            unpack8(pk, xf);
            double sq = 0.0;
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const double v = xf[q];
                sq = __dadd_rn(sq, __dmul_rn(v, v));
            }
#pragma unroll
            for (int r = 0; r < MTX; r++)
                if (r == mm) ssq[r] = __dadd_rn(ssq[r], sq);
            if (!ET) {
#pragma unroll
                for (int k = 0; k < HC; k++) rq[k] = rn[k];
            }
        }
    }
#pragma unroll
    for (int mm = 0; mm < MTX; mm++) {
        double v = ssq[mm];
#pragma unroll 1
        for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(full, v, o));
        if (lane == 0) sred[we][mm] = v;
    }
    const float *w = a.norm_w;
    float wn[8]; /* without ET's wk: the weights of this thread's first RMSNorm item, loaded before the scale */
    if (!(ET && one) && w && te < ni) {
        const int iv = te - h2_row<MTX>(te, nv) * nv;
#pragma unroll
        for (int q = 0; q < 8; q++) wn[q] = __ldg(w + 8 * iv + q);
    }
    h2_bar(nE);
    if (te < mt) { /* k_rmsnorm's thread 0, row te */
        const int mm = te;
        double sum = sred[0][mm];
#pragma unroll 1
        for (int wi = 1; wi < nE / 32; wi++) sum = __dadd_rn(sum, sred[wi][mm]);
        srs[mm] = dic_rms_scale<LEAN>(sum, a.xo + (size_t)(m0 + mm) * a.ldx, d, a.norm_eps);
    }
    h2_bar(nE);
    /* items it = te, te + nE, ... (the order of the passes above; k: the pass slot of keep / wk), one per rolled
     * step; without ET's wk the next item's weights are loaded one step ahead (the first before the scale) */
#pragma unroll 1
    for (int it = te, k = 0; it < ni; it += nE, k++) {
        const int mm = h2_row<MTX>(it, nv), iv = it - mm * nv;
        float wv[8];
        if (ET && one) {
#pragma unroll
            for (int x = 0; x < H2_EV; x++)
                if (x == k) {
#pragma unroll
                    for (int q = 0; q < 8; q++) wv[q] = wk[ET ? x : 0][q];
                }
        } else if (w) {
#pragma unroll
            for (int q = 0; q < 8; q++) wv[q] = wn[q];
            if (it + nE < ni) {
                const int ivn = it + nE - h2_row<MTX>(it + nE, nv) * nv;
#pragma unroll
                for (int q = 0; q < 8; q++) wn[q] = __ldg(w + 8 * ivn + q);
            }
        }
        uint4 xq;
        if (one) {
#pragma unroll
            for (int x = 0; x < H2_EV; x++)
                if (x == k) xq = keep[x];
        } else {
            xq = *(const uint4 *)(a.xo + (size_t)(m0 + mm) * a.ldx + 8 * iv);
        }
        const float rsq = srs[mm];
        const uint32_t qq[4] = {xq.x, xq.y, xq.z, xq.w};
        uint32_t o[4];
#pragma unroll
        for (int h = 0; h < 4; h++) {
            float lo = __fmul_rn(dic_bf16_to_f32((uint16_t)(qq[h] & 0xFFFFu)), rsq);
            float hi = __fmul_rn(dic_bf16_to_f32((uint16_t)(qq[h] >> 16)), rsq);
            if (w) lo = __fmul_rn(wv[2 * h], lo), hi = __fmul_rn(wv[2 * h + 1], hi);
            o[h] = (uint32_t)dic_f32_to_bf16(lo) | ((uint32_t)dic_f32_to_bf16(hi) << 16);
        }
        *(uint4 *)(a.xn + (size_t)(m0 + mm) * a.ldx + 8 * iv) = make_uint4(o[0], o[1], o[2], o[3]);
    }
}

/* Rows per tile: one wave of at most 2 * (d / 32) CTAs (2 CTAs per SM fit: 128 registers) while the last
 * CTA's collapse items stay <= 2 passes: 1 row at M <= 2, 2 at M <= 4, else 4 (docs/kernels/mhc.md). */
static int ht_auto_mt(int M) { return M <= 2 ? 1 : M <= 4 ? 2 : 4; }

/* From this many rows dic_hc_transition launches k_hc_rows (the prefill organisation, below) */
#define HT_ROWS_MINM 65

/* scratch for the partials: sized for the smallest CW of any variant (16) */
static size_t ht_part_bytes(int d) {
    return ((size_t)HT_MAXT * HT_MT * HT_NMIX * (size_t)(d / 16) * sizeof(float) + 255) & ~(size_t)255;
}

extern "C" int dic_hc_transition_ok(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int d, int fn_n,
                                    int fn_k, const void *fn, const uint16_t *xo, const uint16_t *xn, size_t ldx) {
    if (M <= 0 || d <= 0 || d % 64 || d > 8 * HT_VMAX * HT_T || fn_n != HT_NMIX || fn_k != HC * d) return 0;
    if (ldr < (size_t)HC * d || ldx < (size_t)d || ldr % 8 || ldx % 8) return 0;
    if ((((uintptr_t)R) | ((uintptr_t)xo) | ((uintptr_t)xn) | ((uintptr_t)fn)) & 15) return 0;
    return c->scratch && ht_part_bytes(d) + (size_t)HT_MAXT * HT_MT * (size_t)(d / 16) * sizeof(double) <=
                             c->scratch_cap;
}

/* ---- fused transition, row-block organisation (k_hc_rows: many rows) ----
 * k_transition2<32, 24>'s arithmetic per row with another division of the work: one CTA owns a block of up to
 * HR_RB whole rows (no partials in the scratch, no counters, one launch for any M), warp w the 32-column slices
 * s = w, w + 8, ... of all its rows, with the slice's 24 fn float4 in registers across the rows (fn read from
 * L2 once per CTA, not once per tile of 4 rows; the next slice's prefetched into L1 meanwhile). Per (row, slice) and lane (copy lane / 8, columns
 * 32 s + 4 (lane % 8) .. + 3) the same operations as k_transition2's A and B:
 *   - expand of the lane's 4 columns (expand1's operations for its own copy, bf16, written back; the other
 *     copies' bf16 values from their lanes);
 *   - the slice's double sum of squares: per column ((0 + v0^2) + v1^2 + v2^2) + v3^2, then the 32-column
 *     xor-butterfly tree (columns c, c ^ 16, ^ 8, ^ 4 on lanes ^ 4, ^ 2, ^ 1, then c ^ 2, ^ 1 in the lane);
 *   - per mix the chain fmul + 3 fmaf over the lane's float4, then the 32-lane xor-butterfly tree, all 24
 *     trees at once (hr_tree32: each lane keeps one half and sends the other, 31 shuffles; an output's pairs
 *     and their order are the butterfly's, fp32 addition is commutative, so the same bits);
 * and C's fixed-order sums as running sums: slice s adds into lane group s % L (mixes) and s % 64 (squares),
 * from 0, in increasing s (the slices of one group are one warp's: 8 divides L and 64), then the L-lane
 * and two 32-lane trees in the butterfly's pairing (hr_tree). Scale, Sinkhorn (sk_group), pre (sk_pre1),
 * collapse (collapse1) and RMSNorm (dic_rms_scale: k_rmsnorm's decision, the CPU's bits whatever the order)
 * as there. So a row's bits are k_transition2's, whatever M or the rows per CTA (docs/kernels/mhc.md). */
#define HR_T 256
#define HR_W (HR_T / 32)
#define HR_RB 16   /* rows per CTA at most */
#define HR_LMAX 16 /* C's lane groups L at S = d / 32 <= 256 */

/* One level of hr_tree32: the lane keeps half H of its 2H values, adds the partner's (lane ^ H) copy of it. */
template <int H> static __device__ __forceinline__ void hr_tree32_level(float v[32], int lane) {
    const int up = (lane & H) != 0;
#pragma unroll
    for (int k = 0; k < H; k++) {
        const float keep = up ? v[H + k] : v[k], send = up ? v[k] : v[H + k];
        v[k] = __fadd_rn(keep, __shfl_xor_sync(0xFFFFFFFFu, send, H));
    }
}

/* v[n], n < 32, on every lane -> lane l returns the 32-lane xor-butterfly sum of v[l] (k_transition2's tree). */
static __device__ __forceinline__ float hr_tree32(float v[32], int lane) {
    hr_tree32_level<16>(v, lane);
    hr_tree32_level<8>(v, lane);
    hr_tree32_level<4>(v, lane);
    hr_tree32_level<2>(v, lane);
    hr_tree32_level<1>(v, lane);
    return v[0];
}

/* The xor-butterfly sum of v[0 .. n) computed in one thread (pairs k, k + o for o = n / 2 .. 1: the lanes'
 * pairs), n a power of 2 <= N. */
template <int N, typename T> static __device__ __forceinline__ T hr_tree(T v[N], int n) {
    constexpr int LOGN = N == 32 ? 5 : N == 16 ? 4 : N == 8 ? 3 : N == 4 ? 2 : 1;
#pragma unroll
    for (int lv = 1; lv <= LOGN; lv++) {
        const int o = N >> lv;
        if (o < n) {
#pragma unroll
            for (int k = 0; k < N / 2; k++)
                if (k < o) v[k] = v[k] + v[k + o];
        }
    }
    return v[0];
}

static __device__ __forceinline__ void hr_unpack4(uint2 q, float v[4]) {
    v[0] = dic_bf16_to_f32((uint16_t)(q.x & 0xFFFFu)), v[1] = dic_bf16_to_f32((uint16_t)(q.x >> 16));
    v[2] = dic_bf16_to_f32((uint16_t)(q.y & 0xFFFFu)), v[3] = dic_bf16_to_f32((uint16_t)(q.y >> 16));
}

static __device__ __forceinline__ uint2 hr_load4(const uint16_t *p) {
    return make_uint2((uint32_t)p[0] | ((uint32_t)p[1] << 16), (uint32_t)p[2] | ((uint32_t)p[3] << 16));
}

static __global__ void __launch_bounds__(HR_T, 1) k_hc_rows(const ht_args a) {
    __shared__ float sacc[HR_RB][HR_LMAX][32]; /* the mixes' running sums per lane group (24 of 32 used) */
    __shared__ double ssacc[HR_RB][64];         /* the squares' running sums per lane of C's 64 */
    __shared__ float spc[HR_RB][HC + HC * HC];  /* the previous site's post, comb (the expand's inputs) */
    __shared__ float smix[HR_RB][HT_NMIX];
    __shared__ float spre[HR_RB][HC];
    __shared__ float srs[HR_RB];
    const unsigned full = 0xFFFFFFFFu;
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    const int d = a.d, hcd = HC * d, S = d / 32;
    const int L = S <= 128 ? 8 : 16; /* k_transition2's L at S <= 256 */
    const int m0 = blockIdx.x * a.mtr, mt = min(a.mtr, a.M - m0);
    DIC_PDL_ENTER();
    for (int i = t; i < HR_RB * HR_LMAX * 32; i += HR_T) (&sacc[0][0][0])[i] = 0.0f;
    for (int i = t; i < HR_RB * 64; i += HR_T) (&ssacc[0][0])[i] = 0.0;
    if (a.sub)
        for (int i = t; i < mt * (HC + HC * HC); i += HR_T) {
            const int r = i / (HC + HC * HC), k = i % (HC + HC * HC);
            const size_t m = (size_t)(m0 + r);
            spc[r][k] = k < HC ? a.post[m * HC + k] : a.comb[m * HC * HC + (k - HC)];
        }
    __syncthreads();

    /* A + B per (slice, row): lane = (copy cp, columns i .. i + 3) */
    const int cp = lane >> 3, i0 = 4 * (lane & 7);
#pragma unroll 1
    for (int s = w; s < S; s += HR_W) {
        const int i = 32 * s + i0;
        float4 wv[HT_NMIX];
#pragma unroll
        for (int n = 0; n < HT_NMIX; n++) wv[n] = __ldg((const float4 *)(a.fn + (size_t)n * hcd + (size_t)cp * d + i));
        if (s + HR_W < S) /* the warp's next slice of fn into L1 while this one's rows run (a hint: no bits) */
#pragma unroll
            for (int n = 0; n < HT_NMIX; n++)
                asm volatile("prefetch.global.L1 [%0];" ::"l"(a.fn + (size_t)n * hcd + (size_t)cp * d + i + 32 * HR_W));
        uint2 rq[HC], fq = make_uint2(0u, 0u); /* the next row's loads, one row ahead (sub: 2-byte loads, any ldsub) */
#pragma unroll
        for (int j = 0; j < HC; j++) rq[j] = *(const uint2 *)(a.R + (size_t)m0 * a.ldr + (size_t)j * d + i);
        if (a.sub) fq = hr_load4(a.sub + (size_t)m0 * a.ldsub + i);
#pragma unroll 1
        for (int r = 0; r < mt; r++) {
            const size_t m = (size_t)(m0 + r);
            float rv[HC][4];
#pragma unroll
            for (int j = 0; j < HC; j++) hr_unpack4(rq[j], rv[j]);
            float fv[4];
            hr_unpack4(fq, fv);
            if (r + 1 < mt) {
#pragma unroll
                for (int j = 0; j < HC; j++) rq[j] = *(const uint2 *)(a.R + (m + 1) * a.ldr + (size_t)j * d + i);
                if (a.sub) fq = hr_load4(a.sub + (m + 1) * a.ldsub + i);
            }
            if (a.sub) { /* ht_expand_col's arithmetic for the lane's own copy, written back; the other copies'
                          * bf16 values from their lanes (lane % 8 + 8 j) */
                const float *po = spc[r], *cb = spc[r] + HC;
                uint32_t own[2] = {0u, 0u};
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float sm = cb[cp] * rv[0][q]; /* expand1's out_cp */
                    sm += cb[HC + cp] * rv[1][q];
                    sm += cb[2 * HC + cp] * rv[2][q];
                    sm += cb[3 * HC + cp] * rv[3][q];
                    const uint16_t b = dic_f32_to_bf16(po[cp] * fv[q] + sm);
                    own[q >> 1] |= (uint32_t)b << (16 * (q & 1));
                }
                __syncwarp(); /* in place: every lane has read these columns (the loads above) */
                *(uint2 *)(a.R + m * a.ldr + (size_t)cp * d + i) = make_uint2(own[0], own[1]);
#pragma unroll
                for (int j = 0; j < HC; j++) {
                    const int src = (lane & 7) + 8 * j;
                    hr_unpack4(make_uint2(__shfl_sync(full, own[0], src), __shfl_sync(full, own[1], src)), rv[j]);
                }
            }
            /* the slice's sum of squares: per column, then the 32-column tree */
            double sq[4];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                sq[q] = 0.0;
#pragma unroll
                for (int j = 0; j < HC; j++) {
                    const double v = rv[j][q];
                    sq[q] = __dadd_rn(sq[q], __dmul_rn(v, v));
                }
#pragma unroll
                for (int o = 4; o > 0; o >>= 1) sq[q] = __dadd_rn(sq[q], __shfl_xor_sync(full, sq[q], o));
            }
            if (lane == 0) {
                const double tot = __dadd_rn(__dadd_rn(sq[0], sq[2]), __dadd_rn(sq[1], sq[3]));
                ssacc[r][s & 63] = __dadd_rn(ssacc[r][s & 63], tot);
            }
            /* the 24 partial mixes of the slice */
            float x[4];
#pragma unroll
            for (int q = 0; q < 4; q++) x[q] = cp == 0 ? rv[0][q] : cp == 1 ? rv[1][q] : cp == 2 ? rv[2][q] : rv[3][q];
            float v[32];
#pragma unroll
            for (int n = 0; n < 32; n++) {
                if (n < HT_NMIX) {
                    float c = __fmul_rn(wv[n].x, x[0]);
                    c = fmaf(wv[n].y, x[1], c);
                    c = fmaf(wv[n].z, x[2], c);
                    v[n] = fmaf(wv[n].w, x[3], c);
                } else {
                    v[n] = 0.0f;
                }
            }
            const float p = hr_tree32(v, lane);
            if (lane < HT_NMIX) {
                float *acc = &sacc[r][s & (L - 1)][lane];
                *acc = __fadd_rn(*acc, p);
            }
        }
    }
    __syncthreads();

    /* C: the L-lane tree of the mixes and the two 32-lane trees of the squares, then the scale */
#pragma unroll 1
    for (int o = t; o < mt * HT_NMIX; o += HR_T) {
        const int r = o / HT_NMIX, n = o % HT_NMIX;
        float v[HR_LMAX];
#pragma unroll
        for (int l = 0; l < HR_LMAX; l++) v[l] = l < L ? sacc[r][l][n] : 0.0f;
        smix[r][n] = hr_tree<HR_LMAX>(v, L);
    }
    if (t >= HR_T - HR_RB && t - (HR_T - HR_RB) < mt) {
        const int r = t - (HR_T - HR_RB);
        double lo[32], hi[32];
#pragma unroll
        for (int l = 0; l < 32; l++) lo[l] = ssacc[r][l], hi[l] = ssacc[r][32 + l];
        srs[r] = hc_mix_rs(__dadd_rn(hr_tree<32>(lo, 32), hr_tree<32>(hi, 32)), hcd, a.rms_eps);
    }
    __syncthreads();
#pragma unroll 1
    for (int o = t; o < mt * HT_NMIX; o += HR_T) {
        const int r = o / HT_NMIX, n = o % HT_NMIX;
        const float v = __fmul_rn(smix[r][n], srs[r]);
        smix[r][n] = v;
        a.mixes[(size_t)(m0 + r) * HT_NMIX + n] = v;
    }
    __syncthreads();

    /* D: Sinkhorn, 16 lanes per row (surplus groups redo the last row, write nothing); pre */
    {
        const int g = t >> 4, r = g < mt ? g : mt - 1;
        const size_t m = (size_t)(m0 + r);
        sk_group(t & 15, smix[r], a.scale3, a.base, a.iters, a.hc_eps, g < mt, NULL, a.post + m * HC,
                 a.comb + m * HC * HC);
    }
    if (t < mt * HC) {
        const int r = t / HC, k = t % HC;
        const size_t ix = (size_t)(m0 + r) * HC + k;
        const float p = sk_pre1(smix[r], k, a.scale3[0], a.base, a.hc_eps);
        a.pre[ix] = p;
        if (a.pre_in) {
            spre[r][k] = a.pre_in[ix];
            a.pre_in[ix] = p;
        } else {
            spre[r][k] = p;
        }
    }
    __syncthreads();

    /* E: a warp per row: collapse (bf16 x), then the RMSNorm (bf16 xn) */
#pragma unroll 1
    for (int r = w; r < mt; r += HR_W) {
        const size_t m = (size_t)(m0 + r);
        const float p[HC] = {spre[r][0], spre[r][1], spre[r][2], spre[r][3]};
        const uint16_t *rr = a.R + m * a.ldr;
        uint16_t *xo = a.xo + m * a.ldx, *xn = a.xn + m * a.ldx;
        double ss = 0.0;
#pragma unroll 1
        for (int iv = lane; iv < d / 8; iv += 32) {
            float rf[HC][8], o[8], xf[8];
#pragma unroll
            for (int k = 0; k < HC; k++) unpack8(*(const uint4 *)(rr + (size_t)k * d + 8 * iv), rf[k]);
#pragma unroll
            for (int q = 0; q < 8; q++) o[q] = collapse1(p, rf[0][q], rf[1][q], rf[2][q], rf[3][q]);
            const uint4 pk = pack8(o);
            *(uint4 *)(xo + 8 * iv) = pk;
            unpack8(pk, xf);
            double sq = 0.0;
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const double v = xf[q];
                sq = __dadd_rn(sq, __dmul_rn(v, v));
            }
            ss = __dadd_rn(ss, sq);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) ss = __dadd_rn(ss, __shfl_xor_sync(full, ss, o));
        __syncwarp(); /* the row's x stores before lane 0's ambiguity fallback reads them */
        float rsq = 0.0f;
        if (lane == 0) rsq = dic_rms_scale(ss, xo, d, a.norm_eps);
        rsq = __shfl_sync(full, rsq, 0);
#pragma unroll 1
        for (int iv = lane; iv < d / 8; iv += 32) {
            const uint4 xq = *(const uint4 *)(xo + 8 * iv);
            const uint32_t qq[4] = {xq.x, xq.y, xq.z, xq.w};
            uint32_t o[4];
#pragma unroll
            for (int h = 0; h < 4; h++) {
                float lo = __fmul_rn(dic_bf16_to_f32((uint16_t)(qq[h] & 0xFFFFu)), rsq);
                float hi = __fmul_rn(dic_bf16_to_f32((uint16_t)(qq[h] >> 16)), rsq);
                if (a.norm_w)
                    lo = __fmul_rn(__ldg(a.norm_w + 8 * iv + 2 * h), lo),
                    hi = __fmul_rn(__ldg(a.norm_w + 8 * iv + 2 * h + 1), hi);
                o[h] = (uint32_t)dic_f32_to_bf16(lo) | ((uint32_t)dic_f32_to_bf16(hi) << 16);
            }
            *(uint4 *)(xn + 8 * iv) = make_uint4(o[0], o[1], o[2], o[3]);
        }
    }
}


/* The ht_args of rows [r0, r0 + mc) of a transition (pointers offset to row r0). */
static ht_args ht_transition_args(int r0, int mc, const uint16_t *sub, size_t ldsub, uint16_t *R, size_t ldr, int d,
                                  const float *fn, const float *scale3, const float *base, int iters, float hc_eps,
                                  float rms_eps, float *mixes, float *pre, float *post, float *comb, float *pre_in,
                                  const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx) {
    const size_t ro = (size_t)r0;
    ht_args a;
    memset(&a, 0, sizeof a);
    a.M = mc, a.d = d;
    a.sub = sub ? sub + ro * ldsub : NULL, a.ldsub = ldsub;
    a.R = R + ro * ldr, a.ldr = ldr;
    a.fn = fn, a.scale3 = scale3, a.base = base, a.iters = iters, a.hc_eps = hc_eps, a.rms_eps = rms_eps;
    a.mixes = mixes + ro * HT_NMIX, a.pre = pre + ro * HC, a.post = post + ro * HC, a.comb = comb + ro * HC * HC;
    a.pre_in = pre_in ? pre_in + ro * HC : NULL;
    a.norm_w = norm_w, a.norm_eps = norm_eps;
    a.xo = xo + ro * ldx, a.xn = xn + ro * ldx, a.ldx = ldx;
    return a;
}

/* k_hc_rows over all M rows in one launch: rows per CTA from M and the SM count only to fill the device (one
 * CTA per SM: ~M / SMs rows each, at most HR_RB); a row's bits do not depend on it. No scratch. */
extern "C" cudaError_t dic_hc_transition_rows(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, uint16_t *R,
                                              size_t ldr, int d, const float *fn, const float *scale3,
                                              const float *base, int iters, float hc_eps, float rms_eps, float *mixes,
                                              float *pre, float *post, float *comb, float *pre_in,
                                              const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn,
                                              size_t ldx) {
    if (M <= 0) return cudaSuccess;
    const int sms = c->num_sms > 0 ? c->num_sms : 1;
    int rb = (M + sms - 1) / sms;
    rb = rb < 1 ? 1 : rb > HR_RB ? HR_RB : rb;
    ht_args a = ht_transition_args(0, M, sub, ldsub, R, ldr, d, fn, scale3, base, iters, hc_eps, rms_eps, mixes, pre,
                                   post, comb, pre_in, norm_w, norm_eps, xo, xn, ldx);
    a.mtr = rb;
    DIC_LAUNCH(k_hc_rows, (M + rb - 1) / rb, HR_T, 0, c->stream, a);
    DIC_LAUNCH_CHECK();
}

/* Decode sizes (M < HT_ROWS_MINM): k_transition2, one launch per HT_MAXT tiles of 1 / 2 / 4 rows (ht_auto_mt);
 * more rows: k_hc_rows. The same bits per row either way (k_hc_rows' header); the switch is a speed choice. */
extern "C" cudaError_t dic_hc_transition(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, uint16_t *R,
                                         size_t ldr, int d, const float *fn, const float *scale3, const float *base,
                                         int iters, float hc_eps, float rms_eps, float *mixes, float *pre, float *post,
                                         float *comb, float *pre_in, const float *norm_w, float norm_eps, uint16_t *xo,
                                         uint16_t *xn, size_t ldx) {
    if (M >= HT_ROWS_MINM)
        return dic_hc_transition_rows(c, M, sub, ldsub, R, ldr, d, fn, scale3, base, iters, hc_eps, rms_eps, mixes,
                                      pre, post, comb, pre_in, norm_w, norm_eps, xo, xn, ldx);
    const int mtr = ht_auto_mt(M), S = d / 32;
    float *part = (float *)c->scratch;
    double *ssp = (double *)((uint8_t *)c->scratch + ht_part_bytes(d));
    for (int r0 = 0; r0 < M; r0 += HT_MAXT * mtr) {
        const int mc = M - r0 < HT_MAXT * mtr ? M - r0 : HT_MAXT * mtr;
        ht_args a = ht_transition_args(r0, mc, sub, ldsub, R, ldr, d, fn, scale3, base, iters, hc_eps, rms_eps, mixes,
                                       pre, post, comb, pre_in, norm_w, norm_eps, xo, xn, ldx);
        a.part = part, a.ssp = ssp, a.mtr = mtr, a.ovl = 1;
        dim3 grid((unsigned)S, (unsigned)((mc + mtr - 1) / mtr));
        if (mtr <= 2) DIC_LAUNCH((k_transition2<32, HT_NMIX, 0, 1>), grid, H2_T, 0, c->stream, a);
        else DIC_LAUNCH((k_transition2<32, HT_NMIX>), grid, H2_T, 0, c->stream, a);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}


/* ---- fused output head (ops.h di_hc_head_final, both modes) -----------
 * k_transition2 with NMIX = HC (V4: the head's 4 mixes, scale_mixes and
 * head_pre in place of the Sinkhorn) or NMIX = 0 (V4.1: the carried pre, no
 * mixes): the last block's expand (sub != NULL), then the collapse and the
 * final RMSNorm, one launch per HT_MAXT tiles. Same bits as the transition's
 * paths: R, x, xn and pre are the sequence's for the kernel's mixes; the
 * mixes' fp32 order depends on CW and d only (a row's bits do not depend on
 * M). 64 columns per CTA (docs/kernels/mhc.md). */

extern "C" int dic_hc_head_ok(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int d, int fn_n, int fn_k,
                              const void *fn, const uint16_t *xo, const uint16_t *xn, size_t ldx) {
    if (M <= 0 || d <= 0 || d % 64 || d > 8 * HT_VMAX * HT_T) return 0;
    if (fn ? fn_n != HC || fn_k != HC * d : fn_n != 0) return 0;
    if (ldr < (size_t)HC * d || ldx < (size_t)d || ldr % 8 || ldx % 8) return 0;
    if ((((uintptr_t)R) | ((uintptr_t)xo) | ((uintptr_t)xn) | ((uintptr_t)fn)) & 15) return 0;
    return c->scratch && ht_part_bytes(d) + (size_t)HT_MAXT * HT_MT * (size_t)(d / 16) * sizeof(double) <=
                             c->scratch_cap;
}

extern "C" cudaError_t dic_hc_head(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, const float *post,
                                   const float *comb, uint16_t *R, size_t ldr, int d, const float *fn, float scale0,
                                   const float *base, float hc_eps, float rms_eps, float *mixes, float *pre,
                                   const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx) {
    const int mtr = ht_auto_mt(M), S = d / 64;
    float *part = (float *)c->scratch;
    double *ssp = (double *)((uint8_t *)c->scratch + ht_part_bytes(d));
    for (int r0 = 0; r0 < M; r0 += HT_MAXT * mtr) {
        const int mc = M - r0 < HT_MAXT * mtr ? M - r0 : HT_MAXT * mtr;
        const size_t ro = (size_t)r0;
        ht_args a;
        memset(&a, 0, sizeof a);
        a.M = mc, a.d = d;
        a.sub = sub ? sub + ro * ldsub : NULL, a.ldsub = ldsub;
        a.R = R + ro * ldr, a.ldr = ldr;
        a.fn = fn, a.base = base, a.hc_eps = hc_eps, a.rms_eps = rms_eps, a.scale0 = scale0;
        a.post = (float *)post + ro * HC, a.comb = (float *)comb + ro * HC * HC;
        if (fn) a.mixes = mixes + ro * HC, a.pre = pre + ro * HC;
        else a.pre_in = pre + ro * HC; /* read only */
        a.norm_w = norm_w, a.norm_eps = norm_eps;
        a.xo = xo + ro * ldx, a.xn = xn + ro * ldx, a.ldx = ldx;
        a.part = part, a.ssp = ssp, a.mtr = mtr, a.ovl = 0;
        dim3 grid((unsigned)S, (unsigned)((mc + mtr - 1) / mtr));
        if (fn && mtr <= 2) DIC_LAUNCH((k_transition2<64, HC, 0, 1>), grid, H2_T, 0, c->stream, a);
        else if (fn) DIC_LAUNCH((k_transition2<64, HC>), grid, H2_T, 0, c->stream, a);
        else DIC_LAUNCH((k_transition2<64, 0>), grid, H2_T, 0, c->stream, a);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
