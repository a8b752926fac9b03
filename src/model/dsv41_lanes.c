/* dsv41_lanes.c — V4.1 decode steps run as lanes of whole sequences, one
 * thread each (lanes.h says why and why results are unchanged). Lane 0
 * uses the model's own core and Engram workspace; lane i > 0 a lane core
 * (lanes.c) and an Engram workspace of DI_LANE_ROWS rows, made on the
 * first step that needs them. */
#include "model/dsv41_internal.h"

void di_v41_set_lanes(di_v41_model *m, int n) { m->lanes_max = m->ep ? 1 : n; }

int di_v41_lanes_plan(const di_v41_model *m, const di_v4_batch *b, int *start) {
    return di_lanes_plan_core(&m->core, m->lanes_max, m->step_weight_bytes, b, start);
}

void di_v41_lanes_free(di_v41_model *m) {
    for (int i = 0; i < m->lanes.n; i++) di_engram_workspace_free(&m->lane_eng[i]);
    di_lane_cores_free(&m->lanes);
}

/* Lane state for lanes 1..nl-1 (kept for later steps). */
static deepinfer_status ensure_lanes(di_v41_model *m, int nl, di_error *err) {
    int had = m->lanes.n;
    deepinfer_status st = di_lane_cores_ensure(&m->lanes, &m->core, nl, err);
    for (int i = had; i < m->lanes.n; i++) {
        m->lane_eng[i] = (di_engram_workspace){0};
        if (m->w.n_engram && !st) st = di_engram_workspace_init(&m->lane_eng[i], &m->w.engram[0], DI_LANE_ROWS, err);
    }
    if (st) di_v41_lanes_free(m); /* all or nothing: a later step tries again from scratch */
    return st;
}

typedef struct lane_ctx {
    di_v41_model *m;
    const di_v4_batch *b;
} lane_ctx;

static deepinfer_status run_lane(void *p, int lane, int r0, int n, di_error *err) {
    lane_ctx *c = p;
    di_v41_model *m = c->m;
    if (!lane) return di_v41_forward_rows(m, &m->core, &m->eng_ws, c->b, r0, n, err);
    return di_v41_forward_rows(m, m->lanes.c[lane - 1], &m->lane_eng[lane - 1], c->b, r0, n, err);
}

deepinfer_status di_v41_lanes_forward(di_v41_model *m, const di_v4_batch *b, int nl, const int *start, di_error *err) {
    if (ensure_lanes(m, nl, err)) /* no memory for more lanes: the op-parallel path */
        return di_v41_forward_rows(m, &m->core, &m->eng_ws, b, 0, b->n, err);
    lane_ctx c = {m, b};
    return di_lanes_run(nl, start, run_lane, &c, err);
}
