/* dsv41_lanes.c — V4.1 decode steps run as lanes of whole sequences, one
 * thread each (lanes.h says why and why results are unchanged). Lane 0
 * uses the model's own core; the others get a core and an Engram workspace
 * of DI_LANE_ROWS rows each, made on the first step that needs them. */
#include <stdlib.h>

#include "model/dsv41_internal.h"
#include "ops/cpu/threadpool.h"

struct di_v41_lane {
    di_core core;
    di_engram_workspace eng_ws;
};

void di_v41_set_lanes(di_v41_model *m, int n) { m->lanes_max = n; }

/* $DEEPINFER_LANES (1..DI_LANES_MAX) caps the lanes of a step; 1 keeps every
 * step op-parallel (for measurement: lanes vs op regions, bench/cpu-notes.md). */
static int env_lanes(void) {
    const char *e = getenv("DEEPINFER_LANES");
    int v = e && *e ? atoi(e) : 0;
    return v >= 1 && v <= DI_LANES_MAX ? v : 0;
}

int di_v41_lanes_plan(const di_v41_model *m, const di_v4_batch *b, int *start) {
    if (di_exec_on_device(&m->core.x) || m->core.index_obs) return 1; /* observer: called in row order */
    int max = m->lanes_max ? m->lanes_max : env_lanes();
    if (!max) max = di_threadpool_size(m->core.x.tp);
    return di_lanes_plan(b, max, start);
}

void di_v41_lanes_free(di_v41_model *m) {
    for (int i = 0; i < m->n_lane; i++) {
        di_engram_workspace_free(&m->lane[i].eng_ws);
        di_core_free(&m->lane[i].core);
    }
    free(m->lane);
    m->lane = NULL;
    m->n_lane = 0;
}

/* Lane state for lanes 1..nl-1 (kept for later steps). */
static deepinfer_status ensure_lanes(di_v41_model *m, int nl, di_error *err) {
    if (nl - 1 <= m->n_lane) return DEEPINFER_OK;
    struct di_v41_lane *a = realloc(m->lane, (size_t)(nl - 1) * sizeof *a);
    if (!a) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for lane state");
    m->lane = a;
    for (; m->n_lane < nl - 1; m->n_lane++) {
        struct di_v41_lane *ln = &m->lane[m->n_lane];
        deepinfer_status st = di_core_init_lane(&ln->core, &m->core, DI_LANE_ROWS, err);
        ln->eng_ws = (di_engram_workspace){0};
        if (!st && m->w.n_engram) st = di_engram_workspace_init(&ln->eng_ws, &m->w.engram[0], DI_LANE_ROWS, err);
        if (st) {
            di_engram_workspace_free(&ln->eng_ws);
            di_core_free(&ln->core);
            return st;
        }
    }
    return DEEPINFER_OK;
}

typedef struct lane_ctx {
    di_v41_model *m;
    const di_v4_batch *b;
} lane_ctx;

static deepinfer_status run_lane(void *p, int lane, int r0, int n, di_error *err) {
    lane_ctx *c = p;
    di_v41_model *m = c->m;
    if (!lane) return di_v41_forward_rows(m, &m->core, &m->eng_ws, c->b, r0, n, err);
    struct di_v41_lane *ln = &m->lane[lane - 1];
    return di_v41_forward_rows(m, &ln->core, &ln->eng_ws, c->b, r0, n, err);
}

deepinfer_status di_v41_lanes_forward(di_v41_model *m, const di_v4_batch *b, int nl, const int *start, di_error *err) {
    if (ensure_lanes(m, nl, err)) /* no memory for more lanes: the op-parallel path */
        return di_v41_forward_rows(m, &m->core, &m->eng_ws, b, 0, b->n, err);
    lane_ctx c = {m, b};
    return di_lanes_run(nl, start, run_lane, &c, err);
}
