/*
 * dic_model.h — CUDA ops the device-shaped model forward needs beyond dic.h
 * (docs/DEVICE-FORWARD.md). Same rules as dic.h: each `dic_X` computes
 * `di_X` of src/ops/ops.h with the same arguments and per-element formula,
 * on device pointers, enqueued on ctx->stream, no host reads, no
 * allocation, capturable in a CUDA graph. Arguments that ops.h calls "host
 * tables" are device copies of small arrays the queue uploaded at submit.
 *
 * Kernels to write (none exist yet); suggested file in brackets.
 */
#ifndef DI_OPS_CUDA_DIC_MODEL_H
#define DI_OPS_CUDA_DIC_MODEL_H

#include "ops/cuda/dic.h"
#include "ops/ops.h" /* di_index_select_args */

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Data movement [dic_elem.cu]. dic_copy_2d may simply be
 * cudaMemcpy2DAsync(..., cudaMemcpyDeviceToDevice, stream). */
cudaError_t dic_copy_2d(const dic_ctx *c, int M, const void *src, size_t lds_bytes, void *dst, size_t ldd_bytes,
                        size_t row_bytes);
cudaError_t dic_fill_f32(const dic_ctx *c, float *p, size_t n, float v);
/* dst[i] <- src row (src_row ? src_row[i] : i); dst: device array of device row pointers. */
cudaError_t dic_scatter_rows(const dic_ctx *c, int n, const int *src_row, const uint16_t *src, size_t lds,
                             uint16_t *const *dst, int width);

/* ---------------------------------------------------------------------------
 * Attention entry lists [dic_attention.cu] (ops.h di_attn_list,
 * di_attn_list_block). All array arguments on the device; topk / ntopk are
 * written by dic_index_select earlier in the stream. */
cudaError_t dic_attn_list(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                          const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                          uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K,
                          const int *ntopk, const uint16_t **list, size_t stride, int *n_idx);
cudaError_t dic_attn_list_block(const dic_ctx *c, int nseg, const int *seg_row0, const int *seg_nrows, const int *nctx,
                                uint16_t *const *ring, const uint16_t *kv, int hd, const uint16_t **list,
                                size_t stride, int *n_idx);

/* ---------------------------------------------------------------------------
 * Gated compressor state [dic_indexer.cu] (ops.h di_cmp_gated_rows): one
 * block per segment (rows of a segment are sequential: the state is
 * rewritten per token), pooling as dic_softmax_pool. */
cudaError_t dic_cmp_gated_rows(const dic_ctx *c, int M, const int *row_seg, const int *emit, const int64_t *pos,
                               float *const *skv, float *const *ssc, const float *pk, const float *ps,
                               const float *ape, int ratio, int overlap, int hd, float *out);

/* ---------------------------------------------------------------------------
 * Indexer selection over paged key stores [dic_indexer.cu] (ops.h
 * di_index_select). dic.h's dic_index_scores needs contiguous keys
 * (k + key0[m] * ldk); the model's key stores are paged, so this variant
 * walks kpages[m] (device page tables). It fuses scores, the V4.1
 * candidate-block restriction / selection and the per-row top-k
 * (dic_topk_desc semantics). Scratch: M x max_keys fp32 scores (the CPU's
 * per-thread iscore/bscore fields of the args are ignored on the device;
 * pass dic scratch). */
cudaError_t dic_index_select(const dic_ctx *c, const di_index_select_args *a);

/* ---------------------------------------------------------------------------
 * MoE [dic_moe.cu]. */
/* dic_route with the gate temperature, the hash table lookup by token
 * (tid2eid[tokens[m] * k ..], tokens on the device) and the unnormalised
 * weights (normalize == 0). */
cudaError_t dic_route_rows(const dic_ctx *c, int M, float *logits, int E, float temp, const float *bias,
                           const int32_t *tid2eid, const int32_t *tokens, int k, float route_scale, float norm_eps,
                           int normalize, int *sel, float *w);
/* dic_moe_dispatch plus inv[m*k + slot] = the entry's index in rows. */
cudaError_t dic_moe_dispatch_inv(const dic_ctx *c, int M, int k, const int *sel, int E, int *off, int *rows,
                                 int *inv);
cudaError_t dic_moe_gather(const dic_ctx *c, int n_max, const int *off, int E, const int *rows, int k,
                           const uint16_t *xn, size_t ldx, int d, const float *rw, uint16_t *xe, size_t lde,
                           float *erw);
/* Grouped GEMM over a pre-gathered list: expert e's rows are A rows
 * [off[e], off[e+1]) (no rows[] indirection, unlike dic_gemm_grouped);
 * max_rows bounds off[E]. The gemm2 form writes W1 and W2 products from one
 * activation quantisation. */
cudaError_t dic_gemm_grouped_seg(const dic_ctx *c, int E, const dic_wmat *W, const int *off, int max_rows,
                                 const uint16_t *A, size_t lda, int act_block, uint16_t *C16, size_t ldc);
cudaError_t dic_gemm2_grouped_seg(const dic_ctx *c, int E, const dic_wmat *W1, const dic_wmat *W2, const int *off,
                                  int max_rows, const uint16_t *A, size_t lda, int act_block, uint16_t *C1,
                                  uint16_t *C2, size_t ldc);
/* dic_swiglu over off[E] rows (row count read on the device; grid sized by max_rows). */
cudaError_t dic_swiglu_n(const dic_ctx *c, const int *off, int E, int max_rows, const uint16_t *gate,
                         const uint16_t *up, size_t ld, int I, float limit, const float *rw, uint16_t *out,
                         size_t ldo);
/* Combine in increasing expert id (the CPU's order), fp32 accumulation from 0 (ops.h
 * di_moe_combine; named _inv: dic.h's dic_moe_combine has another signature). */
cudaError_t dic_moe_combine_inv(const dic_ctx *c, int M, int k, const int *inv, const uint16_t *eo, size_t ldo, int d,
                            float *y);

/* ---------------------------------------------------------------------------
 * Small per-row helpers [dic_elem.cu, dic_mhc.cu]. */
cudaError_t dic_scale_bf16_f32(const dic_ctx *c, float *v, size_t n, float scale);
cudaError_t dic_hc_pre_onehot(const dic_ctx *c, int M, float *pre);
cudaError_t dic_hc_head_pre(const dic_ctx *c, int M, const float *mixes, int hc, float scale0, const float *base,
                            float eps, float *pre);
cudaError_t dic_hc_mean(const dic_ctx *c, int M, const uint16_t *R, int hc, int d, uint16_t *out, size_t ldo);
cudaError_t dic_add_bcast_bf16(const dic_ctx *c, int M, const uint16_t *e, int hc, int d, uint16_t *R);

/* ---------------------------------------------------------------------------
 * Engram [dic_engram.cu]. */
cudaError_t dic_engram_gather_rows(const dic_ctx *c, int M, const int64_t *ids, int64_t ids_stride, int ncols,
                                   const uint8_t *table, const uint8_t *scale, int hd, uint16_t *out);
/* kvf / h scratch of the CPU op are not needed on the device (pass NULL). */
cudaError_t dic_engram_gate_rows(const dic_ctx *c, int M, const int64_t *rmap, const uint16_t *kv, size_t ldkv,
                                 uint16_t *R, const float *qk, int dim, int hc, float eps, float *gates);

#ifdef __cplusplus
}
#endif
#endif
