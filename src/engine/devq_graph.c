/* devq_graph.c — recorded decode and verify steps for the queue
 * (devq_graph.h). */
#include "engine/devq_graph.h"

#include "ops/backend.h"
#include "ops/ops.h"

/* Row counts recorded before any plan size is measured: at most 64 (a
 * verify step of 8 sequences with 5 drafts each has 48 rows), and
 * only as many as fit by an upper bound of a decode step's plan bytes: per
 * layer 16 KiB of fixed tables (every table starts at a 256-byte boundary)
 * and, per row, 2 KiB of row tables plus two page tables that reserve a
 * page for every position below the bound (the attention's compressed KV,
 * the indexer's keys). The plan (64 MiB) holds the tables of one step. */
enum { ROWS_BOOTSTRAP = 64 };

static int bootstrap_rows(const di_model *m, int page_rows) {
    di_backend_plan_stats s;
    size_t cap = (size_t)64 << 20;
    if (!di_backend_plan_stats_get(di_model_exec((di_model *)m), &s) && s.cap_bytes) cap = s.cap_bytes;
    size_t layers = (size_t)di_model_cfg(m)->n_layers;
    size_t pages = (size_t)(di_model_max_context(m) + 1) / (size_t)(page_rows > 0 ? page_rows : 1) + 2;
    size_t fixed = layers * 16384, per_row = layers * (2048 + 2 * 8 * pages);
    size_t room = cap / 4 * 3;
    size_t r = room > fixed ? (room - fixed) / per_row : 0;
    return r < ROWS_BOOTSTRAP ? (int)r : ROWS_BOOTSTRAP;
}

void di_devq_graph_init(di_devq_graph *g, di_model *m, int want, int page_rows) {
    *g = (di_devq_graph){.model = m, .x = di_model_exec(m), .dlogits = di_model_device_logits(m),
                         .V = (size_t)di_model_cfg(m)->vocab_size, .max_rows = di_model_max_rows(m)};
    if (!want || !g->dlogits || !di_exec_on_device(g->x)) return;
    di_error err = {0};
    g->on = di_backend_plan_enable(g->x, di_model_max_context(m), 0, &err) == DEEPINFER_OK; /* else: eager */
    if (g->on) g->rows_ok = bootstrap_rows(m, page_rows);
}

void di_devq_graph_free(di_devq_graph *g) {
    if (g->on) di_backend_plan_disable(g->x);
    g->on = 0;
}

void di_devq_graph_set_hidden(di_devq_graph *g, const void *buf) { g->hidden = buf; }

/* The rows of every segment of b when they are all L consecutive rows of one sequence, else 0. */
static int uniform_rows(const di_model_batch *b) {
    int L = 1;
    while (L < b->n && b->seq[L] == b->seq[0]) L++;
    if (b->n % L) return 0;
    for (int i = 0; i < b->n; i++) {
        int first = i % L == 0;
        if (first != (i == 0 || b->seq[i] != b->seq[i - 1])) return 0; /* a segment of another length */
        if (!first && b->pos[i] != b->pos[i - 1] + 1) return 0;
    }
    return L;
}

int di_devq_graph_takes(const di_devq_graph *g, const di_model_batch *b) {
    if (!g->on || b->n < 1 || b->n > g->max_rows || b->n > g->rows_ok || b->n_logits != b->n) return 0;
    if (b->logits_on_device || (b->hidden && b->target_hidden)) return 0;
    const void *h = b->hidden ? (const void *)b->hidden : (const void *)b->target_hidden;
    if (h && h != g->hidden) return 0; /* a graph writes the buffer it was captured with */
    for (int i = 0; i < b->n; i++)
        if (b->logit_rows[i] != i) return 0; /* every row sampled */
    int L = uniform_rows(b);
    return L == 1 || (L > 1 && !b->late_from); /* verify groups: never a compact-prefill step */
}

/* After a recorded step of `rows` rows: every row count whose tables fit
 * in 3/4 of the plan at the measured bytes per row (an upper bound per row
 * for larger steps: the fixed part is spread over fewer rows). */
static void learn(di_devq_graph *g, int rows) {
    di_backend_plan_stats s;
    if (di_backend_plan_stats_get(g->x, &s) || !s.last_bytes) return;
    size_t per_row = (s.last_bytes + (size_t)rows - 1) / (size_t)rows;
    size_t fit = s.cap_bytes / 4 * 3 / per_row;
    if (fit > (size_t)g->max_rows) fit = (size_t)g->max_rows;
    if ((int)fit > g->rows_ok) g->rows_ok = (int)fit;
}

deepinfer_status di_devq_graph_run(di_devq_graph *g, const di_model_batch *in, di_error *err) {
    di_model_batch b = *in;
    b.logits_on_device = 1; /* read only after the step's end (no host read inside a recorded step) */
    /* the key: the row count, the rows per sequence (1: decode; 1 + k: verify groups of k drafts), where the
     * tokens come from and whether the drafter's input is written; with uniform segments they fix every
     * launch shape and table offset (the compressors pad their emissions in recorded steps, page-table
     * reserves cover every position of the bound), and cu_plan.c checks each replay against its graph */
    uint64_t L = (uint64_t)uniform_rows(&b);
    int hid = b.hidden || b.target_hidden;
    uint64_t key = (uint64_t)b.n | (uint64_t)(b.tokens_on_device != 0) << 32 | L << 33 | (uint64_t)hid << 48;
    deepinfer_status st = di_backend_step_begin(g->x, key, err);
    if (st) return st;
    if ((st = di_model_forward(g->model, &b, err))) {
        di_backend_step_abort(g->x);
        return st;
    }
    if ((st = di_backend_step_end(g->x, err))) return st;
    g->steps++;
    learn(g, b.n);
    return DEEPINFER_OK;
}

deepinfer_status di_devq_graph_forward(di_devq_graph *g, const di_model_batch *b, float *logits, di_error *err) {
    deepinfer_status st = di_devq_graph_run(g, b, err);
    if (st) return st;
    di_copy_d2h(g->x, logits, g->dlogits, sizeof(float) * (size_t)b->n_logits * g->V);
    return di_exec_sync(g->x, err); /* the step's first failure, if any */
}

void di_devq_graph_counts(const di_devq_graph *g, int *graphs, int64_t *steps) {
    di_backend_plan_stats s;
    *graphs = 0;
    *steps = 0;
    if (!g->on || di_backend_plan_stats_get(g->x, &s)) return;
    *graphs = s.graphs; /* the plan's: the drafter's recorded shapes too (model/draft.h record) */
    *steps = g->steps;
}
