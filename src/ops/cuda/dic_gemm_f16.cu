/*
 * dic_gemm_f16.cu — FP8 / FP4 weight GEMMs for the fast mode
 * (c->batch_invariant == 0): decode (small M), routed experts (grouped, any
 * rows per expert) and plain FP4 at any M. Used by dic_gemm,
 * dic_gemm_grouped and dic_gemm_grouped_seg / dic_gemm2_grouped_seg when
 * !c->batch_invariant (FP8 plain M > 64 keeps the wgmma kernel).
 *
 * Why: mma.sync m16n8k32 e4m3 is not native on sm_90a (ptxas emulates it
 * with unpacks + two HMMA each, GEMV-NOTES.md run 3). Here the operands are
 * widened to f16 once and fed to the native HMMA m16n8k16 f16 -> fp32:
 *  - "swap-AB": the weights are the 16-row A operand (16 output columns per
 *    warp), the tokens the 8-column B operand, so a decode token tile
 *    wastes nothing on the weight side (the bytes that matter);
 *  - weights e4m3 -> f16 with cvt.rn.f16x2.e4m3x2 (exact), e2m1 -> f16 by
 *    shifts and masks (exact, the value times 2^-14: folded into the scale);
 *    activations (e4m3) converted to f16 once per CTA in shared memory;
 *  - CTA = 4 warps = 64 output columns x MT = 8 NT tokens; K in chunks of
 *    128 streamed by cp.async through an ST-stage shared-memory ring:
 *    weights, activations, activation scales (4-byte cp.async) and FP4
 *    weight scales (4 bytes per row per chunk) all ride the ring, so no
 *    global load waits inside the loop; FP8 weight scales (a few bytes per
 *    CTA) are loaded once in the prologue. The prologue issues ST - 1 stages
 *    and then waits once (for the FP8 scale table / the fused quantisation);
 *  - fused activation quantisation (NT = 1, i.e. up to 8 rows per tile,
 *    M <= 64): the CTA reads the bf16 rows of the act_block blocks its K
 *    range touches, takes the per-block amax (shared-memory atomicMax on the
 *    bits: exact, order-free), the scale, and quantises each chunk while
 *    widening it: the same operations as dic_gemm_quant.cu, so the same
 *    e4m3 values and scales (tested bitwise against the unfused path). It
 *    saves the separate quantisation launch;
 *  - split-K over blockIdx.z inside one thread-block cluster (1, 1, S <= 8):
 *    each CTA leaves its fp32 partial tile in its shared memory, and rank r
 *    adds slice r of the tile over ranks 0..S-1 in order through
 *    distributed shared memory (fixed order, no atomics, no scratch);
 *  - grouped gemm2 (w1 and w3 over the same rows) in one launch: the grid's
 *    y is doubled, the second half reads the second weight table.
 *
 * Numerics (ops.h di_gemm): per K-block of kb = min(act_block, B) (FP8) or
 * 32 (FP4), P_b = the HMMA sum of the block's exact products (two k16 steps
 * per 32 k, from zero), then C_s = fma(P_b, s_act * s_w, C_s) over the
 * blocks of split s in increasing k, C = C_0 + C_1 + ... in split order.
 * Inside a 32-k sub-block lane t of a quad holds k = 8t..8t+7 (FP8 pairs
 * (0,1)(2,3)(4,5)(6,7), FP4 pairs (0,4)(1,5)(2,6)(3,7)), the same
 * permutation for weights and activations. An output depends only on its
 * own row and column and on the split count; the split count is a function
 * of (N, K, number of SMs) for plain launches with M <= 64 (so a row's bits
 * do not depend on M there) and of (N, K, E, max_rows, tables) for grouped
 * ones. Fusing the quantisation does not change any bit.
 * Not the bits of the invariant kernels (dic_gemm_mma.cu), within the same
 * GEMM tolerance of di_gemm.
 */
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"

namespace cg = cooperative_groups;

#define F_BN 64   /* output columns per CTA (16 per warp) */
#define F_CK 128  /* k per stage */
#define F_A16 320 /* f16 activation row stride: 8-lane LDS.128 phases hit distinct banks */
#define F_MAXS 8  /* split-K cluster size (portable) */

static int g_f16_debug; /* dic_gemm_f16_debug: 1 = no fused quantisation, 2 = gemm2 as two launches */
extern "C" void dic_gemm_f16_debug(int flags) { g_f16_debug = flags; }

typedef struct fargs {
    int E, N, K, M;
    int lab, lwb, nwb, spbm1; /* log2(act_block), log2(wblock) (FP8), K / wblock, kb / 32 - 1 */
    int kper;                 /* k per split (multiple of F_CK) */
    int sw4;                  /* FP4: K % 128 == 0, the chunk's 4 scale bytes per row by one 4-byte cp.async */
    int gyh;                  /* grid y of one weight table (gemm2: gridDim.y = 2 gyh) */
    int nkw, nrb;             /* FP8 weight-scale table: nrb row blocks x nkw k blocks */
    int nbk;                  /* fused: act-scale table k blocks per row */
    int off_x, off_ast;       /* dynamic shared memory offsets: FP8 weight-scale table, fused act-scale table */
    const int *off, *rows;
    const uint8_t *q;
    size_t ldq;
    const float *sa;
    int nsa;
    const uint16_t *A; /* fused: the bf16 rows */
    size_t lda;
    float *C32;
    uint16_t *C16, *C16b;
    size_t ldc;
} fargs;

static __device__ __forceinline__ uint32_t cvt_e4m3x2(uint32_t v16) {
    uint32_t r;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"((unsigned short)v16));
    return r;
}

/* f16x2 of two fp32 values that are exact in f16 (e4m3 grid values): lo in the low half */
static __device__ __forceinline__ uint32_t h2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    uint32_t r;
    memcpy(&r, &h, 4);
    return r;
}

/* dic_gemm_quant.cu round_e4m3, copied unchanged (the fused path must give its bits) */
static __device__ __forceinline__ float f_round_e4m3(float v) {
    float a = fabsf(v), r;
    if (a < 0.015625f) {
        r = __fmul_rn(rintf(__fmul_rn(a, 512.0f)), 0.001953125f); /* m * 2^-9 */
    } else {
        uint32_t u = __float_as_uint(a);
        u += 0x7FFFFu + ((u >> 20) & 1u);
        u &= 0xFFF00000u;
        r = __uint_as_float(u);
    }
    return copysignf(r, v);
}
/* dic_gemm_quant.cu k_act_quant per element: x / s clamped to +-448, RNE to e4m3, as fp32 */
static __device__ __forceinline__ float f_quant(uint32_t bf, float sc) {
    float v = __fdiv_rn(__uint_as_float(bf << 16), sc);
    if (v > 448.0f) v = 448.0f;
    if (v < -448.0f) v = -448.0f;
    return f_round_e4m3(v);
}

/* 8 e2m1 nibbles (element j in bits 4j..4j+3) -> f16x2 pairs (j, j + 4) (low half: element j), each
 * value times 2^-14, exact: magnitude bits to f16 bits 9..11, sign to bit 15. */
static __device__ __forceinline__ void e2m1x8_f16(uint32_t w, uint32_t p[4]) {
    const uint32_t M = 0x0E000E00u, SG = 0x80008000u;
    p[0] = ((w << 9) & M) | ((w << 12) & SG);
    p[1] = ((w << 5) & M) | ((w << 8) & SG);
    p[2] = ((w << 1) & M) | ((w << 4) & SG);
    p[3] = ((w >> 3) & M) | (w & SG);
}

static __device__ __forceinline__ void mma16816(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ void cp16(void *dst, const void *src) {
    uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
static __device__ __forceinline__ void cp4(void *dst, const void *src) {
    uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
}
static __device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> static __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* Row tile y: rows [i0, i1) of expert e (plain: e = 0). Grouped: tiles are
 * numbered expert by expert, ceil(rows_e / BM) each (dic_gemm_mma.cu
 * tile_rows); one warp loads off[] (all loads at once) and scans it.
 * Returns 0 when y is past the last tile (the whole CTA exits). */
static __device__ int f_tile_rows(const fargs &a, int BM, int y, int *info) {
    if (!a.off) {
        int i0 = y * BM;
        info[0] = 0, info[1] = i0, info[2] = min(i0 + BM, a.M);
        return i0 < a.M;
    }
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x, nb = (a.E + 31) / 32;
        int o[DIC_GEMM_MAXE / 32 + 1];
#pragma unroll
        for (int j = 0; j <= DIC_GEMM_MAXE / 32; j++) {
            int idx = 32 * j + lane;
            o[j] = (j <= nb && idx <= a.E) ? __ldg(a.off + idx) : 0;
        }
        int before = 0, found = 0;
#pragma unroll
        for (int j = 0; j < DIC_GEMM_MAXE / 32; j++) {
            if (j >= nb || found) break;
            int e = 32 * j + lane;
            int nxt = __shfl_down_sync(0xFFFFFFFFu, o[j], 1), nxt0 = __shfl_sync(0xFFFFFFFFu, o[j + 1], 0);
            int o0 = o[j], o1 = lane == 31 ? nxt0 : nxt, nt = 0;
            if (e < a.E) nt = (o1 - o0 + BM - 1) / BM;
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

static __device__ __forceinline__ void f_store(const fargs &a, uint16_t *C16, int i, int n, float v) {
    size_t r = (size_t)(a.rows ? a.rows[i] : i);
    if (a.C32) a.C32[r * a.ldc + n] = v;
    else C16[r * a.ldc + n] = dic_f32_to_bf16(v);
}

/* Stages in the ring, and per-stage shared memory (bytes): weights 64 rows, activations MT rows (raw e4m3,
 * or bf16 when fused), activation scales [MT][4] (unfused), FP4 weight scales [64][4 bytes]. */
#define F_ST(NT, FP4) ((FP4) && (NT) <= 2 ? 6 : 4)
#define F_WRS(FP4) ((FP4) ? 80 : 160)
#define F_ARS(FUSE) ((FUSE) ? 272 : 144)
#define F_STAGE(NT, FP4, FUSE) (64 * F_WRS(FP4) + 8 * (NT) * F_ARS(FUSE) + ((FUSE) ? 0 : 8 * (NT) * 16) + ((FP4) ? 256 : 0))
#define F_RING(NT, FP4, FUSE) (F_ST(NT, FP4) * F_STAGE(NT, FP4, FUSE) + 8 * (NT) * F_A16)

template <int NT, int FP4, int FUSE>
static __global__ void __launch_bounds__(128) k_gemm_f16(const fargs a, const __grid_constant__ dic_gemm_wtab wt) {
    constexpr int MT = 8 * NT, ST = F_ST(NT, FP4), WRS = F_WRS(FP4), ARS = F_ARS(FUSE), WB = FP4 ? 64 : 128;
    constexpr int STG = F_STAGE(NT, FP4, FUSE);
    constexpr int OFF_A = 64 * WRS, OFF_SA = OFF_A + MT * ARS, OFF_SW = OFF_SA + (FUSE ? 0 : MT * 16);
    static_assert(!FUSE || NT == 1, "fused quantisation: one 8-row token tile");
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ int info[3];
    __shared__ int arow[8];
    const int which = (int)blockIdx.y >= a.gyh, ty = (int)blockIdx.y - (which ? a.gyh : 0);
    if (!f_tile_rows(a, MT, ty, info)) return; /* all CTAs of a cluster share (x, y): they exit together */
    const int e = info[0] + (which ? a.E : 0), i0 = info[1], i1 = info[2];
    uint16_t *C16 = which ? a.C16b : a.C16;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * F_BN, N = a.N, K = a.K;
    const int kbeg = blockIdx.z * a.kper, kend = min(K, kbeg + a.kper);
    const int nch = (kend - kbeg + F_CK - 1) / F_CK;
    const uint8_t *W = (const uint8_t *)wt.w[e], *S = wt.s[e];
    const size_t wrow = FP4 ? (size_t)K / 2 : (size_t)K;
    uint8_t *a16 = smem + ST * STG;
    float *wst = (float *)(smem + a.off_x), *ast = (float *)(smem + a.off_ast);
    const int lab = a.lab, lwb = a.lwb, spbm1 = a.spbm1;
    const int kb0 = kbeg >> lab; /* fused: first act block of the table */

    /* everything of chunk c into its stage: weights, activations, activation scales, FP4 weight scales
     * (rows / k past the ends are not loaded: their garbage only reaches outputs that are never stored,
     * or sub-blocks that are skipped) */
#define F_ISSUE(c)                                                                                 \
    do {                                                                                           \
        const int kc_ = kbeg + (c) * F_CK, kl_ = min(F_CK, kend - kc_);                            \
        uint8_t *sg_ = smem + ((c) % ST) * STG;                                                    \
        _Pragma("unroll") for (int i_ = 0; i_ < 64 * WB / 16 / 128; i_++) {                        \
            int u_ = tid + 128 * i_, r_ = u_ / (WB / 16), p_ = u_ % (WB / 16);                      \
            if (n0 + r_ < N && p_ * 16 * (FP4 ? 2 : 1) < kl_)                                      \
                cp16(sg_ + r_ * WRS + p_ * 16, W + (size_t)(n0 + r_) * wrow + (FP4 ? kc_ / 2 : kc_) + p_ * 16); \
        }                                                                                          \
        if (FUSE) {                                                                                \
            int r_ = tid >> 4, p_ = tid & 15;                                                      \
            if (i0 + r_ < i1 && p_ * 8 < kl_)                                                      \
                cp16(sg_ + OFF_A + r_ * ARS + p_ * 16, a.A + (size_t)arow[r_] * a.lda + kc_ + p_ * 8); \
        } else {                                                                                   \
            _Pragma("unroll") for (int i_ = 0; i_ < (MT * 8 + 127) / 128; i_++) {                  \
                int u_ = tid + 128 * i_, r_ = u_ >> 3, p_ = u_ & 7;                                 \
                if (r_ < MT && i0 + r_ < i1 && p_ * 16 < kl_)                                      \
                    cp16(sg_ + OFF_A + r_ * ARS + p_ * 16, a.q + (size_t)(i0 + r_) * a.ldq + kc_ + p_ * 16); \
            }                                                                                      \
            _Pragma("unroll") for (int i_ = 0; i_ < (MT * 4 + 127) / 128; i_++) {                  \
                int u_ = tid + 128 * i_, m_ = u_ >> 2, j_ = u_ & 3;                                 \
                if (m_ < MT && i0 + m_ < i1 && 32 * j_ < kl_)                                      \
                    cp4(sg_ + OFF_SA + 4 * u_, a.sa + (size_t)(i0 + m_) * a.nsa + ((kc_ + 32 * j_) >> lab)); \
            }                                                                                      \
        }                                                                                          \
        if (FP4 && tid < 64 && n0 + tid < N) {                                                     \
            const uint8_t *s_ = S + (size_t)(n0 + tid) * (K / 32) + (kc_ >> 5);                    \
            if (a.sw4) cp4(sg_ + OFF_SW + 4 * tid, s_);                                            \
            else                                                                                   \
                for (int j_ = 0; j_ < 4; j_++)                                                     \
                    if (32 * j_ < kl_) sg_[OFF_SW + 4 * tid + j_] = __ldg(s_ + j_);                \
        }                                                                                          \
    } while (0)

    if (FUSE) { /* the A rows of this tile, and a zeroed amax table */
        if (tid < 8) arow[tid] = i0 + tid < i1 ? (a.rows ? __ldg(a.rows + i0 + tid) : i0 + tid) : 0;
        for (int u = tid; u < MT * a.nbk; u += 128) ast[u] = 0.0f;
        __syncthreads();
    }
#pragma unroll 1
    for (int c = 0; c < ST - 1; c++) {
        if (c < nch) F_ISSUE(c);
        cp_commit();
    }
    /* prologue loads while the ring fills: FP8 weight-scale table (independent loads, then the stores) */
    if (!FP4) {
        const int nt = a.nrb * a.nkw, rb0 = n0 >> lwb, kw0 = kbeg >> lwb;
        for (int u0 = 0; u0 < nt; u0 += 8 * 128) {
            float v[8];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                int u = u0 + tid + 128 * i, rb = rb0 + u / a.nkw, kw = kw0 + u % a.nkw;
                v[i] = 0.0f;
                if (u < nt && ((size_t)rb << lwb) < (size_t)N && kw < a.nwb)
                    v[i] = dic_e8m0_to_f32(__ldg(S + (size_t)rb * a.nwb + kw));
            }
#pragma unroll
            for (int i = 0; i < 8; i++)
                if (u0 + tid + 128 * i < nt) wst[u0 + tid + 128 * i] = v[i];
        }
    }
    if (FUSE) { /* per act block amax over the blocks this CTA touches: 8 bf16 per unit, all loads at once */
        const int nr = i1 - i0, ka0 = kb0 << lab, ka1 = min(K, ((kend + (1 << lab) - 1) >> lab) << lab);
        const int upr = (ka1 - ka0) >> 3, tot = nr * upr;
        uint32_t *amx = (uint32_t *)ast;
        for (int u0 = 0; u0 < tot; u0 += 8 * 128) {
            uint4 v[8];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                int u = u0 + tid + 128 * i, m = u / upr, kk = ka0 + 8 * (u % upr);
                v[i] = u < tot ? __ldg((const uint4 *)(a.A + (size_t)arow[m] * a.lda + kk)) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int i = 0; i < 8; i++) {
                int u = u0 + tid + 128 * i;
                if (u >= tot) break;
                int m = u / upr, kk = ka0 + 8 * (u % upr);
                uint32_t w4[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
                float am = 0.0f;
#pragma unroll
                for (int h = 0; h < 8; h++) {
                    float x = fabsf(__uint_as_float(h & 1 ? w4[h >> 1] & 0xFFFF0000u : w4[h >> 1] << 16));
                    if (x > am) am = x; /* NaN ignored, as in k_act_quant */
                }
                atomicMax(amx + m * a.nbk + ((kk >> lab) - kb0), __float_as_uint(am)); /* am >= 0: bits order */
            }
        }
        __syncthreads();
        const float inv448 = (float)(1.0 / 448.0);
        for (int u = tid; u < MT * a.nbk; u += 128) {
            float am = __uint_as_float(amx[u]);
            if (!(am >= 1e-4f)) am = 1e-4f;
            ast[u] = dic_pow2_ceil(__fmul_rn(am, inv448));
        }
    }

    float acc[NT][4], P[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[nt][j] = P[nt][j] = 0.0f;

    const int r0 = 16 * warp + g; /* this lane's weight rows r0, r0 + 8 within the CTA */
    const int rba = ((n0 + r0) >> lwb) - (n0 >> lwb), rbb = ((n0 + r0 + 8) >> lwb) - (n0 >> lwb);
#pragma unroll 1
    for (int c = 0; c < nch; c++) {
        const uint8_t *sg = smem + (c % ST) * STG;
        const int kc = kbeg + c * F_CK, kl = min(F_CK, kend - kc);
        cp_wait<ST - 2>(); /* chunk c landed (this thread's copies) */
        __syncthreads();   /* ... everyone's; and chunk c - 1's readers are done */
        if (c + ST - 1 < nch) F_ISSUE(c + ST - 1);
        cp_commit();
        /* activations -> f16 pairs in the fragment order (once per CTA) */
        if (FUSE) {
            const int m = tid >> 4, j = (tid >> 2) & 3, tt = tid & 3;
            const uint4 v = *(const uint4 *)(sg + OFF_A + m * ARS + 2 * (32 * j + 8 * tt));
            const float sc = ast[m * a.nbk + (((kc + 32 * j) >> lab) - kb0)];
            float x[8];
            x[0] = f_quant(v.x & 0xFFFFu, sc), x[1] = f_quant(v.x >> 16, sc);
            x[2] = f_quant(v.y & 0xFFFFu, sc), x[3] = f_quant(v.y >> 16, sc);
            x[4] = f_quant(v.z & 0xFFFFu, sc), x[5] = f_quant(v.z >> 16, sc);
            x[6] = f_quant(v.w & 0xFFFFu, sc), x[7] = f_quant(v.w >> 16, sc);
            uint4 o;
            if (FP4) o = make_uint4(h2(x[0], x[4]), h2(x[1], x[5]), h2(x[2], x[6]), h2(x[3], x[7]));
            else o = make_uint4(h2(x[0], x[1]), h2(x[2], x[3]), h2(x[4], x[5]), h2(x[6], x[7]));
            *(uint4 *)(a16 + m * F_A16 + 64 * j + 16 * tt) = o;
        } else {
#pragma unroll
            for (int i = 0; i < NT; i++) {
                int u = tid + 128 * i, m = u >> 4, j = (u >> 2) & 3, tt = u & 3;
                uint2 v = *(const uint2 *)(sg + OFF_A + m * ARS + 32 * j + 8 * tt);
                uint4 o;
                if (FP4) {
                    uint32_t x = __byte_perm(v.x, v.y, 0x5140), y = __byte_perm(v.x, v.y, 0x7362);
                    o = make_uint4(cvt_e4m3x2(x & 0xFFFFu), cvt_e4m3x2(x >> 16), cvt_e4m3x2(y & 0xFFFFu),
                                   cvt_e4m3x2(y >> 16));
                } else {
                    o = make_uint4(cvt_e4m3x2(v.x & 0xFFFFu), cvt_e4m3x2(v.x >> 16), cvt_e4m3x2(v.y & 0xFFFFu),
                                   cvt_e4m3x2(v.y >> 16));
                }
                *(uint4 *)(a16 + m * F_A16 + 64 * j + 16 * tt) = o;
            }
        }
        __syncthreads();
        const float *ssa = (const float *)(sg + OFF_SA);
        const uint8_t *ssw = sg + OFF_SW;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (32 * j < kl) {
                uint32_t pa[4], pb[4];
                if (FP4) {
                    uint32_t wa = *(const uint32_t *)(sg + r0 * WRS + 16 * j + 4 * t);
                    uint32_t wb = *(const uint32_t *)(sg + (r0 + 8) * WRS + 16 * j + 4 * t);
                    e2m1x8_f16(wa, pa);
                    e2m1x8_f16(wb, pb);
                } else {
                    uint2 wa = *(const uint2 *)(sg + r0 * WRS + 32 * j + 8 * t);
                    uint2 wb = *(const uint2 *)(sg + (r0 + 8) * WRS + 32 * j + 8 * t);
                    pa[0] = cvt_e4m3x2(wa.x & 0xFFFFu), pa[1] = cvt_e4m3x2(wa.x >> 16);
                    pa[2] = cvt_e4m3x2(wa.y & 0xFFFFu), pa[3] = cvt_e4m3x2(wa.y >> 16);
                    pb[0] = cvt_e4m3x2(wb.x & 0xFFFFu), pb[1] = cvt_e4m3x2(wb.x >> 16);
                    pb[2] = cvt_e4m3x2(wb.y & 0xFFFFu), pb[3] = cvt_e4m3x2(wb.y >> 16);
                }
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const uint4 qv = *(const uint4 *)(a16 + (8 * nt + g) * F_A16 + 64 * j + 16 * t);
                    mma16816(P[nt], pa[0], pb[0], pa[1], pb[1], qv.x, qv.y);
                    mma16816(P[nt], pa[2], pb[2], pa[3], pb[3], qv.z, qv.w);
                }
                if (((j + 1) & spbm1) == 0) { /* K-block complete: C_s = fma(P, s_act * s_w, C_s) */
                    const int j0 = j - spbm1;
                    float w0, w1;
                    if (FP4) {
                        w0 = dic_e8m0_to_f32(ssw[r0 * 4 + j0]) * 16384.0f;
                        w1 = dic_e8m0_to_f32(ssw[(r0 + 8) * 4 + j0]) * 16384.0f;
                    } else {
                        const int kw = ((kc + 32 * j0) >> lwb) - (kbeg >> lwb);
                        w0 = wst[rba * a.nkw + kw], w1 = wst[rbb * a.nkw + kw];
                    }
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) {
                        float s0, s1;
                        if (FUSE) {
                            const int b = ((kc + 32 * j0) >> lab) - kb0;
                            s0 = ast[(2 * t) * a.nbk + b], s1 = ast[(2 * t + 1) * a.nbk + b];
                        } else {
                            s0 = ssa[(8 * nt + 2 * t) * 4 + j0], s1 = ssa[(8 * nt + 2 * t + 1) * 4 + j0];
                        }
                        acc[nt][0] = fmaf(P[nt][0], s0 * w0, acc[nt][0]);
                        acc[nt][1] = fmaf(P[nt][1], s1 * w0, acc[nt][1]);
                        acc[nt][2] = fmaf(P[nt][2], s0 * w1, acc[nt][2]);
                        acc[nt][3] = fmaf(P[nt][3], s1 * w1, acc[nt][3]);
                        P[nt][0] = P[nt][1] = P[nt][2] = P[nt][3] = 0.0f;
                    }
                }
            }
        }
    }
#undef F_ISSUE
    cp_commit();
    asm volatile("cp.async.wait_all;\n" ::);
    const int na = n0 + r0, nb = na + 8;
    if (gridDim.z > 1) { /* split K over the cluster: partial tiles in shared memory, added in rank order */
        __syncthreads(); /* every thread's last reads of the ring are done */
        float *red = (float *)smem;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int j = 0; j < 4; j++) red[(nt * 4 + j) * 128 + tid] = acc[nt][j];
        cg::cluster_group cl = cg::this_cluster();
        cl.sync();
        const int ns = gridDim.z, rank = (int)cl.block_rank(), tot = NT * 4 * 128, per = (tot + ns - 1) / ns;
        const float *src[F_MAXS];
#pragma unroll
        for (int s = 0; s < F_MAXS; s++) src[s] = s < ns ? cl.map_shared_rank(red, s) : red;
        for (int idx = rank * per + tid; idx < min(tot, (rank + 1) * per); idx += 128) {
            float pv[F_MAXS];
#pragma unroll
            for (int s = 0; s < F_MAXS; s++) pv[s] = s < ns ? src[s][idx] : 0.0f; /* all loads in flight */
            float v = pv[0];
#pragma unroll
            for (int s = 1; s < F_MAXS; s++)
                if (s < ns) v = __fadd_rn(v, pv[s]);
            const int jj = (idx >> 7) & 3, nt = idx >> 9, th = idx & 127, wl = th & 31;
            const int i = i0 + 8 * nt + 2 * (wl & 3) + (jj & 1), n = n0 + 16 * (th >> 5) + (wl >> 2) + ((jj & 2) ? 8 : 0);
            if (i < i1 && n < N) f_store(a, C16, i, n, v);
        }
        cl.sync(); /* the partial tiles stay alive until every rank has read them */
        return;
    }
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const int ia = i0 + 8 * nt + 2 * t, ib = ia + 1;
        if (ia < i1 && na < N) f_store(a, C16, ia, na, acc[nt][0]);
        if (ib < i1 && na < N) f_store(a, C16, ib, na, acc[nt][1]);
        if (ia < i1 && nb < N) f_store(a, C16, ia, nb, acc[nt][2]);
        if (ib < i1 && nb < N) f_store(a, C16, ib, nb, acc[nt][3]);
    }
}

/* ---- launcher --------------------------------------------------------------- */

template <int NT, int FP4, int FUSE>
static cudaError_t launch_nt(cudaStream_t st, dim3 grid, const fargs &a, const dic_gemm_wtab *wt, int smem) {
    static int attr_smem; /* per instance: the dynamic shared-memory limit set so far (raised when a launch needs
                           * more; the static shared memory counts against the same opt-in maximum, so the limit
                           * must not be set above what a launch asks for) */
    if (smem > attr_smem) {
        cudaError_t e = cudaFuncSetAttribute(k_gemm_f16<NT, FP4, FUSE>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess) return e;
        attr_smem = smem;
    }
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = grid;
    cfg.blockDim = dim3(128, 1, 1);
    cfg.dynamicSmemBytes = (size_t)smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 1, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = grid.z;
    cfg.attrs = at;
    cfg.numAttrs = grid.z > 1 ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k_gemm_f16<NT, FP4, FUSE>, a, *wt);
}

static int ilog2(int v) { return __builtin_ctz((unsigned)v); }
static int pow2(int v) { return v > 0 && !(v & (v - 1)); }

/* One launch over tables wt (and wt2 in the second half of grid y when two, E entries each, packed as
 * wt[0..2E)). q / sa: the quantised rows (unfused), or A / lda (fused). */
static cudaError_t f16_launch(cudaStream_t st, int num_sms, int E, int ntab, const dic_gemm_wtab *wt, int fmt, int N,
                              int K, int wblock, int act_block, int M, const int *off, const int *rows,
                              const uint16_t *A, size_t lda, int fuse, const uint8_t *q, const float *sa, float *C32,
                              uint16_t *C16, uint16_t *C16b, size_t ldc) {
    const int wbl = fmt == 2 ? wblock : 32;
    fargs a;
    memset(&a, 0, sizeof a);
    a.E = E, a.N = N, a.K = K, a.M = M;
    a.lab = ilog2(act_block), a.lwb = ilog2(wbl), a.nwb = K / wbl;
    a.spbm1 = (fmt == 2 ? (act_block < wblock ? act_block : wblock) : 32) / 32 - 1;
    a.off = off, a.rows = rows, a.q = q, a.ldq = dic_gemm_ldq(K), a.sa = sa, a.nsa = K / act_block;
    a.A = A, a.lda = lda, a.C32 = C32, a.C16 = C16, a.C16b = C16b, a.ldc = ldc;
    a.sw4 = K % 128 == 0; /* and every FP4 scale table 4-byte aligned */
    for (int e = 0; e < E * ntab && a.sw4; e++) a.sw4 = ((uintptr_t)wt->s[e] & 3) == 0;
    /* token tile: 8 NT rows; grouped: sized by the mean rows per expert (max_rows / E) */
    int per = off ? (M + E - 1) / E : M, NT = 1;
    while (NT < 8 && 8 * NT < per) NT *= 2;
    if (NT > 1) fuse = 0;
    const int MT = 8 * NT, gx = (N + F_BN - 1) / F_BN;
    long long gy = (M + MT - 1) / MT + (off ? (E < M ? E : M) : 0);
    if (gy * ntab > 65535) return cudaErrorInvalidConfiguration;
    a.gyh = (int)gy;
    /* split K inside a cluster when the (estimated) grid is under 4 CTAs per SM: decode shapes. Plain
     * launches estimate with one token tile, so the split (and a row's bits) does not depend on M <= 64;
     * every split streams at least 2 chunks. */
    const int nchunks = (K + F_CK - 1) / F_CK;
    long long est = (long long)gx * (off ? (E < M ? E : M) : 1) * ntab;
    int splits = 1;
    if (M <= DIC_GEMM_SPLIT_MAXM) {
        long long want = 4LL * (num_sms > 0 ? num_sms : 132) / (est > 0 ? est : 1);
        int cap = nchunks / 2 < F_MAXS ? nchunks / 2 : F_MAXS;
        splits = want < 1 ? 1 : want > cap ? (cap < 1 ? 1 : cap) : (int)want;
    }
    int cps = (nchunks + splits - 1) / splits;
    splits = (nchunks + cps - 1) / cps;
    a.kper = cps * F_CK;
    /* dynamic shared memory: the ring, then the FP8 weight-scale table, then the fused act-scale table */
    const int fp4 = fmt == 3;
    int ring;
    switch (NT) {
    case 1: ring = fp4 ? (fuse ? F_RING(1, 1, 1) : F_RING(1, 1, 0)) : (fuse ? F_RING(1, 0, 1) : F_RING(1, 0, 0)); break;
    case 2: ring = fp4 ? F_RING(2, 1, 0) : F_RING(2, 0, 0); break;
    case 4: ring = fp4 ? F_RING(4, 1, 0) : F_RING(4, 0, 0); break;
    default: ring = fp4 ? F_RING(8, 1, 0) : F_RING(8, 0, 0); break;
    }
    a.off_x = ring;
    a.nrb = fp4 ? 0 : (wbl >= F_BN ? 1 : F_BN / wbl);
    a.nkw = fp4 ? 0 : (a.kper >> a.lwb) + 2;
    a.off_ast = a.off_x + ((4 * a.nrb * a.nkw + 15) & ~15);
    a.nbk = fuse ? (a.kper >> a.lab) + 2 : 0;
    const int red = 4 * NT * 4 * 128; /* split partial tile, over the ring */
    int smem = a.off_ast + 4 * MT * a.nbk;
    if (smem < red) smem = red;
    if (smem > 227 * 1024 - 64) return cudaErrorInvalidValue; /* the opt-in maximum less the static arrays */
    dim3 grid((unsigned)gx, (unsigned)(gy * ntab), (unsigned)splits);
    switch (NT * 4 + fp4 * 2 + (fuse ? 1 : 0)) {
    case 4: return launch_nt<1, 0, 0>(st, grid, a, wt, smem);
    case 5: return launch_nt<1, 0, 1>(st, grid, a, wt, smem);
    case 6: return launch_nt<1, 1, 0>(st, grid, a, wt, smem);
    case 7: return launch_nt<1, 1, 1>(st, grid, a, wt, smem);
    case 8: return launch_nt<2, 0, 0>(st, grid, a, wt, smem);
    case 10: return launch_nt<2, 1, 0>(st, grid, a, wt, smem);
    case 16: return launch_nt<4, 0, 0>(st, grid, a, wt, smem);
    case 18: return launch_nt<4, 1, 0>(st, grid, a, wt, smem);
    case 32: return launch_nt<8, 0, 0>(st, grid, a, wt, smem);
    default: return launch_nt<8, 1, 0>(st, grid, a, wt, smem);
    }
}

extern "C" cudaError_t dic_gemm_f16_run(cudaStream_t st, int num_sms, int E, const dic_gemm_wtab *wt,
                                        const dic_gemm_wtab *wt2, int fmt, int N, int K, int wblock, int act_block,
                                        int M, const int *off, const int *rows, const uint16_t *A, size_t lda,
                                        uint8_t *q, float *sa, float *C32, uint16_t *C16, uint16_t *C16b,
                                        size_t ldc) {
    if (M <= 0 || N <= 0) return cudaSuccess;
    if (fmt != 2 && fmt != 3) return cudaErrorInvalidValue;
    const int wbl = fmt == 2 ? wblock : 32;
    const int kb = fmt == 2 ? (act_block < wblock ? act_block : wblock) : 32;
    if (!pow2(act_block) || act_block < 32 || !pow2(wbl) || wbl < 32 || kb > F_CK || K % kb || K % act_block ||
        K % 32 || (wt2 && (!C16b || C32)))
        return cudaErrorInvalidValue;
    /* fused quantisation: small tiles (NT = 1 is decided in f16_launch), M <= 64, 16-byte aligned rows */
    const int per = off ? (M + E - 1) / E : M;
    int fuse = !(g_f16_debug & 1) && per <= 8 && M <= DIC_GEMM_SPLIT_MAXM && ((uintptr_t)A & 15) == 0 &&
               (lda * 2) % 16 == 0;
    cudaError_t e;
    if (!fuse) {
        e = dic_gemm_quant(st, M, A, lda, K, act_block, rows, off ? off + E : NULL, q, sa, NULL, 0);
        if (e != cudaSuccess) return e;
    }
    if (wt2 && !(g_f16_debug & 2) && 2 * E <= DIC_GEMM_MAXE) { /* both tables in one launch */
        static dic_gemm_wtab both; /* host copy; the launch copies it into its parameters */
        memcpy(both.w, wt->w, sizeof(void *) * E), memcpy(both.s, wt->s, sizeof(void *) * E);
        memcpy(both.w + E, wt2->w, sizeof(void *) * E), memcpy(both.s + E, wt2->s, sizeof(void *) * E);
        return f16_launch(st, num_sms, E, 2, &both, fmt, N, K, wblock, act_block, M, off, rows, A, lda, fuse, q, sa,
                          NULL, C16, C16b, ldc);
    }
    e = f16_launch(st, num_sms, E, 1, wt, fmt, N, K, wblock, act_block, M, off, rows, A, lda, fuse, q, sa, C32, C16,
                   NULL, ldc);
    if (e != cudaSuccess || !wt2) return e;
    return f16_launch(st, num_sms, E, 1, wt2, fmt, N, K, wblock, act_block, M, off, rows, A, lda, fuse, q, sa, NULL,
                      C16b, NULL, ldc);
}
