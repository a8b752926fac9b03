/*
 * dic_attn_out.cu — the attention sub-layer's output projection in one launch (dic.h
 * dic_attn_out_gemm, ops.h di_attn_out_gemm), fast mode (dic_ctx.batch_invariant == 0) at
 * small M:
 *   z   = bf16(A Wa_g^T) per group g (wo_a, FP8B: e4m3 bytes + e8m0 block scales, BF16 math),
 *   out = bf16(z Wb^T)  (wo_b, FP8 weights; z quantised per act_block as dic_gemm_quant does).
 *
 * One co-resident grid (one CTA of 16 warps per SM; the host refuses the
 * launch when the grid cannot be co-resident) in two phases around a grid barrier:
 *  phase 1  wo_a, exactly dic_gemm_fp8w_gemv.cu's per-pair chain (a warp owns column pairs
 *           (n, n + 1) and the whole K; 512-k slots, 16 e4m3 bytes per lane and column,
 *           block-scaled fp32 partial sums, the xor butterfly): z holds the same bits as the
 *           fast-mode dic_gemm_blockdiag (M <= 4) gives today, written to Z (global, bf16).
 *  barrier  thread 0 of every CTA: __threadfence, atomicAdd on a monotonic counter (block 0
 *           adds AO_EPOCH - (grid - 1), the others 1: every launch adds exactly AO_EPOCH, so
 *           the counter is a multiple of AO_EPOCH between launches and graph replays need no
 *           reset), spin with ld.acquire.gpu until the counter reaches the epoch's end,
 *           __threadfence. No float atomics. One launch at a time per device may use the
 *           counter (PDL cannot overlap two of them: a launch's CTAs reach the barrier only
 *           after griddepcontrol.wait, i.e. after the previous grid completed).
 *  phase 2  every CTA quantises the M rows of z itself (read from L2 with ld.global.cg, per
 *           act_block: amax over the block, s = pow2_ceil(amax / 448), q = e4m3_RNE(x / s),
 *           dic_gemm_quant's bits) into shared memory as bf16 (the e4m3 values, exact) plus
 *           fp32 scales; then wo_b as phase 1's chain: a warp owns column pairs and the whole
 *           K, per 16-k lane chunk (inside one act block and one weight block) the fp32 sum
 *           p = sum q_k * w_k (e4m3 products: exact) and acc = fmaf(p, s_act * s_w, acc), the
 *           chunks of a lane in increasing k, then the fixed xor butterfly over the lanes.
 * The wo_b weights are constants: before the PDL wait every warp issues
 * cp.async.bulk.prefetch.L2 of its phase-2 columns (AO_PF_LATE: after phase 1; AO_PF_OFF:
 * none), and the first two phase-2 batches go into registers before the barrier. The wo_a
 * stream carries an L2 evict_first policy so it does not push the prefetched wo_b out.
 *
 * Numerics: within the GEMM tolerance of the two-launch sequence (z bitwise for M <= 4;
 * the wo_b sums in another fp32 order than k_gemm_dec's f16 HMMA steps). Deterministic: no
 * atomics on data, fixed orders. A row's bits depend only on that row (its chain reads only
 * its own z row and activations; the lane map and the order do not depend on M, on the grid
 * or on the other rows): row 0 alone = row 0 of the batch, bitwise.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_fp8w.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_gemm_quant.cuh"

#define AO_T 512       /* 16 warps: one CTA per SM shares one quantised z */
#define AO_SLOT 512    /* k per slot: 32 lanes x 16 */
#define AO_CPS 1       /* CTAs per SM */
#define AO_SMEM_MAX (200 * 1024) /* dynamic shared bytes at most (z rows + scales) */
#define AO_EPOCH 4096u /* counter advance per launch (grid <= AO_EPOCH) */

static __device__ unsigned int g_ao_bar; /* the grid barrier's monotonic counter */

static __device__ __forceinline__ uint4 ao_ld16_ef(const void *p, uint64_t pol) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p), "l"(pol));
    return r;
}
static __device__ __forceinline__ uint4 ao_ld16(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}
/* data this grid wrote (z): from L2, never a stale L1 line */
static __device__ __forceinline__ uint4 ao_ld16_cg(const void *p) {
    uint4 r;
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p) : "memory");
    return r;
}
static __device__ __forceinline__ float ao_lo(uint32_t x) { return __uint_as_float(x << 16); }
static __device__ __forceinline__ float ao_hi(uint32_t x) { return __uint_as_float(x & 0xFFFF0000u); }

/* 16 e4m3 bytes (low byte first) -> fp32 values (exact, unscaled) */
static __device__ __forceinline__ void ao_e4m3x16(const uint4 v, float *o) {
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
/* FP8B weights with any scale: the host's sequence per element (the BF16 matrix's weight) */
static __device__ __forceinline__ void ao_exact16(const uint4 v, uint32_t s, float *o) {
    const uint32_t x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) o[4 * j + i] = fp8w_one((x[j] >> (8 * i)) & 0xFFu, s);
}

/* fixed 32-lane butterfly */
static __device__ __forceinline__ float ao_wsum(float v) {
    v += __shfl_xor_sync(0xFFFFFFFFu, v, 16);
    v += __shfl_xor_sync(0xFFFFFFFFu, v, 8);
    v += __shfl_xor_sync(0xFFFFFFFFu, v, 4);
    v += __shfl_xor_sync(0xFFFFFFFFu, v, 2);
    v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
    return v;
}

typedef struct ao_args {
    int M;
    /* phase 1: wo_a groups (FP8B) */
    const uint16_t *A;
    size_t lda;
    int R, K1, gk, P1, ppw1;
    /* z */
    uint16_t *Z;
    size_t ldz;
    /* phase 2: wo_b (FP8) */
    const uint8_t *wb, *sb;
    int N2, K2, B2, ab, P2, ppw2;
    uint16_t *C;
    size_t ldc;
    int flags;
} ao_args;

enum { AO_PF_LATE = 1, AO_PF_OFF = 2, AO_NO_EF = 4 };

/* warp gw's phase-2 columns (pairs gw * ppw2 ..: contiguous rows of wo_b) into L2, 1 KB per lane and step */
static __device__ __forceinline__ void ao_prefetch(const ao_args &a, int gw, int lane) {
    const int p0 = gw * a.ppw2, npp = max(0, min(a.ppw2, a.P2 - p0));
    const size_t base = (size_t)(2 * p0) * (size_t)a.K2, len = (size_t)(2 * npp) * (size_t)a.K2;
    for (size_t o = (size_t)lane * 1024; o < len; o += 32 * 1024) {
        const size_t l = len - o < 1024 ? len - o : 1024;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a.wb + base + o), "r"((unsigned)l) : "memory");
    }
}

/* MR: rows (M <= MR); U1 / U2: slots per batch in phase 1 / 2. Dynamic shared memory:
 * MR x K2 bf16 (the quantised z rows) + MR x (K2 / ab) fp32 scales. */
template <int MR, int U1, int U2>
static __global__ void __launch_bounds__(AO_T, AO_CPS) k_attn_out(const __grid_constant__ ao_args a,
                                                                  const __grid_constant__ dic_gv_tab tab) {
    extern __shared__ __align__(16) uint8_t ao_sm[];
    const int lane = threadIdx.x & 31;
    const int gw = blockIdx.x * (AO_T / 32) + (threadIdx.x >> 5);
    const int M = a.M;
    uint64_t pol = 0;
    if (!(a.flags & AO_NO_EF)) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));

    /* ---------------- phase 1: z = A Wa^T (dic_gemm_fp8w_gemv.cu's chain) ---------------- */
    {
        const int K = a.K1, R = a.R;
        const int pw0 = gw * a.ppw1, np = max(0, min(a.ppw1, a.P1 - pw0));
        const int nsl = (K + AO_SLOT - 1) / AO_SLOT, nb = (nsl + U1 - 1) / U1, T = np * nb;
        const int wbk = tab.wb, kb = K / wbk;
        const int ef = !(a.flags & AO_NO_EF);
        auto ld = [&](uint4 (&w)[2][U1], uint32_t (&sc)[U1], int t) {
#pragma unroll
            for (int u = 0; u < U1; u++) w[0][u] = w[1][u] = make_uint4(0, 0, 0, 0), sc[u] = 127;
            if (t >= T) return;
            const int i = t / nb, h = t - i * nb;
            const int n = 2 * (pw0 + i), grp = n / R, nl = n - grp * R;
            const uint8_t *w0 = (const uint8_t *)tab.w[grp] + (size_t)nl * (size_t)K;
            const uint8_t *srow = tab.s[grp] + (size_t)(nl / wbk) * (size_t)kb;
#pragma unroll
            for (int u = 0; u < U1; u++) {
                const int k = (h * U1 + u) * AO_SLOT + lane * 16;
                if (k < K) {
                    w[0][u] = ef ? ao_ld16_ef(w0 + k, pol) : ao_ld16(w0 + k);
                    w[1][u] = ef ? ao_ld16_ef(w0 + K + k, pol) : ao_ld16(w0 + K + k);
                    sc[u] = __ldg(srow + k / wbk);
                }
            }
        };
        float acc[2][MR];
#pragma unroll
        for (int c = 0; c < 2; c++)
#pragma unroll
            for (int m = 0; m < MR; m++) acc[c][m] = 0.0f;
        auto comp = [&](const uint4 (&w)[2][U1], const uint32_t (&sc)[U1], int t) {
            const int i = t / nb, h = t - i * nb;
            const int n = 2 * (pw0 + i), grp = n / R;
            const uint16_t *Ag = a.A + (size_t)grp * (size_t)a.gk;
#pragma unroll
            for (int u = 0; u < U1; u++) {
                const int k = (h * U1 + u) * AO_SLOT + lane * 16;
                if (k < K) {
                    const uint32_t s = sc[u];
                    float wf[2][16], mul;
                    if (fp8w_fast(s)) {
                        mul = __uint_as_float(s << 23);
                        ao_e4m3x16(w[0][u], wf[0]);
                        ao_e4m3x16(w[1][u], wf[1]);
                    } else {
                        mul = 1.0f;
                        ao_exact16(w[0][u], s, wf[0]);
                        ao_exact16(w[1][u], s, wf[1]);
                    }
#pragma unroll
                    for (int m = 0; m < MR; m++) {
                        if (m < M) {
                            const uint16_t *ar = Ag + (size_t)m * a.lda + k;
                            const uint4 a0 = __ldg((const uint4 *)ar), a1 = __ldg((const uint4 *)(ar + 8));
                            const uint32_t aw[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
                            for (int c = 0; c < 2; c++) {
                                float p = 0.0f;
#pragma unroll
                                for (int e = 0; e < 8; e++) {
                                    p = fmaf(ao_lo(aw[e]), wf[c][2 * e], p);
                                    p = fmaf(ao_hi(aw[e]), wf[c][2 * e + 1], p);
                                }
                                acc[c][m] = fmaf(p, mul, acc[c][m]);
                            }
                        }
                    }
                }
            }
            if (h == nb - 1) {
#pragma unroll
                for (int c = 0; c < 2; c++)
#pragma unroll
                    for (int m = 0; m < MR; m++) {
                        const float v = ao_wsum(acc[c][m]);
                        if (lane == c * MR + m && m < M) a.Z[(size_t)m * a.ldz + (size_t)(n + c)] = dic_f32_to_bf16(v);
                        acc[c][m] = 0.0f;
                    }
            }
        };
        uint4 wa[2][U1], wbf[2][U1];
        uint32_t sa[U1], sbf[U1];
        ld(wa, sa, 0);
        ld(wbf, sbf, 1);
        if (!(a.flags & (AO_PF_LATE | AO_PF_OFF))) ao_prefetch(a, gw, lane);
        DIC_PDL_ENTER();
        for (int t = 0; t < T; t += 2) {
            comp(wa, sa, t);
            ld(wa, sa, t + 2);
            if (t + 1 < T) {
                comp(wbf, sbf, t + 1);
                ld(wbf, sbf, t + 3);
            }
        }
    }

    /* ---------------- phase 2 preparation: wo_b weights (constants) ---------------- */
    const int K2 = a.K2, B2 = a.B2, ab = a.ab, nsa = K2 / ab;
    const int p0 = gw * a.ppw2, np2 = max(0, min(a.ppw2, a.P2 - p0));
    const int nsl2 = (K2 + AO_SLOT - 1) / AO_SLOT, nb2 = (nsl2 + U2 - 1) / U2, T2 = np2 * nb2;
    const int kb2 = K2 / B2;
    if (a.flags & AO_PF_LATE) ao_prefetch(a, gw, lane);
    auto ld2 = [&](uint4 (&w)[2][U2], float (&sw)[U2], int t) {
#pragma unroll
        for (int u = 0; u < U2; u++) w[0][u] = w[1][u] = make_uint4(0, 0, 0, 0), sw[u] = 0.0f;
        if (t >= T2) return;
        const int i = t / nb2, h = t - i * nb2;
        const int n = 2 * (p0 + i);
        const uint8_t *w0 = a.wb + (size_t)n * (size_t)K2;
        const uint8_t *srow = a.sb + (size_t)(n / B2) * (size_t)kb2; /* n, n + 1: one scale row (B2 even) */
#pragma unroll
        for (int u = 0; u < U2; u++) {
            const int k = (h * U2 + u) * AO_SLOT + lane * 16;
            if (k < K2) {
                w[0][u] = ao_ld16(w0 + k);
                w[1][u] = ao_ld16(w0 + K2 + k);
                sw[u] = dic_e8m0_to_f32(__ldg(srow + k / B2));
            }
        }
    };
    uint4 w2a[2][U2], w2b[2][U2];
    float s2a[U2], s2b[U2];
    ld2(w2a, s2a, 0);
    ld2(w2b, s2b, 1);

    /* ---------------- grid barrier ---------------- */
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned add = blockIdx.x == 0 ? AO_EPOCH - (gridDim.x - 1u) : 1u;
        __threadfence();
        const unsigned old = atomicAdd(&g_ao_bar, add);
        const unsigned target = (old & ~(AO_EPOCH - 1u)) + AO_EPOCH;
        for (;;) {
            unsigned v;
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(&g_ao_bar) : "memory");
            if ((int)(v - target) >= 0) break;
            __nanosleep(20);
        }
        __threadfence();
    }
    __syncthreads();

    /* ---------------- z -> quantised rows in shared memory ---------------- */
    uint16_t *qz = (uint16_t *)ao_sm;                                   /* [MR][K2] bf16 (e4m3 values) */
    float *qs = (float *)(ao_sm + (size_t)MR * (size_t)K2 * 2);         /* [MR][nsa] */
    {
        const int cpr = K2 / 8, tpb = ab / 8; /* 8-value chunks per row; threads per act block (power of 2 <= 32) */
        /* (tpb | AO_T) */
        const int nch = M * cpr;
        const float inv448 = (float)(1.0 / 448.0);
        for (int c0 = 0; c0 < nch; c0 += 4 * AO_T) {
            uint4 v[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int c = c0 + j * AO_T + (int)threadIdx.x;
                v[j] = make_uint4(0, 0, 0, 0);
                if (c < nch) {
                    const int m = c / cpr, o = c - m * cpr;
                    v[j] = ao_ld16_cg(a.Z + (size_t)m * a.ldz + (size_t)o * 8);
                }
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int c = c0 + j * AO_T + (int)threadIdx.x;
                /* a block's threads are consecutive and aligned (tpb | AO_T, cpr % tpb == 0), so
                 * they are all in or all out of range together: the shuffles see whole groups */
                if (c0 + j * AO_T >= nch) break; /* CTA-uniform */
                const uint32_t x[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
                float f[8], amax = 0.0f;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    f[2 * e] = ao_lo(x[e]), f[2 * e + 1] = ao_hi(x[e]);
                    const float l = fabsf(f[2 * e]), h = fabsf(f[2 * e + 1]);
                    if (l > amax) amax = l;
                    if (h > amax) amax = h;
                }
                for (int o = 1; o < tpb; o <<= 1) {
                    const float t = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
                    if (t > amax) amax = t; /* max: exact in any order */
                }
                if (c < nch) {
                    if (!(amax >= 1e-4f)) amax = 1e-4f;
                    const float sc = dic_pow2_ceil(__fmul_rn(amax, inv448)), rs = __frcp_rn(sc);
                    const int m = c / cpr, o = c - m * cpr;
                    if ((o & (tpb - 1)) == 0) qs[m * nsa + o / tpb] = sc;
                    uint32_t q[4];
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        uint16_t hq[2];
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            /* x / s as x * (1 / s): s is a power of two, 1 / s exact (s <= 2^127), so the
                             * product is the quotient's RNE (dic_gemm_dec's QV2 form, same bits) */
                            float t = __fmul_rn(f[2 * e + h], rs);
                            if (t > 448.0f) t = 448.0f;
                            if (t < -448.0f) t = -448.0f;
                            /* the e4m3 value (dic_gemm_quant: e4m3_RNE of the clamped quotient): at most 4
                             * significant bits, so its fp32 bits end in 16 zeros and the high half is the
                             * bf16 value exactly (NaN stays a NaN) */
                            hq[h] = (uint16_t)(__float_as_uint(round_e4m3(t)) >> 16);
                        }
                        q[e] = (uint32_t)hq[0] | ((uint32_t)hq[1] << 16);
                    }
                    *(uint4 *)(qz + (size_t)m * K2 + (size_t)o * 8) = make_uint4(q[0], q[1], q[2], q[3]);
                }
            }
        }
    }
    __syncthreads();

    /* ---------------- phase 2: out = q(z) Wb^T ---------------- */
    float acc[2][MR];
#pragma unroll
    for (int c = 0; c < 2; c++)
#pragma unroll
        for (int m = 0; m < MR; m++) acc[c][m] = 0.0f;
    auto comp2 = [&](const uint4 (&w)[2][U2], const float (&sw)[U2], int t) {
        const int i = t / nb2, h = t - i * nb2;
        const int n = 2 * (p0 + i);
#pragma unroll
        for (int u = 0; u < U2; u++) {
            const int k = (h * U2 + u) * AO_SLOT + lane * 16;
            if (k < K2) {
                float wf[2][16];
                ao_e4m3x16(w[0][u], wf[0]);
                ao_e4m3x16(w[1][u], wf[1]);
#pragma unroll
                for (int m = 0; m < MR; m++) {
                    if (m < M) {
                        const uint16_t *ar = qz + (size_t)m * K2 + k;
                        const uint4 a0 = *(const uint4 *)ar, a1 = *(const uint4 *)(ar + 8);
                        const uint32_t aw[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                        const float mul = __fmul_rn(qs[m * nsa + k / ab], sw[u]);
#pragma unroll
                        for (int c = 0; c < 2; c++) {
                            float p = 0.0f;
#pragma unroll
                            for (int e = 0; e < 8; e++) {
                                p = fmaf(ao_lo(aw[e]), wf[c][2 * e], p);
                                p = fmaf(ao_hi(aw[e]), wf[c][2 * e + 1], p);
                            }
                            acc[c][m] = fmaf(p, mul, acc[c][m]);
                        }
                    }
                }
            }
        }
        if (h == nb2 - 1) {
#pragma unroll
            for (int c = 0; c < 2; c++)
#pragma unroll
                for (int m = 0; m < MR; m++) {
                    const float v = ao_wsum(acc[c][m]);
                    if (lane == c * MR + m && m < M) a.C[(size_t)m * a.ldc + (size_t)(n + c)] = dic_f32_to_bf16(v);
                    acc[c][m] = 0.0f;
                }
        }
    };
    for (int t = 0; t < T2; t += 2) {
        comp2(w2a, s2a, t);
        ld2(w2a, s2a, t + 2);
        if (t + 1 < T2) {
            comp2(w2b, s2b, t + 1);
            ld2(w2b, s2b, t + 3);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */

static int g_ao_on = -1;  /* -1: read $DEEPINFER_ATTN_OUT_FUSE once; off unless it is 1 (measured slower than the
                           * two launches: GEMM-FLOAT-NOTES.md 2026-11-30 session 7) */
static int g_ao_maxm = 0; /* 0: DIC_AO_MAXM */
static int g_ao_flags = 0;

extern "C" void dic_attn_out_enable(int on) { g_ao_on = on < 0 ? -1 : on ? 1 : 0; } /* < 0: the environment's */
extern "C" int dic_attn_out_enabled(void) {
    if (g_ao_on < 0) {
        const char *e = getenv("DEEPINFER_ATTN_OUT_FUSE");
        g_ao_on = e && e[0] == '1' && e[1] == 0;
    }
    return g_ao_on;
}
extern "C" void dic_attn_out_tune(int maxm, int flags) {
    g_ao_maxm = maxm > 0 && maxm <= 8 ? maxm : 0;
    g_ao_flags = flags > 0 ? flags & (AO_PF_LATE | AO_PF_OFF | AO_NO_EF) : 0;
}
extern "C" int dic_attn_out_maxm(void) { return g_ao_maxm ? g_ao_maxm : DIC_AO_MAXM; }

typedef void (*ao_fn)(const ao_args, const dic_gv_tab);

/* Occupancy per variant (cached; smem depends on K2 and MR only through the bytes asked). */
static int ao_occ(ao_fn fn, size_t smem) {
    static const void *cf[8];
    static size_t cs[8];
    static int co[8], n;
    for (int i = 0; i < n; i++)
        if (cf[i] == (const void *)fn && cs[i] == smem) return co[i];
    /* always the same (largest) limit: a smaller value set later would break a cached larger launch */
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, AO_SMEM_MAX) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    int occ = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, AO_T, smem) != cudaSuccess) {
        (void)cudaGetLastError();
        occ = 0;
    }
    if (n < 8) cf[n] = (const void *)fn, cs[n] = smem, co[n] = occ, n++;
    return occ;
}

/* The fused launch's kernel, grid, shared bytes and arguments; 0 where it does not apply. */
typedef struct ao_plan {
    ao_fn fn;
    int grid;
    size_t smem;
    ao_args a;
    dic_gv_tab tab;
} ao_plan;

static int ao_prep(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int G, const dic_wmat *Wa, int gk,
                   const dic_wmat *Wb, int act_block, uint16_t *Z, size_t ldz, uint16_t *C, size_t ldc, ao_plan *pl) {
    if (M <= 0 || M > 8 || G <= 0 || G > DIC_GV_MAXG || !Wa || !Wb || !Z || !C) return 0;
    const int R = Wa[0].n, K1 = Wa[0].k, N2 = Wb->n, K2 = Wb->k, B2 = Wb->wblock, ab = act_block;
    if (dic_fp8b_tab(Wa, G, &pl->tab) != cudaSuccess) return 0;
    const int wba = pl->tab.wb;
    /* phase 1: dic_gemm_fp8w_gemv_g's conditions */
    if (R <= 0 || R % 2 || K1 != gk || K1 <= 0 || wba <= 0 || wba % 16 || K1 % wba || ((uintptr_t)A & 15) || lda % 8 ||
        gk % 8)
        return 0;
    /* z and phase 2 */
    if (Wb->fmt != 2 || !Wb->scale || K2 != G * R || N2 <= 0 || N2 % 2 || K2 % 16 || B2 <= 0 || B2 % 16 || K2 % B2 ||
        ab < 16 || ab > 256 || (ab & (ab - 1)) || K2 % ab || ((uintptr_t)Wb->w & 15) || ((uintptr_t)Z & 15) ||
        ldz % 8 || ldz < (size_t)K2 || ldc < (size_t)N2)
        return 0;
    const int MR = M == 1 ? 1 : M == 2 ? 2 : M <= 4 ? 4 : 8;
    pl->fn = MR == 1 ? k_attn_out<1, 4, 4> : MR == 2 ? k_attn_out<2, 2, 2> : MR == 4 ? k_attn_out<4, 2, 2>
                                                                                    : k_attn_out<8, 1, 1>;
    pl->smem = (size_t)MR * (size_t)K2 * 2 + (size_t)MR * (size_t)(K2 / ab) * 4;
    if (pl->smem > AO_SMEM_MAX) return 0;
    int dev = 0, nsm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (c->num_sms > 0 && c->num_sms < nsm) nsm = c->num_sms;
    int occ = ao_occ(pl->fn, pl->smem);
    if (occ > AO_CPS) occ = AO_CPS;
    if (occ < 1 || nsm < 1) return 0; /* no co-resident grid: the caller's two launches */
    pl->grid = occ * nsm;
    if (pl->grid > (int)AO_EPOCH) return 0;
    const int warps = pl->grid * (AO_T / 32);
    ao_args *a = &pl->a;
    memset(a, 0, sizeof *a);
    a->M = M, a->A = A, a->lda = lda, a->R = R, a->K1 = K1, a->gk = gk;
    a->P1 = G * R / 2, a->ppw1 = (a->P1 + warps - 1) / warps;
    a->Z = Z, a->ldz = ldz;
    a->wb = (const uint8_t *)Wb->w, a->sb = Wb->scale, a->N2 = N2, a->K2 = K2, a->B2 = B2, a->ab = ab;
    a->P2 = N2 / 2, a->ppw2 = (a->P2 + warps - 1) / warps;
    a->C = C, a->ldc = ldc, a->flags = g_ao_flags;
    return 1;
}

extern "C" int dic_attn_out_fusable(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int G, const dic_wmat *Wa,
                                    int gk, const dic_wmat *Wb, int act_block, const uint16_t *Z, size_t ldz,
                                    size_t ldc) {
    ao_plan pl;
    uint16_t dummy[8] __attribute__((aligned(16)));
    return ao_prep(c, M, A, lda, G, Wa, gk, Wb, act_block, (uint16_t *)Z, ldz, dummy, ldc, &pl);
}

extern "C" cudaError_t dic_attn_out_fused(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int G,
                                          const dic_wmat *Wa, int gk, const dic_wmat *Wb, int act_block, uint16_t *Z,
                                          size_t ldz, uint16_t *C, size_t ldc) {
    ao_plan pl;
    if (!ao_prep(c, M, A, lda, G, Wa, gk, Wb, act_block, Z, ldz, C, ldc, &pl)) return cudaErrorNotSupported;
    DIC_LAUNCH(pl.fn, (unsigned)pl.grid, AO_T, pl.smem, c->stream, pl.a, pl.tab);
    DIC_LAUNCH_CHECK();
}

extern "C" cudaError_t dic_attn_out_gemm(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int G,
                                         const dic_wmat *Wa, int gk, const dic_wmat *Wb, int act_block, uint16_t *Z,
                                         size_t ldz, uint16_t *C, size_t ldc) {
    if (M <= 0) return cudaSuccess;
    if (!c->batch_invariant && M <= dic_attn_out_maxm() && dic_attn_out_enabled()) {
        cudaError_t e = dic_attn_out_fused(c, M, A, lda, G, Wa, gk, Wb, act_block, Z, ldz, C, ldc);
        if (e != cudaErrorNotSupported) return e;
    }
    cudaError_t e = dic_gemm_blockdiag(c, M, A, lda, G, Wa, gk, 0, NULL, Z, ldz);
    if (e != cudaSuccess) return e;
    return dic_gemm(c, M, Z, ldz, Wb, act_block, NULL, C, ldc);
}
