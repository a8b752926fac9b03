/*
 * threadpool.h — a persistent pthread pool with static partitioning.
 *
 * The pool is created once (model load) and reused by every op; no thread is
 * created inside a forward step. A parallel region runs fn(ctx, t, n) for
 * t = 0..n-1 where n is the pool size; the calling thread is t = 0. Work is
 * divided statically by the op (di_split_range), so which thread computes an
 * element never changes how it is computed: ops reduce in an order fixed by
 * the data shape alone, and results do not depend on the thread count.
 *
 * Waiting workers spin briefly (a step issues many short regions) and then
 * sleep on a condition variable. A region started from inside a region runs
 * serially on the calling thread (no nesting). Threads outside the pool may
 * start regions concurrently (the ranks of a loopback communicator,
 * src/parallel/comm.h, share the process-wide pool): their regions take
 * turns on the pool, one at a time, each with every worker.
 *
 * Size: $DEEPINFER_THREADS if set (1..256), else the number of online CPUs.
 */
#ifndef DI_OPS_CPU_THREADPOOL_H
#define DI_OPS_CPU_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct di_threadpool di_threadpool;

typedef void (*di_task_fn)(void *ctx, int t, int n);

/* Create a pool of `nthreads` (>= 1; the caller counts as one). */
deepinfer_status di_threadpool_create(int nthreads, di_threadpool **out, di_error *err);

/* Stop and join the workers; safe on NULL. */
void di_threadpool_destroy(di_threadpool *tp);

int di_threadpool_size(const di_threadpool *tp);

/* Run the n = size(tp) chunks fn(ctx, t, n), t = 0..n-1, on the pool and
 * return when all are done. With tp == NULL, or from inside a region, runs
 * them in order on the caller. */
void di_threadpool_run(di_threadpool *tp, di_task_fn fn, void *ctx);

/* Like di_threadpool_run with `nchunks` chunks (any count >= 1; threads
 * claim chunks until none is left, the caller included). An op splits its
 * work into chunks by shape and work size, never by thread count, so a
 * result is the same whoever computes it. */
void di_threadpool_run_n(di_threadpool *tp, int nchunks, di_task_fn fn, void *ctx);

/* Chunks worth making for `work` units of ~`grain` each, at most `items`
 * and at most 4 per thread (>= 1). */
static inline int di_chunks_for(const di_threadpool *tp, double work, double grain, int items) {
    double c = work / grain + 1;
    int n = di_threadpool_size(tp) * 4;
    if (c < n) n = (int)c;
    if (items < n) n = items;
    return n < 1 ? 1 : n;
}

/* Region statistics, kept once di_pool_stats_enable(1) was called
 * (`deepinfer bench --pool-stats`):
 * for top-level regions run on a single thread ([0]: one chunk, a 1-thread
 * pool) and on the pool ([1]): how many, their chunks, wall nanoseconds on
 * the calling thread. Wall time outside regions is serial host code. For
 * measurement only (cli_bench); not thread-safe across concurrent callers. */
typedef struct di_pool_stats {
    uint64_t regions[2], chunks[2];
    double ns[2];
} di_pool_stats;
void di_pool_stats_enable(int on);
int di_pool_stats_enabled(void);
void di_pool_stats_get(di_pool_stats *out);

/* The process-wide pool, created on first use with the default size.
 * Returns NULL if it cannot be created (callers then run serially). */
di_threadpool *di_threadpool_global(void);

/* Default size: $DEEPINFER_THREADS or the online CPU count. */
int di_threadpool_default_size(void);

/* Split [0, n) into `parts` contiguous ranges; range `i` is [*b, *e). */
static inline void di_split_range(size_t n, int i, int parts, size_t *b, size_t *e) {
    size_t q = n / (size_t)parts, r = n % (size_t)parts;
    size_t ii = (size_t)i;
    *b = ii * q + (ii < r ? ii : r);
    *e = *b + q + (ii < r ? 1 : 0);
}

#endif
