/* cu_ops_model.c — the CUDA twins of the device-shaped model ops (ops.h,
 * second half; kernels in dic_model.h). Arguments ops.h calls host tables
 * are staged and copied to the device before each launch (cu_tab_*);
 * page tables (host arrays of device page addresses) are copied deeply,
 * as many pages as the op can reach. First version: one synchronous-source
 * copy per op (docs/cuda-backend.md §6 says what a graph needs). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cu_glue.h"
#include "ops/cuda/dic_model.h"

#define DC(x) (&cu_of(x)->dc)

static int nseg_of(const int *row_seg, int M) {
    int n = 0;
    for (int m = 0; m < M; m++)
        if (row_seg[m] + 1 > n) n = row_seg[m] + 1;
    return n;
}

static void fill_f32(di_exec *x, float *p, size_t n, float v) {
    if (n) CU_LAUNCH(x, dic_fill_f32(DC(x), p, n, v), "dic_fill_f32");
}

static void scatter_rows(di_exec *x, int n, const int *src_row, const uint16_t *src, size_t lds, uint16_t *const *dst,
                         int width) {
    if (n <= 0) return;
    cu_exec *c = cu_of(x);
    cu_tab_begin(c);
    const int *dsr = cu_tab_put(c, src_row, (size_t)n * sizeof *src_row);
    uint16_t *const *ddst = cu_tab_put(c, dst, (size_t)n * sizeof *dst);
    if (ddst && cu_planning(c)) { /* padded rows (NULL, compressor.c): into the sink, one row each */
        uint16_t **h = (uint16_t **)(c->plan->host[c->plan->cur] + ((const unsigned char *)ddst - c->dtab));
        if ((size_t)n * (size_t)width * 2 > c->plan->sink_bytes)
            cu_check(c, cudaErrorInvalidValue, "step plan: padded scatter rows exceed the sink");
        else
            for (int i = 0; i < n; i++)
                if (!h[i]) h[i] = (uint16_t *)c->plan->sink + (size_t)i * (size_t)width;
    }
    cu_tab_flush(c);
    CU_LAUNCH(x, dic_scatter_rows(&c->dc, n, dsr, src, lds, ddst, width), "dic_scatter_rows");
}

/* The device tables of an entry list (di_attn_list's host tables staged). */
typedef struct list_tabs {
    const int64_t *pos, *pos0, *lo; /* lo: the window floor (seg_lo), NULL = none */
    const int *seg, *row0, *pr;
    uint16_t *const *ring;
    uint16_t **const *ckv;
} list_tabs;

static int stage_list(cu_exec *c, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                      const int64_t *seg_pos0, uint16_t *const *ring, uint16_t **const *ckv, const int *page_rows,
                      int ratio, const int64_t *seg_lo, list_tabs *d) {
    int ns = nseg_of(row_seg, M);
    uint16_t ***dckv = calloc((size_t)ns, sizeof *dckv);
    int64_t *rows = calloc((size_t)ns, sizeof *rows);
    if (!dckv || !rows) {
        free(dckv), free(rows);
        cu_check(c, cudaErrorMemoryAllocation, "di_attn_list tables");
        return -1;
    }
    cu_tab_begin(c);
    if (ratio > 0 && ckv) {
        for (int m = 0; m < M; m++) {
            int64_t v = (pos[m] + 1) / ratio; /* rows the row can see */
            if (v > rows[row_seg[m]]) rows[row_seg[m]] = v;
        }
        for (int s = 0; s < ns; s++) {
            int64_t np = ckv[s] ? (rows[s] + page_rows[s] - 1) / page_rows[s] : 0;
            size_t res = ckv[s] ? cu_tab_pages_bound(c, rows[s], page_rows[s], ratio) : 0;
            dckv[s] = cu_tab_put_res(c, np ? ckv[s] : NULL, (size_t)np * sizeof(uint16_t *), res * sizeof(uint16_t *));
        }
    }
    d->pos = cu_tab_put(c, pos, (size_t)M * sizeof *pos);
    d->seg = cu_tab_put(c, row_seg, (size_t)M * sizeof *row_seg);
    d->row0 = cu_tab_put(c, seg_row0, (size_t)ns * sizeof *seg_row0);
    d->pos0 = cu_tab_put(c, seg_pos0, (size_t)ns * sizeof *seg_pos0);
    d->ring = cu_tab_put(c, ring, (size_t)ns * sizeof *ring);
    d->ckv = ratio > 0 && ckv ? cu_tab_put(c, dckv, (size_t)ns * sizeof *dckv) : NULL;
    d->pr = cu_tab_put(c, page_rows, (size_t)ns * sizeof *page_rows);
    d->lo = cu_tab_put(c, seg_lo, (size_t)ns * sizeof *seg_lo);
    cu_tab_flush(c);
    free(dckv), free(rows);
    return 0;
}

static void attn_list(di_exec *x, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                      const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                      uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K,
                      const int *ntopk, const uint16_t **list, size_t stride, int *n_idx) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    list_tabs d;
    if (stage_list(c, M, pos, row_seg, seg_row0, seg_pos0, ring, ckv, page_rows, ratio, NULL, &d)) return;
    CU_LAUNCH(x,
             dic_attn_list(&c->dc, M, d.pos, d.seg, d.row0, d.pos0, d.ring, win, kv, hd, d.ckv, d.pr, ratio, topk, K,
                           ntopk, list, stride, n_idx),
             "dic_attn_list");
}

/* A bound on every row's entry count (di_attn_list's n) for the fused kernels' grid and scratch: the
 * window, plus the top-k width (indexed) or the most compressed rows a row sees (every visible row);
 * in a plan step the positions below pos_bound (a replayed graph's rows). Never more than the list
 * stride. The rows' bits do not depend on it (dic_model.h dic_attn_dec). */
static size_t attn_dec_entries(const cu_exec *c, int M, const int64_t *pos, int win, int ratio, const int *topk,
                               int K, size_t stride) {
    int64_t n = win;
    if (ratio > 0 && topk) {
        n += K;
    } else if (ratio > 0) {
        int64_t p = 0;
        for (int m = 0; m < M; m++)
            if (pos[m] > p) p = pos[m];
        if (cu_planning(c) && c->plan->pos_bound > p) p = c->plan->pos_bound;
        n += (p + 1) / ratio;
    }
    return n > 0 && (size_t)n < stride ? (size_t)n : stride;
}

/* The fused kernels in both modes at every M, the window floor (seg_lo) included
 * (docs/determinism.md §7); the op sequence (the list, dic_attn_floor, sparse attention, the
 * rotation) only for shapes the kernels do not take. */
static void attn_dec(di_exec *x, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                     const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                     uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K,
                     const int *ntopk, const uint16_t **list, size_t stride, int *n_idx, const int64_t *seg_lo,
                     const uint16_t *q, size_t ldq, int nheads, const float *sink, float scale, int rd, const float *cs,
                     const float *sn, uint16_t *out, size_t ldo) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    const size_t nmax = attn_dec_entries(c, M, pos, win, ratio, topk, K, stride);
    if (!dic_attn_dec_ok(&c->dc, M, nheads, hd, rd, nmax, ldo)) {
        di_attn_list(x, M, pos, row_seg, seg_row0, seg_pos0, ring, win, kv, hd, ckv, page_rows, ratio, topk, K,
                     ntopk, list, stride, n_idx);
        if (seg_lo) {
            int ns = nseg_of(row_seg, M);
            cu_tab_begin(c);
            const int64_t *dpos = cu_tab_put(c, pos, (size_t)M * sizeof *pos);
            const int *dseg = cu_tab_put(c, row_seg, (size_t)M * sizeof *row_seg);
            const int64_t *dlo = cu_tab_put(c, seg_lo, (size_t)ns * sizeof *seg_lo);
            cu_tab_flush(c);
            CU_LAUNCH(x, dic_attn_floor(&c->dc, M, dpos, dseg, dlo, win, list, stride), "dic_attn_floor");
        }
        di_sparse_attn(x, M, q, ldq, nheads, hd, list, stride, n_idx, sink, scale, out, ldo);
        di_rope_tab(x, M, out, ldo, nheads, hd, rd, cs, sn, 1);
        return;
    }
    list_tabs d;
    if (stage_list(c, M, pos, row_seg, seg_row0, seg_pos0, ring, ckv, page_rows, ratio, seg_lo, &d)) return;
    CU_LAUNCH(x,
             dic_attn_dec_floored(&c->dc, M, d.pos, d.seg, d.row0, d.pos0, d.ring, win, kv, hd, d.ckv, d.pr, ratio,
                                  topk, K, ntopk, nmax, n_idx, d.lo, q, ldq, nheads, sink, scale, rd, cs, sn, out,
                                  ldo),
             "dic_attn_dec");
}

/* The kv post-processing: one kernel in both modes where it applies (the op sequence's bits,
 * docs/determinism.md §7), else the op sequence. */
static void attn_kv_post(di_exec *x, int M, uint16_t *kv, size_t ld, const float *w, int D, float eps, int rd,
                         const float *cs, const float *sn, int qn, int qblk, int n, const int *src_row,
                         uint16_t *const *dst) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    int ok = dic_attn_kv_post_ok(&c->dc, M, kv, ld, D, rd, qn, qblk);
    for (int i = 0; i < n && ok; i++) ok = ((uintptr_t)dst[i] & 15) == 0; /* 16-byte row stores */
    if (!ok) {
        di_rmsnorm(x, M, kv, ld, w, D, eps, kv, ld);
        di_rope_tab(x, M, kv, ld, 1, D, rd, cs, sn, 0);
        di_qat_fp8(x, M, kv, ld, qn, qblk);
        if (n > 0) di_scatter_rows(x, n, src_row, kv, ld, dst, D);
        return;
    }
    const int *dsr = NULL;
    uint16_t *const *ddst = NULL;
    if (n > 0) {
        cu_tab_begin(c);
        dsr = cu_tab_put(c, src_row, (size_t)n * sizeof *src_row);
        ddst = cu_tab_put(c, dst, (size_t)n * sizeof *dst);
        cu_tab_flush(c);
    }
    CU_LAUNCH(x, dic_attn_kv_post(&c->dc, M, kv, ld, w, D, eps, rd, cs, sn, qn, qblk, n, dsr, ddst),
             "dic_attn_kv_post");
}

/* The query post-processing: one kernel in both modes at every M (row-invariant, docs/determinism.md §7)
 * where dic_q_post_ok (hd <= 512, the kernel's alignment), else the op sequence. */
static void q_post(di_exec *x, int M, uint16_t *q, size_t ld, int nheads, int hd, int norm, float eps, int rd,
                   const float *cs, const float *sn) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    if (!dic_q_post_ok(&c->dc, M, q, ld, hd, rd)) {
        if (norm) di_head_rmsnorm_bf16(x, M, q, ld, nheads, hd, eps);
        di_rope_tab(x, M, q, ld, nheads, hd, rd, cs, sn, 0);
        return;
    }
    CU_LAUNCH(x, dic_q_post(&c->dc, M, q, ld, nheads, hd, norm, eps, rd, cs, sn), "dic_q_post");
}

/* The query projection: the op sequence in both modes (docs/kernels/attention-decode.md §5). */
static void q_proj(di_exec *x, int M, const uint16_t *qr, size_t ldqr, const float *q_norm, float eps, uint16_t *qrn,
                   size_t ldqrn, const di_wmat *W, int act_block, uint16_t *q, size_t ldq, int nheads, int hd, int norm,
                   int rd, const float *cs, const float *sn) {
    if (M <= 0) return;
    di_rmsnorm(x, M, qr, ldqr, q_norm, W->k, eps, qrn, ldqrn);
    di_gemm(x, M, qrn, ldqrn, W, act_block, NULL, q, ldq);
    di_q_post(x, M, q, ldq, nheads, hd, norm, eps, rd, cs, sn);
}

static void attn_list_block(di_exec *x, int nseg, const int *seg_row0, const int *seg_nrows, const int *nctx,
                            uint16_t *const *ring, const uint16_t *kv, int hd, const uint16_t **list, size_t stride,
                            int *n_idx) {
    if (nseg <= 0) return;
    cu_exec *c = cu_of(x);
    size_t n = (size_t)nseg;
    cu_tab_begin(c);
    const int *a = cu_tab_put(c, seg_row0, n * sizeof(int)), *b = cu_tab_put(c, seg_nrows, n * sizeof(int));
    const int *d = cu_tab_put(c, nctx, n * sizeof(int));
    uint16_t *const *r = cu_tab_put(c, ring, n * sizeof *ring);
    cu_tab_flush(c);
    CU_LAUNCH(x, dic_attn_list_block(&c->dc, nseg, a, b, d, r, kv, hd, list, stride, n_idx), "dic_attn_list_block");
}

static void cmp_gated_rows(di_exec *x, int M, const int *row_seg, const int *emit, const int64_t *pos,
                           float *const *skv, float *const *ssc, const float *pk, const float *ps, const float *ape,
                           int ratio, int overlap, int groups, int hd, float *out) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    size_t ns = (size_t)nseg_of(row_seg, M), m = (size_t)M;
    cu_tab_begin(c);
    const int *dseg = cu_tab_put(c, row_seg, m * sizeof(int)), *demit = cu_tab_put(c, emit, m * sizeof(int));
    const int64_t *dpos = cu_tab_put(c, pos, m * sizeof(int64_t));
    float *const *dkv = cu_tab_put(c, skv, ns * sizeof *skv), *const *dsc = cu_tab_put(c, ssc, ns * sizeof *ssc);
    cu_tab_flush(c);
    CU_LAUNCH(x, dic_cmp_gated_rows(&c->dc, M, dseg, demit, dpos, dkv, dsc, pk, ps, ape, ratio, overlap, groups, hd,
                                    out),
             "dic_cmp_gated_rows");
}

static void index_select(di_exec *x, const di_index_select_args *a) {
    if (a->M <= 0) return;
    cu_exec *c = cu_of(x);
    size_t m = (size_t)a->M;
    uint16_t ***dk = calloc(m, sizeof *dk);
    if (!dk) {
        cu_check(c, cudaErrorMemoryAllocation, "di_index_select tables");
        return;
    }
    di_index_select_args d = *a;
    cu_tab_begin(c);
    for (size_t i = 0; i < m; i++) { /* keys j < kcap exist and are read */
        int64_t np = (a->kcap[i] + a->page_rows[i] - 1) / a->page_rows[i];
        size_t res = cu_tab_pages_bound(c, a->kcap[i], a->page_rows[i], 1);
        dk[i] = cu_tab_put_res(c, np > 0 ? a->kpages[i] : NULL, np > 0 ? (size_t)np * sizeof(uint16_t *) : 0,
                               res * sizeof(uint16_t *));
    }
    d.kpages = cu_tab_put(c, dk, m * sizeof *dk);
    d.page_rows = cu_tab_put(c, a->page_rows, m * sizeof(int));
    d.nvis = cu_tab_put(c, a->nvis, m * sizeof(int64_t));
    d.kcap = cu_tab_put(c, a->kcap, m * sizeof(int64_t));
    cu_tab_flush(c);
    free(dk);
    d.iscore = NULL; /* the device op scores into dic scratch */
    d.bscore = NULL;
    CU_LAUNCH(x, dic_index_select(&c->dc, &d), "dic_index_select");
}

static void route_rows(di_exec *x, int M, float *logits, int E, float temp, const float *bias, const int32_t *tid2eid,
                       const int32_t *tokens, int k, float route_scale, float norm_eps, int normalize, int *sel,
                       float *w) {
    if (M > 0)
        CU_LAUNCH(x,
                 dic_route_rows(DC(x), M, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps, normalize,
                                sel, w),
                 "dic_route_rows");
}

/* The router (docs/kernels/router.md, docs/determinism.md §7): one launch at M <= 8 in both modes
 * (dic_route_gate_ok: BF16 gate, E <= 1024, k <= 32, no cluster split of K); batch-invariant mode
 * elsewhere: that launch's logits (dic_route_logits, any M) + dic_route_rows, so a token's logits, ids and
 * weights are the same bits at every M; fast mode above M = 8 and the shapes neither kernel takes: the op
 * sequence, each op through its own launch site ("dic_gemm", "dic_route_rows"). */
static void route_gate(di_exec *x, int M, const uint16_t *xn, size_t ldx, const di_wmat *gate, float *logits, int E,
                       float temp, const float *bias, const int32_t *tid2eid, const int32_t *tokens, int k,
                       float route_scale, float norm_eps, int normalize, int *sel, float *w) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    dic_wmat gw;
    memset(&gw, 0, sizeof gw);
    if (gate->fmt == DI_WFMT_BF16 && !gate->raw_fp8_block && gate->n == E && cu_wmat(c, gate, &gw)) {
        if (dic_route_gate_ok(&c->dc, M, xn, ldx, &gw, E, k, tid2eid, tokens)) {
            CU_LAUNCH(x,
                     dic_route_gate(&c->dc, M, xn, ldx, &gw, logits, E, temp, bias, tid2eid, tokens, k, route_scale,
                                    norm_eps, normalize, sel, w),
                     "dic_route_gate");
            return;
        }
        if (c->dc.batch_invariant && dic_route_logits_ok(&c->dc, M, xn, ldx, &gw)) {
            CU_LAUNCH(x, dic_route_logits(&c->dc, M, xn, ldx, &gw, logits), "dic_route_logits");
            di_route_rows(x, M, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps, normalize, sel, w);
            return;
        }
    }
    di_route_gate_seq(x, M, xn, ldx, gate, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps, normalize,
                      sel, w);
}

static void moe_dispatch(di_exec *x, int M, int k, const int *sel, int E, int *off, int *rows, int *inv) {
    if (M > 0) CU_LAUNCH(x, dic_moe_dispatch_inv(DC(x), M, k, sel, E, off, rows, inv), "dic_moe_dispatch_inv");
}

/* The grouped ops below carry no row bound; the MoE always gathers first,
 * so the gather's n_max is the launch bound of the ops that follow (per
 * thread: rank threads run their MoEs at once, cu_exec.c). */
static _Thread_local int g_moe_rows_max;

static void moe_gather(di_exec *x, int n_max, const int *off, int E, const int *rows, int k, const uint16_t *xn,
                       size_t ldx, int d, const float *rw, uint16_t *xe, size_t lde, float *erw) {
    g_moe_rows_max = n_max;
    if (n_max > 0)
        CU_LAUNCH(x, dic_moe_gather(DC(x), n_max, off, E, rows, k, xn, ldx, d, rw, xe, lde, erw), "dic_moe_gather");
}

static dic_wmat *wmats(cu_exec *c, int E, const di_wmat *W) {
    dic_wmat *v = malloc((size_t)E * sizeof *v);
    if (!v) {
        cu_check(c, cudaErrorMemoryAllocation, "grouped GEMM weights");
        return NULL;
    }
    for (int e = 0; e < E; e++)
        if (!cu_wmat(c, &W[e], &v[e])) {
            free(v);
            return NULL;
        }
    return v;
}

static void gemm_grouped(di_exec *x, int E, const di_wmat *W, const int *off, const uint16_t *A, size_t lda,
                         int act_block, uint16_t *C16, size_t ldc) {
    cu_exec *c = cu_of(x);
    dic_wmat *w = wmats(c, E, W);
    if (!w) return;
    CU_LAUNCH(x, dic_gemm_grouped_seg(&c->dc, E, w, off, g_moe_rows_max, A, lda, act_block, C16, ldc),
             "dic_gemm_grouped_seg");
    free(w);
}

static void gemm2_grouped(di_exec *x, int E, const di_wmat *W1, const di_wmat *W2, const int *off, const uint16_t *A,
                          size_t lda, int act_block, uint16_t *C1, uint16_t *C2, size_t ldc) {
    cu_exec *c = cu_of(x);
    dic_wmat *w1 = wmats(c, E, W1), *w2 = w1 ? wmats(c, E, W2) : NULL;
    if (w1 && w2)
        CU_LAUNCH(x, dic_gemm2_grouped_seg(&c->dc, E, w1, w2, off, g_moe_rows_max, A, lda, act_block, C1, C2, ldc),
                 "dic_gemm2_grouped_seg");
    free(w1), free(w2);
}

static void swiglu_n(di_exec *x, const int *off, int E, const uint16_t *gate, const uint16_t *up, size_t ld, int I,
                     float limit, const float *rw, uint16_t *out, size_t ldo) {
    CU_LAUNCH(x, dic_swiglu_n(DC(x), off, E, g_moe_rows_max, gate, up, ld, I, limit, rw, out, ldo), "dic_swiglu_n");
}

static void ep_plan(di_exec *x, const di_ep_plan_args *a) {
    if (a->M > 0) CU_LAUNCH(x, dic_ep_plan(DC(x), a), "dic_ep_plan");
}

static void gather_rows_bf16(di_exec *x, int n, const int *idx, const uint16_t *src, size_t lds, int d, uint16_t *dst,
                             size_t ldd) {
    if (n > 0) CU_LAUNCH(x, dic_gather_rows_bf16(DC(x), n, idx, src, lds, d, dst, ldd), "dic_gather_rows_bf16");
}

static void moe_combine(di_exec *x, int M, int k, const int *inv, const uint16_t *eo, size_t ldo, int d, float *y) {
    if (M > 0) CU_LAUNCH(x, dic_moe_combine_inv(DC(x), M, k, inv, eo, ldo, d, y), "dic_moe_combine_inv");
}

static void join_lines(void *x) { cu_lines_join((di_exec *)x); }

/* Both modes, M * k <= DIC_MOE_DEC_MAX_ROWS, shapes dic_moe_routed_dec takes: its two launches (the
 * M-free split of the grouped GEMMs, so in batch-invariant mode the op sequence's bits for every row:
 * docs/kernels/moe-decode.md §2). Else the op sequence of ops.h. */
static void moe_routed(di_exec *x, int M, int k, const int *sel, const float *rw, int E, const di_wmat *W1,
                       const di_wmat *W3, const di_wmat *W2, const uint16_t *xn, size_t ldx, int d, int act_block,
                       float limit, const di_moe_bufs *b, const uint16_t *shared, float *y, uint16_t *out,
                       size_t ldo) {
    if (M <= 0) {
        cu_lines_join(x);
        return;
    }
    cu_exec *c = cu_of(x);
    const int I = W1[0].n;
    const int maxr = W1[0].fmt == DI_WFMT_FP4 ? DIC_MOE_DEC_MAX_ROWS : DIC_MOE_DEC_MAX_ROWS_V0;
    if (M * k <= maxr && (W1[0].fmt == DI_WFMT_FP4 || W1[0].fmt == DI_WFMT_FP8) &&
        ((uintptr_t)xn & 15) == 0 && ldx % 8 == 0 && ((uintptr_t)b->h & 15) == 0) {
        dic_wmat *w1 = wmats(c, E, W1), *w3 = w1 ? wmats(c, E, W3) : NULL, *w2 = w3 ? wmats(c, E, W2) : NULL;
        int ok = w2 && dic_moe_routed_dec_ok(M, k, E, w1, w3, w2, d, act_block);
        if (ok) {
            /* ops.h: the lines join before `shared` is read, i.e. between the two launches */
            c->dc.join = join_lines;
            c->dc.join_arg = x;
            CU_LAUNCH(x,
                     dic_moe_routed_dec(&c->dc, M, k, sel, rw, E, w1, w3, w2, xn, ldx, d, act_block, limit, b->h,
                                        (size_t)I, shared, ldo, y, out, ldo),
                     "dic_moe_routed_dec");
            c->dc.join = NULL;
            c->dc.join_arg = NULL;
            cu_lines_join(x); /* joined already, unless the launch was skipped (plan-only steps) */
        }
        free(w1), free(w3), free(w2);
        if (ok || !w2) {
            if (!ok) cu_lines_join(x);
            return;
        }
    }
    cu_lines_join(x); /* the op sequence: every line joined first, as before */
    di_moe_dispatch(x, M, k, sel, E, b->off, b->rows, b->inv);
    di_moe_gather(x, M * k, b->off, E, b->rows, k, xn, ldx, d, rw, b->xe, (size_t)d, b->erw);
    di_gemm2_grouped(x, E, W1, W3, b->off, b->xe, (size_t)d, act_block, b->g, b->u, (size_t)I);
    di_swiglu_n(x, b->off, E, b->g, b->u, (size_t)I, I, limit, b->erw, b->h, (size_t)I);
    di_gemm_grouped(x, E, W2, b->off, b->h, (size_t)I, act_block, b->eo, (size_t)d);
    di_moe_combine(x, M, k, b->inv, b->eo, (size_t)d, d, y);
    if (ldo == (size_t)d) {
        if (shared) di_add_bf16_f32_x(x, y, shared, (size_t)M * d);
        di_f32_to_bf16_x(x, y, out, (size_t)M * d);
    } else
        for (int m = 0; m < M; m++) {
            if (shared) di_add_bf16_f32_x(x, y + (size_t)m * d, shared + (size_t)m * ldo, (size_t)d);
            di_f32_to_bf16_x(x, y + (size_t)m * d, out + (size_t)m * ldo, (size_t)d);
        }
}

static void scale_bf16_f32(di_exec *x, float *v, size_t n, float scale) {
    if (n) CU_LAUNCH(x, dic_scale_bf16_f32(DC(x), v, n, scale), "dic_scale_bf16_f32");
}
static void hc_pre_onehot(di_exec *x, int M, float *pre) {
    if (M > 0) CU_LAUNCH(x, dic_hc_pre_onehot(DC(x), M, pre), "dic_hc_pre_onehot");
}
static void hc_head_pre(di_exec *x, int M, const float *mixes, int hc, float scale0, const float *base, float eps,
                        float *pre) {
    if (M > 0) CU_LAUNCH(x, dic_hc_head_pre(DC(x), M, mixes, hc, scale0, base, eps, pre), "dic_hc_head_pre");
}
static void hc_mean(di_exec *x, int M, const uint16_t *R, int hc, int d, uint16_t *out, size_t ldo) {
    if (M > 0) CU_LAUNCH(x, dic_hc_mean(DC(x), M, R, hc, d, out, ldo), "dic_hc_mean");
}
static void add_bcast_bf16(di_exec *x, int M, const uint16_t *e, int hc, int d, uint16_t *R) {
    if (M > 0) CU_LAUNCH(x, dic_add_bcast_bf16(DC(x), M, e, hc, d, R), "dic_add_bcast_bf16");
}

/* Both modes, every M, on the shapes the fused kernel takes (dic_hc_transition: a row's bits depend on the
 * row and d only, never on M, the tile or the launch split, docs/determinism.md sec. 7); other shapes (and
 * a scratch too small for its partials: a fact of the context, not of M) run the op sequence. */
static void hc_transition(di_exec *x, int M, const uint16_t *sub, size_t ldsub, uint16_t *R, size_t ldr, int d,
                          const di_wmat *fn, const float *scale3, const float *base, int iters, float hc_eps,
                          float rms_eps, float *mixes, float *pre, float *post, float *comb, float *pre_in,
                          const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    dic_wmat w;
    if (fn->fmt == DI_WFMT_F32 && cu_wmat(c, fn, &w) &&
        dic_hc_transition_ok(&c->dc, M, R, ldr, d, w.n, w.k, w.w, xo, xn, ldx)) {
        CU_LAUNCH(x,
                 dic_hc_transition(&c->dc, M, sub, ldsub, R, ldr, d, (const float *)w.w, scale3, base, iters, hc_eps,
                                   rms_eps, mixes, pre, post, comb, pre_in, norm_w, norm_eps, xo, xn, ldx),
                 "dic_hc_transition");
        return;
    }
    di_hc_transition_seq(x, M, sub, ldsub, R, ldr, d, fn, scale3, base, iters, hc_eps, rms_eps, mixes, pre, post,
                         comb, pre_in, norm_w, norm_eps, xo, xn, ldx);
}

/* The output head, both modes, every M: with head mixes (V4) on the shapes dic_hc_head takes, one fused launch
 * per 64 rows (a row's bits independent of M, as the transition's); V4.1's carried pre (no mixes): the op
 * sequence (expand, collapse, RMSNorm: 3 short launches), the same bits as dic_hc_head would give
 * (gtest_mhc_head.c), so the choice changes no row. */
static void hc_head_final(di_exec *x, int M, const uint16_t *sub, size_t ldsub, const float *post, const float *comb,
                          uint16_t *R, size_t ldr, int d, const di_wmat *fn, float scale0, const float *base,
                          float hc_eps, float rms_eps, float *mixes, float *pre, const float *norm_w, float norm_eps,
                          uint16_t *xo, uint16_t *xn, size_t ldx) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    dic_wmat w;
    memset(&w, 0, sizeof w);
    if (fn && fn->fmt == DI_WFMT_F32 && cu_wmat(c, fn, &w) &&
        dic_hc_head_ok(&c->dc, M, R, ldr, d, fn ? w.n : 0, fn ? w.k : 0, fn ? w.w : NULL, xo, xn, ldx)) {
        CU_LAUNCH(x,
                 dic_hc_head(&c->dc, M, sub, ldsub, post, comb, R, ldr, d, fn ? (const float *)w.w : NULL, scale0, base,
                             hc_eps, rms_eps, mixes, pre, norm_w, norm_eps, xo, xn, ldx),
                 "dic_hc_head");
        return;
    }
    di_hc_head_final_seq(x, M, sub, ldsub, post, comb, R, ldr, d, fn, scale0, base, hc_eps, rms_eps, mixes, pre,
                         norm_w, norm_eps, xo, xn, ldx);
}

/* ids: device, written by di_engram_hash_rows (dsv41.c engram_ids) earlier in the step. */
static void engram_gather_rows(di_exec *x, int M, const int64_t *ids, int64_t ids_stride, int ncols,
                               const uint8_t *table, const uint8_t *scale, int hd, uint16_t *out) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    CU_LAUNCH(x, dic_engram_gather_rows(&c->dc, M, ids, ids_stride, ncols, table, scale, hd, out),
             "dic_engram_gather_rows");
}

static void engram_gate_rows(di_exec *x, int M, const int64_t *rmap, const uint16_t *kv, size_t ldkv, uint16_t *R,
                             const float *qk, int dim, int hc, float eps, float *kvf, float *h, float *gates) {
    (void)kvf, (void)h;
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    cu_tab_begin(c);
    const int64_t *dmap = cu_tab_put(c, rmap, (size_t)M * sizeof *rmap);
    cu_tab_flush(c);
    CU_LAUNCH(x, dic_engram_gate_rows(&c->dc, M, dmap, kv, ldkv, R, qk, dim, hc, eps, gates), "dic_engram_gate_rows");
}

/* tokens, map, consts, rings, ids: device; pos, row_seg [M] and seg_pos0, seg_nrows, ring [segments]:
 * host tables, staged (a recorded step appends them to its plan). */
static void engram_hash_rows(di_exec *x, int M, const int32_t *tokens, const int32_t *map, int32_t n_ids,
                             const int64_t *consts, int n_layers, int max_ngram, int n_heads, int32_t pad_class,
                             const int64_t *pos, const int *row_seg, const int64_t *seg_pos0, const int *seg_nrows,
                             int32_t *const *ring, int ring_len, int64_t *ids) {
    if (M <= 0) return;
    cu_exec *c = cu_of(x);
    int ns = nseg_of(row_seg, M);
    cu_tab_begin(c);
    const int64_t *dpos = cu_tab_put(c, pos, (size_t)M * sizeof *pos);
    const int *dseg = cu_tab_put(c, row_seg, (size_t)M * sizeof *row_seg);
    const int64_t *dp0 = cu_tab_put(c, seg_pos0, (size_t)ns * sizeof *seg_pos0);
    const int *dnr = cu_tab_put(c, seg_nrows, (size_t)ns * sizeof *seg_nrows);
    int32_t *const *dring = cu_tab_put(c, ring, (size_t)ns * sizeof *ring);
    cu_tab_flush(c);
    CU_LAUNCH(x,
              dic_engram_hash_rows(&c->dc, M, tokens, map, n_ids, consts, n_layers, max_ngram, n_heads, pad_class,
                                   dpos, dseg, dp0, dnr, dring, ring_len, ids),
              "dic_engram_hash_rows");
}

void cu_fill_model_ops(di_dev_ops *t) {
    t->fill_f32 = fill_f32;
    t->scatter_rows = scatter_rows;
    t->attn_list = attn_list;
    t->attn_list_block = attn_list_block;
    t->attn_dec = attn_dec;
    t->attn_kv_post = attn_kv_post;
    t->q_post = q_post;
    t->q_proj = q_proj;
    t->cmp_gated_rows = cmp_gated_rows;
    t->index_select = index_select;
    t->route_rows = route_rows;
    t->route_gate = route_gate;
    t->moe_dispatch = moe_dispatch;
    t->moe_gather = moe_gather;
    t->gemm_grouped = gemm_grouped;
    t->gemm2_grouped = gemm2_grouped;
    t->swiglu_n = swiglu_n;
    t->moe_combine = moe_combine;
    t->moe_routed = moe_routed;
    t->ep_plan = ep_plan;
    t->gather_rows_bf16 = gather_rows_bf16;
    t->scale_bf16_f32 = scale_bf16_f32;
    t->hc_pre_onehot = hc_pre_onehot;
    t->hc_head_pre = hc_head_pre;
    t->hc_mean = hc_mean;
    t->add_bcast_bf16 = add_bcast_bf16;
    t->hc_transition = hc_transition;
    t->hc_head_final = hc_head_final;
    t->engram_gather_rows = engram_gather_rows;
    t->engram_gate_rows = engram_gate_rows;
    t->engram_hash_rows = engram_hash_rows;
}
