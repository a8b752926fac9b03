/*
 * score.h — the driver behind `deepinfer score` (docs/DESIGN.md §4): prefill
 * a prompt (whole or in chunks), then single-token decode steps, greedy or
 * teacher-forced, optionally alongside unrelated requests in the same steps.
 *
 * Output rows: the prompt rows (every position with all_positions, else the
 * last), then one row per decode step. Decode step i feeds the argmax of the
 * previous row (steps) or force_ids[i] (teacher forcing).
 *
 * batch_with = M adds M unrelated requests (fixed pseudo-random prompts of
 * different lengths, prefilled in chunks of different sizes, then decoded
 * greedily) to every step, with the scored request placed among them. The
 * scored request's logits do not depend on them (bitwise).
 */
#ifndef DI_MODEL_SCORE_H
#define DI_MODEL_SCORE_H

#include <stdint.h>

#include "model/dsv4.h"

typedef struct di_score_req {
    const int32_t *prompt;
    int n_prompt;
    int all_positions;
    int steps;                /* greedy decode steps (ignored with force_ids) */
    const int32_t *force_ids; /* teacher-forced decode inputs, or NULL */
    int n_force;
    int chunk;                /* prefill chunk size; 0 = the whole prompt */
    int batch_with;           /* unrelated requests in the same steps */
} di_score_req;

typedef struct di_score_result {
    int n_rows;
    float *logits;   /* [n_rows][vocab] (caller frees with di_score_result_free) */
    int32_t *argmax; /* [n_rows] */
} di_score_result;

deepinfer_status di_v4_score(di_v4_model *m, const di_score_req *req, di_score_result *out, di_error *err);
void di_score_result_free(di_score_result *r);

#endif
