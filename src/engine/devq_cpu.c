/* devq_cpu.c — the synchronous device queue (devq.h): state operations,
 * the model forward and the sampler, all inside submit.
 *
 * It also serves a model loaded on the CUDA backend (engine_backend.c): the
 * state operations are ops on di_dev_exec() (seq_state.c, seq_snapshot.c),
 * the forward runs on the device and copies the sampled rows' logits to the
 * host array `logits` before it returns (di_copy_d2h, which waits), and the
 * sampler reads only those host logits. Pure decode steps run their forward
 * as recorded steps (CUDA graphs, devq_graph.c) unless the queue was made
 * without graphs; every other step runs eager. The only state this file reads or
 * writes on the host is host memory: the step's rows and tokens (the
 * runner's arrays; placeholder tokens are filled here from the previous
 * step's host samples), the sample specs and the slot headers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/constrain.h"
#include "engine/devq.h"
#include "engine/devq_graph.h"
#include "engine/sampler.h"
#include "engine/seq_snapshot.h"
#include "ops/cpu/threadpool.h"

typedef struct cpu_q {
    di_devq base;
    di_model *model;
    di_state_pool *pool;
    const di_model_config *cfg;
    int max_rows;              /* logits rows */
    float *logits;             /* [max_rows][vocab] */
    int *logit_rows;
    di_threadpool *tp;
    int nscratch;
    di_sampler_scratch *scratch; /* one per pool thread */
    uint32_t *masks;           /* one vocabulary bitmap per pool thread (structured outputs) */
    di_step *prev;             /* the step submitted before, for placeholder rows */
    di_devq_graph graph;       /* recorded decode steps (CUDA) */
} cpu_q;

typedef struct sample_job {
    cpu_q *q;
    di_step *step;
} sample_job;

static void sample_one(cpu_q *q, di_sample_spec *sp, size_t i, int t) {
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
    const float *logits = q->logits + i * (size_t)V;
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

static void sample_task(void *ctx, int t, int nt) {
    sample_job *j = ctx;
    size_t b, e;
    di_split_range((size_t)j->step->n_samples, t, nt, &b, &e);
    for (size_t i = b; i < e; i++) sample_one(j->q, &j->step->samples[i], i, t);
}

static deepinfer_status run_ops(cpu_q *q, di_step *s, di_error *err) {
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

static deepinfer_status cpu_submit(di_devq *dq, di_step *s, di_error *err) {
    cpu_q *q = (cpu_q *)dq;
    (void)err;
    s->status = run_ops(q, s, &s->err);
    int32_t *tokens = (int32_t *)s->batch.tokens; /* the runner's own array */
    for (int r = 0; r < s->batch.n && !s->status; r++) {
        if (s->src[r] < 0) continue;
        const di_sample_spec *p = q->prev && s->src[r] < q->prev->n_samples ? &q->prev->samples[s->src[r]] : NULL;
        tokens[r] = p && p->status == DEEPINFER_OK ? p->token : 0; /* a failed sample's request is dropped */
    }
    if (s->n_samples > q->max_rows && !s->status)
        s->status = di_error_set(&s->err, DEEPINFER_ERR_INTERNAL, "step with %d samples, the queue holds %d", s->n_samples,
                                 q->max_rows);
    if (!s->status) {
        for (int i = 0; i < s->n_samples; i++) q->logit_rows[i] = s->samples[i].logit_row;
        di_model_batch b = s->batch;
        b.n_logits = s->n_samples;
        b.logit_rows = q->logit_rows;
        b.logits = q->logits;
        if (di_devq_graph_takes(&q->graph, &b)) {
            s->status = di_devq_graph_forward(&q->graph, &b, q->logits, &s->err);
            di_devq_graph_counts(&q->graph, &q->base.graphs, &q->base.graph_steps);
        } else {
            s->status = di_model_forward(q->model, &b, &s->err);
        }
    }
    if (!s->status && s->n_samples <= 4) { /* a parallel region costs more than a few rows */
        for (int i = 0; i < s->n_samples; i++) sample_one(q, &s->samples[i], (size_t)i, 0);
    } else if (!s->status) {
        sample_job j = {q, s};
        di_threadpool_run(q->tp, sample_task, &j);
    } else {
        for (int i = 0; i < s->n_samples; i++) {
            s->samples[i].status = s->status;
            snprintf(s->samples[i].why, sizeof s->samples[i].why, "the step failed");
        }
    }
    q->prev = s;
    return DEEPINFER_OK;
}

static deepinfer_status cpu_wait(di_devq *dq, di_step *s, di_error *err) {
    (void)dq, (void)s, (void)err; /* everything happened in submit */
    return DEEPINFER_OK;
}

static void cpu_destroy(di_devq *dq) {
    cpu_q *q = (cpu_q *)dq;
    di_devq_graph_free(&q->graph);
    for (int i = 0; i < q->nscratch; i++) di_sampler_scratch_free(&q->scratch[i]);
    free(q->scratch);
    free(q->masks);
    free(q->logits);
    free(q->logit_rows);
    free(q);
}

static const di_devq_vtable CPU_VT = {cpu_submit, cpu_wait, cpu_destroy};

deepinfer_status di_devq_cpu_new(di_model *model, di_state_pool *pool, int max_logit_rows, int graphs, int page_rows,
                                 di_devq **out, di_error *err) {
    *out = NULL;
    cpu_q *q = calloc(1, sizeof *q);
    if (!q) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    q->base.vt = &CPU_VT;
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
    if (!q->logits || !q->logit_rows || !q->scratch || !q->masks) {
        cpu_destroy(&q->base);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for %d logits rows", max_logit_rows);
    }
    for (int i = 0; i < q->nscratch; i++) {
        deepinfer_status st = di_sampler_scratch_init(&q->scratch[i], (int32_t)V, err);
        if (st) {
            cpu_destroy(&q->base);
            return st;
        }
    }
    di_devq_graph_init(&q->graph, model, graphs, page_rows);
    *out = &q->base;
    return DEEPINFER_OK;
}
