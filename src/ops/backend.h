/*
 * backend.h — which compute backend runs the model: the CPU (always
 * available) or CUDA (when the binary was built with `make cuda` and a GPU
 * with a working driver is present).
 *
 * The CUDA objects are optional at link time: the CPU-only library refers to
 * the CUDA probe through a weak symbol, so one set of C objects serves both
 * builds and a CUDA binary on a machine without a GPU falls back cleanly.
 */
#ifndef DI_OPS_BACKEND_H
#define DI_OPS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

struct di_exec; /* ops/ops.h */

typedef enum di_backend_kind { DI_BACKEND_CPU = 0, DI_BACKEND_CUDA = 1 } di_backend_kind;

typedef struct di_cuda_info {
    int compiled;        /* 1 if CUDA code is linked into this binary */
    int device_count;    /* usable devices (0 when none or no driver) */
    char name[128];      /* device 0 name */
    int cc_major, cc_minor;
    size_t total_mem;
    char why[256];       /* when device_count == 0: the runtime's reason */
} di_cuda_info;

/* Probe CUDA (cheap; safe without a driver). */
void di_backend_cuda_info(di_cuda_info *info);

/* Choose a backend. `want` is "auto", "cpu", "cuda" or NULL (then
 * $DEEPINFER_ACCELERATOR, else "auto"). "auto" picks CUDA when a device is
 * usable, else the CPU. Asking for "cuda" explicitly when none is usable is
 * an error that says why. */
deepinfer_status di_backend_select(const char *want, di_backend_kind *out, di_error *err);

const char *di_backend_name(di_backend_kind k);

/* Run on `k` from now on: CUDA installs the device allocator (workspace,
 * state, weights in device memory) and the ops table that every di_exec
 * created afterwards carries. Call before loading a model; a model loaded
 * under one backend must be freed before switching to the other. */
deepinfer_status di_backend_use(di_backend_kind k, di_error *err);

/* The backend di_backend_use installed last (DI_BACKEND_CPU at start). */
di_backend_kind di_backend_active(void);

/* Batch-invariant kernels for the device execs created from now on (the
 * model's, at load): 1 = every row's bits independent of the batch (the
 * CPU's results; the default), 0 = the fastest kernel per shape. -1 goes
 * back to the default, which $DEEPINFER_BATCH_INVARIANT (0/1) overrides.
 * No effect on the CPU backend (its kernels are invariant by construction)
 * nor in a CPU-only binary. Call before loading the model. */
void di_backend_set_batch_invariant(int on);

/* Recorded steps (docs/DEVICE-FORWARD.md §6: step plan and CUDA graphs)
 * for code compiled into the CPU-only library too (the engine's queue,
 * src/engine/devq_graph.c); weak references to src/ops/cuda/cu_plan.c.
 * For an exec that is not on the CUDA backend, or in a binary without
 * CUDA, enable / begin / end return DEEPINFER_ERR_UNSUPPORTED (the caller
 * runs its steps eager) and stats returns -1.
 * di_backend_plan_enable: give exec x a step plan whose steps stay below
 *   position pos_bound (no timing, any number of steps); eager steps may run
 *   between recorded ones;
 * di_backend_plan_disable: synchronise, destroy the graphs, free the plan;
 * di_backend_step_begin / _end: around one forward: the first step of `key`
 *   (the caller's: everything that changes the step's launch shapes)
 *   captures a CUDA graph, later ones only build the host tables and replay
 *   it; a step whose launches differ from its key's graph fails at _end;
 *   no host read of device memory (di_copy_d2h) between the two;
 * di_backend_step_abort: close an open step whose forward failed, running
 *   nothing (a capture is dropped: the key captures again next time);
 * di_backend_plan_stats: graphs captured, recorded steps (captures and
 *   replays), replays, the last recorded step's plan bytes, the plan's
 *   capacity in bytes (a step's tables must fit). */
deepinfer_status di_backend_plan_enable(struct di_exec *x, int64_t pos_bound, di_error *err);
void di_backend_plan_disable(struct di_exec *x);
deepinfer_status di_backend_step_begin(struct di_exec *x, uint64_t key, di_error *err);
deepinfer_status di_backend_step_end(struct di_exec *x, di_error *err);
void di_backend_step_abort(struct di_exec *x);
typedef struct di_backend_plan_stats {
    int graphs;
    int64_t recorded, replayed;
    size_t last_bytes, cap_bytes;
} di_backend_plan_stats;
int di_backend_plan_stats_get(const struct di_exec *x, di_backend_plan_stats *out);

/* Device measurements for benchmarks, taken in the benchmark's own process
 * (src/ops/cuda/cu_probe.c; -1 in a CPU-only binary or on failure):
 * di_backend_copy_gbs: best of 5 cudaMemcpy device-to-device of `bytes`,
 *   (bytes read + bytes written) / s, in GB/s;
 * di_backend_fp8_tflops: best of 5 dic_gemm at n x n x n with e4m3 weights
 *   (128x128 e8m0 blocks), TFLOP/s of 2n^3; batch_invariant 1 = the kernels
 *   the forward runs, 0 = the fastest path (wgmma on sm_90);
 * di_backend_mem_info: free and total device memory (0 on success). */
double di_backend_copy_gbs(size_t bytes);
double di_backend_fp8_tflops(int n, int batch_invariant);
int di_backend_mem_info(size_t *free_b, size_t *total_b);

#endif
