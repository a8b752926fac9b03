/* dispatch.c — the ops front door (ops.h): every op runs its device twin
 * when the exec carries a backend table (dev_ops.h DI_DEV_CALL), else the
 * CPU backend's implementation (src/ops/cpu/cpu_ops.h). The ops defined as
 * sequences of other ops are dispatched in sequences.c. Sections follow the
 * CPU files that implement the ops. */
#include "ops/cpu/cpu_ops.h"
#include "ops/dev_ops.h"
#include "ops/ops.h"

/* ---- src/ops/cpu/attention.c ---- */

void di_sparse_attn(di_exec *x, int M, const uint16_t *q, size_t ldq, int nheads, int hd,
                    const uint16_t *const *kv, size_t kv_stride, const int *n_idx, const float *sink, float scale,
                    uint16_t *out, size_t ldo) {
    DI_DEV_CALL(x, sparse_attn, M, q, ldq, nheads, hd, kv, kv_stride, n_idx, sink, scale, out, ldo);
    di_cpu_sparse_attn(x, M, q, ldq, nheads, hd, kv, kv_stride, n_idx, sink, scale, out, ldo);
}

/* ---- src/ops/cpu/attn_list.c ---- */

void di_attn_list(di_exec *x, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                  const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                  uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K,
                  const int *ntopk, const uint16_t **list0, size_t stride, int *n_idx) {
    DI_DEV_CALL(x, attn_list, M, pos, row_seg, seg_row0, seg_pos0, ring, win, kv, hd, ckv, page_rows, ratio, topk, K,
        ntopk, list0, stride, n_idx);
    di_cpu_attn_list(x, M, pos, row_seg, seg_row0, seg_pos0, ring, win, kv, hd, ckv, page_rows, ratio, topk, K, ntopk,
                     list0, stride, n_idx);
}

void di_attn_list_block(di_exec *x, int nseg, const int *seg_row0, const int *seg_nrows, const int *nctx,
                        uint16_t *const *ring, const uint16_t *kv, int hd, const uint16_t **list0, size_t stride,
                        int *n_idx) {
    DI_DEV_CALL(x, attn_list_block, nseg, seg_row0, seg_nrows, nctx, ring, kv, hd, list0, stride, n_idx);
    di_cpu_attn_list_block(x, nseg, seg_row0, seg_nrows, nctx, ring, kv, hd, list0, stride, n_idx);
}

/* ---- src/ops/cpu/cmp_state.c ---- */

void di_cmp_gated_rows(di_exec *x, int M, const int *row_seg, const int *emit, const int64_t *pos,
                       float *const *skv, float *const *ssc, const float *pk0, const float *ps0, const float *ape,
                       int r, int ov, int groups, int hd, float *out) {
    DI_DEV_CALL(x, cmp_gated_rows, M, row_seg, emit, pos, skv, ssc, pk0, ps0, ape, r, ov, groups, hd, out);
    di_cpu_cmp_gated_rows(x, M, row_seg, emit, pos, skv, ssc, pk0, ps0, ape, r, ov, groups, hd, out);
}

/* ---- src/ops/cpu/elem_model.c ---- */

void di_scale_bf16_f32(di_exec *x, float *v, size_t n, float scale) {
    DI_DEV_CALL(x, scale_bf16_f32, v, n, scale);
    di_cpu_scale_bf16_f32(x, v, n, scale);
}

void di_hc_pre_onehot(di_exec *x, int M, float *pre) {
    DI_DEV_CALL(x, hc_pre_onehot, M, pre);
    di_cpu_hc_pre_onehot(x, M, pre);
}

void di_hc_head_pre(di_exec *x, int M, const float *mixes, int hc, float scale0, const float *base, float eps,
                    float *pre) {
    DI_DEV_CALL(x, hc_head_pre, M, mixes, hc, scale0, base, eps, pre);
    di_cpu_hc_head_pre(x, M, mixes, hc, scale0, base, eps, pre);
}

void di_hc_mean(di_exec *x, int M, const uint16_t *R, int hc, int d, uint16_t *out, size_t ldo) {
    DI_DEV_CALL(x, hc_mean, M, R, hc, d, out, ldo);
    di_cpu_hc_mean(x, M, R, hc, d, out, ldo);
}

void di_add_bcast_bf16(di_exec *x, int M, const uint16_t *e0, int hc, int d, uint16_t *R) {
    DI_DEV_CALL(x, add_bcast_bf16, M, e0, hc, d, R);
    di_cpu_add_bcast_bf16(x, M, e0, hc, d, R);
}

void di_engram_gather_rows(di_exec *x, int M, const int64_t *ids, int64_t ids_stride, int ncols, const uint8_t *table,
                           const uint8_t *scale, int hd, uint16_t *out) {
    DI_DEV_CALL(x, engram_gather_rows, M, ids, ids_stride, ncols, table, scale, hd, out);
    di_cpu_engram_gather_rows(x, M, ids, ids_stride, ncols, table, scale, hd, out);
}

void di_add_bf16_f32_x(di_exec *x, float *y, const uint16_t *v, size_t n) {
    DI_DEV_CALL(x, add_bf16_f32_x, y, v, n);
    di_cpu_add_bf16_f32_x(x, y, v, n);
}

void di_add_f32_x(di_exec *x, float *out, const float *a, const float *b, size_t n) {
    DI_DEV_CALL(x, add_f32_x, out, a, b, n);
    di_cpu_add_f32_x(x, out, a, b, n);
}

void di_f32_to_bf16_x(di_exec *x, const float *in, uint16_t *y, size_t n) {
    DI_DEV_CALL(x, f32_to_bf16_x, in, y, n);
    di_cpu_f32_to_bf16_x(x, in, y, n);
}

/* ---- src/ops/cpu/engram_hash.c ---- */

void di_engram_hash_rows(di_exec *x, int M, const int32_t *tokens, const int32_t *map, int32_t n_ids,
                         const int64_t *consts, int n_layers, int max_ngram, int n_heads, int32_t pad_class,
                         const int64_t *pos, const int *row_seg, const int64_t *seg_pos0, const int *seg_nrows,
                         int32_t *const *ring, int ring_len, int64_t *ids) {
    DI_DEV_CALL(x, engram_hash_rows, M, tokens, map, n_ids, consts, n_layers, max_ngram, n_heads, pad_class, pos,
                row_seg, seg_pos0, seg_nrows, ring, ring_len, ids);
    di_cpu_engram_hash_rows(x, M, tokens, map, n_ids, consts, n_layers, max_ngram, n_heads, pad_class, pos, row_seg,
                            seg_pos0, seg_nrows, ring, ring_len, ids);
}

/* ---- src/ops/cpu/engram_gate.c ---- */

void di_engram_gate_rows(di_exec *x, int M, const int64_t *rmap, const uint16_t *kv, size_t ldkv, uint16_t *R,
                         const float *qk, int dim, int hc, float eps, float *kvf, float *h, float *gates) {
    DI_DEV_CALL(x, engram_gate_rows, M, rmap, kv, ldkv, R, qk, dim, hc, eps, kvf, h, gates);
    di_cpu_engram_gate_rows(x, M, rmap, kv, ldkv, R, qk, dim, hc, eps, kvf, h, gates);
}

/* ---- src/ops/cpu/gemm.c ---- */

void di_gemm(di_exec *x, int M, const uint16_t *A, size_t lda, const di_wmat *W, int act_block, float *C32,
             uint16_t *C16, size_t ldc) {
    DI_DEV_CALL(x, gemm, M, A, lda, W, act_block, C32, C16, ldc);
    di_cpu_gemm(x, M, A, lda, W, act_block, C32, C16, ldc);
}

void di_gemm2(di_exec *x, int M, const uint16_t *A, size_t lda, const di_wmat *W1, const di_wmat *W2, int act_block,
              float *C1_32, uint16_t *C1_16, float *C2_32, uint16_t *C2_16, size_t ldc) {
    DI_DEV_CALL(x, gemm2, M, A, lda, W1, W2, act_block, C1_32, C1_16, C2_32, C2_16, ldc);
    di_cpu_gemm2(x, M, A, lda, W1, W2, act_block, C1_32, C1_16, C2_32, C2_16, ldc);
}

/* ---- src/ops/cpu/gemm_grouped.c ---- */

void di_gemm_grouped(di_exec *x, int E, const di_wmat *W, const int *off, const uint16_t *A, size_t lda,
                     int act_block, uint16_t *C16, size_t ldc) {
    DI_DEV_CALL(x, gemm_grouped, E, W, off, A, lda, act_block, C16, ldc);
    di_cpu_gemm_grouped(x, E, W, off, A, lda, act_block, C16, ldc);
}

void di_gemm2_grouped(di_exec *x, int E, const di_wmat *W1, const di_wmat *W2, const int *off, const uint16_t *A,
                      size_t lda, int act_block, uint16_t *C1, uint16_t *C2, size_t ldc) {
    DI_DEV_CALL(x, gemm2_grouped, E, W1, W2, off, A, lda, act_block, C1, C2, ldc);
    di_cpu_gemm2_grouped(x, E, W1, W2, off, A, lda, act_block, C1, C2, ldc);
}

void di_swiglu_n(di_exec *x, const int *off, int E, const uint16_t *gate, const uint16_t *up, size_t ld, int I,
                 float limit, const float *rw, uint16_t *out, size_t ldo) {
    DI_DEV_CALL(x, swiglu_n, off, E, gate, up, ld, I, limit, rw, out, ldo);
    di_cpu_swiglu_n(x, off, E, gate, up, ld, I, limit, rw, out, ldo);
}

/* ---- src/ops/cpu/index_select.c ---- */

void di_index_select(di_exec *x, const di_index_select_args *a) {
    DI_DEV_CALL(x, index_select, a);
    di_cpu_index_select(x, a);
}

/* ---- src/ops/cpu/mhc.c ---- */

void di_hc_sinkhorn_rows(di_exec *x, int M, const float *mixes, const float *scale3, const float *base, int iters,
                         float eps, float *pre, float *post, float *comb) {
    DI_DEV_CALL(x, hc_sinkhorn_rows, M, mixes, scale3, base, iters, eps, pre, post, comb);
    di_cpu_hc_sinkhorn_rows(x, M, mixes, scale3, base, iters, eps, pre, post, comb);
}

void di_hc_scale_mixes(di_exec *x, int M, const uint16_t *R, size_t ldr, int hcd, float eps, const float *mixes_in,
                       int nmix, float *mixes_out) {
    DI_DEV_CALL(x, hc_scale_mixes, M, R, ldr, hcd, eps, mixes_in, nmix, mixes_out);
    di_cpu_hc_scale_mixes(x, M, R, ldr, hcd, eps, mixes_in, nmix, mixes_out);
}

void di_hc_collapse(di_exec *x, int M, const float *pre, const uint16_t *R, size_t ldr, int d, uint16_t *y,
                    size_t ldy) {
    DI_DEV_CALL(x, hc_collapse, M, pre, R, ldr, d, y, ldy);
    di_cpu_hc_collapse(x, M, pre, R, ldr, d, y, ldy);
}

void di_hc_expand(di_exec *x, int M, const float *post, const float *comb, const uint16_t *f, size_t ldf,
                  const uint16_t *R, uint16_t *Rout, size_t ldr, int d) {
    DI_DEV_CALL(x, hc_expand, M, post, comb, f, ldf, R, Rout, ldr, d);
    di_cpu_hc_expand(x, M, post, comb, f, ldf, R, Rout, ldr, d);
}

/* ---- src/ops/cpu/moe_route.c ---- */

void di_route_rows(di_exec *x, int M, float *logits, int E, float temp, const float *bias, const int32_t *tid2eid,
                   const int32_t *tokens, int k, float route_scale, float norm_eps, int normalize, int *sel0, float *w0) {
    DI_DEV_CALL(x, route_rows, M, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps, normalize, sel0,
        w0);
    di_cpu_route_rows(x, M, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps, normalize, sel0, w0);
}

void di_moe_dispatch(di_exec *x, int M, int k, const int *sel, int E, int *off, int *rows, int *inv) {
    DI_DEV_CALL(x, moe_dispatch, M, k, sel, E, off, rows, inv);
    di_cpu_moe_dispatch(x, M, k, sel, E, off, rows, inv);
}

void di_moe_gather(di_exec *x, int n_max, const int *off, int E, const int *rows, int k, const uint16_t *xn,
                   size_t ldx, int d, const float *rw, uint16_t *xe, size_t lde, float *erw) {
    DI_DEV_CALL(x, moe_gather, n_max, off, E, rows, k, xn, ldx, d, rw, xe, lde, erw);
    di_cpu_moe_gather(x, n_max, off, E, rows, k, xn, ldx, d, rw, xe, lde, erw);
}

void di_moe_combine(di_exec *x, int M, int k, const int *inv, const uint16_t *eo, size_t ldo, int d, float *y) {
    DI_DEV_CALL(x, moe_combine, M, k, inv, eo, ldo, d, y);
    di_cpu_moe_combine(x, M, k, inv, eo, ldo, d, y);
}

void di_moe_routed(di_exec *x, int M, int k, const int *sel, const float *rw, int E, const di_wmat *W1,
                   const di_wmat *W3, const di_wmat *W2, const uint16_t *xn, size_t ldx, int d, int act_block,
                   float limit, const di_moe_bufs *b, const uint16_t *shared, float *y, uint16_t *out, size_t ldo) {
    DI_DEV_CALL(x, moe_routed, M, k, sel, rw, E, W1, W3, W2, xn, ldx, d, act_block, limit, b, shared, y, out, ldo);
    di_cpu_moe_routed(x, M, k, sel, rw, E, W1, W3, W2, xn, ldx, d, act_block, limit, b, shared, y, out, ldo);
}

/* ---- src/ops/cpu/ep_plan.c ---- */

void di_ep_plan(di_exec *x, const di_ep_plan_args *a) {
    DI_DEV_CALL(x, ep_plan, a);
    di_cpu_ep_plan(x, a);
}

void di_gather_rows_bf16(di_exec *x, int n, const int *idx, const uint16_t *src, size_t lds, int d, uint16_t *dst,
                         size_t ldd) {
    DI_DEV_CALL(x, gather_rows_bf16, n, idx, src, lds, d, dst, ldd);
    di_cpu_gather_rows_bf16(x, n, idx, src, lds, d, dst, ldd);
}

/* ---- src/ops/cpu/norm.c ---- */

void di_rmsnorm(di_exec *x, int M, const uint16_t *in, size_t ldx, const float *w, int D, float eps, uint16_t *out,
                size_t ldy) {
    DI_DEV_CALL(x, rmsnorm, M, in, ldx, w, D, eps, out, ldy);
    di_cpu_rmsnorm(x, M, in, ldx, w, D, eps, out, ldy);
}

void di_head_rmsnorm_bf16(di_exec *x, int M, uint16_t *q, size_t ld, int nheads, int hd, float eps) {
    DI_DEV_CALL(x, head_rmsnorm_bf16, M, q, ld, nheads, hd, eps);
    di_cpu_head_rmsnorm_bf16(x, M, q, ld, nheads, hd, eps);
}

/* ---- src/ops/cpu/qsim.c ---- */

void di_qat_fp8(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk) {
    DI_DEV_CALL(x, qat_fp8, M, v, ld, n, blk);
    di_cpu_qat_fp8(x, M, v, ld, n, blk);
}

void di_qat_fp4(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk) {
    DI_DEV_CALL(x, qat_fp4, M, v, ld, n, blk);
    di_cpu_qat_fp4(x, M, v, ld, n, blk);
}

void di_qat_fp4_e4m3(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk) {
    DI_DEV_CALL(x, qat_fp4_e4m3, M, v, ld, n, blk);
    di_cpu_qat_fp4_e4m3(x, M, v, ld, n, blk);
}

void di_hadamard128(di_exec *x, int M, uint16_t *v, size_t ld, int nvec) {
    DI_DEV_CALL(x, hadamard128, M, v, ld, nvec);
    di_cpu_hadamard128(x, M, v, ld, nvec);
}

/* ---- src/ops/cpu/rope.c ---- */

void di_rope(di_exec *x, int M, uint16_t *v, size_t ld, int nheads, int hd, int rd, const int64_t *pos,
             const float *inv_freq, int inverse) {
    DI_DEV_CALL(x, rope, M, v, ld, nheads, hd, rd, pos, inv_freq, inverse);
    di_cpu_rope(x, M, v, ld, nheads, hd, rd, pos, inv_freq, inverse);
}

void di_rope_tab(di_exec *x, int M, uint16_t *v, size_t ld, int nheads, int hd, int rd, const float *cs, const float *sn,
                 int inverse) {
    DI_DEV_CALL(x, rope_tab, M, v, ld, nheads, hd, rd, cs, sn, inverse);
    di_cpu_rope_tab(x, M, v, ld, nheads, hd, rd, cs, sn, inverse);
}

/* ---- src/ops/cpu/rows.c ---- */

void di_embed(di_exec *x, int M, const int32_t *ids, const uint16_t *table, int width, uint16_t *out, size_t ldo) {
    DI_DEV_CALL(x, embed, M, ids, table, width, out, ldo);
    di_cpu_embed(x, M, ids, table, width, out, ldo);
}

void di_embed_rep(di_exec *x, int M, const int32_t *ids, const uint16_t *table, int width, int copies, uint16_t *out,
                  size_t ldo) {
    DI_DEV_CALL(x, embed_rep, M, ids, table, width, copies, out, ldo);
    di_cpu_embed_rep(x, M, ids, table, width, copies, out, ldo);
}

void di_copy_2d(di_exec *x, int M, const void *src, size_t lds_bytes, void *dst, size_t ldd_bytes, size_t row_bytes) {
    DI_DEV_CALL(x, copy_2d, M, src, lds_bytes, dst, ldd_bytes, row_bytes);
    di_cpu_copy_2d(x, M, src, lds_bytes, dst, ldd_bytes, row_bytes);
}

void di_fill_f32(di_exec *x, float *p, size_t n, float v) {
    DI_DEV_CALL(x, fill_f32, p, n, v);
    di_cpu_fill_f32(x, p, n, v);
}

void di_scatter_rows(di_exec *x, int n, const int *src_row, const uint16_t *src, size_t lds, uint16_t *const *dst,
                     int width) {
    DI_DEV_CALL(x, scatter_rows, n, src_row, src, lds, dst, width);
    di_cpu_scatter_rows(x, n, src_row, src, lds, dst, width);
}

void di_copy_h2d(di_exec *x, void *dst, const void *src, size_t bytes) {
    DI_DEV_CALL(x, copy_h2d, dst, src, bytes);
    di_cpu_copy_h2d(x, dst, src, bytes);
}

void di_copy_d2h(di_exec *x, void *dst, const void *src, size_t bytes) {
    DI_DEV_CALL(x, copy_d2h, dst, src, bytes);
    di_cpu_copy_d2h(x, dst, src, bytes);
}

/* ---- src/ops/cpu/select.c ---- */

void di_swiglu(di_exec *x, int M, const uint16_t *gate, const uint16_t *up, size_t ld, int I, float limit,
               const float *rw, uint16_t *out, size_t ldo) {
    DI_DEV_CALL(x, swiglu, M, gate, up, ld, I, limit, rw, out, ldo);
    di_cpu_swiglu(x, M, gate, up, ld, I, limit, rw, out, ldo);
}
