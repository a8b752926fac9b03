/*
 * dic_gemm_mma.cu — FP8 / FP4 weight GEMMs on the tensor cores (mma.sync
 * m16n8k32 e4m3 x e4m3 -> fp32, sm_89 and later: runs on sm_90a and
 * sm_100a). The activations come quantised (dic_gemm_quant.cu); FP4 weights
 * are widened to e4m3 in registers (every e2m1 value is an e4m3 value).
 *
 * Numerics (ops.h di_gemm, architecture.md §3.2): per output, per K-block of
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

#define CH 128   /* k per staged chunk */
#define SROW 160 /* staged row stride, bytes: 8-byte fragment reads hit 32 distinct banks per half warp */

typedef struct qargs {
    int E, fmt, N, K, wblock, act_block, kb, M;
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
    if (!a.off) {
        int i0 = y * BM;
        info[0] = 0, info[1] = i0, info[2] = min(i0 + BM, a.M);
        return i0 < a.M;
    }
    if (threadIdx.x < 32) {
        int lane = threadIdx.x, before = 0, found = 0;
        for (int b0 = 0; b0 < a.E && !found; b0 += 32) {
            int e = b0 + lane, nt = 0, o0 = 0, o1 = 0;
            if (e < a.E) {
                o0 = a.off[e], o1 = a.off[e + 1];
                nt = (o1 - o0 + BM - 1) / BM;
            }
            int incl = nt;
            for (int d = 1; d < 32; d <<= 1) {
                int v = __shfl_up_sync(0xFFFFFFFFu, incl, d);
                if (lane >= d) incl += v;
            }
            unsigned hit = __ballot_sync(0xFFFFFFFFu, e < a.E && y < before + incl);
            if (hit) {
                int l = __ffs(hit) - 1;
                if (lane == l) {
                    int i0 = o0 + (y - (before + incl - nt)) * BM;
                    info[0] = e, info[1] = i0, info[2] = min(i0 + BM, o1);
                }
                found = 1;
            }
            before += __shfl_sync(0xFFFFFFFFu, incl, 31);
        }
        if (!found && lane == 0) info[0] = -1;
    }
    __syncthreads();
    return info[0] >= 0;
}

static __device__ __forceinline__ float e8m0f(uint8_t b) { return dic_e8m0_to_f32(b); }

static __device__ __forceinline__ void store_out(const qargs &a, int i, int n, float v) {
    size_t r = (size_t)(a.rows ? a.rows[i] : i);
    if (a.C32) a.C32[r * a.ldc + n] = v;
    else a.C16[r * a.ldc + n] = dic_f32_to_bf16(v);
}

/* ---- small M --------------------------------------------------------------- */

#define S_WARPS 8
#define S_BN 32
#define S_BM 16

static __global__ void __launch_bounds__(256) k_gemm_q_small(const qargs a, const __grid_constant__ dic_gemm_wtab wt) {
    __shared__ __align__(16) uint8_t sw[S_WARPS][S_BN * SROW]; /* 40 KB; reused for the warp reduction */
    __shared__ float ssc[S_WARPS][S_BN][4];                     /* FP4 weight scales of the staged chunk */
    __shared__ int info[3];
    if (!tile_rows(a, S_BM, blockIdx.y, info)) return;
    const int e = info[0], i0 = info[1], i1 = info[2];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * S_BN, N = a.N, K = a.K, fp4 = a.fmt == 3;
    const uint8_t *W = (const uint8_t *)wt.w[e], *S = wt.s[e];
    const int nch = (K + CH - 1) / CH;
    const int ia = i0 + g, ib = i0 + g + 8, va = ia < i1, vb = ib < i1;
    const uint8_t *qa = a.q + (size_t)ia * a.ldq, *qb = a.q + (size_t)ib * a.ldq;
    const float *saa = a.sa + (size_t)ia * a.nsa, *sab = a.sa + (size_t)ib * a.nsa;
    const size_t wrow = fp4 ? (size_t)K / 2 : (size_t)K;
    uint8_t *mys = sw[warp];

    float tot[4][4], P[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) tot[i][j] = P[i][j] = 0.0f;

    uint4 reg[8];
    uint32_t screg = 0;
    /* load chunk c into registers: FP8 8 units of 16 B (row u/8, byte (u%8)*16),
     * FP4 4 units (row u/4, packed byte (u%4)*16) + this lane's row scales. */
#define S_LOAD(c)                                                                                   \
    do {                                                                                            \
        int kc_ = (c) * CH;                                                                         \
        if (!fp4) {                                                                                 \
            _Pragma("unroll") for (int i = 0; i < 8; i++) {                                         \
                int u = lane + 32 * i, r = u >> 3, col = (u & 7) * 16;                              \
                reg[i] = make_uint4(0, 0, 0, 0);                                                    \
                if (n0 + r < N && kc_ + col < K)                                                    \
                    reg[i] = __ldg((const uint4 *)(W + (size_t)(n0 + r) * wrow + kc_ + col));       \
            }                                                                                       \
        } else {                                                                                    \
            _Pragma("unroll") for (int i = 0; i < 4; i++) {                                         \
                int u = lane + 32 * i, r = u >> 2, cp = (u & 3) * 16;                               \
                reg[i] = make_uint4(0, 0, 0, 0);                                                    \
                if (n0 + r < N && kc_ + 2 * cp < K)                                                 \
                    reg[i] = __ldg((const uint4 *)(W + (size_t)(n0 + r) * wrow + kc_ / 2 + cp));    \
            }                                                                                       \
            screg = 0;                                                                              \
            if (n0 + lane < N)                                                                      \
                _Pragma("unroll") for (int j = 0; j < 4; j++) if (kc_ + 32 * j < K) screg |=        \
                    (uint32_t)S[(size_t)(n0 + lane) * (K / 32) + kc_ / 32 + j] << (8 * j);          \
        }                                                                                           \
    } while (0)

    if (warp < nch) S_LOAD(warp);
    for (int c = warp; c < nch; c += S_WARPS) {
        const int kc = c * CH, nsteps = min(CH, K - kc) / 32;
        if (!fp4) {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                int u = lane + 32 * i;
                *(uint4 *)(mys + (u >> 3) * SROW + (u & 7) * 16) = reg[i];
            }
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int u = lane + 32 * i;
                store_fp4_unit(mys + (u >> 2) * SROW + (u & 3) * 32, reg[i]);
            }
#pragma unroll
            for (int j = 0; j < 4; j++) ssc[warp][lane][j] = e8m0f((uint8_t)(screg >> (8 * j)));
        }
        __syncwarp();
        if (c + S_WARPS < nch) S_LOAD(c + S_WARPS);
#pragma unroll
        for (int s = 0; s < 4; s++) {
            if (s < nsteps) {
                const int k = kc + 32 * s;
                uint2 A0 = make_uint2(0, 0), A1 = make_uint2(0, 0);
                if (va) A0 = *(const uint2 *)(qa + k + 8 * t);
                if (vb) A1 = *(const uint2 *)(qb + k + 8 * t);
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    uint2 B = *(const uint2 *)(mys + (nt * 8 + g) * SROW + 32 * s + 8 * t);
                    mma_e4m3(P[nt], A0.x, A1.x, A0.y, A1.y, B.x, B.y);
                }
                const int kend = k + 32;
                if (kend % a.kb == 0) { /* K-block complete: C = fma(P, s_act * s_w, C) */
                    const int kbs = kend - a.kb;
                    float s0 = va ? saa[kbs / a.act_block] : 0.0f, s1 = vb ? sab[kbs / a.act_block] : 0.0f;
                    if (!fp4) {
                        float w8 = e8m0f(S[(size_t)(n0 / a.wblock) * (size_t)(K / a.wblock) + kbs / a.wblock]);
#pragma unroll
                        for (int nt = 0; nt < 4; nt++) {
                            tot[nt][0] = fmaf(P[nt][0], s0 * w8, tot[nt][0]);
                            tot[nt][1] = fmaf(P[nt][1], s0 * w8, tot[nt][1]);
                            tot[nt][2] = fmaf(P[nt][2], s1 * w8, tot[nt][2]);
                            tot[nt][3] = fmaf(P[nt][3], s1 * w8, tot[nt][3]);
                        }
                    } else {
                        const int jb = (kbs - kc) / 32;
#pragma unroll
                        for (int nt = 0; nt < 4; nt++) {
                            float w0 = ssc[warp][nt * 8 + 2 * t][jb], w1 = ssc[warp][nt * 8 + 2 * t + 1][jb];
                            tot[nt][0] = fmaf(P[nt][0], s0 * w0, tot[nt][0]);
                            tot[nt][1] = fmaf(P[nt][1], s0 * w1, tot[nt][1]);
                            tot[nt][2] = fmaf(P[nt][2], s1 * w0, tot[nt][2]);
                            tot[nt][3] = fmaf(P[nt][3], s1 * w1, tot[nt][3]);
                        }
                    }
#pragma unroll
                    for (int nt = 0; nt < 4; nt++) P[nt][0] = P[nt][1] = P[nt][2] = P[nt][3] = 0.0f;
                }
            }
        }
        __syncwarp();
    }
#undef S_LOAD
    /* the 8 warp sums, added in warp order */
    __syncthreads();
    float *red = (float *)&sw[0][0]; /* [8][16][32] */
#pragma unroll
    for (int nt = 0; nt < 4; nt++) {
        int col = nt * 8 + 2 * t;
        red[(warp * 16 + g) * 32 + col] = tot[nt][0];
        red[(warp * 16 + g) * 32 + col + 1] = tot[nt][1];
        red[(warp * 16 + g + 8) * 32 + col] = tot[nt][2];
        red[(warp * 16 + g + 8) * 32 + col + 1] = tot[nt][3];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < S_BM * S_BN; idx += 256) {
        int r = idx / S_BN, col = idx % S_BN;
        if (i0 + r >= i1 || n0 + col >= N) continue;
        float v = red[r * 32 + col];
        for (int w = 1; w < S_WARPS; w++) v = __fadd_rn(v, red[(w * 16 + r) * 32 + col]);
        store_out(a, i0 + r, n0 + col, v);
    }
}

/* ---- tiles ------------------------------------------------------------------ */

#define T_BM 64
#define T_BN 128

static __global__ void __launch_bounds__(256) k_gemm_q_tile(const qargs a, const __grid_constant__ dic_gemm_wtab wt) {
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

    float tot[2][4][4], P[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) tot[mi][i][j] = P[mi][i][j] = 0.0f;

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
                if (kend % a.kb == 0) {
                    const int kbs = kend - a.kb;
                    float w8 = 0.0f;
                    if (!fp4)
                        w8 = e8m0f(S[(size_t)((n0 + wn * 32) / a.wblock) * (size_t)(K / a.wblock) + kbs / a.wblock]);
#pragma unroll
                    for (int mi = 0; mi < 2; mi++) {
                        int ra0 = i0 + wm * 32 + mi * 16 + g, rb0 = ra0 + 8;
                        float s0 = ra0 < i1 ? a.sa[(size_t)ra0 * a.nsa + kbs / a.act_block] : 0.0f;
                        float s1 = rb0 < i1 ? a.sa[(size_t)rb0 * a.nsa + kbs / a.act_block] : 0.0f;
#pragma unroll
                        for (int nt = 0; nt < 4; nt++) {
                            float w0 = w8, w1 = w8;
                            if (fp4) {
                                int jb = (kbs - kc) / 32;
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
                if (col < N) store_out(a, ra0, col, tot[mi][nt][0]);
                if (col + 1 < N) store_out(a, ra0, col + 1, tot[mi][nt][1]);
            }
            if (rb0 < i1) {
                if (col < N) store_out(a, rb0, col, tot[mi][nt][2]);
                if (col + 1 < N) store_out(a, rb0, col + 1, tot[mi][nt][3]);
            }
        }
    }
}

/* ---- launcher --------------------------------------------------------------- */

extern "C" cudaError_t dic_gemm_q_launch(cudaStream_t st, int E, const dic_gemm_wtab *wt, int fmt, int N, int K,
                                         int wblock, int act_block, int M, const int *off, const int *rows,
                                         const uint8_t *q, const float *sa, float *C32, uint16_t *C16, size_t ldc) {
    return dic_gemm_q_launch_path(st, E, wt, fmt, N, K, wblock, act_block, M, off, rows, q, sa, C32, C16, ldc, 0);
}

extern "C" cudaError_t dic_gemm_q_launch_path(cudaStream_t st, int E, const dic_gemm_wtab *wt, int fmt, int N, int K,
                                              int wblock, int act_block, int M, const int *off, const int *rows,
                                              const uint8_t *q, const float *sa, float *C32, uint16_t *C16,
                                              size_t ldc, int path) {
    if (M <= 0 || N <= 0) return cudaSuccess;
    int kb = fmt == 2 ? (act_block < wblock ? act_block : wblock) : 32;
    if ((kb != 32 && kb != 64 && kb != 128) || K % kb || K % act_block || act_block % 32) return cudaErrorInvalidValue;
    if (fmt == 2 && wblock % 32) return cudaErrorInvalidValue;
    qargs a;
    a.E = E, a.fmt = fmt, a.N = N, a.K = K, a.wblock = wblock, a.act_block = act_block, a.kb = kb, a.M = M;
    a.off = off, a.rows = rows, a.q = q, a.ldq = dic_gemm_ldq(K), a.sa = sa, a.nsa = K / act_block;
    a.C32 = C32, a.C16 = C16, a.ldc = ldc;
    /* decode-sized row tiles read each weight byte once: rows per tile <= 16 */
    int small = off ? M <= 4 * E : M <= 64;
    if (path == 1) small = 0;
    /* prefill FP8 on sm_90a: the wgmma kernel (same per-row numerics as the tiles below) */
    if (path == 2 || (path == 0 && !small && fmt == 2 && !off && dic_gemm_wgmma_usable(N, K))) {
        if (fmt != 2 || off || !dic_gemm_wgmma_usable(N, K)) return cudaErrorInvalidValue;
        return dic_gemm_q_wgmma_launch(st, wt->w[0], wt->s[0], N, K, wblock, act_block, kb, M, q, dic_gemm_ldq(K),
                                       sa, C32, C16, ldc);
    }
    int BM = small ? S_BM : T_BM, BN = small ? S_BN : T_BN;
    long long ty = (M + BM - 1) / BM + (off ? (E < M ? E : M) : 0);
    dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)ty);
    if (ty > 65535) return cudaErrorInvalidConfiguration;
    if (small) k_gemm_q_small<<<grid, 256, 0, st>>>(a, *wt);
    else k_gemm_q_tile<<<grid, 256, 0, st>>>(a, *wt);
    DIC_LAUNCH_CHECK();
}
