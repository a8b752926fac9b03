/* runner.c — plan → device step (runner.h). */
#include "engine/runner.h"

#include <stdlib.h>
#include <string.h>

deepinfer_status di_runner_init(di_runner *r, di_state_pool *pool, int max_rows, int max_items, di_error *err) {
    memset(r, 0, sizeof *r);
    r->pool = pool;
    r->max_rows = max_rows;
    r->max_items = max_items;
    for (int b = 0; b < 2; b++) {
        di_step_buf *s = &r->buf[b];
        s->tokens = malloc(sizeof(int32_t) * (size_t)max_rows);
        s->pos = malloc(sizeof(int64_t) * (size_t)max_rows);
        s->late_from = malloc(sizeof(int64_t) * (size_t)max_rows);
        s->seq = malloc(sizeof(di_seq_state *) * (size_t)max_rows);
        s->src = malloc(sizeof(int32_t) * (size_t)max_rows);
        s->dsrc = malloc(sizeof(int32_t) * (size_t)max_rows);
        s->samples = malloc(sizeof(di_sample_spec) * (size_t)max_items);
        s->ops = malloc(sizeof(di_state_op) * (size_t)max_items);
        s->items = malloc(sizeof(di_step_item) * (size_t)max_items);
        s->plp = malloc(sizeof(di_plp_spec) * (size_t)max_rows);
        if (!s->tokens || !s->pos || !s->late_from || !s->seq || !s->src || !s->dsrc || !s->samples || !s->ops ||
            !s->items || !s->plp) {
            di_runner_free(r);
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for step buffers");
        }
    }
    return DEEPINFER_OK;
}

void di_runner_free(di_runner *r) {
    for (int b = 0; b < 2; b++) {
        di_step_buf *s = &r->buf[b];
        free(s->tokens), free(s->pos), free(s->late_from), free(s->seq), free(s->src), free(s->dsrc);
        free(s->samples), free(s->ops), free(s->items), free(s->spec), free(s->plp);
    }
    memset(r, 0, sizeof *r);
}

/* The sampling spec of the row that ends choice c's item. */
static void fill_sample(di_sample_spec *sp, di_choice *c, int64_t position, int row, const uint32_t *mask) {
    di_request *q = c->req;
    int32_t k = c->n_out + c->n_pending; /* outputs before this one */
    int K = q->params.logprobs > 0 ? q->params.logprobs : 0;
    *sp = (di_sample_spec){.params = &q->params,
                           .seed = q->seed,
                           .stream = (uint32_t)c->index,
                           .position = position,
                           .prompt = q->prompt,
                           .n_prompt = q->n_prompt,
                           .out = c->out_ids,
                           .n_out = k,
                           .eos_id = q->eos_id,
                           .allow_mask = mask,
                           .matcher = c->matcher,
                           .logit_row = row,
                           .w_token = c->out_ids + k,
                           .w_logprob = c->logprobs ? c->logprobs + k : NULL,
                           .w_top_ids = K ? c->top_ids + (size_t)k * K : NULL,
                           .w_top_lp = K ? c->top_lp + (size_t)k * K : NULL,
                           .request_id = q->id,
                           .choice = c->index};
}

deepinfer_status di_runner_enable_spec(di_runner *r, int spec_n, di_error *err) {
    r->spec_n = spec_n;
    /* a verify group samples 1 + spec_n rows */
    size_t ns = (size_t)r->max_items * (size_t)(1 + spec_n);
    for (int b = 0; b < 2; b++) {
        di_step_buf *s = &r->buf[b];
        di_sample_spec *sp = realloc(s->samples, sizeof *sp * ns);
        if (sp) s->samples = sp;
        s->spec = calloc((size_t)r->max_items, sizeof *s->spec);
        if (!sp || !s->spec) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for verify steps");
    }
    return DEEPINFER_OK;
}

di_step_buf *di_runner_build(di_runner *r, const di_plan *plan) {
    di_step_buf *b = &r->buf[r->next];
    int rows = 0, ns = 0, ni = 0, n_active = 0, np = 0, nd = 0;
    for (int i = 0; i < plan->n_items; i++) {
        const di_plan_item *it = &plan->items[i];
        di_choice *c = it->c;
        if (!c) continue;
        di_request *q = c->req;
        di_seq_state *s = di_pool_seq(r->pool, c->slot);
        int row0 = rows, first_draft = it->n - it->draft;
        /* drafts the queue holds from the step built last (their tokens are not on the host yet) */
        int held = it->draft > 0 && c->draft_held;
        for (int j = 0; j < it->n; j++, rows++) {
            int64_t idx = it->pos0 + j;
            b->src[rows] = -1;
            b->dsrc[rows] = -1;
            if (j >= first_draft && held) { /* the queue fills in its token, comparison and history */
                b->tokens[rows] = 0;
                b->dsrc[rows] = c->draft_src0 + j - first_draft;
                nd++;
            } else if (j >= first_draft) { /* a draft: its row, and the history the group's later samples read */
                b->tokens[rows] = c->draft[j - first_draft];
                c->out_ids[c->n_out + j - first_draft] = c->draft[j - first_draft];
            } else if (idx < q->n_prompt) b->tokens[rows] = q->prompt[idx];
            else if (idx - q->n_prompt < c->n_out) b->tokens[rows] = c->out_ids[idx - q->n_prompt];
            else { /* sampled by the step in flight: the device fills it in */
                b->tokens[rows] = 0;
                b->src[rows] = c->pend_sample;
            }
            b->pos[rows] = idx;
            /* a recompute after preemption runs the same rows as the first pass (prompt tail, then outputs) */
            b->late_from[rows] = q->n_prompt > r->yoco_keep ? q->n_prompt - r->yoco_keep : 0;
            b->seq[rows] = s;
            if (q->plp && j < first_draft && idx >= q->plp_sched && idx < q->n_prompt - 1) {
                int32_t K = q->params.prompt_logprobs;
                size_t at = (size_t)idx + 1; /* the row's logits give the next prompt token */
                b->plp[np++] = (di_plp_spec){.logit_row = rows,
                                             .next_token = q->prompt[at],
                                             .k = K,
                                             .w_logprob = q->plp + at,
                                             .w_top_ids = K ? q->plp_top_ids + at * (size_t)K : NULL,
                                             .w_top_lp = K ? q->plp_top_lp + at * (size_t)K : NULL};
            }
        }
        if (q->plp && it->pos0 + it->n - it->draft > q->plp_sched) q->plp_sched = it->pos0 + it->n - it->draft;
        b->items[ni++] = (di_step_item){.request_id = q->id,
                                        .choice = c->index,
                                        .rows = it->n,
                                        .decode = it->sample && it->n - it->draft == 1 && it->pos0 >= q->n_prompt};
        int sample0 = it->sample ? ns : -1;
        for (int j = it->sample ? first_draft - 1 : it->n; j < it->n; j++) { /* the decode row, then its drafts */
            di_sample_spec *sp = &b->samples[ns];
            fill_sample(sp, c, it->pos0 + j + 1, row0 + j, r->base_mask);
            sp->spec_rest = it->n - 1 - j;
            sp->spec_next = sp->spec_rest && !held ? c->draft[j + 1 - first_draft] : -1;
            sp->skipped = 0;
            c->n_pending++;
            c->pend_sample = ns++;
        }
        if (r->spec_n > 0) {
            /* a sequence joins the drafter's stage when it verifies drafts, drafts after this step, or
             * runs its prompt's last window (the drafter's context when it starts); otherwise its rows
             * are not fed, and the drafter's window skips them (devq_spec.c) */
            int64_t win = r->pool->cfg->sliding_window;
            int active = it->draft > 0 || it->draft_next || (it->pos0 < q->n_prompt && it->pos0 + it->n > q->n_prompt - win);
            n_active += active;
            int64_t after = it->pos0 + it->n; /* the token after the last row, when it is known */
            int32_t next = after < q->n_prompt ? q->prompt[after]
                           : after - q->n_prompt < c->n_out ? c->out_ids[after - q->n_prompt] : -1;
            b->spec[ni - 1] = (di_spec_item){.active = active,
                                             .seq = s,
                                             .room = it->draft ? di_pool_snapshot_room(r->pool, c->slot) : NULL,
                                             .row0 = row0,
                                             .nrows = it->n,
                                             .draft = it->draft,
                                             .sample0 = sample0,
                                             .draft_next = it->draft_next,
                                             .next_token = next};
        }
        c->n_sched = it->pos0 + it->n;
        c->plan_item = -1;
    }
    if (!rows && !plan->n_ops) return NULL;
    memcpy(b->ops, plan->ops, sizeof(di_state_op) * (size_t)plan->n_ops);
    b->n_items = ni;
    di_step *st = &b->step;
    memset(st, 0, sizeof *st);
    st->seq_no = ++r->seq_no;
    st->ops = b->ops;
    st->n_ops = plan->n_ops;
    st->batch = (di_model_batch){.n = rows, .tokens = b->tokens, .pos = b->pos, .seq = b->seq};
    if (r->yoco_keep > 0) st->batch.late_from = b->late_from;
    st->src = b->src;
    st->dsrc = nd ? b->dsrc : NULL;
    st->n_dsrc = nd;
    st->samples = b->samples;
    st->n_samples = ns;
    st->spec = n_active ? b->spec : NULL; /* no sequence in the drafter's stage: a plain step */
    st->n_spec = n_active ? ni : 0;
    st->spec_n = r->spec_n;
    st->plp = b->plp;
    st->n_plp = np;
    r->next ^= 1;
    return b;
}
