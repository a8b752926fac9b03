/*
 * lab/attn_decode/attn_decode_lab.h — the lab's decode-attention variants (attn_decode_variants.cu):
 * the product's dic_attn_dec (src/ops/cuda/dic_model.h) under lab_ names, with the mode switch the
 * product no longer has (docs/kernels/attention-decode.md).
 */
#ifndef LAB_ATTN_DECODE_LAB_H
#define LAB_ATTN_DECODE_LAB_H

#include "ops/cuda/dic_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mode 0 = two launches (64-entry blocks + a combine kernel), 1 = one launch of `ctas` CTAs per (row,
 * 16 heads), the last-arriving CTA combines through scratch, 2 = the same CTAs as a cluster combining
 * through distributed shared memory (ctas <= 8), 3 = the product's (k_ad_p2 + k_ad_c2; ctas = column
 * slices of P.V), 4 = k_ad_p2 folding the combine into its last-arriving CTA. mode -2: back to 3 / 1. */
void lab_attn_dec_tune(int mode, int ctas);
size_t lab_attn_dec_scratch(int M, int nheads, int hd, size_t stride);
int lab_attn_dec_ok(const dic_ctx *c, int M, int nheads, int hd, int rd, size_t stride, size_t ldo);
cudaError_t lab_attn_dec(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                         const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                         uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K,
                         const int *ntopk, size_t stride, int *n_idx, const uint16_t *q, size_t ldq, int nheads,
                         const float *sink, float scale, int rd, const float *cs, const float *sn, uint16_t *out,
                         size_t ldo);

#ifdef __cplusplus
}
#endif
#endif
