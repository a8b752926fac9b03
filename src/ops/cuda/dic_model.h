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
#include "ops/cuda/dic_retired_knobs.h"

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

/* Decode attention [dic_attn_dec.cu] (ops.h di_attn_dec, fast mode): the
 * list arguments as dic_attn_list (the list itself is not written; n_idx
 * is), then q, sink, scale, the inverse RoPE tables cs, sn [M][rd/2] and
 * out. Scratch dic_attn_dec_scratch(M, nheads, hd, stride).
 * dic_attn_dec_ok: fast mode and a supported shape (else the caller runs
 * dic_attn_list, dic_sparse_attn, dic_rope_tab).
 * Variants (dic_attn_dec_tune, or $DEEPINFER_ATTN_DEC / _CTAS read once):
 * mode 0 = two launches (64-entry blocks + a combine kernel), 1 = one launch
 * of `ctas` CTAs per (row, 16 heads), the last-arriving CTA combines through
 * scratch, 2 = the same CTAs as a thread-block cluster combining through
 * distributed shared memory (ctas <= 8). ctas in 1..16 (clamped to the
 * stride's 64-entry blocks). mode / ctas < 0: unchanged. */
void dic_attn_dec_tune(int mode, int ctas);
size_t dic_attn_dec_scratch(int M, int nheads, int hd, size_t stride);
int dic_attn_dec_ok(const dic_ctx *c, int M, int nheads, int hd, int rd, size_t stride, size_t ldo);
cudaError_t dic_attn_dec(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                         const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                         uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K,
                         const int *ntopk, size_t stride, int *n_idx, const uint16_t *q, size_t ldq, int nheads,
                         const float *sink, float scale, int rd, const float *cs, const float *sn, uint16_t *out,
                         size_t ldo);

/* Query / kv post-processing [dic_norm_rope.cu] (ops.h di_q_post,
 * di_attn_kv_post), one kernel each in fast mode; *_ok says whether the
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
 * state is rewritten per token), pooling as dic_softmax_pool. row_seg, emit,
 * pos [M], pk, ps, ape, out device; skv, ssc: device tables [nseg] of device
 * state pointers. */
cudaError_t dic_cmp_gated_rows(const dic_ctx *c, int M, const int *row_seg, const int *emit, const int64_t *pos,
                               float *const *skv, float *const *ssc, const float *pk, const float *ps,
                               const float *ape, int ratio, int overlap, int hd, float *out);

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
/* Decode variant (fast mode, M <= 16, nh <= 64, no candidate output, iscore_stride <=
 * 20480): mode 1 = one launch (scores, then the last CTA of a row selects),
 * 0 = the two kernels (scores; one 1024-thread CTA per row selects). Same
 * bits either way. -1: read $DEEPINFER_ISEL_DEC once; -2: back to it. */
void dic_index_select_tune(int mode);
/* The candidate source (cand_out) on the one-launch decode path too (fast mode only, as that path), where
 * ceil(iscore_stride / bs) <= KB (every row keeps all its blocks: the same cand_out and top-k as the two
 * kernels): on = 1 (default); 0 = the two kernels; on < 0: back to $DEEPINFER_ISEL_DEC_CAND (unset = 1,
 * 0 = the two kernels). Returns the setting. Knob iselcand=0|1. */
int dic_index_select_cand(int on);
cudaError_t dic_index_select(const dic_ctx *c, const di_index_select_args *a);

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
 * then dic_route_rows on them. dic_route_gate_ok: whether one launch takes it
 * (dic_route_gate.cu: batch_invariant == 0, BF16 gate, 1 <= M <= 8, E <= 1024, k <= 32, the
 * fast GEMV's alignment, no cluster split of K): the logits bitwise the fast GEMV's
 * (dic_gemm's at M <= 4; at M = 5..8 dic_gemm takes the tensor cores: other fp32 sums), sel
 * and w bitwise dic_route_rows' on them. Otherwise dic_route_gate runs dic_gemm +
 * dic_route_rows (same bits as the two calls). */
int dic_route_gate_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int E, int k,
                      const int32_t *tid2eid, const int32_t *tokens);
cudaError_t dic_route_gate(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, float *logits,
                           int E, float temp, const float *bias, const int32_t *tid2eid, const int32_t *tokens, int k,
                           float route_scale, float norm_eps, int normalize, int *sel, float *w);
/* The one-launch kernel's variant (same bits; $DEEPINFER_ROUTE_GATE sets it at first use):
 * 0 the session-5 kernel, 1 (default) the shorter chain with the last-arriver handoff,
 * 2 the same with tagged score slots polled by CTA 0; -1: back to the environment / default.
 * The hash rows' token ids (tokens) are read before the PDL wait in 1 and 2: they must not be
 * written by the launch just before (the forward writes them at the step's start). */
void dic_route_gate_tune(int variant);
/* Lean decode instantiations (router, routed experts; the GEMM, GEMV, RMSNorm and mHC launchers take theirs
 * always): on (default) or off (the full kernels, the same bits): an A/B switch for measurements. */
void dic_lean_set(int on);
int dic_lean_off(void);
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

/* ops.h di_moe_routed, fast mode at decode sizes [dic_moe_decode.cu]: two
 * launches, no dispatch. h: [M*k][ldh] bf16 scratch (row m*k + slot); y
 * (may be NULL) fp32 [M][d]; shared (may be NULL, may alias out) and out
 * bf16 row stride ldo / lds. W1, W3, W2: host arrays [E] of FP4 or FP8
 * weights (W1, W3 [I][d], W2 [d][I]). _ok: the shapes it takes (k <= 8,
 * d and I multiples of 128, FP8 blocks of >= 32, ...). Deterministic; a
 * row's bits do not depend on M; within the GEMM tolerance of the op
 * sequence. */
#define DIC_MOE_DEC_MAX_ROWS 48   /* M * k up to which the model takes it, FP4 experts (fast mode; MOE-DEC-NOTES.md round 2) */
#define DIC_MOE_DEC_MAX_ROWS_V0 8 /* the same for FP8 experts (variant 0 only: it won at M = 1 alone, round 1) */
int dic_moe_routed_dec_ok(int M, int k, int E, const dic_wmat *W1, const dic_wmat *W3, const dic_wmat *W2, int d,
                          int act_block);
/* Variant knobs of dic_moe_routed_dec (bench / test; $DEEPINFER_MOE_DEC="up,down,nst" is read once
 * otherwise): up 0 = k_md_up, 1 = ring per warp, 2 = ring + cluster of 4 K-chains; down 0 = k_md_down,
 * 1 = one CTA per (token, slot), cluster over the slots, 2 = one CTA per (token, 16 columns) with all
 * k entries, no cluster (k_mv_down2; down 1 where its shared memory exceeds 200 KB); nst = ring stages of up 1 / 2 (2, 3, 4, 8);
 * negative = the default. FP8 experts always take 0. Every variant gives the same bits. */
void dic_moe_dec_config(int up, int down, int nst);
/* Option / diagnostic flags of the FP4 variants (up 1 / 2, down 1), $DEEPINFER_MOE_DEC's 4th field
 * otherwise; negative = the default. DIC_MD_QHW is a real option (same bits); the others are
 * TIMING-ONLY diagnostics (wrong results; bench rows decomposing the time, never a default). */
#define DIC_MD_QHW 0x1     /* activation quantisation by cvt.rn.satfinite.e4m3x2 (same bits) */
#define DIC_MD_CVT 0x2     /* FP4 -> f16 by byte permutes (11 instr / 8 weights) + weight scales by exponent add (same bits) */
#define DIC_MD_XPRE 0x4    /* up: quantise xn BEFORE the PDL wait (same bits; needs xn not written by the launch just
                            * before the op: true in moe.c, where gate GEMM + route_rows run between) */
#define DIC_MD_DLITE 0x8   /* down: lighter skeleton: the token's sel and (expert, slot) order read before the wait,
                            * sel re-check overlapped with the h loads, DSMEM eo loads issued together (same bits) */
#define DIC_MD_UPONLY 0x10  /* diag: launch the up kernel alone */
#define DIC_MD_DNONLY 0x20  /* diag: launch the down kernel alone */
#define DIC_MD_NOW 0x40     /* diag: no weight loads (the ring is not filled) */
#define DIC_MD_NOQ 0x80     /* diag: no activation quantisation */
#define DIC_MD_NOMMA 0x100  /* diag: no FP4 convert / MMA / scale math (the weights still stream in) */
#define DIC_MD_EXIT 0x200   /* diag: return right after the PDL wait (down: no pre-wait stream either) */
#define DIC_MD_EMPTY 0x400  /* diag: return at entry (an empty launch of the same grid / cluster shape) */
#define DIC_MD_LIN 0x800    /* diag: the same bytes read as one contiguous 1 KB run per warp chunk */
void dic_moe_dec_flags(int fl);
/* Timing probe (DEEPINFER_CUDA_SKIP_SETS knob mvprobe=BITS; 0 off): any bit set launches the default
 * FP4 kernels' FST = 2 copies (md_quant_rows instead of md_quant_lean: an A/B of the same bits) with
 * DIC_MD_NOQ / DIC_MD_NOMMA set at run time (results WRONG), bits 0..15 for the up kernel, << 16 for the
 * down kernel (k_mv_down2); e.g. 0x40000000: the A/B only. */
void dic_moe_dec_probe(int bits);
/* Ring stages per warp of the lean k_mv_down2 (the default down kernel at M <= 2): 4, 6 or 10; -1 the default
 * (4 at M <= 2; DEEPINFER_CUDA_SKIP_SETS knob md2nst=N). Same bits. */
void dic_moe_dec_down2_nst(int nst);
/* With a line to join before `shared` is read (dic_ctx.join: the shared expert on a side line), launch k_mv_down2
 * before the join (routed y only) and add `shared` in a tail kernel after it: 1 on, 0 off, -1 the default
 * ($DEEPINFER_MOE_TAIL=0|1, else MD_TAIL_DEF; DEEPINFER_CUDA_SKIP_SETS knob mdtail=N). Same bits. */
void dic_moe_dec_tail(int on);
/* One launch for up and down (k_mo: a co-resident grid, a grid barrier between the phases, the w2
 * stream prefetched into L2 during the up phase; same bits as variant 1,1,2 with the same flags):
 * taken by the default variant (1,1,2, no diagnostic flag) for M <= maxm. dic_moe_dec_one(maxm):
 * 0 = off, negative = the default ($DEEPINFER_MOE_ONE read once, else 8). Falls back to the two
 * launches when the grid cannot be co-resident. _count: launches of k_mo so far (tests). */
void dic_moe_dec_one(int maxm);
int dic_moe_dec_one_count(void);
int dic_moe_dec_down2_count(void); /* launches of k_mv_down2 so far (tests) */
int dic_moe_dec_broken(void); /* 1 once a variant launch failed (e.g. clusters refused): variant 0 since */
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

/* ops.h di_hc_transition fused into one launch per 64 rows (dic_mhc.cu), for
 * batch_invariant == 0: fn is the F32 [24][4d] weight (device, row stride
 * 4d). Only the fp32 sums of the mixes differ from the op sequence (another
 * fixed order, independent of M); everything after them has the sequence's
 * bits for the same mixes (k_transition2, 32 columns per CTA: docs/kernels/mhc.md). dic_hc_transition_ok says whether the shape is
 * taken (else the caller runs the sequence). Uses c->scratch. */
int dic_hc_transition_ok(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int d, int fn_n, int fn_k,
                         const void *fn, const uint16_t *xo, const uint16_t *xn, size_t ldx);
cudaError_t dic_hc_transition(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, uint16_t *R, size_t ldr,
                              int d, const float *fn, const float *scale3, const float *base, int iters, float hc_eps,
                              float rms_eps, float *mixes, float *pre, float *post, float *comb, float *pre_in,
                              const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx);

/* ops.h di_hc_head_final fused into one launch per 16 tiles (dic_mhc.cu, k_transition2 with the head's 4 mixes
 * or none), for batch_invariant == 0: sub != NULL: R = expand(post, comb, sub, R) first; fn (F32 [4][4d],
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
cudaError_t dic_engram_gate_rows(const dic_ctx *c, int M, const int64_t *rmap, const uint16_t *kv, size_t ldkv,
                                 uint16_t *R, const float *qk, int dim, int hc, float eps, float *gates);
/* The gate kernel: 1 = one CTA per (token, copy) with the loads off the serial sums (default), 0 = one warp
 * per (token, copy) (the first kernel; same bits, dic_engram_gate.cu); v < 0: back to $DEEPINFER_ENGRAM_GATE
 * (read then; unset = 1).
 * Returns the variant in force. Knob egate=V of $DEEPINFER_CUDA_SKIP_SETS. */
int dic_engram_gate_variant(int v);

#ifdef __cplusplus
}
#endif
#endif
