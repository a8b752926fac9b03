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
        for (int j = threadIdx.x; j < width; j += CS_THREADS) {
            sk[j] = pk[j];
            ss[j] = ap ? __fadd_rn(ps[j], ap[j]) : ps[j];
        }
        const int e = emit[row];
        if (e < 0) continue; /* uniform over the CTA */
        __syncthreads();
        float *o_row = out + (size_t)e * hd;
        for (int d = threadIdx.x; d < hd; d += CS_THREADS) {
            float mx = -INFINITY;
            for (int s = 0; s < S; s++) mx = fmaxf(mx, cs_slot(sc, s, width, r, ov, hd, d));
            float sum = 0.0f;
            for (int s = 0; s < S; s++) sum = __fadd_rn(sum, dic_expf(__fsub_rn(cs_slot(sc, s, width, r, ov, hd, d), mx)));
            float acc = 0.0f;
            for (int s = 0; s < S; s++) {
                float ex = dic_expf(__fsub_rn(cs_slot(sc, s, width, r, ov, hd, d), mx));
                acc = __fadd_rn(acc, __fmul_rn(cs_slot(kv, s, width, r, ov, hd, d), __fdiv_rn(ex, sum)));
            }
            o_row[d] = acc;
        }
        if (ov) { /* the completed group becomes the previous one */
            __syncthreads();
            const size_t n = (size_t)r * width;
            for (size_t j = threadIdx.x; j < n; j += CS_THREADS) {
                kv[j] = kv[n + j];
                sc[j] = sc[n + j];
            }
        }
        __syncthreads();
    }
}

extern "C" cudaError_t dic_cmp_gated_rows(const dic_ctx *c, int M, const int *row_seg, const int *emit,
                                          const int64_t *pos, float *const *skv, float *const *ssc, const float *pk,
                                          const float *ps, const float *ape, int ratio, int overlap, int hd,
                                          float *out) {
    if (M <= 0) return cudaSuccess;
    if (ratio <= 0 || hd <= 0) return cudaErrorInvalidValue;
    k_cmp_gated_rows<<<M, CS_THREADS, 0, c->stream>>>(M, row_seg, emit, pos, skv, ssc, pk, ps, ape, ratio,
                                                      overlap ? 1 : 0, hd, out);
    DIC_LAUNCH_CHECK();
}
