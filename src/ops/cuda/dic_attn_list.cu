/*
 * dic_attn_list.cu — sparse-attention entry lists for a whole step (ops.h
 * di_attn_list, di_attn_list_block; src/ops/cpu/attn_list.c): per row, a
 * list of device pointers to its KV rows (SWA window from the ring or the
 * step's own rows, then compressed rows from the paged row store). Pure
 * pointer arithmetic: the lists equal the CPU's entry for entry.
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"

#define AL_THREADS 128

/* One CTA per row: window entries i < win, then the compressed entries. */
static __global__ void __launch_bounds__(AL_THREADS)
    k_attn_list(const int64_t *pos, const int *row_seg, const int *seg_row0, const int64_t *seg_pos0,
                uint16_t *const *ring, int win, const uint16_t *kv, int hd, uint16_t **const *ckv,
                const int *page_rows, int ratio, const int *topk, int K, const int *ntopk, const uint16_t **list0,
                size_t stride, int *n_idx) {
    DIC_PDL_ENTER();
    const int m = blockIdx.x;
    const int s = row_seg[m];
    const uint16_t **list = list0 + (size_t)m * stride;
    const int64_t p = pos[m], pos0 = seg_pos0[s];
    const int row0 = seg_row0[s];
    const uint16_t *rg = ring[s];
    const int64_t t0 = p - win + 1 > 0 ? p - win + 1 : 0;
    for (int i = threadIdx.x; i < win; i += AL_THREADS) {
        int64_t t = t0 + i;
        const uint16_t *e = NULL; /* the reference pads the window part with -1 */
        if (t <= p) e = t >= pos0 ? kv + (size_t)(row0 + (t - pos0)) * (size_t)hd : rg + (size_t)(t % win) * (size_t)hd;
        list[i] = e;
    }
    int n = win;
    if (ratio > 0) {
        uint16_t *const *pages = ckv[s];
        const int pr = page_rows[s];
        if (topk) {
            const int *sel = topk + (size_t)m * K;
            const int nt = ntopk[m];
            for (int i = threadIdx.x; i < nt; i += AL_THREADS) {
                int64_t j = sel[i];
                list[n + i] = pages[j / pr] + (size_t)(j % pr) * (size_t)hd;
            }
            n += nt;
        } else {
            const int64_t vis = (p + 1) / ratio;
            for (int64_t j = threadIdx.x; j < vis; j += AL_THREADS)
                list[n + j] = pages[j / pr] + (size_t)(j % pr) * (size_t)hd;
            n += (int)vis;
        }
    }
    if (threadIdx.x == 0) n_idx[m] = n;
}

extern "C" cudaError_t dic_attn_list(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg,
                                     const int *seg_row0, const int64_t *seg_pos0, uint16_t *const *ring, int win,
                                     const uint16_t *kv, int hd, uint16_t **const *ckv, const int *page_rows,
                                     int ratio, const int *topk, int K, const int *ntopk, const uint16_t **list,
                                     size_t stride, int *n_idx) {
    if (M <= 0) return cudaSuccess;
    if (win < 0 || (topk && (!ntopk || K < 0))) return cudaErrorInvalidValue;
    DIC_LAUNCH(k_attn_list, M, AL_THREADS, 0, c->stream, pos, row_seg, seg_row0, seg_pos0, ring, win, kv, hd, ckv, page_rows,
                                                 ratio, topk, K, ntopk, list, stride, n_idx);
    DIC_LAUNCH_CHECK();
}

/* Grid (nseg, AL_BY): CTA y of segment s takes rows y, y + AL_BY, ... of it. */
#define AL_BY 16

static __global__ void __launch_bounds__(AL_THREADS)
    k_attn_list_block(const int *seg_row0, const int *seg_nrows, const int *nctx, uint16_t *const *ring,
                      const uint16_t *kv, int hd, const uint16_t **list0, size_t stride, int *n_idx) {
    DIC_PDL_ENTER();
    const int s = blockIdx.x;
    const int nr = seg_nrows[s], nc = nctx[s], r0 = seg_row0[s];
    const uint16_t *rg = ring[s];
    for (int i = blockIdx.y; i < nr; i += gridDim.y) {
        const int m = r0 + i;
        const uint16_t **list = list0 + (size_t)m * stride;
        for (int j = threadIdx.x; j < nc + nr; j += AL_THREADS)
            list[j] = j < nc ? rg + (size_t)j * hd : kv + (size_t)(r0 + (j - nc)) * hd;
        if (threadIdx.x == 0) n_idx[m] = nc + nr;
    }
}

extern "C" cudaError_t dic_attn_list_block(const dic_ctx *c, int nseg, const int *seg_row0, const int *seg_nrows,
                                           const int *nctx, uint16_t *const *ring, const uint16_t *kv, int hd,
                                           const uint16_t **list, size_t stride, int *n_idx) {
    if (nseg <= 0) return cudaSuccess;
    DIC_LAUNCH(k_attn_list_block, dim3((unsigned)nseg, AL_BY), AL_THREADS, 0, c->stream, seg_row0, seg_nrows, nctx, ring, kv,
                                                                                 hd, list, stride, n_idx);
    DIC_LAUNCH_CHECK();
}
