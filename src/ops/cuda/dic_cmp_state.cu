/*
 * dic_cmp_state.cu — the gated compressor's per-sequence state update and
 * group pooling for a whole step (ops.h di_cmp_gated_rows;
 * src/ops/cpu/cmp_state.c), bit-identical to the CPU.
 *
 * The state holds `groups` (G) blocks of r slots; position t lives in slot
 * t mod (G r), i.e. block (t / r) mod G, residue t mod r
 * (model/seq_state.h), and pooling group g reads block g mod G (with overlap
 * also the previous group's A halves in block (g - 1) mod G): pooling writes
 * no state.
 *
 * A segment's rows are consecutive and in position order, and each row
 * rewrites its segment's state, so one CTA runs one segment's rows in order:
 * CTA m starts only where row m opens a segment (m == 0 or row_seg[m-1] !=
 * row_seg[m]), so the grid is M CTAs whatever the segments. Per row: (1) copy
 * the row's kv / score (+ ape) into its slot, (2) on emission pool the group
 * per channel as di_softmax_pool (max, sequential sum of di_expf, then
 * sum of kv * (e / sum) in slot order). __syncthreads between the phases
 * (the next row may write a slot the pool reads).
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"

#define CS_THREADS 256

/* Channel d of pooling slot s (0..S-1): overlap s < r: the previous group's slot s, A half [:hd] (from
 * `prev`, its block's offset); else the own group's slot s mod r (from `own`: its block's offset, + hd with
 * overlap: the B half). */
static __device__ __forceinline__ float cs_slot(const float *base, int s, size_t prev, size_t own, int width, int ratio,
                                                int ov, int d) {
    size_t off = ov && s < ratio ? prev + (size_t)s * (size_t)width : own + (size_t)(s % ratio) * (size_t)width;
    return base[off + d];
}

static __global__ void __launch_bounds__(CS_THREADS)
    k_cmp_gated_rows(int M, const int *row_seg, const int *emit, const int64_t *pos, float *const *skv,
                     float *const *ssc, const float *pk0, const float *ps0, const float *ape, int r, int ov, int G,
                     int hd, float *out) {
    DIC_PDL_ENTER();
    const int m0 = blockIdx.x;
    const int seg = row_seg[m0];
    if (m0 > 0 && row_seg[m0 - 1] == seg) return; /* not the segment's first row */
    const int width = (ov ? 2 : 1) * hd, S = ov ? 2 * r : r;
    float *kv = skv[seg], *sc = ssc[seg];
    for (int row = m0; row < M && row_seg[row] == seg; row++) {
        const int64_t t = pos[row], g = t / r;
        const int o = (int)(t % r);
        const size_t slot = (size_t)(t % ((int64_t)G * r));
        const float *pk = pk0 + (size_t)row * width, *ps = ps0 + (size_t)row * width;
        float *sk = kv + slot * width, *ss = sc + slot * width;
        const float *ap = ape ? ape + (size_t)o * width : NULL;
#pragma unroll 1
        for (int j = threadIdx.x; j < width; j += CS_THREADS) {
            sk[j] = pk[j];
            ss[j] = ap ? __fadd_rn(ps[j], ap[j]) : ps[j];
        }
        const int e = emit[row];
        if (e < 0) continue; /* uniform over the CTA */
        __syncthreads();
        float *o_row = out + (size_t)e * hd;
        const size_t blk = (size_t)r * (size_t)width;
        const size_t own = (size_t)(g % G) * blk + (ov ? (size_t)hd : 0), prev = (size_t)((g + G - 1) % G) * blk;
#pragma unroll 1
        for (int d = threadIdx.x; d < hd; d += CS_THREADS) {
            float mx = -INFINITY;
#pragma unroll 1
            for (int s = 0; s < S; s++) mx = fmaxf(mx, cs_slot(sc, s, prev, own, width, r, ov, d));
            float sum = 0.0f;
#pragma unroll 1
            for (int s = 0; s < S; s++)
                sum = __fadd_rn(sum, dic_expf(__fsub_rn(cs_slot(sc, s, prev, own, width, r, ov, d), mx)));
            float acc = 0.0f;
#pragma unroll 1
            for (int s = 0; s < S; s++) {
                float ex = dic_expf(__fsub_rn(cs_slot(sc, s, prev, own, width, r, ov, d), mx));
                acc = __fadd_rn(acc, __fmul_rn(cs_slot(kv, s, prev, own, width, r, ov, d), __fdiv_rn(ex, sum)));
            }
            o_row[d] = acc;
        }
        __syncthreads();
    }
}

/* ---------------------------------------------------------------------------
 * The same op in two parallel launches (used for steps of more than
 * CS_SERIAL_MAXM rows: prefill). Rows of a segment are consecutive and in
 * position order, so the row holding position p of row m's segment is
 * k = m - (pos[m] - p), and p was fed in this step iff k >= 0 and
 * row_seg[k] == row_seg[m]; earlier positions sit in the state as the serial
 * walk left them at the step's start. Hence:
 *  1. pool: every emitting row pools its group from the step's rows and the
 *     state at the step's start (read only) — the values the serial walk has
 *     in the slots at that row: a position p (of the own group, or with
 *     overlap of the previous one; p < 0: group -1, the reset block) fed
 *     before the step is in slot p mod (G r), not yet overwritten (the next
 *     position of that slot, p + G r, lies beyond the pooling row for
 *     G >= 1, or G >= 2 with overlap);
 *  2. state: per segment (its last row) and slot q, the value the serial
 *     walk leaves: that of the step's last position t == q mod (G r), if
 *     any; else the slot is unchanged.
 * Values are copies or the same fp32 add (score + ape), and the pooling is
 * the serial kernel's formula, so the bits are the serial kernel's. */
#define CS_SERIAL_MAXM 8
#define CSP_THREADS 128

typedef struct cs_src {
    const float *kv, *sc; /* channel-0 address of the value's kv / score */
    const float *ap;      /* ape row to add to the score (step rows only), or NULL */
} cs_src;

/* Where position p = gp * r + o (gp = the own group, or the previous one: its A half) lives for row m. */
static __device__ __forceinline__ cs_src cs_source(int m, int seg, int64_t t, int64_t gp, int o, int own,
                                                   const int *row_seg, const float *kv, const float *sc,
                                                   const float *pk0, const float *ps0, const float *ape, int r, int ov,
                                                   int G, int hd, int width) {
    cs_src v;
    const int64_t p = gp * r + o;
    const int half = ov && own ? hd : 0; /* overlap: own group B half, previous group A half */
    const long long k = (long long)m - (long long)(t - p);
    if (p >= 0 && k >= 0 && row_seg[k] == seg) {
        v.kv = pk0 + (size_t)k * width + half;
        v.sc = ps0 + (size_t)k * width + half;
        v.ap = ape ? ape + (size_t)o * width + half : NULL;
        return v;
    }
    const size_t slot = (size_t)((gp + G) % G) * (size_t)r + (size_t)o;
    v.kv = kv + slot * width + half;
    v.sc = sc + slot * width + half;
    v.ap = NULL;
    return v;
}

static __device__ __forceinline__ float cs_score(const cs_src *v, int d) {
    return v->ap ? __fadd_rn(v->sc[d], v->ap[d]) : v->sc[d];
}

static __global__ void __launch_bounds__(CSP_THREADS)
    k_cmp_pool(const int *row_seg, const int *emit, const int64_t *pos, float *const *skv, float *const *ssc,
               const float *pk0, const float *ps0, const float *ape, int r, int ov, int G, int hd, float *out) {
    DIC_PDL_ENTER();
    const int m = blockIdx.y, d = blockIdx.x * CSP_THREADS + threadIdx.x;
    const int e = emit[m];
    if (e < 0 || d >= hd) return;
    const int seg = row_seg[m], width = (ov ? 2 : 1) * hd, S = ov ? 2 * r : r;
    const int64_t t = pos[m], g = t / r;
    const float *kv = skv[seg], *sc = ssc[seg];
    /* slot s: overlap s < r: previous group's residue s; else own group's residue s mod r */
#define CS_SRC(s)                                                                                                  \
    cs_source(m, seg, t, ov && (s) < r ? g - 1 : g, (s) % r, !(ov && (s) < r), row_seg, kv, sc, pk0, ps0, ape, r, \
              ov, G, hd, width)
    float mx = -INFINITY;
    for (int s = 0; s < S; s++) {
        cs_src v = CS_SRC(s);
        mx = fmaxf(mx, cs_score(&v, d));
    }
    float sum = 0.0f;
    for (int s = 0; s < S; s++) {
        cs_src v = CS_SRC(s);
        sum = __fadd_rn(sum, dic_expf(__fsub_rn(cs_score(&v, d), mx)));
    }
    float acc = 0.0f;
    for (int s = 0; s < S; s++) {
        cs_src v = CS_SRC(s);
        float ex = dic_expf(__fsub_rn(cs_score(&v, d), mx));
        acc = __fadd_rn(acc, __fmul_rn(v.kv[d], __fdiv_rn(ex, sum)));
    }
#undef CS_SRC
    out[(size_t)e * hd + d] = acc;
}

/* One CTA per (row, slot q of the G r); only a segment's last row acts. */
static __global__ void __launch_bounds__(CSP_THREADS)
    k_cmp_state(int M, const int *row_seg, const int64_t *pos, float *const *skv, float *const *ssc,
                const float *pk0, const float *ps0, const float *ape, int r, int ov, int G, int hd) {
    DIC_PDL_ENTER();
    const int m = blockIdx.y, q = blockIdx.x;
    const int seg = row_seg[m];
    if (m + 1 < M && row_seg[m + 1] == seg) return; /* not the segment's last row */
    const int width = (ov ? 2 : 1) * hd, o = q % r;
    const int64_t tl = pos[m], period = (int64_t)G * r;
    /* the row of the step's last position t == q mod (G r) */
    const long long kq = (long long)m - (long long)(((tl - q) % period + period) % period);
    if (kq < 0 || row_seg[kq] != seg) return; /* not fed in this step: unchanged */
    float *kv = skv[seg] + (size_t)q * width, *sc = ssc[seg] + (size_t)q * width;
    const float *apo = ape ? ape + (size_t)o * width : NULL;
    for (int j = threadIdx.x; j < width; j += CSP_THREADS) {
        float ps = ps0[(size_t)kq * width + j];
        kv[j] = pk0[(size_t)kq * width + j];
        sc[j] = apo ? __fadd_rn(ps, apo[j]) : ps;
    }
}

extern "C" cudaError_t dic_cmp_gated_rows(const dic_ctx *c, int M, const int *row_seg, const int *emit,
                                          const int64_t *pos, float *const *skv, float *const *ssc, const float *pk,
                                          const float *ps, const float *ape, int ratio, int overlap, int groups,
                                          int hd, float *out) {
    if (M <= 0) return cudaSuccess;
    if (ratio <= 0 || hd <= 0 || groups < (overlap ? 2 : 1)) return cudaErrorInvalidValue;
    const int ov = overlap ? 1 : 0;
    if (M > CS_SERIAL_MAXM) {
        DIC_LAUNCH(k_cmp_pool, dim3((unsigned)((hd + CSP_THREADS - 1) / CSP_THREADS), (unsigned)M), CSP_THREADS, 0,
                   c->stream, row_seg, emit, pos, skv, ssc, pk, ps, ape, ratio, ov, groups, hd, out);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
        DIC_LAUNCH(k_cmp_state, dim3((unsigned)(groups * ratio), (unsigned)M), CSP_THREADS, 0, c->stream, M, row_seg,
                   pos, skv, ssc, pk, ps, ape, ratio, ov, groups, hd);
        DIC_LAUNCH_CHECK();
    }
    DIC_LAUNCH(k_cmp_gated_rows, M, CS_THREADS, 0, c->stream, M, row_seg, emit, pos, skv, ssc, pk, ps, ape, ratio, ov,
               groups, hd, out);
    DIC_LAUNCH_CHECK();
}
