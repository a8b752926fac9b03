/* attention.c — the attention sub-layer (attention.h). */
#include "model/attention.h"

#include <math.h>

#include "model/compressor.h"
#include "model/indexer.h"

/* The host tables of a layer's attention: every segment's ring and
 * compressed-KV page table. */
static void attn_tabs(const di_fwd *f, const di_layer_cfg *L, int layer) {
    di_tabs *t = &f->ws->t;
    for (int s = 0; s < f->nseg; s++) {
        const di_seq_state *sq = f->segs[s].seq;
        t->ring[s] = sq->layers[layer].ring;
        t->ckv[s] = L->ratio > 0 ? sq->layers[L->kv_layer].ckv.pages : NULL;
        t->page_rows[s] = L->ratio > 0 ? sq->layers[L->kv_layer].ckv.page_rows : 1;
    }
}

/* The destinations of the step's kv rows in the rings: the last `window`
 * rows of each segment (host tables t->src_row, t->dst); returns the count. */
static int ring_dst(const di_fwd *f, int layer) {
    const di_model_config *c = f->cfg;
    int win = (int)c->sliding_window, hd = (int)c->head_dim;
    di_tabs *t = &f->ws->t;
    int n = 0;
    for (int s = 0; s < f->nseg; s++) {
        const di_seg *sg = &f->segs[s];
        uint16_t *ring = sg->seq->layers[layer].ring;
        int first = sg->nrows > win ? sg->nrows - win : 0;
        for (int i = first; i < sg->nrows; i++, n++) {
            t->src_row[n] = sg->row0 + i;
            t->dst[n] = ring + (size_t)((sg->pos0 + i) % win) * hd;
        }
    }
    return n;
}

/* Compact prefill (f->win_lo, dsv41_compact.h): whether some row's window
 * reaches below its segment's floor (positions the late layers never ran). */
static int window_floored(const di_fwd *f) {
    if (!f->win_lo) return 0;
    int64_t win = f->cfg->sliding_window;
    for (int m = 0; m < f->M; m++)
        if (f->pos[m] - win + 1 < f->win_lo[f->ws->t.row_seg[m]] && f->win_lo[f->ws->t.row_seg[m]] > 0) return 1;
    return 0;
}

/* The step's kv rows into the rings (one scatter). */
static void write_ring(const di_fwd *f, int layer) {
    int hd = (int)f->cfg->head_dim, n = ring_dst(f, layer);
    di_scatter_rows(f->x, n, f->ws->t.src_row, f->ws->kv, (size_t)hd, f->ws->t.dst, hd);
}

/* q from the projected ws->qr = wq_a xn: q_norm (into ws->qrn, which the indexer reads), wq_b,
 * head norm + RoPE: one di_q_proj (ops.h: the three ops in that order). */
static void query_from_qr(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, H = (int)c->num_attention_heads, hd = (int)c->head_dim;
    int ql = (int)c->q_lora_rank, rd = (int)c->qk_rope_head_dim, ab = c->act_block;
    float eps = (float)c->rms_norm_eps;
    size_t qld = (size_t)H * hd;
    di_q_proj(f->x, M, ws->qr, (size_t)ql, aw->q_norm, eps, ws->qrn, (size_t)ql, &aw->wq_b, ab, ws->q, qld, H, hd,
              c->arch == DI_ARCH_V4, rd, cs, sn);
}

/* The projected kv rows: norm, RoPE, QAT (and the ring write, ring_layer >= 0). */
static void kv_from_proj(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn, int M, uint16_t *kv,
                         int ring_layer) {
    const di_model_config *c = f->cfg;
    int hd = (int)c->head_dim, rd = (int)c->qk_rope_head_dim, ab = c->act_block;
    int v4 = c->arch == DI_ARCH_V4; /* V4: the RoPE dims stay bf16 */
    int nr = ring_layer >= 0 ? ring_dst(f, ring_layer) : 0;
    di_attn_kv_post(f->x, M, kv, (size_t)hd, aw->kv_norm, hd, (float)c->rms_norm_eps, rd, cs, sn, v4 ? hd - rd : hd,
                    v4 ? 64 : ab, nr, f->ws->t.src_row, f->ws->t.dst);
}

void di_attn_query(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn, const uint16_t *xn) {
    const di_model_config *c = f->cfg;
    di_gemm(f->x, f->M, xn, (size_t)c->hidden_size, &aw->wq_a, c->act_block, NULL, f->ws->qr, (size_t)c->q_lora_rank);
    query_from_qr(f, aw, cs, sn);
}

void di_attn_kv(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn, int M, const uint16_t *x,
                uint16_t *kv, int ring_layer) {
    const di_model_config *c = f->cfg;
    di_gemm(f->x, M, x, (size_t)c->hidden_size, &aw->wkv, c->act_block, NULL, kv, (size_t)c->head_dim);
    kv_from_proj(f, aw, cs, sn, M, kv, ring_layer);
}

/* out = wo_b(wo_a(ws->o)) (the inverse RoPE already applied). */
static void attn_out_proj(di_fwd *f, const di_attn_w *aw, uint16_t *out) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, d = (int)c->hidden_size, H = (int)c->num_attention_heads, hd = (int)c->head_dim;
    size_t qld = (size_t)H * hd;
    int G = aw->groups, R = (int)c->o_lora_rank, gk = H * hd / G;
    di_gemm_blockdiag(f->x, M, ws->o, qld, G, aw->wo_a, gk, 0, NULL, ws->z, (size_t)G * R);
    di_gemm(f->x, M, ws->z, (size_t)G * R, &aw->wo_b, c->act_block, NULL, out, (size_t)d);
}

void di_attn_out(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn, uint16_t *out) {
    const di_model_config *c = f->cfg;
    int H = (int)c->num_attention_heads, hd = (int)c->head_dim;
    size_t qld = (size_t)H * hd;
    di_rope_tab(f->x, f->M, f->ws->o, qld, H, hd, (int)c->qk_rope_head_dim, cs, sn, 1);
    attn_out_proj(f, aw, out);
}

void di_attn_block(di_fwd *f, const di_attn_w *aw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                   uint16_t *out) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, H = (int)c->num_attention_heads, hd = (int)c->head_dim;
    const float *cs = di_fwd_rope_cs(f, L), *sn = di_fwd_rope_sn(f, L);
    size_t qld = (size_t)H * hd;

    /* with one row per segment the ring slots can be written with the kv rows */
    int early = 1;
    for (int s = 0; s < f->nseg; s++)
        if (f->segs[s].nrows > 1) early = 0;

    /* wq_a and wkv read xn: one launch (di_gemm_multi; the bits of two di_gemm).
     * Recorded steps run the KV source's compressor (line 2), V4's index
     * compressor (line 3, own buffers) and the kv rows' post-processing (line 1)
     * beside the query path (ops.h di_exec_branch): they write disjoint buffers.
     * The indexer's head weights continue line 1, its query (it reads qrn) runs
     * on line 4 beside wq_b and the query's post-processing. */
    if (aw->has_cmp) {
        di_exec_branch(f->x, 2);
        di_compressor_run(f, &aw->cmp, L, layer, c->arch == DI_ARCH_V4 ? DI_CMP_MAIN : DI_CMP_LATENT, xn);
        di_exec_branch(f->x, 0);
    }
    if (aw->has_idx) di_indexer_keys(f, &aw->idx, L, layer, xn); /* line 3, beside the compressor above */
    const di_wmat proj[2] = {aw->wq_a, aw->wkv};
    uint16_t *const proj_out[2] = {ws->qr, ws->kv};
    const size_t proj_ld[2] = {(size_t)c->q_lora_rank, (size_t)hd};
    di_gemm_multi(f->x, M, xn, (size_t)c->hidden_size, 2, proj, c->act_block, proj_out, proj_ld);
    di_exec_branch(f->x, 1);
    kv_from_proj(f, aw, cs, sn, M, ws->kv, early ? layer : -1);
    di_exec_branch(f->x, 0);
    if (aw->has_idx) {
        /* the indexer's query reads only qrn: its lines (keys, head weights, query) run beside wq_b and
         * the query's post-processing; the same ops as di_q_proj's sequence, in the same order per buffer */
        int ql = (int)c->q_lora_rank;
        di_rmsnorm(f->x, M, ws->qr, (size_t)ql, aw->q_norm, aw->wq_b.k, (float)c->rms_norm_eps, ws->qrn, (size_t)ql);
        di_indexer_begin(f, &aw->idx, L, layer, xn, ws->qrn);
        di_gemm(f->x, M, ws->qrn, (size_t)ql, &aw->wq_b, c->act_block, NULL, ws->q, qld);
        di_q_post(f->x, M, ws->q, qld, H, hd, c->arch == DI_ARCH_V4, (float)c->rms_norm_eps,
                  (int)c->qk_rope_head_dim, cs, sn);
        di_indexer_select(f, &aw->idx, L, layer); /* joins every line */
    } else {
        query_from_qr(f, aw, cs, sn);
    }
    di_exec_join(f->x);

    attn_tabs(f, L, layer);
    di_tabs *t = &ws->t;
    int indexed = L->ratio > 0 && L->topk_layer >= 0;
    /* compact prefill: the late layers' windows floored at each segment's late_from (ops.h di_attn_dec seg_lo) */
    di_attn_dec(f->x, M, f->pos, t->row_seg, t->seg_row0, t->seg_pos0, t->ring, (int)c->sliding_window, ws->kv, hd,
                t->ckv, t->page_rows, L->ratio, indexed ? ws->topk : NULL, (int)c->index_topk, ws->ntopk, ws->kvptr,
                ws->kvptr_stride, ws->nidx, window_floored(f) ? f->win_lo : NULL, ws->q, qld, H, aw->sink,
                (float)(1.0 / sqrt((double)hd)), (int)c->qk_rope_head_dim, cs, sn, ws->o, qld);
    if (!early) write_ring(f, layer);
    attn_out_proj(f, aw, out);
}
