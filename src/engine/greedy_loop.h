/*
 * greedy_loop.h — greedy decoding of sequences already prefilled, through
 * the model API: the loop of the decode benchmarks (`deepinfer-cuda bench
 * --dummy`'s "(graph)" rows) and of the GPU test of recorded steps
 * (tests/ops/cuda/gtest_graph.c). The engine's own decode path is its
 * device queue (devq.h); this loop is its bare form for measurements: no
 * scheduler, no sampler, the greedy token of every row.
 *
 * Step s feeds every sequence's token (first[] at s = 0, then the argmax of
 * its previous row). graph = 0: eager steps (host tables staged per op,
 * logits copied back, host argmax). graph = 1 (a model on the CUDA backend):
 * recorded steps (ops/backend.h: the step plan and one CUDA graph for the
 * shape, docs/cuda-backend.md §6), the argmax on the device (fused into
 * the lm_head GEMM where the backend can) writing the next step's token
 * buffer, logits left on the device (copied out only when `logits` is
 * given); the host queues step after step without waiting for the device.
 * A model whose forward needs host tokens (V4.1's Engram hash, the image
 * token) reads the ids back every step. On the device the first `steps`
 * steps are timed (busy_ms, start_ms: backend.h di_backend_step_times).
 */
#ifndef DI_ENGINE_GREEDY_LOOP_H
#define DI_ENGINE_GREEDY_LOOP_H

#include <stdint.h>

#include "model/model.h"
#include "util/error.h"

typedef struct di_greedy_loop {
    di_model *model;
    int nseq;
    di_seq_state **seq;
    const int32_t *first;     /* [nseq] */
    int steps;
    int graph;
    float *logits;            /* optional [steps][nseq][vocab] */
    int32_t *ids;             /* optional [steps][nseq] */
    float *busy_ms, *start_ms;/* optional [steps] (device only) */
    int ngraphs;              /* out: graphs captured */
} di_greedy_loop;

deepinfer_status di_greedy_loop_run(di_greedy_loop *L, di_error *err);

#endif
