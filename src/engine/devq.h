/*
 * devq.h — the device queue: the only way the engine runs work on the
 * accelerator. The step loop (engine.c) submits step N+1 before it waits for
 * step N, so an asynchronous implementation overlaps the CPU's scheduling of
 * N+1 with the device's work on N. Waiting for a step's sampled ids is the
 * only synchronisation point.
 *
 * A step, in device order:
 *   1. state operations, in order: reset a slot, copy a slot into another
 *      (n > 1 forks);
 *   2. the forward over the step's token rows; a row whose `src` is >= 0
 *      takes as its token the id sampled by sample `src` of the previous
 *      step (a decode token the host has not seen yet);
 *   3. sampling: one token per sample spec from its logits row, written
 *      into the request's output arrays (token, logprob, top logprobs)
 *      before any later step samples on the host, so its history holds it.
 *
 * Steps run in submission order; state memory freed by the host after a
 * step was submitted is only reused by later steps, so in-order execution
 * keeps it consistent.
 *
 * The queue (devq.c) is one implementation for models on the CPU and on
 * the CUDA backend; its device work goes through ops/backend.h (the device
 * backend's table: recorded steps, the device sampler, step times).
 * On the CPU it runs a step completely inside submit (synchronous). On
 * CUDA the state ops and the forward run on the device; a step whose
 * samples the device sampler takes (no structured outputs, no logprobs)
 * samples on the device and only the ids come back: submit returns with
 * the step queued and wait collects the ids (asynchronous). When the
 * previous step is still in flight and the new step's placeholder tokens
 * can be taken on the device (the model does not need host tokens, the
 * step fits one forward pass, no penalties read in-flight history), the
 * new step is queued behind it without waiting; otherwise submit first
 * finishes the previous step. Other steps copy their logits to the host
 * and sample there, inside submit. Steps whose sequences each run the
 * same number of rows, every row sampled (decode steps; speculative
 * verify groups of equal length), run as recorded steps: one CUDA graph
 * per rows, rows per sequence, token source and drafter input
 * (devq_graph.c, docs/cuda-backend.md §6, §8); prefill, chunked prefill
 * and mixed steps run eager. A step with spec items is sampled on the
 * device under the same condition, but finished inside submit (its
 * accepted drafts decide the rollback and the drafter's feed). With held
 * drafts (di_devq_enable_spec pipeline) submit returns with the drafter
 * launched, not waited for; the next step's draft rows (dsrc) then read
 * its output on the device and the drafts come to the host after that
 * step's samples, before they are compared (docs/speculative.md). What a step
 * reads from host memory (rows, histories, page tables) is copied when it
 * is submitted.
 */
#ifndef DI_ENGINE_DEVQ_H
#define DI_ENGINE_DEVQ_H

#include <stdint.h>

#include "engine/sampling_params.h"
#include "engine/scheduler.h"
#include "engine/state_pool.h"
#include "model/model.h"
#include "structured/matcher.h"
#include "util/error.h"

typedef struct di_sample_spec {
    const di_sampling_params *params;
    uint64_t seed;
    uint32_t stream;            /* choice index */
    int64_t position;           /* absolute position of the sampled token */
    const int32_t *prompt;      /* history for penalties */
    int32_t n_prompt;
    const int32_t *out;         /* outputs before this one (incl. samples still in flight) */
    int32_t n_out;
    int32_t eos_id;             /* masked below min_tokens; -1 = none */
    const uint32_t *allow_mask; /* bit v set = id v may be sampled; NULL = all */
    so_matcher *matcher;        /* structured outputs (constrain.h): masks the row and takes the token; NULL = none */
    int logit_row;              /* the batch row sampled (samples are in increasing row order) */
    /* written by the device */
    int32_t *w_token;
    float *w_logprob;           /* NULL when no logprobs */
    int32_t *w_top_ids;         /* [params->logprobs] or NULL */
    float *w_top_lp;
    int32_t token;              /* the sampled id (also in *w_token) */
    deepinfer_status status;    /* DEEPINFER_OK, or why this row could not be sampled */
    int grammar_done;           /* the matcher can take no further token after this one */
    char why[192];              /* with a failed status: what went wrong */
    /* speculative decoding: a verify group's samples are consecutive; a sample with spec_rest > 0
     * is followed by spec_rest more of its group and its row by the draft spec_next: the group goes
     * on only while the token sampled equals the draft (the rest is skipped) */
    int32_t spec_next;
    int spec_rest;
    int skipped;                /* written: not sampled (an earlier draft of its group was rejected) */
    /* host bookkeeping, ignored by the device */
    uint64_t request_id;
    int choice;
} di_sample_spec;

/* Speculative decoding (docs/speculative.md): one sequence's part of a step. After the forward and
 * the samples, the queue rolls back the rows of rejected drafts (seq_snapshot.h), feeds the drafter
 * the kept rows (model.h di_model_draft_step) and, with draft_next, drafts from the last kept
 * sample. */
typedef struct di_spec_item {
    int active;                 /* 0: the sequence takes no part (its rows are neither verified nor fed) */
    di_seq_state *seq;
    void *room;                 /* the slot's snapshot room (used when draft > 0) */
    int row0, nrows;            /* the sequence's rows in the step */
    int draft;                  /* its last `draft` rows are drafts under verification */
    int sample0;                /* its first sample (the decode row's for a verify group); -1: it samples nothing */
    int draft_next;             /* draft for the next step from the last kept sample */
    int32_t next_token;         /* the token after its last row when it samples nothing (the MTP's input) */
    /* written by the queue */
    int accepted;               /* drafts accepted */
    int n_draft;                /* drafts made for the next step */
    int32_t drafts[DEEPINFER_MAX_DRAFT];
    float conf[DEEPINFER_MAX_DRAFT];
    /* the pipelined order (docs/speculative.md "One step"): the drafts are not in drafts[] but held by
     * the queue for the next step only, draft i at index draft_src0 + i (di_step.dsrc) */
    int drafts_held;
    int draft_src0;
} di_spec_item;

/* Prompt logprobs: a prompt row whose logits give the raw logprob of the next prompt token (and the
 * top k), computed on the host (sampler.h di_raw_logprobs) and written into the request's arrays.
 * A step's prompt-logprob rows are in increasing row order and never a sampled row. */
typedef struct di_plp_spec {
    int logit_row;              /* the batch row */
    int32_t next_token;         /* the prompt token after it */
    int32_t k;                  /* top entries (0: none) */
    float *w_logprob;
    int32_t *w_top_ids;         /* [k] or NULL */
    float *w_top_lp;
} di_plp_spec;

typedef struct di_step {
    uint64_t seq_no;            /* 1, 2, ... in submission order */
    di_state_op *ops;
    int n_ops;
    di_model_batch batch;       /* rows; logits rows = the samples' rows */
    int32_t *src;               /* [batch.n] -1, or the previous step's sample whose id is the row's token */
    int32_t *dsrc;              /* [batch.n] -1, or the row is a draft the queue holds from the previous step
                                   (di_spec_item drafts_held): its index there; NULL when n_dsrc == 0 */
    int n_dsrc;                 /* rows with dsrc >= 0 (the queue sets it to 0 once it filled them in) */
    di_sample_spec *samples;
    int n_samples;
    di_spec_item *spec;         /* speculative decoding: every sequence's part (NULL: off) */
    int n_spec;
    int spec_n;                 /* drafts to make per sequence with draft_next */
    di_plp_spec *plp;           /* prompt logprobs: rows beside the samples' whose logits come to the host */
    int n_plp;
    deepinfer_status status;    /* of the whole step (forward failures) */
    di_error err;
    int on_device;              /* queue-private: sampled on the device, results not taken yet */
} di_step;

typedef struct di_devq di_devq;

typedef struct di_devq_vtable {
    /* Enqueue `step` (the caller keeps it alive and unchanged until waited). */
    deepinfer_status (*submit)(di_devq *q, di_step *step, di_error *err);
    /* Block until `step` is done; its samples' token/status are then valid. */
    deepinfer_status (*wait)(di_devq *q, di_step *step, di_error *err);
    void (*destroy)(di_devq *q);
} di_devq_vtable;

struct di_devq {
    const di_devq_vtable *vt;
    int asynchronous;           /* 1 if submit returns before the step is done */
    int graphs;                 /* CUDA graphs captured so far (recorded decode steps) */
    int64_t graph_steps;        /* steps run recorded (captures and replays) */
    double device_busy_s, device_idle_s; /* deepinfer_engine_stats: device time of the steps, gaps between them */
    int64_t device_sampled;     /* steps sampled on the device */
    int64_t device_queued;      /* of those, queued behind the unfinished previous step */
    int64_t spec_held;          /* drafter steps whose drafts the queue held for the next step (pipelined order) */
    int64_t spec_fed;           /* verify steps whose draft rows were read from device memory, queued behind the
                                   drafter without the host waiting for it */
};

/* The queue (see above): max_logit_rows bounds samples per step; graphs =
 * 1 runs pure decode steps of a model on the CUDA backend as recorded
 * steps (ignored elsewhere), 0 runs every step eager; page_rows: the pool's
 * smallest rows per page (devq_graph.h); device_sampling = 1 samples on
 * the device where it can (CUDA; then the queue is asynchronous), 0 always
 * on the host. */
deepinfer_status di_devq_new(di_model *model, di_state_pool *pool, int max_logit_rows, int graphs, int page_rows,
                             int device_sampling, di_devq **out, di_error *err);

/* Prompt logprobs: room for `rows` prompt-logprob rows per step beside the samples' (their logits
 * come to the host; a step with any samples on the host). */
deepinfer_status di_devq_enable_prompt_lp(di_devq *q, int rows, di_error *err);

/* Speculative decoding on: scratch for steps of up to max_rows rows, max_items sequences and
 * max_samples samples with drafts of up to spec_n tokens (the drafter's input rows, the feed's
 * tables, logits rows). Spec steps are finished inside submit (their samples taken). pipeline = 1:
 * where every drafting request's picks are greedy (devq_spec.h), the drafts are held by the queue
 * for the next step (di_spec_item drafts_held, di_step dsrc) and, on CUDA, the drafter is not
 * waited for: the next step's draft rows read its output on the device (docs/speculative.md). The
 * caller must then give every draft row of a held draft the index in dsrc, and only in the step
 * right after (later steps find them gone). 0: drafts always come back in drafts[]. */
deepinfer_status di_devq_enable_spec(di_devq *q, int max_rows, int max_items, int max_samples, int spec_n,
                                     int pipeline, di_error *err);

/* Parallel ranks (ranks.h): every step's forward through fn(ctx, step, batch, err) instead of
 * di_model_forward (the step's state operations already ran on this queue's pool). NULL: back
 * to di_model_forward. */
typedef deepinfer_status (*di_devq_forward_fn)(void *ctx, const di_step *s, di_model_batch *b, di_error *err);
void di_devq_set_forward(di_devq *q, di_devq_forward_fn fn, void *ctx);

static inline deepinfer_status di_devq_submit(di_devq *q, di_step *s, di_error *e) { return q->vt->submit(q, s, e); }
static inline deepinfer_status di_devq_wait(di_devq *q, di_step *s, di_error *e) { return q->vt->wait(q, s, e); }
static inline void di_devq_destroy(di_devq *q) {
    if (q) q->vt->destroy(q);
}

#endif
