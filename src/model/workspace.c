/* workspace.c — one allocation holding every scratch buffer of a step (forward.h). */
#include <stdlib.h>
#include <string.h>

#include "model/forward.h"

typedef struct bump {
    unsigned char *base;
    size_t off;
} bump;

static void *take(bump *b, size_t bytes) {
    size_t at = (b->off + 63) & ~(size_t)63;
    b->off = at + bytes;
    return b->base ? b->base + at : NULL;
}

static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

static void layout(di_ws *ws, const di_model_config *c, int M, int64_t max_context, int nthreads, bump *b) {
    size_t m = (size_t)M;
    int64_t d = c->hidden_size, hd = c->head_dim, ihd = c->index_head_dim;
    int64_t I = imax(c->moe_intermediate_size, c->moe_intermediate_size * imax(c->n_shared_experts, 1));
    int64_t E = imax(c->n_routed_experts, c->stage_n_routed_experts), k = imax(c->num_experts_per_tok, c->stage_num_experts_per_tok);
    int64_t rowmax = imax(hd, ihd);
    /* compressed rows a query can attend to: the indexer's top-k, or every
     * visible row of the smallest non-indexed ratio */
    int64_t maxc = c->index_topk;
    int64_t min_ratio_idx = 0;
    for (int l = 0; l < c->n_layers + c->n_stages; l++) {
        const di_layer_cfg *L = &c->layers[l];
        if (L->ratio <= 0) continue;
        if (L->has_index_query) {
            if (!min_ratio_idx || L->ratio < min_ratio_idx) min_ratio_idx = L->ratio;
        } else {
            maxc = imax(maxc, max_context / L->ratio + 1);
        }
    }
    int64_t Imoe = c->moe_intermediate_size, mk = (int64_t)m * k; /* dispatched MoE entries */
    ws->max_rows = M;
    ws->x = take(b, m * (size_t)d * 2);
    ws->xn = take(b, m * (size_t)d * 2);
    ws->sub = take(b, m * (size_t)d * 2);
    ws->xe = take(b, (size_t)mk * (size_t)d * 2);
    ws->eo = take(b, (size_t)mk * (size_t)d * 2);
    ws->qr = take(b, m * (size_t)c->q_lora_rank * 2);
    ws->qrn = take(b, m * (size_t)c->q_lora_rank * 2); /* q_norm(qr): apart from qr (di_q_proj's fused kernel) */
    ws->q = take(b, m * (size_t)(c->num_attention_heads * hd) * 2);
    ws->o = take(b, m * (size_t)(c->num_attention_heads * hd) * 2);
    ws->kv = take(b, m * (size_t)hd * 2);
    ws->z = take(b, m * (size_t)(c->o_groups * c->o_lora_rank) * 2);
    ws->qi = take(b, m * (size_t)(c->index_n_heads * ihd) * 2);
    size_t gu = (size_t)imax((int64_t)m * I, mk * Imoe);
    ws->g = take(b, gu * 2);
    ws->u = take(b, gu * 2);
    ws->h = take(b, gu * 2);
    /* the shared expert's own buffers: it runs beside the routed experts (di_exec_branch) */
    ws->sg = take(b, m * (size_t)I * 2);
    ws->su = take(b, m * (size_t)I * 2);
    ws->sh = take(b, m * (size_t)I * 2);
    ws->seo = take(b, m * (size_t)d * 2);
    ws->emit16 = take(b, m * (size_t)rowmax * 2);
    ws->emitk = take(b, m * (size_t)ihd * 2);
    ws->iemit16 = take(b, m * (size_t)ihd * 2);
    if (c->n_engram_layer_ids) {
        ws->eng_e = take(b, m * (size_t)c->engram_cols * (size_t)c->engram_head_dim * 2);
        ws->eng_kv = take(b, m * (size_t)((c->hc_mult + 1) * d) * 2);
        ws->eng_dids = take(b, m * (size_t)c->n_engram_layer_ids * (size_t)c->engram_cols * sizeof(int64_t));
    }
    if (c->drafter == DI_DRAFTER_DSPARK) ws->mainx = take(b, m * (size_t)d * 2);
    ws->pre_in = take(b, m * 4 * 4);
    if (c->candidate_source_layer_id >= 0) {
        ws->cand = take(b, m * (size_t)c->candidate_topk_blocks * sizeof(int));
        ws->ncand = take(b, m * sizeof(int));
        ws->bscore_stride = (size_t)(max_context / c->candidate_block_size + 16);
        ws->bscore = take(b, (size_t)nthreads * ws->bscore_stride * 4);
    }
    for (int v = 0; v < 2; v++) {
        ws->rope_cs[v] = take(b, m * (size_t)(c->qk_rope_head_dim / 2) * 4);
        ws->rope_sn[v] = take(b, m * (size_t)(c->qk_rope_head_dim / 2) * 4);
    }
    ws->mixes = take(b, m * 24 * 4);
    ws->pre = take(b, m * 4 * 4);
    ws->post = take(b, m * 4 * 4);
    ws->comb = take(b, m * 16 * 4);
    ws->cproj_kv = take(b, m * (size_t)(2 * rowmax) * 4);
    ws->cproj_sc = take(b, m * (size_t)(2 * rowmax) * 4);
    ws->iw = take(b, m * (size_t)c->index_n_heads * 4);
    ws->logits_gate = take(b, m * (size_t)E * 4);
    ws->rw = take(b, m * (size_t)k * 4);
    ws->erw = take(b, (size_t)mk * 4);
    ws->y = take(b, m * (size_t)d * 4);
    ws->emit32 = take(b, m * (size_t)rowmax * 4);
    ws->icproj_kv = take(b, m * (size_t)(2 * ihd) * 4);
    ws->icproj_sc = take(b, m * (size_t)(2 * ihd) * 4);
    ws->iemit32 = take(b, m * (size_t)ihd * 4);
    ws->nthreads = nthreads;
    ws->iscore_stride = min_ratio_idx ? (size_t)(max_context / min_ratio_idx + 16) : 16;
    ws->iscore = take(b, (size_t)nthreads * ws->iscore_stride * 4);
    ws->sel = take(b, m * (size_t)k * sizeof(int));
    ws->topk = take(b, m * (size_t)c->index_topk * sizeof(int));
    ws->ntopk = take(b, m * sizeof(int));
    ws->nidx = take(b, m * sizeof(int));
    ws->tok = take(b, m * sizeof(int32_t));
    ws->moe_off = take(b, (size_t)(E + 1) * sizeof(int));
    ws->moe_rows = take(b, (size_t)mk * sizeof(int));
    ws->moe_inv = take(b, (size_t)mk * sizeof(int));
    ws->kvptr_stride = (size_t)(c->sliding_window + maxc + c->dspark_block_size);
    ws->kvptr = take(b, m * ws->kvptr_stride * sizeof(void *));
}

/* The host tables (forward.h di_tabs), M rows. */
static void layout_tabs(di_tabs *t, const di_model_config *c, int M, bump *b) {
    size_t m = (size_t)M;
    t->row_seg = take(b, m * sizeof(int));
    t->seg_row0 = take(b, m * sizeof(int));
    t->seg_nrows = take(b, m * sizeof(int));
    t->seg_pos0 = take(b, m * sizeof(int64_t));
    t->ring = take(b, m * sizeof(void *));
    t->ckv = take(b, m * sizeof(void *));
    t->page_rows = take(b, m * sizeof(int));
    t->skv = take(b, m * sizeof(void *));
    t->ssc = take(b, m * sizeof(void *));
    t->nctx = take(b, m * sizeof(int));
    t->emit = take(b, m * sizeof(int));
    t->emit_pos = take(b, m * sizeof(int64_t));
    t->emit_row = take(b, m * sizeof(int64_t));
    t->emit_seg = take(b, m * sizeof(int));
    t->nvis = take(b, m * sizeof(int64_t));
    t->kcap = take(b, m * sizeof(int64_t));
    t->kpages = take(b, m * sizeof(void *));
    t->dst = take(b, m * sizeof(void *));
    t->src_row = take(b, m * sizeof(int));
    if (c->n_engram_layer_ids) {
        t->eng_ids = take(b, m * (size_t)c->n_engram_layer_ids * (size_t)c->engram_cols * sizeof(int64_t));
        t->eng_ring = take(b, m * sizeof(int32_t *));
    }
    t->rope = take(b, 4 * m * (size_t)(c->qk_rope_head_dim / 2) * sizeof(float));
}

void di_ws_sizes(const di_model_config *cfg, int max_rows, int64_t max_context, int nthreads, size_t *dev_bytes,
                 size_t *host_bytes) {
    di_ws ws;
    memset(&ws, 0, sizeof ws);
    bump b = {NULL, 0}, bt = {NULL, 0};
    layout(&ws, cfg, max_rows, max_context, nthreads, &b);
    layout_tabs(&ws.t, cfg, max_rows, &bt);
    *dev_bytes = (b.off + 63) & ~(size_t)63;
    *host_bytes = (bt.off + 63) & ~(size_t)63;
}

deepinfer_status di_ws_alloc(di_ws *ws, const di_model_config *cfg, int max_rows, int64_t max_context, int nthreads,
                             di_error *err) {
    memset(ws, 0, sizeof *ws);
    size_t bytes, tbytes;
    di_ws_sizes(cfg, max_rows, max_context, nthreads, &bytes, &tbytes);
    void *mem = di_dev_alloc(bytes);
    void *tmem = aligned_alloc(64, tbytes);
    if (!mem || !tmem) {
        di_dev_free(mem);
        free(tmem);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the step workspace (%zu bytes)", bytes);
    }
    if (di_allocator_is_host()) di_dev_zero(mem, bytes); /* device backends: left poisoned (cu_exec.c) */
    memset(tmem, 0, tbytes);
    bump b2 = {mem, 0};
    layout(ws, cfg, max_rows, max_context, nthreads, &b2);
    bump bt2 = {tmem, 0};
    layout_tabs(&ws->t, cfg, max_rows, &bt2);
    ws->t.mem = tmem;
    ws->mem = mem;
    ws->bytes = bytes + tbytes;
    return DEEPINFER_OK;
}

void di_ws_free(di_ws *ws) {
    if (!ws) return;
    di_dev_free(ws->mem);
    free(ws->t.mem);
    memset(ws, 0, sizeof *ws);
}
