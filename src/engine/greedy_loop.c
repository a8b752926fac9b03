/* greedy_loop.c — the greedy decode loop of the benchmarks and the GPU
 * tests (greedy_loop.h): eager, or recorded steps with the device argmax. */
#include "engine/greedy_loop.h"

#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/ops.h"

static int32_t argmax_row(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* The next input of a sequence: the argmax, kept a text token (V4.1 refuses the image token). */
static int32_t next_input(const di_model_config *c, int32_t id) {
    return id == c->image_token_id ? (int32_t)((id + 1) % c->vocab_size) : id;
}

deepinfer_status di_greedy_loop_run(di_greedy_loop *L, di_error *err) {
    di_model *m = L->model;
    const di_model_config *c = di_model_cfg(m);
    di_exec *x = di_model_exec(m);
    const float *dlogits = di_model_device_logits(m);
    int n = L->nseq, V = (int)c->vocab_size, dev = di_exec_on_device(x);
    if (n < 1 || n > di_model_max_rows(m))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "decode loop: %d sequences (1..%d)", n,
                            di_model_max_rows(m));
    if (L->graph && !dev) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "decode loop: graphs need the CUDA backend");
    /* recorded steps: the device argmax feeds the next step (no host tokens) when the model reads
     * its tokens on the device (di_model_device_tokens; V4.1's Engram hash too, ops.h
     * di_engram_hash_rows); a model with an image token reads the ids back, since an argmax equal
     * to it is replaced by a text token on the host (next_input) */
    int host_ids = !L->graph || c->image_token_id >= 0 || !di_model_device_tokens(m);
    /* where the device argmax writes: the model's token buffer when the next step reads it there,
     * else a buffer of the loop's own (ids read back to the host) */
    int32_t *dtok = L->graph && !host_ids ? di_model_device_tokens(m) : NULL, *own = NULL;
    if (L->graph && !dtok) dtok = own = di_dev_alloc(sizeof *own * (size_t)n);
    int32_t *tok = malloc(sizeof *tok * (size_t)n), *ids = malloc(sizeof *ids * (size_t)n);
    int64_t *pos = malloc(sizeof *pos * (size_t)n);
    int *rows = malloc(sizeof *rows * (size_t)n);
    float *lbuf = L->graph ? NULL : malloc(sizeof *lbuf * (size_t)n * V);
    deepinfer_status st = tok && ids && pos && rows && (L->graph || lbuf) && (!L->graph || dtok)
                              ? DEEPINFER_OK
                              : di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "decode loop: out of memory");
    int64_t bound = 0;
    for (int i = 0; i < n && !st; i++) {
        tok[i] = next_input(c, L->first[i]);
        rows[i] = i;
        if (L->seq[i]->n_tokens + L->steps > bound) bound = L->seq[i]->n_tokens + L->steps;
    }
    if (!st && dev) st = di_backend_plan_enable(x, bound, L->steps, err);
    if (!st && L->graph && !host_ids) /* the first inputs; later ones come from the device argmax */
        di_copy_h2d(x, dtok, tok, sizeof *tok * (size_t)n);
    for (int s = 0; s < L->steps && !st; s++) {
        for (int i = 0; i < n; i++) pos[i] = L->seq[i]->n_tokens;
        di_model_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = L->seq, .n_logits = n, .logit_rows = rows,
                            .logits = lbuf, .tokens_on_device = L->graph && !host_ids, .logits_on_device = L->graph};
        if (L->graph) {
            if ((st = di_backend_step_begin(x, (uint64_t)n, err))) break;
            di_backend_argmax_fuse(x, n, dlogits, V, dtok); /* the lm_head may write the ids */
            st = di_model_forward(m, &b, err);
            di_backend_argmax_rest(x, n, dlogits, V, dtok);
            deepinfer_status e2 = di_backend_step_end(x, err);
            if (!st) st = e2;
            if (st) break;
            if (host_ids || L->ids) di_copy_d2h(x, ids, dtok, sizeof *ids * (size_t)n);
            if (L->logits) di_copy_d2h(x, L->logits + (size_t)s * n * V, dlogits, sizeof(float) * (size_t)n * V);
        } else {
            di_backend_step_mark(x, 0);
            if ((st = di_model_forward(m, &b, err))) break;
            di_backend_step_mark(x, 1);
            for (int i = 0; i < n; i++) ids[i] = argmax_row(lbuf + (size_t)i * V, V);
            if (L->logits) memcpy(L->logits + (size_t)s * n * V, lbuf, sizeof(float) * (size_t)n * V);
        }
        if (L->ids) memcpy(L->ids + (size_t)s * n, ids, sizeof *ids * (size_t)n);
        if (host_ids)
            for (int i = 0; i < n; i++) tok[i] = next_input(c, ids[i]);
    }
    if (dev && !st) st = di_exec_sync(x, err); /* recorded steps: the first failure, if any */
    if (dev) {
        if (!st && L->busy_ms) di_backend_step_times(x, L->busy_ms, L->start_ms, L->steps);
        di_backend_plan_stats s;
        L->ngraphs = di_backend_plan_stats_get(x, &s) ? 0 : s.graphs;
        di_backend_plan_disable(x);
    }
    di_dev_free(own);
    free(tok), free(ids), free(pos), free(rows), free(lbuf);
    return st;
}
