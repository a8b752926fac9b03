/*
 * backend.h — which compute backend runs the model: the CPU (always
 * available) or CUDA (when the binary was built with `make cuda` and a GPU
 * with a working driver is present).
 *
 * The CUDA objects are optional at link time: they register one table of
 * function pointers (di_device_backend, below) from a constructor
 * (src/ops/cuda/cu_backend.c), and every function here goes through that
 * table or answers "not supported" without one. So one set of C objects
 * serves the CPU-only and the CUDA builds, and a CUDA binary on a machine
 * without a GPU falls back cleanly.
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

/* Benchmarks (`bench --dummy --modes`): the mode (1 / 0 as above) of every device exec alive now and
 * of those created from now on, so one loaded model runs in both modes in one process. Call between
 * steps (it synchronises each exec's stream); every recorded step graph is dropped (it holds the old
 * mode's kernels) and is recorded again on its next step. Returns the number of execs changed, -1
 * without a device backend (the CPU backend has one mode). */
int di_backend_set_batch_invariant_live(int on);

/* Recorded steps (docs/cuda-backend.md §6: step plan and CUDA graphs)
 * for code compiled into the CPU-only library too (the engine's queue,
 * src/engine/devq_graph.c; the benchmarks' loop, src/engine/greedy_loop.c);
 * src/ops/cuda/cu_plan.c through the backend table.
 * For an exec that is not on the CUDA backend, or in a binary without
 * CUDA, enable / begin / end return DEEPINFER_ERR_UNSUPPORTED (the caller
 * runs its steps eager) and stats returns -1.
 * di_backend_plan_enable: give exec x a step plan whose steps stay below
 *   position pos_bound; any number of steps; the first timed_steps steps
 *   (recorded or eager, the latter between di_backend_step_mark calls) are
 *   timed on the device (0: no timing); eager steps may run between recorded
 *   ones;
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
 *   capacity in bytes (a step's tables must fit);
 * di_backend_step_mark: an eager step's start (end = 0) or end (end = 1),
 *   timed like a recorded step;
 * di_backend_step_times: after the steps, busy_ms[i] = device time from
 *   timed step i's start to its end, start_ms[i] = its start after step 0's;
 *   synchronises; the number of steps timed (<= n; 0 without a plan);
 * di_backend_argmax_fuse / _rest: around one forward, ids[m] (device) =
 *   argmax of row m of the device logits `logits` (M rows of V, ties to the
 *   lowest id), on the exec's stream: _fuse asks the GEMM that writes those
 *   logits (the lm_head) to write the ids too where the backend can (a
 *   choice by shapes only, so a capture and its replays agree), _rest runs
 *   the argmax unless that GEMM did. No-ops off the device. */
deepinfer_status di_backend_plan_enable(struct di_exec *x, int64_t pos_bound, int timed_steps, di_error *err);
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
void di_backend_step_mark(struct di_exec *x, int end);
int di_backend_step_times(struct di_exec *x, float *busy_ms, float *start_ms, int n);
void di_backend_argmax_fuse(struct di_exec *x, int M, const float *logits, int V, int32_t *ids);
void di_backend_argmax_rest(struct di_exec *x, int M, const float *logits, int V, int32_t *ids);

/* The device side of the engine's queue (src/engine/devq.c, docs/cuda-backend.md §8): sampling
 * on the device, a step's input tokens taken on the device from the previous step's sampled ids, and
 * the device time of each step; src/ops/cuda/cu_queue.c through the backend table. di_backend_dq_new fails
 * with DEEPINFER_ERR_UNSUPPORTED for an exec that is not on the CUDA backend or in a binary without
 * CUDA. Steps are numbered by the caller (1, 2, ... in submission order, di_step.seq_no); step n's
 * buffers are reused by step n + 2, so step n must be finished before step n + 2 begins.
 * di_backend_dq_begin: mark the start of step `seq` on the exec's stream (its device work follows);
 * di_backend_dq_feed: dtok[r] (device, n rows) = the id step seq - 1 sampled as its row src[r] when
 *   src[r] >= 0 (0 where that row found no token), else tokens[r] (host); with `from` (device ids,
 *   NULL: step seq - 1's sampled ids) the rows with src[r] >= 0 take from[src[r]] instead (speculative
 *   decoding: the draft rows of a verify step queued behind the drafter that writes them);
 * di_backend_dq_sample: sample M rows of the device logits dlogits (row i at i * vocab) exactly as
 *   src/engine/sampler.c di_sample_row does (dic.h dic_sample_rows), copy the ids to the host side
 *   and mark the step's end; rows[i]'s pointers are host arrays (copied here);
 * di_backend_dq_end: mark the end of a step that did not sample on the device;
 * di_backend_dq_finish: wait for step `seq`; ids (M, may be NULL) = its sampled ids (-1: no token
 *   can be sampled); busy = its device time (start to end marks), idle = the gap from step seq - 1's
 *   end mark to this step's start mark (0 when step seq - 1 had no marks); the exec's first failure;
 * di_backend_dq_free: wait for the stream, free. */
typedef struct di_backend_dq di_backend_dq;
typedef struct di_backend_sample_row {
    float temperature;
    int32_t top_k;
    float top_p, min_p;
    double log_min_p;         /* log((double)min_p), computed by the caller (the CPU's libm) */
    float repetition_penalty, presence_penalty, frequency_penalty;
    int32_t min_tokens, eos_id, n_stop_ids;
    const int32_t *stop_ids;
    const int32_t *prompt_ids; /* read only with a repetition penalty */
    int32_t n_prompt;
    const int32_t *output_ids; /* read only with a penalty; n_output is also read for min_tokens */
    int32_t n_output;
    const uint32_t *allow_mask; /* vocabulary bitmap or NULL */
    uint64_t seed, position;
    uint32_t stream, purpose;
} di_backend_sample_row;
deepinfer_status di_backend_dq_new(struct di_exec *x, int max_rows, int vocab, di_backend_dq **out, di_error *err);
void di_backend_dq_free(di_backend_dq *q);
void di_backend_dq_begin(di_backend_dq *q, uint64_t seq);
deepinfer_status di_backend_dq_feed(di_backend_dq *q, uint64_t seq, int n, const int32_t *tokens, const int32_t *src,
                                    const int32_t *from, int32_t *dtok, di_error *err);
deepinfer_status di_backend_dq_sample(di_backend_dq *q, uint64_t seq, const float *dlogits, int M,
                                      const di_backend_sample_row *rows, di_error *err);
void di_backend_dq_end(di_backend_dq *q, uint64_t seq);
deepinfer_status di_backend_dq_finish(di_backend_dq *q, uint64_t seq, int M, int32_t *ids, double *busy_s,
                                      double *idle_s, di_error *err);

/* Device measurements for benchmarks, taken in the benchmark's own process
 * (src/ops/cuda/cu_probe.c through the backend table; -1 in a CPU-only
 * binary or on failure):
 * di_backend_copy_gbs: best of 5 cudaMemcpy device-to-device of `bytes`,
 *   (bytes read + bytes written) / s, in GB/s;
 * di_backend_fp8_tflops: best of 5 dic_gemm at n x n x n with e4m3 weights
 *   (128x128 e8m0 blocks), TFLOP/s of 2n^3; batch_invariant 1 = the kernels
 *   the forward runs, 0 = the fastest path (wgmma on sm_90);
 * di_backend_mem_info: free and total device memory (0 on success). */
double di_backend_copy_gbs(size_t bytes);
double di_backend_fp8_tflops(int n, int batch_invariant);
int di_backend_mem_info(size_t *free_b, size_t *total_b);

/* A communicator of one rank over NCCL on the active device (parallel/comm.h; libnccl.so.2 loaded at
 * run time, src/ops/cuda/cu_comm.c): its own stream and scratch, all freed by di_comm_free. So the
 * engine's one-rank EP path runs through NCCL (src/engine/engine_open.c, tests only).
 * DEEPINFER_ERR_UNSUPPORTED without the CUDA backend; NOT_FOUND naming libnccl when it is absent. */
struct di_comm;
deepinfer_status di_backend_comm_one(struct di_comm **out, di_error *err);

/* Ranks on devices (src/engine/ranks.c, docs/DESIGN.md §6, docs/cuda-backend.md §11). The process's
 * device context (device 0, di_backend_use) serves every thread that binds none; a rank thread binds
 * its own, and from then on its allocations, its execs' stream, its state exec (di_dev_exec) and its
 * loads' staging are on that device. Several threads may bind one device (tests): they share the
 * device's stream.
 * di_backend_rank_bind: the calling thread drives `device` (CUDA active; not bound already);
 * di_backend_rank_unbind: back to the process's context, after the thread freed every device buffer
 *   it made (no-op when not bound);
 * di_backend_comm_rank: rank `rank` of `size` over NCCL on the calling thread's device (its own stream
 *   and scratch): every rank calls it at once, each on its own thread and device, with the one id
 *   rank 0 made (parallel/comm.h di_nccl_unique_id);
 * di_backend_comm_loopback_dev: the `size` communicators of a loopback group whose copies run on each
 *   calling thread's stream (cudaMemcpyAsync, cudaMemcpyDefault): ranks on one device (tests).
 * DEEPINFER_ERR_UNSUPPORTED without the CUDA backend. */
struct di_nccl_id;
deepinfer_status di_backend_rank_bind(int device, di_error *err);
void di_backend_rank_unbind(void);
deepinfer_status di_backend_comm_rank(const struct di_nccl_id *id, int rank, int size, struct di_comm **out,
                                      di_error *err);
deepinfer_status di_backend_comm_loopback_dev(int size, struct di_comm **out, di_error *err);

/* The device backend's table: what a device backend's objects register
 * (once, before main: src/ops/cuda/cu_backend.c) so that the functions above
 * reach it; without one they answer as in a CPU-only binary. Every member is
 * set. The functions above check what the table cannot (the active backend,
 * NULL queues) and call these with the same arguments, except:
 * probe: device count, device 0's name, compute capability and memory, or
 *   the runtime's reason in `why` when there is none (safe without a
 *   driver);
 * install: start the backend (device, stream, allocator, ops table of the
 *   execs created from now on: di_backend_use); nonzero with `why` on
 *   failure; uninstall: back to the CPU;
 * set_batch_invariant, set_batch_invariant_live: as di_backend_set_batch_invariant(_live);
 * plan_stats: as di_backend_plan_stats_get into *out. */
typedef struct di_device_backend {
    const char *name;
    int (*probe)(int *count, char *name, size_t name_len, int *cc_major, int *cc_minor, size_t *total_mem, char *why,
                 size_t why_len);
    int (*install)(char *why, size_t why_len);
    void (*uninstall)(void);
    void (*set_batch_invariant)(int on);
    int (*set_batch_invariant_live)(int on);
    __typeof__(di_backend_plan_enable) *plan_enable;
    __typeof__(di_backend_plan_disable) *plan_disable;
    __typeof__(di_backend_step_begin) *step_begin;
    __typeof__(di_backend_step_end) *step_end;
    __typeof__(di_backend_step_abort) *step_abort;
    __typeof__(di_backend_plan_stats_get) *plan_stats;
    __typeof__(di_backend_step_mark) *step_mark;
    __typeof__(di_backend_step_times) *step_times;
    __typeof__(di_backend_argmax_fuse) *argmax_fuse;
    __typeof__(di_backend_argmax_rest) *argmax_rest;
    __typeof__(di_backend_dq_new) *dq_new;
    __typeof__(di_backend_dq_free) *dq_free;
    __typeof__(di_backend_dq_begin) *dq_begin;
    __typeof__(di_backend_dq_feed) *dq_feed;
    __typeof__(di_backend_dq_sample) *dq_sample;
    __typeof__(di_backend_dq_end) *dq_end;
    __typeof__(di_backend_dq_finish) *dq_finish;
    __typeof__(di_backend_copy_gbs) *copy_gbs;
    __typeof__(di_backend_fp8_tflops) *fp8_tflops;
    __typeof__(di_backend_mem_info) *mem_info;
    __typeof__(di_backend_comm_one) *comm_one;
    int (*rank_bind)(int device, char *why, size_t why_len);
    void (*rank_unbind)(void);
    __typeof__(di_backend_comm_rank) *comm_rank;
    __typeof__(di_backend_comm_loopback_dev) *comm_loopback_dev;
} di_device_backend;

/* Register the device backend (one per process; a second call replaces the first). */
void di_backend_register(const di_device_backend *b);

/* A device backend's fixed memory, shared by the CUDA backend (cu_exec.c) and
 * the load plan that must count it before the load (src/model/load_plan.h):
 * per exec, dic scratch for each concurrent line (the main one and
 * DI_EXEC_BRANCHES branches) of at least DI_DEV_EXEC_MIN_SCRATCH, and an
 * op-table buffer of DI_DEV_EXEC_TAB_BYTES on the device and on the host;
 * during a load, a ring of DI_DEV_STAGE_COUNT pinned host buffers of
 * DI_DEV_STAGE_BYTES (ops.h di_dev_fill). */
#define DI_DEV_EXEC_MIN_SCRATCH ((size_t)256 << 20)
#define DI_DEV_EXEC_TAB_BYTES ((size_t)64 << 20)
#define DI_DEV_STAGE_COUNT 4
#define DI_DEV_STAGE_BYTES ((size_t)32 << 20)

#endif
