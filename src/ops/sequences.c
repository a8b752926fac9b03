/* sequences.c — the ops that ops.h defines as a sequence of other ops
 * (the query and kv post-processing and projection, decode attention, the
 * block-diagonal and multi-output GEMMs, the router, the mHC transition and
 * head). Each runs its device twin when the exec carries a backend table (a
 * backend may fuse the sequence, dev_ops.h); otherwise, and wherever a
 * backend does not fuse (it calls the *_seq functions), the sequence itself,
 * every op of it dispatched as usual (dispatch.c). Identical on every
 * backend by construction: the CPU's results are these sequences. */
#include "ops/dev_ops.h"
#include "ops/ops.h"

#define HC 4 /* mHC copies (ops.h) */

void di_route_gate_seq(di_exec *x, int M, const uint16_t *xn, size_t ldx, const di_wmat *gate, float *logits, int E,
                       float temp, const float *bias, const int32_t *tid2eid, const int32_t *tokens, int k,
                       float route_scale, float norm_eps, int normalize, int *sel, float *w) {
    di_gemm(x, M, xn, ldx, gate, 0, logits, NULL, (size_t)E);
    di_route_rows(x, M, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps, normalize, sel, w);
}

void di_hc_transition_seq(di_exec *x, int M, const uint16_t *sub, size_t ldsub, uint16_t *R, size_t ldr, int d,
                          const di_wmat *fn, const float *scale3, const float *base, int iters, float hc_eps,
                          float rms_eps, float *mixes, float *pre, float *post, float *comb, float *pre_in,
                          const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx) {
    int hcd = HC * d;
    if (sub) di_hc_expand(x, M, post, comb, sub, ldsub, R, R, ldr, d);
    di_gemm(x, M, R, ldr, fn, 0, mixes, NULL, (size_t)fn->n);
    di_hc_scale_mixes(x, M, R, ldr, hcd, rms_eps, mixes, fn->n, mixes);
    di_hc_sinkhorn_rows(x, M, mixes, scale3, base, iters, hc_eps, pre, post, comb);
    di_hc_collapse(x, M, pre_in ? pre_in : pre, R, ldr, d, xo, ldx);
    if (pre_in) di_copy_2d(x, 1, pre, 0, pre_in, 0, sizeof(float) * HC * (size_t)M);
    di_rmsnorm(x, M, xo, ldx, norm_w, d, norm_eps, xn, ldx);
}

void di_hc_head_final_seq(di_exec *x, int M, const uint16_t *sub, size_t ldsub, const float *post, const float *comb,
                          uint16_t *R, size_t ldr, int d, const di_wmat *fn, float scale0, const float *base,
                          float hc_eps, float rms_eps, float *mixes, float *pre, const float *norm_w, float norm_eps,
                          uint16_t *xo, uint16_t *xn, size_t ldx) {
    if (sub) di_hc_expand(x, M, post, comb, sub, ldsub, R, R, ldr, d);
    if (fn) {
        di_gemm(x, M, R, ldr, fn, 0, mixes, NULL, (size_t)fn->n);
        di_hc_scale_mixes(x, M, R, ldr, HC * d, rms_eps, mixes, fn->n, mixes);
        di_hc_head_pre(x, M, mixes, fn->n, scale0, base, hc_eps, pre);
    }
    di_hc_collapse(x, M, pre, R, ldr, d, xo, ldx);
    di_rmsnorm(x, M, xo, ldx, norm_w, d, norm_eps, xn, ldx);
}

void di_gemm_blockdiag(di_exec *x, int M, const uint16_t *A, size_t lda, int G, const di_wmat *W, int gk, int act_block,
                       float *C32, uint16_t *C16, size_t ldc) {
    DI_DEV_CALL(x, gemm_blockdiag, M, A, lda, G, W, gk, act_block, C32, C16, ldc);
    for (int g = 0; g < G; g++) {
        size_t co = (size_t)g * (size_t)W[g].n;
        di_gemm(x, M, A + (size_t)g * (size_t)gk, lda, &W[g], act_block, C32 ? C32 + co : NULL, C16 ? C16 + co : NULL,
                ldc);
    }
}

void di_gemm_multi(di_exec *x, int M, const uint16_t *A, size_t lda, int nw, const di_wmat *W, int act_block,
                   uint16_t *const *C16, const size_t *ldc) {
    DI_DEV_CALL(x, gemm_multi, M, A, lda, nw, W, act_block, C16, ldc);
    for (int w = 0; w < nw; w++) di_gemm(x, M, A, lda, &W[w], act_block, NULL, C16[w], ldc[w]);
}

void di_q_post(di_exec *x, int M, uint16_t *q, size_t ld, int nheads, int hd, int norm, float eps, int rd,
               const float *cs, const float *sn) {
    DI_DEV_CALL(x, q_post, M, q, ld, nheads, hd, norm, eps, rd, cs, sn);
    if (norm) di_head_rmsnorm_bf16(x, M, q, ld, nheads, hd, eps);
    di_rope_tab(x, M, q, ld, nheads, hd, rd, cs, sn, 0);
}

void di_q_proj(di_exec *x, int M, const uint16_t *qr, size_t ldqr, const float *q_norm, float eps, uint16_t *qrn,
               size_t ldqrn, const di_wmat *W, int act_block, uint16_t *q, size_t ldq, int nheads, int hd, int norm,
               int rd, const float *cs, const float *sn) {
    DI_DEV_CALL(x, q_proj, M, qr, ldqr, q_norm, eps, qrn, ldqrn, W, act_block, q, ldq, nheads, hd, norm, rd, cs, sn);
    di_rmsnorm(x, M, qr, ldqr, q_norm, W->k, eps, qrn, ldqrn);
    di_gemm(x, M, qrn, ldqrn, W, act_block, NULL, q, ldq);
    di_q_post(x, M, q, ldq, nheads, hd, norm, eps, rd, cs, sn);
}

void di_attn_kv_post(di_exec *x, int M, uint16_t *kv, size_t ld, const float *w, int D, float eps, int rd,
                     const float *cs, const float *sn, int qn, int qblk, int n, const int *src_row,
                     uint16_t *const *dst) {
    DI_DEV_CALL(x, attn_kv_post, M, kv, ld, w, D, eps, rd, cs, sn, qn, qblk, n, src_row, dst);
    di_rmsnorm(x, M, kv, ld, w, D, eps, kv, ld);
    di_rope_tab(x, M, kv, ld, 1, D, rd, cs, sn, 0);
    di_qat_fp8(x, M, kv, ld, qn, qblk);
    if (n > 0) di_scatter_rows(x, n, src_row, kv, ld, dst, D);
}

void di_attn_dec(di_exec *x, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                 const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                 uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K, const int *ntopk,
                 const uint16_t **list, size_t stride, int *n_idx, const int64_t *seg_lo, const uint16_t *q, size_t ldq,
                 int nheads, const float *sink, float scale, int rd, const float *cs, const float *sn, uint16_t *out,
                 size_t ldo) {
    DI_DEV_CALL(x, attn_dec, M, pos, row_seg, seg_row0, seg_pos0, ring, win, kv, hd, ckv, page_rows, ratio, topk, K,
        ntopk, list, stride, n_idx, seg_lo, q, ldq, nheads, sink, scale, rd, cs, sn, out, ldo);
    di_attn_list(x, M, pos, row_seg, seg_row0, seg_pos0, ring, win, kv, hd, ckv, page_rows, ratio, topk, K, ntopk,
                 list, stride, n_idx);
    for (int m = 0; seg_lo && m < M; m++) { /* the floor (the CPU's list is host memory) */
        int64_t p = pos[m], t0 = p - win + 1 > 0 ? p - win + 1 : 0, lo = seg_lo[row_seg[m]];
        for (int64_t t = t0; t < lo && t <= p; t++) list[(size_t)m * stride + (size_t)(t - t0)] = NULL;
    }
    di_sparse_attn(x, M, q, ldq, nheads, hd, list, stride, n_idx, sink, scale, out, ldo);
    di_rope_tab(x, M, out, ldo, nheads, hd, rd, cs, sn, 1);
}

void di_route_gate(di_exec *x, int M, const uint16_t *xn, size_t ldx, const di_wmat *gate, float *logits, int E,
                   float temp, const float *bias, const int32_t *tid2eid, const int32_t *tokens, int k,
                   float route_scale, float norm_eps, int normalize, int *sel, float *w) {
    DI_DEV_CALL(x, route_gate, M, xn, ldx, gate, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps,
        normalize, sel, w);
    di_route_gate_seq(x, M, xn, ldx, gate, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps, normalize,
                      sel, w);
}

void di_hc_transition(di_exec *x, int M, const uint16_t *sub, size_t ldsub, uint16_t *R, size_t ldr, int d,
                      const di_wmat *fn, const float *scale3, const float *base, int iters, float hc_eps,
                      float rms_eps, float *mixes, float *pre, float *post, float *comb, float *pre_in,
                      const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx) {
    DI_DEV_CALL(x, hc_transition, M, sub, ldsub, R, ldr, d, fn, scale3, base, iters, hc_eps, rms_eps, mixes, pre,
        post, comb, pre_in, norm_w, norm_eps, xo, xn, ldx);
    di_hc_transition_seq(x, M, sub, ldsub, R, ldr, d, fn, scale3, base, iters, hc_eps, rms_eps, mixes, pre, post,
                         comb, pre_in, norm_w, norm_eps, xo, xn, ldx);
}

void di_hc_head_final(di_exec *x, int M, const uint16_t *sub, size_t ldsub, const float *post, const float *comb,
                      uint16_t *R, size_t ldr, int d, const di_wmat *fn, float scale0, const float *base, float hc_eps,
                      float rms_eps, float *mixes, float *pre, const float *norm_w, float norm_eps, uint16_t *xo,
                      uint16_t *xn, size_t ldx) {
    DI_DEV_CALL(x, hc_head_final, M, sub, ldsub, post, comb, R, ldr, d, fn, scale0, base, hc_eps, rms_eps, mixes, pre,
        norm_w, norm_eps, xo, xn, ldx);
    di_hc_head_final_seq(x, M, sub, ldsub, post, comb, R, ldr, d, fn, scale0, base, hc_eps, rms_eps, mixes, pre,
                         norm_w, norm_eps, xo, xn, ldx);
}
