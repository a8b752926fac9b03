/* cu_ops.c — the CUDA twins of the dense ops.h ops (dev_ops.h): each
 * forwards to its dic_* kernel (dic.h) on the exec's stream. */
#include <stdlib.h>

#include "ops/cuda/cu_glue.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_model.h"

#define DC(x) (&cu_of(x)->dc)

static void gemm(di_exec *x, int M, const uint16_t *A, size_t lda, const di_wmat *W, int act_block, float *C32,
                 uint16_t *C16, size_t ldc) {
    dic_wmat w;
    if (M <= 0 || !cu_wmat(cu_of(x), W, &w)) return;
    cu_exec *c = cu_of(x);
    /* the decode loop's lm_head (cu_step.h di_cuda_argmax_fuse): the product and the argmax in one
     * launch; decided on the host from shapes only, so captured and plan-only steps agree */
    if (c->am_ids && C32 && C32 == c->am_logits && M == c->am_m && W->n == c->am_v && ldc == (size_t)c->am_v &&
        dic_gemm_argmax_ok(DC(x), M, A, lda, &w, ldc)) {
        int32_t *ids = c->am_ids;
        c->am_ids = NULL, c->am_taken = 1;
        CU_LAUNCH(x, dic_gemm_argmax(DC(x), M, A, lda, &w, C32, ldc, ids), "dic_gemm_am");
    } else {
        CU_LAUNCH(x, dic_gemm(DC(x), M, A, lda, &w, act_block, C32, C16, ldc), "dic_gemm");
    }
}

static void gemm_multi(di_exec *x, int M, const uint16_t *A, size_t lda, int nw, const di_wmat *W, int act_block,
                       uint16_t *const *C16, const size_t *ldc);

/* bf16 outputs (the shared expert's w1 + w3): one dic_gemm_multi, which is exactly the two dic_gemm
 * calls in mode 1 and at M > 8, and one decode launch for FP8 / FP4 at M <= 8 in fast mode (bitwise
 * the two calls, gtest_gemm_dec.c) */
static void gemm2(di_exec *x, int M, const uint16_t *A, size_t lda, const di_wmat *W1, const di_wmat *W2,
                  int act_block, float *C1_32, uint16_t *C1_16, float *C2_32, uint16_t *C2_16, size_t ldc) {
    if (C1_16 && C2_16 && !C1_32 && !C2_32 && (W1->fmt == DI_WFMT_FP8 || W1->fmt == DI_WFMT_FP4)) {
        const di_wmat W[2] = {*W1, *W2};
        uint16_t *const C16[2] = {C1_16, C2_16};
        const size_t ld[2] = {ldc, ldc};
        gemm_multi(x, M, A, lda, 2, W, act_block, C16, ld);
        return;
    }
    gemm(x, M, A, lda, W1, act_block, C1_32, C1_16, ldc);
    gemm(x, M, A, lda, W2, act_block, C2_32, C2_16, ldc);
}

static void gemm_blockdiag(di_exec *x, int M, const uint16_t *A, size_t lda, int G, const di_wmat *W, int gk,
                           int act_block, float *C32, uint16_t *C16, size_t ldc) {
    dic_wmat w[DIC_GV_MAXG];
    if (M <= 0 || G <= 0) return;
    if (G > DIC_GV_MAXG) { /* more groups than one launch takes: per group */
        for (int g = 0; g < G; g++) {
            size_t co = (size_t)g * (size_t)W[g].n;
            gemm(x, M, A + (size_t)g * gk, lda, &W[g], act_block, C32 ? C32 + co : NULL, C16 ? C16 + co : NULL, ldc);
        }
        return;
    }
    for (int g = 0; g < G; g++)
        if (!cu_wmat(cu_of(x), &W[g], &w[g])) return;
    CU_LAUNCH(x, dic_gemm_blockdiag(DC(x), M, A, lda, G, w, gk, act_block, C32, C16, ldc), "dic_gemm_blockdiag");
}

static void gemm_multi(di_exec *x, int M, const uint16_t *A, size_t lda, int nw, const di_wmat *W, int act_block,
                       uint16_t *const *C16, const size_t *ldc) {
    dic_wmat w[4];
    if (M <= 0 || nw <= 0) return;
    if (nw > 4) { /* more than one launch takes: per product */
        for (int i = 0; i < nw; i++) gemm(x, M, A, lda, &W[i], act_block, NULL, C16[i], ldc[i]);
        return;
    }
    for (int i = 0; i < nw; i++)
        if (!cu_wmat(cu_of(x), &W[i], &w[i])) return;
    CU_LAUNCH(x, dic_gemm_multi(DC(x), M, A, lda, nw, w, act_block, C16, ldc), "dic_gemm_multi");
}

static void rmsnorm(di_exec *x, int M, const uint16_t *in, size_t ldx, const float *w, int D, float eps,
                    uint16_t *out, size_t ldy) {
    if (M > 0) CU_LAUNCH(x, dic_rmsnorm(DC(x), M, in, ldx, w, D, eps, out, ldy), "dic_rmsnorm");
}

static void head_rmsnorm(di_exec *x, int M, uint16_t *q, size_t ld, int nheads, int hd, float eps) {
    if (M > 0) CU_LAUNCH(x, dic_head_rmsnorm_bf16(DC(x), M, q, ld, nheads, hd, eps), "dic_head_rmsnorm_bf16");
}

/* di_rope: pos and inv_freq are host tables; the cos/sin table is computed
 * on the host (the CPU op's own table: same bits) and staged. */
static void rope(di_exec *x, int M, uint16_t *v, size_t ld, int nheads, int hd, int rd, const int64_t *pos,
                 const float *inv_freq, int inverse) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    size_t n = (size_t)M * (size_t)(rd / 2);
    float *t = malloc(2 * n * sizeof *t);
    if (!t) {
        cu_check(c, cudaErrorMemoryAllocation, "di_rope table");
        return;
    }
    di_rope_table(M, pos, inv_freq, rd, t, t + n);
    cu_tab_begin(c);
    const float *cs = cu_tab_put(c, t, n * sizeof *t), *sn = cu_tab_put(c, t + n, n * sizeof *t);
    cu_tab_flush(c);
    free(t);
    CU_LAUNCH(x, dic_rope_tab(&c->dc, M, v, ld, nheads, hd, rd, cs, sn, inverse), "dic_rope_tab (di_rope)");
}

static void rope_tab(di_exec *x, int M, uint16_t *v, size_t ld, int nheads, int hd, int rd, const float *cs,
                     const float *sn, int inverse) {
    if (M > 0) CU_LAUNCH(x, dic_rope_tab(DC(x), M, v, ld, nheads, hd, rd, cs, sn, inverse), "dic_rope_tab");
}

static void qat_fp8(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk) {
    if (M > 0) CU_LAUNCH(x, dic_qat_fp8(DC(x), M, v, ld, n, blk), "dic_qat_fp8");
}
static void qat_fp4(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk) {
    if (M > 0) CU_LAUNCH(x, dic_qat_fp4(DC(x), M, v, ld, n, blk), "dic_qat_fp4");
}
static void qat_fp4_e4m3(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk) {
    if (M > 0) CU_LAUNCH(x, dic_qat_fp4_e4m3(DC(x), M, v, ld, n, blk), "dic_qat_fp4_e4m3");
}
static void hadamard128(di_exec *x, int M, uint16_t *v, size_t ld, int nvec) {
    if (M > 0) CU_LAUNCH(x, dic_hadamard128(DC(x), M, v, ld, nvec), "dic_hadamard128");
}

static void sparse_attn(di_exec *x, int M, const uint16_t *q, size_t ldq, int nheads, int hd,
                        const uint16_t *const *kv, size_t kv_stride, const int *n_idx, const float *sink, float scale,
                        uint16_t *out, size_t ldo) {
    if (M > 0)
        CU_LAUNCH(x, dic_sparse_attn(DC(x), M, q, ldq, nheads, hd, kv, kv_stride, n_idx, sink, scale, out, ldo),
                 "dic_sparse_attn");
}

static void hc_sinkhorn_rows(di_exec *x, int M, const float *mixes, const float *scale3, const float *base, int iters,
                             float eps, float *pre, float *post, float *comb) {
    if (M > 0)
        CU_LAUNCH(x, dic_hc_sinkhorn_rows(DC(x), M, mixes, scale3, base, iters, eps, pre, post, comb),
                 "dic_hc_sinkhorn_rows");
}
static void hc_scale_mixes(di_exec *x, int M, const uint16_t *R, size_t ldr, int hcd, float eps, const float *mixes_in,
                           int nmix, float *mixes_out) {
    if (M > 0)
        CU_LAUNCH(x, dic_hc_scale_mixes(DC(x), M, R, ldr, hcd, eps, mixes_in, nmix, mixes_out), "dic_hc_scale_mixes");
}
static void hc_collapse(di_exec *x, int M, const float *pre, const uint16_t *R, size_t ldr, int d, uint16_t *y,
                        size_t ldy) {
    if (M > 0) CU_LAUNCH(x, dic_hc_collapse(DC(x), M, pre, R, ldr, d, y, ldy), "dic_hc_collapse");
}
static void hc_expand(di_exec *x, int M, const float *post, const float *comb, const uint16_t *f, size_t ldf,
                      const uint16_t *R, uint16_t *Rout, size_t ldr, int d) {
    if (M > 0) CU_LAUNCH(x, dic_hc_expand(DC(x), M, post, comb, f, ldf, R, Rout, ldr, d), "dic_hc_expand");
}

static void swiglu(di_exec *x, int M, const uint16_t *gate, const uint16_t *up, size_t ld, int I, float limit,
                   const float *rw, uint16_t *out, size_t ldo) {
    if (M > 0) CU_LAUNCH(x, dic_swiglu(DC(x), M, gate, up, ld, I, limit, rw, out, ldo), "dic_swiglu");
}

static void embed_rep(di_exec *x, int M, const int32_t *ids, const uint16_t *table, int width, int copies,
                      uint16_t *out, size_t ldo) {
    if (M > 0 && copies > 0) CU_LAUNCH(x, dic_embed_rep(DC(x), M, ids, table, width, copies, out, ldo), "dic_embed");
}

static void embed(di_exec *x, int M, const int32_t *ids, const uint16_t *table, int width, uint16_t *out, size_t ldo) {
    if (M > 0) CU_LAUNCH(x, dic_embed(DC(x), M, ids, table, width, out, ldo), "dic_embed");
}

/* Either side may be host memory (cudaMemcpyDefault, unified addressing). */
static void copy_2d(di_exec *x, int M, const void *src, size_t lds_bytes, void *dst, size_t ldd_bytes,
                    size_t row_bytes) {
    if (M <= 0 || !row_bytes) return;
    cudaStream_t st = DC(x)->stream;
    if (M == 1) CU_LAUNCH(x, cudaMemcpyAsync(dst, src, row_bytes, cudaMemcpyDefault, st), "di_copy_2d");
    else CU_LAUNCH(x, cudaMemcpy2DAsync(dst, ldd_bytes, src, lds_bytes, row_bytes, (size_t)M, cudaMemcpyDefault, st),
                  "di_copy_2d");
}

/* In a plan step the source joins the plan and a device copy out of the
 * plan buffer is issued (capturable: no pageable memory). */
static void copy_h2d(di_exec *x, void *dst, const void *src, size_t bytes) {
    cu_exec *c = cu_of(x);
    if (bytes && cu_planning(c)) {
        const void *d = cu_tab_put(c, src, bytes);
        if (d) CU_LAUNCH(x, cudaMemcpyAsync(dst, d, bytes, cudaMemcpyDeviceToDevice, DC(x)->stream), "di_copy_h2d (plan)");
        return;
    }
    if (bytes) CU_LAUNCH(x, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, DC(x)->stream), "di_copy_h2d");
}

static void copy_d2h(di_exec *x, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    if (cu_planning(cu_of(x))) { /* a host read inside a recorded step */
        cu_check(cu_of(x), cudaErrorStreamCaptureUnsupported, "di_copy_d2h inside a planned step");
        return;
    }
    CU_LAUNCH(x, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, DC(x)->stream), "di_copy_d2h");
    CU_LAUNCH(x, cudaStreamSynchronize(DC(x)->stream), "di_copy_d2h (synchronize)");
}

static void add_bf16_f32_x(di_exec *x, float *y, const uint16_t *v, size_t n) {
    if (n) CU_LAUNCH(x, dic_add_bf16_f32(DC(x), y, v, n), "dic_add_bf16_f32");
}
static void add_f32_x(di_exec *x, float *out, const float *a, const float *b, size_t n) {
    if (n) CU_LAUNCH(x, dic_add_f32(DC(x), out, a, b, n), "dic_add_f32");
}
static void f32_to_bf16_x(di_exec *x, const float *in, uint16_t *y, size_t n) {
    if (n) CU_LAUNCH(x, dic_f32_to_bf16_n(DC(x), in, y, n), "dic_f32_to_bf16_n");
}

void cu_fill_dense_ops(di_dev_ops *t) {
    t->gemm = gemm;
    t->gemm2 = gemm2;
    t->gemm_blockdiag = gemm_blockdiag;
    t->gemm_multi = gemm_multi;
    t->rmsnorm = rmsnorm;
    t->head_rmsnorm_bf16 = head_rmsnorm;
    t->rope = rope;
    t->rope_tab = rope_tab;
    t->qat_fp8 = qat_fp8;
    t->qat_fp4 = qat_fp4;
    t->qat_fp4_e4m3 = qat_fp4_e4m3;
    t->hadamard128 = hadamard128;
    t->sparse_attn = sparse_attn;
    t->hc_sinkhorn_rows = hc_sinkhorn_rows;
    t->hc_scale_mixes = hc_scale_mixes;
    t->hc_collapse = hc_collapse;
    t->hc_expand = hc_expand;
    t->swiglu = swiglu;
    t->embed = embed;
    t->embed_rep = embed_rep;
    t->copy_2d = copy_2d;
    t->copy_h2d = copy_h2d;
    t->copy_d2h = copy_d2h;
    t->add_bf16_f32_x = add_bf16_f32_x;
    t->add_f32_x = add_f32_x;
    t->f32_to_bf16_x = f32_to_bf16_x;
}
