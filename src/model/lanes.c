/* lanes.c — split a step into lanes of whole sequences and run them (lanes.h). */
#include "model/lanes.h"

#include <stdlib.h>

#include "ops/cpu/threadpool.h"

int di_lanes_plan_core(const di_core *main, int lanes_max, size_t step_weight_bytes, const di_v4_batch *b, int *start) {
    if (di_exec_on_device(&main->x) || main->index_obs) return 1;
    int max = lanes_max;
    if (!max) max = step_weight_bytes <= DI_LANE_WEIGHT_BYTES ? di_threadpool_size(main->x.tp) : 1;
    return di_lanes_plan(b, max, start);
}

deepinfer_status di_lane_cores_ensure(di_lane_cores *l, const di_core *main, int nl, di_error *err) {
    for (; l->n < nl - 1; l->n++) {
        di_core *c = malloc(sizeof *c);
        if (!c) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for lane state");
        deepinfer_status st = di_core_init_lane(c, main, DI_LANE_ROWS, err);
        if (st) {
            di_core_free(c);
            free(c);
            return st;
        }
        l->c[l->n] = c;
    }
    return DEEPINFER_OK;
}

void di_lane_cores_free(di_lane_cores *l) {
    for (int i = 0; i < l->n; i++) {
        di_core_free(l->c[i]);
        free(l->c[i]);
    }
    l->n = 0;
}

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
