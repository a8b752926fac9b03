/*
 * dic_route_gate.cu — the MoE router (ops.h di_route_gate) in both batch modes
 * (docs/kernels/router.md, docs/determinism.md §7): logits = x . gate^T (fp32),
 * then di_route_rows' temperature, selection and weights.
 *
 * k_route_gate2: one launch at decode sizes (M <= 8, E <= 1024, k <= 32, BF16
 * gate, no cluster split of K). The CTAs compute the logits with the fast GEMV's
 * tile (dic_gemv.cuh gemv_tile, the K split / variant of dic_gemv_plan: k_gemv's
 * per-column code and summation order, so the logits are bitwise those of the
 * GEMV launch of the same rows; the split comes from (E, K) only and the row
 * tile does not change a row's sums, so a row's bits do not depend on M or on
 * the other rows), turn their own outputs into scores and store them; the
 * last CTA to arrive (one acq_rel atomic on a device counter that it resets
 * for the next launch; no float atomics, so deterministic) then selects and
 * weights every row, one warp per row. With temp != 1 it divides the logits
 * (IEEE, as k_div_f32) and writes the quotients back, as dic_route_rows does.
 * sel and w are therefore bitwise those of the GEMV launch followed by
 * dic_route_rows.
 *
 * k_route_logits: the same GEMV tile as a logits kernel alone, over row tiles of
 * up to 16 rows (any M, any K split, clusters included): the batch-invariant
 * mode's logits wherever the one launch does not apply (M > 8, or shapes it does
 * not take), followed by dic_route_rows, so a token's logits, expert ids and
 * weights are the same bits at M = 1 (one launch) and at M = 1000.
 *
 * The counter and the score slots of k_route_gate2 are one set per device:
 * launches of it must not run concurrently on two streams (the forward runs
 * the router on line 0 only, in both modes). k_route_logits has no such state.
 */
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_gemv.cuh"
#include "ops/cuda/dic_model.h"
#include "ops/cuda/dic_route.cuh"

#define RG_MAXM 8 /* rows (one warp each in the routing) */

static __device__ unsigned int g_rg_cnt; /* CTAs arrived in the running launch */

/* ------------------------------------------------------------------ k_route_gate2
 * A short chain after the PDL wait (docs/kernels/router.md §1):
 * - before the wait (constants, and token ids written at the step's start, never by the launch just
 *   before the router): the bias of the thread's output column, and the hash rows' expert ids
 *   (tid2eid[tokens[m]], two dependent loads);
 * - every CTA turns its own outputs into scores (one output per thread: the tile's G * 4 * MR <= 256
 *   sums): logits (/ temp, k_div_f32's division) stored, route_score, biased score; so the routing
 *   CTA does not run M * E / 256 serial double-precision scores per thread and its
 *   reload is the scores instead of the logits (one round either way);
 * - handoff: the last CTA to arrive (bar.sync, then one atom.acq_rel.gpu by thread 0:
 *   the release covers the CTA's stores, the acquire the routing's loads);
 * - top-k: one warp per row; each lane keeps its E / 32 biased scores as order keys in
 *   registers (rank_before as a 64-bit key: order-preserving bits of the score, ~index below) and a
 *   round is two warp max reductions (redux.sync) plus the winning lane's local re-pick, instead
 *   of a shared-memory scan and a 5-step shuffle argmax;
 * - weights: lanes < k each hold one selected expert; the selection-order sum is the same serial
 *   fp32 chain (read from shared memory by every lane), the divisions and stores in parallel.
 * Bits: logits, sel and w equal dic_gemv + dic_route_rows' (same per-column GEMV code, same route_score,
 * same sums in the same order; the top-k key order is rank_before's). A row's bits do not depend on M. */
#define RG_NSLOT (RG_MAXM * RT_MAXE)
static __device__ float g_rg_s[RG_NSLOT], g_rg_b[RG_NSLOT]; /* scores, biased scores */

/* rank_before as an unsigned order: higher score first, +0 == -0, NaN last (key 0). */
static __device__ __forceinline__ uint32_t rg_key(float x) {
    if (x != x) return 0u;
    uint32_t u = __float_as_uint(x);
    if ((u << 1) == 0u) u = 0u;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* The lane's best untaken element as (key << 32 | ~index); 0 when none is left. */
template <int NJ>
static __device__ __forceinline__ unsigned long long rg_best(const uint32_t *hi, uint32_t taken, int lane) {
    unsigned long long v[NJ];
#pragma unroll
    for (int j = 0; j < NJ; j++)
        v[j] = ((taken >> j) & 1u) ? 0ull : ((unsigned long long)hi[j] << 32) | (uint32_t)~(lane + 32 * j);
#pragma unroll
    for (int st = 1; st < NJ; st <<= 1)
#pragma unroll
        for (int j = 0; j + st < NJ; j += 2 * st) v[j] = v[j] > v[j + st] ? v[j] : v[j + st];
    return v[0];
}

/* One warp, row m: the top-k of the biased scores b[0..E) (shared memory) under rank_before;
 * returns lane r's pick of round r (lanes < k), -1 elsewhere. */
template <int NJ>
static __device__ __forceinline__ int rg_topk(const float *b, int E, int k) {
    const int lane = threadIdx.x & 31;
    uint32_t hi[NJ], taken = 0;
#pragma unroll
    for (int j = 0; j < NJ; j++) {
        const int e = lane + 32 * j;
        hi[j] = e < E ? rg_key(b[e]) : 0u;
        if (e >= E) taken |= 1u << j;
    }
    unsigned long long best = rg_best<NJ>(hi, taken, lane);
    int mine = -1;
    for (int r = 0; r < k; r++) {
        const uint32_t bh = (uint32_t)(best >> 32), bl = (uint32_t)best;
        const uint32_t m1 = __reduce_max_sync(0xFFFFFFFFu, bh);
        const uint32_t m2 = __reduce_max_sync(0xFFFFFFFFu, bh == m1 ? bl : 0u);
        const int bi = (int)~m2; /* -1: nothing left (k <= E: not reached) */
        if (lane == r) mine = bi;
        if (bi >= 0 && (bi & 31) == lane) {
            taken |= 1u << (bi >> 5);
            best = rg_best<NJ>(hi, taken, lane);
        }
    }
    return mine;
}

/* One warp, row m: lane i < k holds pick e (-1 / out of range: score 0) of round i; route_token's
 * weights: the selection-order sum (one serial chain, every lane), then sel / w by lane i. */
static __device__ __forceinline__ void rg_weights(int m, int e, const float *s, int E, int k, float route_scale,
                                                  float norm_eps, int normalize, float *sw, int *sel, float *w) {
    const int lane = threadIdx.x & 31;
    const float se = lane < k && e >= 0 && e < E ? s[e] : 0.0f;
    if (lane < k) sw[lane] = se;
    __syncwarp();
    float sum = 0.0f;
#pragma unroll 8
    for (int i = 0; i < k; i++) sum += sw[i];
    sum += norm_eps;
    if (lane < k) {
        sel[(size_t)m * k + lane] = e;
        w[(size_t)m * k + lane] = normalize ? se / sum * route_scale : se * route_scale;
    }
}


template <int MR, int PRE, int PIPE>
static __global__ void __launch_bounds__(GV_T) k_route_gate2(int M, int E, int K, const uint16_t *__restrict__ A,
                                                             size_t lda, const __grid_constant__ dic_gv_tab tab,
                                                             float *logits, int WPC, int flags, float temp,
                                                             const float *bias, const int *fixed,
                                                             const int32_t *tokens, int k, float route_scale,
                                                             float norm_eps, int normalize, int *sel, float *w) {
    extern __shared__ __align__(16) float rg_sh[]; /* scores [M][E], then biased scores [M][E] */
    __shared__ float sw_sh[GV_T / 32][32];
    __shared__ unsigned last_sh;
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    /* before the PDL wait: the bias of this thread's output, the hash rows' ids */
    int orow, ocol;
    const bool own = gemv_out<MR>((int)threadIdx.x, M, E, WPC, &orow, &ocol);
    const float bv = own && bias && !fixed ? __ldg(bias + ocol) : 0.0f;
    int hsel = -1;
    if (fixed && wp < M && lane < k) hsel = fixed[(size_t)(tokens ? tokens[wp] : wp) * k + lane];
    /* the logits (the tile runs DIC_PDL_ENTER after issuing its first weight batch) */
    float v = 0.0f;
    gemv_tile<MR, 0, PRE, PIPE, 0, 1>(M, E, K, A, lda, tab, 0, 0, logits, NULL, (size_t)E, WPC, 1, flags, &v);
    DIC_STAMP_PHASE(401);
    const int n = M * E;
    if (own) { /* dic_route_rows' temperature and route_scores for this output */
        const int at = orow * E + ocol;
        if (temp != 1.0f) v = __fdiv_rn(v, temp);
        logits[at] = v;
        const float sv = route_score(v), bb = bias ? sv + bv : sv;
        {
            g_rg_s[at] = sv;
            if (!fixed) g_rg_b[at] = bb;
        }
    }
    DIC_STAMP_PHASE(402);
    float *s = rg_sh, *b = rg_sh + (size_t)n;
    const int nb = fixed ? n : 2 * n; /* values the routing reads */
    {
        __syncthreads(); /* every output of the CTA stored */
        if (threadIdx.x == 0) {
            unsigned prev;
            asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(&g_rg_cnt) : "memory");
            const unsigned last = prev == gridDim.x * gridDim.y * gridDim.z - 1;
            if (last) g_rg_cnt = 0; /* ready for the next launch */
            last_sh = last;
        }
        __syncthreads();
        if (!last_sh) return;
#pragma unroll 4
        for (int i = threadIdx.x; i < nb; i += GV_T) rg_sh[i] = __ldcg(i < n ? g_rg_s + i : g_rg_b + (i - n));
    }
    __syncthreads();
    if (threadIdx.x == 0) DIC_STAMP_PHASE_ANY(403);
    if (wp >= M) return;
    int e = hsel; /* hash rows: the table's ids */
    if (!fixed) e = E <= 256 ? rg_topk<8>(b + (size_t)wp * E, E, k) : rg_topk<32>(b + (size_t)wp * E, E, k);
    if (threadIdx.x == 0) DIC_STAMP_PHASE_ANY(404);
    rg_weights(wp, e, s + (size_t)wp * E, E, k, route_scale, norm_eps, normalize, sw_sh[wp], sel, w);
    if (threadIdx.x == 0) DIC_STAMP_PHASE_ANY(405);
}

/* k_route_gate2l: k_route_gate2's code for the common decode launch only, compiled lean (code size:
 * every decode kernel starts with a cold instruction cache, so the instantiation the step launches
 * should be small in total; docs/kernels/router.md §1): E <= 256 (rg_topk<8>), the
 * default GEMV flags (no LATE / NOPRE / PIPE: PRE for MR <= 2, as rg2_pick), a warp's chunks in one
 * batch (gemv_tile ONE; rg_lean checks it). The same statements in the same order as k_route_gate2
 * for these launches: same logits, scores, selection and weights, bit for bit. */
template <int MR>
static __global__ void __launch_bounds__(GV_T) k_route_gate2l(int M, int E, int K, const uint16_t *__restrict__ A,
                                                              size_t lda, const __grid_constant__ dic_gv_tab tab,
                                                              float *logits, int WPC, float temp, const float *bias,
                                                              const int *fixed, const int32_t *tokens, int k,
                                                              float route_scale, float norm_eps, int normalize,
                                                              int *sel, float *w) {
    extern __shared__ __align__(16) float rg_sh[]; /* scores [M][E], then biased scores [M][E] */
    __shared__ float sw_sh[GV_T / 32][32];
    __shared__ unsigned last_sh;
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    int orow, ocol;
    const bool own = gemv_out<MR>((int)threadIdx.x, M, E, WPC, &orow, &ocol);
    const float bv = own && bias && !fixed ? __ldg(bias + ocol) : 0.0f;
    int hsel = -1;
    if (fixed && wp < M && lane < k) hsel = fixed[(size_t)(tokens ? tokens[wp] : wp) * k + lane];
    float v = 0.0f;
    gemv_tile<MR, 0, (MR <= 2), 0, 0, 1, 1>(M, E, K, A, lda, tab, 0, 0, logits, NULL, (size_t)E, WPC, 1, 0, &v);
    DIC_STAMP_PHASE(401);
    const int n = M * E;
    if (own) {
        const int at = orow * E + ocol;
        if (temp != 1.0f) v = __fdiv_rn(v, temp);
        logits[at] = v;
        const float sv = route_score(v), bb = bias ? sv + bv : sv;
        g_rg_s[at] = sv;
        if (!fixed) g_rg_b[at] = bb;
    }
    DIC_STAMP_PHASE(402);
    __syncthreads(); /* every output of the CTA stored */
    if (threadIdx.x == 0) {
        unsigned prev;
        asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(&g_rg_cnt) : "memory");
        const unsigned last = prev == gridDim.x * gridDim.y * gridDim.z - 1;
        if (last) g_rg_cnt = 0; /* ready for the next launch */
        last_sh = last;
    }
    __syncthreads();
    if (!last_sh) return;
    float *s = rg_sh, *b = rg_sh + (size_t)n;
#pragma unroll 1
    for (int i = threadIdx.x; i < n; i += GV_T) { /* both loads of an index in flight together */
        s[i] = __ldcg(g_rg_s + i);
        if (!fixed) b[i] = __ldcg(g_rg_b + i);
    }
    __syncthreads();
    if (threadIdx.x == 0) DIC_STAMP_PHASE_ANY(403);
    if (wp >= M) return;
    int e = hsel; /* hash rows: the table's ids */
    if (!fixed) e = rg_topk<8>(b + (size_t)wp * E, E, k);
    if (threadIdx.x == 0) DIC_STAMP_PHASE_ANY(404);
    rg_weights(wp, e, s + (size_t)wp * E, E, k, route_scale, norm_eps, normalize, sw_sh[wp], sel, w);
    if (threadIdx.x == 0) DIC_STAMP_PHASE_ANY(405);
}

typedef void (*rg2_fn)(int, int, int, const uint16_t *, size_t, const dic_gv_tab, float *, int, int, float,
                       const float *, const int *, const int32_t *, int, float, float, int, int *, float *);
typedef void (*rgl_fn)(int, int, int, const uint16_t *, size_t, const dic_gv_tab, float *, int, float, const float *,
                       const int *, const int32_t *, int, float, float, int, int *, float *);
/* dic_gemm_float_fast.cu gemv_pick_bf<0>'s variants for mr <= 8 */
static rg2_fn rg2_pick(int mr, int flags) {
    const int nopre = (flags & DIC_GV_NOPRE) != 0, pipe = (flags & DIC_GV_PIPE) != 0;
    if (mr == 1)
        return nopre ? (pipe ? k_route_gate2<1, 0, 1> : k_route_gate2<1, 0, 0>)
                     : (pipe ? k_route_gate2<1, 1, 1> : k_route_gate2<1, 1, 0>);
    return mr == 2 ? k_route_gate2<2, 1, 0> : mr == 4 ? k_route_gate2<4, 0, 0> : k_route_gate2<8, 0, 0>;
}

/* k_route_gate2l when the launch is one it covers (else NULL): E <= 256, no variant
 * flags at MR = 1 (rg2_pick's <1, 1, 0>) and no LATE at any MR, cluster-free K split with a warp's
 * chunks in one GEMV batch. */
static rgl_fn rg_lean(int mr, int flags, int E, int K, int wpc, int cy) {
    const int nch = (K + 63) / 64; /* BF16 chunks of 64 k */
    if (E > 256 || cy != 1 || nch > GV_U * wpc) return NULL;
    if (mr == 1) return flags & (DIC_GV_LATE | DIC_GV_NOPRE | DIC_GV_PIPE) ? NULL : k_route_gate2l<1>;
    if (flags & DIC_GV_LATE) return NULL;
    return mr == 2 ? k_route_gate2l<2> : mr == 4 ? k_route_gate2l<4> : mr == 8 ? k_route_gate2l<8> : NULL;
}

static int al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" int dic_route_gate_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int E,
                                 int k, const int32_t *tid2eid, const int32_t *tokens) {
    /* both modes: a row's bits do not depend on M (docs/determinism.md §7) */
    if (!c || M < 1 || M > RG_MAXM || !W || W->fmt != 0 || W->n != E) return 0;
    if (E <= 0 || E > RT_MAXE || k <= 0 || k > 32 || k > E || (tid2eid && !tokens)) return 0;
    const int K = W->k;
    if (K <= 0 || K % 8 || lda % 8 || !al16(A) || !al16(W->w)) return 0; /* the fast GEMV's rules */
    int wpc, cy, flags, mr;
    if (dic_gemv_plan(0, M, E, K, &wpc, &cy, &flags, &mr) != cudaSuccess) return 0;
    return cy == 1 && mr <= RG_MAXM; /* no cluster split (one K range per CTA) */
}

/* ------------------------------------------------------------------ k_route_logits
 * The fused router's logits without the routing: k_gemv's tile (gemv_tile, no EPI) with the plan's K split
 * (from E and K only) and its row tile and variant (dic_gemm_float_fast.cu gemv_pick_bf<0>'s set), fp32
 * logits [M][E]. Neither the row tile (1 .. 16 rows, blockIdx.z) nor PRE / PIPE changes a sum: every logit
 * is its lanes' fmaf chains over their chunks, the 8-lane butterfly, the warps of its column group in order,
 * then (CY > 1) the cluster ranks in order from 0.0f; bitwise k_route_gate2's logits where that applies
 * (CY == 1: the EPI sum is the stored sum). */
template <int MR, int PRE, int PIPE>
static __global__ void __launch_bounds__(GV_T) k_route_logits(int M, int E, int K, const uint16_t *__restrict__ A,
                                                              size_t lda, const __grid_constant__ dic_gv_tab tab,
                                                              float *logits, int WPC, int CY, int flags) {
    gemv_tile<MR, 0, PRE, PIPE, 0>(M, E, K, A, lda, tab, 0, 0, logits, NULL, (size_t)E, WPC, CY, flags);
}

typedef void (*rl_fn)(int, int, int, const uint16_t *, size_t, const dic_gv_tab, float *, int, int, int);
static rl_fn rl_pick(int mr, int flags) {
    if (mr == 1) return flags & DIC_GV_PIPE ? k_route_logits<1, 1, 1> : k_route_logits<1, 1, 0>;
    return mr == 2 ? k_route_logits<2, 1, 0> : mr == 4 ? k_route_logits<4, 0, 0> : mr == 8 ? k_route_logits<8, 0, 0>
                                                                                          : k_route_logits<16, 0, 0>;
}

#define RL_MAXGZ 65535 /* row tiles per launch (the grid's z limit); more rows: one launch per slab */

extern "C" int dic_route_logits_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W) {
    if (!c || M < 1 || !W || W->fmt != 0 || W->n <= 0) return 0;
    const int K = W->k;
    return K > 0 && K % 8 == 0 && lda % 8 == 0 && al16(A) && al16(W->w); /* the fast GEMV's rules */
}

/* One launch of rows [0, M) (M <= 16 * RL_MAXGZ). */
static cudaError_t rl_launch(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, float *logits) {
    const int E = W->n, K = W->k;
    int wpc, cy, flags, mr;
    cudaError_t e = dic_gemv_plan(0, M, E, K, &wpc, &cy, &flags, &mr);
    if (e != cudaSuccess) return e;
    dic_gv_tab tab;
    memset(&tab, 0, sizeof tab);
    tab.w[0] = W->w;
    const int CG = 8 / wpc; /* column groups of 4 per CTA */
    cudaLaunchAttribute at[2];
    cudaLaunchConfig_t cfg =
        dic_launch_cfg(dim3((unsigned)((E + 4 * CG - 1) / (4 * CG)), (unsigned)cy, (unsigned)((M + mr - 1) / mr)),
                       dim3(GV_T), 0, c->stream, dim3(1, (unsigned)cy, 1), at);
    return cudaLaunchKernelEx(&cfg, rl_pick(mr, flags), M, E, K, A, lda, tab, logits, wpc, cy, flags);
}

extern "C" cudaError_t dic_route_logits(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                        float *logits) {
    if (M <= 0) return cudaSuccess;
    if (!dic_route_logits_ok(c, M, A, lda, W)) return cudaErrorInvalidValue;
    const int slab = 16 * RL_MAXGZ; /* row slabs: the same tiles of 16 rows, so the same sums */
    for (int m0 = 0; m0 < M; m0 += slab) {
        const int mm = M - m0 < slab ? M - m0 : slab;
        cudaError_t e = rl_launch(c, mm, A + (size_t)m0 * lda, lda, W, logits + (size_t)m0 * W->n);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

extern "C" cudaError_t dic_route_gate(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                      float *logits, int E, float temp, const float *bias, const int32_t *tid2eid,
                                      const int32_t *tokens, int k, float route_scale, float norm_eps, int normalize,
                                      int *sel, float *w) {
    if (M <= 0) return cudaSuccess;
    if (!dic_route_gate_ok(c, M, A, lda, W, E, k, tid2eid, tokens)) {
        /* batch-invariant mode: the one launch's logits (k_route_logits); fast mode, or shapes outside the
         * GEMV's rules: dic_gemm; then the routing */
        const int inv = c->batch_invariant && W->n == E && dic_route_logits_ok(c, M, A, lda, W);
        cudaError_t e = inv ? dic_route_logits(c, M, A, lda, W, logits)
                            : dic_gemm(c, M, A, lda, W, 0, logits, NULL, (size_t)E);
        if (e != cudaSuccess) return e;
        return dic_route_rows(c, M, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps, normalize, sel,
                              w);
    }
    int wpc, cy, flags, mr;
    cudaError_t e = dic_gemv_plan(0, M, E, W->k, &wpc, &cy, &flags, &mr);
    if (e != cudaSuccess) return e;
    dic_gv_tab tab;
    memset(&tab, 0, sizeof tab);
    tab.w[0] = W->w;
    const int CG = 8 / wpc; /* column groups of 4 per CTA */
    const unsigned gx = (unsigned)((E + 4 * CG - 1) / (4 * CG));
    const size_t smem = (size_t)2 * M * E * sizeof(float);
    {
        rgl_fn lf = rg_lean(mr, flags, E, W->k, wpc, cy);
        if (lf) { /* smem <= 2 * 8 * 256 * 4 = 16 KB */
            DIC_LAUNCH(lf, gx, GV_T, smem, c->stream, M, E, W->k, A, lda, tab, logits, wpc, temp, bias,
                       (const int *)tid2eid, tid2eid ? tokens : NULL, k, route_scale, norm_eps, normalize, sel, w);
            DIC_LAUNCH_CHECK();
        }
    }
    rg2_fn fn = rg2_pick(mr, flags);
    if (smem > 32768) {
        e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    DIC_LAUNCH(fn, gx, GV_T, smem, c->stream, M, E, W->k, A, lda, tab, logits, wpc, flags, temp, bias,
               (const int *)tid2eid, tid2eid ? tokens : NULL, k, route_scale, norm_eps, normalize, sel, w);
    DIC_LAUNCH_CHECK();
}
