/*
 * spec_calib.h — online calibration of the drafter's confidence logits, for confidence-scheduled
 * speculative decoding (spec_cost.h, docs/speculative.md "Confidence-scheduled lengths").
 *
 * The DSpark confidence head gives each draft position a logit c_j read as the probability that
 * draft j is accepted given the earlier drafts were (docs/architecture.md §7.2). A head can be
 * miscalibrated for the traffic served (the demo model's reads about half the acceptance the
 * verifier then measures), and a scheduler trusting it drafts too little or too much. So every
 * verified draft position is an outcome — accepted, or the first rejection; positions after a
 * rejection are not observed, which keeps the outcomes conditional as the head's reading is — and
 * each position fits P(accept | c) = sigmoid(a_j c + b_j) to its outcomes (Platt scaling): a
 * regularised Newton fit over logit bins, position j's prior centred on position j - 1's fit and
 * position 0's on the head itself (a = 1, b = 0), so few outcomes move it little and a position
 * that is rarely reached borrows from the one before. Old outcomes fade (each position's counts
 * halve past DI_SPEC_CALIB_HORIZON outcomes), so the fit follows the traffic. Scheduling only:
 * what is accepted never depends on it (the verifier's own sampling decides), so outputs are the
 * same with any calibration.
 */
#ifndef DI_ENGINE_SPEC_CALIB_H
#define DI_ENGINE_SPEC_CALIB_H

#include "deepinfer.h"

#define DI_SPEC_CALIB_BINS 32         /* logit bins of width 0.5 over [-8, 8); outside: the end bins */
#define DI_SPEC_CALIB_HORIZON 4096.0  /* outcomes per position before its counts halve */

typedef struct di_spec_calib {
    double acc[DEEPINFER_MAX_DRAFT][DI_SPEC_CALIB_BINS]; /* accepted outcomes by position and bin */
    double rej[DEEPINFER_MAX_DRAFT][DI_SPEC_CALIB_BINS]; /* rejected */
    double csum[DEEPINFER_MAX_DRAFT][DI_SPEC_CALIB_BINS]; /* sum of the logits of both: the bin's mean */
    double obs[DEEPINFER_MAX_DRAFT];                      /* outcomes at each position (after fading) */
    float a[DEEPINFER_MAX_DRAFT], b[DEEPINFER_MAX_DRAFT]; /* the fit; valid where fitted */
    int fitted;                                            /* 0: the head as it reads (a = 1, b = 0) */
    double pending;                                        /* outcomes added since the last fit */
} di_spec_calib;

/* One sequence's verified drafts: conf[0..drafted) their logits, `accepted` of them accepted (the
 * longest agreeing prefix). NaN logits (a drafter without a confidence head) are not recorded. */
void di_spec_calib_add(di_spec_calib *cal, const float *conf, int drafted, int accepted);

/* Refit every position when the outcomes added since the last fit are at least 1/64 of those kept at
 * position 0 (every step at first, then about every 64 outcomes: a fit costs ~10 us). */
void di_spec_calib_fit(di_spec_calib *cal);

/* P(draft j accepted | earlier accepted) for confidence logit `conf`. */
float di_spec_calib_prob(const di_spec_calib *cal, int j, float conf);

#endif
