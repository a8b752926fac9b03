/*
 * dic_model.h — CUDA ops the device-shaped model forward needs beyond dic.h
 * (docs/cuda-backend.md). Same rules as dic.h: each `dic_X` computes
 * `di_X` of src/ops/ops.h with the same arguments and per-element formula,
 * on device pointers, enqueued on ctx->stream, no host reads, no
 * allocation, capturable in a CUDA graph. Arguments that ops.h calls "host
 * tables" are device copies of small arrays the queue uploaded at submit.
 *
 * Every pointer argument is a device pointer unless its comment says
 * otherwise; "device table of device pointers" means a device array whose
 * elements point to device memory. File of each family in brackets.
 * Bit-identical to the CPU ops except where a comment says otherwise (the
 * libm expf / log1pf of di_route_rows, di_hc_head_pre and
 * di_engram_gate_rows: evaluated in double and rounded once here).
 */
#ifndef DI_OPS_CUDA_DIC_MODEL_H
#define DI_OPS_CUDA_DIC_MODEL_H

#include "ops/cuda/dic.h"
#include "ops/ops.h" /* di_index_select_args */

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Data movement [dic_rows.cu]. dic_copy_2d: cudaMemcpy2DAsync device to
 * device (src, dst device). dic_scatter_rows: src_row (or NULL), src device;
 * dst a device table of n device row pointers. */
cudaError_t dic_copy_2d(const dic_ctx *c, int M, const void *src, size_t lds_bytes, void *dst, size_t ldd_bytes,
                        size_t row_bytes);
cudaError_t dic_fill_f32(const dic_ctx *c, float *p, size_t n, float v);
/* dst[i] <- src row (src_row ? src_row[i] : i); dst: device array of device row pointers. */
cudaError_t dic_scatter_rows(const dic_ctx *c, int n, const int *src_row, const uint16_t *src, size_t lds,
                             uint16_t *const *dst, int width);

/* ---------------------------------------------------------------------------
 * Attention entry lists [dic_attn_list.cu] (ops.h di_attn_list,
 * di_attn_list_block). All array arguments on the device: pos, row_seg
 * [M]; seg_row0, seg_pos0, page_rows, seg_nrows, nctx [nseg]; ring: device
 * table [nseg] of device ring pointers; ckv: device table [nseg] of device
 * page tables (each a device array of device page pointers); kv device;
 * list: device [M][stride] of device pointers (written); n_idx [M]. topk /
 * ntopk are written by dic_index_select earlier in the stream. Window
 * entries past the visible positions are NULL, as on the CPU. */
cudaError_t dic_attn_list(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                          const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                          uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K,
                          const int *ntopk, const uint16_t **list, size_t stride, int *n_idx);
cudaError_t dic_attn_list_block(const dic_ctx *c, int nseg, const int *seg_row0, const int *seg_nrows, const int *nctx,
                                uint16_t *const *ring, const uint16_t *kv, int hd, const uint16_t **list,
                                size_t stride, int *n_idx);

/* Decode attention [dic_attn_dec.cu] (ops.h di_attn_dec, both modes, every
 * M): the list arguments as dic_attn_list (the list itself is not written;
 * n_idx is), then q, sink, scale, the inverse RoPE tables cs, sn [M][rd/2]
 * and out. `stride` here bounds every row's entry count n (the list's
 * stride, or less: the grid's block count and the scratch follow it, a
 * row's bits do not). Scratch: dic_attn_dec_scratch(rows, nheads, hd,
 * stride) for any rows >= 1: the rows run in chunks that fit scratch_cap,
 * one launch pair each. dic_attn_dec_ok: a supported shape and one row's
 * scratch (else the caller runs dic_attn_list, dic_sparse_attn,
 * dic_rope_tab). Two launches per chunk: 64-entry blocks, then a combine
 * kernel (docs/kernels/attention-decode.md). dic_attn_dec_floored adds
 * ops.h di_attn_dec's window floor, seg_lo (device table [nseg], NULL =
 * none): window entries of positions t < seg_lo[row_seg[m]] are absent. */
size_t dic_attn_dec_scratch(int M, int nheads, int hd, size_t stride);
int dic_attn_dec_ok(const dic_ctx *c, int M, int nheads, int hd, int rd, size_t stride, size_t ldo);
cudaError_t dic_attn_dec(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                         const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                         uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K,
                         const int *ntopk, size_t stride, int *n_idx, const uint16_t *q, size_t ldq, int nheads,
                         const float *sink, float scale, int rd, const float *cs, const float *sn, uint16_t *out,
                         size_t ldo);
cudaError_t dic_attn_dec_floored(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                                 const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                                 uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K,
                                 const int *ntopk, size_t stride, int *n_idx, const int64_t *seg_lo,
                                 const uint16_t *q, size_t ldq, int nheads, const float *sink, float scale, int rd,
                                 const float *cs, const float *sn, uint16_t *out, size_t ldo);

/* The window floor of ops.h di_attn_dec (seg_lo) [dic_attn_dec.cu]: after
 * dic_attn_list, row m's window entries of positions t < seg_lo[row_seg[m]]
 * become NULL (device tables pos, row_seg, seg_lo; list [M][stride]). */
cudaError_t dic_attn_floor(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg, const int64_t *seg_lo,
                           int win, const uint16_t **list, size_t stride);

/* Query / kv post-processing [dic_norm_rope.cu] (ops.h di_q_post,
 * di_attn_kv_post), one kernel each, in both modes: q_post at every M
 * (row-invariant; its head sum in a fixed tree, not the CPU's order: 1 ulp on
 * rare heads), kv_post at M <= 64 (the op sequence's bits); *_ok says whether the
 * kernel applies (else the caller runs the op sequence). dst / src_row:
 * device tables of n entries (n = 0: no scatter). */
int dic_q_post_ok(const dic_ctx *c, int M, const uint16_t *q, size_t ld, int hd, int rd);
cudaError_t dic_q_post(const dic_ctx *c, int M, uint16_t *q, size_t ld, int nheads, int hd, int norm, float eps, int rd,
                       const float *cs, const float *sn);
int dic_attn_kv_post_ok(const dic_ctx *c, int M, const uint16_t *kv, size_t ld, int D, int rd, int qn, int qblk);
cudaError_t dic_attn_kv_post(const dic_ctx *c, int M, uint16_t *kv, size_t ld, const float *w, int D, float eps,
                             int rd, const float *cs, const float *sn, int qn, int qblk, int n, const int *src_row,
                             uint16_t *const *dst);

/* ---------------------------------------------------------------------------
 * Gated compressor state [dic_cmp_state.cu] (ops.h di_cmp_gated_rows): one
 * block per segment (rows of a segment are consecutive and sequential: the
 * state is rewritten per token), pooling as dic_softmax_pool; the state
 * holds `groups` blocks of `ratio` slots (model/seq_state.h). row_seg, emit,
 * pos [M], pk, ps, ape, out device; skv, ssc: device tables [nseg] of device
 * state pointers. */
cudaError_t dic_cmp_gated_rows(const dic_ctx *c, int M, const int *row_seg, const int *emit, const int64_t *pos,
                               float *const *skv, float *const *ssc, const float *pk, const float *ps,
                               const float *ape, int ratio, int overlap, int groups, int hd, float *out);

/* ---------------------------------------------------------------------------
 * Indexer selection over paged key stores [dic_index_select.cu] (ops.h
 * di_index_select). dic.h's dic_index_scores needs contiguous keys
 * (k + key0[m] * ldk); the model's key stores are paged, so this variant
 * walks kpages[m]. It fuses scores, the V4.1 candidate-block restriction /
 * selection and the per-row top-k (dic_topk_desc semantics).
 * The struct itself is a host struct (read at the call); its pointers are
 * device pointers: q, w, page_rows, nvis, kcap, cand_in, ncand_in,
 * cand_out, ncand_out, topk, ntopk; kpages: device table [M] of device page
 * tables (device arrays of device page pointers).
 * iscore / bscore pointers and nscratch are ignored: the scores live in
 * c->scratch, which must hold dic_index_select_scratch(M, iscore_stride,
 * bscore_stride) bytes. On the device iscore_stride is the bound of every
 * nvis[m] (keys past it are not scored) and bscore_stride, when cand_out is
 * set, must be >= ceil(iscore_stride / bs). K, KB <= 4096. Unlike the CPU,
 * entries of topk / cand_out past the row's count are written as -1. */
size_t dic_index_select_scratch(int M, size_t iscore_stride, size_t bscore_stride);
/* At decode (M <= 16, nh <= 64, iscore_stride <= 20480, and with a candidate output only where
 * ceil(iscore_stride / bs) <= KB), in both modes: one launch (scores, then the last CTA of a row
 * selects); otherwise two kernels (scores; one CTA per row selects). The same bits either way, the
 * CPU's (docs/kernels/index-select.md, docs/determinism.md §7). */
cudaError_t dic_index_select(const dic_ctx *c, const di_index_select_args *a);
/* Tests / bench: 0 = the two kernels at every shape (the one-launch path off), 1 = as above (default). */
void dic_index_select_one_launch(int on);

/* ---------------------------------------------------------------------------
 * MoE [dic_moe_route.cu, dic_route_gate.cu, dic_gemm_grouped_seg.cu]. All arrays on the device
 * except the W arrays of the grouped GEMMs (host arrays of dic_wmat whose
 * w / scale are device pointers, as dic_gemm_grouped). */
/* dic_route with the gate temperature (logits divided in place), the hash
 * table lookup by token (tid2eid[tokens[m] * k ..], tokens on the device)
 * and the unnormalised weights (normalize == 0). Scores use dic_route's
 * softplus (exp / log1p in double, rounded once): sel and w equal the CPU's
 * where glibc's expf / log1pf are correctly rounded, else w within 1 ulp. */
cudaError_t dic_route_rows(const dic_ctx *c, int M, float *logits, int E, float temp, const float *bias,
                           const int32_t *tid2eid, const int32_t *tokens, int k, float route_scale, float norm_eps,
                           int normalize, int *sel, float *w);
/* ops.h di_route_gate: logits [M][E] (row stride E) = A . W^T in fp32 (W: the gate, n = E),
 * then dic_route_rows on them. dic_route_gate_ok: whether one launch takes it, in both modes
 * (dic_route_gate.cu: BF16 gate, 1 <= M <= 8, E <= 1024, k <= 32, the fast GEMV's alignment,
 * no cluster split of K): the logits bitwise the fast GEMV's (dic_route_logits'; dic_gemm's
 * at M <= 4 in fast mode; at M = 5..8 fast-mode dic_gemm takes the tensor cores: other fp32
 * sums), sel and w bitwise dic_route_rows' on them; a row's bits do not depend on M.
 * Otherwise dic_route_gate runs, in batch-invariant mode, dic_route_logits + dic_route_rows
 * (the one launch's bits at every M) where dic_route_logits_ok, else dic_gemm +
 * dic_route_rows (same bits as the two calls). One launch at a time per device (its arrival
 * counter and score slots: the forward runs the router on line 0 only). */
int dic_route_gate_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int E, int k,
                      const int32_t *tid2eid, const int32_t *tokens);
/* The fused router's logits alone (dic_route_gate.cu k_route_logits: the fast GEMV's tile and
 * K split over row tiles of up to 16 rows): fp32 logits [M][W->n], row stride W->n, bitwise
 * dic_route_gate's one-launch logits row by row, at any M (a row's bits depend on the row, E
 * and K only). ok: BF16 gate (fmt 0), K % 8 == 0, lda % 8 == 0, A and W 16-byte aligned. */
int dic_route_logits_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W);
cudaError_t dic_route_logits(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                             float *logits);
cudaError_t dic_route_gate(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, float *logits,
                           int E, float temp, const float *bias, const int32_t *tid2eid, const int32_t *tokens, int k,
                           float route_scale, float norm_eps, int normalize, int *sel, float *w);
/* The hash rows' token ids (tokens) are read before the PDL wait: they must not be written by the
 * launch just before (the forward writes them at the step's start; docs/kernels/router.md). */
/* dic_moe_dispatch plus inv[m*k + slot] = the entry's index in rows.
 * off [E+1], rows / inv [M*k] device. */
cudaError_t dic_moe_dispatch_inv(const dic_ctx *c, int M, int k, const int *sel, int E, int *off, int *rows,
                                 int *inv);
cudaError_t dic_moe_gather(const dic_ctx *c, int n_max, const int *off, int E, const int *rows, int k,
                           const uint16_t *xn, size_t ldx, int d, const float *rw, uint16_t *xe, size_t lde,
                           float *erw);
/* Grouped GEMM over a pre-gathered list: expert e's rows are A rows
 * [off[e], off[e+1]) (no rows[] indirection, unlike dic_gemm_grouped);
 * max_rows bounds off[E]. Scratch: dic_gemm_scratch(max_rows, N, K). Always
 * the batch-invariant kernels: a row equals dic_gemm on it with
 * c->batch_invariant = 1. The gemm2 form writes W1 and W2 products from one
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
/* ops.h di_moe_combine (renamed: dic.h has dic_moe_combine, the fused
 * bf16 combine by sel). Combine in increasing inv (expert id, then slot:
 * the CPU's order), fp32 accumulation from 0; at most 64 slots; M <= 65535. */
cudaError_t dic_moe_combine_inv(const dic_ctx *c, int M, int k, const int *inv, const uint16_t *eo, size_t ldo,
                                int d, float *y);

/* ops.h di_ep_plan and di_gather_rows_bf16 [dic_ep_plan.cu]: the expert-parallel
 * exchange plan (bitwise the CPU's; E <= 1024, k <= 64) and the row gather with
 * holes. a: a host struct of device pointers. */
cudaError_t dic_ep_plan(const dic_ctx *c, const di_ep_plan_args *a);
cudaError_t dic_gather_rows_bf16(const dic_ctx *c, int n, const int *idx, const uint16_t *src, size_t lds, int d,
                                 uint16_t *dst, size_t ldd);

/* ops.h di_moe_routed, both modes at decode sizes [dic_moe_decode.cu]: two
 * launches, no dispatch. h: [M*k][ldh] bf16 scratch (row m*k + slot); y
 * (may be NULL) fp32 [M][d]; shared (may be NULL, may alias out) and out
 * bf16 row stride ldo / lds. W1, W3, W2: host arrays [E] of FP4 or FP8
 * weights (W1, W3 [I][d], W2 [d][I]). _ok: the shapes it takes (k <= 8,
 * d and I multiples of 128 and <= 8192, FP8 blocks of >= 32, ...).
 * Deterministic; every row's h, y, out are the bits of the batch-invariant
 * op sequence (dispatch, gather, dic_gemm2_grouped_seg / dic_gemm_grouped_seg
 * with c->batch_invariant, dic_swiglu_n, combine, + shared, bf16) on the same
 * dic_ctx.num_sms, at any M (docs/kernels/moe-decode.md §2). */
#define DIC_MOE_DEC_MAX_ROWS 48   /* M * k up to which the model takes it, FP4 experts (docs/kernels/moe-decode.md §3) */
#define DIC_MOE_DEC_MAX_ROWS_V0 8 /* the same for FP8 experts (the register kernels; docs/kernels/moe-decode.md §3) */
int dic_moe_routed_dec_ok(int M, int k, int E, const dic_wmat *W1, const dic_wmat *W3, const dic_wmat *W2, int d,
                          int act_block);
/* Launches of k_mv_down2 so far, and 1 once a ring kernel's launch failed (e.g. clusters refused:
 * the register kernels since); for tests. */
int dic_moe_dec_down2_count(void);
int dic_moe_dec_broken(void);
cudaError_t dic_moe_routed_dec(const dic_ctx *c, int M, int k, const int *sel, const float *rw, int E,
                               const dic_wmat *W1, const dic_wmat *W3, const dic_wmat *W2, const uint16_t *xn,
                               size_t ldx, int d, int act_block, float limit, uint16_t *h, size_t ldh,
                               const uint16_t *shared, size_t lds, float *y, uint16_t *out, size_t ldo);

/* ---------------------------------------------------------------------------
 * Small per-row helpers [dic_elem_model.cu]. All arrays on the device
 * (dic_hc_head_pre's base [hc] included). dic_hc_head_pre: libm expf as
 * exp in double rounded once (see the top). */
cudaError_t dic_scale_bf16_f32(const dic_ctx *c, float *v, size_t n, float scale);
cudaError_t dic_hc_pre_onehot(const dic_ctx *c, int M, float *pre);
cudaError_t dic_hc_head_pre(const dic_ctx *c, int M, const float *mixes, int hc, float scale0, const float *base,
                            float eps, float *pre);
cudaError_t dic_hc_mean(const dic_ctx *c, int M, const uint16_t *R, int hc, int d, uint16_t *out, size_t ldo);
cudaError_t dic_add_bcast_bf16(const dic_ctx *c, int M, const uint16_t *e, int hc, int d, uint16_t *R);

/* ops.h di_hc_transition fused (dic_mhc.cu), for both modes at every M: fn is the F32 [24][4d] weight (device,
 * row stride 4d). Only the fp32 sums of the mixes differ from the op sequence (another fixed order that depends
 * on d only: 32-column slices, k_transition2's trees); everything after them has the sequence's bits for the same
 * mixes (docs/kernels/mhc.md). Below 65 rows k_transition2, one launch per 64 rows (uses c->scratch); from 65
 * rows k_hc_rows, one launch (no scratch); the same bits per row. dic_hc_transition_ok says whether the shape is
 * taken (else the caller runs the sequence); it does not depend on M. dic_hc_transition_rows: k_hc_rows at any
 * M (tests, lab). */
int dic_hc_transition_ok(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int d, int fn_n, int fn_k,
                         const void *fn, const uint16_t *xo, const uint16_t *xn, size_t ldx);
cudaError_t dic_hc_transition(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, uint16_t *R, size_t ldr,
                              int d, const float *fn, const float *scale3, const float *base, int iters, float hc_eps,
                              float rms_eps, float *mixes, float *pre, float *post, float *comb, float *pre_in,
                              const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx);
cudaError_t dic_hc_transition_rows(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, uint16_t *R,
                                   size_t ldr, int d, const float *fn, const float *scale3, const float *base,
                                   int iters, float hc_eps, float rms_eps, float *mixes, float *pre, float *post,
                                   float *comb, float *pre_in, const float *norm_w, float norm_eps, uint16_t *xo,
                                   uint16_t *xn, size_t ldx);

/* ops.h di_hc_head_final fused into one launch per 16 tiles (dic_mhc.cu, k_transition2 with the head's 4 mixes
 * or none), both modes (the model takes it with mixes: V4): sub != NULL: R = expand(post, comb, sub, R) first; fn (F32 [4][4d],
 * device) != NULL: mixes = scale_mixes(R . fn), pre = head_pre(mixes, scale0, base, hc_eps) written, collapse
 * with it; fn == NULL: collapse with pre (read only: the V4.1 carried pre); then xn = rmsnorm(xo, norm_w).
 * Only the fp32 sums of the mixes differ from the op sequence (a fixed order that depends on d and the columns
 * per CTA (64), not on M); R, pre, xo, xn have the sequence's bits for those mixes. dic_hc_head_ok: whether the
 * shape is taken (fn_n = 4, fn_k = 4d with fn; fn_n = 0 without). Uses c->scratch. */
int dic_hc_head_ok(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int d, int fn_n, int fn_k, const void *fn,
                   const uint16_t *xo, const uint16_t *xn, size_t ldx);
cudaError_t dic_hc_head(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, const float *post,
                        const float *comb, uint16_t *R, size_t ldr, int d, const float *fn, float scale0,
                        const float *base, float hc_eps, float rms_eps, float *mixes, float *pre, const float *norm_w,
                        float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx);

/* ---------------------------------------------------------------------------
 * Engram [dic_elem_model.cu: gather; dic_engram_gate.cu: gate]. ids, table,
 * scale, rmap, kv, R, qk, gates: device. Gate: the exponential as in
 * dic_hc_head_pre; rmap must map tokens to distinct rows of R. */
cudaError_t dic_engram_gather_rows(const dic_ctx *c, int M, const int64_t *ids, int64_t ids_stride, int ncols,
                                   const uint8_t *table, const uint8_t *scale, int hd, uint16_t *out);
/* kvf / h scratch of the CPU op are not needed on the device (pass NULL). */
/* One CTA per (token, copy), M * hc < 2^31 (docs/kernels/engram-gate.md). */
cudaError_t dic_engram_gate_rows(const dic_ctx *c, int M, const int64_t *rmap, const uint16_t *kv, size_t ldkv,
                                 uint16_t *R, const float *qk, int dim, int hc, float eps, float *gates);

/* Engram hash ids [dic_engram_hash.cu] (ops.h di_engram_hash_rows): tokens, map, consts, ring
 * pointers and rings, ids and the row / segment tables all device; two launches (ids, then the
 * rings), so a chunk's ring writes never race its reads. max_ngram in [2, 16]. */
cudaError_t dic_engram_hash_rows(const dic_ctx *c, int M, const int32_t *tokens, const int32_t *map, int32_t n_ids,
                                 const int64_t *consts, int n_layers, int max_ngram, int n_heads, int32_t pad_class,
                                 const int64_t *pos, const int *row_seg, const int64_t *seg_pos0,
                                 const int *seg_nrows, int32_t *const *ring, int ring_len, int64_t *ids);

#ifdef __cplusplus
}
#endif
#endif
