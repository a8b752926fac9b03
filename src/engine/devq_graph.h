/*
 * devq_graph.h — recorded decode and verify steps for the queue (devq.c).
 * On the CUDA backend a step whose sequences each run L consecutive rows,
 * every row sampled (L = 1: a pure decode step; L = 1 + k: speculative
 * verify groups of k drafts each, docs/speculative.md), runs its forward
 * as a recorded step of the step plan (ops/backend.h di_backend_step_begin:
 * one CUDA graph per (rows, L, token source, drafter input),
 * docs/cuda-backend.md §6, §8): the first step of a key captures the
 * graph, later ones build the host tables and replay it. The logits stay
 * in the model's device buffer until the step has ended (the device
 * sampler reads them there, or they come back to the queue's host
 * array). A recorded step computes exactly what the eager step computes.
 * Everything else (prefill, mixed steps, verify groups of different
 * lengths, the CPU backend) stays eager.
 */
#ifndef DI_ENGINE_DEVQ_GRAPH_H
#define DI_ENGINE_DEVQ_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "util/error.h"

typedef struct di_devq_graph {
    di_model *model;
    di_exec *x;            /* the model's exec */
    const float *dlogits;  /* the model's device logits */
    size_t V;
    int max_rows;          /* rows of one forward pass */
    int on;                /* a plan is enabled on x */
    int rows_ok;           /* the largest row count whose plan is known to fit */
    const void *hidden;    /* the drafter-input buffer recorded steps may write (di_devq_graph_set_hidden) */
    int64_t steps;         /* target steps run recorded */
} di_devq_graph;

/* want = 0: never record (the switch). On the CUDA backend enable the
 * plan on the model's exec (positions below the model's max_context);
 * elsewhere, or when the plan cannot be enabled, g stays off: every step
 * runs eager. page_rows: the smallest rows per page of the state pool
 * (bounds the page tables of a step before any was measured). Never
 * fails. */
void di_devq_graph_init(di_devq_graph *g, di_model *m, int want, int page_rows);
void di_devq_graph_free(di_devq_graph *g);

/* Speculative decoding: the one buffer (device memory, fixed for g's life) a recorded step may
 * write the drafter's input to (model.h di_model_batch_set_draft_hidden); NULL: none. */
void di_devq_graph_set_hidden(di_devq_graph *g, const void *buf);

/* 1 if the step `b` (n_logits rows in b->logit_rows) runs recorded: every row sampled, every
 * sequence's rows consecutive and as many as every other's (L = 1: decode rows; L = 1 + k: verify
 * groups of k drafts, not in a compact-prefill step), no hidden output but g's drafter buffer. */
int di_devq_graph_takes(const di_devq_graph *g, const di_model_batch *b);

/* The forward of a step di_devq_graph_takes accepted, recorded (one graph
 * per row count, rows per sequence, token source: host or
 * b->tokens_on_device, and drafter input written or not); the
 * logits stay in the model's device buffer (row i at i * vocab) and
 * nothing waits for the device. */
deepinfer_status di_devq_graph_run(di_devq_graph *g, const di_model_batch *b, di_error *err);

/* di_devq_graph_run, then the n_logits rows' logits into `logits`
 * ([n_logits][vocab], host), waiting for the step. */
deepinfer_status di_devq_graph_forward(di_devq_graph *g, const di_model_batch *b, float *logits, di_error *err);

/* Graphs captured on the exec (the target's and the drafter's shapes) and target steps run
 * recorded so far (0 when off). */
void di_devq_graph_counts(const di_devq_graph *g, int *graphs, int64_t *steps);

#endif
