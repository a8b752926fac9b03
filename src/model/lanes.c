/* lanes.c — split a step into lanes of whole sequences and run them (lanes.h). */
#include "model/lanes.h"

#include "ops/cpu/threadpool.h"

/* End (exclusive) of the sequence piece that starts at row i. */
static int seg_end(const di_v4_batch *b, int i) {
    int j = i + 1;
    while (j < b->n && b->seq[j] == b->seq[i]) j++;
    return j;
}

int di_lanes_plan(const di_v4_batch *b, int max_lanes, int *start) {
    if (max_lanes > DI_LANES_MAX) max_lanes = DI_LANES_MAX;
    if (max_lanes < 2 || b->n < 2) return 1;
    int nseg = 0;
    for (int i = 0; i < b->n;) {
        int j = seg_end(b, i);
        if (j - i > DI_LANE_SEG_ROWS) return 1;
        nseg++;
        i = j;
    }
    int nl = nseg < max_lanes ? nseg : max_lanes;
    if (nl < 2) return 1;
    /* lane l ends at the first sequence boundary at or past row n(l+1)/nl,
     * leaving at least one sequence to each later lane */
    int i = 0, left = nseg;
    start[0] = 0;
    for (int l = 0; l < nl - 1; l++) {
        long target = (long)b->n * (l + 1) / nl;
        do {
            i = seg_end(b, i);
            left--;
        } while (i < target && left > nl - 1 - l);
        start[l + 1] = i;
    }
    start[nl] = b->n;
    return nl;
}

typedef struct lanes_ctx {
    const int *start;
    di_lane_fn fn;
    void *ctx;
    deepinfer_status st[DI_LANES_MAX];
    di_error err[DI_LANES_MAX];
} lanes_ctx;

static void lane_task(void *p, int t, int n) {
    (void)n;
    lanes_ctx *c = p;
    c->st[t] = c->fn(c->ctx, t, c->start[t], c->start[t + 1] - c->start[t], &c->err[t]);
}

deepinfer_status di_lanes_run(int nl, const int *start, di_lane_fn fn, void *ctx, di_error *err) {
    lanes_ctx c; /* st[] is written by every lane; err[] is read only where st[] failed */
    c.start = start;
    c.fn = fn;
    c.ctx = ctx;
    di_threadpool_run_n(di_threadpool_global(), nl, lane_task, &c);
    for (int l = 0; l < nl; l++)
        if (c.st[l]) {
            if (err) *err = c.err[l];
            return c.st[l];
        }
    return DEEPINFER_OK;
}
