/*
 * lab/mhc/mhc_variants.cu — every variant of the fused mHC transition and output head that the product
 * does not run (docs/kernels/mhc.md "Tried"), beside the one it runs, as they stood when they left
 * src/ops/cuda/dic_mhc.cu: k_transition (variant 0, the first version), k_transition2 with 16 / 32 / 64
 * columns per CTA and 4 / 2 / 1 / auto rows per tile (variants 1-7; 7 is the product's), variant 8 (the
 * shorter tail with the R stash in shared memory) and variant 9 (mhc_gridsync.cu at M <= 2); the head with
 * 32 or 64 columns per CTA (64 is the product's). Never linked into the library: lab/mhc's programs
 * compare these with the product's dic_hc_transition / dic_hc_head (the same bits where the variant has
 * the product's columns per CTA) and the CPU reference (lab/README.md).
 *
 * Variants (lab_hc_transition_variant): 0 = k_transition; 1..7 = k_transition2 with (columns per CTA,
 * rows per tile, Sinkhorn beside the collapse + RMSNorm) = 1 (32, 4, yes), 2 (32, 4, no), 3 (16, 4, yes),
 * 4 (64, 4, yes), 5 (32, 2, yes), 6 (32, 1, yes), 7 (32, 1 / 2 / 4 for M <= 2 / <= 4 / more, yes: the
 * product), 8 (32, 1 / 2 / 4 for M <= 4 / <= 8 / more, yes, and the R stash), 9 = the grid-synchronised
 * kernel at M <= 2, else 7. Variants with the same columns per CTA give the same bits.
 */
#include "ops/cuda/dic_common.cuh"
#include "lab_lean.cuh"
#include "ops/cuda/dic_model.h"
#include "ops/cuda/dic_mhc_int.cuh"

#include <stdlib.h>
#include <string.h>

#include "mhc_lab.h"

/* ---- fused transition (ops.h di_hc_transition, batch_invariant == 0) ----
 * One launch: grid (S = d / HT_CW column slices, row tiles of HT_MT rows).
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

static __device__ unsigned int g_ht_cnt[HT_MAXT];

static __global__ void __launch_bounds__(HT_T) k_transition(const ht_args a) {
    __shared__ __align__(16) float sr[HT_MT][HC * HT_CW];
    __shared__ float smix[HT_MT][HT_NMIX];
    __shared__ float spre[HT_MT][HC];
    __shared__ double sred[HT_T / 32][HT_MT];
    __shared__ float srs[HT_MT];
    __shared__ int last_sh;
    const unsigned full = 0xFFFFFFFFu;
    const int t = threadIdx.x, warp = t >> 5, lane = t & 31;
    const int S = gridDim.x, s = blockIdx.x, tile = blockIdx.y;
    const int d = a.d, hcd = HC * d;
    const int i0 = s * HT_CW, m0 = tile * HT_MT;
    const int mt = min(HT_MT, a.M - m0);
    /* the fn slice: warp w takes mixes w, w + 8, w + 16; lane = (copy kc, 4 columns q) */
    const int kc = lane >> 3, q = lane & 7;
    float4 wv[HT_NMIX / 8];
#pragma unroll
    for (int u = 0; u < HT_NMIX / 8; u++)
        wv[u] = __ldg((const float4 *)(a.fn + (size_t)(warp + 8 * u) * hcd + (size_t)kc * d + i0 + 4 * q));
    DIC_PDL_ENTER();

    /* A: warp mm = row mm of the tile, lane = column */
    if (warp < HT_MT) {
        const int mm = warp, i = i0 + lane;
        float rv[HC] = {0.0f, 0.0f, 0.0f, 0.0f};
        double ss = 0.0;
        if (mm < mt) {
            const int m = m0 + mm;
            uint16_t *r = a.R + (size_t)m * a.ldr;
            ht_expand_col(a, m, i, d, r, rv);
#pragma unroll
            for (int j = 0; j < HC; j++) {
                const double v = rv[j];
                ss = __dadd_rn(ss, __dmul_rn(v, v));
            }
        }
#pragma unroll
        for (int j = 0; j < HC; j++) sr[mm][j * HT_CW + lane] = rv[j];
        for (int o = 16; o > 0; o >>= 1) ss = __dadd_rn(ss, __shfl_xor_sync(full, ss, o));
        if (lane == 0 && mm < mt) a.ssp[((size_t)tile * HT_MT + mm) * S + s] = ss;
    }
    __syncthreads();

    /* B: partial mixes */
#pragma unroll
    for (int u = 0; u < HT_NMIX / 8; u++) {
        const int n = warp + 8 * u;
#pragma unroll
        for (int mm = 0; mm < HT_MT; mm++) {
            const float4 r4 = *(const float4 *)&sr[mm][kc * HT_CW + 4 * q];
            float acc = __fmul_rn(wv[u].x, r4.x);
            acc = fmaf(wv[u].y, r4.y, acc);
            acc = fmaf(wv[u].z, r4.z, acc);
            acc = fmaf(wv[u].w, r4.w, acc);
            for (int o = 16; o > 0; o >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(full, acc, o));
            if (lane == 0 && mm < mt) a.part[(((size_t)tile * HT_MT + mm) * HT_NMIX + n) * S + s] = acc;
        }
    }

    /* arrival: the last CTA of the tile goes on */
    __threadfence();
    __syncthreads();
    if (t == 0) {
        const unsigned prev = atomicAdd(&g_ht_cnt[tile], 1u);
        last_sh = prev == (unsigned)S - 1;
        if (last_sh) g_ht_cnt[tile] = 0; /* ready for the next launch */
    }
    __syncthreads();
    if (!last_sh) return;
    __threadfence();

    /* C: the mixes (fixed order over the slices), the flatten rsqrt, the scaling */
    for (int o = warp; o < mt * HT_NMIX; o += HT_T / 32) {
        const int mm = o / HT_NMIX, n = o % HT_NMIX;
        const float *p = a.part + (((size_t)tile * HT_MT + mm) * HT_NMIX + n) * S;
        float v = 0.0f;
        for (int j = lane; j < S; j += 32) v = __fadd_rn(v, __ldcg(p + j));
        for (int o2 = 16; o2 > 0; o2 >>= 1) v = __fadd_rn(v, __shfl_xor_sync(full, v, o2));
        if (lane == 0) smix[mm][n] = v;
    }
    if (warp < mt) {
        const int mm = warp;
        const double *p = a.ssp + ((size_t)tile * HT_MT + mm) * S;
        double v = 0.0;
        for (int j = lane; j < S; j += 32) v = __dadd_rn(v, __ldcg(p + j));
        for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(full, v, o));
        if (lane == 0) srs[mm] = hc_mix_rs(v, hcd, a.rms_eps); /* k_scale_mixes' */
    }
    __syncthreads();
    for (int o = t; o < mt * HT_NMIX; o += HT_T) {
        const int mm = o / HT_NMIX, n = o % HT_NMIX;
        const float v = __fmul_rn(smix[mm][n], srs[mm]);
        smix[mm][n] = v;
        a.mixes[(size_t)(m0 + mm) * HT_NMIX + n] = v;
    }
    __syncthreads();

    /* D: Sinkhorn, 16 lanes per row (whole warps: surplus groups redo the last row) */
    if (t < 16 * HT_MT) {
        const int g = t >> 4, mm = g < mt ? g : mt - 1;
        const size_t m = (size_t)(m0 + mm);
        sk_group(t & 15, smix[mm], a.scale3, a.base, a.iters, a.hc_eps, g < mt, a.pre + m * HC, a.post + m * HC,
                 a.comb + m * HC * HC);
    }
    __syncthreads();
    if (t < mt * HC) { /* the collapse's pre: this site's, or (chain) the carried one, then carry this site's */
        const size_t i = (size_t)m0 * HC + t;
        const float p = a.pre[i];
        if (a.pre_in) {
            spre[t / HC][t % HC] = a.pre_in[i];
            a.pre_in[i] = p;
        } else {
            spre[t / HC][t % HC] = p;
        }
    }
    __syncthreads();

    /* E: collapse (bf16 x) and RMSNorm (bf16 xn), rows of the tile */
    const int nv = d / 8;
    uint4 xv[HT_MT][HT_VMAX];
    double ssq[HT_MT];
#pragma unroll
    for (int mm = 0; mm < HT_MT; mm++) {
        ssq[mm] = 0.0;
        if (mm < mt) {
            const uint16_t *r = a.R + (size_t)(m0 + mm) * a.ldr;
            uint16_t *xo = a.xo + (size_t)(m0 + mm) * a.ldx;
            const float p[HC] = {spre[mm][0], spre[mm][1], spre[mm][2], spre[mm][3]};
#pragma unroll
            for (int j = 0; j < HT_VMAX; j++) {
                const int iv = t + j * HT_T;
                xv[mm][j] = make_uint4(0, 0, 0, 0);
                if (iv < nv) {
                    float rr[HC][8], o[8];
#pragma unroll
                    for (int k = 0; k < HC; k++) unpack8(__ldcg((const uint4 *)(r + (size_t)k * d + 8 * iv)), rr[k]);
#pragma unroll
                    for (int e = 0; e < 8; e++) o[e] = collapse1(p, rr[0][e], rr[1][e], rr[2][e], rr[3][e]);
                    const uint4 pk = pack8(o);
                    xv[mm][j] = pk;
                    *(uint4 *)(xo + 8 * iv) = pk;
                    float xf[8];
                    unpack8(pk, xf);
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        const double v = xf[e];
                        ssq[mm] = __dadd_rn(ssq[mm], __dmul_rn(v, v));
                    }
                }
            }
        }
    }
#pragma unroll
    for (int mm = 0; mm < HT_MT; mm++) {
        double v = ssq[mm];
        for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(full, v, o));
        if (lane == 0) sred[warp][mm] = v;
    }
    __syncthreads();
    if (t < mt) { /* k_rmsnorm's thread 0, row t */
        const int mm = t;
        double sum = sred[0][mm];
        for (int w = 1; w < HT_T / 32; w++) sum = __dadd_rn(sum, sred[w][mm]);
        srs[mm] = dic_rms_scale(sum, a.xo + (size_t)(m0 + mm) * a.ldx, d, a.norm_eps);
    }
    __syncthreads();
    const float *w = a.norm_w;
#pragma unroll
    for (int mm = 0; mm < HT_MT; mm++) {
        if (mm >= mt) continue;
        const float rsq = srs[mm];
        uint16_t *y = a.xn + (size_t)(m0 + mm) * a.ldx;
#pragma unroll
        for (int j = 0; j < HT_VMAX; j++) {
            const int iv = t + j * HT_T;
            if (iv >= nv) continue;
            const uint32_t qq[4] = {xv[mm][j].x, xv[mm][j].y, xv[mm][j].z, xv[mm][j].w};
            uint32_t o[4];
#pragma unroll
            for (int h = 0; h < 4; h++) {
                float lo = __fmul_rn(dic_bf16_to_f32((uint16_t)(qq[h] & 0xFFFFu)), rsq);
                float hi = __fmul_rn(dic_bf16_to_f32((uint16_t)(qq[h] >> 16)), rsq);
                if (w) lo = __fmul_rn(w[8 * iv + 2 * h], lo), hi = __fmul_rn(w[8 * iv + 2 * h + 1], hi);
                o[h] = (uint32_t)dic_f32_to_bf16(lo) | ((uint32_t)dic_f32_to_bf16(hi) << 16);
            }
            *(uint4 *)(y + 8 * iv) = make_uint4(o[0], o[1], o[2], o[3]);
        }
    }
}


/* ---- fused transition, second version (k_transition2) -------------------
 * The same work and the same rounding points as k_transition, with a shorter
 * serial tail (docs/kernels/mhc.md, "next steps"):
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
/* ET = 1 (variant 8, the transition only, NMIX = HT_NMIX; docs/kernels/mhc.md session 8): the same arithmetic with a
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

/* LEAN = 1: the decode step's instantiation (code size, docs/cuda-backend.md §7): at most 2 rows per tile (the host's
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
    DIC_STAMP_PHASE(301); /* block 0: expand done (R written, values in shared) */
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
    DIC_STAMP_PHASE(302); /* block 0: partials issued */
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
        DIC_STAMP_PHASE(303); /* block 0: arrival counted */
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
        DIC_STAMP_PHASE(303); /* block 0: arrival counted */
        if (!last_sh) return;
        __threadfence();
    }
    if (t == 0) DIC_STAMP_MARK(311); /* the last CTA: handoff passed */
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
        /* P outputs per rolled round (code size, docs/cuda-backend.md §7); the next round's loads are issued before this
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
        if (t == 0) DIC_STAMP_MARK(312); /* the last CTA: mixes summed and scaled */
    }

    /* D: Sinkhorn on warps 0-1 (16 lanes per row; surplus groups redo the last row); not in the head */
    const int ovl = !HEAD && (LEAN || a.ovl);
    const int nE = ovl ? H2_T - 64 : H2_T;
    if (!HEAD && t < 64) {
        const int g = t >> 4, mm = g < mt ? g : mt - 1;
        const size_t m = (size_t)(m0 + mm);
        sk_group(t & 15, smix[mm], a.scale3, a.base, a.iters, a.hc_eps, g < mt, NULL, a.post + m * HC,
                 a.comb + m * HC * HC, ET);
        if (t == 0) DIC_STAMP_MARK(313); /* the last CTA: Sinkhorn done (post / comb stores issued) */
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
    /* one item (8 columns of a row) per rolled step (code size, docs/cuda-backend.md §7); without ET the next item's four R
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
    if (te == 0) DIC_STAMP_MARK(314); /* the last CTA: collapse done (x stored, sums of squares in shared) */
    if (te < mt) { /* k_rmsnorm's thread 0, row te */
        const int mm = te;
        double sum = sred[0][mm];
#pragma unroll 1
        for (int wi = 1; wi < nE / 32; wi++) sum = __dadd_rn(sum, sred[wi][mm]);
        srs[mm] = dic_rms_scale<LEAN>(sum, a.xo + (size_t)(m0 + mm) * a.ldx, d, a.norm_eps);
    }
    h2_bar(nE);
    if (te == 0) DIC_STAMP_MARK(315); /* the last CTA: RMSNorm scale */
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
    if (te == 0) DIC_STAMP_MARK(316); /* the last CTA: xn stores issued (the kernel's end, with 313) */
}

/* Variants (lab_hc_transition_variant, $DEEPINFER_HC_TRANSITION): 0 = k_transition (the first version);
 * else k_transition2 with (columns per CTA, rows per tile, Sinkhorn beside the collapse, ET). */
static const struct {
    int cw, mt, ovl, et;
} ht_var[LAB_HT_NVAR] = {{32, 4, 0, 0}, {32, 4, 1, 0}, {32, 4, 0, 0}, {16, 4, 1, 0}, {64, 4, 1, 0},
                          {32, 2, 1, 0}, {32, 1, 1, 0}, {32, 0, 1, 0}, {32, -1, 1, 1}, {32, 0, 1, 0}};
/* variant 9: k_transition_gs (dic_mhc_gridsync.cu) at M <= 2, else variant 7 (the table row) */
/* mt 0: by M (ht_auto_mt); -1: ht8_mt */
static int g_ht_variant = -1;

/* Variant 7's rows per tile: one wave of at most 2 * (d / 32) CTAs (2 CTAs per SM fit: 128 registers) while
 * the last CTA's collapse items stay <= 2 passes: 1 row at M <= 2, 2 at M <= 4, else 4. */
static int ht_auto_mt(int M) { return M <= 2 ? 1 : M <= 4 ? 2 : 4; }

/* Variant 8's rows per tile: 1 up to M = 4 (v6 measured 13.9 us at M = 4 against v7's 15.1: 512 CTAs, but each
 * last CTA's tail covers one row and its R stash fits), 2 up to 8 (v5 18.1 vs v7 20.8), else 4. ET (the R stash
 * in dynamic shared memory) when the tile's R rows take <= HT8_STASH bytes, else the same kernel without it. */
static int ht8_mt(int M) { return M <= 4 ? 1 : M <= 8 ? 2 : 4; }
#define HT8_STASH 32768

/* The stash cap in bytes: HT8_STASH, or $DEEPINFER_HC_STASH (read once; 0 = variant 8 without ET, for an A/B
 * of the 32 KB of dynamic shared memory per CTA, which may keep the kernel from starting beside its
 * predecessor; at most HT8_STASH: static + dynamic shared memory stay under 48 KB). */
static size_t ht8_stash_cap(void) {
    static long cap = -1;
    if (cap < 0) {
        cap = HT8_STASH;
    }
    return (size_t)cap;
}

extern "C" int lab_hc_transition_variant(int v) {
    if (g_ht_variant < 0) {
        g_ht_variant = LAB_HT_DEFAULT;
    }
    if (v >= 0 && v < LAB_HT_NVAR) g_ht_variant = v;
    return g_ht_variant;
}

/* scratch for the partials: sized for the smallest CW of any variant (16) */
static size_t ht_part_bytes(int d) {
    return ((size_t)HT_MAXT * HT_MT * HT_NMIX * (size_t)(d / 16) * sizeof(float) + 255) & ~(size_t)255;
}

extern "C" int lab_hc_transition_ok(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int d, int fn_n,
                                    int fn_k, const void *fn, const uint16_t *xo, const uint16_t *xn, size_t ldx) {
    if (M <= 0 || d <= 0 || d % 64 || d > 8 * HT_VMAX * HT_T || fn_n != HT_NMIX || fn_k != HC * d) return 0;
    if (ldr < (size_t)HC * d || ldx < (size_t)d || ldr % 8 || ldx % 8) return 0;
    if ((((uintptr_t)R) | ((uintptr_t)xo) | ((uintptr_t)xn) | ((uintptr_t)fn)) & 15) return 0;
    return c->scratch && ht_part_bytes(d) + (size_t)HT_MAXT * HT_MT * (size_t)(d / 16) * sizeof(double) <=
                             c->scratch_cap;
}

extern "C" cudaError_t lab_hc_transition(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, uint16_t *R,
                                         size_t ldr, int d, const float *fn, const float *scale3, const float *base,
                                         int iters, float hc_eps, float rms_eps, float *mixes, float *pre, float *post,
                                         float *comb, float *pre_in, const float *norm_w, float norm_eps, uint16_t *xo,
                                         uint16_t *xn, size_t ldx) {
    const int v = lab_hc_transition_variant(-1), cw = ht_var[v].cw;
    const int mtr = ht_var[v].mt > 0 ? ht_var[v].mt : ht_var[v].mt < 0 ? ht8_mt(M) : ht_auto_mt(M);
    const int S = d / cw;
    const size_t stash = (size_t)mtr * HC * (size_t)d * 2;
    const int et = ht_var[v].et && stash <= ht8_stash_cap();
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
        a.fn = fn, a.scale3 = scale3, a.base = base, a.iters = iters, a.hc_eps = hc_eps, a.rms_eps = rms_eps;
        a.mixes = mixes + ro * HT_NMIX, a.pre = pre + ro * HC, a.post = post + ro * HC, a.comb = comb + ro * HC * HC;
        a.pre_in = pre_in ? pre_in + ro * HC : NULL;
        a.norm_w = norm_w, a.norm_eps = norm_eps;
        a.xo = xo + ro * ldx, a.xn = xn + ro * ldx, a.ldx = ldx;
        a.part = part, a.ssp = ssp, a.mtr = mtr, a.ovl = ht_var[v].ovl;
        if (v == 9 && M <= 2) { /* the ssp region holds 4 d doubles: ssp rows 0-1, then ssx (S = d / 32 each) */
            a.mtr = M;
            const cudaError_t e = lab_hc_transition_gs(c, &a, ssp + 2 * (size_t)(d / 32));
            if (e != cudaErrorNotSupported) return e;
            a.mtr = mtr;
        }
        dim3 grid((unsigned)S, (unsigned)((mc + mtr - 1) / mtr));
        if (v == 0) DIC_LAUNCH(k_transition, grid, HT_T, 0, c->stream, a);
        else if (cw == 16) DIC_LAUNCH((k_transition2<16, HT_NMIX>), grid, H2_T, 0, c->stream, a);
        else if (cw == 32 && et) DIC_LAUNCH((k_transition2<32, HT_NMIX, 1>), grid, H2_T, stash, c->stream, a);
        else if (cw == 32 && a.ovl && mtr <= 2 && !dic_lean_off()) DIC_LAUNCH((k_transition2<32, HT_NMIX, 0, 1>), grid, H2_T, 0, c->stream, a);
        else if (cw == 32) DIC_LAUNCH((k_transition2<32, HT_NMIX>), grid, H2_T, 0, c->stream, a);
        else DIC_LAUNCH((k_transition2<64, HT_NMIX>), grid, H2_T, 0, c->stream, a);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

/* ---- fused output head (ops.h di_hc_head_final, batch_invariant == 0) ----
 * k_transition2 with NMIX = HC (V4: the head's 4 mixes, scale_mixes and
 * head_pre in place of the Sinkhorn) or NMIX = 0 (V4.1: the carried pre, no
 * mixes): the last block's expand (sub != NULL), then the collapse and the
 * final RMSNorm, one launch per HT_MAXT tiles. Same bits as the transition's
 * paths: R, x, xn and pre are the sequence's for the kernel's mixes; the
 * mixes' fp32 order depends on CW and d only (a row's bits do not depend on
 * M). Columns per CTA: lab_hc_head_cw (64 by default). */
static int g_hh_cw = 0;

extern "C" int lab_hc_head_cw(int cw) {
    if (!g_hh_cw) {
        g_hh_cw = 64;
    }
    if (cw == 32 || cw == 64) g_hh_cw = cw;
    return g_hh_cw;
}

extern "C" int lab_hc_head_ok(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int d, int fn_n, int fn_k,
                              const void *fn, const uint16_t *xo, const uint16_t *xn, size_t ldx) {
    if (M <= 0 || d <= 0 || d % 64 || d > 8 * HT_VMAX * HT_T) return 0;
    if (fn ? fn_n != HC || fn_k != HC * d : fn_n != 0) return 0;
    if (ldr < (size_t)HC * d || ldx < (size_t)d || ldr % 8 || ldx % 8) return 0;
    if ((((uintptr_t)R) | ((uintptr_t)xo) | ((uintptr_t)xn) | ((uintptr_t)fn)) & 15) return 0;
    return c->scratch && ht_part_bytes(d) + (size_t)HT_MAXT * HT_MT * (size_t)(d / 16) * sizeof(double) <=
                             c->scratch_cap;
}

extern "C" cudaError_t lab_hc_head(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, const float *post,
                                   const float *comb, uint16_t *R, size_t ldr, int d, const float *fn, float scale0,
                                   const float *base, float hc_eps, float rms_eps, float *mixes, float *pre,
                                   const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx) {
    const int cw = lab_hc_head_cw(0), mtr = ht_auto_mt(M), S = d / cw;
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
        if (cw == 32 && fn) DIC_LAUNCH((k_transition2<32, HC>), grid, H2_T, 0, c->stream, a);
        else if (cw == 32) DIC_LAUNCH((k_transition2<32, 0>), grid, H2_T, 0, c->stream, a);
        else if (fn && mtr <= 2 && !dic_lean_off()) DIC_LAUNCH((k_transition2<64, HC, 0, 1>), grid, H2_T, 0, c->stream, a);
        else if (fn) DIC_LAUNCH((k_transition2<64, HC>), grid, H2_T, 0, c->stream, a);
        else DIC_LAUNCH((k_transition2<64, 0>), grid, H2_T, 0, c->stream, a);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
