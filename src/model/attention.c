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

/* The step's kv rows into the rings: the last `window` rows of each segment
 * (host table of destinations, then one scatter). */
static void write_ring(const di_fwd *f, int layer) {
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
    di_scatter_rows(f->x, n, t->src_row, f->ws->kv, (size_t)hd, t->dst, hd);
}

void di_attn_query(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn, const uint16_t *xn) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, d = (int)c->hidden_size, H = (int)c->num_attention_heads, hd = (int)c->head_dim;
    int ql = (int)c->q_lora_rank, rd = (int)c->qk_rope_head_dim, ab = c->act_block;
    float eps = (float)c->rms_norm_eps;
    size_t qld = (size_t)H * hd;
    di_gemm(f->x, M, xn, (size_t)d, &aw->wq_a, ab, NULL, ws->qr, (size_t)ql);
    di_rmsnorm(f->x, M, ws->qr, (size_t)ql, aw->q_norm, ql, eps, ws->qr, (size_t)ql);
    di_gemm(f->x, M, ws->qr, (size_t)ql, &aw->wq_b, ab, NULL, ws->q, qld);
    if (c->arch == DI_ARCH_V4) di_head_rmsnorm_bf16(f->x, M, ws->q, qld, H, hd, eps);
    di_rope_tab(f->x, M, ws->q, qld, H, hd, rd, cs, sn, 0);
}

void di_attn_kv(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn, int M, const uint16_t *x,
                uint16_t *kv) {
    const di_model_config *c = f->cfg;
    int d = (int)c->hidden_size, hd = (int)c->head_dim, rd = (int)c->qk_rope_head_dim, ab = c->act_block;
    di_gemm(f->x, M, x, (size_t)d, &aw->wkv, ab, NULL, kv, (size_t)hd);
    di_rmsnorm(f->x, M, kv, (size_t)hd, aw->kv_norm, hd, (float)c->rms_norm_eps, kv, (size_t)hd);
    di_rope_tab(f->x, M, kv, (size_t)hd, 1, hd, rd, cs, sn, 0);
    if (c->arch == DI_ARCH_V4) di_qat_fp8(f->x, M, kv, (size_t)hd, hd - rd, 64); /* RoPE dims stay bf16 */
    else di_qat_fp8(f->x, M, kv, (size_t)hd, hd, ab);
}

void di_attn_out(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn, uint16_t *out) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, d = (int)c->hidden_size, H = (int)c->num_attention_heads, hd = (int)c->head_dim;
    int rd = (int)c->qk_rope_head_dim;
    size_t qld = (size_t)H * hd;
    di_rope_tab(f->x, M, ws->o, qld, H, hd, rd, cs, sn, 1);
    int G = aw->groups, R = (int)c->o_lora_rank, gk = H * hd / G;
    di_gemm_blockdiag(f->x, M, ws->o, qld, G, aw->wo_a, gk, 0, NULL, ws->z, (size_t)G * R);
    di_gemm(f->x, M, ws->z, (size_t)G * R, &aw->wo_b, c->act_block, NULL, out, (size_t)d);
}

void di_attn_block(di_fwd *f, const di_attn_w *aw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                   uint16_t *out) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, H = (int)c->num_attention_heads, hd = (int)c->head_dim;
    const float *cs = di_fwd_rope_cs(f, L), *sn = di_fwd_rope_sn(f, L);
    size_t qld = (size_t)H * hd;

    /* Recorded steps run the kv path (line 1) and the KV source's compressor
     * (line 2) beside the query path (ops.h di_exec_branch): they read xn and
     * write disjoint buffers. The indexer reads the query's qr and shares the
     * compressor's buffers, so it follows the join. */
    di_exec_branch(f->x, 1);
    di_attn_kv(f, aw, cs, sn, M, xn, ws->kv);
    if (aw->has_cmp) {
        di_exec_branch(f->x, 2);
        di_compressor_run(f, &aw->cmp, L, layer, c->arch == DI_ARCH_V4 ? DI_CMP_MAIN : DI_CMP_LATENT, xn);
    }
    di_exec_branch(f->x, 0);
    di_attn_query(f, aw, cs, sn, xn);
    di_exec_join(f->x);
    if (aw->has_idx) di_indexer_run(f, &aw->idx, L, layer, xn, ws->qr);

    attn_tabs(f, L, layer);
    di_tabs *t = &ws->t;
    int indexed = L->ratio > 0 && L->topk_layer >= 0;
    di_attn_list(f->x, M, f->pos, t->row_seg, t->seg_row0, t->seg_pos0, t->ring, (int)c->sliding_window, ws->kv, hd,
                 t->ckv, t->page_rows, L->ratio, indexed ? ws->topk : NULL, (int)c->index_topk, ws->ntopk,
                 ws->kvptr, ws->kvptr_stride, ws->nidx);
    di_sparse_attn(f->x, M, ws->q, qld, H, hd, ws->kvptr, ws->kvptr_stride, ws->nidx, aw->sink,
                   (float)(1.0 / sqrt((double)hd)), ws->o, qld);
    write_ring(f, layer);
    di_attn_out(f, aw, cs, sn, out);
}
