/*
 * threadpool.c — persistent workers executing the chunks of a region.
 *
 * A region is `n` chunks fn(ctx, 0..n-1, n); the op fixes what each chunk
 * computes (from the shapes alone), so results never depend on which
 * thread runs a chunk. Chunks are claimed from one 64-bit atomic word that
 * packs (generation, chunk count, next chunk): a claim is a compare-and-swap
 * that only succeeds while its region still has unclaimed chunks, so a late
 * worker can never run a chunk of a region that has moved on. The calling
 * thread claims chunks too: a worker that is slow to wake (a busy 2-core
 * machine) delays nothing but its own share.
 */
#include "ops/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "util/env.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DI_PAUSE() _mm_pause()
#else
#define DI_PAUSE() ((void)0)
#endif

#define SPIN_ITERS 4000
#define GEN_BITS 24
#define CNT_BITS 20
#define IDX_BITS 20
#define MAX_CHUNKS ((1u << CNT_BITS) - 1)

static inline uint64_t pack(uint64_t gen, uint64_t cnt, uint64_t idx) {
    return (gen << (CNT_BITS + IDX_BITS)) | (cnt << IDX_BITS) | idx;
}
static inline uint64_t w_gen(uint64_t w) { return w >> (CNT_BITS + IDX_BITS); }
static inline uint64_t w_cnt(uint64_t w) { return (w >> IDX_BITS) & ((1u << CNT_BITS) - 1); }
static inline uint64_t w_idx(uint64_t w) { return w & ((1u << IDX_BITS) - 1); }

struct di_threadpool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t caller; /* held by the thread whose region is on the pool (concurrent callers take turns) */
    _Atomic uint64_t work;  /* (gen, chunks, next chunk) of the current region */
    atomic_uint done;       /* chunks finished in the current region */
    atomic_int stop;
    atomic_int sleepers;
    /* the region's task, stored before `work` publishes it (release / acquire on `work`); atomic
     * because a late worker may load them while the next region's caller stores them (its claim
     * then fails and the values are dropped) */
    _Atomic(di_task_fn) fn;
    _Atomic(void *) ctx;
};

static _Thread_local int tl_in_region;

/* Region statistics (threadpool.h), off unless `deepinfer bench --pool-stats`
 * turns them on: the hot path pays one predictable branch when they are off.
 * Only top-level regions on the calling thread are counted (nested ones run
 * inside them). */
static atomic_int g_stats_on;
static di_pool_stats g_stats;

static inline int stats_on(void) { return atomic_load_explicit(&g_stats_on, memory_order_relaxed); }
static inline double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}
void di_pool_stats_enable(int on) { atomic_store_explicit(&g_stats_on, on != 0, memory_order_relaxed); }
int di_pool_stats_enabled(void) { return stats_on(); }
void di_pool_stats_get(di_pool_stats *out) { *out = g_stats; }

/* Claim and run chunks of the region described by the word last seen. */
static void run_chunks(di_threadpool *tp) {
    for (;;) {
        uint64_t w = atomic_load_explicit(&tp->work, memory_order_acquire);
        if (w_idx(w) >= w_cnt(w)) return;
        di_task_fn fn = atomic_load_explicit(&tp->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&tp->ctx, memory_order_relaxed);
        if (!atomic_compare_exchange_weak_explicit(&tp->work, &w, w + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        fn(ctx, (int)w_idx(w), (int)w_cnt(w));
        atomic_fetch_add_explicit(&tp->done, 1, memory_order_release);
    }
}

typedef struct worker_arg {
    di_threadpool *tp;
} worker_arg;

static void *worker_main(void *p) {
    di_threadpool *tp = ((worker_arg *)p)->tp;
    free(p);
    tl_in_region = 1;
    uint64_t seen = 0; /* generation 0: no region yet */
    for (;;) {
        int spins = 0;
        uint64_t g;
        while ((g = w_gen(atomic_load_explicit(&tp->work, memory_order_acquire))) == seen) {
            if (atomic_load(&tp->stop)) return NULL;
            if (++spins < SPIN_ITERS) {
                DI_PAUSE();
                continue;
            }
            pthread_mutex_lock(&tp->mu);
            atomic_fetch_add(&tp->sleepers, 1);
            while (w_gen(atomic_load(&tp->work)) == seen && !atomic_load(&tp->stop)) pthread_cond_wait(&tp->cv, &tp->mu);
            atomic_fetch_sub(&tp->sleepers, 1);
            pthread_mutex_unlock(&tp->mu);
            spins = 0;
        }
        if (atomic_load(&tp->stop)) return NULL;
        seen = g;
        run_chunks(tp);
    }
}

int di_threadpool_default_size(void) {
    const char *env = di_env(DI_ENV_THREADS);
    if (env) {
        int v = atoi(env);
        if (v >= 1 && v <= 256) return v;
    }
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    if (c < 1) c = 1;
    if (c > 256) c = 256;
    return (int)c;
}

deepinfer_status di_threadpool_create(int nthreads, di_threadpool **out, di_error *err) {
    *out = NULL;
    if (nthreads < 1) nthreads = 1;
    di_threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
    tp->n = nthreads;
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv, NULL);
    pthread_mutex_init(&tp->caller, NULL);
    atomic_init(&tp->work, 0);
    atomic_init(&tp->done, 0);
    atomic_init(&tp->stop, 0);
    atomic_init(&tp->sleepers, 0);
    if (nthreads > 1) {
        tp->threads = calloc((size_t)nthreads, sizeof *tp->threads);
        if (!tp->threads) {
            free(tp);
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
        }
        for (int t = 1; t < nthreads; t++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (wa) wa->tp = tp;
            if (!wa || pthread_create(&tp->threads[t], NULL, worker_main, wa)) {
                free(wa);
                tp->n = t; /* join what started */
                di_threadpool_destroy(tp);
                return di_error_set(err, DEEPINFER_ERR_INTERNAL, "thread pool: could not start thread %d of %d", t,
                                    nthreads);
            }
        }
    }
    *out = tp;
    return DEEPINFER_OK;
}

void di_threadpool_destroy(di_threadpool *tp) {
    if (!tp) return;
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->stop, 1);
    uint64_t w = atomic_load(&tp->work);
    atomic_store(&tp->work, pack((w_gen(w) + 1) & ((1u << GEN_BITS) - 1), 0, 0));
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    for (int t = 1; t < tp->n; t++) pthread_join(tp->threads[t], NULL);
    free(tp->threads);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv);
    pthread_mutex_destroy(&tp->caller);
    free(tp);
}

int di_threadpool_size(const di_threadpool *tp) { return tp ? tp->n : 1; }

static void run_n(di_threadpool *tp, int nchunks, di_task_fn fn, void *ctx);

void di_threadpool_run_n(di_threadpool *tp, int nchunks, di_task_fn fn, void *ctx) {
    if (tl_in_region || !stats_on()) {
        run_n(tp, nchunks, fn, ctx);
        return;
    }
    double t0 = now_ns();
    run_n(tp, nchunks, fn, ctx);
    double dt = now_ns() - t0;
    int par = tp && tp->n > 1 && nchunks > 1;
    g_stats.regions[par]++;
    g_stats.ns[par] += dt;
    g_stats.chunks[par] += (uint64_t)(nchunks < 1 ? 1 : nchunks);
}

static void run_n(di_threadpool *tp, int nchunks, di_task_fn fn, void *ctx) {
    if (nchunks < 1) nchunks = 1;
    if (nchunks > (int)MAX_CHUNKS) nchunks = (int)MAX_CHUNKS;
    if (!tp || tp->n == 1 || nchunks == 1 || tl_in_region) {
        int was = tl_in_region;
        tl_in_region = 1;
        for (int t = 0; t < nchunks; t++) fn(ctx, t, nchunks);
        tl_in_region = was;
        return;
    }
    pthread_mutex_lock(&tp->caller); /* one region on the pool at a time, whoever calls */
    atomic_store_explicit(&tp->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&tp->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&tp->done, 0, memory_order_relaxed);
    uint64_t w = atomic_load(&tp->work);
    uint64_t gen = (w_gen(w) + 1) & ((1u << GEN_BITS) - 1);
    if (gen == 0) gen = 1; /* 0 means "no region" to a fresh worker */
    atomic_store_explicit(&tp->work, pack(gen, (uint64_t)nchunks, 0), memory_order_release);
    if (atomic_load(&tp->sleepers)) {
        pthread_mutex_lock(&tp->mu);
        pthread_cond_broadcast(&tp->cv);
        pthread_mutex_unlock(&tp->mu);
    }
    tl_in_region = 1;
    run_chunks(tp);
    tl_in_region = 0;
    int spins = 0;
    while (atomic_load_explicit(&tp->done, memory_order_acquire) < (unsigned)nchunks) {
        if (++spins < SPIN_ITERS) DI_PAUSE();
        else sched_yield();
    }
    pthread_mutex_unlock(&tp->caller);
}

void di_threadpool_run(di_threadpool *tp, di_task_fn fn, void *ctx) {
    di_threadpool_run_n(tp, tp ? tp->n : 1, fn, ctx);
}

static di_threadpool *g_pool;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;

static void make_global(void) {
    di_threadpool *tp = NULL;
    if (di_threadpool_create(di_threadpool_default_size(), &tp, NULL) == DEEPINFER_OK) g_pool = tp;
}

di_threadpool *di_threadpool_global(void) {
    pthread_once(&g_pool_once, make_global);
    return g_pool;
}
