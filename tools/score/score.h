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
#ifndef DI_TOOLS_SCORE_H
#define DI_TOOLS_SCORE_H

#include <stdint.h>

#include "model/dsv4.h"
#include "model/dsv41.h"

typedef struct di_score_req {
    const int32_t *prompt;
    int n_prompt;
    int all_positions;
    int steps;                /* greedy decode steps (ignored with force_ids) */
    const int32_t *force_ids; /* teacher-forced decode inputs, or NULL */
    int n_force;
    int chunk;                /* prefill chunk size; 0 = the whole prompt */
    int batch_with;           /* unrelated requests in the same steps */
    int64_t yoco_keep;        /* > 0: V4.1 compact prefill (architecture.md §6.5): the layers after the last KV
                                 source run only on each prompt's last yoco_keep tokens; all_positions is then
                                 refused (those rows have no logits); 0 = exact */
} di_score_req;

typedef struct di_score_result {
    int n_rows;
    float *logits;   /* [n_rows][vocab] (caller frees with di_score_result_free) */
    int32_t *argmax; /* [n_rows] */
} di_score_result;

/* The model being scored: any V4-family model behind two calls. */
typedef struct di_score_model {
    void *model;
    const di_model_config *cfg;
    int64_t max_context;
    deepinfer_status (*seq_new)(const void *model, di_seq_state **out, di_error *err);
    deepinfer_status (*forward)(void *model, const di_v4_batch *b, di_error *err);
} di_score_model;

deepinfer_status di_score_run(const di_score_model *m, const di_score_req *req, di_score_result *out, di_error *err);

/* The score view of a V4 / V4.1 model. */
di_score_model di_score_model_v4(di_v4_model *m);
di_score_model di_score_model_v41(di_v41_model *m);

/* di_score_run on a V4 / V4.1 model. */
deepinfer_status di_v4_score(di_v4_model *m, const di_score_req *req, di_score_result *out, di_error *err);
deepinfer_status di_v41_score(di_v41_model *m, const di_score_req *req, di_score_result *out, di_error *err);
void di_score_result_free(di_score_result *r);

#endif
