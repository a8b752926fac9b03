/* attn_list.c — sparse-attention entry lists for a whole step (ops.h
 * di_attn_list, di_attn_list_block). */
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

static inline const uint16_t *store_row(uint16_t *const *pages, int page_rows, int hd, int64_t j) {
    return pages[j / page_rows] + (size_t)(j % page_rows) * (size_t)hd;
}

void di_cpu_attn_list(di_exec *x, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                      const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                      uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K, const int *ntopk,
                      const uint16_t **list0, size_t stride, int *n_idx) {
    (void)x;
    for (int m = 0; m < M; m++) {
        int s = row_seg[m];
        const uint16_t **list = list0 + (size_t)m * stride;
        int64_t p = pos[m], pos0 = seg_pos0[s];
        int row0 = seg_row0[s];
        const uint16_t *rg = ring[s];
        int n = 0;
        int64_t t0 = p - win + 1 > 0 ? p - win + 1 : 0;
        for (int64_t t = t0; t <= p; t++) {
            if (t >= pos0) list[n++] = kv + (size_t)(row0 + (t - pos0)) * (size_t)hd;
            else list[n++] = rg + (size_t)(t % win) * (size_t)hd;
        }
        while (n < win) list[n++] = NULL; /* the reference pads the window part with -1 */
        if (ratio > 0) {
            uint16_t *const *pages = ckv[s];
            int pr = page_rows[s];
            if (topk) {
                const int *sel = topk + (size_t)m * K;
                for (int i = 0; i < ntopk[m]; i++) list[n++] = store_row(pages, pr, hd, sel[i]);
            } else {
                int64_t vis = (p + 1) / ratio;
                for (int64_t j = 0; j < vis; j++) list[n++] = store_row(pages, pr, hd, j);
            }
        }
        n_idx[m] = n;
    }
}

void di_cpu_attn_list_block(di_exec *x, int nseg, const int *seg_row0, const int *seg_nrows, const int *nctx,
                            uint16_t *const *ring, const uint16_t *kv, int hd, const uint16_t **list0, size_t stride,
                            int *n_idx) {
    (void)x;
    for (int s = 0; s < nseg; s++)
        for (int i = 0; i < seg_nrows[s]; i++) {
            int m = seg_row0[s] + i, n = 0;
            const uint16_t **list = list0 + (size_t)m * stride;
            for (int slot = 0; slot < nctx[s]; slot++) list[n++] = ring[s] + (size_t)slot * hd;
            for (int j = 0; j < seg_nrows[s]; j++) list[n++] = kv + (size_t)(seg_row0[s] + j) * hd;
            n_idx[m] = n;
        }
}
