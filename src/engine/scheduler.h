/*
 * scheduler.h — decides what runs in each step (nano-vllm's split: the
 * scheduler decides *what*, the runner *how*, the model only wires).
 *
 * Continuous batching over choices (sequences), first come first served by
 * (request id, choice index):
 *   1. every running sequence with one row left (a decode token, or the last
 *      token of a prompt) gets it, in FCFS order, while the step's token
 *      budget (max_num_batched_tokens) lasts;
 *   2. running sequences with more rows left (prefill, or recompute after
 *      preemption) get a chunk of at most chunk_size rows, FCFS;
 *   3. waiting sequences are admitted in FCFS order while a state slot is
 *      free, budget remains and the page pool can hold their first chunk
 *      with a watermark of free pages to spare. Admission is optimistic: a
 *      sequence is not promised pages for its whole output.
 * When a running sequence needs pages the pool does not have, the sequence
 * admitted last (the lowest FCFS priority) is preempted: its slot and pages
 * go back to the pools and it returns to the waiting queue at its FCFS place
 * (ahead of every later request), to be recomputed later (prompt + outputs
 * so far, then generation continues). A sequence that cannot get pages
 * after every later one is gone preempts itself. No admission happens in a
 * step that preempted. Requests whose prompt + max_tokens cannot fit the
 * whole pool are rejected when added, so the first sequence can always run.
 *
 * n > 1: choice 0 prefills the prompt up to its last token; then every other
 * choice that can get a slot is forked from it (a state copy) and each choice
 * runs the last prompt token itself, sampling with its own noise stream.
 * Choices that cannot be forked then recompute the prompt later.
 *
 * Speculative decoding (cfg.spec_n > 0, docs/speculative.md): after the
 * decode rows are planned, each decoding sequence with drafts gets up to
 * spec_n of them as extra rows (a verify group: every row from its decode
 * row on is sampled), within max_tokens, the context, the budget and the
 * free pages nobody is owed (drafts never preempt, and leave the pages the
 * running sequences' known rows still need and the watermark): all of them with a fixed length, or
 * with cfg.spec_cost the lengths spec_cost.h's rule picks. Drafts come
 * before prefill chunks in the budget. Which sequences draft after the
 * step is part of the plan (draft_next): with a fixed length every
 * sampling sequence; with confidence scheduling those given drafts now,
 * those that just finished their prompt, and the others after 16 steps
 * (a probe that refreshes their confidence; the interval doubles after
 * each probe whose drafts were not taken, up to 256).
 *
 * Prompt logprobs (params.prompt_logprobs >= 0): every prompt row but the
 * last gives logits; a step holds at most cfg.prompt_lp_rows of them (the
 * host logits buffer's share), so such a request's chunks are cut to fit.
 *
 * The plan lists items (sequence, rows, sample?) and ordered state
 * operations (reset a slot, copy a slot into another) that must run on the
 * device before the step's forward. Counters in the choices (n_sched,
 * n_pending) are advanced by the runner when it builds the step.
 */
#ifndef DI_ENGINE_SCHEDULER_H
#define DI_ENGINE_SCHEDULER_H

#include <stdint.h>

#include "engine/request.h"
#include "engine/state_pool.h"

typedef struct di_plan_item {
    di_choice *c;         /* NULL: dropped (its sequence was preempted later in the same pass) */
    int64_t pos0;         /* first row's position (= n_sched when planned) */
    int n;                /* rows */
    int sample;           /* the last row's logits are sampled */
    int draft;            /* speculative decoding: the last `draft` rows are the choice's drafts, every row
                             from the decode row on is sampled (a verify group); 0 = none */
    int draft_next;       /* speculative decoding: draft for the choice after this step's sample */
} di_plan_item;

typedef enum di_state_op_kind { DI_OP_RESET = 0, DI_OP_COPY = 1, DI_OP_NONE = 2 /* dropped */ } di_state_op_kind;

typedef struct di_state_op {
    di_state_op_kind kind;
    int dst, src;         /* slots (src for copies) */
} di_state_op;

typedef struct di_plan {
    di_plan_item *items;  /* [max_num_seqs] */
    int n_items;
    di_state_op *ops;     /* [2 * max_num_seqs] */
    int n_ops;
    int n_rows, n_samples;
    int n_preempted;      /* preemptions in this pass */
} di_plan;

/* Step cost by rows, for confidence-scheduled speculation (spec_cost.h). */
typedef struct di_spec_cost di_spec_cost;

typedef struct di_sched_config {
    int max_num_batched_tokens;
    int max_num_seqs;
    int chunk_size;
    int64_t max_model_len;
    int64_t watermark_pages;  /* free pages admission leaves untouched */
    int spec_n;               /* speculative decoding: the longest draft verified per sequence (0 = off) */
    const di_spec_cost *spec_cost; /* confidence-scheduled draft lengths with this step cost; NULL: fixed (spec_n) */
    const int64_t *spec_accepted_at, *spec_drafted_at; /* the engine's acceptance by draft position (spec_cost.h) */
    int prompt_lp_rows;       /* prompt logprobs: at most this many prompt rows per step ask for logits (>= 1) */
} di_sched_config;

typedef struct di_scheduler {
    di_sched_config cfg;
    di_state_pool *pool;
    di_choice **waiting;      /* FCFS order */
    int n_waiting, cap_waiting;
    di_choice **running;      /* FCFS order */
    int n_running;
    int64_t preemptions;
    di_plan plan;
    /* speculative decoding scratch (max_num_seqs entries; cand: x DEEPINFER_MAX_DRAFT) */
    int *spec_item, *spec_kmax, *spec_k;
    const float **spec_conf;
    struct di_spec_cand *spec_cand;
    int64_t spec_clock;       /* steps planned with confidence scheduling: the probes' common clock */
    uint64_t next_seq;        /* the number the step planned next will have (the engine sets it): drafts held
                                 from another step than the one before are not planned (di_choice draft_held) */
} di_scheduler;

deepinfer_status di_sched_init(di_scheduler *s, const di_sched_config *cfg, di_state_pool *pool, di_error *err);
void di_sched_free(di_scheduler *s);

/* Make room in the waiting queue for n more choices (called when a request
 * is added, so that the step loop never allocates). */
deepinfer_status di_sched_reserve(di_scheduler *s, int n, di_error *err);

/* Queue every choice of a new request (ids increase, so at the back). */
void di_sched_add(di_scheduler *s, di_request *r);

/* Plan one step into s->plan. */
void di_sched_schedule(di_scheduler *s);

/* Take a choice out of the queues for good (finished, aborted, failed):
 * its slot and pages return to the pools. */
void di_sched_remove(di_scheduler *s, di_choice *c);

/* Whether the choice can still ask for rows: not finished and below its
 * output and context limits counting samples in flight. */
int di_sched_can_run(const di_scheduler *s, const di_choice *c);

#endif
