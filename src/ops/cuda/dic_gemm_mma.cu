/*
 * dic_gemm_mma.cu — FP8 / FP4 weight GEMMs on the tensor cores (mma.sync
 * m16n8k32 e4m3 x e4m3 -> fp32, sm_89 and later: runs on sm_90a and
 * sm_100a). The activations come quantised (dic_gemm_quant.cu); FP4 weights
 * are widened to e4m3 in registers (every e2m1 value is an e4m3 value).
 *
 * Numerics (ops.h di_gemm, docs/architecture.md §3.2): per output, per K-block of
 * kb = min(act_block, B) (FP8) or 32 (FP4) the tensor cores form the
 * partial P (exact products, hardware accumulation order); then
 * C = fma(P, s_act * s_w, C) as the CPU's AVX-512 kernel does. Blocks are
 * visited in increasing k inside a warp; the small-M kernel splits the
 * blocks over 8 warps and adds the 8 warp sums in warp order, so the result
 * is deterministic (it does not depend on the launch or on the data of
 * other rows) but is not the CPU's bits.
 *
 * Fragment mapping: within each 32-k step, thread (g = lane/4, t = lane%4)
 * holds the 8 consecutive k = 8t .. 8t+7 of its A row(s) and W column: the
 * hardware's k slots 4t..4t+3 take 8t..8t+3 and slots 16+4t.. take
 * 8t+4..8t+7. A and W use the same permutation, so the sum is the same and
 * each thread reads 8 contiguous bytes per row.
 *
 * Two kernels:
 *  - small M (decode, <= 16 rows per tile): a CTA owns 32 output columns and
 *    all K; its 8 warps take K chunks of 128 round-robin, stage their
 *    32 x 128 weight chunk through shared memory (16-byte coalesced loads,
 *    next chunk prefetched into registers), so each weight byte is read
 *    once from memory;
 *  - tiles (prefill): 64 x 128 output tiles, 8 warps of 32 x 32, A and W
 *    chunks of 128 k staged in shared memory with a register prefetch.
 * Grouped launches (routed experts) map blockIdx.y to (expert, row tile)
 * from the device array off[], so the grid is fixed by max_rows and E.
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_gemm_tiles.cuh"

#define CH 128   /* k per staged chunk */
#define SROW 160 /* staged row stride, bytes: 8-byte fragment reads hit 32 distinct banks per half warp */

typedef struct qargs {
    int E, fmt, N, K, wblock, act_block, kb, M;
    int lab, lwb, spb_m1; /* log2(act_block), log2(wblock) (FP4: 5), kb / 32 - 1: no runtime division in the kernels */
    int nwb;              /* K / wblock: weight-scale blocks per row of blocks */
    const int *off, *rows;
    const uint8_t *q;
    size_t ldq;
    const float *sa;
    int nsa;
    float *C32;
    uint16_t *C16;
    size_t ldc;
} qargs;

static __device__ __forceinline__ void mma_e4m3(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* 8 e2m1 nibbles (element j in bits 4j..4j+3) -> 8 e4m3 bytes, exact. */
static __device__ __forceinline__ uint2 e2m1x8_to_e4m3(uint32_t w) {
    const uint32_t lo = 0x3C383000u, hi = 0x4C484440u; /* 0 .5 1 1.5 | 2 3 4 6 */
    uint32_t m0 = __byte_perm(lo, hi, w & 0x7777u), m1 = __byte_perm(lo, hi, (w >> 16) & 0x7777u);
    uint32_t s0 = __byte_perm(0x8000u, 0u, (w >> 3) & 0x1111u), s1 = __byte_perm(0x8000u, 0u, (w >> 19) & 0x1111u);
    return make_uint2(m0 | s0, m1 | s1);
}

static __device__ __forceinline__ void store_fp4_unit(uint8_t *dst, uint4 v) {
    uint2 a = e2m1x8_to_e4m3(v.x), b = e2m1x8_to_e4m3(v.y), c = e2m1x8_to_e4m3(v.z), d = e2m1x8_to_e4m3(v.w);
    *(uint4 *)dst = make_uint4(a.x, a.y, b.x, b.y);
    *(uint4 *)(dst + 16) = make_uint4(c.x, c.y, d.x, d.y);
}

/* Row tile y of the launch: rows [i0, i1) of expert e (plain: e = 0).
 * Grouped: tiles are numbered expert by expert, ceil(rows_e / BM) each;
 * warp 0 scans off[] 32 experts at a time. Returns 0 when y is past the
 * last tile (the whole CTA exits). */
static __device__ int tile_rows(const qargs &a, int BM, int y, int *info /* smem [3] */) {
    return dic_grouped_tile_rows(a.off, a.E, a.M, BM, y, info);
}

static __device__ __forceinline__ float e8m0f(uint8_t b) { return dic_e8m0_to_f32(b); }

static __device__ __forceinline__ void store_out(const qargs &a, int i, int n, float v) {
    size_t r = (size_t)(a.rows ? a.rows[i] : i);
    if (a.C32) a.C32[r * a.ldc + n] = v;
    else a.C16[r * a.ldc + n] = dic_f32_to_bf16(v);
}

/* ---- small M --------------------------------------------------------------- */

/* CTA: 4 warps, 32 output columns (warp w: the n8 tile n0 + 8w) x <= 16 rows.
 * split: blockIdx.z = the K group; the CTA stages its 32 x 512 weight slab
 * (16-byte loads, all issued before any use: 16 KB FP8 / 8 KB FP4 in flight
 * per CTA, 2-4k CTAs at V4 sizes) and writes the group's fp32 partial; the
 * CTA that arrives last for its output tile (counter in the scratch, zeroed
 * by the quantisation kernel) adds the partials in group order.
 * !split: the CTA walks every group itself (next group prefetched into
 * registers), same arithmetic. */
#define S_WARPS 4
#define S_SR (DIC_GEMM_KG + 32) /* staged row stride: 8-byte fragment reads conflict-free per half warp */

static __global__ void __launch_bounds__(128, 5) k_gemm_q_small(const qargs a, const __grid_constant__ dic_gemm_wtab wt,
                                                            float *part, int *cnt, int split) {
    DIC_PDL_ENTER();
    __shared__ __align__(16) uint8_t sw[S_WARPS][8 * S_SR]; /* 17 KB: each warp's 8 x 512 weight slab (e4m3) */
    __shared__ __align__(16) uint8_t sq[16 * S_SR];         /* 8.5 KB: the 16 rows' activations of the group */
    __shared__ float ssa[16][DIC_GEMM_KG / 32];              /* activation scales of the group */
    __shared__ float sws[DIC_GEMM_SBN][DIC_GEMM_KG / 32];    /* weight scales (FP8: row 0 only) */
    __shared__ int info[3];
    __shared__ int last;
    if (!tile_rows(a, 16, blockIdx.y, info)) return;
    const int e = info[0], i0 = info[1], i1 = info[2], nr = i1 - i0;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * DIC_GEMM_SBN, nw = n0 + 8 * warp, N = a.N, K = a.K, fp4 = a.fmt == 3;
    const uint8_t *W = (const uint8_t *)wt.w[e], *S = wt.s[e];
    const int ng = (K + DIC_GEMM_KG - 1) / DIC_GEMM_KG;
    const int ia = i0 + g, ib = i0 + g + 8, va = ia < i1, vb = ib < i1;
    const size_t wrow = fp4 ? (size_t)K / 2 : (size_t)K;
    uint8_t *mys = sw[warp];
    const int c0 = nw + 2 * t; /* this thread's output columns c0, c0 + 1 */
    const int g_first = split ? (int)blockIdx.z : 0, g_end = split ? g_first + 1 : ng;
    const int nab = DIC_GEMM_KG >> a.lab; /* activation blocks per group */
    const int lab = a.lab, lwb = a.lwb, spb_m1 = a.spb_m1;

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint4 reg[8];
    /* group gg's slab rows nw..nw+7: FP8 lane l takes bytes 16l of row i; FP4 units u = l + 32i: row u/16, packed 16(u%16) */
#define S_LOAD(gg)                                                                                  \
    do {                                                                                            \
        const int kg_ = (gg) * DIC_GEMM_KG;                                                         \
        if (!fp4) {                                                                                 \
            _Pragma("unroll") for (int i = 0; i < 8; i++) {                                         \
                int col = lane * 16;                                                                \
                reg[i] = make_uint4(0, 0, 0, 0);                                                    \
                if (nw + i < N && kg_ + col < K)                                                    \
                    reg[i] = __ldg((const uint4 *)(W + (size_t)(nw + i) * wrow + kg_ + col));       \
            }                                                                                       \
        } else {                                                                                    \
            _Pragma("unroll") for (int i = 0; i < 4; i++) {                                         \
                int u = lane + 32 * i, r = u >> 4, cp = (u & 15) * 16;                              \
                reg[i] = make_uint4(0, 0, 0, 0);                                                    \
                if (nw + r < N && kg_ + 2 * cp < K)                                                 \
                    reg[i] = __ldg((const uint4 *)(W + (size_t)(nw + r) * wrow + kg_ / 2 + cp));    \
            }                                                                                       \
        }                                                                                           \
    } while (0)

    S_LOAD(g_first);
    for (int gi = g_first; gi < g_end; gi++) {
        const int kg = gi * DIC_GEMM_KG, nsteps = min(DIC_GEMM_KG, K - kg) / 32;
        /* the group's activations, activation scales and weight scales: all loads issued before any use */
        uint4 ra[4];
        float fa[2];
        uint32_t wsb[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int u = tid + 128 * j, r = u >> 5, cb = (u & 31) * 16;
            ra[j] = make_uint4(0, 0, 0, 0);
            if (r < nr && kg + cb < K) ra[j] = *(const uint4 *)(a.q + (size_t)(i0 + r) * a.ldq + kg + cb);
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            int u = tid + 128 * j, r = u >> 4, b = u & 15;
            fa[j] = 0.0f;
            if (r < nr && b < nab && kg + (b << lab) < K) fa[j] = a.sa[(size_t)(i0 + r) * a.nsa + (kg >> lab) + b];
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int u = tid + 128 * j, col = u >> 4, b = u & 15;
            wsb[j] = 0;
            if (fp4) {
                if (n0 + col < N && kg + 32 * b < K) wsb[j] = S[(size_t)(n0 + col) * (K / 32) + kg / 32 + b];
            } else if (col == 0 && b < (DIC_GEMM_KG >> lwb) && kg + (b << lwb) < K) {
                wsb[j] = S[(size_t)(n0 >> lwb) * (size_t)a.nwb + (kg >> lwb) + b];
            }
        }
        if (gi != g_first) __syncthreads(); /* the previous group's readers are done */
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int u = tid + 128 * j;
            *(uint4 *)(sq + (u >> 5) * S_SR + (u & 31) * 16) = ra[j];
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            int u = tid + 128 * j;
            ssa[u >> 4][u & 15] = fa[j];
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int u = tid + 128 * j;
            sws[u >> 4][u & 15] = e8m0f((uint8_t)wsb[j]);
        }
        if (!fp4) {
#pragma unroll
            for (int i = 0; i < 8; i++) *(uint4 *)(mys + i * S_SR + lane * 16) = reg[i];
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int u = lane + 32 * i;
                store_fp4_unit(mys + (u >> 4) * S_SR + (u & 15) * 32, reg[i]);
            }
        }
        __syncthreads();
        if (gi + 1 < g_end) S_LOAD(gi + 1);
        float tot[4] = {0.0f, 0.0f, 0.0f, 0.0f}, P[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int st = 0; st < DIC_GEMM_KG / 32; st++) {
            if (st < nsteps) {
                const uint2 A0 = *(const uint2 *)(sq + g * S_SR + 32 * st + 8 * t);
                const uint2 A1 = *(const uint2 *)(sq + (g + 8) * S_SR + 32 * st + 8 * t);
                const uint2 B = *(const uint2 *)(mys + g * S_SR + 32 * st + 8 * t);
                mma_e4m3(P, A0.x, A1.x, A0.y, A1.y, B.x, B.y);
                if (((st + 1) & spb_m1) == 0) { /* K-block complete (kb divides KG): C_g = fma(P, s_act * s_w, C_g) */
                    const int kbs = 32 * (st - spb_m1); /* the block's first k within the group */
                    const float s0 = ssa[g][kbs >> lab], s1 = ssa[g + 8][kbs >> lab];
                    float w0, w1;
                    if (!fp4) {
                        w0 = w1 = sws[0][kbs >> lwb];
                    } else {
                        w0 = sws[8 * warp + 2 * t][st - spb_m1];
                        w1 = sws[8 * warp + 2 * t + 1][st - spb_m1];
                    }
                    tot[0] = fmaf(P[0], s0 * w0, tot[0]);
                    tot[1] = fmaf(P[1], s0 * w1, tot[1]);
                    tot[2] = fmaf(P[2], s1 * w0, tot[2]);
                    tot[3] = fmaf(P[3], s1 * w1, tot[3]);
                    P[0] = P[1] = P[2] = P[3] = 0.0f;
                }
            }
        }
        if (gi == g_first) {
#pragma unroll
            for (int j = 0; j < 4; j++) acc[j] = tot[j];
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++) acc[j] = __fadd_rn(acc[j], tot[j]);
        }
    }
#undef S_LOAD
    if (split) { /* acc holds group g_first's partial (acc = tot above) */
        const size_t gs = (size_t)a.M * N;
        float *pg = part + (size_t)g_first * gs;
        if (va && c0 < N) pg[(size_t)ia * N + c0] = acc[0];
        if (va && c0 + 1 < N) pg[(size_t)ia * N + c0 + 1] = acc[1];
        if (vb && c0 < N) pg[(size_t)ib * N + c0] = acc[2];
        if (vb && c0 + 1 < N) pg[(size_t)ib * N + c0 + 1] = acc[3];
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            int *ctr = cnt + (size_t)blockIdx.y * gridDim.x + blockIdx.x;
            last = atomicAdd(ctr, 1) == ng - 1;
            if (last) *ctr = 0;
        }
        __syncthreads();
        if (!last) return;
        __threadfence();
        int ri[4] = {ia, ia, ib, ib}, ci[4] = {c0, c0 + 1, c0, c0 + 1}, vi[4] = {va, va, vb, vb};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (!vi[j] || ci[j] >= N) continue;
            const float *p = part + (size_t)ri[j] * N + ci[j];
            float v = 0.0f;
            for (int g0 = 0; g0 < ng; g0 += 8) { /* 8 loads in flight, then the adds in group order */
                float pv[8];
#pragma unroll
                for (int u = 0; u < 8; u++) pv[u] = g0 + u < ng ? __ldcg(p + (size_t)(g0 + u) * gs) : 0.0f;
#pragma unroll
                for (int u = 0; u < 8; u++)
                    if (g0 + u < ng) v = g0 + u == 0 ? pv[0] : __fadd_rn(v, pv[u]);
            }
            store_out(a, ri[j], ci[j], v);
        }
        return;
    }
    if (va && c0 < N) store_out(a, ia, c0, acc[0]);
    if (va && c0 + 1 < N) store_out(a, ia, c0 + 1, acc[1]);
    if (vb && c0 < N) store_out(a, ib, c0, acc[2]);
    if (vb && c0 + 1 < N) store_out(a, ib, c0 + 1, acc[3]);
}

/* ---- tiles ------------------------------------------------------------------ */

#define T_BM 64
#define T_BN 128

static __global__ void __launch_bounds__(256) k_gemm_q_tile(const qargs a, const __grid_constant__ dic_gemm_wtab wt) {
    DIC_PDL_ENTER();
    __shared__ __align__(16) uint8_t sA[T_BM * SROW]; /* 10 KB */
    __shared__ __align__(16) uint8_t sW[T_BN * SROW]; /* 20 KB */
    __shared__ float ssc[T_BN][4];
    __shared__ int info[3];
    if (!tile_rows(a, T_BM, blockIdx.y, info)) return;
    const int e = info[0], i0 = info[1], i1 = info[2];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int wm = warp >> 2, wn = warp & 3; /* warp tile: rows wm*32.., cols wn*32.. */
    const int n0 = blockIdx.x * T_BN, N = a.N, K = a.K, fp4 = a.fmt == 3;
    const uint8_t *W = (const uint8_t *)wt.w[e], *S = wt.s[e];
    const int nch = (K + CH - 1) / CH;
    const size_t wrow = fp4 ? (size_t)K / 2 : (size_t)K;
    const int lab = a.lab, lwb = a.lwb, spb_m1 = a.spb_m1;
    /* FP8: this warp's row of weight-scale blocks */
    const uint8_t *wsr8 = fp4 ? NULL : S + (size_t)((n0 + wn * 32) >> lwb) * (size_t)a.nwb;

    float tot[2][4][4], P[2][4][4], acc[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) tot[mi][i][j] = P[mi][i][j] = acc[mi][i][j] = 0.0f;

    uint4 ra[2], rw[4];
    uint32_t screg = 0;
#define T_LOAD(c)                                                                                   \
    do {                                                                                            \
        int kc_ = (c) * CH;                                                                         \
        _Pragma("unroll") for (int i = 0; i < 2; i++) {                                             \
            int u = tid + 256 * i, r = u >> 3, col = (u & 7) * 16;                                  \
            ra[i] = make_uint4(0, 0, 0, 0);                                                         \
            if (i0 + r < i1 && kc_ + col < K) ra[i] = *(const uint4 *)(a.q + (size_t)(i0 + r) * a.ldq + kc_ + col); \
        }                                                                                           \
        if (!fp4) {                                                                                 \
            _Pragma("unroll") for (int i = 0; i < 4; i++) {                                         \
                int u = tid + 256 * i, r = u >> 3, col = (u & 7) * 16;                              \
                rw[i] = make_uint4(0, 0, 0, 0);                                                     \
                if (n0 + r < N && kc_ + col < K)                                                    \
                    rw[i] = __ldg((const uint4 *)(W + (size_t)(n0 + r) * wrow + kc_ + col));        \
            }                                                                                       \
        } else {                                                                                    \
            _Pragma("unroll") for (int i = 0; i < 2; i++) {                                         \
                int u = tid + 256 * i, r = u >> 2, cp = (u & 3) * 16;                              \
                rw[i] = make_uint4(0, 0, 0, 0);                                                     \
                if (n0 + r < N && kc_ + 2 * cp < K)                                                 \
                    rw[i] = __ldg((const uint4 *)(W + (size_t)(n0 + r) * wrow + kc_ / 2 + cp));     \
            }                                                                                       \
            screg = 0;                                                                              \
            if (tid < T_BN && n0 + tid < N)                                                         \
                _Pragma("unroll") for (int j = 0; j < 4; j++) if (kc_ + 32 * j < K) screg |=        \
                    (uint32_t)S[(size_t)(n0 + tid) * (K / 32) + kc_ / 32 + j] << (8 * j);           \
        }                                                                                           \
    } while (0)

    T_LOAD(0);
    for (int c = 0; c < nch; c++) {
        const int kc = c * CH, nsteps = min(CH, K - kc) / 32;
        __syncthreads(); /* the previous chunk's readers are done */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int u = tid + 256 * i;
            *(uint4 *)(sA + (u >> 3) * SROW + (u & 7) * 16) = ra[i];
        }
        if (!fp4) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int u = tid + 256 * i;
                *(uint4 *)(sW + (u >> 3) * SROW + (u & 7) * 16) = rw[i];
            }
        } else {
#pragma unroll
            for (int i = 0; i < 2; i++) {
                int u = tid + 256 * i;
                store_fp4_unit(sW + (u >> 2) * SROW + (u & 3) * 32, rw[i]);
            }
            if (tid < T_BN)
#pragma unroll
                for (int j = 0; j < 4; j++) ssc[tid][j] = e8m0f((uint8_t)(screg >> (8 * j)));
        }
        __syncthreads();
        if (c + 1 < nch) T_LOAD(c + 1);
#pragma unroll
        for (int s = 0; s < 4; s++) {
            if (s < nsteps) {
                uint2 Af[2][2];
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    Af[mi][0] = *(const uint2 *)(sA + (wm * 32 + mi * 16 + g) * SROW + 32 * s + 8 * t);
                    Af[mi][1] = *(const uint2 *)(sA + (wm * 32 + mi * 16 + g + 8) * SROW + 32 * s + 8 * t);
                }
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    uint2 B = *(const uint2 *)(sW + (wn * 32 + nt * 8 + g) * SROW + 32 * s + 8 * t);
#pragma unroll
                    for (int mi = 0; mi < 2; mi++)
                        mma_e4m3(P[mi][nt], Af[mi][0].x, Af[mi][1].x, Af[mi][0].y, Af[mi][1].y, B.x, B.y);
                }
                const int kend = kc + 32 * s + 32;
                if (((s + 1) & spb_m1) == 0) { /* K-block complete (kb divides CH) */
                    const int kbs = kend - 32 * (spb_m1 + 1);
                    float w8 = 0.0f;
                    if (!fp4) w8 = e8m0f(wsr8[kbs >> lwb]);
#pragma unroll
                    for (int mi = 0; mi < 2; mi++) {
                        int ra0 = i0 + wm * 32 + mi * 16 + g, rb0 = ra0 + 8;
                        float s0 = ra0 < i1 ? a.sa[(size_t)ra0 * a.nsa + (kbs >> lab)] : 0.0f;
                        float s1 = rb0 < i1 ? a.sa[(size_t)rb0 * a.nsa + (kbs >> lab)] : 0.0f;
#pragma unroll
                        for (int nt = 0; nt < 4; nt++) {
                            float w0 = w8, w1 = w8;
                            if (fp4) {
                                int jb = s; /* FP4: kb = 32, one block per step */
                                w0 = ssc[wn * 32 + nt * 8 + 2 * t][jb];
                                w1 = ssc[wn * 32 + nt * 8 + 2 * t + 1][jb];
                            }
                            tot[mi][nt][0] = fmaf(P[mi][nt][0], s0 * w0, tot[mi][nt][0]);
                            tot[mi][nt][1] = fmaf(P[mi][nt][1], s0 * w1, tot[mi][nt][1]);
                            tot[mi][nt][2] = fmaf(P[mi][nt][2], s1 * w0, tot[mi][nt][2]);
                            tot[mi][nt][3] = fmaf(P[mi][nt][3], s1 * w1, tot[mi][nt][3]);
                            P[mi][nt][0] = P[mi][nt][1] = P[mi][nt][2] = P[mi][nt][3] = 0.0f;
                        }
                    }
                    if ((kend & (DIC_GEMM_KG - 1)) == 0 || kend == K) { /* K group complete: C += C_g (dic_gemm_int.h) */
                        const int first = kend <= DIC_GEMM_KG;
#pragma unroll
                        for (int mi = 0; mi < 2; mi++)
#pragma unroll
                            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                                for (int j = 0; j < 4; j++) {
                                    acc[mi][nt][j] = first ? tot[mi][nt][j] : __fadd_rn(acc[mi][nt][j], tot[mi][nt][j]);
                                    tot[mi][nt][j] = 0.0f;
                                }
                    }
                }
            }
        }
    }
#undef T_LOAD
#pragma unroll
    for (int mi = 0; mi < 2; mi++) {
        int ra0 = i0 + wm * 32 + mi * 16 + g, rb0 = ra0 + 8;
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            int col = n0 + wn * 32 + nt * 8 + 2 * t;
            if (ra0 < i1) {
                if (col < N) store_out(a, ra0, col, acc[mi][nt][0]);
                if (col + 1 < N) store_out(a, ra0, col + 1, acc[mi][nt][1]);
            }
            if (rb0 < i1) {
                if (col < N) store_out(a, rb0, col, acc[mi][nt][2]);
                if (col + 1 < N) store_out(a, rb0, col + 1, acc[mi][nt][3]);
            }
        }
    }
}

/* ---- launcher --------------------------------------------------------------- */

extern "C" cudaError_t dic_gemm_q_launch(cudaStream_t st, int E, const dic_gemm_wtab *wt, int fmt, int N, int K,
                                         int wblock, int act_block, int M, const int *off, const int *rows,
                                         const uint8_t *q, const float *sa, float *part, int *cnt, float *C32,
                                         uint16_t *C16, size_t ldc, int path) {
    if (M <= 0 || N <= 0) return cudaSuccess;
    int kb = fmt == 2 ? (act_block < wblock ? act_block : wblock) : 32;
    if ((kb != 32 && kb != 64 && kb != 128) || K % kb || K % act_block || act_block % 32) return cudaErrorInvalidValue;
    if (fmt == 2 && wblock % 32) return cudaErrorInvalidValue;
    /* the K groups hold whole activation and weight blocks */
    if (act_block > DIC_GEMM_KG || DIC_GEMM_KG % act_block || (fmt == 2 && (wblock > DIC_GEMM_KG || DIC_GEMM_KG % wblock)))
        return cudaErrorInvalidValue;
    qargs a;
    a.E = E, a.fmt = fmt, a.N = N, a.K = K, a.wblock = wblock, a.act_block = act_block, a.kb = kb, a.M = M;
    a.off = off, a.rows = rows, a.q = q, a.ldq = dic_gemm_ldq(K), a.sa = sa, a.nsa = K / act_block;
    a.C32 = C32, a.C16 = C16, a.ldc = ldc;
    {
        const int wbl = fmt == 2 ? wblock : 32;
        if ((act_block & (act_block - 1)) || (wbl & (wbl - 1))) return cudaErrorInvalidValue; /* powers of two */
        a.lab = __builtin_ctz((unsigned)act_block), a.lwb = __builtin_ctz((unsigned)wbl), a.spb_m1 = kb / 32 - 1;
        a.nwb = K / wbl;
    }
    /* decode-sized row tiles (16 rows) read each weight byte once per tile;
     * every kernel here computes the same per-row sums (dic_gemm_int.h) */
    int small = off ? M <= 4 * E : M <= 64;
    if (path == DIC_GEMM_PATH_TILES) small = 0;
    /* FP8 prefill on sm_90a, when batch invariance is not asked for: the wgmma kernel (faster, other bits) */
    const int wg_ok = fmt == 2 && !off && dic_gemm_wgmma_usable(N, K);
    if (path == DIC_GEMM_PATH_WGMMA || (path == DIC_GEMM_PATH_FAST && !small && wg_ok)) {
        if (!wg_ok) return cudaErrorInvalidValue;
        return dic_gemm_q_wgmma_launch(st, wt->w[0], wt->s[0], N, K, wblock, act_block, kb, M, q, dic_gemm_ldq(K),
                                       sa, C32, C16, ldc, 0);
    }
    int BM = small ? 16 : T_BM, BN = small ? DIC_GEMM_SBN : T_BN;
    long long ty = (M + BM - 1) / BM + (off ? (E < M ? E : M) : 0);
    if (ty > 65535) return cudaErrorInvalidConfiguration;
    if (small) {
        int split = dic_gemm_ngroups(K) > 1 && M <= DIC_GEMM_SPLIT_MAXM;
        if (split && (!part || !cnt)) return cudaErrorInvalidValue;
        dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)ty, split ? (unsigned)dic_gemm_ngroups(K) : 1u);
        DIC_LAUNCH(k_gemm_q_small, grid, 128, 0, st, a, *wt, part, cnt, split);
    } else {
        dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)ty);
        DIC_LAUNCH(k_gemm_q_tile, grid, 256, 0, st, a, *wt);
    }
    DIC_LAUNCH_CHECK();
}
