/* indexer.c — the V4 lightning indexer (indexer.h). Rows are scored in
 * groups of one row per thread; within a group the key range of each row is
 * split over all threads (a score depends on its key and query only), then
 * each row's top-k is taken. */
#include "model/indexer.h"

#include <math.h>

#include "io/numfmt.h"
#include "model/compressor.h"

typedef struct score_ctx {
    di_fwd *f;
    const di_layer_cfg *L;
    int layer;
    int m0, nrows;        /* rows of this group */
    int64_t nvis[64];     /* visible key rows per row of the group */
} score_ctx;

/* Which row of the step a group row is, and its sequence's layer state. */
static const di_seg *seg_of(const di_fwd *f, int m) {
    for (int s = 0; s < f->nseg; s++)
        if (m >= f->segs[s].row0 && m < f->segs[s].row0 + f->segs[s].nrows) return &f->segs[s];
    return NULL;
}

static void score_task(void *p, int t, int n) {
    score_ctx *c = p;
    di_fwd *f = c->f;
    const di_model_config *cfg = f->cfg;
    int nh = (int)cfg->index_n_heads, ihd = (int)cfg->index_head_dim;
    int64_t total = 0;
    for (int i = 0; i < c->nrows; i++) total += c->nvis[i];
    size_t b, e;
    di_split_range((size_t)total, t, n, &b, &e);
    int64_t base = 0;
    for (int i = 0; i < c->nrows && (size_t)base < e; i++) {
        int64_t lo = (int64_t)b > base ? (int64_t)b - base : 0, hi = (int64_t)e - base;
        if (hi > c->nvis[i]) hi = c->nvis[i];
        int m = c->m0 + i;
        const di_rowstore *ks = &seg_of(f, m)->seq->layers[c->layer].ikey;
        float *sc = f->ws->iscore + (size_t)i * f->ws->iscore_stride;
        const uint16_t *q = f->ws->qi + (size_t)m * nh * ihd;
        const float *w = f->ws->iw + (size_t)m * nh;
        for (int64_t j = lo; j < hi;) {
            /* keys are contiguous within a page */
            int64_t in_page = ks->page_rows - j % ks->page_rows;
            int64_t cnt = hi - j < in_page ? hi - j : in_page;
            di_index_scores(q, nh, w, di_rowstore_row(ks, j), (size_t)ihd, (int)cnt, sc + j);
            j += cnt;
        }
        base += c->nvis[i];
    }
}

static void topk_task(void *p, int t, int n) {
    score_ctx *c = p;
    di_fwd *f = c->f;
    int K = (int)f->cfg->index_topk;
    size_t b, e;
    di_split_range((size_t)c->nrows, t, n, &b, &e);
    for (size_t i = b; i < e; i++) {
        int m = c->m0 + (int)i;
        f->ws->ntopk[m] =
            di_topk_desc(f->ws->iscore + i * f->ws->iscore_stride, (int)c->nvis[i], K, f->ws->topk + (size_t)m * K);
    }
}

void di_indexer_run(di_fwd *f, const di_indexer_w *iw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                    const uint16_t *qr) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, d = (int)c->hidden_size, nh = (int)c->index_n_heads, ihd = (int)c->index_head_dim;
    int rd = (int)c->qk_rope_head_dim;
    /* query: wq_b, RoPE tail, Hadamard, FP4 simulation */
    di_gemm(f->x, M, qr, (size_t)c->q_lora_rank, &iw->wq_b, c->act_block, NULL, ws->qi, (size_t)nh * ihd);
    di_rope_tab(f->x, M, ws->qi, (size_t)nh * ihd, nh, ihd, rd, di_fwd_rope_cs(f, L), di_fwd_rope_sn(f, L), 0);
    di_hadamard128(f->x, M, ws->qi, (size_t)nh * ihd, nh * ihd / 128);
    di_qat_fp4(f->x, M, ws->qi, (size_t)nh * ihd, nh * ihd, 32);
    /* index keys of this step's tokens */
    di_compressor_run(f, &iw->cmp, L, layer, DI_CMP_INDEX, xn);
    /* head weights (bf16 linear, then the bf16 product with the scale) */
    di_gemm(f->x, M, xn, (size_t)d, &iw->wproj, 0, ws->iw, NULL, (size_t)nh);
    float scale = (float)(1.0 / sqrt((double)ihd) / sqrt((double)nh));
    for (size_t i = 0; i < (size_t)M * nh; i++) ws->iw[i] = di_round_bf16(di_round_bf16(ws->iw[i]) * scale);
    /* scores and top-k, one group of rows at a time */
    int group = ws->nthreads < 64 ? ws->nthreads : 64;
    if (group < 1) group = 1;
    for (int m0 = 0; m0 < M; m0 += group) {
        score_ctx sc = {.f = f, .L = L, .layer = layer, .m0 = m0, .nrows = M - m0 < group ? M - m0 : group};
        int64_t total = 0;
        for (int i = 0; i < sc.nrows; i++) {
            sc.nvis[i] = (f->pos[m0 + i] + 1) / L->ratio;
            total += sc.nvis[i];
        }
        di_threadpool *tp = f->x->tp;
        di_threadpool_run_n(tp, di_chunks_for(tp, (double)total * nh * ihd, (double)(1 << 17), (int)(total < 1 ? 1 : total)),
                            score_task, &sc);
        di_threadpool_run_n(tp, di_chunks_for(tp, (double)total * 8, (double)(1 << 14), sc.nrows), topk_task, &sc);
    }
    if (f->index_obs)
        for (int m = 0; m < M; m++)
            f->index_obs(f->index_obs_ctx, layer, f->pos[m], ws->topk + (size_t)m * c->index_topk, ws->ntopk[m]);
}
