/*
 * dic_gemm_f16.cu — the FP8 / FP4 weight GEMMs of both modes: every plain
 * and grouped launch of the batch-invariant mode (docs/determinism.md §7),
 * and in fast mode plain FP8 M <= 64, plain FP4 at any M and the grouped
 * launches (fast FP8 plain M > 64 keeps the wgmma kernel). Plain M <= 8
 * (dic_gemm, dic_gemm_multi) takes k_gemm_dec below: the same bits in one
 * launch.
 *
 * Why: mma.sync m16n8k32 e4m3 is not native on sm_90a (ptxas emulates it
 * with unpacks + two HMMA each, docs/kernels/gemm-decode.md). Here the operands are
 * widened to f16 once and fed to the native HMMA m16n8k16 f16 -> fp32:
 *  - "swap-AB": the weights are the 16-row A operand (16 output columns per
 *    warp), the tokens the 8-column B operand, so a decode token tile
 *    wastes nothing on the weight side (the bytes that matter);
 *  - weights e4m3 -> f16 with cvt.rn.f16x2.e4m3x2 (exact), e2m1 -> f16 by
 *    shifts and masks (exact, the value times 2^-14: folded into the scale);
 *    activations (already quantised to e4m3 by dic_gemm_quant) converted to
 *    f16 once per CTA in shared memory;
 *  - CTA = 4 warps = 64 output columns x MT = 8 NT tokens; K in chunks of
 *    128 streamed by cp.async through a 4-stage shared-memory ring (the
 *    weights) plus register-prefetched scales; split-K over blockIdx.z when
 *    the grid would not fill the device (fp32 partials in the scratch, the
 *    last-arriving CTA of an output tile adds them in split order: no float
 *    atomics, deterministic).
 *
 * Numerics (ops.h di_gemm): per K-block of kb = min(act_block, B) (FP8) or
 * 32 (FP4), P_b = the HMMA sum of the block's exact products (two k16 steps
 * per 32 k, from zero), then C_s = fma(P_b, s_act * s_w, C_s) over the
 * blocks of split s in increasing k, C = C_0 + C_1 + ... in split order.
 * Inside a 32-k sub-block lane t of a quad holds k = 8t..8t+7 (FP8 pairs
 * (0,1)(2,3)(4,5)(6,7), FP4 pairs (0,4)(1,5)(2,6)(3,7)), the same
 * permutation for weights and activations. An output depends only on its
 * own row and column and on the split; with mfree (the batch-invariant
 * mode, plain launches of both modes) the split is d_splits(N, K, SMs) for
 * every M and launch (run as CTAs of their own or, SER, one after another
 * in a CTA: the same bits), so a row's bits do not depend on M, E, max_rows
 * or the other rows; fast-mode grouped launches size it by (E, max_rows).
 * Within the GEMM tolerance of di_gemm (not its bits).
 */
#include <cuda_fp16.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_gemm_quant.cuh"
#include "ops/cuda/dic_gemm_tiles.cuh"
#include "ops/cuda/dic_f16_widen.cuh"

#define F_BN 64   /* output columns per CTA (16 per warp) */
#define F_CK 128  /* k per stage */
#define F_ST 4    /* stages in the ring */
#define F_ARS 144 /* raw e4m3 activation row stride in a stage (bytes) */
#define F_A16 320 /* f16 activation row stride: 8-lane LDS.128 phases hit distinct banks */

typedef struct fargs {
    int E, N, K, M;
    int lab, lwb, nwb, spbm1; /* log2(act_block), log2(wblock) (FP8), K / wblock, kb / 32 - 1 */
    int kper;                 /* k per split (multiple of F_CK) */
    const int *off, *rows;
    const uint8_t *q;
    size_t ldq;
    const float *sa;
    int nsa;
    float *part;
    int *cnt;
    float *C32;
    uint16_t *C16;
    size_t ldc;
} fargs;

/* The A fragments of one 32-k sub-block j for rows r0 and r0 + 8 of a staged
 * weight chunk (row stride wrs bytes), as f16 pairs (lane t of the quad holds
 * k = 8t .. 8t+7; the permutation of the header). */
template <int FP4>
static __device__ __forceinline__ void w_frags(const uint8_t *sg, int r0, int wrs, int j, int t, uint32_t pa[4],
                                               uint32_t pb[4]) {
    if (FP4) {
        uint32_t wa = *(const uint32_t *)(sg + r0 * wrs + 16 * j + 4 * t);
        uint32_t wb = *(const uint32_t *)(sg + (r0 + 8) * wrs + 16 * j + 4 * t);
        e2m1x8_f16(wa, pa);
        e2m1x8_f16(wb, pb);
    } else {
        uint2 wa = *(const uint2 *)(sg + r0 * wrs + 32 * j + 8 * t);
        uint2 wb = *(const uint2 *)(sg + (r0 + 8) * wrs + 32 * j + 8 * t);
        pa[0] = cvt_e4m3x2(wa.x & 0xFFFFu), pa[1] = cvt_e4m3x2(wa.x >> 16);
        pa[2] = cvt_e4m3x2(wa.y & 0xFFFFu), pa[3] = cvt_e4m3x2(wa.y >> 16);
        pb[0] = cvt_e4m3x2(wb.x & 0xFFFFu), pb[1] = cvt_e4m3x2(wb.x >> 16);
        pb[2] = cvt_e4m3x2(wb.y & 0xFFFFu), pb[3] = cvt_e4m3x2(wb.y >> 16);
    }
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
static __device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
static __device__ __forceinline__ void cp_wait_stages() { asm volatile("cp.async.wait_group %0;\n" ::"n"(F_ST - 2)); }

/* Row tile y: rows [i0, i1) of expert e (plain: e = 0). Grouped: tiles are
 * numbered expert by expert, ceil(rows_e / BM) each (dic_gemm_mma.cu
 * tile_rows). Returns 0 when y is past the last tile (the whole CTA exits). */
static __device__ int f_tile_rows(const fargs &a, int BM, int y, int *info) {
    return dic_grouped_tile_rows(a.off, a.E, a.M, BM, y, info);
}

static __device__ __forceinline__ void f_store(const fargs &a, int i, int n, float v) {
    size_t r = (size_t)(a.rows ? a.rows[i] : i);
    if (a.C32) a.C32[r * a.ldc + n] = v;
    else a.C16[r * a.ldc + n] = dic_f32_to_bf16(v);
}

/* Per-stage shared memory (bytes): weights 64 rows, raw activations MT rows,
 * activation scales [MT][4], weight scales [64][4] (per 32-k sub-block). */
#define F_WRS(FP4) ((FP4) ? 80 : 160)
#define F_STAGE(NT, FP4) (64 * F_WRS(FP4) + 8 * (NT) * F_ARS + 8 * (NT) * 16 + 64 * 16)
#define F_SMEM(NT, FP4) (F_ST * F_STAGE(NT, FP4) + 8 * (NT) * F_A16)

/* SER = 1: one CTA per output tile walks every split of a.kper k in turn (gridDim.z == 1), restarting
 * its accumulators at each split boundary and adding the split sums left to right: the same bits as
 * the split launch (gridDim.z = number of splits, partials added in split order by the last CTA)
 * without its scratch, so the split that fixes the bits does not depend on how many rows run. */
template <int NT, int FP4, int SER>
static __global__ void __launch_bounds__(128) k_gemm_f16(const fargs a, const __grid_constant__ dic_gemm_wtab wt) {
    DIC_PDL_ENTER();
    constexpr int MT = 8 * NT, WRS = F_WRS(FP4), WB = FP4 ? 64 : 128, STG = F_STAGE(NT, FP4);
    constexpr int OFF_A = 64 * WRS, OFF_SA = OFF_A + MT * F_ARS, OFF_SW = OFF_SA + MT * 16;
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ int info[3];
    __shared__ int last;
    if (!f_tile_rows(a, MT, blockIdx.y, info)) return;
    const int e = info[0], i0 = info[1], i1 = info[2];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * F_BN, N = a.N, K = a.K;
    const int kbeg = SER ? 0 : blockIdx.z * a.kper, kend = SER ? K : min(K, kbeg + a.kper);
    const int nch = (kend - kbeg + F_CK - 1) / F_CK;
    const uint8_t *W = (const uint8_t *)wt.w[e], *S = wt.s[e];
    const size_t wrow = FP4 ? (size_t)K / 2 : (size_t)K;
    uint8_t *a16 = smem + F_ST * STG;
    const int lab = a.lab, lwb = a.lwb, spbm1 = a.spbm1;

    /* scale prefetch registers: 2 activation scales, 2 weight scales per thread per chunk */
    float rsa[2], rsw[2];
#define F_LOAD_SCALES(c)                                                                           \
    do {                                                                                           \
        const int kc_ = kbeg + (c) * F_CK, kl_ = min(F_CK, kend - kc_);                            \
        _Pragma("unroll") for (int i_ = 0; i_ < 2; i_++) {                                         \
            int u_ = tid + 128 * i_, m_ = u_ >> 2, j_ = u_ & 3;                                     \
            rsa[i_] = 0.0f;                                                                        \
            if (m_ < MT && i0 + m_ < i1 && 32 * j_ < kl_)                                          \
                rsa[i_] = __ldg(a.sa + (size_t)(i0 + m_) * a.nsa + ((kc_ + 32 * j_) >> lab));      \
            rsw[i_] = 0.0f;                                                                        \
            if (n0 + m_ < N && 32 * j_ < kl_) {                                                    \
                uint8_t b_;                                                                        \
                if (FP4) b_ = __ldg(S + (size_t)(n0 + m_) * (K / 32) + ((kc_ + 32 * j_) >> 5));    \
                else b_ = __ldg(S + (size_t)((n0 + m_) >> lwb) * a.nwb + ((kc_ + 32 * j_) >> lwb)); \
                rsw[i_] = FP4 ? dic_e8m0_to_f32(b_) * 16384.0f : dic_e8m0_to_f32(b_);              \
            }                                                                                      \
        }                                                                                          \
    } while (0)
#define F_STORE_SCALES(c)                                                                          \
    do {                                                                                           \
        uint8_t *sg_ = smem + ((c) % F_ST) * STG;                                                  \
        _Pragma("unroll") for (int i_ = 0; i_ < 2; i_++) {                                         \
            int u_ = tid + 128 * i_;                                                               \
            if ((u_ >> 2) < MT) ((float *)(sg_ + OFF_SA))[u_] = rsa[i_];                            \
            ((float *)(sg_ + OFF_SW))[u_] = rsw[i_];                                               \
        }                                                                                          \
    } while (0)
    /* weights and raw activations of chunk c into its stage (rows / k past the ends are not loaded:
     * their garbage only reaches outputs that are never stored, or sub-blocks that are skipped) */
#define F_ISSUE(c)                                                                                 \
    do {                                                                                           \
        const int kc_ = kbeg + (c) * F_CK, kl_ = min(F_CK, kend - kc_);                            \
        uint8_t *sg_ = smem + ((c) % F_ST) * STG;                                                  \
        _Pragma("unroll") for (int i_ = 0; i_ < 64 * WB / 16 / 128; i_++) {                        \
            int u_ = tid + 128 * i_, r_ = u_ / (WB / 16), p_ = u_ % (WB / 16);                      \
            if (n0 + r_ < N && p_ * 16 * (FP4 ? 2 : 1) < kl_)                                      \
                cp16(sg_ + r_ * WRS + p_ * 16, W + (size_t)(n0 + r_) * wrow + (FP4 ? kc_ / 2 : kc_) + p_ * 16); \
        }                                                                                          \
        _Pragma("unroll") for (int i_ = 0; i_ < (MT * 8 + 127) / 128; i_++) {                      \
            int u_ = tid + 128 * i_, r_ = u_ >> 3, p_ = u_ & 7;                                     \
            if (r_ < MT && i0 + r_ < i1 && p_ * 16 < kl_)                                          \
                cp16(sg_ + OFF_A + r_ * F_ARS + p_ * 16, a.q + (size_t)(i0 + r_) * a.ldq + kc_ + p_ * 16); \
        }                                                                                          \
    } while (0)

#pragma unroll 1
    for (int c = 0; c < F_ST - 1; c++) {
        if (c < nch) {
            F_ISSUE(c);
            F_LOAD_SCALES(c);
            F_STORE_SCALES(c);
        }
        cp_commit();
    }
    if (F_ST - 1 < nch) F_LOAD_SCALES(F_ST - 1);

    float acc[NT][4], P[NT][4], tot[SER ? NT : 1][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[nt][j] = P[nt][j] = 0.0f;
    const int cps = a.kper / F_CK; /* SER: chunks per split */

    const int r0 = 16 * warp + g; /* this lane's weight rows r0, r0 + 8 within the CTA */
#pragma unroll 1
    for (int c = 0; c < nch; c++) {
        const uint8_t *sg = smem + (c % F_ST) * STG;
        const int kl = min(F_CK, kend - (kbeg + c * F_CK));
        cp_wait_stages(); /* chunk c landed (this thread's copies) */
        __syncthreads();  /* ... everyone's; and chunk c - 1's readers are done */
        if (c + F_ST - 1 < nch) {
            F_STORE_SCALES(c + F_ST - 1);
            F_ISSUE(c + F_ST - 1);
        }
        cp_commit();
        if (c + F_ST < nch) F_LOAD_SCALES(c + F_ST);
        /* raw e4m3 activations -> f16 pairs in the fragment order (once per CTA) */
#pragma unroll
        for (int i = 0; i < NT; i++) {
            int u = tid + 128 * i, m = u >> 4, j = (u >> 2) & 3, tt = u & 3;
            uint2 v = *(const uint2 *)(sg + OFF_A + m * F_ARS + 32 * j + 8 * tt);
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
        __syncthreads();
        const float *ssa = (const float *)(sg + OFF_SA), *ssw = (const float *)(sg + OFF_SW);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (32 * j < kl) {
                uint32_t pa[4], pb[4];
                w_frags<FP4>(sg, r0, WRS, j, t, pa, pb);
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const uint4 qv = *(const uint4 *)(a16 + (8 * nt + g) * F_A16 + 64 * j + 16 * t);
                    mma16816(P[nt], pa[0], pb[0], pa[1], pb[1], qv.x, qv.y);
                    mma16816(P[nt], pa[2], pb[2], pa[3], pb[3], qv.z, qv.w);
                }
                if (((j + 1) & spbm1) == 0) { /* K-block complete: C_s = fma(P, s_act * s_w, C_s) */
                    const int j0 = j - spbm1;
                    const float w0 = ssw[r0 * 4 + j0], w1 = ssw[(r0 + 8) * 4 + j0];
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) {
                        const float s0 = ssa[(8 * nt + 2 * t) * 4 + j0], s1 = ssa[(8 * nt + 2 * t + 1) * 4 + j0];
                        acc[nt][0] = fmaf(P[nt][0], s0 * w0, acc[nt][0]);
                        acc[nt][1] = fmaf(P[nt][1], s1 * w0, acc[nt][1]);
                        acc[nt][2] = fmaf(P[nt][2], s0 * w1, acc[nt][2]);
                        acc[nt][3] = fmaf(P[nt][3], s1 * w1, acc[nt][3]);
                        P[nt][0] = P[nt][1] = P[nt][2] = P[nt][3] = 0.0f;
                    }
                }
            }
        }
        if (SER && (c + 1) % cps == 0 && c + 1 < nch) { /* split boundary: tot = C_0 + C_1 + ... so far */
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    tot[SER ? nt : 0][j] = c + 1 == cps ? acc[nt][j] : __fadd_rn(tot[SER ? nt : 0][j], acc[nt][j]);
                    acc[nt][j] = 0.0f;
                }
        }
    }
    if (SER && nch > cps) /* the last split's sum added after the others (the split launch's fold) */
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[nt][j] = __fadd_rn(tot[SER ? nt : 0][j], acc[nt][j]);
#undef F_LOAD_SCALES
#undef F_STORE_SCALES
#undef F_ISSUE
    cp_commit();
    asm volatile("cp.async.wait_all;\n" ::);
    const int na = n0 + r0, nb = na + 8;
    if (gridDim.z > 1) { /* split partials, then the last CTA of this output tile adds them in split order */
        const size_t gs = (size_t)a.M * N;
        float *pg = a.part + (size_t)blockIdx.z * gs;
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int ia = i0 + 8 * nt + 2 * t, ib = ia + 1;
            if (ia < i1 && na < N) pg[(size_t)ia * N + na] = acc[nt][0];
            if (ib < i1 && na < N) pg[(size_t)ib * N + na] = acc[nt][1];
            if (ia < i1 && nb < N) pg[(size_t)ia * N + nb] = acc[nt][2];
            if (ib < i1 && nb < N) pg[(size_t)ib * N + nb] = acc[nt][3];
        }
        __threadfence();
        __syncthreads();
        if (tid == 0) {
            int *ctr = a.cnt + (size_t)blockIdx.y * gridDim.x + blockIdx.x;
            last = atomicAdd(ctr, 1) == (int)gridDim.z - 1;
            if (last) *ctr = 0; /* ready for the next launch on the same scratch */
        }
        __syncthreads();
        if (!last) return;
        __threadfence();
        const int ns = gridDim.z;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int i = i0 + 8 * nt + 2 * t + (j & 1), n = (j & 2) ? nb : na;
                if (i >= i1 || n >= N) continue;
                const float *p = a.part + (size_t)i * N + n;
                float v = 0.0f;
                for (int s0 = 0; s0 < ns; s0 += 8) { /* 8 loads in flight, then the adds in split order */
                    float pv[8];
#pragma unroll
                    for (int u = 0; u < 8; u++) pv[u] = s0 + u < ns ? __ldcg(p + (size_t)(s0 + u) * gs) : 0.0f;
#pragma unroll
                    for (int u = 0; u < 8; u++)
                        if (s0 + u < ns) v = s0 + u == 0 ? pv[0] : __fadd_rn(v, pv[u]);
                }
                f_store(a, i, n, v);
            }
        return;
    }
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const int ia = i0 + 8 * nt + 2 * t, ib = ia + 1;
        if (ia < i1 && na < N) f_store(a, ia, na, acc[nt][0]);
        if (ib < i1 && na < N) f_store(a, ib, na, acc[nt][1]);
        if (ia < i1 && nb < N) f_store(a, ia, nb, acc[nt][2]);
        if (ib < i1 && nb < N) f_store(a, ib, nb, acc[nt][3]);
    }
}

/* ---- launcher --------------------------------------------------------------- */

template <int NT, int FP4, int SER>
static cudaError_t launch_nt(cudaStream_t st, dim3 grid, const fargs &a, const dic_gemm_wtab *wt) {
    static thread_local int attr_done; /* per instance and thread (its device): raise the shared-memory limit once */
    const int smem = F_SMEM(NT, FP4);
    if (!attr_done) {
        cudaError_t e =
            cudaFuncSetAttribute(k_gemm_f16<NT, FP4, SER>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess) return e;
        attr_done = 1;
    }
    DIC_LAUNCH((k_gemm_f16<NT, FP4, SER>), grid, 128, smem, st, a, *wt);
    DIC_LAUNCH_CHECK();
}

static int d_splits(int N, int K, int num_sms, int *kper);

static int ilog2(int v) { return __builtin_ctz((unsigned)v); }
static int pow2(int v) { return v > 0 && !(v & (v - 1)); }

extern "C" cudaError_t dic_gemm_f16_launch(cudaStream_t st, int num_sms, int E, const dic_gemm_wtab *wt, int fmt,
                                           int N, int K, int wblock, int act_block, int M, const int *off,
                                           const int *rows, const uint8_t *q, const float *sa, float *part, int *cnt,
                                           int ncnt, float *C32, uint16_t *C16, size_t ldc, int mfree) {
    if (M <= 0 || N <= 0) return cudaSuccess;
    if (fmt != 2 && fmt != 3) return cudaErrorInvalidValue;
    const int wbl = fmt == 2 ? wblock : 32;
    const int kb = fmt == 2 ? (act_block < wblock ? act_block : wblock) : 32;
    if (!pow2(act_block) || act_block < 32 || !pow2(wbl) || wbl < 32 || kb > F_CK || K % kb || K % act_block ||
        K % 32)
        return cudaErrorInvalidValue;
    fargs a;
    a.E = E, a.N = N, a.K = K, a.M = M;
    a.lab = ilog2(act_block), a.lwb = ilog2(wbl), a.nwb = K / wbl, a.spbm1 = kb / 32 - 1;
    a.off = off, a.rows = rows, a.q = q, a.ldq = dic_gemm_ldq(K), a.sa = sa, a.nsa = K / act_block;
    a.part = part, a.cnt = cnt, a.C32 = C32, a.C16 = C16, a.ldc = ldc;
    /* token tile: 8 NT rows; grouped: sized by the mean rows per expert (max_rows / E) */
    int per = off ? (M + E - 1) / E : M, NT = 1;
    while (NT < 8 && 8 * NT < per) NT *= 2;
    const int MT = 8 * NT, gx = (N + F_BN - 1) / F_BN;
    long long gy = (M + MT - 1) / MT + (off ? (E < M ? E : M) : 0);
    if (gy > 65535) return cudaErrorInvalidConfiguration;
    const int nchunks = (K + F_CK - 1) / F_CK;
    int splits = 1, ser = 0;
    if (mfree) {
        /* M-free: the split (and so every output's bits) from (N, K, SMs) only, k_gemm_dec's rule; the
         * splits run as CTAs of their own (partials in the scratch) while that scratch exists (M <= 64)
         * and the grid would not fill the device, else one after another inside each CTA (SER): the
         * same bits either way (docs/determinism.md §7). */
        int kper;
        splits = d_splits(N, K, num_sms, &kper);
        a.kper = kper;
        const long long est = (long long)gx * (off ? (E < M ? E : M) : 1);
        const int phys = splits > 1 && M <= DIC_GEMM_SPLIT_MAXM && part && cnt && gx * gy <= ncnt &&
                         est * splits <= 8LL * (num_sms > 0 ? num_sms : 132);
        ser = splits > 1 && !phys;
        if (ser) splits = 1;
    } else {
        /* split K when the (estimated) grid is under 4 CTAs per SM: decode shapes. Plain launches estimate
         * with one token tile; grouped ones with the experts in the launch (so their bits depend on E and
         * max_rows: fast mode only). */
        long long est = (long long)gx * (off ? (E < M ? E : M) : 1);
        if (M <= DIC_GEMM_SPLIT_MAXM && part && cnt && gx * gy <= ncnt) {
            long long want = 4LL * (num_sms > 0 ? num_sms : 132) / (est > 0 ? est : 1);
            int cap = dic_gemm_ngroups(K) < nchunks ? dic_gemm_ngroups(K) : nchunks; /* the scratch holds ngroups partials */
            splits = want < 1 ? 1 : want > cap ? cap : (int)want;
        }
        int cps = (nchunks + splits - 1) / splits;
        splits = (nchunks + cps - 1) / cps;
        a.kper = cps * F_CK;
    }
    dim3 grid((unsigned)gx, (unsigned)gy, (unsigned)splits);
    const int fp4 = fmt == 3;
    switch (NT * 4 + fp4 * 2 + ser) {
    case 4: return launch_nt<1, 0, 0>(st, grid, a, wt);
    case 5: return launch_nt<1, 0, 1>(st, grid, a, wt);
    case 6: return launch_nt<1, 1, 0>(st, grid, a, wt);
    case 7: return launch_nt<1, 1, 1>(st, grid, a, wt);
    case 8: return launch_nt<2, 0, 0>(st, grid, a, wt);
    case 9: return launch_nt<2, 0, 1>(st, grid, a, wt);
    case 10: return launch_nt<2, 1, 0>(st, grid, a, wt);
    case 11: return launch_nt<2, 1, 1>(st, grid, a, wt);
    case 16: return launch_nt<4, 0, 0>(st, grid, a, wt);
    case 17: return launch_nt<4, 0, 1>(st, grid, a, wt);
    case 18: return launch_nt<4, 1, 0>(st, grid, a, wt);
    case 19: return launch_nt<4, 1, 1>(st, grid, a, wt);
    case 32: return launch_nt<8, 0, 0>(st, grid, a, wt);
    case 33: return launch_nt<8, 0, 1>(st, grid, a, wt);
    case 34: return launch_nt<8, 1, 0>(st, grid, a, wt);
    default: return launch_nt<8, 1, 1>(st, grid, a, wt);
    }
}

/* ---- decode kernel (plain M <= 8, fast mode) ----------------------------------
 *
 * The k_gemm_f16 launch at M <= 8 pays a large fixed cost per CTA lifetime (docs/kernels/gemm-decode.md).
 * This kernel computes the same numbers (every output bitwise equal to k_gemm_f16
 * with NT = 1: the same split count and k range per CTA, the same HMMA steps, the same fma per
 * K-block, the same left-to-right fold of the split partials) with the serial latencies removed:
 *  - before griddepcontrol.wait (PDL) it issues the weights of its first stages (cp.async) and loads
 *    all its weight scales: weights never come from a previous kernel, so their stream overlaps the
 *    producer of the activations;
 *  - after the wait it quantises its own k range of the <= 8 activation rows (qf = 1; the formula of
 *    dic_gemm_quant, so the same e4m3 values and scales) straight into f16 in shared memory: no
 *    separate quantisation launch (qf = 0 reads dic_gemm_quant's output instead: faster when a CTA
 *    has many act blocks to quantise, dic_gemm_dec_fused);
 *  - split-K partials are added inside a thread-block cluster (cluster = the splits of one column
 *    tile, <= 8): no scratch, no counters, no threadfence; rank r adds outputs o % S == r, reading
 *    the S partials from distributed shared memory in split order.
 * A row's bits do not depend on M (M <= 8 here, and k_gemm_f16 gives the same bits for M <= 64).
 * Up to 4 weights with the same K and format share one launch (dic_gemm_multi): CTA column tiles
 * are numbered weight after weight; each column is computed as in the single launch. */

#define D_MAXW 4
typedef struct dargs {
    int M, K, nw, kper, nst;
    int lab, lwb, nwb, spbm1, qf;
    int fl; /* DIC_DEC_* variant / diagnostic flags (dic_gemm_int.h); QV2 only where A allows uint4 loads */
    int tx[D_MAXW + 1]; /* first column tile of weight i (tx[nw] = grid x) */
    int N[D_MAXW];
    const uint8_t *w[D_MAXW];
    const uint8_t *s[D_MAXW];
    float *C32[D_MAXW];
    uint16_t *C16[D_MAXW];
    size_t ldc[D_MAXW];
    const uint16_t *A; /* qf = 1: bf16 rows */
    size_t lda;
    const uint8_t *q; /* qf = 0: dic_gemm_quant's e4m3 rows and scales */
    size_t ldq;
    const float *sa;
    int nsa;
} dargs;

static __device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ float ld_dsmem(const float *p, int rank) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p), r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(r) : "memory");
    return v;
}
static __device__ __forceinline__ void cp_wait_n(int n) {
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::); break;
    default: asm volatile("cp.async.wait_group 3;\n" ::); break;
    }
}

#define D_A16S(kper) (2 * (kper) + 64) /* f16 row stride: rows g, g + 1 64 bytes apart mod 128 (no bank conflicts) */
static size_t d_smem(int nst, int kper, int fp4) {
    return (size_t)nst * 64 * F_WRS(fp4) + 8 * (size_t)D_A16S(kper) + 8 * (size_t)(kper / 32) * 4 + 64 * (size_t)(kper / 32);
}

/* Instantiations (VAR). The b1 step runs each decode kernel once with a cold instruction cache
 * (docs/kernels/gemm-decode.md: code executed once costs its fetch), so the default path has lean copies that
 * hold only what it executes: D_LEAN_Q (qf = 0: dic_gemm_quant's e4m3 rows) and D_LEAN_QV2 (qf = 1
 * with QV2), flags QV2 / ET only, one column tile per CTA. D_FULL keeps every flag and both qf
 * paths (PERS, L2PF, WPOST, diagnostics, the plain qf pass when A does not allow QV2's loads).
 * Every output is the same in all three (the same operations in the same order). */
#define D_LEAN_Q 0
#define D_LEAN_QV2 1
#define D_FULL 2
#define D_LEAN_QV2_M1 3 /* D_LEAN_QV2 for M == 1 (the b1 step): row 0 only folded in; the same per-column arithmetic */
#define D_NVAR 4
template <int FP4, int VAR>
static __global__ void __launch_bounds__(128) k_gemm_dec(const __grid_constant__ dargs a) {
    constexpr int WRS = F_WRS(FP4), WB = FP4 ? 64 : 128;
    constexpr int D_QV2_UNR = VAR == D_FULL ? 4 : 1; /* QV2 rounds unrolled (full: as before, no spills) */
    extern __shared__ __align__(16) uint8_t smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    constexpr bool M1 = VAR == D_LEAN_QV2_M1;
    const int K = a.K, M = M1 ? 1 : a.M, fl = VAR == D_FULL ? a.fl : (a.fl & DIC_DEC_ET); /* lean: the others fold away */
    const int kbeg = blockIdx.z * a.kper, kend = min(K, kbeg + a.kper), kl = kend - kbeg;
    const int nch = (kl + F_CK - 1) / F_CK, nsb = (kl + 31) / 32, nst = min(a.nst, nch);
    const size_t wrow = FP4 ? (size_t)K / 2 : (size_t)K;
    /* column tiles: one per CTA, or (PERS) tile, tile + gridDim.x, ... with the activations converted once */
    for (int tile = blockIdx.x, it = 0; VAR == D_FULL ? tile < a.tx[a.nw] : it < 1; tile += gridDim.x, it++) {
    int wi = 0;
#pragma unroll
    for (int i = 1; i < D_MAXW; i++)
        if (i < a.nw && tile >= a.tx[i]) wi = i;
    const int n0 = (tile - a.tx[wi]) * F_BN, N = a.N[wi];
    const uint8_t *W = a.w[wi], *S = a.s[wi];
    const int kps = a.kper / 32, a16s = D_A16S(a.kper);
    uint8_t *a16 = smem + (size_t)a.nst * 64 * WRS;
    float *ssa = (float *)(a16 + 8 * a16s); /* [8][kps] activation scale per 32-k sub-block */
    uint8_t *ssw = (uint8_t *)(ssa + 8 * kps); /* [64][kps] weight scale byte per row and sub-block */

#define D_ISSUE(c)                                                                                 \
    do {                                                                                           \
        const int kc_ = kbeg + (c) * F_CK, kl_ = min(F_CK, kend - kc_);                            \
        uint8_t *sg_ = smem + ((c) % nst) * 64 * WRS;                                              \
        _Pragma("unroll") for (int i_ = 0; i_ < 64 * WB / 16 / 128; i_++) {                        \
            int u_ = tid + 128 * i_, r_ = u_ / (WB / 16), p_ = u_ % (WB / 16);                      \
            if (n0 + r_ < N && p_ * 16 * (FP4 ? 2 : 1) < kl_)                                      \
                cp16(sg_ + r_ * WRS + p_ * 16, W + (size_t)(n0 + r_) * wrow + (FP4 ? kc_ / 2 : kc_) + p_ * 16); \
        }                                                                                          \
    } while (0)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (it == 0 && (fl & DIC_DEC_ET)) asm volatile("griddepcontrol.launch_dependents;" :::); /* the wait below still waits */
    if (VAR == D_FULL && (fl & DIC_DEC_L2PF) && tid < 64) { /* L2 prefetch: this tile's chunks past the ring (first tile), the next tile */
        const int nx = tile + (int)gridDim.x;
        if (it == 0 && nch > nst && n0 + tid < N) {
            const size_t o = (size_t)(kbeg + nst * F_CK) / (FP4 ? 2 : 1);
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(W + (size_t)(n0 + tid) * wrow + o),
                         "r"((unsigned)((kl - nst * F_CK) / (FP4 ? 2 : 1))) : "memory");
        }
        if (nx < a.tx[a.nw]) {
            int wj = 0;
            for (int i = 1; i < a.nw; i++)
                if (nx >= a.tx[i]) wj = i;
            const int r = (nx - a.tx[wj]) * F_BN + tid;
            if (r < a.N[wj])
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(a.w[wj] + (size_t)r * wrow +
                                                                                  (size_t)kbeg / (FP4 ? 2 : 1)),
                             "r"((unsigned)(kl / (FP4 ? 2 : 1))) : "memory");
        }
    }
#endif
    /* 1. before the PDL wait: weights of the first nst chunks, all weight scales (constant data) */
    if (it > 0 || !(fl & (DIC_DEC_WPOST | DIC_DEC_NOW)))
#pragma unroll 1 /* code size: one copy of the chunk issue */
        for (int c = 0; c < nst; c++) {
            D_ISSUE(c);
            cp_commit();
        }
    /* u = u0 + tid + 128 i = r nsb + sb: one division per round, then (r, sb) stepped by 128 = q128 nsb
     * + r128 (code size: no division per load); u < 64 nsb <=> r < 64 */
    const int q128 = 128 / nsb, r128 = 128 - q128 * nsb;
    for (int u0 = 0; u0 < 64 * nsb; u0 += 8 * 128) {
        uint8_t b[8];
        int off[8];
        int r = (u0 + tid) / nsb, sb = u0 + tid - r * nsb;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int k = kbeg + 32 * sb;
            b[i] = 0;
            off[i] = r < 64 ? r * kps + sb : -1;
            if (r < 64 && n0 + r < N) {
                /* 32-bit offsets (code size): a scale table is far below 4 GB (N K / 32 bytes at most) */
                b[i] = __ldg(S + (FP4 ? (uint32_t)(n0 + r) * (uint32_t)(K / 32) + (uint32_t)(k >> 5)
                                      : (uint32_t)((n0 + r) >> a.lwb) * (uint32_t)a.nwb + (uint32_t)(k >> a.lwb)));
            }
            r += q128, sb += r128;
            if (sb >= nsb) sb -= nsb, r++;
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (off[i] >= 0) ssw[off[i]] = b[i];
    }
    if (it == 0) { /* the PDL wait and the activations: once per CTA */
    DIC_PDL_ENTER();
    if ((fl & DIC_DEC_WPOST) && !(fl & DIC_DEC_NOW)) /* diagnostic: the weights only after the wait */
        for (int c = 0; c < nst; c++) {
            D_ISSUE(c);
            cp_commit();
        }
    if (fl & DIC_DEC_BARE) { /* diagnostic: launch + weight prefetch + PDL handoff only (no outputs) */
        asm volatile("cp.async.wait_all;\n" ::);
        return;
    }

    /* 2. activations of rows < M, k in [kbeg, kend) -> f16 (in the fragment order) + scales */
    if (fl & DIC_DEC_NOQ) {
        /* diagnostic: no activation pass (wrong results, timing only) */
    } else if (VAR == D_LEAN_QV2 || M1 || (VAR == D_FULL && a.qf && (fl & DIC_DEC_QV2))) {
        /* QV2: 8 consecutive values per thread (one 16-byte load), ab / 8 threads per act block (lane
         * groups aligned to the block), all loads of a round (4 per thread) issued before any math;
         * y = x * (1 / s) with s a power of two: the reciprocal is exact, so x * (1 / s) is the correctly
         * rounded x / s (dic_gemm_quant's __fdiv_rn) bit for bit; the block max is the same max. */
        const int gsz = 1 << (a.lab - 3), kp8 = kl >> 3, np = M * kp8;
        for (int u0 = 0; u0 < np; u0 += 4 * 128) {
            uint4 v[4];
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int u = u0 + tid + 128 * r, m = M1 ? 0 : u / kp8, p = u - m * kp8; /* M1: u < np = kp8 where used */
                v[r] = make_uint4(0, 0, 0, 0);
                if (u < np) v[r] = *(const uint4 *)(a.A + (size_t)m * a.lda + kbeg + 8 * p);
            }
#pragma unroll(D_QV2_UNR) /* lean: one copy of the round (code size); v[] shifts down: registers */
            for (int r = 0; r < 4; r++) {
                if (u0 + 128 * r >= np) break; /* CTA-uniform */
                const int u = u0 + tid + 128 * r, m = M1 ? 0 : u / kp8, p = u - m * kp8;
                const uint32_t w4[4] = {v[0].x, v[0].y, v[0].z, v[0].w};
                v[0] = v[1], v[1] = v[2], v[2] = v[3];
                float x[8], amax = 0.0f;
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    x[i] = dic_bf16_to_f32((w4[i >> 1] >> (16 * (i & 1))) & 0xFFFFu);
                    const float av = fabsf(x[i]);
                    if (av > amax) amax = av;
                }
                for (int o = 1; o < gsz; o <<= 1) { /* the lanes of one act block (whole warp shuffles) */
                    const float tt = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
                    if (tt > amax) amax = tt;
                }
                if (u >= np) continue;
                const float sc = dic_act_scale(amax), rc = __frcp_rn(sc);
                if ((tid & (gsz - 1)) == 0) {
                    const int kq = (8 * p) & ~((1 << a.lab) - 1);
                    for (int j = 0; j < (1 << a.lab) >> 5; j++) ssa[m * kps + (kq >> 5) + j] = sc;
                }
                uint4 o;
                if (VAR != D_FULL) { /* lean: the hardware e4m3 conversion (dic_e4m3x2_f16x2: the same f16 values
                                      * as dic_e4m3_f16 for every non-NaN y; code size, as DIC_MD_QHW) */
                    float y[8];
#pragma unroll
                    for (int i = 0; i < 8; i++) y[i] = __fmul_rn(x[i], rc);
                    if (FP4)
                        o = make_uint4(dic_e4m3x2_f16x2(y[0], y[4]), dic_e4m3x2_f16x2(y[1], y[5]),
                                       dic_e4m3x2_f16x2(y[2], y[6]), dic_e4m3x2_f16x2(y[3], y[7]));
                    else
                        o = make_uint4(dic_e4m3x2_f16x2(y[0], y[1]), dic_e4m3x2_f16x2(y[2], y[3]),
                                       dic_e4m3x2_f16x2(y[4], y[5]), dic_e4m3x2_f16x2(y[6], y[7]));
                } else {
                    uint32_t h[8];
#pragma unroll
                    for (int i = 0; i < 8; i++) h[i] = dic_e4m3_f16(__fmul_rn(x[i], rc));
                    if (FP4) /* in-row position of k = 8p + i: 8p + 2 (i & 3) + (i >> 2) */
                        o = make_uint4(h[0] | h[4] << 16, h[1] | h[5] << 16, h[2] | h[6] << 16, h[3] | h[7] << 16);
                    else
                        o = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
                }
                *(uint4 *)(a16 + m * a16s + 16 * p) = o;
            }
        }
    } else if (VAR == D_FULL && a.qf) {
        const int ab = 1 << a.lab, vpl = ab >> 5, nbk = kl >> a.lab, nb = M * nbk;
        for (int b0 = warp; b0 < nb; b0 += 4 * 8) {
            float x[8][4];
#pragma unroll
            for (int r = 0; r < 8; r++) { /* all loads of this round first */
                const int bi = b0 + 4 * r, m = bi / nbk, kb = kbeg + ((bi - m * nbk) << a.lab) + lane * vpl;
                const uint16_t *p = a.A + (size_t)m * a.lda + kb;
                x[r][0] = x[r][1] = x[r][2] = x[r][3] = 0.0f;
                if (bi < nb) {
                    if (vpl == 4) {
                        uint2 v = *(const uint2 *)p;
                        x[r][0] = dic_bf16_to_f32(v.x & 0xFFFFu), x[r][1] = dic_bf16_to_f32(v.x >> 16);
                        x[r][2] = dic_bf16_to_f32(v.y & 0xFFFFu), x[r][3] = dic_bf16_to_f32(v.y >> 16);
                    } else if (vpl == 2) {
                        uint32_t v = *(const uint32_t *)p;
                        x[r][0] = dic_bf16_to_f32(v & 0xFFFFu), x[r][1] = dic_bf16_to_f32(v >> 16);
                    } else {
                        x[r][0] = dic_bf16_to_f32(*p);
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < 8; r++) {
                const int bi = b0 + 4 * r;
                if (bi >= nb) break; /* warp-uniform */
                const int m = bi / nbk, kq = (bi - m * nbk) << a.lab; /* block start, local k */
                float amax = 0.0f;
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    float av = fabsf(x[r][v]);
                    if (v < vpl && av > amax) amax = av;
                }
                for (int o = 16; o; o >>= 1) {
                    float tt = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
                    if (tt > amax) amax = tt;
                }
                const float sc = dic_act_scale(amax);
                if (lane < (ab >> 5)) ssa[m * kps + (kq >> 5) + lane] = sc;
                uint16_t *row = (uint16_t *)(a16 + m * a16s);
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    if (v >= vpl) break;
                    const int k = kq + lane * vpl + v;
                    const int pos = FP4 ? ((k & ~7) | ((k & 3) << 1) | ((k >> 2) & 1)) : k;
                    row[pos] = (uint16_t)dic_e4m3_f16(__fdiv_rn(x[r][v], sc));
                }
            }
        }
    } else {
        const int np = M * (kl >> 3); /* 8-byte pieces of e4m3 */
        for (int u0 = 0; u0 < np; u0 += 8 * 128) {
            uint2 v[8];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int u = u0 + tid + 128 * i, m = u / (kl >> 3), p = u - m * (kl >> 3);
                v[i] = make_uint2(0, 0);
                if (u < np) v[i] = __ldg((const uint2 *)(a.q + (size_t)m * a.ldq + kbeg + 8 * p));
            }
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int u = u0 + tid + 128 * i, m = u / (kl >> 3), p = u - m * (kl >> 3);
                if (u >= np) break;
                uint4 o;
                if (FP4) {
                    uint32_t x = __byte_perm(v[i].x, v[i].y, 0x5140), y = __byte_perm(v[i].x, v[i].y, 0x7362);
                    o = make_uint4(cvt_e4m3x2(x & 0xFFFFu), cvt_e4m3x2(x >> 16), cvt_e4m3x2(y & 0xFFFFu),
                                   cvt_e4m3x2(y >> 16));
                } else {
                    o = make_uint4(cvt_e4m3x2(v[i].x & 0xFFFFu), cvt_e4m3x2(v[i].x >> 16),
                                   cvt_e4m3x2(v[i].y & 0xFFFFu), cvt_e4m3x2(v[i].y >> 16));
                }
                *(uint4 *)(a16 + m * a16s + 16 * p) = o;
            }
        }
        for (int u = tid; u < M * nsb; u += 128) {
            const int m = u / nsb, sb = u - m * nsb;
            ssa[m * kps + sb] = __ldg(a.sa + (size_t)m * a.nsa + ((kbeg + 32 * sb) >> a.lab));
        }
    }

    } /* it == 0 */

    /* 3. the k loop (as k_gemm_f16, NT = 1): chunk c sits in cp.async group c */
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, P[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int r0 = 16 * warp + g, spbm1 = a.spbm1;
#pragma unroll 1
    for (int c = 0; c < nch; c++) {
        const uint8_t *sg = smem + (c % nst) * 64 * WRS;
        const int kl_c = min(F_CK, kend - (kbeg + c * F_CK));
        cp_wait_n(c == 0 ? nst - 1 : max(nst - 2, 0));
        __syncthreads(); /* chunk c (and the activations) visible; chunk c - 1's readers done */
        if (c >= 1) {
            if (c + nst - 1 < nch) D_ISSUE(c + nst - 1);
            cp_commit();
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (32 * j < kl_c) {
                uint32_t pa[4], pb[4];
                w_frags<FP4>(sg, r0, WRS, j, t, pa, pb);
                const uint4 qv = *(const uint4 *)(a16 + g * a16s + 2 * (F_CK * c + 32 * j + 8 * t));
                mma16816(P, pa[0], pb[0], pa[1], pb[1], qv.x, qv.y);
                mma16816(P, pa[2], pb[2], pa[3], pb[3], qv.z, qv.w);
                if (((j + 1) & spbm1) == 0) { /* K-block complete: C_s = fma(P, s_act * s_w, C_s) */
                    const int sb = 4 * c + j - spbm1;
                    const uint8_t b0 = ssw[r0 * kps + sb], b1 = ssw[(r0 + 8) * kps + sb];
                    const float w0 = FP4 ? dic_e8m0_to_f32(b0) * 16384.0f : dic_e8m0_to_f32(b0);
                    const float w1 = FP4 ? dic_e8m0_to_f32(b1) * 16384.0f : dic_e8m0_to_f32(b1);
                    const float s0 = ssa[(2 * t) * kps + sb], s1 = ssa[(2 * t + 1) * kps + sb];
                    acc[0] = fmaf(P[0], s0 * w0, acc[0]);
                    acc[1] = fmaf(P[1], s1 * w0, acc[1]);
                    acc[2] = fmaf(P[2], s0 * w1, acc[2]);
                    acc[3] = fmaf(P[3], s1 * w1, acc[3]);
                    P[0] = P[1] = P[2] = P[3] = 0.0f;
                }
            }
        }
    }
#undef D_ISSUE
    const int na = n0 + r0, nb = na + 8, ia = 2 * t, ib = ia + 1;
    float *C32 = a.C32[wi];
    uint16_t *C16 = a.C16[wi];
    const size_t ldc = a.ldc[wi];
#define D_STORE(i, n, v)                                                                           \
    do {                                                                                           \
        if (C32) C32[(size_t)(i) * ldc + (n)] = (v);                                               \
        else C16[(size_t)(i) * ldc + (n)] = dic_f32_to_bf16(v);                                    \
    } while (0)
    if (gridDim.z == 1 || (fl & DIC_DEC_NOCL)) { /* NOCL (diagnostic, no cluster): split 0's partial only */
        if (!blockIdx.z) {
            if (ia < M && na < N) D_STORE(ia, na, acc[0]);
            if (ib < M && na < N) D_STORE(ib, na, acc[1]);
            if (ia < M && nb < N) D_STORE(ia, nb, acc[2]);
            if (ib < M && nb < N) D_STORE(ib, nb, acc[3]);
        }
        if (VAR == D_FULL && tile + (int)gridDim.x < a.tx[a.nw]) { /* PERS: the ring and the scales are reused */
            asm volatile("cp.async.wait_all;\n" ::);
            __syncthreads();
        }
        continue;
    }
    /* 4. split partials through the cluster: red[token][column] in the (drained) ring */
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();
    float *red = (float *)smem;
    if (!M1 || ia < 1) { /* M1: only token 0's entries are read below */
        red[ia * 64 + r0] = acc[0];
        red[ia * 64 + r0 + 8] = acc[2];
    }
    if (!M1) {
        red[ib * 64 + r0] = acc[1];
        red[ib * 64 + r0 + 8] = acc[3];
    }
    cluster_sync_all();
    const int ns = gridDim.z, rank = blockIdx.z;
#pragma unroll 1 /* code size: one copy of the 8-load fold */
    for (int i = 0; i < (M1 ? 1 : 4); i++) { /* M1: outputs o >= 64 are tokens >= 1 */
        const int o = tid + 128 * i, tok = o >> 6, col = o & 63;
        if (o % ns != rank || tok >= M || n0 + col >= N) continue;
        float pv[8];
#pragma unroll
        for (int s = 0; s < 8; s++) pv[s] = s < ns ? ld_dsmem(red + o, s) : 0.0f;
        float v = pv[0];
#pragma unroll
        for (int s = 1; s < 8; s++)
            if (s < ns) v = __fadd_rn(v, pv[s]);
        D_STORE(tok, n0 + col, v);
    }
#undef D_STORE
    cluster_sync_all(); /* no CTA leaves (or refills its ring) while its partials may still be read */
    } /* tiles */
}

/* The test hook of dic_gemm_int.h dic_gemm_dec_mode. */
static int g_dec_mode = 0, g_dec_broken = 0;
extern "C" void dic_gemm_dec_mode(int mode) { g_dec_mode = mode; }
/* The decode kernel's variant flags: QV2 (its own quantisation, 8 values per thread), and no CTAs-per-SM
 * cap; the other DIC_DEC_* variants lost and live in lab/gemm (docs/kernels/gemm-decode.md "Tried"). */
#define DEC_FLAGS DIC_DEC_QV2
extern "C" int dic_gemm_dec_status(void) { return g_dec_broken ? -1 : g_dec_mode; }

/* k_gemm_f16's split rule for a plain launch (dic_gemm_f16_launch: one token tile) */
static int d_splits(int N, int K, int num_sms, int *kper) {
    const int gx = (N + F_BN - 1) / F_BN, nchunks = (K + F_CK - 1) / F_CK;
    int splits = 1;
    if (dic_gemm_partbytes(1, N, K)) {
        long long want = 4LL * (num_sms > 0 ? num_sms : 132) / gx;
        int cap = dic_gemm_ngroups(K) < nchunks ? dic_gemm_ngroups(K) : nchunks;
        splits = want < 1 ? 1 : want > cap ? cap : (int)want;
    }
    int cps = (nchunks + splits - 1) / splits;
    *kper = cps * F_CK;
    return (nchunks + cps - 1) / cps;
}

extern "C" int dic_gemm_dec_splits(int N, int K, int num_sms, int *kper) { return d_splits(N, K, num_sms, kper); }

/* Quantise inside the kernel (1) or take the quantisation launch first (0): the in-CTA pass costs about
 * one warp round per 4 act blocks of the CTA's rows, so it wins at few act blocks per CTA (M = 1) and loses
 * at many (M = 8): the rule is M * (k per CTA) / act_block <= 16 act blocks (docs/kernels/gemm-decode.md). */
/* 0 when dic_gemm_dec_launch would refuse the shape for its k range (splits > 8 or k per CTA > 2048; e.g.
 * V4.1's Engram wkv, N 25600 K 6144: one split of 6144): dec() in dic_gemm.cu then skips its own
 * quantisation launch, which the fallback would repeat into the same buffers. */
extern "C" int dic_gemm_dec_fits(int N, int K, int num_sms) {
    int kper;
    const int splits = d_splits(N, K, num_sms, &kper);
    return splits <= 8 && kper <= 2048;
}
extern "C" int dic_gemm_dec_fused(int M, int N, int K, int act_block, int num_sms) {
    int kper;
    d_splits(N, K, num_sms, &kper);
    return act_block > 0 && (long long)M * (kper / act_block) <= 16;
}

extern "C" cudaError_t dic_gemm_dec_launch(cudaStream_t st, int num_sms, int nw, const dic_wmat *W, int act_block,
                                           int M, const uint16_t *A, size_t lda, const uint8_t *q, const float *sa,
                                           float *const *C32, uint16_t *const *C16, const size_t *ldc) {
    if (g_dec_broken || g_dec_mode == 2 || M < 1 || M > 8 || nw < 1 || nw > D_MAXW) return cudaErrorNotSupported;
    const int fmt = W[0].fmt, K = W[0].k;
    const int wbl = fmt == 2 ? W[0].wblock : 32;
    const int kb = fmt == 2 ? (act_block < wbl ? act_block : wbl) : 32;
    if ((fmt != 2 && fmt != 3) || !pow2(act_block) || act_block < 32 || act_block > F_CK || !pow2(wbl) || wbl < 32 ||
        kb > F_CK || K % act_block || K % 32)
        return cudaErrorNotSupported;
    const int qf = q == NULL;
    if (qf && (((uintptr_t)A & 7) || (lda & 3))) return cudaErrorNotSupported;
    dargs a;
    memset(&a, 0, sizeof a);
    int splits = 0, kper = 0, gx = 0;
    for (int i = 0; i < nw; i++) {
        if (W[i].fmt != fmt || W[i].k != K || (fmt == 2 && W[i].wblock != wbl) || W[i].n <= 0 || ((uintptr_t)W[i].w & 15))
            return cudaErrorNotSupported;
        int kp, s = d_splits(W[i].n, K, num_sms, &kp);
        if (i && (s != splits || kp != kper)) return cudaErrorNotSupported; /* the same bits as nw launches only */
        splits = s, kper = kp;
        a.tx[i] = gx, a.N[i] = W[i].n, a.w[i] = (const uint8_t *)W[i].w, a.s[i] = W[i].scale;
        a.C32[i] = C32 ? C32[i] : NULL, a.C16[i] = C16 ? C16[i] : NULL, a.ldc[i] = ldc[i];
        if ((!a.C32[i]) == (!a.C16[i])) return cudaErrorInvalidValue;
        gx += (W[i].n + F_BN - 1) / F_BN;
    }
    a.tx[nw] = gx;
    if (splits > 8 || kper > 2048) return cudaErrorNotSupported;
    const int nch = kper / F_CK;
    /* ring stages (docs/kernels/gemm-decode.md): a CTA of <= 4 chunks issues them all before the
     * wait; longer ones take 3 stages (50 KB: 4 CTAs per SM, 512 CTAs in one wave) without clusters
     * and 2 with clusters of 8 (40 KB, 5 per SM: at 4 per SM clusters of the 512-CTA wo_b grid
     * wait for a second wave) */
    int stmax = nch <= 4 ? 4 : splits > 1 ? 2 : 3;
    if (stmax > 4) stmax = 4;
    a.M = M, a.K = K, a.nw = nw, a.kper = kper, a.nst = nch < stmax ? nch : stmax;
    a.lab = ilog2(act_block), a.lwb = ilog2(wbl), a.nwb = K / wbl, a.spbm1 = kb / 32 - 1, a.qf = qf;
    a.A = A, a.lda = lda, a.q = q, a.ldq = dic_gemm_ldq(K), a.sa = sa, a.nsa = K / act_block;
    const int fp4 = fmt == 3;
    a.fl = DEC_FLAGS;
    if ((a.fl & DIC_DEC_QV2) && (!qf || ((uintptr_t)A & 15) || (lda & 7))) a.fl &= ~DIC_DEC_QV2;
    const size_t smem = d_smem(a.nst, kper, fp4);
    /* the lean instantiations (D_LEAN_*), else the full one (the kernel quantising rows that allow no
     * uint4 loads) */
    const int var = !qf                    ? D_LEAN_Q
                    : (a.fl & DIC_DEC_QV2)   ? (M == 1 ? D_LEAN_QV2_M1 : D_LEAN_QV2)
                                             : D_FULL;
    void (*const kf[2][D_NVAR])(dargs) = {
        {k_gemm_dec<0, D_LEAN_Q>, k_gemm_dec<0, D_LEAN_QV2>, k_gemm_dec<0, D_FULL>, k_gemm_dec<0, D_LEAN_QV2_M1>},
        {k_gemm_dec<1, D_LEAN_Q>, k_gemm_dec<1, D_LEAN_QV2>, k_gemm_dec<1, D_FULL>, k_gemm_dec<1, D_LEAN_QV2_M1>}};
    void (*const fn)(dargs) = kf[fp4][var];
    static thread_local int attr_done[2][D_NVAR]; /* per thread: its device's attribute */
    if (!attr_done[fp4][var]) {
        if (cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024) != cudaSuccess) {
            (void)cudaGetLastError();
            g_dec_broken = 1;
            return cudaErrorNotSupported;
        }
        attr_done[fp4][var] = 1;
    }
    cudaLaunchAttribute at[2];
    cudaLaunchConfig_t cfg =
        dic_launch_cfg(dim3((unsigned)gx, 1, (unsigned)splits), dim3(128), smem, st, dim3(1, 1, (unsigned)splits), at);
    cudaError_t e = cudaLaunchKernelEx(&cfg, fn, a);
    if (e != cudaSuccess) { /* e.g. clusters refused: this process falls back to k_gemm_f16 */
        (void)cudaGetLastError();
        g_dec_broken = 1;
        return cudaErrorNotSupported;
    }
    return cudaSuccess;
}
