/* index_select.c — the lightning indexer's selection for a whole step (ops.h
 * di_index_select). Rows are scored in groups of one row per thread; within
 * a group the key range of each row is split over all threads (a score
 * depends on its key and query only), then each row's selection is taken. */
#include <math.h>
#include <stdlib.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

#define GROUP_MAX 64
#define IHD 128

typedef struct score_ctx {
    const di_index_select_args *a;
    int m0, nrows; /* rows of this group */
} score_ctx;

/* Scores of key rows [lo, hi) of row m into sc (keys contiguous within a page). */
static void score_range(const di_index_select_args *a, int m, int64_t lo, int64_t hi, float *sc) {
    int nh = a->nh;
    uint16_t *const *pages = a->kpages[m];
    const uint16_t *q = a->q + (size_t)m * nh * IHD;
    const float *w = a->w + (size_t)m * nh;
    int64_t top = hi < a->kcap[m] ? hi : a->kcap[m];
    for (int64_t j = lo; j < top;) {
        int pr = a->page_rows[m];
        int64_t in_page = pr - j % pr;
        int64_t cnt = top - j < in_page ? top - j : in_page;
        const uint16_t *k = pages[j / pr] + (size_t)(j % pr) * IHD;
        di_index_scores(q, nh, w, k, (size_t)IHD, (int)cnt, sc + j);
        j += cnt;
    }
    for (int64_t j = top > lo ? top : lo; j < hi; j++) sc[j] = 0.0f;
}

static void score_task(void *p, int t, int n) {
    score_ctx *c = p;
    const di_index_select_args *a = c->a;
    int64_t total = 0;
    for (int i = 0; i < c->nrows; i++) total += a->nvis[c->m0 + i];
    size_t b, e;
    di_split_range((size_t)total, t, n, &b, &e);
    int64_t base = 0;
    int bs = a->bs;
    for (int i = 0; i < c->nrows && (size_t)base < e; i++) {
        int m = c->m0 + i;
        int64_t nvis = a->nvis[m];
        int64_t lo = (int64_t)b > base ? (int64_t)b - base : 0, hi = (int64_t)e - base;
        if (hi > nvis) hi = nvis;
        float *sc = a->iscore + (size_t)i * a->iscore_stride;
        if (lo < hi && !a->cand_in) {
            score_range(a, m, lo, hi, sc);
        } else if (lo < hi) { /* only rows of the kept candidate blocks */
            const int *cand = a->cand_in + (size_t)m * a->KB;
            for (int64_t j = lo; j < hi; j++) sc[j] = -INFINITY;
            for (int k = 0; k < a->ncand_in[m]; k++) {
                int64_t s0 = (int64_t)cand[k] * bs, z = s0 + bs;
                if (s0 < lo) s0 = lo;
                if (z > hi) z = hi;
                if (s0 < z) score_range(a, m, s0, z, sc);
            }
        }
        base += nvis;
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
static void candidate_blocks(const score_ctx *c, int i) {
    const di_index_select_args *a = c->a;
    int m = c->m0 + i, bs = a->bs, K = a->KB;
    const float *sc = a->iscore + (size_t)i * a->iscore_stride;
    int *keep = a->cand_out + (size_t)m * K;
    int64_t nvis = a->nvis[m];
    int nb = (int)((nvis + bs - 1) / bs);
    if (nb <= K) {
        for (int b = 0; b < nb; b++) keep[b] = b;
        a->ncand_out[m] = nb;
        return;
    }
    float *bsc = a->bscore + (size_t)i * a->bscore_stride;
    for (int b = 0; b < nb; b++) {
        float mx = -INFINITY;
        for (int64_t j = (int64_t)b * bs; j < (int64_t)(b + 1) * bs && j < nvis; j++) mx = fmaxf(mx, sc[j]);
        bsc[b] = mx;
    }
    bsc[(nvis - 1) / bs] = INFINITY; /* the block of the newest visible row is always kept */
    a->ncand_out[m] = di_topk_desc(bsc, nb, K, keep);
    sort_ints(keep, a->ncand_out[m]);
}

static void topk_task(void *p, int t, int n) {
    score_ctx *c = p;
    const di_index_select_args *a = c->a;
    int K = a->K;
    size_t b, e;
    di_split_range((size_t)c->nrows, t, n, &b, &e);
    for (size_t i = b; i < e; i++) {
        int m = c->m0 + (int)i;
        if (a->cand_out) candidate_blocks(c, (int)i);
        int *sel = a->topk + (size_t)m * K;
        a->ntopk[m] = di_topk_desc(a->iscore + i * a->iscore_stride, (int)a->nvis[m], K, sel);
        if (a->sort_sel) sort_ints(sel, a->ntopk[m]); /* the reference keeps row order */
    }
}

void di_cpu_index_select(di_exec *x, const di_index_select_args *a) {
    int group = a->nscratch < GROUP_MAX ? a->nscratch : GROUP_MAX;
    if (group < 1) group = 1;
    di_threadpool *tp = x->tp;
    for (int m0 = 0; m0 < a->M; m0 += group) {
        score_ctx sc = {.a = a, .m0 = m0, .nrows = a->M - m0 < group ? a->M - m0 : group};
        int64_t total = 0;
        for (int i = 0; i < sc.nrows; i++) total += a->nvis[m0 + i];
        di_threadpool_run_n(tp, di_chunks_for(tp, (double)total * a->nh * IHD, (double)(1 << 17), (int)(total < 1 ? 1 : total)),
                            score_task, &sc);
        di_threadpool_run_n(tp, di_chunks_for(tp, (double)total * 8, (double)(1 << 14), sc.nrows), topk_task, &sc);
    }
}
