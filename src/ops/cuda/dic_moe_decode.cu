/*
 * dic_moe_decode.cu — the routed experts at decode sizes in both modes (ops.h di_moe_routed with
 * M * k small; docs/kernels/moe-decode.md): no dispatch, no gather, no separate quantisation,
 * combine or tail. FP4 experts (fmt 3), the product path:
 *   k_mv_up     grid (I / 16, M * k): CTA = (16 columns of h, entry m * k + s), warp w = K-chain w
 *               (the splits w, w + 4, ... of the M-free split) through a private cp.async ring; quantises xn[m] in
 *               shared memory before the PDL wait (dic_gemm_quant's bits), w1 and w3 of its columns,
 *               h = bf16(SwiGLU(bf16 g, bf16 u) clamped, times rw) (dic_swiglu_n's arithmetic).
 *   k_mv_down2  M <= MD2_MAXM: grid (d / 16, M), 8 warps: CTA = 16 output columns of token m with all
 *               k entries (combine local, no cluster); the w2 stream issued before the PDL wait.
 *   k_mv_down   M > MD2_MAXM: CTA = (entry, 16 columns), a cluster of the token's k entries; rank 0
 *               adds the k eo through distributed shared memory.
 *   k_mo_tail   with a side line to join (the shared expert, dic_ctx.join): k_mv_down2 writes the
 *               routed y before the join and this adds `shared` after it (the same fp32 adds).
 * FP8 experts (fmt 2), and the fallback of any FP4 launch that fails or does not fit:
 *   k_md_up / k_md_down: the same two steps with registers instead of rings, one CTA per (token, 16
 *               columns) in the down step.
 *
 * GEMV on the tensor cores (as dic_gemm_f16.cu): the 16 weight rows of a warp are the 16-row A
 * operand of mma.sync m16n8k16 f16 -> fp32, the activation the B operand (its 8 columns all the same
 * vector); e2m1 / e4m3 weights and e4m3 activations are exact in f16. Numerics (ops.h di_gemm;
 * docs/kernels/moe-decode.md §2): the K split of the M-free grouped GEMM (dic_gemm_f16.cu mfree:
 * S = dic_gemm_dec_splits(N, K, SMs) splits of cps chunks of 128 k; up N = I, K = d; down N = d,
 * K = I); per K-block of kb (FP4: 32; FP8 min(act_block, wblock)) P_b = the HMMA sum of the exact
 * products (k_gemm_f16's k-slot order), C_s = fma(P_b, s_act * s_w, C_s) over the blocks of split
 * s in increasing k, C = C_0 + C_1 + ... + C_{S-1} left to right; g, u = bf16(C); h = bf16(rw x
 * SwiGLU(g, u) clamped) (dic_swiglu_n); eo = bf16(C); y = 0 + eo over the entries in increasing
 * (expert, slot) (di_moe_combine's order), + fp32(shared), out = bf16(y); activations quantised
 * with dic_gemm_quant's values. These are the batch-invariant op sequence's operations in its order
 * (dispatch, gather, dic_gemm2_grouped_seg, dic_swiglu_n, dic_gemm_grouped_seg, combine, + shared,
 * bf16), so every kernel here gives that sequence's bits for every row, at any M; deterministic
 * (no atomics). A warp runs splits w, w + 4, ...: the split sums are stored per split and folded in
 * split order, so the bits do not depend on which warp ran a split.
 */
#include <cuda_fp16.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_model.h"
#include "ops/cuda/dic_f16_widen.cuh"
#include "ops/cuda/dic_gemm_quant.cuh"

#define MD_WARPS 4
#define MD_CK 128 /* k per chunk */
#define MD_KMAX 8 /* top-k bound of the fused path */
#define MD_MAXS 16 /* splits a K-chain set may have: dic_gemm_ngroups(K) <= MD_MAXS (K <= 8192) */

typedef struct md_tab {
    const uint8_t *w[DIC_GEMM_MAXE];
    const uint8_t *s[DIC_GEMM_MAXE];
} md_tab;

typedef struct md_args {
    int M, k, E, d, I;
    int lab, lwb, nwb, spbm1; /* log2(act_block); FP8: log2(wblock), K / wblock of the matrix; kb / 32 - 1 */
    int ab;
    int cpu, nspu, cpd, nspd; /* the M-free split (dic_gemm_dec_splits): chunks per split and splits, up / down */
    float limit;
    const int *sel;
    const float *rw;
    const uint16_t *xn;
    size_t ldx;
    uint16_t *h;
    size_t ldh;
    const uint16_t *shared;
    size_t lds;
    float *y;
    uint16_t *out;
    size_t ldo;
} md_args;

/* ---- helpers ---------------------------------------------------------------- */

static __device__ __forceinline__ void md_mma(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* The M-free split structure of dic_gemm_f16.cu (mfree): nsp splits of cps chunks (the last one may
 * be shorter), split s = the fma chain over chunks [s cps, (s + 1) cps) in increasing k. Chain (warp)
 * j runs splits j, j + 4, ... one after another: its item i is chunk md_sp_chunk(j, i, cps), the
 * item ends split md_sp_of(j, i, cps) when md_sp_end(i, n, cps); n = md_sp_len(j, ..) items. The
 * split sums are stored per split and added C_0 + C_1 + ... left to right (md_sp_fold). */
static __device__ __forceinline__ int md_sp_of(int j, int i, int cps) { return j + MD_WARPS * (i / cps); }
static __device__ __forceinline__ int md_sp_chunk(int j, int i, int cps) {
    return md_sp_of(j, i, cps) * cps + i % cps;
}
static __device__ __forceinline__ int md_sp_len(int j, int nsp, int cps, int nch) {
    int n = 0;
    for (int s = j; s < nsp; s += MD_WARPS) n += min(cps, nch - s * cps);
    return n;
}
static __device__ __forceinline__ int md_sp_end(int i, int n, int cps) { return (i + 1) % cps == 0 || i + 1 == n; }
/* C = C_0 + C_1 + ... + C_{nsp-1} (p: C_s at p[16 s]) */
static __device__ __forceinline__ float md_sp_fold(const float *p, int nsp) {
    float v = p[0];
    for (int s = 1; s < nsp; s++) v = __fadd_rn(v, p[16 * s]);
    return v;
}

/* Quad transpose of 4 x 32-bit words: lane t (of its quad) holds row t, gets column t
 * (two butterfly stages: O[t][w] = M[t ^ w ^ ...] = M[w][t]). */
static __device__ __forceinline__ uint4 md_qtrans(uint4 v, int t) {
    uint32_t a0 = v.x, a1 = v.y, a2 = v.z, a3 = v.w;
    { /* xor 2: swap the off-diagonal 2x2 blocks */
        const bool hi = (t & 2) != 0;
        uint32_t s0 = hi ? a0 : a2, s1 = hi ? a1 : a3;
        uint32_t r0 = __shfl_xor_sync(0xFFFFFFFFu, s0, 2), r1 = __shfl_xor_sync(0xFFFFFFFFu, s1, 2);
        if (hi) a0 = r0, a1 = r1;
        else a2 = r0, a3 = r1;
    }
    { /* xor 1: swap the off-diagonal elements of each 2x2 block */
        const bool odd = (t & 1) != 0;
        uint32_t s0 = odd ? a0 : a1, s1 = odd ? a2 : a3;
        uint32_t r0 = __shfl_xor_sync(0xFFFFFFFFu, s0, 1), r1 = __shfl_xor_sync(0xFFFFFFFFu, s1, 1);
        if (odd) a0 = r0, a2 = r1;
        else a1 = r0, a3 = r1;
    }
    return make_uint4(a0, a1, a2, a3);
}

/* Quantise nrows bf16 rows of K values (dic_gemm_quant's bits: blocks of
 * ab, amax >= 1e-4, power-of-two scale s, e4m3 RNE of clamp(x / s, 448);
 * x / s computed as x * (1 / s), the same correctly rounded value since s
 * is a power of two and 1 / s a normal float) into shared memory: row q
 * (source row slot[q] of base, or q) as f16 in the fragment order, lane t
 * of 32-k block b at uint4 (4 b + t) of its buffer (FP4 pairs (0,4)(1,5)..,
 * FP8 (0,1)(2,3)..), i.e. the 8 values of source uint4 u go to uint4 u;
 * scales sa[K / ab] per row. Thread per 8 values, 4 loads in flight per
 * thread, the block amax over ab / 8 adjacent lanes. Whole CTA. */
/* hw = 1 (the ring kernels): dic_e4m3x2_f16x2 (dic_gemm_quant.cuh), the same values as the clamp + round_e4m3
 * below for every finite input. */

/* NTH: the CTA's threads (k_mv_down2: 256; the default: MD_WARPS * 32, the other kernels). NLD: the loads
 * in flight per thread (one round = NTH x NLD uint4, all issued before any math; k_mv_down2: 8, so the k
 * h rows of a token at V4-Flash dims (6 x 2048 values = 6 per thread) are one round: one L2 round trip);
 * the same values and stores for any NLD. */
template <int NTH = MD_WARPS * 32, int NLD = 4>
static __device__ void md_quant_rows(const uint16_t *base, size_t ld, const int *slot, int nrows, int K, int ab,
                                     int fp4, uint8_t *a16, size_t a16_bytes, float *sa, int nsa, int hw = 0) {
    const int tid = threadIdx.x, upr = K / 8, total = nrows * upr, G = ab / 8;
    const int lu = (upr & (upr - 1)) == 0 ? __ffs(upr) - 1 : -1; /* row / column by shifts when a power of 2 */
    const int qst = NTH / upr, cst = NTH - qst * upr; /* u += NTH: q += qst, cu += cst (carry) */
    for (int u0 = 0; u0 < total; u0 += NTH * NLD) {
        uint4 v[NLD];
        int q = lu >= 0 ? (u0 + tid) >> lu : (u0 + tid) / upr, cu = u0 + tid - q * upr; /* u = q upr + cu */
#pragma unroll
        for (int i = 0; i < NLD; i++) {
            const int u = u0 + i * NTH + tid;
            v[i] = make_uint4(0, 0, 0, 0);
            if (u < total) {
                const int row = slot ? slot[q] : q;
                v[i] = *(const uint4 *)(base + (size_t)row * ld + (size_t)cu * 8);
            }
            q += qst, cu += cst;
            if (cu >= upr) cu -= upr, q++;
        }
#pragma unroll 1 /* code size: the body once; v[0] is the current load, the others shift down */
        for (int i = 0; i < NLD; i++) {
            const int u = u0 + i * NTH + tid;
            if (u0 + i * NTH >= total) break; /* uniform over the CTA */
            const uint32_t w[4] = {v[0].x, v[0].y, v[0].z, v[0].w};
            if constexpr (NLD == 4) {
                v[0] = v[1], v[1] = v[2], v[2] = v[3]; /* (the existing instantiations' code, unchanged) */
            } else {
#pragma unroll
                for (int r = 0; r + 1 < NLD; r++) v[r] = v[r + 1];
            }
            float x[8], amax = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                x[j] = dic_bf16_to_f32((uint16_t)(j & 1 ? w[j >> 1] >> 16 : w[j >> 1] & 0xFFFFu));
                float a = fabsf(x[j]);
                if (a > amax) amax = a;
            }
            for (int o = G >> 1; o; o >>= 1) { /* groups of G lanes never straddle u = total (total % 16 == 0) */
                float t = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
                if (t > amax) amax = t;
            }
            if (u >= total) continue;
            const float sc = dic_act_scale(amax), rc = __frcp_rn(sc);
            const int q = lu >= 0 ? u >> lu : u / upr, cu = u - q * upr, row = slot ? slot[q] : q;
            if (cu % G == 0) sa[(size_t)row * nsa + cu / G] = sc;
            if (hw) {
                float tq[8];
#pragma unroll
                for (int j = 0; j < 8; j++) tq[j] = __fmul_rn(x[j], rc);
                uint4 o;
                if (fp4) o = make_uint4(dic_e4m3x2_f16x2(tq[0], tq[4]), dic_e4m3x2_f16x2(tq[1], tq[5]),
                                        dic_e4m3x2_f16x2(tq[2], tq[6]), dic_e4m3x2_f16x2(tq[3], tq[7]));
                else o = make_uint4(dic_e4m3x2_f16x2(tq[0], tq[1]), dic_e4m3x2_f16x2(tq[2], tq[3]),
                                    dic_e4m3x2_f16x2(tq[4], tq[5]), dic_e4m3x2_f16x2(tq[6], tq[7]));
                ((uint4 *)(a16 + (size_t)row * a16_bytes))[cu] = o;
                continue;
            }
            uint32_t hq[8];
#pragma unroll
            for (int j = 0; j < 8; j++) hq[j] = dic_e4m3_f16(__fmul_rn(x[j], rc));
            uint4 o;
            if (fp4) o = make_uint4(hq[0] | hq[4] << 16, hq[1] | hq[5] << 16, hq[2] | hq[6] << 16, hq[3] | hq[7] << 16);
            else o = make_uint4(hq[0] | hq[1] << 16, hq[2] | hq[3] << 16, hq[4] | hq[5] << 16, hq[6] | hq[7] << 16);
            ((uint4 *)(a16 + (size_t)row * a16_bytes))[cu] = o;
        }
    }
}

/* 1 / s for an activation scale s = dic_act_scale(..) (a power of two 2^-126..2^127, or inf): the bits
 * __frcp_rn(s) gives (2^-e exact, 2^-127 subnormal, 1 / inf = 0) without the reciprocal's iterations. */
static __device__ __forceinline__ float md_rcp_pow2(float s) {
    const int be = (int)(__float_as_uint(s) >> 23); /* s > 0 */
    return be < 254 ? __uint_as_float((uint32_t)(254 - be) << 23) : be == 254 ? __uint_as_float(0x00400000u) : 0.0f;
}

/* md_quant_rows (FP4 fragment order, hw = 1), the same values at fewer instructions for the kernels at
 * act_block == MD_CK (L7): the raw bf16 rows are first copied into the a16 buffer (the same 16 bytes per
 * 8 values: NLD loads in flight per thread, no registers carried across units), then each thread
 * quantises its units in place, one unit per iteration (md_quant_rows' rolled register queue and index
 * divisions are a large share of k_mv_down2's instructions: docs/kernels/moe-decode.md §4). Rows of
 * base: nrows at stride ld (no slot table). Whole CTA; ends with __syncthreads. */
template <int NTH, int NLD>
static __device__ void md_quant_lean(const uint16_t *base, size_t ld, int nrows, int K, int ab, uint8_t *a16,
                                     size_t a16_bytes, float *sa, int nsa) {
    const int tid = threadIdx.x, upr = K / 8, total = nrows * upr;
    const int qst = NTH / upr, cst = NTH - qst * upr; /* u += NTH: q += qst, cu += cst (carry) */
    for (int u0 = 0; u0 < total; u0 += NTH * NLD) {
        uint4 v[NLD];
        int q = (u0 + tid) / upr, cu = u0 + tid - q * upr;
        int qs[NLD], cus[NLD];
#pragma unroll
        for (int i = 0; i < NLD; i++) {
            qs[i] = q, cus[i] = cu;
            if (u0 + i * NTH + tid < total) v[i] = *(const uint4 *)(base + (size_t)q * ld + (size_t)cu * 8);
            q += qst, cu += cst;
            if (cu >= upr) cu -= upr, q++;
        }
#pragma unroll
        for (int i = 0; i < NLD; i++)
            if (u0 + i * NTH + tid < total) ((uint4 *)(a16 + (size_t)qs[i] * a16_bytes))[cus[i]] = v[i];
    }
    __syncthreads();
    const int G = ab / 8;
#pragma unroll 1
    for (int q = 0; q < nrows; q++) {
        uint4 *row = (uint4 *)(a16 + (size_t)q * a16_bytes);
#pragma unroll 1
        for (int cu0 = 0; cu0 < upr; cu0 += NTH) { /* warp-uniform bounds: every lane takes the shuffles */
            const int cu = cu0 + tid, ok = cu < upr;
            const uint4 r = ok ? row[cu] : make_uint4(0, 0, 0, 0);
            const uint32_t w[4] = {r.x, r.y, r.z, r.w};
            float x[8], amax = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                x[j] = dic_bf16_to_f32((uint16_t)(j & 1 ? w[j >> 1] >> 16 : w[j >> 1] & 0xFFFFu));
                float a = fabsf(x[j]);
                if (a > amax) amax = a;
            }
            for (int o = G >> 1; o; o >>= 1) { /* groups of G lanes: one row, one block (upr % G == 0) */
                float t = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
                if (t > amax) amax = t;
            }
            if (!ok) continue;
            const float sc = dic_act_scale(amax), rc = md_rcp_pow2(sc);
            if (cu % G == 0) sa[(size_t)q * nsa + cu / G] = sc;
            float tq[8];
#pragma unroll
            for (int j = 0; j < 8; j++) tq[j] = __fmul_rn(x[j], rc);
            row[cu] = make_uint4(dic_e4m3x2_f16x2(tq[0], tq[4]), dic_e4m3x2_f16x2(tq[1], tq[5]),
                                 dic_e4m3x2_f16x2(tq[2], tq[6]), dic_e4m3x2_f16x2(tq[3], tq[7]));
        }
    }
    __syncthreads();
}

/* ---- one warp's chunks of up to two matrices ---------------------------------- */

/* Registers of NB chunks of NM matrices for the lane's two rows ra, ra + 8. */
template <int FP4, int NB, int NM>
struct md_regs {
    uint4 w[NM][NB][FP4 ? 2 : 4]; /* FP4: rows a, b one block each; FP8: rows a, b two uint2 each per 2 blocks */
    uint32_t s[NM][NB][2];        /* weight scale bytes: block (4c + t) of rows a, b (FP8: b unused) */
};

/* Load the chunks of chain ch's items i0 + i (i < NB, < n items; md_sp_chunk) of matrices j < nm.
 * W[j]: row ra's first byte. */
template <int FP4, int NB, int NM>
static __device__ __forceinline__ void md_load(md_regs<FP4, NB, NM> &R, const uint8_t *const W[NM],
                                               const uint8_t *const S[NM], int nm, size_t wrow, int srow_a, int srow_b,
                                               int ch, int i0, int n, int cps, int t, const md_args &a, int nwb,
                                               int ra) {
#pragma unroll
    for (int j = 0; j < NM; j++)
#pragma unroll
        for (int i = 0; i < NB; i++) {
            if (j >= nm || i0 + i >= n) continue;
            const int c = md_sp_chunk(ch, i0 + i, cps);
            if (FP4) {
                const uint8_t *p = W[j] + (size_t)c * 64 + 16 * t;
                R.w[j][i][0] = __ldg((const uint4 *)p);
                R.w[j][i][1] = __ldg((const uint4 *)(p + 8 * wrow));
                R.s[j][i][0] = __ldg(S[j] + (size_t)srow_a + 4 * c + t);
                R.s[j][i][1] = __ldg(S[j] + (size_t)srow_b + 4 * c + t);
            } else {
                const uint8_t *p = W[j] + (size_t)c * 128 + 8 * t;
                uint2 v[8];
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    v[q] = __ldg((const uint2 *)(p + 32 * q));
                    v[4 + q] = __ldg((const uint2 *)(p + 8 * wrow + 32 * q));
                }
#pragma unroll
                for (int q = 0; q < 4; q++) R.w[j][i][q] = make_uint4(v[q].x, v[q].y, v[4 + q].x, v[4 + q].y);
                /* the 16-row tile lies in one wblock row: one scale per sub-block for both rows */
                R.s[j][i][0] = __ldg(S[j] + (size_t)(ra >> a.lwb) * nwb + ((c * MD_CK + 32 * t) >> a.lwb));
                R.s[j][i][1] = 0;
            }
        }
}

/* acc[j][0 / 1]: rows ra / ra + 8 of matrix j, over the activation of matrix j (a16[j], sa[j]); chain
 * ch's items i0 + i (i < NB, < n); at the end of a split its sums go to pp[j][16 s + g], [16 s + g + 8]
 * (lanes t = 0) and acc restarts from 0. */
template <int FP4, int NB, int NM>
static __device__ __forceinline__ void md_compute(const md_regs<FP4, NB, NM> &R, int nm, int ch, int i0, int n,
                                                  int cps, int t, int lane, const md_args &a,
                                                  const uint4 *const a16[NM], const float *const sa[NM],
                                                  float acc[NM][2], float *const pp[NM]) {
    const int qb = lane & ~3, g = lane >> 2;
#pragma unroll
    for (int j = 0; j < NM; j++)
#pragma unroll
        for (int i = 0; i < NB; i++) {
            if (j >= nm || i0 + i >= n) continue;
            const int c = md_sp_chunk(ch, i0 + i, cps);
            uint32_t wa[4], wb[4];
            if (FP4) {
                uint4 ta = md_qtrans(R.w[j][i][0], t), tb = md_qtrans(R.w[j][i][1], t);
                wa[0] = ta.x, wa[1] = ta.y, wa[2] = ta.z, wa[3] = ta.w;
                wb[0] = tb.x, wb[1] = tb.y, wb[2] = tb.z, wb[3] = tb.w;
            }
            const float fa = FP4 ? dic_e8m0_to_f32((uint8_t)R.s[j][i][0]) * 16384.0f
                                 : dic_e8m0_to_f32((uint8_t)R.s[j][i][0]);
            const float fb = FP4 ? dic_e8m0_to_f32((uint8_t)R.s[j][i][1]) * 16384.0f : fa;
            float P[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int q = 0; q < 4; q++) {
                uint32_t pa[4], pb[4];
                if (FP4) {
                    e2m1x8_f16(wa[q], pa);
                    e2m1x8_f16(wb[q], pb);
                } else {
                    const uint4 v = R.w[j][i][q]; /* x, y: row a bytes 8t..8t+7 of sub-block q; z, w: row b */
                    pa[0] = cvt_e4m3x2(v.x & 0xFFFFu), pa[1] = cvt_e4m3x2(v.x >> 16);
                    pa[2] = cvt_e4m3x2(v.y & 0xFFFFu), pa[3] = cvt_e4m3x2(v.y >> 16);
                    pb[0] = cvt_e4m3x2(v.z & 0xFFFFu), pb[1] = cvt_e4m3x2(v.z >> 16);
                    pb[2] = cvt_e4m3x2(v.w & 0xFFFFu), pb[3] = cvt_e4m3x2(v.w >> 16);
                }
                const uint4 qv = a16[j][(4 * c + q) * 4 + t];
                md_mma(P, pa[0], pb[0], pa[1], pb[1], qv.x, qv.y);
                md_mma(P, pa[2], pb[2], pa[3], pb[3], qv.z, qv.w);
                if (((q + 1) & a.spbm1) == 0) { /* K-block complete: C = fma(P, s_act * s_w, C) */
                    const int q0 = q - a.spbm1;
                    const float sw_a = __shfl_sync(0xFFFFFFFFu, fa, qb | q0);
                    const float sw_b = FP4 ? __shfl_sync(0xFFFFFFFFu, fb, qb | q0) : sw_a;
                    const float s_act = sa[j][(c * MD_CK + 32 * q0) >> a.lab];
                    acc[j][0] = fmaf(P[0], s_act * sw_a, acc[j][0]);
                    acc[j][1] = fmaf(P[2], s_act * sw_b, acc[j][1]);
                    P[0] = P[1] = P[2] = P[3] = 0.0f;
                }
            }
            if (md_sp_end(i0 + i, n, cps)) { /* split done: C_s stored, the next split from 0 */
                const int sp = md_sp_of(ch, i0 + i, cps);
                if (t == 0) pp[j][16 * sp + g] = acc[j][0], pp[j][16 * sp + g + 8] = acc[j][1];
                acc[j][0] = acc[j][1] = 0.0f;
            }
        }
}

/* ---- up: w1, w3, SwiGLU ------------------------------------------------------- */

/* The up kernels' end (k_md_up, k_mv_up): the split sums (w1, w3) of row tid, part[matrix][split][row],
 * added in split order, and the SwiGLU of the bf16 g, u (dic_swiglu_n's arithmetic) times the routing
 * weight, as bf16 h[r][col]. */
static __device__ __forceinline__ void md_up_warp_sum(const float part[2][MD_MAXS][16], int nsp, int tid, float &gv,
                                                      float &uv) {
    gv = md_sp_fold(&part[0][0][tid], nsp), uv = md_sp_fold(&part[1][0][tid], nsp);
}
static __device__ __forceinline__ void md_up_swiglu_store(const md_args &a, int r, int col, float gv, float uv) {
    gv = dic_round_bf16(gv), uv = dic_round_bf16(uv); /* the bf16 g, u of di_gemm2_grouped */
    if (a.limit > 0.0f) {                             /* dic_swiglu_n's arithmetic */
        uv = fminf(fmaxf(uv, -a.limit), a.limit);
        gv = fminf(gv, a.limit);
    }
    float hv = gv / (1.0f + dic_expf(-gv)) * uv;
    hv = a.rw[r] * hv;
    a.h[(size_t)r * a.ldh + col] = dic_f32_to_bf16(hv);
}

template <int FP4>
static __global__ void __launch_bounds__(MD_WARPS * 32) k_md_up(const md_args a, const __grid_constant__ md_tab t1,
                                                                const __grid_constant__ md_tab t3) {
    constexpr int NB = FP4 ? 4 : 2;
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ float part[2][MD_MAXS][16];
    DIC_PDL_ENTER();
    const int r = blockIdx.y, m = r / a.k, n0 = blockIdx.x * 16, K = a.d;
    const int e = a.sel[r];
    if (e < 0 || e >= a.E) return;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int nch = K / MD_CK, ra = n0 + g;
    const size_t wrow = FP4 ? (size_t)K / 2 : (size_t)K;
    const uint8_t *W[2] = {t1.w[e] + (size_t)ra * wrow, t3.w[e] + (size_t)ra * wrow};
    const uint8_t *S[2] = {t1.s[e], t3.s[e]};
    const int srow_a = ra * (K / 32), srow_b = (ra + 8) * (K / 32);
    uint4 *a16 = (uint4 *)smem;
    float *sa = (float *)(smem + (size_t)K * 2);
    const uint4 *A16[2] = {a16, a16};
    const float *SA[2] = {sa, sa};
    float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
    float *const PP[2] = {&part[0][0][0], &part[1][0][0]};
    const int cps = a.cpu, n = md_sp_len(warp, a.nspu, cps, nch);
    md_regs<FP4, NB, 2> R;
    md_load<FP4, NB, 2>(R, W, S, 2, wrow, srow_a, srow_b, warp, 0, n, cps, t, a, K >> a.lwb, ra); /* weights first */
    md_quant_rows(a.xn + (size_t)m * a.ldx, a.ldx, NULL, 1, K, a.ab, FP4, smem, 0, sa, 0);
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += NB) {
        if (i0) md_load<FP4, NB, 2>(R, W, S, 2, wrow, srow_a, srow_b, warp, i0, n, cps, t, a, K >> a.lwb, ra);
        md_compute<FP4, NB, 2>(R, 2, warp, i0, n, cps, t, lane, a, A16, SA, acc, PP);
    }
    __syncthreads();
    if (tid < 16) {
        float gv, uv;
        md_up_warp_sum(part, a.nspu, tid, gv, uv);
        md_up_swiglu_store(a, r, n0 + tid, gv, uv);
    }
}

/* The valid slots of a token (es[s] in [0, E), s < k) in increasing (expert, slot): insertion,
 * slots arrive increasing. Returns their number. */
static __device__ __forceinline__ int md_order(const int es[MD_KMAX], int k, int E, int ord[MD_KMAX]) {
    int n = 0;
    for (int s = 0; s < k; s++) {
        const int x = es[s];
        if (x < 0 || x >= E) continue;
        int p = n++;
        while (p > 0 && es[ord[p - 1]] > x) {
            ord[p] = ord[p - 1];
            p--;
        }
        ord[p] = s;
    }
    return n;
}

/* ---- down: w2, combine, shared, bf16 ------------------------------------------ */

template <int FP4>
static __global__ void __launch_bounds__(MD_WARPS * 32) k_md_down(const md_args a, const __grid_constant__ md_tab t2) {
    constexpr int NB = FP4 ? 4 : 2;
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ float part[MD_KMAX][MD_MAXS][16]; /* [slot][split][row] */
    __shared__ int es[MD_KMAX], vsl[MD_KMAX];
    __shared__ int nvs;
    const int m = blockIdx.y, n0 = blockIdx.x * 16, K = a.I, k = a.k;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const size_t wrow = FP4 ? (size_t)K / 2 : (size_t)K;
    /* L2 prefetch of this CTA's weight rows before waiting on the up kernel: sel was written at
     * least two launches back (the up kernel waited for it before letting this grid start). Only a
     * hint: the values are read again below after the wait. */
    {
        const size_t tile = 16 * wrow;
        for (int s = 0; s < k; s++) {
            const int e = a.sel[(size_t)m * k + s];
            if (e < 0 || e >= a.E) continue;
            const uint8_t *p = t2.w[e] + (size_t)n0 * wrow;
            for (size_t o = (size_t)tid * 128; o < tile; o += MD_WARPS * 32 * 128)
                asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
        }
    }
    DIC_PDL_ENTER();
    if (tid < MD_KMAX) {
        int e = tid < k ? a.sel[(size_t)m * k + tid] : -1;
        es[tid] = (e < 0 || e >= a.E) ? -1 : e;
    }
    __syncthreads();
    if (tid == 0) {
        int n = 0;
        for (int s = 0; s < k; s++)
            if (es[s] >= 0) vsl[n++] = s;
        nvs = n;
    }
    __syncthreads();
    const int nch = K / MD_CK, ra = n0 + g;
    const int srow_a = ra * (K / 32), srow_b = (ra + 8) * (K / 32);
    const size_t a16_bytes = (size_t)K * 2;
    float *sa0 = (float *)(smem + (size_t)k * a16_bytes);
    const int nsa = K / a.ab;
    /* the valid entries in slot order, taken in pairs (two matrices per warp pass) */
    const int nv = nvs;
    const int *vs = vsl;
    md_regs<FP4, NB, 2> R;
    int first = 1; /* the first pair's weights are requested before the quantisation */
#pragma unroll 1
    for (int p = 0; p < nv; p += 2) {
        const int s0 = vs[p], s1 = p + 1 < nv ? vs[p + 1] : s0, nm = p + 1 < nv ? 2 : 1;
        const uint8_t *W[2] = {t2.w[es[s0]] + (size_t)ra * wrow, t2.w[es[s1]] + (size_t)ra * wrow};
        const uint8_t *S[2] = {t2.s[es[s0]], t2.s[es[s1]]};
        const uint4 *A16[2] = {(const uint4 *)(smem + (size_t)s0 * a16_bytes),
                               (const uint4 *)(smem + (size_t)s1 * a16_bytes)};
        const float *SA[2] = {sa0 + (size_t)s0 * nsa, sa0 + (size_t)s1 * nsa};
        float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
        float *const PP[2] = {&part[s0][0][0], &part[s1][0][0]};
        const int cps = a.cpd, n = md_sp_len(warp, a.nspd, cps, nch);
        for (int i0 = 0; i0 < n; i0 += NB) {
            md_load<FP4, NB, 2>(R, W, S, nm, wrow, srow_a, srow_b, warp, i0, n, cps, t, a, K >> a.lwb, ra);
            if (first) {
                md_quant_rows(a.h + (size_t)m * k * a.ldh, a.ldh, vs, nv, K, a.ab, FP4, smem, a16_bytes, sa0, nsa);
                __syncthreads();
                first = 0;
            }
            md_compute<FP4, NB, 2>(R, nm, warp, i0, n, cps, t, lane, a, A16, SA, acc, PP);
        }
        if (first) { /* this warp had no chunk: still take part in the quantisation and its barrier */
            md_quant_rows(a.h + (size_t)m * k * a.ldh, a.ldh, vs, nv, K, a.ab, FP4, smem, a16_bytes, sa0, nsa);
            __syncthreads();
            first = 0;
        }
    }
    __syncthreads();
    if (tid < 16) {
        /* entries by (expert, slot); es holds -1 for invalid slots */
        int ord[MD_KMAX];
        const int n = md_order(es, k, a.E, ord);
        const int col = n0 + tid;
        float y = 0.0f;
        for (int i = 0; i < n; i++) {
            const int s = ord[i];
            const float v = md_sp_fold(&part[s][0][tid], a.nspd);
            y = __fadd_rn(y, dic_round_bf16(v)); /* eo = bf16, then the fp32 combine */
        }
        if (a.shared) y = __fadd_rn(y, dic_bf16_to_f32(a.shared[(size_t)m * a.lds + col]));
        if (a.y) a.y[(size_t)m * a.d + col] = y;
        a.out[(size_t)m * a.ldo + col] = dic_f32_to_bf16(y);
    }
}

/* ---- the FP4 ring kernels: per-warp cp.async rings (docs/kernels/moe-decode.md §1) --------
 *
 * The same arithmetic as k_md_up / k_md_down, hence the same bits: per 16-row
 * tile, chain j (0..3) sums the splits j, j + 4, ... (md_sp_chunk), each in
 * increasing k, per 32-k block fma(P_b, s_act * s_w, C_s) with P_b the two
 * HMMAs of the block on the same fragments; C = C_0 + C_1 + ... (split order).
 * What changes is who runs a chain and how its weights arrive:
 *  - a warp runs one chain of one row tile and streams its chunks through a
 *    private ring of stages in shared memory (cp.async 16 B, the lane
 *    copies the two 16-byte blocks it owns, the scale words by lanes t = 0,
 *    1), so several chunks x 2 matrices per warp are in flight instead
 *    of "load 4 chunks to registers, compute, load again";
 *  - the lane reads word t of each 32-k block of its rows back from shared
 *    memory (row stride 80 B: conflict-free) and the scale byte of block q
 *    directly: no quad transpose, no scale shuffles (the same values);
 *  - FP4 -> f16 by byte permutes and the weight scale by an exponent add
 *    (mv_chunk_c: the same values as the decode of md_compute);
 *  - activations quantised by cvt.rn.satfinite.e4m3x2 (md_quant_rows hw = 1,
 *    md_quant_lean: the same values as the clamp + round of the register kernels);
 *  - k_mv_up: CTA = 4 chains of one row tile (grid as k_md_up), xn quantised
 *    before the PDL wait (xn is not written by the launch just before this
 *    op: the gate GEMM and route_rows run between, moe.c);
 *  - k_mv_down: CTA = one (token, slot) entry x one row tile (4 chains),
 *    a cluster of k CTAs along y = the slots of the token: the CTA issues its
 *    w2 stream BEFORE the PDL wait (sel is two launches old; it is read
 *    again after the wait and the stream re-issued if it differs), quantises
 *    only its own h row, rounds its eo to bf16; rank 0 adds the k eo in
 *    increasing (expert, slot) through DSMEM, + shared, y, out.
 * A row's bits do not depend on M and equal the register kernels'. */

#define MV_ROWB 80                     /* shared-memory bytes per weight row of a chunk (64 used) */
#define MV_MATB (16 * MV_ROWB + 16 * 4) /* one matrix of one chunk: 16 rows + 16 scale words */

static __device__ __forceinline__ void mv_cp16(void *dst, const void *src) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
static __device__ __forceinline__ void mv_cp4(void *dst, const void *src) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
}
static __device__ __forceinline__ void mv_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
static __device__ __forceinline__ void mv_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
static __device__ __forceinline__ void mv_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ float mv_ld_dsmem(const float *p, int rank) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p), r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(r) : "memory");
    return v;
}
/* Issue chunk c of nm matrices (W[j]: row ra's first byte, S[j]: row ra's first scale byte; K/32
 * scale bytes per row) into stage buffer st (nm x MV_MATB). Lane (g, t): the 16-byte blocks t of
 * rows g and g + 8; lanes t = 0 / 1 the scale words (4 blocks) of rows g / g + 8. */
template <int NM>
static __device__ __forceinline__ void mv_issue(uint8_t *st, const uint8_t *const W[NM], const uint8_t *const S[NM],
                                                size_t wrow, size_t srow, int c, int g, int t) {
#pragma unroll
    for (int j = 0; j < NM; j++) {
        uint8_t *b = st + j * MV_MATB;
        {
            const uint8_t *p = W[j] + (size_t)c * 64 + 16 * t;
            mv_cp16(b + g * MV_ROWB + 16 * t, p);
            mv_cp16(b + (g + 8) * MV_ROWB + 16 * t, p + 8 * wrow);
        }
        if (t < 2) mv_cp4(b + 16 * MV_ROWB + 4 * (g + 8 * t), S[j] + (size_t)t * 8 * srow + 4 * c);
    }
}


/* Block q of chunk c: rows g / g + 8's weight words wa / wb, scale words sA / sB (md_compute's FP4
 * arithmetic; shared by mv_chunk and its rolled copy mv_chunk_r). */
static __device__ __forceinline__ void mv_block(uint32_t wa, uint32_t wb, uint32_t sA, uint32_t sB, int c, int q,
                                                int t, const uint4 *a16, const float *sa, int lab, float &acc0,
                                                float &acc1) {
        uint32_t pa[4], pb[4];
        e2m1x8_f16(wa, pa);
        e2m1x8_f16(wb, pb);
        const uint4 qv = a16[(4 * c + q) * 4 + t];
        float P[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        md_mma(P, pa[0], pb[0], pa[1], pb[1], qv.x, qv.y);
        md_mma(P, pa[2], pb[2], pa[3], pb[3], qv.z, qv.w);
        const float sw_a = dic_e8m0_to_f32((uint8_t)(sA >> (8 * q))) * 16384.0f;
        const float sw_b = dic_e8m0_to_f32((uint8_t)(sB >> (8 * q))) * 16384.0f;
        const float s_act = sa[(c * MD_CK + 32 * q) >> lab];
        acc0 = fmaf(P[0], s_act * sw_a, acc0);
        acc1 = fmaf(P[2], s_act * sw_b, acc1);
}

/* One chunk c of one matrix from stage buffer b, the q loop rolled (code size: the rare fallback of
 * mv_chunk_c below, one copy of the block body): acc0 / acc1 rows g / g + 8, md_compute's FP4
 * arithmetic on the same values. */
static __device__ __forceinline__ void mv_chunk_r(const uint8_t *b, int c, int g, int t, const uint4 *a16,
                                                  const float *sa, int lab, float &acc0, float &acc1) {
    const uint32_t sA = *(const uint32_t *)(b + 16 * MV_ROWB + 4 * g);
    const uint32_t sB = *(const uint32_t *)(b + 16 * MV_ROWB + 4 * (g + 8));
#pragma unroll 1
    for (int q = 0; q < 4; q++) {
        const uint32_t wa = *(const uint32_t *)(b + g * MV_ROWB + 16 * q + 4 * t);
        const uint32_t wb = *(const uint32_t *)(b + (g + 8) * MV_ROWB + 16 * q + 4 * t);
        mv_block(wa, wb, sA, sB, c, q, t, a16, sa, lab, acc0, acc1);
    }
}

static __device__ __forceinline__ uint32_t md_prmt(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* e2m1x8_f16's four f16x2 (the same bits: f16 = sign << 15 | mag << 9, value x 2^-14) in
 * 11 instructions instead of ~15: the f16 high byte of nibble i is sign << 7 | mag << 1, so
 * ev = the high bytes of the even nibbles 0, 2, 4, 6 (mag << 1, sign << 4), od = of the odd ones
 * (mag >> 3, sign in place), and one byte permute per f16x2 interleaves them with zero low bytes:
 * p[j] = (nibble j, nibble j + 4). */
static __device__ __forceinline__ void md_e2m1x8_p(uint32_t w, uint32_t p[4]) {
    const uint32_t ev = ((w << 1) & 0x0E0E0E0Eu) | ((w << 4) & 0x80808080u); /* h0 h2 h4 h6 */
    const uint32_t od = ((w >> 3) & 0x0E0E0E0Eu) | (w & 0x80808080u);        /* h1 h3 h5 h7 */
    p[0] = md_prmt(ev, 0u, 0x2404u), p[2] = md_prmt(ev, 0u, 0x3414u);
    p[1] = md_prmt(od, 0u, 0x2404u), p[3] = md_prmt(od, 0u, 0x3414u);
}

/* A scale word pair holding a byte >= 241 (inf / NaN products) anywhere in the warp: such a chunk takes
 * the exact decode (mv_block); warp-uniform because mma.sync is .aligned (the other lanes' values are
 * the same through either path). */
static __device__ __forceinline__ int mv_scale_big(uint32_t sA, uint32_t sB) {
    const uint32_t big = ((((sA & 0x7F7F7F7Fu) + 0x0F0F0F0Fu) & sA) | (((sB & 0x7F7F7F7Fu) + 0x0F0F0F0Fu) & sB)) &
                         0x80808080u;
    return __any_sync(0xFFFFFFFFu, big != 0);
}

/* mv_chunk_c's arithmetic on the loaded words of one chunk (wa / wb: rows g / g + 8, blocks q = 0..3;
 * sA / sB their scale words), shared by mv_chunk_c and k_mv_down2's md2_chunk (their stage layouts differ). */
template <int L7 = 0> /* L7: act_block == MD_CK (lab == 7): the chunk's one activation scale sa[c], loaded once */
static __device__ __forceinline__ void mv_chunk_words(const uint32_t wa[4], const uint32_t wb[4], uint32_t sA,
                                                      uint32_t sB, int c, int t, const uint4 *a16, const float *sa,
                                                      int lab, float &acc0, float &acc1) {
    const float s_c = L7 ? sa[c] : 0.0f; /* = sa[(c * MD_CK + 32 q) >> 7] for every q < 4 */
#pragma unroll
    for (int q = 0; q < 4; q++) {
        uint32_t pa[4], pb[4];
        md_e2m1x8_p(wa[q], pa);
        md_e2m1x8_p(wb[q], pb);
        const uint4 qv = a16[(4 * c + q) * 4 + t];
        float P[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        md_mma(P, pa[0], pb[0], pa[1], pb[1], qv.x, qv.y);
        md_mma(P, pa[2], pb[2], pa[3], pb[3], qv.z, qv.w);
        const float sw_a = __uint_as_float(md_prmt(sA, 0u, 0x4440u | q) * (1u << 23) + (14u << 23));
        const float sw_b = __uint_as_float(md_prmt(sB, 0u, 0x4440u | q) * (1u << 23) + (14u << 23));
        const float s_act = L7 ? s_c : sa[(c * MD_CK + 32 * q) >> lab];
        acc0 = fmaf(P[0], s_act * sw_a, acc0);
        acc1 = fmaf(P[2], s_act * sw_b, acc1);
    }
}

/* One chunk c of one matrix, md_compute's FP4 arithmetic on the same values in the same operations. Weight scale of block q =
 * dic_e8m0_to_f32(b) * 16384 = 2^(b - 113), whose bits are (b + 14) << 23 for every b <= 240 (b = 0:
 * 2^-127 * 2^14 exact): one byte permute + one IMAD instead of the decode's compares, selects and
 * the multiply; a chunk whose scale words hold a byte >= 241 (inf / NaN products) takes mv_chunk_r. */
template <int L7 = 0>
static __device__ __forceinline__ void mv_chunk_c(const uint8_t *b, int c, int g, int t, const uint4 *a16,
                                                  const float *sa, int lab, float &acc0, float &acc1) {
    const uint32_t sA = *(const uint32_t *)(b + 16 * MV_ROWB + 4 * g);
    const uint32_t sB = *(const uint32_t *)(b + 16 * MV_ROWB + 4 * (g + 8));
    if (mv_scale_big(sA, sB)) {
        mv_chunk_r(b, c, g, t, a16, sa, lab, acc0, acc1);
        return;
    }
    uint32_t wa[4], wb[4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        wa[q] = *(const uint32_t *)(b + g * MV_ROWB + 16 * q + 4 * t);
        wb[q] = *(const uint32_t *)(b + (g + 8) * MV_ROWB + 16 * q + 4 * t);
    }
    mv_chunk_words<L7>(wa, wb, sA, sB, c, t, a16, sa, lab, acc0, acc1);
}

/* A warp's chain ch: its n = md_sp_len(ch, nsp, cps, nch) items (the chunks of splits ch, ch + 4, ...)
 * of NM matrices through its ring (NST stages at ring); at each split end the sums go to
 * pp[j][16 s + g], [16 s + g + 8] (lanes t = 0) and acc restarts from 0. pre: the first min(NST, n)
 * chunks were already issued (NST groups committed, mv_prologue). */
template <int NST, int NM, int RJ = 0, int L7 = 0>
static __device__ __forceinline__ void mv_chain(uint8_t *ring, const uint8_t *const W[NM],
                                                const uint8_t *const S[NM], size_t wrow, size_t srow, int ch,
                                                int nsp, int cps, int nch, int g, int t, const uint4 *a16,
                                                const float *sa, int lab, float acc[NM][2], float *const pp[NM]) {
    const int n = md_sp_len(ch, nsp, cps, nch);
#pragma unroll 1 /* code size: one chunk's body (NM matrices) is large */
    for (int i = 0; i < n; i++) {
        const int c = md_sp_chunk(ch, i, cps);
        mv_wait<NST - 1>();
        __syncwarp();
        const uint8_t *b = ring + (i % NST) * (NM * MV_MATB);
        {
            if (RJ && NM == 2) {
                /* code size: the two matrices through one body, their accumulators swapped after each
                 * (the same operations on the same values as the unrolled loop below) */
                float x0 = acc[0][0], x1 = acc[0][1], y0 = acc[NM - 1][0], y1 = acc[NM - 1][1];
#pragma unroll 1
                for (int j = 0; j < 2; j++) {
                    mv_chunk_c<L7>(b + j * MV_MATB, c, g, t, a16, sa, lab, x0, x1);
                    const float s0 = x0, s1 = x1;
                    x0 = y0, x1 = y1, y0 = s0, y1 = s1;
                }
                acc[0][0] = x0, acc[0][1] = x1, acc[NM - 1][0] = y0, acc[NM - 1][1] = y1;
            } else {
#pragma unroll
                for (int j = 0; j < NM; j++)
                    mv_chunk_c<L7>(b + j * MV_MATB, c, g, t, a16, sa, lab, acc[j][0], acc[j][1]);
            }
        }
        if (md_sp_end(i, n, cps)) { /* split done: C_s stored, the next split from 0 */
            const int sp = md_sp_of(ch, i, cps);
#pragma unroll
            for (int j = 0; j < NM; j++) {
                if (t == 0) pp[j][16 * sp + g] = acc[j][0], pp[j][16 * sp + g + 8] = acc[j][1];
                acc[j][0] = acc[j][1] = 0.0f;
            }
        }
        __syncwarp();
        if (i + NST < n)
            mv_issue<NM>(ring + (i % NST) * (NM * MV_MATB), W, S, wrow, srow, md_sp_chunk(ch, i + NST, cps), g, t);
        mv_commit();
    }
}

template <int NST, int NM>
static __device__ __forceinline__ void mv_prologue(uint8_t *ring, const uint8_t *const W[NM],
                                                   const uint8_t *const S[NM], size_t wrow, size_t srow, int ch,
                                                   int nsp, int cps, int nch, int g, int t, int valid) {
    const int n = md_sp_len(ch, nsp, cps, nch);
#pragma unroll 1 /* code size: one copy of the issue (the same requests in the same order) */
    for (int i = 0; i < NST; i++) {
        if (valid && i < n) mv_issue<NM>(ring + i * (NM * MV_MATB), W, S, wrow, srow, md_sp_chunk(ch, i, cps), g, t);
        mv_commit();
    }
}

#define MV_NST 2 /* k_mv_up's ring stages per warp (x 2 matrices) */

/* up: warp = chain of one row tile. L7 = 1: act_block == MD_CK (md_quant_lean, the chunk's one
 * activation scale loaded once); L7 = 0: any other act_block (md_quant_rows); the same values. */
template <int L7>
static __global__ void __launch_bounds__(MD_WARPS * 32, 7) k_mv_up(const md_args a, const __grid_constant__ md_tab t1,
                                                                const __grid_constant__ md_tab t3) {
    constexpr int NST = MV_NST;
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ float part[2][MD_MAXS][16]; /* [matrix][split][row] */
    const int r = blockIdx.y, m = r / a.k, K = a.d;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int chain = warp;
    const int n0 = blockIdx.x * 16; /* this warp's row tile */
    const int nch = K / MD_CK, ra = n0 + g;
    const size_t wrow = (size_t)K / 2, srow = (size_t)K / 32;
    uint8_t *ring = smem + (size_t)warp * NST * 2 * MV_MATB;
    uint4 *a16 = (uint4 *)(smem + (size_t)MD_WARPS * NST * 2 * MV_MATB);
    float *sa = (float *)((uint8_t *)a16 + (size_t)K * 2);
    /* xn is quantised before the PDL wait: it is not written by the launch just before this op */
    if (L7)
        md_quant_lean<MD_WARPS * 32, 4>(a.xn + (size_t)m * a.ldx, a.ldx, 1, K, a.ab, (uint8_t *)a16, 0, sa, 0);
    else
        md_quant_rows(a.xn + (size_t)m * a.ldx, a.ldx, NULL, 1, K, a.ab, 1, (uint8_t *)a16, 0, sa, 0, 1);
    DIC_PDL_ENTER();
    const int e = a.sel[r];
    const int valid = e >= 0 && e < a.E;
    if (!valid) return;
    const int ev = valid ? e : 0;
    const uint8_t *W[2] = {t1.w[ev] + (size_t)ra * wrow, t3.w[ev] + (size_t)ra * wrow};
    const uint8_t *S[2] = {t1.s[ev] + (size_t)ra * srow, t3.s[ev] + (size_t)ra * srow};
    mv_prologue<NST, 2>(ring, W, S, wrow, srow, chain, a.nspu, a.cpu, nch, g, t, valid);
    __syncthreads();
    float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
    float *const PP[2] = {&part[0][0][0], &part[1][0][0]};
    if (valid)
        mv_chain<NST, 2, 1, L7>(ring, W, S, wrow, srow, chain, a.nspu, a.cpu, nch, g, t, a16, sa, a.lab, acc, PP);
    __syncthreads();
    if (tid < 16 && valid) {
        float gv, uv;
        md_up_warp_sum(part, a.nspu, tid, gv, uv);
        md_up_swiglu_store(a, r, n0 + tid, gv, uv);
    }
}

/* down: CTA = entry blockIdx.y (cluster rank = slot) x row tile blockIdx.x. */
template <int NST>
static __global__ void __launch_bounds__(MD_WARPS * 32, 8) k_mv_down(const md_args a, const __grid_constant__ md_tab t2) {
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ float part[MD_MAXS][16]; /* [split][row] */
    __shared__ float eo[16];
    __shared__ int ord_s[MD_KMAX], nord_s, es0[MD_KMAX]; /* rank 0's (expert, slot) order and the token's sel it
                                                         * was made from, before the wait */
    const int r = blockIdx.y, m = r / a.k, slot = r - m * a.k, n0 = blockIdx.x * 16, K = a.I;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int nch = K / MD_CK, ra = n0 + g;
    const size_t wrow = (size_t)K / 2, srow = (size_t)K / 32;
    uint8_t *ring = smem + (size_t)warp * NST * MV_MATB;
    uint4 *a16 = (uint4 *)(smem + (size_t)MD_WARPS * NST * MV_MATB);
    float *sa = (float *)((uint8_t *)a16 + (size_t)K * 2);
    /* the w2 stream before the wait: sel was written two launches back (the up kernel waited for
     * it before this grid could start); checked again after the wait */
    int e = a.sel[r];
    int valid = e >= 0 && e < a.E;
    {
        const int ev = valid ? e : 0;
        const uint8_t *W[1] = {t2.w[ev] + (size_t)ra * wrow};
        const uint8_t *S[1] = {t2.s[ev] + (size_t)ra * srow};
        mv_prologue<NST, 1>(ring, W, S, wrow, srow, warp, a.nspd, a.cpd, nch, g, t, valid);
    }
    if (slot == 0 && tid == 0) {
        /* the combine order from the same (two launches old) sel; the token's row is read again
         * after the wait below and the order re-made if it changed (never expected) */
#pragma unroll
        for (int s = 0; s < MD_KMAX; s++) es0[s] = s < a.k ? a.sel[(size_t)m * a.k + s] : -1;
        int e0[MD_KMAX], ord[MD_KMAX];
#pragma unroll
        for (int s = 0; s < MD_KMAX; s++) e0[s] = es0[s];
        const int n = md_order(e0, a.k, a.E, ord);
        for (int i = 0; i < n; i++) ord_s[i] = ord[i];
        nord_s = n;
    }
    DIC_PDL_ENTER();
    float shv = 0.0f; /* rank 0's shared value, requested early (written before the up kernel) */
    if (slot == 0 && tid < 16 && a.shared) shv = dic_bf16_to_f32(a.shared[(size_t)m * a.lds + n0 + tid]);
    const int e2 = *(volatile const int *)(a.sel + r);
    { /* the h loads in flight together with the sel re-reads (an invalid entry's h row is unused) */
        int es1[MD_KMAX];
        if (slot == 0 && tid == 0) {
#pragma unroll
            for (int s = 0; s < MD_KMAX; s++) es1[s] = s < a.k ? *(volatile const int *)(a.sel + (size_t)m * a.k + s) : -1;
        }
        md_quant_rows(a.h + (size_t)r * a.ldh, a.ldh, NULL, 1, K, a.ab, 1, (uint8_t *)a16, 0, sa, 0, 1);
        if (slot == 0 && tid == 0) {
            int same = 1;
#pragma unroll
            for (int s = 0; s < MD_KMAX; s++) same &= es1[s] == es0[s];
            if (!same) { /* not expected */
                int ord[MD_KMAX], n = md_order(es1, a.k, a.E, ord);
                for (int i = 0; i < n; i++) ord_s[i] = ord[i];
                nord_s = n;
            }
        }
    }
    if (e2 != e) { /* not expected: drain and re-issue from the current value */
        asm volatile("cp.async.wait_all;\n" ::);
        __syncwarp();
        e = e2, valid = e >= 0 && e < a.E;
        const int ev = valid ? e : 0;
        const uint8_t *W[1] = {t2.w[ev] + (size_t)ra * wrow};
        const uint8_t *S[1] = {t2.s[ev] + (size_t)ra * srow};
        mv_prologue<NST, 1>(ring, W, S, wrow, srow, warp, a.nspd, a.cpd, nch, g, t, valid);
    }
    const int ev = valid ? e : 0;
    const uint8_t *W[1] = {t2.w[ev] + (size_t)ra * wrow};
    const uint8_t *S[1] = {t2.s[ev] + (size_t)ra * srow};
    __syncthreads();
    float acc[1][2] = {{0.0f, 0.0f}};
    float *const PP[1] = {&part[0][0]};
    if (valid) mv_chain<NST, 1>(ring, W, S, wrow, srow, warp, a.nspd, a.cpd, nch, g, t, a16, sa, a.lab, acc, PP);
    __syncthreads();
    if (tid < 16) eo[tid] = valid ? dic_round_bf16(md_sp_fold(&part[0][tid], a.nspd)) : 0.0f; /* eo = bf16 */
    mv_cluster_sync();
    if (slot == 0 && tid < 16) {
        int ord[MD_KMAX], n = 0;
        { /* the order made above (checked against the post-wait sel) */
            n = nord_s;
#pragma unroll
            for (int i = 0; i < MD_KMAX; i++) ord[i] = i < n ? ord_s[i] : 0;
        }
        const int col = n0 + tid;
        float y = 0.0f;
        {
            float v[MD_KMAX];
#pragma unroll
            for (int i = 0; i < MD_KMAX; i++) v[i] = i < n ? mv_ld_dsmem(&eo[tid], ord[i]) : 0.0f;
#pragma unroll
            for (int i = 0; i < MD_KMAX; i++)
                if (i < n) y = __fadd_rn(y, v[i]);
            if (a.shared) y = __fadd_rn(y, shv);
        }
        if (a.y) a.y[(size_t)m * a.d + col] = y;
        a.out[(size_t)m * a.ldo + col] = dic_f32_to_bf16(y);
    }
    mv_cluster_sync(); /* no CTA leaves while its eo may still be read */
}

/* ---- k_mv_down2 (FP4, M <= MD2_MAXM): one CTA per (16-column tile, token), all k entries ------
 *
 * Grid (d / 16, M), 8 warps (docs/kernels/moe-decode.md §1): a CTA owns the 16 output columns n0.. of
 * token m and ALL its k entries, so the combine is local (no cluster, no DSMEM) and M = 1 is one wave
 * (d / 16 = 256 CTAs at 2 per SM). Warp w runs chain j = w & 3 (the splits j, j + 4, ..., each in
 * increasing k: md_sp_chunk) of the valid entries of index parity w >> 2 (the valid slots in slot order: entries
 * 0, 2, 4 / 1, 3, 5 at k = 6), one item (entry, chunk) per step, entry by entry. The items stream
 * through a private ring of NST stages (cp.async 16 B as mv_issue: the lane copies block t of rows
 * g, g + 8, lanes t = 0 / 1 the scale words), issued BEFORE the PDL wait from sel read before the wait
 * (written two launches back: the up kernel waited for it before this grid could start, as in
 * k_mv_down). After the wait each warp re-reads sel; a warp whose entries changed (never expected)
 * drains its copies and re-issues. Stage layout (1088 B, no padding): row r's 16-byte block q at
 * r * 64 + 16 (q ^ ((r >> 1) & 3)), the 16 scale words at 1024: the reads of word t of block q of
 * rows g (and g + 8) hit 32 distinct banks.
 * Arithmetic: exactly k_mv_down's: h rows quantised by md_quant_lean / md_quant_rows (all k rows of
 * the token, the invalid ones unused), per entry and chain C_j = the fma chain of mv_chunk_c
 * (md2_chunk: the same operations on the same values, only the shared-memory addresses differ; the
 * rare slow path taken warp-uniformly), eo = bf16(C_0 + C_1 + ... in split order), y = 0 + eo over the valid entries in increasing (expert, slot)
 * (md_order's order), + shared when given, y and out. Hence the same bits (h, y, out) as k_mv_down
 * and the register kernels; a row's bits do not depend on M. */

#define MD2_WARPS 8
#define MD2_NST 10                 /* ring stages per warp at act_block != MD_CK (8 x 10 x 1088 B + the k h rows) */
#define MD2_NST_LEAN 4             /* ring stages per warp at act_block == MD_CK: a smaller prologue before the wait */
#define MD2_STB (16 * 64 + 16 * 4) /* one chunk of one entry: 16 rows x 64 B (swizzled) + 16 scale words */
#define MD2_QLD 8                  /* md_quant_rows' loads per thread per round: k x I / 8 / 256 = 6 at V4-Flash (one round) */

/* byte offset of row r's 16-byte block q in a stage */
static __device__ __forceinline__ int md2_woff(int r, int q) { return r * 64 + 16 * (q ^ ((r >> 1) & 3)); }

/* the position of the n-th (from 0) set bit of vm */
static __device__ __forceinline__ int md2_nth(unsigned vm, int n) {
#pragma unroll 1
    for (int x = 0; x < n; x++) vm &= vm - 1;
    return __ffs((int)vm) - 1;
}

/* mv_issue<1> into the swizzled stage: chunk c of the tile (W: row n0 + g's first byte, S: its first
 * scale byte) */
static __device__ __forceinline__ void md2_issue(uint8_t *st, const uint8_t *W, const uint8_t *S, size_t wrow,
                                                 size_t srow, int c, int g, int t) {
    const uint8_t *p = W + (size_t)c * 64 + 16 * t;
    mv_cp16(st + md2_woff(g, t), p);
    mv_cp16(st + md2_woff(g + 8, t), p + 8 * wrow);
    if (t < 2) mv_cp4(st + 1024 + 4 * (g + 8 * t), S + (size_t)t * 8 * srow + 4 * c);
}

/* mv_chunk_c on the swizzled stage: the same operations in the same order on the same values (the
 * rare scale byte >= 241 through mv_block, as mv_chunk_r) */
template <int L7 = 0>
static __device__ __forceinline__ void md2_chunk(const uint8_t *b, int c, int g, int t, const uint4 *a16,
                                                 const float *sa, int lab, float &acc0, float &acc1) {
    const uint32_t sA = *(const uint32_t *)(b + 1024 + 4 * g);
    const uint32_t sB = *(const uint32_t *)(b + 1024 + 4 * (g + 8));
    if (mv_scale_big(sA, sB)) {
#pragma unroll 1
        for (int q = 0; q < 4; q++) {
            const uint32_t wa = *(const uint32_t *)(b + md2_woff(g, q) + 4 * t);
            const uint32_t wb = *(const uint32_t *)(b + md2_woff(g + 8, q) + 4 * t);
            mv_block(wa, wb, sA, sB, c, q, t, a16, sa, lab, acc0, acc1);
        }
        return;
    }
    uint32_t wa[4], wb[4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        wa[q] = *(const uint32_t *)(b + md2_woff(g, q) + 4 * t);
        wb[q] = *(const uint32_t *)(b + md2_woff(g + 8, q) + 4 * t);
    }
    mv_chunk_words<L7>(wa, wb, sA, sB, c, t, a16, sa, lab, acc0, acc1);
}

/* A warp's items (entry index q of its parity, chunk index ci): the entry's slot and chunk. */
struct md2_it {
    int q, ci;
};

/* Issue the ring's first MD2_NST items (one commit group each, issued or not) from the lane's sel
 * value e (-1: invalid or lane >= k) and the valid mask vm. */
template <int NST = MD2_NST>
static __device__ __forceinline__ void md2_prologue(uint8_t *ring, const md_tab &t2, int e, unsigned vm, int par,
                                                    int j, int npc, int cps, int nit, int n0, size_t wrow, size_t srow,
                                                    int g, int t) {
    md2_it it = {0, 0};
    int s = md2_nth(vm, par), ex = __shfl_sync(0xFFFFFFFFu, e, s & 31);
#pragma unroll 1
    for (int i = 0; i < NST; i++) {
        if (i < nit) {
            const uint8_t *W = t2.w[ex] + (size_t)(n0 + g) * wrow, *S = t2.s[ex] + (size_t)(n0 + g) * srow;
            md2_issue(ring + i * MD2_STB, W, S, wrow, srow, md_sp_chunk(j, it.ci, cps), g, t);
            if (++it.ci == npc) {
                it.ci = 0, it.q++;
                s = md2_nth(vm, par + 2 * it.q), ex = __shfl_sync(0xFFFFFFFFu, e, s & 31);
            }
        }
        mv_commit();
    }
}

/* L7 = 1: act_block == MD_CK (md_quant_lean, the chunk's one activation scale loaded once), ring
 * stages MD2_NST_LEAN; L7 = 0: any other act_block (md_quant_rows), MD2_NST. The same values. */
template <int L7, int NST>
static __global__ void __launch_bounds__(MD2_WARPS * 32, 2) k_mv_down2(const md_args a, const __grid_constant__ md_tab t2) {
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ float part[MD_KMAX][MD_MAXS][16]; /* [slot][split][row] */
    __shared__ int ord_s[MD_KMAX];
    const int m = blockIdx.y, n0 = blockIdx.x * 16, K = a.I, k = a.k;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int j = warp & 3, par = warp >> 2; /* chain, entry parity */
    const int nch = K / MD_CK, cps = a.cpd;
    const int npc = md_sp_len(j, a.nspd, cps, nch); /* chunks of this chain per entry (its splits') */
    const size_t wrow = (size_t)K / 2, srow = (size_t)K / 32;
    uint8_t *ring = smem + (size_t)warp * NST * MD2_STB;
    uint8_t *a16b = smem + (size_t)MD2_WARPS * NST * MD2_STB;
    const size_t a16_bytes = (size_t)K * 2;
    const int nsa = K / a.ab;
    float *sa = (float *)(a16b + (size_t)k * a16_bytes);
    const int *selm = a.sel + (size_t)m * k;
    /* the w2 stream before the wait: sel was written two launches back (the up kernel waited for it
     * before this grid could start); every warp reads it again after the wait */
    int e = lane < k ? selm[lane] : -1;
    if (e < 0 || e >= a.E) e = -1;
    unsigned vm = __ballot_sync(0xFFFFFFFFu, e >= 0);
    int nit = ((__popc(vm) - par + 1) >> 1) * npc; /* the warp's items: its entries x its chunks */
    md2_prologue<NST>(ring, t2, e, vm, par, j, npc, cps, nit, n0, wrow, srow, g, t);
    DIC_PDL_ENTER();
    float shv = 0.0f; /* warp 0's shared values, requested early */
    if (warp == 0 && lane < 16 && a.shared) shv = dic_bf16_to_f32(a.shared[(size_t)m * a.lds + n0 + lane]);
    /* sel again after the wait, requested here and compared after the h quantisation (which does not
     * depend on it): its L2 round trip overlaps the h loads instead of preceding them */
    int e2 = lane < k ? *(volatile const int *)(selm + lane) : -1;
    if (L7)
        md_quant_lean<MD2_WARPS * 32, MD2_QLD>(a.h + (size_t)m * k * a.ldh, a.ldh, k, K, a.ab, a16b, a16_bytes, sa, nsa);
    else /* all k rows of the token (an invalid entry's row is not read) */
        md_quant_rows<MD2_WARPS * 32, MD2_QLD>(a.h + (size_t)m * k * a.ldh, a.ldh, NULL, k, K, a.ab, 1, a16b, a16_bytes, sa,
                                      nsa, 1);
    if (e2 < 0 || e2 >= a.E) e2 = -1;
    if (__any_sync(0xFFFFFFFFu, e2 != e)) { /* not expected: drain and re-issue from the current values */
        asm volatile("cp.async.wait_all;\n" ::);
        __syncwarp();
        e = e2, vm = __ballot_sync(0xFFFFFFFFu, e >= 0);
        nit = ((__popc(vm) - par + 1) >> 1) * npc;
        md2_prologue<NST>(ring, t2, e, vm, par, j, npc, cps, nit, n0, wrow, srow, g, t);
    }
    __syncthreads();
    DIC_STAMP_PHASE(601);
    {
        md2_it it = {0, 0}, is = {0, 0}; /* the item computed, the item issued next (NST ahead) */
        for (int x = 0; x < NST && x < nit; x++)
            if (++is.ci == npc) is.ci = 0, is.q++;
        int s = md2_nth(vm, par);
        float acc0 = 0.0f, acc1 = 0.0f;
#pragma unroll 1
        for (int i = 0; i < nit; i++) {
            mv_wait<NST - 1>();
            __syncwarp();
            const uint8_t *b = ring + (i % NST) * MD2_STB;
            md2_chunk<L7>(b, md_sp_chunk(j, it.ci, cps), g, t, (const uint4 *)(a16b + (size_t)s * a16_bytes),
                          sa + (size_t)s * nsa, a.lab, acc0, acc1);
            if (md_sp_end(it.ci, npc, cps)) { /* a split of the entry done: C_s stored, the next from 0 */
                const int sp = md_sp_of(j, it.ci, cps);
                if (t == 0) part[s][sp][g] = acc0, part[s][sp][g + 8] = acc1;
                acc0 = acc1 = 0.0f;
            }
            if (++it.ci == npc) { /* the entry's chain done */
                it.ci = 0, it.q++;
                s = md2_nth(vm, par + 2 * it.q);
            }
            __syncwarp();
            if (i + NST < nit) {
                const int ss = md2_nth(vm, par + 2 * is.q), ex = __shfl_sync(0xFFFFFFFFu, e, ss);
                const uint8_t *W = t2.w[ex] + (size_t)(n0 + g) * wrow, *S = t2.s[ex] + (size_t)(n0 + g) * srow;
                md2_issue(ring + (i % NST) * MD2_STB, W, S, wrow, srow, md_sp_chunk(j, is.ci, cps), g, t);
                if (++is.ci == npc) is.ci = 0, is.q++;
            }
            mv_commit();
        }
    }

    __syncthreads();
    DIC_STAMP_PHASE(602);
    if (warp == 0) {
        /* the valid entries in increasing (expert, slot) (md_order's order): lane s's rank */
        int rank = 0;
#pragma unroll
        for (int s2 = 0; s2 < MD_KMAX; s2++) {
            const int x = __shfl_sync(0xFFFFFFFFu, e, s2);
            rank += s2 < k && x >= 0 && (x < e || (x == e && s2 < lane));
        }
        if (e >= 0) ord_s[rank] = lane;
        __syncwarp();
        if (lane < 16) {
            const int n = __popc(vm), col = n0 + lane;
            float y = 0.0f;
            for (int i = 0; i < n; i++) {
                const int s = ord_s[i];
                const float v = md_sp_fold(&part[s][0][lane], a.nspd);
                y = __fadd_rn(y, dic_round_bf16(v)); /* eo = bf16, then the fp32 combine */
            }
            if (a.shared) y = __fadd_rn(y, shv);
            if (a.y) a.y[(size_t)m * a.d + col] = y;
            if (a.out) a.out[(size_t)m * a.ldo + col] = dic_f32_to_bf16(y); /* NULL: k_mo_tail writes it */
        }
    }
}

/* ---- k_mo_tail: `shared` added after the join ------------------------------------------------- */

#define MO_MAXM 8    /* rows the tail's routed-y scratch holds */
#define MO_DMAX 8192 /* columns the tail's routed-y scratch holds */
static __device__ float g_mo_y[MO_MAXM * MO_DMAX]; /* tail: the routed y when the caller gives none */

/* y = routed y + shared (k_mv_down2's last add), out = bf16(y). */
static __global__ void k_mo_tail(int M, int d, const float *yr, const uint16_t *shared, size_t lds, float *y,
                                 uint16_t *out, size_t ldo) {
    DIC_PDL_ENTER();
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= M * d) return;
    const int m = i / d, col = i - m * d;
    float v = (yr ? yr : g_mo_y)[i]; /* yr NULL: k_mv_down2 stored the routed y in g_mo_y */
    if (shared) v = __fadd_rn(v, dic_bf16_to_f32(shared[(size_t)m * lds + col]));
    if (y) y[i] = v;
    out[(size_t)m * ldo + col] = dic_f32_to_bf16(v);
}

/* ---- launcher ------------------------------------------------------------------ */

static int md_pow2(int v) { return v > 0 && !(v & (v - 1)); }
static int md_ilog2(int v) { return __builtin_ctz((unsigned)v); }

static int md_mat_ok(const dic_wmat *W, int E, int fmt, int N, int K, int wb) {
    for (int e = 0; e < E; e++) {
        if (W[e].fmt != fmt || W[e].n != N || W[e].k != K || W[e].wblock != wb) return 0;
        if (((uintptr_t)W[e].w & 15) || !W[e].scale) return 0;
    }
    return 1;
}

static size_t md_up_smem(int d, int ab) { return (size_t)d * 2 + (size_t)(d / ab) * 4; }
static size_t md_down_smem(int k, int I, int ab) { return (size_t)k * ((size_t)I * 2 + (size_t)(I / ab) * 4); }

extern "C" int dic_moe_routed_dec_ok(int M, int k, int E, const dic_wmat *W1, const dic_wmat *W3, const dic_wmat *W2,
                                     int d, int act_block) {
    if (M <= 0 || M > 65535 || k <= 0 || k > MD_KMAX || E <= 0 || E > DIC_GEMM_MAXE) return 0;
    const int fmt = W1[0].fmt, I = W1[0].n, wb = W1[0].wblock;
    if (fmt != 2 && fmt != 3) return 0;
    if (W1[0].k != d || W2[0].n != d || W2[0].k != I) return 0;
    if (d % MD_CK || I % MD_CK || !md_pow2(act_block) || act_block < 32 || d % act_block || I % act_block) return 0;
    if (fmt == 2 && (!md_pow2(wb) || wb < 32 || d % wb || I % wb || (act_block < wb ? act_block : wb) > MD_CK))
        return 0;
    if (fmt == 3 && wb != 32) return 0;
    /* the M-free split of either GEMM has at most dic_gemm_ngroups(K) splits (dic_gemm_f16.cu d_splits) */
    if (dic_gemm_ngroups(d) > MD_MAXS || dic_gemm_ngroups(I) > MD_MAXS) return 0;
    if (!md_mat_ok(W1, E, fmt, I, d, wb) || !md_mat_ok(W3, E, fmt, I, d, wb) || !md_mat_ok(W2, E, fmt, d, I, wb))
        return 0;
    if (md_up_smem(d, act_block) > 200 * 1024 || md_down_smem(k, I, act_block) > 200 * 1024) return 0;
    return 1;
}

/* The kernels taken (docs/kernels/moe-decode.md §1): FP4 up k_mv_up; FP4 down k_mv_down2 for
 * M <= MD2_MAXM (where its shared memory fits), else k_mv_down; FP8, and any FP4 launch refused at run
 * time (e.g. clusters), the register kernels k_md_up / k_md_down. All give the same bits. */
#define MD2_MAXM 2 /* k_mv_down2 up to this M, k_mv_down (cluster over the slots) above */
static int g_mv_broken = 0;
static int g_md2_count; /* launches of k_mv_down2 (tests) */
extern "C" int dic_moe_dec_down2_count(void) { return g_md2_count; }
extern "C" int dic_moe_dec_broken(void) { return g_mv_broken; }

static size_t mv_up_smem(int d, int ab) {
    return (size_t)MD_WARPS * MV_NST * 2 * MV_MATB + (size_t)d * 2 + (size_t)(d / ab) * 4;
}
#define MV_DOWN_NST 4
static size_t mv_down_smem(int I, int ab) {
    return (size_t)MD_WARPS * MV_DOWN_NST * MV_MATB + (size_t)I * 2 + (size_t)(I / ab) * 4;
}

static size_t md2_smem(int k, int I, int ab, int nst = MD2_NST) {
    return (size_t)MD2_WARPS * nst * MD2_STB + (size_t)k * ((size_t)I * 2 + (size_t)(I / ab) * 4);
}

/* k_mv_down2: grid (d / 16, M) x 256 threads, no cluster */
template <int L7, int NST>
static cudaError_t mv_down2(const dic_ctx *c, const md_args &a, const md_tab *t2) {
    static thread_local int attr; /* per instance and thread (its device): the shared-memory limit raised once */
    if (!attr) {
        cudaError_t e = cudaFuncSetAttribute(k_mv_down2<L7, NST>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
        if (e != cudaSuccess) return e;
        /* the whole unified L1 as shared memory (2 CTAs per SM at V4-Flash dims); a hint */
        if (cudaFuncSetAttribute(k_mv_down2<L7, NST>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared) != cudaSuccess)
            (void)cudaGetLastError();
        attr = 1;
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    int na = 0;
    if (dic_pdl_take()) {
        at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[na].val.programmaticStreamSerializationAllowed = 1;
        na++;
    }
    cfg.gridDim = dim3((unsigned)(a.d / 16), (unsigned)a.M), cfg.blockDim = dim3(MD2_WARPS * 32);
    cfg.dynamicSmemBytes = md2_smem(a.k, a.I, a.ab, NST), cfg.stream = c->stream;
    cfg.attrs = at, cfg.numAttrs = (unsigned)na;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, k_mv_down2<L7, NST>, a, *t2);
    if (e == cudaSuccess) g_md2_count++;
    return e;
}

template <typename F, typename... A>
static cudaError_t mv_launch(F fn, dim3 grid, size_t smem, dim3 cluster, cudaStream_t st, A... args) {
    /* kernels whose shared-memory limit was raised (one type, many kernels), per thread (its device) */
    static thread_local const void *done[32];
    static thread_local int ndone;
    int seen = 0;
    for (int i = 0; i < ndone; i++) seen |= done[i] == (const void *)fn;
    if (!seen) {
        cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
        if (e != cudaSuccess) return e;
        if (ndone < 32) done[ndone++] = (const void *)fn;
    }
    cudaLaunchAttribute at[2];
    cudaLaunchConfig_t cfg = dic_launch_cfg(grid, dim3(MD_WARPS * 32), smem, st, cluster, at);
    return cudaLaunchKernelEx(&cfg, fn, args...);
}

/* k_mv_up: cudaSuccess, or an error (then the register kernel is launched) */
static cudaError_t mv_up(const dic_ctx *c, const md_args &a, const md_tab *t1, const md_tab *t3) {
    const size_t sm = mv_up_smem(a.d, a.ab);
    const dim3 grid((unsigned)(a.I / 16), (unsigned)(a.M * a.k)), cl(1, 1, 1);
    if (a.ab == MD_CK) return mv_launch(k_mv_up<1>, grid, sm, cl, c->stream, a, *t1, *t3);
    return mv_launch(k_mv_up<0>, grid, sm, cl, c->stream, a, *t1, *t3);
}

static int mv_scales_ok(const dic_wmat *W, int E) {
    for (int e = 0; e < E; e++)
        if ((uintptr_t)W[e].scale & 3) return 0;
    return 1;
}

/* up: 1 = k_mv_up, 0 = k_md_up; down: 2 = k_mv_down2, 1 = k_mv_down, 0 = k_md_down (FP4 only for 1, 2) */
template <int FP4>
static cudaError_t md_launch(const dic_ctx *c, const md_args &a, const md_tab *t1, const md_tab *t3,
                             const md_tab *t2, int up, int down) {
    static thread_local int attr_up, attr_down; /* per instance and thread (its device): the limits raised once */
    const size_t su = md_up_smem(a.d, a.ab), sd = md_down_smem(a.k, a.I, a.ab);
    if (!attr_up || !attr_down) {
        cudaError_t e = cudaFuncSetAttribute(k_md_up<FP4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
        if (e != cudaSuccess) return e;
        e = cudaFuncSetAttribute(k_md_down<FP4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
        if (e != cudaSuccess) return e;
        attr_up = attr_down = 1;
    }
    cudaError_t e = cudaErrorNotSupported;
    if (FP4 && up) {
        e = mv_up(c, a, t1, t3);
        if (e != cudaSuccess) (void)cudaGetLastError(), g_mv_broken = 1; /* e.g. clusters refused */
    }
    if (e != cudaSuccess) {
        DIC_LAUNCH(k_md_up<FP4>, dim3((unsigned)(a.I / 16), (unsigned)(a.M * a.k)), MD_WARPS * 32, su, c->stream, a,
                   *t1, *t3);
        e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    e = cudaErrorNotSupported;
    /* with a line to join: the down kernel runs before the join (its routed y to y, or to g_mo_y), k_mo_tail
     * adds `shared` after it (docs/kernels/moe-decode.md §1) */
    float *ytail = NULL;
    if (c->join && FP4 && down == 2 && !g_mv_broken && a.M <= MO_MAXM && a.d <= MO_DMAX) {
        ytail = a.y;
        if (!ytail && cudaGetSymbolAddress((void **)&ytail, g_mo_y) != cudaSuccess) (void)cudaGetLastError(), ytail = NULL;
    }
    if (c->join && !ytail) c->join(c->join_arg); /* the down kernel adds `shared`, maybe computed on a side line */
    if (FP4 && down == 2 && !g_mv_broken) {
        md_args ad = a;
        if (ytail) ad.shared = NULL, ad.y = ytail, ad.out = NULL; /* the routed y only; out is written by the tail */
        e = a.ab == MD_CK ? mv_down2<1, MD2_NST_LEAN>(c, ad, t2) : mv_down2<0, MD2_NST>(c, ad, t2);
        if (e != cudaSuccess) (void)cudaGetLastError(), g_mv_broken = 1;
        if (ytail) {
            c->join(c->join_arg);
            if (e == cudaSuccess) {
                const int n = a.M * a.d;
                DIC_LAUNCH(k_mo_tail, dim3((unsigned)((n + 255) / 256)), 256, 0, c->stream, a.M, a.d,
                           (const float *)ytail, a.shared, a.lds, a.y, a.out, a.ldo);
                return cudaGetLastError();
            }
        }
    } else if (FP4 && down && !g_mv_broken) {
        const dim3 grid((unsigned)(a.d / 16), (unsigned)(a.M * a.k)), cl(1, (unsigned)a.k, 1);
        e = mv_launch(k_mv_down<MV_DOWN_NST>, grid, mv_down_smem(a.I, a.ab), cl, c->stream, a, *t2);
        if (e != cudaSuccess) (void)cudaGetLastError(), g_mv_broken = 1;
    }
    if (e != cudaSuccess)
        DIC_LAUNCH(k_md_down<FP4>, dim3((unsigned)(a.d / 16), (unsigned)a.M), MD_WARPS * 32, sd, c->stream, a, *t2);
    DIC_LAUNCH_CHECK();
}

static void md_fill(md_tab *t, const dic_wmat *W, int E) {
    for (int e = 0; e < E; e++) t->w[e] = (const uint8_t *)W[e].w, t->s[e] = W[e].scale;
}

extern "C" cudaError_t dic_moe_routed_dec(const dic_ctx *c, int M, int k, const int *sel, const float *rw, int E,
                                          const dic_wmat *W1, const dic_wmat *W3, const dic_wmat *W2,
                                          const uint16_t *xn, size_t ldx, int d, int act_block, float limit,
                                          uint16_t *h, size_t ldh, const uint16_t *shared, size_t lds, float *y,
                                          uint16_t *out, size_t ldo) {
    if (M <= 0) return cudaSuccess;
    if (!dic_moe_routed_dec_ok(M, k, E, W1, W3, W2, d, act_block)) return cudaErrorInvalidValue;
    if (((uintptr_t)xn & 15) || ldx % 8 || ((uintptr_t)h & 15) || ldh % 8) return cudaErrorInvalidValue;
    const int fmt = W1[0].fmt, I = W1[0].n, wb = W1[0].wblock;
    md_args a;
    a.M = M, a.k = k, a.E = E, a.d = d, a.I = I;
    a.ab = act_block, a.lab = md_ilog2(act_block);
    const int kb = fmt == 2 ? (act_block < wb ? act_block : wb) : 32;
    a.lwb = md_ilog2(wb), a.nwb = 0, a.spbm1 = kb / 32 - 1;
    a.limit = limit, a.sel = sel, a.rw = rw, a.xn = xn, a.ldx = ldx, a.h = h, a.ldh = ldh;
    /* the split-K of the M-free grouped GEMMs (up: N = I, K = d; down: N = d, K = I), so every output
     * takes the op sequence's operations in its order (docs/kernels/moe-decode.md §2) */
    int kper;
    a.nspu = dic_gemm_dec_splits(I, d, c->num_sms, &kper), a.cpu = kper / MD_CK;
    a.nspd = dic_gemm_dec_splits(d, I, c->num_sms, &kper), a.cpd = kper / MD_CK;
    if (a.nspu > MD_MAXS || a.nspd > MD_MAXS || a.nspu < 1 || a.nspd < 1) return cudaErrorInvalidValue;
    a.shared = shared, a.lds = lds, a.y = y, a.out = out, a.ldo = ldo;
    static thread_local md_tab t1, t3, t2; /* host staging (copied into the launch parameters), per thread */
    md_fill(&t1, W1, E), md_fill(&t3, W3, E), md_fill(&t2, W2, E);
    int up = 1, down = 1;
    if (g_mv_broken) up = 0, down = 0; /* a ring kernel's launch failed once: the register kernels since */
    if (fmt == 3) {
        const int sok = mv_scales_ok(W1, E) && mv_scales_ok(W3, E) && mv_scales_ok(W2, E);
        if (!sok) up = 0, down = 0;
        if (M * k > 65535 || mv_down_smem(I, act_block) > 200 * 1024) down = 0;
        if (up && mv_up_smem(d, act_block) > 200 * 1024) up = 0;
        if (down == 1 && M <= MD2_MAXM && md2_smem(k, I, act_block) <= 200 * 1024) down = 2;
        return md_launch<1>(c, a, &t1, &t3, &t2, up, down);
    }
    return md_launch<0>(c, a, &t1, &t3, &t2, 0, 0);
}
