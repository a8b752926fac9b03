/*
 * lab/router/router_variants.cu — src/ops/cuda/dic_route_gate.cu as it was before the product kept one
 * path (docs/kernels/router.md "Tried"): the one-launch router's variants under lab_ names
 * (router_lab.h): 0 = k_route_gate (the first kernel: logits stored, the last CTA scores and routes),
 * 1 = k_route_gate2 / k_route_gate2l with the last-arriver handoff (the product's), 2 = k_route_gate2
 * with tagged score slots polled by CTA 0. lab_route_gate takes the product's arguments; every variant
 * gives the product's bits.
 *
 * The file as it was:
 */
/*
 * lab_route_gate.cu — the MoE router in one launch (ops.h di_route_gate) for
 * dic_ctx.batch_invariant == 0 at decode sizes (M <= 8, E <= 1024, k <= 32,
 * BF16 gate): logits = x . gate^T (fp32), then di_route_rows' temperature,
 * selection and weights.
 *
 * k_route_gate: the CTAs compute the logits with the fast GEMV's tile
 * (dic_gemv.cuh gemv_tile, the K split / variant of dic_gemv_plan: k_gemv's
 * per-column code and summation order, so the logits are bitwise those of the
 * fast-mode GEMV launch of the same rows; a row's bits do not depend on M or
 * on the other rows) and store them; the last CTA to arrive (threadfence,
 * then an integer atomic on a device counter that it resets for the next
 * launch; no float atomics, so deterministic) then routes every row with
 * dic_route.cuh (k_route's code): the scores by all 256 threads, one warp per
 * row for the top-k and the weights. With temp != 1 it divides the logits
 * (IEEE, as k_div_f32) and writes the quotients back, as dic_route_rows does.
 * sel and w are therefore bitwise those of the GEMV launch followed by
 * dic_route_rows. Where dic_gemm's auto dispatch takes the tensor-core kernel
 * (BF16, M = 5..8), today's logits are other fp32 sums (fast mode: within
 * GEMM rounding, not bitwise); the fused launch keeps the GEMV's.
 *
 * The counter is one per device: launches of this kernel must not run
 * concurrently on two streams (the forward runs the router on line 0 only).
 */
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_gemv.cuh"
#include "ops/cuda/dic_model.h"
#include "ops/cuda/dic_route.cuh"
#include "router/router_lab.h"

static int g_lab_lean_off; /* lab_route_gate_lean(0): k_route_gate2 where k_route_gate2l applies (same bits) */
extern "C" void lab_route_gate_lean(int on) { g_lab_lean_off = !on; }

#define RG_MAXM 8 /* rows (one warp each in the routing) */

static __device__ unsigned int g_rg_cnt; /* CTAs arrived in the running launch */

template <int MR, int PRE, int PIPE>
static __global__ void __launch_bounds__(GV_T) k_route_gate(int M, int E, int K, const uint16_t *__restrict__ A,
                                                            size_t lda, const __grid_constant__ dic_gv_tab tab,
                                                            float *logits, int WPC, int flags, float temp,
                                                            const float *bias, const int *fixed,
                                                            const int32_t *tokens, int k, float route_scale,
                                                            float norm_eps, int normalize, int *sel, float *w) {
    extern __shared__ __align__(16) float rg_sh[]; /* scores [M][E], then biased scores [M][E] */
    __shared__ int sel_sh[GV_T / 32][32];
    __shared__ unsigned last_sh;
    /* the logits (the GEMV tile runs DIC_PDL_ENTER after issuing its first weight batch) */
    gemv_tile<MR, 0, PRE, PIPE, 0>(M, E, K, A, lda, tab, 0, 0, logits, NULL, (size_t)E, WPC, 1, flags);
    DIC_STAMP_PHASE(401);

    /* arrival: the last CTA routes */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned prev = atomicAdd(&g_rg_cnt, 1u);
        last_sh = prev == gridDim.x * gridDim.y * gridDim.z - 1;
        if (last_sh) g_rg_cnt = 0; /* ready for the next launch */
    }
    __syncthreads();
    if (!last_sh) return;
    __threadfence();
    if (threadIdx.x == 0) DIC_STAMP_PHASE_ANY(403);
    float *s = rg_sh, *b = rg_sh + (size_t)M * E;
    route_scores(M, 0, RG_MAXM, logits, temp != 1.0f ? logits : NULL, E, temp, bias, s, b, E, GV_T);
    __syncthreads();
    if (threadIdx.x == 0) DIC_STAMP_PHASE_ANY(402);
    const int wp = threadIdx.x >> 5;
    if (wp < M)
        route_token(wp, s + (size_t)wp * E, b + (size_t)wp * E, E, fixed, tokens, k, route_scale, norm_eps, normalize,
                    sel_sh[wp], sel, w);
    if (threadIdx.x == 0) DIC_STAMP_PHASE_ANY(405);
}

/* ------------------------------------------------------------------ session 8: k_route_gate2
 * The same bits by a shorter chain after the PDL wait (variants 1 and 2 of $DEEPINFER_ROUTE_GATE):
 * - before the wait (constants, and token ids written at the step's start, never by the launch just
 *   before the router): the bias of the thread's output column, and the hash rows' expert ids
 *   (tid2eid[tokens[m]], two dependent loads that the session-5 kernel made after the handoff);
 * - every CTA turns its own outputs into scores (one output per thread: the tile's G * 4 * MR <= 256
 *   sums): logits (/ temp, k_div_f32's division) stored, route_score, biased score; so the routing
 *   CTA no longer runs M * E / 256 serial double-precision scores per thread (8 at M = 8) and its
 *   reload is the scores instead of the logits (one round either way);
 * - handoff: variant 1: the last CTA to arrive (bar.sync, then one atom.acq_rel.gpu by thread 0:
 *   the release covers the CTA's stores, the acquire the routing's loads; the session-5 kernel ran
 *   a fence.sc by every thread, then the atomic, then another fence.sc in the last CTA); variant 2:
 *   no counter: every score travels with a tag in one 64-bit relaxed store (single-copy atomic) and
 *   CTA 0 polls the slots until every tag is set, then clears them for the next launch (saves the
 *   release fence's and the atomic's round trips; CTA 0 spins, which is safe: every CTA of the grid
 *   is resident before a dependent launch can start, and no CTA waits on another);
 * - top-k: one warp per row as before, but each lane keeps its E / 32 biased scores as order keys in
 *   registers (rank_before as a 64-bit key: order-preserving bits of the score, ~index below) and a
 *   round is two warp max reductions (redux.sync) plus the winning lane's local re-pick, instead
 *   of a shared-memory scan and a 5-step shuffle argmax;
 * - weights: lanes < k each hold one selected expert; the selection-order sum is the same serial
 *   fp32 chain (read from shared memory by every lane), the divisions and stores in parallel.
 * Bits: logits, sel and w equal the session-5 kernel's (same per-column GEMV code, same route_score,
 * same sums in the same order; the top-k key order is rank_before's). A row's bits do not depend on M. */
#define RG_NSLOT (RG_MAXM * RT_MAXE)
static __device__ float g_rg_s[RG_NSLOT], g_rg_b[RG_NSLOT];  /* variant 1: scores, biased scores */
static __device__ unsigned long long g_rg_slot[2 * RG_NSLOT]; /* variant 2: (score bits, tag) */

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

static __device__ __forceinline__ void rg_st_tag(unsigned long long *p, float v) {
    const unsigned long long x = (1ull << 32) | __float_as_uint(v);
    asm volatile("st.relaxed.gpu.b64 [%0], %1;" ::"l"(p), "l"(x) : "memory");
}
static __device__ __forceinline__ unsigned long long rg_ld_tag(const unsigned long long *p) {
    unsigned long long x;
    asm volatile("ld.relaxed.gpu.b64 %0, [%1];" : "=l"(x) : "l"(p) : "memory");
    return x;
}

template <int MR, int PRE, int PIPE>
static __global__ void __launch_bounds__(GV_T) k_route_gate2(int M, int E, int K, const uint16_t *__restrict__ A,
                                                             size_t lda, const __grid_constant__ dic_gv_tab tab,
                                                             float *logits, int WPC, int flags, float temp,
                                                             const float *bias, const int *fixed,
                                                             const int32_t *tokens, int k, float route_scale,
                                                             float norm_eps, int normalize, int *sel, float *w,
                                                             int ho) {
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
        if (ho == 2) {
            rg_st_tag(g_rg_slot + at, sv);
            if (!fixed) rg_st_tag(g_rg_slot + n + at, bb);
        } else {
            g_rg_s[at] = sv;
            if (!fixed) g_rg_b[at] = bb;
        }
    }
    DIC_STAMP_PHASE(402);
    float *s = rg_sh, *b = rg_sh + (size_t)n;
    const int nb = fixed ? n : 2 * n; /* values the routing reads */
    if (ho == 2) {
        if (blockIdx.x != 0) return;
        /* CTA 0: wait for every tagged slot (8 loads in flight per thread), keep, clear */
        for (int i0 = threadIdx.x; i0 < nb; i0 += 8 * GV_T) {
            unsigned long long x[8];
#pragma unroll
            for (int u = 0; u < 8; u++) x[u] = i0 + u * GV_T < nb ? rg_ld_tag(g_rg_slot + i0 + u * GV_T) : 0ull;
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int i = i0 + u * GV_T;
                if (i < nb) {
                    while ((uint32_t)(x[u] >> 32) != 1u) x[u] = rg_ld_tag(g_rg_slot + i);
                    rg_sh[i] = __uint_as_float((uint32_t)x[u]);
                    g_rg_slot[i] = 0ull; /* empty for the next launch (which starts after this grid ends) */
                }
            }
        }
    } else {
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

/* k_route_gate2l: k_route_gate2's code for the default decode launch only, compiled lean (session 8,
 * code size: every decode kernel starts with a cold instruction cache, so the instantiation the step
 * launches should be small in total): variant 1 (last-arriver handoff), E <= 256 (rg_topk<8>), the
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

typedef void (*rg_fn)(int, int, int, const uint16_t *, size_t, const dic_gv_tab, float *, int, int, float,
                      const float *, const int *, const int32_t *, int, float, float, int, int *, float *);
typedef void (*rg2_fn)(int, int, int, const uint16_t *, size_t, const dic_gv_tab, float *, int, int, float,
                       const float *, const int *, const int32_t *, int, float, float, int, int *, float *, int);
typedef void (*rgl_fn)(int, int, int, const uint16_t *, size_t, const dic_gv_tab, float *, int, float, const float *,
                       const int *, const int32_t *, int, float, float, int, int *, float *);

/* dic_gemm_float_fast.cu gemv_pick_bf<0>'s variants for mr <= 8 */
static rg_fn rg_pick(int mr, int flags) {
    const int nopre = (flags & DIC_GV_NOPRE) != 0, pipe = (flags & DIC_GV_PIPE) != 0;
    if (mr == 1)
        return nopre ? (pipe ? k_route_gate<1, 0, 1> : k_route_gate<1, 0, 0>)
                     : (pipe ? k_route_gate<1, 1, 1> : k_route_gate<1, 1, 0>);
    return mr == 2 ? k_route_gate<2, 1, 0> : mr == 4 ? k_route_gate<4, 0, 0> : k_route_gate<8, 0, 0>;
}
static rg2_fn rg2_pick(int mr, int flags) {
    const int nopre = (flags & DIC_GV_NOPRE) != 0, pipe = (flags & DIC_GV_PIPE) != 0;
    if (mr == 1)
        return nopre ? (pipe ? k_route_gate2<1, 0, 1> : k_route_gate2<1, 0, 0>)
                     : (pipe ? k_route_gate2<1, 1, 1> : k_route_gate2<1, 1, 0>);
    return mr == 2 ? k_route_gate2<2, 1, 0> : mr == 4 ? k_route_gate2<4, 0, 0> : k_route_gate2<8, 0, 0>;
}

/* k_route_gate2l for variant 1 when the launch is one it covers (else NULL): E <= 256, no variant
 * flags at MR = 1 (rg2_pick's <1, 1, 0>) and no LATE at any MR, cluster-free K split with a warp's
 * chunks in one GEMV batch. */
static rgl_fn rg_lean(int mr, int flags, int E, int K, int wpc, int cy) {
    const int nch = (K + 63) / 64; /* BF16 chunks of 64 k */
    if (E > 256 || cy != 1 || nch > GV_U * wpc || g_lab_lean_off) return NULL;
    if (mr == 1) return flags & (DIC_GV_LATE | DIC_GV_NOPRE | DIC_GV_PIPE) ? NULL : k_route_gate2l<1>;
    if (flags & DIC_GV_LATE) return NULL;
    return mr == 2 ? k_route_gate2l<2> : mr == 4 ? k_route_gate2l<4> : mr == 8 ? k_route_gate2l<8> : NULL;
}

/* The variant ($DEEPINFER_ROUTE_GATE, lab_route_gate_tune): 0 the session-5 kernel (k_route_gate),
 * 1 k_route_gate2 with the last-arriver handoff, 2 k_route_gate2 with tagged slots polled by CTA 0.
 * All give the same bits. */
#define RG_DEF_VARIANT 1
static int g_rg_variant = -1;
static int rg_variant(void) {
    if (g_rg_variant < 0) {
        const char *e = (const char *)NULL /* lab: lab_route_gate_tune */;
        g_rg_variant = e && *e ? atoi(e) : RG_DEF_VARIANT;
        if (g_rg_variant < 0 || g_rg_variant > 2) g_rg_variant = RG_DEF_VARIANT;
    }
    return g_rg_variant;
}
extern "C" void lab_route_gate_tune(int variant) { g_rg_variant = variant >= 0 && variant <= 2 ? variant : -1; }

static int al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" int lab_route_gate_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int E,
                                 int k, const int32_t *tid2eid, const int32_t *tokens) {
    if (!c || c->batch_invariant || M < 1 || M > RG_MAXM || !W || W->fmt != 0 || W->n != E) return 0;
    if (E <= 0 || E > RT_MAXE || k <= 0 || k > 32 || k > E || (tid2eid && !tokens)) return 0;
    const int K = W->k;
    if (K <= 0 || K % 8 || lda % 8 || !al16(A) || !al16(W->w)) return 0; /* the fast GEMV's rules */
    int wpc, cy, flags, mr;
    if (dic_gemv_plan(0, M, E, K, &wpc, &cy, &flags, &mr) != cudaSuccess) return 0;
    return cy == 1 && mr <= RG_MAXM; /* no cluster split (one K range per CTA) */
}

extern "C" cudaError_t lab_route_gate(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                      float *logits, int E, float temp, const float *bias, const int32_t *tid2eid,
                                      const int32_t *tokens, int k, float route_scale, float norm_eps, int normalize,
                                      int *sel, float *w) {
    if (M <= 0) return cudaSuccess;
    if (!lab_route_gate_ok(c, M, A, lda, W, E, k, tid2eid, tokens)) { /* the op sequence */
        cudaError_t e = dic_gemm(c, M, A, lda, W, 0, logits, NULL, (size_t)E);
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
    const int var = rg_variant();
    if (var == 0) {
        rg_fn fn = rg_pick(mr, flags);
        if (smem > 32768) { /* above the default 48 KB with the static arrays: opt in */
            e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
            if (e != cudaSuccess) return e;
        }
        DIC_LAUNCH(fn, gx, GV_T, smem, c->stream, M, E, W->k, A, lda, tab, logits, wpc, flags, temp, bias,
                   (const int *)tid2eid, tid2eid ? tokens : NULL, k, route_scale, norm_eps, normalize, sel, w);
        DIC_LAUNCH_CHECK();
    }
    if (var == 1) {
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
               (const int *)tid2eid, tid2eid ? tokens : NULL, k, route_scale, norm_eps, normalize, sel, w, var);
    DIC_LAUNCH_CHECK();
}
