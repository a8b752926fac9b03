/* indexer.c — the lightning indexer (indexer.h). Rows are scored in groups
 * of one row per thread; within a group the key range of each row is split
 * over all threads (a score depends on its key and query only), then each
 * row's selection is taken. */
#include "model/indexer.h"

#include <math.h>
#include <stdlib.h>

#include "io/numfmt.h"
#include "model/compressor.h"

#define GROUP_MAX 64

typedef struct score_ctx {
    di_fwd *f;
    const di_layer_cfg *L;
    int m0, nrows;                  /* rows of this group */
    int64_t nvis[GROUP_MAX];        /* visible key rows per row of the group */
    int64_t kcap[GROUP_MAX];        /* rows its key store holds (more score 0) */
    const di_rowstore *ks[GROUP_MAX];
    const int *cand[GROUP_MAX];     /* kept candidate blocks (ascending), or NULL: every row */
    int ncand[GROUP_MAX];
} score_ctx;

static const di_seg *seg_of(const di_fwd *f, int m) {
    for (int s = 0; s < f->nseg; s++)
        if (m >= f->segs[s].row0 && m < f->segs[s].row0 + f->segs[s].nrows) return &f->segs[s];
    return NULL;
}

/* Scores of key rows [lo, hi) of group row i into sc (keys contiguous within a page). */
static void score_range(const score_ctx *c, int i, int64_t lo, int64_t hi, float *sc) {
    const di_fwd *f = c->f;
    int nh = (int)f->cfg->index_n_heads, ihd = (int)f->cfg->index_head_dim;
    int m = c->m0 + i;
    const di_rowstore *ks = c->ks[i];
    const uint16_t *q = f->ws->qi + (size_t)m * nh * ihd;
    const float *w = f->ws->iw + (size_t)m * nh;
    int64_t top = hi < c->kcap[i] ? hi : c->kcap[i];
    for (int64_t j = lo; j < top;) {
        int64_t in_page = ks->page_rows - j % ks->page_rows;
        int64_t cnt = top - j < in_page ? top - j : in_page;
        di_index_scores(q, nh, w, di_rowstore_row(ks, j), (size_t)ihd, (int)cnt, sc + j);
        j += cnt;
    }
    for (int64_t j = top > lo ? top : lo; j < hi; j++) sc[j] = 0.0f;
}

static void score_task(void *p, int t, int n) {
    score_ctx *c = p;
    di_fwd *f = c->f;
    int64_t total = 0;
    for (int i = 0; i < c->nrows; i++) total += c->nvis[i];
    size_t b, e;
    di_split_range((size_t)total, t, n, &b, &e);
    int64_t base = 0;
    int bs = (int)f->cfg->candidate_block_size;
    for (int i = 0; i < c->nrows && (size_t)base < e; i++) {
        int64_t lo = (int64_t)b > base ? (int64_t)b - base : 0, hi = (int64_t)e - base;
        if (hi > c->nvis[i]) hi = c->nvis[i];
        float *sc = f->ws->iscore + (size_t)i * f->ws->iscore_stride;
        if (lo < hi && !c->cand[i]) {
            score_range(c, i, lo, hi, sc);
        } else if (lo < hi) { /* only rows of the kept candidate blocks */
            for (int64_t j = lo; j < hi; j++) sc[j] = -INFINITY;
            for (int k = 0; k < c->ncand[i]; k++) {
                int64_t a = (int64_t)c->cand[i][k] * bs, z = a + bs;
                if (a < lo) a = lo;
                if (z > hi) z = hi;
                if (a < z) score_range(c, i, a, z, sc);
            }
        }
        base += c->nvis[i];
    }
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Ascending order of distinct row numbers (a selection); short ones by insertion. */
static void sort_ints(int *a, int n) {
    if (n > 32) {
        qsort(a, (size_t)n, sizeof(int), cmp_int);
        return;
    }
    for (int i = 1; i < n; i++) {
        int v = a[i], j = i;
        for (; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
        a[j] = v;
    }
}

/* The candidate source's first level (§5.5) for group row i. */
static void candidate_blocks(score_ctx *c, int i) {
    di_fwd *f = c->f;
    const di_model_config *cfg = f->cfg;
    int m = c->m0 + i, bs = (int)cfg->candidate_block_size, K = (int)cfg->candidate_topk_blocks;
    const float *sc = f->ws->iscore + (size_t)i * f->ws->iscore_stride;
    int *keep = f->ws->cand + (size_t)m * K;
    int64_t nvis = c->nvis[i];
    int nb = (int)((nvis + bs - 1) / bs);
    if (nb <= K) {
        for (int b = 0; b < nb; b++) keep[b] = b;
        f->ws->ncand[m] = nb;
        return;
    }
    float *bsc = f->ws->bscore + (size_t)i * f->ws->bscore_stride;
    for (int b = 0; b < nb; b++) {
        float mx = -INFINITY;
        for (int64_t j = (int64_t)b * bs; j < (int64_t)(b + 1) * bs && j < nvis; j++) mx = fmaxf(mx, sc[j]);
        bsc[b] = mx;
    }
    bsc[(nvis - 1) / bs] = INFINITY; /* the block of the newest visible row is always kept */
    f->ws->ncand[m] = di_topk_desc(bsc, nb, K, keep);
    sort_ints(keep, f->ws->ncand[m]);
}

static void topk_task(void *p, int t, int n) {
    score_ctx *c = p;
    di_fwd *f = c->f;
    int K = (int)f->cfg->index_topk, v41 = f->cfg->arch == DI_ARCH_V41;
    size_t b, e;
    di_split_range((size_t)c->nrows, t, n, &b, &e);
    for (size_t i = b; i < e; i++) {
        int m = c->m0 + (int)i;
        if (c->L->is_candidate_source) candidate_blocks(c, (int)i);
        int *sel = f->ws->topk + (size_t)m * K;
        f->ws->ntopk[m] = di_topk_desc(f->ws->iscore + i * f->ws->iscore_stride, (int)c->nvis[i], K, sel);
        if (v41) sort_ints(sel, f->ws->ntopk[m]); /* the reference keeps row order */
    }
}

/* Which key store row m scores, and how many rows it holds at this point of the step. */
static void key_store(const di_fwd *f, const di_layer_cfg *L, int layer, int m, const di_rowstore **ks,
                      int64_t *cap) {
    const di_seg *sg = seg_of(f, m);
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

void di_indexer_run(di_fwd *f, const di_indexer_w *iw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                    const uint16_t *qr) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, d = (int)c->hidden_size, nh = (int)c->index_n_heads, ihd = (int)c->index_head_dim;
    index_query(f, iw, L, qr);
    if (iw->cmp.ratio) di_compressor_run(f, &iw->cmp, L, layer, DI_CMP_INDEX, xn); /* V4: this step's keys */
    /* head weights (bf16 linear, then the bf16 product with the scale) */
    di_gemm(f->x, M, xn, (size_t)d, &iw->wproj, 0, ws->iw, NULL, (size_t)nh);
    float scale = (float)(1.0 / sqrt((double)ihd) / sqrt((double)nh));
    for (size_t i = 0; i < (size_t)M * nh; i++) ws->iw[i] = di_round_bf16(di_round_bf16(ws->iw[i]) * scale);
    /* scores and top-k, one group of rows at a time */
    int group = ws->nthreads < GROUP_MAX ? ws->nthreads : GROUP_MAX;
    if (group < 1) group = 1;
    int restricted = L->candidate_layer >= 0;
    for (int m0 = 0; m0 < M; m0 += group) {
        score_ctx sc = {.f = f, .L = L, .m0 = m0, .nrows = M - m0 < group ? M - m0 : group};
        int64_t total = 0;
        for (int i = 0; i < sc.nrows; i++) {
            int m = m0 + i;
            sc.nvis[i] = (f->pos[m] + 1) / L->ratio;
            key_store(f, L, layer, m, &sc.ks[i], &sc.kcap[i]);
            sc.cand[i] = restricted ? ws->cand + (size_t)m * c->candidate_topk_blocks : NULL;
            sc.ncand[i] = restricted ? ws->ncand[m] : 0;
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
