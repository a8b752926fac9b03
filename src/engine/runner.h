/*
 * runner.h — turns the scheduler's plan into a device step (the "how"):
 * token rows with their positions and sequence states, placeholders for
 * tokens still being sampled on the device, logits rows and sampling specs,
 * and the state operations. Two step buffers alternate, so step N+1 can be
 * built while step N is in flight.
 *
 * Building a step advances the host counters of every planned choice
 * (n_sched; n_pending and pend_sample for rows that sample) and, for a
 * request with prompt logprobs, its plp_sched: each prompt row but the last
 * from plp_sched on becomes a prompt-logprob row (devq.h di_plp_spec).
 */
#ifndef DI_ENGINE_RUNNER_H
#define DI_ENGINE_RUNNER_H

#include "engine/devq.h"
#include "engine/scheduler.h"
#include "engine/state_pool.h"

typedef struct di_step_item { /* who had rows in a step (to fail them if the step fails) */
    uint64_t request_id;
    int choice;
    int rows;
    int decode;               /* 1: a single decode row (and its drafts under verification); 0: prompt / recompute rows */
} di_step_item;

typedef struct di_step_buf {
    di_step step;
    int32_t *tokens;
    int64_t *pos;
    int64_t *late_from;          /* compact prefill (batch.h late_from); used when the runner's keep > 0 */
    di_seq_state **seq;
    int32_t *src;
    int32_t *dsrc;               /* speculative decoding: the held drafts' indices (devq.h di_step dsrc) */
    di_sample_spec *samples;
    di_state_op *ops;
    di_step_item *items;
    int n_items;
    di_spec_item *spec;          /* speculative decoding: one per item (items[i] <-> spec[i]) */
    di_plp_spec *plp;            /* prompt logprobs: [max_rows] */
} di_step_buf;

typedef struct di_runner {
    di_state_pool *pool;
    const uint32_t *base_mask;   /* ids any request may sample (NULL = all): a text-only model's image token is out */
    int max_rows, max_items;
    int64_t yoco_keep;           /* > 0: compact prefill, each request's late layers from n_prompt - yoco_keep */
    int spec_n;                  /* > 0: speculative decoding (every item gets a spec entry; drafts up to spec_n) */
    di_step_buf buf[2];
    int next;
    uint64_t seq_no;
} di_runner;

deepinfer_status di_runner_init(di_runner *r, di_state_pool *pool, int max_rows, int max_items, di_error *err);

/* Speculative decoding on with drafts of up to spec_n tokens: the runner then gives each item a
 * di_spec_item, builds verify groups (the decode row and its drafts, every row sampled; the drafts
 * are also written after the choice's outputs as the history later samples read) and sizes the
 * sample specs for them. */
deepinfer_status di_runner_enable_spec(di_runner *r, int spec_n, di_error *err);
void di_runner_free(di_runner *r);

/* Build the step for `plan`; NULL when the plan has no rows. The step stays
 * valid until the next-but-one call. A choice whose drafts the queue holds from the step built
 * last (di_choice draft_held) gets draft rows whose tokens, comparisons and history the queue
 * fills in (di_step dsrc); the scheduler plans held drafts only in that step (scheduler.h next_seq). */
di_step_buf *di_runner_build(di_runner *r, const di_plan *plan);

#endif
