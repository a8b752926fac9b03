/* engine.c — requests in, the step loop, outputs out (deepinfer.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/prompt.h"

const char *deepinfer_finish_reason_name(deepinfer_finish_reason r) {
    switch (r) {
    case DEEPINFER_FINISH_STOP: return "stop";
    case DEEPINFER_FINISH_LENGTH: return "length";
    case DEEPINFER_FINISH_EOS: return "eos";
    case DEEPINFER_FINISH_ABORT: return "abort";
    case DEEPINFER_FINISH_ERROR: return "error";
    default: return "";
    }
}

/* ---- adding requests ---------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static deepinfer_status check_request(deepinfer_engine *e, const di_sampling_params *p, size_t n_prompt, di_error *err) {
    deepinfer_status st = di_sampling_params_validate(p, (int32_t)e->mcfg->vocab_size, err);
    if (st) return st;
    if (p->n_stop && !e->tok)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "stop strings need a tokenizer and this model has none; use stop_token_ids");
    if (p->prompt_logprobs >= 0 && e->cfg.yoco_compact)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "prompt_logprobs needs the logits of every prompt row, and this engine runs compact prefill "
                            "(yoco_compact = 1: the late layers skip all but each prompt's last %lld tokens); open it "
                            "with yoco_compact = 0 (exact) or set prompt_logprobs = -1",
                            (long long)e->cfg.yoco_keep_tokens);
    if (p->so_schema_type && !e->tok)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "so_args need a tokenizer (to map tokens to text) and this model has none");
    int64_t ctx = e->cfg.max_model_len;
    if ((int64_t)n_prompt >= ctx)
        return di_error_set(err, DEEPINFER_ERR_LIMIT,
                            "prompt has %zu tokens; the model context (max_model_len) is %lld, which leaves no room for "
                            "output",
                            n_prompt, (long long)ctx);
    int64_t reach = (int64_t)n_prompt + p->max_tokens < ctx ? (int64_t)n_prompt + p->max_tokens : ctx;
    int64_t pages = di_pool_geom_pages_for(e->mcfg, &e->pool.g, reach);
    if (pages > e->pool.n_pages)
        return di_error_set(err, DEEPINFER_ERR_LIMIT,
                            "prompt (%zu tokens) + max_tokens (%d) needs %lld state pages; the pool has %lld (it holds "
                            "%lld tokens per sequence): lower max_tokens or raise the memory budget",
                            n_prompt, p->max_tokens, (long long)pages, (long long)e->pool.n_pages,
                            (long long)e->plan.tokens_per_sequence_max);
    return DEEPINFER_OK;
}

/* Room for the request in every structure the step loop touches. */
static deepinfer_status reserve(deepinfer_engine *e, int n_choices, di_error *err) {
    if (di_reqmap_reserve(&e->reqs, 1)) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    deepinfer_status st = di_sched_reserve(&e->sched, n_choices, err);
    if (st) return st;
    if (e->reqs.n + 1 > e->cap_updated) {
        size_t cap = e->cap_updated ? e->cap_updated * 2 : 64;
        di_request **u = realloc(e->updated, sizeof *u * cap);
        if (u) e->updated = u;
        const deepinfer_request_output **up = realloc(e->updated_pub, sizeof *up * cap);
        if (up) e->updated_pub = up;
        if (!u || !up) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        e->cap_updated = cap;
    }
    return DEEPINFER_OK;
}

deepinfer_status di_engine_add(deepinfer_engine *e, const deepinfer_prompt *prompt,
                               const deepinfer_sampling_params *params, uint64_t *id, di_error *err) {
    *id = e->next_id++;
    di_sampling_params p;
    if (params) p = *params;
    else di_sampling_params_default(&p);
    int32_t *ids = NULL;
    size_t n = 0;
    deepinfer_status st = di_prompt_tokens(prompt, e->tok, e->chat_arch, (int32_t)e->mcfg->vocab_size,
                                           e->text_mask ? (int32_t)e->mcfg->image_token_id : -1,
                                           (int32_t)e->mcfg->bos_token_id, &ids, &n, err);
    if (!st) st = check_request(e, &p, n, err);
    if (!st) st = reserve(e, p.n, err);
    di_request *r = NULL;
    if (!st) {
        uint64_t seed = p.has_seed ? p.seed : splitmix64(e->cfg.seed ^ splitmix64(*id));
        int32_t eos = p.ignore_eos || e->mcfg->eos_token_id < 0 ? -1 : (int32_t)e->mcfg->eos_token_id;
        r = di_request_new(*id, ids, n, &p, seed, eos, e->tok);
        if (!r) st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for a request");
        else if ((st = di_constrain_request(&e->so, r, err))) di_request_free(r);
    }
    free(ids);
    if (st) return st;
    r->out.metrics.arrival_s = di_engine_now(e);
    di_reqmap_put(&e->reqs, r->id, r);
    di_sched_add(&e->sched, r);
    e->n_active++;
    e->stats.prompt_tokens += r->n_prompt;
    return DEEPINFER_OK;
}

deepinfer_status deepinfer_add_request(deepinfer_engine *e, const deepinfer_prompt *prompt,
                                       const deepinfer_sampling_params *params, uint64_t *request_id) {
    di_error err = {0};
    uint64_t id;
    deepinfer_status st = di_engine_add(e, prompt, params, &id, &err);
    if (st) return di_engine_fail(e, &err);
    if (request_id) *request_id = id;
    return DEEPINFER_OK;
}

/* ---- finishing ------------------------------------------------------------------ */

static void mark_updated(deepinfer_engine *e, di_request *r) {
    if (r->updated) return;
    r->updated = 1;
    e->updated[e->n_updated++] = r;
    for (int i = 0; i < r->n_choices; i++) {
        r->pub[i].n_prev_tokens = r->pub[i].n_tokens;
        r->pub[i].prev_text_len = r->pub[i].text_len;
    }
}

static void finish_request(deepinfer_engine *e, di_request *r) {
    deepinfer_request_metrics *m = &r->out.metrics;
    m->finished_s = di_engine_now(e);
    m->e2e_s = m->finished_s - m->arrival_s;
    m->ttft_s = m->first_token_s > 0 ? m->first_token_s - m->arrival_s : 0;
    int32_t longest = 0;
    m->output_tokens = 0;
    m->num_preemptions = 0;
    for (int i = 0; i < r->n_choices; i++) {
        m->output_tokens += r->choices[i].n_out;
        m->num_preemptions += r->choices[i].num_preemptions;
        if (r->choices[i].n_out > longest) longest = r->choices[i].n_out;
    }
    m->tpot_s = longest > 1 ? (r->last_token_s - m->first_token_s) / (longest - 1) : 0;
    r->out.finished = 1;
    e->n_active--;
    e->stats.requests_finished++;
}

static void finish_choice(deepinfer_engine *e, di_choice *c, deepinfer_finish_reason why) {
    di_sched_remove(&e->sched, c);
    di_output_finish(&e->out_ctx, c, why);
    if (++c->req->n_finished == c->req->n_choices) finish_request(e, c->req);
}

static void fail_request(deepinfer_engine *e, di_request *r, deepinfer_status st, const char *msg) {
    mark_updated(e, r);
    if (!r->out.status) {
        r->out.status = st;
        snprintf(r->error, sizeof r->error, "%s", msg);
    }
    for (int i = 0; i < r->n_choices; i++)
        if (r->choices[i].state != DI_CHOICE_FINISHED) finish_choice(e, &r->choices[i], DEEPINFER_FINISH_ERROR);
}

/* ---- the step loop ------------------------------------------------------------------ */

/* Apply one sampled token to its choice. */
static void take_sample(deepinfer_engine *e, const di_sample_spec *sp, double now) {
    di_request *r = di_reqmap_get(&e->reqs, sp->request_id);
    if (!r) return; /* taken by the caller while its last step was in flight */
    di_choice *c = &r->choices[sp->choice];
    c->n_pending--;
    if (c->state == DI_CHOICE_FINISHED) return; /* ran one step past its end (async), or finished inside a verify group */
    if (sp->skipped) return;                    /* after a rejected draft */
    mark_updated(e, r);
    if (sp->status) {
        char msg[320];
        snprintf(msg, sizeof msg, "sampling failed at position %lld%s: %s", (long long)sp->position,
                 c->matcher ? " (so_args)" : "", sp->why);
        fail_request(e, r, sp->status, msg);
        return;
    }
    di_error err = {0};
    deepinfer_finish_reason why = di_output_token(&e->out_ctx, c, &err);
    if (r->out.metrics.first_token_s <= 0) r->out.metrics.first_token_s = now;
    r->last_token_s = now;
    e->stats.output_tokens++;
    if (!why && sp->grammar_done) why = DEEPINFER_FINISH_STOP; /* the grammar can take no further token */
    if (why == DEEPINFER_FINISH_ERROR) fail_request(e, r, err.code, err.msg);
    else if (why) finish_choice(e, c, why);
}

/* Speculative decoding: what a step's verify group and drafter left for a choice — the rows of
 * rejected drafts are no longer computed state, and the drafts for its next step. The counts take
 * the accepted drafts the choice committed: one that ended inside its accepted run (EOS, a stop,
 * an error) committed fewer than the drafts accepted (take_sample ran first). */
static void take_spec(deepinfer_engine *e, const di_step *st, const di_step_item *it, const di_spec_item *sp) {
    const di_sample_spec *samples = st->samples;
    di_request *r = di_reqmap_get(&e->reqs, it->request_id);
    if (!r) return;
    di_choice *c = &r->choices[it->choice];
    if (sp->draft > 0) {
        int committed = sp->sample0 >= 0 ? c->n_out - samples[sp->sample0].n_out : 0;
        int acc = sp->accepted < committed - 1 ? sp->accepted : committed > 1 ? committed - 1 : 0;
        deepinfer_request_metrics *m = &r->out.metrics;
        m->spec_drafted += sp->draft;
        m->spec_accepted += acc;
        m->spec_steps++;
        e->stats.spec_steps++;
        e->stats.spec_drafted += sp->draft;
        e->stats.spec_accepted += acc;
        for (int j = 0; j < sp->draft && j < DEEPINFER_MAX_DRAFT; j++) {
            e->stats.spec_drafted_at[j]++;
            e->stats.spec_accepted_at[j] += j < acc;
        }
        /* the confidences these drafts were scheduled by (held drafts' stay on the device and were not
         * read: fixed lengths only) against what the verifier accepted */
        if (e->spec_varlen && !c->draft_held)
            di_spec_calib_add(&e->spec_cost.cal, c->draft_conf, sp->draft, sp->accepted);
    }
    if (c->state != DI_CHOICE_RUNNING) return;
    c->n_sched -= sp->draft - sp->accepted;
    c->n_draft = sp->n_draft;
    c->draft_held = sp->drafts_held ? st->seq_no : 0; /* held: the queue fills them into the next step */
    c->draft_src0 = sp->draft_src0;
    if (sp->drafts_held) return;
    memcpy(c->draft, sp->drafts, sizeof(int32_t) * (size_t)sp->n_draft);
    memcpy(c->draft_conf, sp->conf, sizeof(float) * (size_t)sp->n_draft);
}

/* Wait for a submitted step (the only synchronisation point) and take its results. */
static deepinfer_status finish_step(deepinfer_engine *e, di_step_buf *b) {
    di_error err = {0};
    deepinfer_status st = di_devq_wait(e->dq, &b->step, &err);
    if (st) return di_engine_fail(e, &err);
    double now = di_engine_now(e);
    e->stats.steps++;
    for (int i = 0; i < b->n_items; i++) {
        const di_step_item *it = &b->items[i];
        if (it->decode) e->stats.decode_rows++;
        else e->stats.prefill_rows += it->rows;
        di_request *r = di_reqmap_get(&e->reqs, it->request_id);
        if (!r) continue;
        r->out.metrics.computed_tokens += it->rows;
        if (r->out.metrics.first_scheduled_s <= 0) r->out.metrics.first_scheduled_s = now;
        if (b->step.status && !r->out.finished) fail_request(e, r, b->step.status, b->step.err.msg);
    }
    for (int i = 0; i < b->step.n_samples; i++) take_sample(e, &b->step.samples[i], now);
    for (int i = 0; i < b->step.n_spec; i++) take_spec(e, &b->step, &b->items[i], &b->step.spec[i]);
    if (e->spec_varlen) di_spec_calib_fit(&e->spec_cost.cal);
    return DEEPINFER_OK;
}

static void begin_updates(deepinfer_engine *e) {
    if (e->keep_updates) { /* a step finished outside deepinfer_step (drain_for): report its changes too */
        e->keep_updates = 0;
        return;
    }
    for (size_t i = 0; i < e->n_updated; i++) e->updated[i]->updated = 0;
    e->n_updated = 0;
}

/* Before request r's memory goes back to the caller: a step still in flight may write a token
 * into its output arrays (async scheduling runs a choice one step past its end), so finish that
 * step first. */
static deepinfer_status drain_for(deepinfer_engine *e, const di_request *r) {
    if (!e->inflight) return DEEPINFER_OK;
    int pending = 0;
    for (int i = 0; i < r->n_choices; i++) pending |= r->choices[i].n_pending > 0;
    if (!pending) return DEEPINFER_OK;
    di_step_buf *b = e->inflight;
    e->inflight = NULL;
    e->keep_updates = 1;
    return finish_step(e, b);
}

/* Confidence scheduling's online costs (spec_cost.h): decode-only steps, plain or speculative. */
static void observe_step(deepinfer_engine *e, const di_step_buf *b, double secs) {
    /* a step that captured a graph (the target's or the drafter's) or loaded modules on first use is
     * not what that shape costs afterwards: a capture-heavy first speculative step would scale every
     * later draft's value up and drafting would never pay */
    if (e->dq->graphs != e->spec_cost_graphs) {
        e->spec_cost_graphs = e->dq->graphs;
        return;
    }
    int drafting = 0;
    for (int i = 0; i < b->n_items; i++) {
        if (!b->items[i].decode) return;
        drafting += b->step.n_spec && b->step.spec[i].active && b->step.spec[i].draft_next;
    }
    di_spec_cost_observe(&e->spec_cost, b->step.n_spec == 0, b->step.batch.n, drafting, secs);
}

/*
 * One engine step. With async scheduling, step N was submitted by the
 * previous call: this call plans and submits step N+1 first (the CPU works
 * while the device runs N), then waits for N — the only sync point — and
 * takes its tokens. Without it, the step planned here is also waited here.
 */
deepinfer_status deepinfer_step(deepinfer_engine *e, size_t *n_updated) {
    double t0 = di_engine_now(e);
    di_error err = {0};
    deepinfer_status st_drain;
    begin_updates(e);
    int had_inflight = e->inflight != NULL;
    if (e->inflight && e->inflight->step.n_spec > 0) { /* speculation: its drafts are this step's rows */
        st_drain = finish_step(e, e->inflight);
        e->inflight = NULL;
        if (st_drain) return st_drain;
    }
    e->sched.next_seq = e->runner.seq_no + 1;
    di_sched_schedule(&e->sched);                                   /* 1. decide what runs */
    di_step_buf *next = di_runner_build(&e->runner, &e->sched.plan); /* 2. rows, placeholders, samples */
    deepinfer_status st = next ? di_devq_submit(e->dq, &next->step, &err) : DEEPINFER_OK; /* 3. enqueue */
    if (st) return di_engine_fail(e, &err);
    if (e->inflight && (st = finish_step(e, e->inflight))) return st; /* 4. wait for the previous step */
    e->inflight = next;
    if (!e->async && e->inflight) {
        st = finish_step(e, e->inflight);
        e->inflight = NULL;
        if (st) return st;
    }
    if (!next && !had_inflight && !e->sched.plan.n_preempted && e->n_active > 0) {
        di_error_set(&err, DEEPINFER_ERR_INTERNAL, "the scheduler made no progress with %lld requests unfinished",
                     (long long)e->n_active);
        return di_engine_fail(e, &err);
    }
    int64_t used = di_pool_pages_used(&e->pool);
    e->stats.pages_in_use = used;
    e->stats.pages_peak = e->pool.pages_peak;
    e->stats.preemptions = e->sched.preemptions;
    e->stats.graph_steps = e->dq->graph_steps;
    e->stats.graphs = e->dq->graphs;
    e->stats.device_busy_s = e->dq->device_busy_s;
    e->stats.device_idle_s = e->dq->device_idle_s;
    e->stats.device_sampled_steps = e->dq->device_sampled;
    e->stats.device_queued_steps = e->dq->device_queued;
    double dt = di_engine_now(e) - t0;
    e->stats.busy_s += dt;
    if (next && e->spec_n && e->spec_varlen) observe_step(e, next, dt);
    if (n_updated) *n_updated = e->n_updated;
    return DEEPINFER_OK;
}

/* keep_updates: a step drained by deepinfer_take_output finished requests that the next
 * deepinfer_step reports (it runs nothing else) */
int deepinfer_has_unfinished(const deepinfer_engine *e) {
    return e->n_active > 0 || e->inflight != NULL || e->keep_updates;
}

void deepinfer_read_outputs(deepinfer_engine *e, const deepinfer_request_output *const **outs, size_t *n) {
    for (size_t i = 0; i < e->n_updated; i++) e->updated_pub[i] = &e->updated[i]->out;
    *outs = e->updated_pub;
    *n = e->n_updated;
}

static void unlist_updated(deepinfer_engine *e, di_request *r) {
    for (size_t i = 0; i < e->n_updated; i++)
        if (e->updated[i] == r) {
            memmove(e->updated + i, e->updated + i + 1, sizeof *e->updated * (e->n_updated - i - 1));
            e->n_updated--;
            return;
        }
}

deepinfer_status deepinfer_take_output(deepinfer_engine *e, uint64_t request_id, deepinfer_request_output **out) {
    di_error err = {0};
    *out = NULL;
    di_request *r = di_reqmap_get(&e->reqs, request_id);
    if (!r) {
        di_error_set(&err, DEEPINFER_ERR_NOT_FOUND, "no request %llu (never added, or already taken)",
                     (unsigned long long)request_id);
        return di_engine_fail(e, &err);
    }
    if (!r->out.finished) {
        di_error_set(&err, DEEPINFER_ERR_INVALID_ARGUMENT, "request %llu is still running", (unsigned long long)request_id);
        return di_engine_fail(e, &err);
    }
    deepinfer_status st = drain_for(e, r);
    if (st) return st;
    di_reqmap_del(&e->reqs, request_id);
    unlist_updated(e, r);
    *out = &r->out;
    return DEEPINFER_OK;
}

deepinfer_status deepinfer_abort(deepinfer_engine *e, uint64_t request_id) {
    di_request *r = di_reqmap_get(&e->reqs, request_id);
    if (!r) {
        di_error err = {0};
        di_error_set(&err, DEEPINFER_ERR_NOT_FOUND, "no request %llu to abort", (unsigned long long)request_id);
        return di_engine_fail(e, &err);
    }
    for (int i = 0; i < r->n_choices; i++)
        if (r->choices[i].state != DI_CHOICE_FINISHED) finish_choice(e, &r->choices[i], DEEPINFER_FINISH_ABORT);
    return DEEPINFER_OK;
}

/* pages_in_use is read now, not at the last step's end: deepinfer_abort and
 * deepinfer_take_output return pages between steps. */
void deepinfer_engine_get_stats(const deepinfer_engine *e, deepinfer_engine_stats *out) {
    *out = e->stats;
    out->pages_in_use = di_pool_pages_used(&e->pool);
}

void deepinfer_output_free(deepinfer_request_output *out) {
    if (out) di_request_free(di_request_of(out));
}
