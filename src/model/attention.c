/* attention.c — the attention sub-layer (attention.h). */
#include "model/attention.h"

#include <math.h>
#include <string.h>

#include "model/compressor.h"
#include "model/indexer.h"

/* Fill row m's KV pointer list (window, then compressed rows); returns its length. */
static int build_index(const di_fwd *f, const di_seg *sg, int m, const di_layer_cfg *L, int layer) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int win = (int)c->sliding_window, hd = (int)c->head_dim;
    const uint16_t **list = ws->kvptr + (size_t)m * ws->kvptr_stride;
    const di_layer_state *ls = &sg->seq->layers[layer];
    int64_t p = f->pos[m];
    int n = 0;
    int64_t t0 = p - win + 1 > 0 ? p - win + 1 : 0;
    for (int64_t t = t0; t <= p; t++) {
        if (t >= sg->pos0) list[n++] = ws->kv + (size_t)(sg->row0 + (t - sg->pos0)) * hd;
        else list[n++] = ls->ring + (size_t)(t % win) * hd;
    }
    while (n < win) list[n++] = NULL; /* the reference pads the window part with -1 */
    if (L->ratio > 0) {
        const di_rowstore *ckv = &sg->seq->layers[L->kv_layer].ckv;
        if (L->topk_layer >= 0) {
            int K = (int)c->index_topk;
            for (int i = 0; i < ws->ntopk[m]; i++) list[n++] = di_rowstore_row(ckv, ws->topk[(size_t)m * K + i]);
        } else {
            int64_t vis = (p + 1) / L->ratio;
            for (int64_t j = 0; j < vis; j++) list[n++] = di_rowstore_row(ckv, j);
        }
    }
    return n;
}

static void write_ring(const di_fwd *f, int layer) {
    const di_model_config *c = f->cfg;
    int win = (int)c->sliding_window, hd = (int)c->head_dim;
    for (int s = 0; s < f->nseg; s++) {
        const di_seg *sg = &f->segs[s];
        uint16_t *ring = sg->seq->layers[layer].ring;
        int first = sg->nrows > win ? sg->nrows - win : 0;
        for (int i = first; i < sg->nrows; i++)
            memcpy(ring + (size_t)((sg->pos0 + i) % win) * hd, f->ws->kv + (size_t)(sg->row0 + i) * hd, (size_t)hd * 2);
    }
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
    for (int g = 0; g < G; g++)
        di_gemm(f->x, M, ws->o + (size_t)g * gk, qld, &aw->wo_a[g], 0, NULL, ws->z + (size_t)g * R, (size_t)G * R);
    di_gemm(f->x, M, ws->z, (size_t)G * R, &aw->wo_b, c->act_block, NULL, out, (size_t)d);
}

void di_attn_block(di_fwd *f, const di_attn_w *aw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                   uint16_t *out) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, H = (int)c->num_attention_heads, hd = (int)c->head_dim;
    const float *cs = di_fwd_rope_cs(f, L), *sn = di_fwd_rope_sn(f, L);
    size_t qld = (size_t)H * hd;

    di_attn_query(f, aw, cs, sn, xn);
    di_attn_kv(f, aw, cs, sn, M, xn, ws->kv);

    /* compressed rows: the KV source's compressor, then the indexer */
    if (aw->has_cmp)
        di_compressor_run(f, &aw->cmp, L, layer, c->arch == DI_ARCH_V4 ? DI_CMP_MAIN : DI_CMP_LATENT, xn);
    if (aw->has_idx) di_indexer_run(f, &aw->idx, L, layer, xn, ws->qr);

    for (int s = 0; s < f->nseg; s++)
        for (int i = 0; i < f->segs[s].nrows; i++) {
            int m = f->segs[s].row0 + i;
            ws->nidx[m] = build_index(f, &f->segs[s], m, L, layer);
        }
    di_sparse_attn(f->x, M, ws->q, qld, H, hd, ws->kvptr, ws->kvptr_stride, ws->nidx, aw->sink,
                   (float)(1.0 / sqrt((double)hd)), ws->o, qld);
    write_ring(f, layer);
    di_attn_out(f, aw, cs, sn, out);
}
