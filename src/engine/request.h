/*
 * request.h — one request and its choices (sequences).
 *
 * A request holds the tokenized prompt, a private copy of its sampling
 * parameters and n choices. Each choice is one sequence the scheduler runs:
 * its generated tokens, their logprobs, its text (detokenized incrementally,
 * stop strings applied), its state slot while running, and the counters the
 * scheduler and the runner keep:
 *
 *   n_prompt + n_out   tokens known on the host (prompt, processed outputs)
 *   n_pending          samples of the step in flight not yet processed
 *                      (0 or 1 when scheduling; the device writes them into
 *                      out_ids directly, so later samples see them)
 *   n_sched            positions whose state is computed once the steps in
 *                      flight finish
 *
 * The next rows to run are positions [n_sched, n_prompt + n_out + n_pending);
 * a step that reaches the end samples the next token. Preemption sets
 * n_sched back to 0: the prompt and the outputs so far are recomputed and
 * generation continues where it stopped.
 *
 * The public output (deepinfer_request_output) is the first member, so the
 * output handed to the caller is the request itself.
 */
#ifndef DI_ENGINE_REQUEST_H
#define DI_ENGINE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "engine/sampling_params.h"
#include "engine/stop_strings.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

typedef enum di_choice_state { DI_CHOICE_WAITING = 0, DI_CHOICE_RUNNING, DI_CHOICE_FINISHED } di_choice_state;

typedef struct di_request di_request;

typedef struct di_choice {
    di_request *req;
    int index;                 /* choice index (Philox stream) */
    di_choice_state state;
    uint64_t prio;             /* FCFS order: (request id, choice); smaller runs first */
    int slot;                  /* state slot while running, else -1 */
    int fork_wait;             /* n > 1: waits to be forked from choice 0 after the shared prompt prefill */
    /* tokens */
    int32_t *out_ids;          /* [max_tokens] */
    int32_t n_out, n_pending;
    int32_t pend_sample;       /* index of the pending sample in the step in flight */
    int64_t n_sched;
    /* logprobs (NULL when params.logprobs < 0) */
    float *logprobs;           /* [max_tokens] */
    int32_t *top_ids;          /* [max_tokens][n_top] */
    float *top_lp;
    /* text */
    di_detok detok;
    di_stop_matcher stop;      /* sees the text from min_tokens on, primed with the text before (outputs.c) */
    int stop_primed;           /* the matcher has been primed */
    size_t stop_base;          /* offset in `text` of the matcher's first byte */
    char *text;
    size_t text_len, text_cap;
    /* the scheduler's per-step mark: index of this choice's item in the plan being built, or -1 */
    int plan_item;
    int plan_op;               /* index of the copy op that forks this choice in the plan being built, or -1 */
    so_matcher *matcher;       /* structured outputs: advanced by the device as it samples; NULL = none */
    int num_preemptions;
    /* speculative decoding (docs/speculative.md): the drafter's tokens for the positions after the
     * last output, out_ids[n_out + i] for i < n_draft, with their confidence logits; made by the step
     * that sampled out_ids[n_out - 1], consumed (verified or dropped) by the next step that runs it */
    int32_t draft[DEEPINFER_MAX_DRAFT];
    float draft_conf[DEEPINFER_MAX_DRAFT];
    int n_draft;
    uint64_t draft_held;       /* > 0: draft[] is not filled in; the queue holds the drafts for the step after step
                                  draft_held only (devq.h di_spec_item drafts_held), draft i at draft_src0 + i */
    int draft_src0;
    int spec_backoff;          /* probes in a row whose drafts were not taken (the probe interval's doubling) */
} di_choice;

struct di_request {
    deepinfer_request_output out;  /* must stay first */
    uint64_t id;
    di_sampling_params params;     /* strings point into `strings` */
    char *strings;                 /* owned copies of stop strings and the schema */
    uint64_t seed;                 /* params.seed, or derived from the engine seed and the id */
    int32_t *prompt;
    int32_t n_prompt;
    int32_t eos_id;                /* -1 when none (or ignore_eos) */
    int n_choices, n_finished;
    di_choice *choices;
    so_grammar *grammar;           /* compiled so_args, shared by the choices' matchers; NULL = none */
    deepinfer_completion *pub;     /* the public view of each choice */
    char error[DI_ERROR_MSG_MAX];
    int updated;                   /* listed in the engine's updated list this step */
    /* prompt logprobs (params.prompt_logprobs >= 0; else NULL): entry i for prompt position i, filled
     * by the queue from the logits of row i - 1; rows below plp_sched have been asked for in a step
     * already (by any choice), so a recompute or a sibling's prefill does not ask again */
    float *plp;                    /* [n_prompt] */
    int32_t *plp_top_ids;          /* [n_prompt][K] */
    float *plp_top_lp;
    int64_t plp_sched;
    double last_token_s;
};

/* A new request with a copy of the prompt ids and params (validated by the
 * caller). Caller frees with di_request_free. NULL when out of memory. */
di_request *di_request_new(uint64_t id, const int32_t *prompt, size_t n_prompt, const di_sampling_params *params,
                           uint64_t seed, int32_t eos_id, const di_tokenizer *tok);

/* A request that failed before it could run: status and message only. */
di_request *di_request_new_failed(uint64_t id, deepinfer_status st, const char *msg);

void di_request_free(di_request *r);

/* The request owning a public output pointer (the output is its first member). */
static inline di_request *di_request_of(deepinfer_request_output *o) { return (di_request *)o; }

#endif
