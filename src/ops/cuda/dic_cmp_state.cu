/*
 * dic_cmp_state.cu — the gated compressor's per-sequence state update and
 * group pooling for a whole step (ops.h di_cmp_gated_rows;
 * src/ops/cpu/cmp_state.c), bit-identical to the CPU.
 *
 * A segment's rows are consecutive and in position order, and each row
 * rewrites its segment's state, so one CTA runs one segment's rows in order:
 * CTA m starts only where row m opens a segment (m == 0 or row_seg[m-1] !=
 * row_seg[m]), so the grid is M CTAs whatever the segments. Per row: (1) copy
 * the row's kv / score (+ ape) into its slot, (2) on emission pool the group
 * per channel as di_softmax_pool (max, sequential sum of di_expf, then
 * sum of kv * (e / sum) in slot order), (3) with overlap shift the group into
 * the previous-group half. __syncthreads between the phases.
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"

#define CS_THREADS 256

static __device__ __forceinline__ float cs_slot(const float *base, int s, int width, int ratio, int ov, int hd, int d) {
    /* overlap: slots 0..r-1: previous group, A half [:hd]; r..2r-1: own group, B half [hd:] */
    size_t off = (size_t)s * (size_t)width + (ov && s >= ratio ? (size_t)hd : 0);
    return base[off + d];
}

static __global__ void __launch_bounds__(CS_THREADS)
    k_cmp_gated_rows(int M, const int *row_seg, const int *emit, const int64_t *pos, float *const *skv,
                     float *const *ssc, const float *pk0, const float *ps0, const float *ape, int r, int ov, int hd,
                     float *out) {
    DIC_PDL_ENTER();
    const int m0 = blockIdx.x;
    const int seg = row_seg[m0];
    if (m0 > 0 && row_seg[m0 - 1] == seg) return; /* not the segment's first row */
    const int width = (ov ? 2 : 1) * hd, S = ov ? 2 * r : r;
    float *kv = skv[seg], *sc = ssc[seg];
    for (int row = m0; row < M && row_seg[row] == seg; row++) {
        const int64_t t = pos[row];
        const int o = (int)(t % r);
        const int slot = ov ? r + o : o;
        const float *pk = pk0 + (size_t)row * width, *ps = ps0 + (size_t)row * width;
        float *sk = kv + (size_t)slot * width, *ss = sc + (size_t)slot * width;
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
#pragma unroll 1
        for (int d = threadIdx.x; d < hd; d += CS_THREADS) {
            float mx = -INFINITY;
#pragma unroll 1
            for (int s = 0; s < S; s++) mx = fmaxf(mx, cs_slot(sc, s, width, r, ov, hd, d));
            float sum = 0.0f;
#pragma unroll 1
            for (int s = 0; s < S; s++) sum = __fadd_rn(sum, dic_expf(__fsub_rn(cs_slot(sc, s, width, r, ov, hd, d), mx)));
            float acc = 0.0f;
#pragma unroll 1
            for (int s = 0; s < S; s++) {
                float ex = dic_expf(__fsub_rn(cs_slot(sc, s, width, r, ov, hd, d), mx));
                acc = __fadd_rn(acc, __fmul_rn(cs_slot(kv, s, width, r, ov, hd, d), __fdiv_rn(ex, sum)));
            }
            o_row[d] = acc;
        }
        if (ov) { /* the completed group becomes the previous one */
            __syncthreads();
            const size_t n = (size_t)r * width;
#pragma unroll 1
            for (size_t j = threadIdx.x; j < n; j += CS_THREADS) {
                kv[j] = kv[n + j];
                sc[j] = sc[n + j];
            }
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
 *     in the slots at that row: own group (positions t-r+1 .. t) in slots
 *     (ov ? r : 0) + o; with overlap the previous group (t-2r+1 .. t-r) in
 *     slots 0..r-1 if it ended before the step (moved there at its
 *     emission; the initial state for p < 0), else still in slots r + o;
 *  2. state: per segment (its last row) and slot, the value the serial walk
 *     leaves: own-group slot o = the last row of residue o, if any in the
 *     step; with overlap, slots 0..r-1 = the own-group slots as they were at
 *     the step's last emission, if any.
 * Values are copies or the same fp32 add (score + ape), and the pooling is
 * the serial kernel's formula, so the bits are the serial kernel's. */
#define CS_SERIAL_MAXM 8
#define CSP_THREADS 128

typedef struct cs_src {
    const float *kv, *sc; /* channel-0 address of the value's kv / score */
    const float *ap;      /* ape row to add to the score (step rows only), or NULL */
} cs_src;

/* Where position p (residue o, own group if own, else previous) lives for row m. */
static __device__ __forceinline__ cs_src cs_source(int m, int seg, int64_t t, int64_t p, int own, const int *row_seg,
                                                   const float *kv, const float *sc, const float *pk0,
                                                   const float *ps0, const float *ape, int r, int ov, int hd,
                                                   int width) {
    cs_src v;
    const int o = (int)(((p % r) + r) % r);
    const int half = ov && own ? hd : 0; /* overlap: own group B half, previous group A half */
    const long long k = (long long)m - (long long)(t - p);
    if (p >= 0 && k >= 0 && row_seg[k] == seg) {
        v.kv = pk0 + (size_t)k * width + half;
        v.sc = ps0 + (size_t)k * width + half;
        v.ap = ape ? ape + (size_t)o * width + half : NULL;
        return v;
    }
    int slot;
    if (!ov) slot = o;
    else if (own) slot = r + o;
    else {
        /* previous group: ended before the step (its last position t - r fed earlier) -> moved to slots 0..r-1 */
        const long long ke = (long long)m - r;
        int ended_before = !(ke >= 0 && row_seg[ke] == seg);
        slot = ended_before ? o : r + o;
    }
    v.kv = kv + (size_t)slot * width + half;
    v.sc = sc + (size_t)slot * width + half;
    v.ap = NULL;
    return v;
}

static __device__ __forceinline__ float cs_score(const cs_src *v, int d) {
    return v->ap ? __fadd_rn(v->sc[d], v->ap[d]) : v->sc[d];
}

static __global__ void __launch_bounds__(CSP_THREADS)
    k_cmp_pool(const int *row_seg, const int *emit, const int64_t *pos, float *const *skv, float *const *ssc,
               const float *pk0, const float *ps0, const float *ape, int r, int ov, int hd, float *out) {
    DIC_PDL_ENTER();
    const int m = blockIdx.y, d = blockIdx.x * CSP_THREADS + threadIdx.x;
    const int e = emit[m];
    if (e < 0 || d >= hd) return;
    const int seg = row_seg[m], width = (ov ? 2 : 1) * hd, S = ov ? 2 * r : r;
    const int64_t t = pos[m];
    const float *kv = skv[seg], *sc = ssc[seg];
    /* slot s: overlap s < r: previous group position t-2r+1+s; else own group position t-r+1+(s mod r) */
#define CS_SRC(s)                                                                                                \
    cs_source(m, seg, t, ov && (s) < r ? t - 2 * r + 1 + (s) : t - r + 1 + ((s) % r), !(ov && (s) < r), row_seg, \
              kv, sc, pk0, ps0, ape, r, ov, hd, width)
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

/* One CTA per (row, residue); only a segment's last row acts. */
static __global__ void __launch_bounds__(CSP_THREADS)
    k_cmp_state(int M, const int *row_seg, const int64_t *pos, float *const *skv, float *const *ssc,
                const float *pk0, const float *ps0, const float *ape, int r, int ov, int hd) {
    DIC_PDL_ENTER();
    const int m = blockIdx.y, o = blockIdx.x;
    const int seg = row_seg[m];
    if (m + 1 < M && row_seg[m + 1] == seg) return; /* not the segment's last row */
    const int width = (ov ? 2 : 1) * hd;
    const int64_t tl = pos[m];
    float *kv = skv[seg], *sc = ssc[seg];
    const int own = ov ? r + o : o;
    /* last row of residue o in the step */
    const long long ko = (long long)m - (long long)(((tl - o) % r + r) % r);
    const int have_o = ko >= 0 && row_seg[ko] == seg;
    /* last emission in the step (position te, (te + 1) mod r == 0), and the row of position te - r + 1 + o */
    const long long ke = (long long)m - (long long)((tl + 1) % r);
    const int have_e = ov && ke >= 0 && row_seg[ke] == seg;
    const long long kc = ke - (r - 1 - o);
    const int copy_row = have_e && kc >= 0 && row_seg[kc] == seg;
    const float *apo = ape ? ape + (size_t)o * width : NULL;
    for (int j = threadIdx.x; j < width; j += CSP_THREADS) {
        const size_t so = (size_t)own * width + j;
        if (have_e) { /* slots 0..r-1 = own-group slot o at the last emission */
            float ck, cs;
            if (copy_row) {
                ck = pk0[(size_t)kc * width + j];
                cs = ps0[(size_t)kc * width + j];
                if (apo) cs = __fadd_rn(cs, apo[j]);
            } else { /* that position was fed before the step: the slot's value at the step's start */
                ck = kv[so];
                cs = sc[so];
            }
            kv[(size_t)o * width + j] = ck;
            sc[(size_t)o * width + j] = cs;
        }
        if (have_o) {
            float ps = ps0[(size_t)ko * width + j];
            kv[so] = pk0[(size_t)ko * width + j];
            sc[so] = apo ? __fadd_rn(ps, apo[j]) : ps;
        }
    }
}

extern "C" cudaError_t dic_cmp_gated_rows(const dic_ctx *c, int M, const int *row_seg, const int *emit,
                                          const int64_t *pos, float *const *skv, float *const *ssc, const float *pk,
                                          const float *ps, const float *ape, int ratio, int overlap, int hd,
                                          float *out) {
    if (M <= 0) return cudaSuccess;
    if (ratio <= 0 || hd <= 0) return cudaErrorInvalidValue;
    if (M > CS_SERIAL_MAXM) {
        DIC_LAUNCH(k_cmp_pool, dim3((unsigned)((hd + CSP_THREADS - 1) / CSP_THREADS), (unsigned)M), CSP_THREADS, 0, c->stream, 
            row_seg, emit, pos, skv, ssc, pk, ps, ape, ratio, overlap ? 1 : 0, hd, out);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
        DIC_LAUNCH(k_cmp_state, dim3((unsigned)ratio, (unsigned)M), CSP_THREADS, 0, c->stream, M, row_seg, pos, skv, ssc, pk,
                                                                                      ps, ape, ratio, overlap ? 1 : 0,
                                                                                      hd);
        DIC_LAUNCH_CHECK();
    }
    DIC_LAUNCH(k_cmp_gated_rows, M, CS_THREADS, 0, c->stream, M, row_seg, emit, pos, skv, ssc, pk, ps, ape, ratio,
                                                      overlap ? 1 : 0, hd, out);
    DIC_LAUNCH_CHECK();
}
