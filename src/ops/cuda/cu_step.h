/*
 * cu_step.h — recorded steps on the CUDA backend (cu_plan.c; CUDA builds
 * only; docs/cuda-backend.md §6): the step plan (every op's host tables of
 * a step in one pinned buffer, one copy), CUDA graphs per step shape, a
 * device argmax, GPU timing per step. Reached through backend.h's table
 * (cu_backend.c); the decode loops that use them are the engine's queue
 * (src/engine/devq.c) and the benchmarks' loop (src/engine/greedy_loop.c).
 */
#ifndef DI_OPS_CUDA_CU_STEP_H
#define DI_OPS_CUDA_CU_STEP_H

#include <stdint.h>

#include "ops/ops.h"

/* Give exec x a step plan: two pinned host buffers, a sink for padded
 * scatters, start/end events for the first max_steps steps (0: no timing).
 * Any number of steps may follow; eager steps between recorded ones stage
 * their tables per op as without a plan. Page-table reserves cover
 * positions below pos_bound. Also used, without ever opening a plan step,
 * to time eager steps (di_cuda_mark). */
deepinfer_status di_cuda_plan_enable(di_exec *x, int64_t pos_bound, int max_steps, di_error *err);
/* Synchronise, destroy the graphs, free the plan. */
void di_cuda_plan_disable(di_exec *x);

/* Open a recorded step of shape `key` (the caller's: rows and segments of
 * the step). The first step of a key records its kernels into a CUDA
 * graph; later ones only build the tables (the graph replays them). */
deepinfer_status di_cuda_step_begin(di_exec *x, uint64_t key, di_error *err);
/* Close it: instantiate (first time), check the step's launches and table
 * layout against the graph's, copy the plan once, launch the graph. */
deepinfer_status di_cuda_step_end(di_exec *x, di_error *err);

/* Close an open step whose forward failed without running it: a capture
 * ends and its shape is forgotten (the next step of the key captures
 * again); nothing is copied or launched. No-op when no step is open. */
void di_cuda_step_abort(di_exec *x);

/* Eager steps: record the start (end = 0) or the end (end = 1) of a step. */
void di_cuda_mark(di_exec *x, int end);

/* ids[m] = argmax of logits row m (ties to the lowest id), on the stream. */
void di_cuda_argmax(di_exec *x, int M, const float *logits, int V, int32_t *ids);
/* The same argmax fused into the GEMM that writes those logits (the lm_head): _fuse before the
 * forward asks the GEMM whose fp32 output is `logits` (M rows of V, row stride V) to write ids
 * too (fast mode, dic_gemm_int.h dic_gemm_argmax: BF16 weights, M <= 8; the choice depends on
 * shapes only, so a step's capture and its replays agree); _rest after it runs di_cuda_argmax
 * unless the GEMM did, and clears the request. The ids are dic_argmax's. */
void di_cuda_argmax_fuse(di_exec *x, int M, const float *logits, int V, int32_t *ids);
void di_cuda_argmax_rest(di_exec *x, int M, const float *logits, int V, int32_t *ids);

/* After the steps: busy_ms[i] = GPU time from step i's start to its end,
 * start_ms[i] = its start after step 0's. Synchronises. Returns the
 * number of steps timed (<= n). */
int di_cuda_step_times(di_exec *x, float *busy_ms, float *start_ms, int n);
/* Graphs captured so far. */
int di_cuda_plan_graphs(const di_exec *x);
/* The plan's counters (backend.h di_backend_plan_stats_get): graphs captured, recorded steps
 * ended (captures and replays), replays, the last recorded step's plan bytes and the plan's
 * capacity. -1 when x has no plan. */
int di_cuda_plan_stats(const di_exec *x, int *graphs, int64_t *recorded, int64_t *replayed, size_t *last_bytes,
                       size_t *cap_bytes);

#endif
