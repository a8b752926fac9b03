/* indexer.c — the lightning indexer (indexer.h): the query, the head
 * weights, and one di_index_select over the step's rows, whose key stores
 * and visible counts the host lists from positions and page tables. */
#include "model/indexer.h"

#include <math.h>

#include "model/compressor.h"

/* Which key store row m scores, and how many rows it holds at this point of the step. */
static void key_store(const di_fwd *f, const di_layer_cfg *L, int layer, int m, const di_rowstore **ks,
                      int64_t *cap) {
    const di_seg *sg = &f->segs[f->ws->t.row_seg[m]];
    int kl = L->index_key_layer;
    int64_t p = f->pos[m];
    if (f->released_index_k && sg->nrows == 1 && sg->pos0 > 0 && sg->seq->ikey_pub >= 0) kl = sg->seq->ikey_pub;
    const di_layer_cfg *K = &f->cfg->layers[kl];
    *ks = &sg->seq->layers[kl].ikey;
    /* a key layer later in the stack has not seen this step's token yet */
    *cap = (kl <= layer ? p + 1 : p) / K->ratio;
}

static void index_query(di_fwd *f, const di_indexer_w *iw, const di_layer_cfg *L, const uint16_t *qr) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, nh = (int)c->index_n_heads, ihd = (int)c->index_head_dim, rd = (int)c->qk_rope_head_dim;
    di_gemm(f->x, M, qr, (size_t)c->q_lora_rank, &iw->wq_b, c->act_block, NULL, ws->qi, (size_t)nh * ihd);
    di_rope_tab(f->x, M, ws->qi, (size_t)nh * ihd, nh, ihd, rd, di_fwd_rope_cs(f, L), di_fwd_rope_sn(f, L), 0);
    if (c->arch == DI_ARCH_V4) di_hadamard128(f->x, M, ws->qi, (size_t)nh * ihd, nh * ihd / 128);
    di_qat_fp4(f->x, M, ws->qi, (size_t)nh * ihd, nh * ihd, 32);
}

void di_indexer_keys(di_fwd *f, const di_indexer_w *iw, const di_layer_cfg *L, int layer, const uint16_t *xn) {
    if (!iw->cmp.ratio) return; /* V4.1: the keys come from a KV source's compressor */
    /* V4: this step's keys, on line 3 of a recorded step (own buffers: beside the attention's compressor) */
    di_exec_branch(f->x, 3);
    di_compressor_run(f, &iw->cmp, L, layer, DI_CMP_INDEX, xn);
    di_exec_branch(f->x, 0);
}

void di_indexer_begin(di_fwd *f, const di_indexer_w *iw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                      const uint16_t *qr) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, d = (int)c->hidden_size, nh = (int)c->index_n_heads, ihd = (int)c->index_head_dim;
    (void)layer;
    /* Recorded steps (ops.h di_exec_branch): the head weights on line 1, the query on
     * line 4 (it reads only qr: it runs beside the caller's wq_b and query
     * post-processing on the main line); di_indexer_select joins them. */
    /* head weights (bf16 linear, then the bf16 product with the scale) */
    di_exec_branch(f->x, 1);
    di_gemm(f->x, M, xn, (size_t)d, &iw->wproj, 0, ws->iw, NULL, (size_t)nh);
    float scale = (float)(1.0 / sqrt((double)ihd) / sqrt((double)nh));
    di_scale_bf16_f32(f->x, ws->iw, (size_t)M * nh, scale);
    di_exec_branch(f->x, 4);
    index_query(f, iw, L, qr);
    di_exec_branch(f->x, 0);
}

void di_indexer_select(di_fwd *f, const di_indexer_w *iw, const di_layer_cfg *L, int layer) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, nh = (int)c->index_n_heads;
    (void)iw;
    di_exec_join(f->x);
    /* what each row scores: host tables from positions, page tables and the published key layer */
    di_tabs *t = &ws->t;
    for (int m = 0; m < M; m++) {
        const di_rowstore *ks;
        t->nvis[m] = (f->pos[m] + 1) / L->ratio;
        key_store(f, L, layer, m, &ks, &t->kcap[m]);
        t->kpages[m] = ks->pages;
        t->page_rows[m] = ks->page_rows ? ks->page_rows : 1;
    }
    int restricted = L->candidate_layer >= 0;
    di_index_select_args a = {.M = M,
                              .nh = nh,
                              .q = ws->qi,
                              .w = ws->iw,
                              .kpages = t->kpages,
                              .page_rows = t->page_rows,
                              .nvis = t->nvis,
                              .kcap = t->kcap,
                              .cand_in = restricted ? ws->cand : NULL,
                              .ncand_in = restricted ? ws->ncand : NULL,
                              .cand_out = L->is_candidate_source ? ws->cand : NULL,
                              .ncand_out = L->is_candidate_source ? ws->ncand : NULL,
                              .bs = (int)c->candidate_block_size,
                              .KB = (int)c->candidate_topk_blocks,
                              .K = (int)c->index_topk,
                              .sort_sel = c->arch == DI_ARCH_V41,
                              .topk = ws->topk,
                              .ntopk = ws->ntopk,
                              .iscore = ws->iscore,
                              .iscore_stride = ws->iscore_stride,
                              .bscore = ws->bscore,
                              .bscore_stride = ws->bscore_stride,
                              .nscratch = ws->nthreads};
    di_index_select(f->x, &a);
    if (f->index_obs && !di_exec_on_device(f->x)) /* observers (tests, tools) read topk on the host: CPU only */
        for (int m = 0; m < M; m++)
            f->index_obs(f->index_obs_ctx, layer, f->pos[m], ws->topk + (size_t)m * c->index_topk, ws->ntopk[m]);
}
