/*
 * eval_ll.h — lm-evaluation-harness's scoring requests over a task file
 * (eval_tasks.h), all scored through one batched ev_score call:
 *
 *   loglikelihood (context, continuation): sum of log p of the continuation
 *     tokens after [BOS] + context, and whether every one is the argmax
 *     (is_greedy). The pair is tokenized as the harness does: trailing
 *     whitespace of the context moves to the continuation, the whole text
 *     and the context are encoded, and the continuation tokens are the whole
 *     text's tokens after the context's.
 *   multiple choice (context, choices, answer): one loglikelihood per choice;
 *     pred = the choice of highest logprob (acc), pred_norm = highest
 *     logprob per byte of the choice (acc_norm); ties go to the first.
 *   loglikelihood_rolling (text): the NLL of [BOS] + text in windows
 *     (eval_rolling.h).
 *
 * Per-item errors (context_too_long: [BOS] + context + continuation longer
 * than the model's context; empty_continuation; wrong_task: a generation
 * item) leave the item out of the aggregates; the rest is scored. On an
 * engine in compact mode every scoring item is EV_NEEDS_PROMPT_LOGPROBS
 * (eval_engine.h).
 */
#ifndef DI_TOOLS_EVAL_LL_H
#define DI_TOOLS_EVAL_LL_H

#include <stdio.h>

#include "eval/eval_model.h"
#include "eval/eval_report.h"
#include "eval/eval_tasks.h"

typedef struct ev_ll_summary {
    int n_ll, n_ll_greedy;
    double ll_sum;
    int n_mc, mc_correct, mc_correct_norm;
    int n_rolling, rolling_windows;
    int64_t rolling_tokens, rolling_bytes;
    double rolling_nll;
    int n_errors;
} ev_ll_summary;

/* Score every item; writes the "items" array's members (comma-separated JSON
 * objects) into *items. window/stride (0 = defaults: the longest rolling text
 * + 1 capped at the context; stride window - 1) shape loglikelihood_rolling.
 * Loads the model (ev_model_load) with the room the items need. */
deepinfer_status ev_score_tasks(ev_model *m, ev_tasks *t, int window, int stride, ev_buf *items, ev_ll_summary *sum,
                                di_error *err);

/* The aggregates as the report's "results" object and as a table (to f). */
void ev_ll_summary_json(ev_buf *b, const ev_ll_summary *s);
void ev_ll_summary_table(FILE *f, const ev_ll_summary *s);

#endif
