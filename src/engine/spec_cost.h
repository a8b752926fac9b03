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
#include "engine/spec_calib.h"

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
    double ratio;                       /* 0 = not seen (the measured plain steps' ratio to the table
                                         * assumed, else 1) */
    di_spec_calib cal;                  /* the confidence logits' calibration (spec_calib.h) */
};

/* First drafts verified (the engine's drafted_at[0]) below which the survivals are still being
 * learnt (di_spec_cost_exploring). */
#define DI_SPEC_EXPLORE_OUTCOMES 16

/* 1 while fewer than DI_SPEC_EXPLORE_OUTCOMES first drafts were verified (or none is counted): the
 * scheduler then values drafts optimistically (di_spec_choose's explore), so that a head reading too
 * low, or a drafter without one, is found out, and where even that cannot pay nothing is drafted. */
int di_spec_cost_exploring(const int64_t *drafted_at);

/* Interpolated target step time for `rows` rows, drafter time for `n` requests (0 -> 0). */
double di_spec_cost_target(const di_spec_cost *c, int rows);
double di_spec_cost_draft(const di_spec_cost *c, int n);

/* Draft lengths for n decoding sequences: kmax[i] drafts available (already bounded by limits),
 * conf[i] their confidence logits; base_rows rows are in the step besides the drafts, commit_rows of
 * them commit one token each (every decoding sequence's own row, drafting or not; at least n). k[i]
 * receives the chosen length. The
 * scratch holds n * DEEPINFER_MAX_DRAFT candidates. */
typedef struct di_spec_cand {
    float s;       /* survival probability */
    int seq, j;
} di_spec_cand;
/* Each draft's conditional acceptance is its calibrated confidence (spec_calib.h). A NaN confidence (a
 * drafter without a confidence head: V4's MTP) counts as the engine's measured survival at that draft
 * position, m_j = (accepted_at[j] + 1) / (drafted_at[j] + 2) (NULL: 1/2), the mean of its Beta posterior.
 * With `explore` (di_spec_cost_exploring) every survival is taken at least at u_j, m_j plus two posterior
 * deviations (at most 1), and a NaN one at u_j. */
void di_spec_choose(const di_spec_cost *c, int base_rows, int commit_rows, int n, const int *kmax,
                    const float *const *conf, const int64_t *accepted_at, const int64_t *drafted_at, int explore,
                    int *k, di_spec_cand *scratch);

/* Record one decode step of `rows` rows that took `secs`: plain (no drafts verified or made) or
 * speculative with `drafting` sequences drafting after it. */
void di_spec_cost_observe(di_spec_cost *c, int plain, int rows, int drafting, double secs);

/* The table as text (the plan prints it). */
void di_spec_cost_format(const di_spec_cost *c, char *buf, size_t cap);

#endif
