/*
 * compact_quality.h — how far V4.1 compact prefill (architecture.md §6.5,
 * YOCO_PREFILL_TRUNCATION_MODE=compact) moves a model's outputs from exact
 * prefill, on the score driver (score.h).
 *
 * Protocol: n_prompts pseudo-random text prompts of prompt_len ..
 * prompt_len + 88 tokens (fixed seeds). For each, exact prefill and `steps`
 * greedy decode steps; then compact prefill (tail `keep`) teacher-forced with
 * the exact run's tokens, so both runs see the same context at every step.
 * Figures: the first generated position's logits (the prefill's last row):
 * mean and max |Δ logit| and the exact rows' logit std (the mean of each
 * row's std); the argmax agreement of that position and of all steps + 1
 * positions.
 */
#ifndef DI_TOOLS_COMPACT_QUALITY_H
#define DI_TOOLS_COMPACT_QUALITY_H

#include "score/score.h"

typedef struct di_compact_quality {
    int n_prompts, steps;
    int64_t keep;
    double first_mean_abs;    /* mean |Δ logit| over the first generated position of every prompt */
    double first_max_abs;
    double first_logit_std;   /* the exact first rows' logit std, averaged over the prompts */
    double first_agree;       /* argmax agreement of the first generated position */
    double greedy_agree;      /* argmax agreement over every scored position (first + steps) */
    int prompt_len_min, prompt_len_max;
} di_compact_quality;

deepinfer_status di_compact_quality_run(const di_score_model *m, int n_prompts, int prompt_len, int steps, int64_t keep,
                                        di_compact_quality *out, di_error *err);

#endif
