/*
 * spec_cost.h — what a step costs, for confidence-scheduled speculative
 * decoding (docs/speculative.md).
 *
 * At engine start the target's step time is measured for a few row counts
 * (one forward of R rows) and the drafter's time for a few request counts;
 * between them the cost is interpolated linearly (beyond the last, the
 * last slope continues). The scheduler then gives each decoding sequence
 * the draft length that maximises expected committed tokens per second:
 * every decode row commits one token, draft j of a sequence is accepted
 * with the survival probability S_j = prod_{i <= j} sigmoid(conf_i) of its
 * confidence logits, and a sequence with drafts pays the drafter for its
 * next step. Candidates are taken in decreasing S (a sequence's S is
 * non-increasing in j, so each sequence gets a prefix), and the best prefix
 * of that order wins — the empty one included, so at saturation nothing is
 * drafted and the step costs what it would without speculation.
 */
#ifndef DI_ENGINE_SPEC_COST_H
#define DI_ENGINE_SPEC_COST_H

#include <stddef.h>
#include <stdint.h>

#include "engine/scheduler.h"

#define DI_SPEC_COST_POINTS 24

struct di_spec_cost {
    int n;                              /* target points */
    int rows[DI_SPEC_COST_POINTS];      /* increasing */
    double sec[DI_SPEC_COST_POINTS];
    int nd;                             /* drafter points */
    int reqs[DI_SPEC_COST_POINTS];      /* increasing */
    double dsec[DI_SPEC_COST_POINTS];
    /* measured while serving (di_spec_cost_observe): decode steps without drafts run on the fastest
     * path (CUDA graphs, device sampling, the asynchronous queue), which the profile's eager forwards
     * do not see, so their time per row count is kept; and speculative steps' time over the table's
     * prediction (host sampling, rollback, feeding), by which predictions are scaled */
    double plain[DI_SPEC_COST_POINTS];  /* by log2 bucket of the rows; 0 = not seen */
    double ratio;                       /* 0 = not seen (1 assumed) */
    /* and the drafts accepted over the survival their confidences predicted (di_spec_cost_observe_drafts),
     * decayed sums: the survivals di_spec_choose values are scaled by (seen + 1) / (predicted + 1) */
    double surv_predicted, surv_seen;
};

/* Interpolated target step time for `rows` rows, drafter time for `n` requests (0 -> 0). */
double di_spec_cost_target(const di_spec_cost *c, int rows);
double di_spec_cost_draft(const di_spec_cost *c, int n);

/* Draft lengths for n decoding sequences: kmax[i] drafts available (already bounded by limits),
 * conf[i] their confidence logits; base_rows rows are in the step besides the drafts, base_tokens of
 * them sampled (each decoding sequence's own row among them, with or without drafts: each commits one
 * token, so a draft is worth its survival over all of them, not over the drafting sequences' rows).
 * k[i] receives the chosen length. The scratch holds n * DEEPINFER_MAX_DRAFT candidates. */
typedef struct di_spec_cand {
    float s;       /* survival probability */
    int seq, j;
} di_spec_cand;
/* A NaN confidence (a drafter without a confidence head: V4's MTP) counts as the engine's measured
 * survival at that draft position, (accepted_at[j] + 1) / (drafted_at[j] + 2) (NULL: 1/2). No
 * drafts while the plain step of base_rows' bucket was not measured (di_spec_cost_plain_known):
 * the table's eager forwards would value it far above what it costs. */
void di_spec_choose(const di_spec_cost *c, int base_rows, int base_tokens, int n, const int *kmax,
                    const float *const *conf, const int64_t *accepted_at, const int64_t *drafted_at, int *k,
                    di_spec_cand *scratch);

/* 1 once a plain step of about `rows` rows (the same log2 bucket) was measured. */
int di_spec_cost_plain_known(const di_spec_cost *c, int rows);

/* 1 if drafts could pay in a step of base_rows rows with n_dec decoding sequences of up to kmax
 * drafts each: some d sequences drafting j each are valued above the plain step, the drafts at
 * position i surviving with the engine's acceptance there (accepted_at[i] / drafted_at[i], never
 * rising with i) once drafted_at[i] >= DI_SPEC_PROBE_SEEN, else certain (S = 1). With certain
 * drafts it bounds di_spec_choose over any confidences: 0 means no draft can pay, so probing for
 * fresh confidences (scheduler.c) would only cost; with measured acceptance it means drafts as
 * likely as those seen so far would not pay. accepted_at / drafted_at NULL: certain. */
#define DI_SPEC_PROBE_SEEN 64
int di_spec_drafts_may_pay(const di_spec_cost *c, int base_rows, int n_dec, int kmax, const int64_t *accepted_at,
                           const int64_t *drafted_at);

/* Record one decode step of `rows` rows that took `secs`: plain (no drafts verified or made) or
 * speculative with `drafting` sequences drafting after it. */
void di_spec_cost_observe(di_spec_cost *c, int plain, int rows, int drafting, double secs);

/* Record one verify group: its drafts' confidence logits conf[0..k) (NaN: none, nothing recorded)
 * and how many were accepted. */
void di_spec_cost_observe_drafts(di_spec_cost *c, const float *conf, int k, int accepted);

/* The table as text (the plan prints it). */
void di_spec_cost_format(const di_spec_cost *c, char *buf, size_t cap);

#endif
