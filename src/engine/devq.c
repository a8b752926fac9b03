/* devq.c — the device queue (devq.h), the one implementation for both
 * backends: state operations, the model forward and the sampler; what is
 * device-specific (recorded steps, the device sampler and token feed, step
 * times) goes through ops/backend.h's device backend table.
 *
 * On the CPU everything happens inside submit. On the CUDA backend
 * (engine_backend.c) the state operations are ops on di_dev_exec() and the
 * forward runs on the device (pure decode steps as recorded steps, CUDA
 * graphs, devq_graph.c). Then either the host sampler reads the sampled
 * rows' logits copied to the host array `logits` (structured outputs,
 * logprobs: inside submit), or the device sampler (ops/backend.h
 * di_backend_dq_*) samples the rows from the device logits and only the
 * ids come back, collected by wait or by the next submit (finish_device).
 * The host memory this file reads or writes: the step's rows and tokens
 * (the runner's arrays; placeholder tokens come from the previous step's
 * samples, on the host or, for a step queued behind an unfinished one, on
 * the device), the sample specs and the slot headers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/constrain.h"
#include "engine/devq.h"
#include "engine/devq_graph.h"
#include "engine/devq_spec.h"
#include "engine/devq_split.h"
#include "engine/sampler.h"
#include "engine/seq_snapshot.h"
#include "ops/backend.h"
#include "ops/cpu/threadpool.h"

typedef struct queue {
    di_devq base;
    di_model *model;
    di_state_pool *pool;
    const di_model_config *cfg;
    int max_rows;              /* logits rows of samples */
    int plp_rows;              /* logits rows of prompt logprobs (di_devq_enable_prompt_lp), beside those */
    float *logits;             /* [max_rows + plp_rows][vocab]: a step's logit rows in row order */
    int *logit_rows;           /* [max_rows + plp_rows] */
    int *sidx, *pidx;          /* with plp_rows: each sample's / prompt-logprob row's index in `logits` */
    di_threadpool *tp;
    int nscratch;
    di_sampler_scratch *scratch; /* one per pool thread */
    uint32_t *masks;           /* one vocabulary bitmap per pool thread (structured outputs) */
    di_step *prev;             /* the step submitted before, for placeholder rows */
    di_devq_graph graph;       /* recorded decode steps (CUDA) */
    /* device sampling (CUDA; NULL dev: every step samples on the host) */
    di_backend_dq *dev;
    int32_t *dtok;             /* the model's device tokens (NULL: it needs host tokens) */
    int fwd_rows;              /* rows of one forward pass */
    di_step *in_flight;        /* sampled on the device, results not taken yet */
    di_backend_sample_row *rows;
    int32_t *ids;
    di_devq_spec *spec;        /* speculative decoding (di_devq_enable_spec), else NULL */
    di_devq_forward_fn fwd;    /* parallel ranks (di_devq_set_forward), else NULL */
    void *fwd_ctx;
} queue;

typedef struct sample_job {
    queue *q;
    di_step *step;
} sample_job;

static void sample_one(queue *q, di_sample_spec *sp, size_t i, int t) {
    di_sampler_scratch *scr = &q->scratch[t];
    int V = (int)q->cfg->vocab_size;
    di_sample_context ctx = {.prompt_ids = sp->prompt,
                             .n_prompt = (size_t)sp->n_prompt,
                             .output_ids = sp->out,
                             .n_output = (size_t)sp->n_out,
                             .seed = sp->seed,
                             .stream = sp->stream,
                             .position = (uint64_t)sp->position,
                             .purpose = DI_NOISE_TARGET,
                             .allow_mask = sp->allow_mask,
                             .eos_id = sp->eos_id};
    di_sample_result r;
    const float *logits = q->logits + (q->sidx ? (size_t)q->sidx[i] : i) * (size_t)V;
    di_error err = {0};
    sp->grammar_done = 0;
    if (sp->matcher)
        sp->status = di_constrain_sample(logits, sp->params, &ctx, sp->matcher, scr,
                                         q->masks + (size_t)t * (((size_t)V + 31) / 32), &r, &sp->grammar_done, &err);
    else
        sp->status = di_sample_row(logits, sp->params, &ctx, scr, &r, &err);
    if (sp->status) {
        size_t n = strnlen(err.msg, sizeof sp->why - 1); /* a message longer than the field is cut */
        memcpy(sp->why, err.msg, n);
        sp->why[n] = '\0';
        sp->token = 0;
        return;
    }
    sp->token = r.token;
    *sp->w_token = r.token;
    if (sp->w_logprob) *sp->w_logprob = r.logprob;
    if (sp->w_top_ids)
        for (int i = 0; i < sp->params->logprobs; i++) { /* fewer than asked only if the row has NaNs */
            sp->w_top_ids[i] = i < r.n_top ? r.top_ids[i] : -1;
            sp->w_top_lp[i] = i < r.n_top ? r.top_logprobs[i] : -INFINITY;
        }
}

/* Samples [b, e) of s, a verify group in row order: it goes on only while the token sampled equals
 * the draft after it (devq.h spec_next); the rest of the group is skipped. */
static void sample_range(queue *q, di_step *s, size_t b, size_t e, int t) {
    for (size_t i = b; i < e; i++) {
        di_sample_spec *sp = &s->samples[i];
        sample_one(q, sp, i, t);
        if (sp->spec_rest > 0 && (sp->status || sp->token != sp->spec_next)) {
            for (int r = 1; r <= sp->spec_rest; r++) s->samples[i + (size_t)r].skipped = 1;
            i += (size_t)sp->spec_rest;
        }
    }
}

/* The first sample at or after i that starts a verify group (or stands alone). */
static size_t group_start(const di_step *s, size_t i) {
    while (i > 0 && i < (size_t)s->n_samples && s->samples[i - 1].spec_rest > 0) i++;
    return i < (size_t)s->n_samples ? i : (size_t)s->n_samples;
}

static void sample_task(void *ctx, int t, int nt) {
    sample_job *j = ctx;
    size_t b, e;
    di_split_range((size_t)j->step->n_samples, t, nt, &b, &e);
    sample_range(j->q, j->step, group_start(j->step, b), group_start(j->step, e), t);
}

/* Prompt logprobs of rows [b, e) of s (devq.h di_plp_spec). */
static void plp_range(queue *q, di_step *s, size_t b, size_t e) {
    int32_t V = (int32_t)q->cfg->vocab_size;
    for (size_t i = b; i < e; i++) {
        di_plp_spec *p = &s->plp[i];
        const float *logits = q->logits + (size_t)q->pidx[i] * (size_t)V;
        int32_t top[DI_MAX_LOGPROBS], n_top = 0;
        float top_lp[DI_MAX_LOGPROBS];
        di_raw_logprobs(logits, V, p->next_token, p->k, p->w_logprob, top, top_lp, &n_top);
        for (int32_t j = 0; j < p->k; j++) { /* fewer than asked only if the row has NaNs */
            p->w_top_ids[j] = j < n_top ? top[j] : -1;
            p->w_top_lp[j] = j < n_top ? top_lp[j] : -INFINITY;
        }
    }
}

static void plp_task(void *ctx, int t, int nt) {
    sample_job *j = ctx;
    size_t b, e;
    di_split_range((size_t)j->step->n_plp, t, nt, &b, &e);
    plp_range(j->q, j->step, b, e);
}

/* The step's logit rows in increasing order: the samples' and the prompt-logprob rows', merged; each
 * one's index in the logits array goes to sidx / pidx. Returns the row count. */
static int merge_logit_rows(queue *q, const di_step *s) {
    int a = 0, c = 0, n = 0;
    while (a < s->n_samples || c < s->n_plp) {
        if (c >= s->n_plp || (a < s->n_samples && s->samples[a].logit_row < s->plp[c].logit_row)) {
            q->sidx[a] = n;
            q->logit_rows[n++] = s->samples[a++].logit_row;
        } else {
            q->pidx[c] = n;
            q->logit_rows[n++] = s->plp[c++].logit_row;
        }
    }
    return n;
}

static deepinfer_status run_ops(queue *q, di_step *s, di_error *err) {
    for (int i = 0; i < s->n_ops; i++) {
        di_state_op *op = &s->ops[i];
        di_seq_state *dst = di_pool_seq(q->pool, op->dst);
        if (op->kind == DI_OP_NONE) continue;
        if (op->kind == DI_OP_RESET) {
            di_seq_reset(dst, q->cfg);
        } else {
            deepinfer_status st = di_seq_copy(dst, di_pool_seq(q->pool, op->src), q->cfg, err);
            if (st) return st;
        }
    }
    return DEEPINFER_OK;
}

/* ---- device sampling (CUDA) ---------------------------------------------------------- */

static int has_penalty(const di_sampling_params *p) {
    return p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

/* 1 if the device sampler takes every sample of s (its token is the host sampler's: dic.h
 * dic_sample_rows; logprobs and structured outputs stay on the host). */
static int device_samples(const queue *q, const di_step *s) {
    if (!q->dev || s->n_samples < 1 || s->n_samples > q->fwd_rows || s->n_plp) return 0;
    for (int i = 0; i < s->n_samples; i++)
        if (s->samples[i].matcher || s->samples[i].params->logprobs >= 0) return 0;
    return 1;
}

/* 1 if s can be queued behind the unfinished step `prev` with its placeholder tokens taken on
 * the device: a model that needs no host tokens, one forward pass, samples on the device whose
 * penalties (history up to the placeholders) are off. */
static int device_feeds(const queue *q, const di_step *s, const di_step *prev) {
    if (!prev || !q->dtok || s->batch.n > q->fwd_rows || prev->seq_no + 1 != s->seq_no || !device_samples(q, s))
        return 0;
    for (int i = 0; i < s->n_samples; i++)
        if (has_penalty(s->samples[i].params)) return 0;
    return 1;
}

/* 1 if step s's held draft rows (s->dsrc) can read the drafter's output on the device, so that s is
 * queued behind the drafter without waiting for it: the drafts are still there and are the previous
 * step's, the model takes its tokens on the device, s fits one forward pass and samples on the device
 * without penalties (no history read that would need the drafts on the host). */
static int held_feeds(const queue *q, const di_step *s, int dev_sample) {
    const di_devq_spec *sp = q->spec;
    if (!s->n_dsrc || !sp || !sp->held_on_device || sp->held_seq + 1 != s->seq_no || !q->dtok || !dev_sample ||
        s->batch.n > q->fwd_rows)
        return 0;
    for (int i = 0; i < s->n_samples; i++)
        if (has_penalty(s->samples[i].params)) return 0;
    return 1;
}

static void account(queue *q, double busy, double idle) {
    q->base.device_busy_s += busy;
    q->base.device_idle_s += idle;
}

/* Take the device's ids of step s into its sample specs and the requests' arrays. */
static void finish_device(queue *q, di_step *s) {
    if (!s->on_device) return;
    s->on_device = 0;
    if (q->in_flight == s) q->in_flight = NULL;
    double busy = 0, idle = 0;
    deepinfer_status st = di_backend_dq_finish(q->dev, s->seq_no, s->n_samples, q->ids, &busy, &idle, &s->err);
    account(q, busy, idle);
    /* held draft rows fed on the device: the drafts come to the host now, before any is compared */
    if (!st && s->n_dsrc && q->spec) st = di_devq_spec_take(q->spec, s, &s->err);
    if (st) s->status = st;
    int skip = 0; /* verify groups: every row was sampled, the host takes them as sample_range does */
    for (int i = 0; i < s->n_samples; i++) {
        di_sample_spec *sp = &s->samples[i];
        sp->grammar_done = 0;
        if (skip > 0) {
            sp->skipped = 1;
            skip--;
            continue;
        }
        if (st) {
            sp->status = st;
            snprintf(sp->why, sizeof sp->why, "the step failed");
            sp->token = 0;
        } else if (q->ids[i] < 0) {
            sp->status = DEEPINFER_ERR_INVALID_ARGUMENT; /* the host sampler's words (sampler.c) */
            snprintf(sp->why, sizeof sp->why, "no token can be sampled: every allowed logit is -inf or NaN");
            sp->token = 0;
        } else {
            sp->status = DEEPINFER_OK;
            sp->token = q->ids[i];
            *sp->w_token = q->ids[i];
        }
        if (sp->spec_rest > 0 && (sp->status || sp->token != sp->spec_next)) skip = sp->spec_rest;
    }
}

static void sample_rows_of(queue *q, const di_step *s) {
    for (int i = 0; i < s->n_samples; i++) {
        const di_sample_spec *sp = &s->samples[i];
        const di_sampling_params *p = sp->params;
        q->rows[i] = (di_backend_sample_row){.temperature = p->temperature,
                                             .top_k = p->top_k,
                                             .top_p = p->top_p,
                                             .min_p = p->min_p,
                                             .log_min_p = p->min_p > 0 ? log((double)p->min_p) : 0.0,
                                             .repetition_penalty = p->repetition_penalty,
                                             .presence_penalty = p->presence_penalty,
                                             .frequency_penalty = p->frequency_penalty,
                                             .min_tokens = p->min_tokens,
                                             .eos_id = sp->eos_id,
                                             .n_stop_ids = p->n_stop_ids,
                                             .stop_ids = p->stop_ids,
                                             .prompt_ids = sp->prompt,
                                             .n_prompt = sp->n_prompt,
                                             .output_ids = sp->out,
                                             .n_output = sp->n_out,
                                             .allow_mask = sp->allow_mask,
                                             .seed = sp->seed,
                                             .position = (uint64_t)sp->position,
                                             .stream = sp->stream,
                                             .purpose = DI_NOISE_TARGET};
    }
}

/* ---- submit / wait ------------------------------------------------------------------ */

static void fail_samples(di_step *s) {
    for (int i = 0; i < s->n_samples; i++) {
        s->samples[i].status = s->status;
        snprintf(s->samples[i].why, sizeof s->samples[i].why, "the step failed");
    }
}

static deepinfer_status queue_submit(di_devq *dq, di_step *s, di_error *err) {
    queue *q = (queue *)dq;
    (void)err;
    SPLIT_ENTER();
    s->on_device = 0;
    di_step *prev = q->in_flight;
    /* a step with spec items samples on the device too (every verify row, only the ids come back) but
     * is finished inside submit: its accepted drafts decide the rollback and the drafter's feed */
    int dev_sample = device_samples(q, s) && s->n_samples <= q->max_rows;
    int feed = dev_sample && !s->n_spec && device_feeds(q, s, prev);
    if (prev && !feed) finish_device(q, prev); /* placeholders and histories need its tokens on the host */
    /* draft rows held from the previous step (devq_spec.h): read on the device behind the drafter, or
     * taken to the host first (this waits for the drafter) */
    int hfeed = held_feeds(q, s, dev_sample);
    if (q->dev) di_backend_dq_begin(q->dev, s->seq_no);
    s->status = s->n_dsrc && !hfeed ? (q->spec ? di_devq_spec_take(q->spec, s, &s->err)
                                                : di_error_set(&s->err, DEEPINFER_ERR_INTERNAL, "held drafts without speculation"))
                                     : DEEPINFER_OK;
    if (!s->status) s->status = run_ops(q, s, &s->err);
    int32_t *tokens = (int32_t *)s->batch.tokens; /* the runner's own array */
    for (int r = 0; r < s->batch.n && !s->status; r++) {
        if (s->src[r] < 0) continue;
        const di_sample_spec *p = !feed && q->prev && s->src[r] < q->prev->n_samples ? &q->prev->samples[s->src[r]] : NULL;
        tokens[r] = p && p->status == DEEPINFER_OK ? p->token : 0; /* a failed sample's request is dropped */
    }
    if (s->n_samples > q->max_rows && !s->status)
        s->status = di_error_set(&s->err, DEEPINFER_ERR_INTERNAL, "step with %d samples, the queue holds %d", s->n_samples,
                                 q->max_rows);
    if (s->n_plp > q->plp_rows && !s->status)
        s->status = di_error_set(&s->err, DEEPINFER_ERR_INTERNAL, "step with %d prompt-logprob rows, the queue holds %d",
                                 s->n_plp, q->plp_rows);
    di_model_batch b = s->batch;
    if (!s->status && (feed || hfeed)) { /* the previous step's samples, or the drafter's held drafts */
        s->status = di_backend_dq_feed(q->dev, s->seq_no, b.n, tokens, feed ? s->src : s->dsrc,
                                       feed ? NULL : q->spec->dev, q->dtok, &s->err);
        b.tokens_on_device = 1; /* `tokens` (placeholders 0) still serve the host checks */
        q->base.spec_fed += hfeed;
    }
    if (!s->status) {
        if (q->sidx) b.n_logits = merge_logit_rows(q, s);
        else {
            for (int i = 0; i < s->n_samples; i++) q->logit_rows[i] = s->samples[i].logit_row;
            b.n_logits = s->n_samples;
        }
        b.logit_rows = q->logit_rows;
        b.logits = dev_sample ? NULL : q->logits;
        if (s->n_spec && q->spec) di_devq_spec_before(q->spec, s, &b);
        SPLIT_FWD0();
        if (!s->n_plp && di_devq_graph_takes(&q->graph, &b)) { /* recorded: the logits stay on the device */
            s->status = dev_sample ? di_devq_graph_run(&q->graph, &b, &s->err)
                                   : di_devq_graph_forward(&q->graph, &b, q->logits, &s->err);
            di_devq_graph_counts(&q->graph, &q->base.graphs, &q->base.graph_steps);
        } else {
            b.logits_on_device = dev_sample;
            s->status = q->fwd ? q->fwd(q->fwd_ctx, s, &b, &s->err) : di_model_forward(q->model, &b, &s->err);
        }
        SPLIT_FWD1();
    }
    if (!s->status && dev_sample) { /* queued: wait (or the next submit) takes the ids */
        sample_rows_of(q, s);
        s->status = di_backend_dq_sample(q->dev, s->seq_no, di_model_device_logits(q->model), s->n_samples, q->rows,
                                         &s->err);
        if (!s->status) {
            s->on_device = 1;
            q->in_flight = s;
            q->base.device_sampled++;
            q->base.device_queued += feed;
            q->prev = s;
            if (!s->n_spec) return DEEPINFER_OK;
            finish_device(q, s); /* speculative: the ids (and held drafts) now, then acceptance, rollback, feed and drafts */
            SPLIT_IDS();
            if (!s->status && q->spec) s->status = di_devq_spec_after(q->spec, s, &s->err);
            if (!s->status && q->spec && q->spec->held_seq == s->seq_no) q->base.spec_held++;
            di_devq_graph_counts(&q->graph, &q->base.graphs, &q->base.graph_steps); /* the drafter's captures */
            SPLIT_DONE();
            return DEEPINFER_OK;
        }
    }
    if (q->dev) { /* this step is done on the device (its logits came back, or it failed) */
        double busy = 0, idle = 0;
        di_backend_dq_end(q->dev, s->seq_no);
        di_error e2 = {0};
        if (!di_backend_dq_finish(q->dev, s->seq_no, 0, NULL, &busy, &idle, &e2)) account(q, busy, idle);
    }
    if (!s->status && s->n_samples <= 4) { /* a parallel region costs more than a few rows */
        sample_range(q, s, 0, (size_t)s->n_samples, 0);
    } else if (!s->status) {
        sample_job j = {q, s};
        di_threadpool_run(q->tp, sample_task, &j);
    } else {
        fail_samples(s);
    }
    if (!s->status && s->n_plp <= 4) { /* prompt logprobs: beside the samples, they do not touch them */
        plp_range(q, s, 0, (size_t)s->n_plp);
    } else if (!s->status) {
        sample_job j = {q, s};
        di_threadpool_run(q->tp, plp_task, &j);
    }
    if (!s->status && s->n_spec && q->spec) {
        s->status = di_devq_spec_after(q->spec, s, &s->err);
        if (!s->status && q->spec->held_seq == s->seq_no) q->base.spec_held++;
        di_devq_graph_counts(&q->graph, &q->base.graphs, &q->base.graph_steps); /* the drafter's captures */
    }
    q->prev = s;
    return DEEPINFER_OK;
}

static deepinfer_status queue_wait(di_devq *dq, di_step *s, di_error *err) {
    (void)err; /* a failed step reports through s->status and its samples */
    finish_device((queue *)dq, s);
    return DEEPINFER_OK;
}

static void queue_destroy(di_devq *dq) {
    queue *q = (queue *)dq;
    SPLIT_PRINT(q->base.spec_held, q->base.spec_fed);
    if (q->spec) di_devq_spec_free(q->spec);
    free(q->spec);
    di_backend_dq_free(q->dev); /* waits for the device */
    di_devq_graph_free(&q->graph);
    for (int i = 0; i < q->nscratch; i++) di_sampler_scratch_free(&q->scratch[i]);
    free(q->scratch);
    free(q->masks);
    free(q->logits);
    free(q->logit_rows);
    free(q->sidx);
    free(q->pidx);
    free(q->rows);
    free(q->ids);
    free(q);
}

deepinfer_status di_devq_enable_spec(di_devq *dq, int max_rows, int max_items, int max_samples, int spec_n,
                                     int pipeline, di_error *err) {
    queue *q = (queue *)dq;
    if (q->spec) return DEEPINFER_OK;
    int rows = max_samples; /* a verify group samples every row from its decode row on */
    if (q->plp_rows) return di_error_set(err, DEEPINFER_ERR_INTERNAL, "enable speculation before prompt logprobs");
    if (rows > q->max_rows) {
        size_t V = (size_t)q->cfg->vocab_size;
        float *lg = realloc(q->logits, sizeof(float) * V * (size_t)rows);
        if (lg) q->logits = lg;
        int *lr = realloc(q->logit_rows, sizeof(int) * (size_t)rows);
        if (lr) q->logit_rows = lr;
        /* the device sampler's rows and ids: every verify row may be sampled on the device */
        di_backend_sample_row *sr = realloc(q->rows, sizeof *q->rows * (size_t)rows);
        if (sr) q->rows = sr, memset(sr, 0, sizeof *sr * (size_t)rows);
        int32_t *ids = realloc(q->ids, sizeof(int32_t) * (size_t)rows);
        if (ids) q->ids = ids;
        if (!lg || !lr || !sr || !ids)
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for %d logits rows", rows);
        q->max_rows = rows;
    }
    q->spec = calloc(1, sizeof *q->spec);
    if (!q->spec) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    deepinfer_status st = di_devq_spec_init(q->spec, q->model, max_rows, max_items, spec_n, err);
    if (!st && (st = di_devq_spec_hold_init(q->spec, pipeline, q->dev && q->dtok && !q->fwd, err)))
        di_devq_spec_free(q->spec);
    if (st) {
        free(q->spec);
        q->spec = NULL;
        return st;
    }
    di_devq_graph_set_hidden(&q->graph, q->spec->hid); /* verify steps write the drafter's input there */
    q->spec->record = q->graph.on;                      /* and greedy drafter steps may run recorded */
    return DEEPINFER_OK;
}

deepinfer_status di_devq_enable_prompt_lp(di_devq *dq, int rows, di_error *err) {
    queue *q = (queue *)dq;
    if (q->plp_rows || rows < 1) return DEEPINFER_OK;
    size_t V = (size_t)q->cfg->vocab_size, all = (size_t)q->max_rows + (size_t)rows;
    float *lg = realloc(q->logits, sizeof(float) * V * all);
    if (lg) q->logits = lg;
    int *lr = realloc(q->logit_rows, sizeof(int) * all);
    if (lr) q->logit_rows = lr;
    q->sidx = malloc(sizeof(int) * (size_t)q->max_rows);
    q->pidx = malloc(sizeof(int) * (size_t)rows);
    if (!lg || !lr || !q->sidx || !q->pidx)
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for %d prompt-logprob logits rows", rows);
    q->plp_rows = rows;
    return DEEPINFER_OK;
}

void di_devq_set_forward(di_devq *dq, di_devq_forward_fn fn, void *ctx) {
    queue *q = (queue *)dq;
    q->fwd = fn;
    q->fwd_ctx = ctx;
}

static const di_devq_vtable QUEUE_VT = {queue_submit, queue_wait, queue_destroy};

deepinfer_status di_devq_new(di_model *model, di_state_pool *pool, int max_logit_rows, int graphs, int page_rows,
                                 int device_sampling, di_devq **out, di_error *err) {
    *out = NULL;
    queue *q = calloc(1, sizeof *q);
    if (!q) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    q->base.vt = &QUEUE_VT;
    q->base.asynchronous = 0;
    q->model = model;
    q->pool = pool;
    q->cfg = di_model_cfg(model);
    q->max_rows = max_logit_rows;
    q->tp = di_threadpool_global();
    q->nscratch = q->tp ? di_threadpool_size(q->tp) : 1;
    size_t V = (size_t)q->cfg->vocab_size;
    q->logits = malloc(sizeof(float) * V * (size_t)max_logit_rows);
    q->logit_rows = malloc(sizeof(int) * (size_t)max_logit_rows);
    q->scratch = calloc((size_t)q->nscratch, sizeof *q->scratch);
    q->masks = malloc((size_t)q->nscratch * ((V + 31) / 32) * 4);
    q->rows = calloc((size_t)max_logit_rows, sizeof *q->rows);
    q->ids = malloc(sizeof(int32_t) * (size_t)max_logit_rows);
    if (!q->logits || !q->logit_rows || !q->scratch || !q->masks || !q->rows || !q->ids) {
        queue_destroy(&q->base);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for %d logits rows", max_logit_rows);
    }
    for (int i = 0; i < q->nscratch; i++) {
        deepinfer_status st = di_sampler_scratch_init(&q->scratch[i], (int32_t)V, err);
        if (st) {
            queue_destroy(&q->base);
            return st;
        }
    }
    di_devq_graph_init(&q->graph, model, graphs, page_rows);
    q->fwd_rows = di_model_max_rows(model);
    if (device_sampling && di_model_device_logits(model)) { /* CUDA: else (or on failure) the host samples */
        di_error e2 = {0};
        /* rows of one forward pass: fed tokens (a step of <= fwd_rows rows) and sampled rows */
        if (!di_backend_dq_new(di_model_exec(model), q->fwd_rows > 0 ? q->fwd_rows : 1, (int)V, &q->dev, &e2)) {
            q->dtok = di_model_device_tokens(model);
            q->base.asynchronous = 1;
        }
    }
    *out = &q->base;
    return DEEPINFER_OK;
}
