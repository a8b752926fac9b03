#include "ops/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DI_PAUSE() _mm_pause()
#else
#define DI_PAUSE() ((void)0)
#endif

#define SPIN_ITERS 20000

struct di_threadpool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;        /* bumped once per region */
    atomic_int done;        /* workers finished with the current region */
    atomic_int stop;
    di_task_fn fn;
    void *ctx;
    int active;             /* threads that get work in this region */
};

static _Thread_local int tl_in_region;

typedef struct worker_arg {
    di_threadpool *tp;
    int t;
} worker_arg;

static void *worker_main(void *p) {
    worker_arg wa = *(worker_arg *)p;
    free(p);
    di_threadpool *tp = wa.tp;
    unsigned seen = 0; /* gen at creation: a region may start before this thread runs */
    tl_in_region = 1;
    for (;;) {
        int spins = 0;
        unsigned g;
        while ((g = atomic_load_explicit(&tp->gen, memory_order_acquire)) == seen) {
            if (atomic_load(&tp->stop)) return NULL;
            if (++spins < SPIN_ITERS) {
                DI_PAUSE();
                continue;
            }
            pthread_mutex_lock(&tp->mu);
            while (atomic_load(&tp->gen) == seen && !atomic_load(&tp->stop)) pthread_cond_wait(&tp->cv, &tp->mu);
            pthread_mutex_unlock(&tp->mu);
            spins = 0;
        }
        seen = g;
        if (atomic_load(&tp->stop)) return NULL;
        if (wa.t < tp->active) tp->fn(tp->ctx, wa.t, tp->active);
        atomic_fetch_add_explicit(&tp->done, 1, memory_order_release);
    }
}

int di_threadpool_default_size(void) {
    const char *env = getenv("DEEPINFER_THREADS");
    if (env && *env) {
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
    atomic_init(&tp->gen, 0);
    atomic_init(&tp->done, 0);
    atomic_init(&tp->stop, 0);
    if (nthreads > 1) {
        tp->threads = calloc((size_t)nthreads, sizeof *tp->threads);
        if (!tp->threads) {
            free(tp);
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
        }
        for (int t = 1; t < nthreads; t++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (wa) {
                wa->tp = tp;
                wa->t = t;
            }
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
    atomic_fetch_add(&tp->gen, 1);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    for (int t = 1; t < tp->n; t++) pthread_join(tp->threads[t], NULL);
    free(tp->threads);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv);
    free(tp);
}

int di_threadpool_size(const di_threadpool *tp) { return tp ? tp->n : 1; }

void di_threadpool_run_n(di_threadpool *tp, int max_threads, di_task_fn fn, void *ctx) {
    int n = tp ? tp->n : 1;
    if (max_threads < n) n = max_threads < 1 ? 1 : max_threads;
    if (n == 1 || tl_in_region) {
        int was = tl_in_region;
        tl_in_region = 1;
        fn(ctx, 0, 1);
        tl_in_region = was;
        return;
    }
    tp->fn = fn;
    tp->ctx = ctx;
    tp->active = n;
    atomic_store_explicit(&tp->done, 0, memory_order_relaxed);
    pthread_mutex_lock(&tp->mu);
    atomic_fetch_add_explicit(&tp->gen, 1, memory_order_release);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    tl_in_region = 1;
    fn(ctx, 0, n);
    tl_in_region = 0;
    int spins = 0;
    while (atomic_load_explicit(&tp->done, memory_order_acquire) < tp->n - 1) {
        if (++spins < SPIN_ITERS) DI_PAUSE();
        else sched_yield();
    }
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
