/*
 * lanes.h — a step's rows split into lanes: contiguous groups of whole
 * sequences that run the entire forward on one thread each, in one pool
 * region per step, instead of every op of the step being a region of its own.
 *
 * Why: on a cache-resident model a decode step at batch 32 is ~750 small
 * ops (norms, RoPE, QAT, attention over a window, indexer, Sinkhorn,
 * Engram); most are too small to split (di_chunks_for gives one chunk), so
 * they ran serially and the region barriers of the rest cost as much as
 * their work: threads did not speed batch decode up (docs/cpu-backend.md
 * §2). A lane runs its ops serially (a region inside a region runs
 * on the caller, threadpool.h), with its own workspace (di_core_init_lane).
 *
 * Results: a row's outputs never depend on which rows share its step (the
 * batch-invariance contract, docs/determinism.md; tested by
 * test_engine_invariance: 64 requests together == each alone), and a
 * sequence's rows stay in one lane in order; so the split changes which
 * rows share a GEMM, never a result. tests/model/test_lanes.c checks
 * logits and hidden rows bitwise for 2, 3, 5 and 64 lanes against the
 * op-parallel path (V4.1 and V4 golden checkpoints).
 */
#ifndef DI_MODEL_LANES_H
#define DI_MODEL_LANES_H

#include "model/core.h"

#define DI_LANES_MAX 64       /* lanes a step is split into at most */
#define DI_LANE_SEG_ROWS 16   /* steps with a longer sequence piece (prefill) stay op-parallel */
#define DI_LANE_ROWS 32       /* rows a lane's workspace holds per pass (more: passes in turn) */
/* Lanes read every weight once per lane instead of once per step: only
 * worth it while a step's weights stay in the last-level cache (the golden
 * checkpoints: 2.3-3.1 MB); bigger models keep one GEMM over all rows. */
#define DI_LANE_WEIGHT_BYTES ((size_t)8 << 20)

/* How many lanes a checked batch on `main` splits into (1: none): CPU only,
 * no index observer (it is called in row order), at most `lanes_max` (0:
 * the pool size if the step reads at most DI_LANE_WEIGHT_BYTES of weights,
 * else 1); start as di_lanes_plan. */
int di_lanes_plan_core(const di_core *main, int lanes_max, size_t step_weight_bytes, const di_v4_batch *b, int *start);

/* The cores of lanes 1..n-1 (lane 0 runs on the model's own core), each
 * made once (di_core_init_lane, DI_LANE_ROWS rows) and kept. */
typedef struct di_lane_cores {
    di_core *c[DI_LANES_MAX]; /* c[i]: lane i + 1 */
    int n;
} di_lane_cores;
deepinfer_status di_lane_cores_ensure(di_lane_cores *l, const di_core *main, int nl, di_error *err);
void di_lane_cores_free(di_lane_cores *l);

/* Split rows [0, b->n) into at most `max_lanes` lanes of whole sequences
 * with balanced row counts: lane i is [start[i], start[i + 1]). Returns the
 * lane count, or 1 (don't split) when the step has one sequence, a piece
 * longer than DI_LANE_SEG_ROWS, or max_lanes < 2. start: DI_LANES_MAX + 1. */
int di_lanes_plan(const di_v4_batch *b, int max_lanes, int *start);

/* Run fn(ctx, lane, r0, n, err) for each lane on the global pool; the
 * first failing lane's status and message are returned. */
typedef deepinfer_status (*di_lane_fn)(void *ctx, int lane, int r0, int n, di_error *err);
deepinfer_status di_lanes_run(int nl, const int *start, di_lane_fn fn, void *ctx, di_error *err);

#endif
