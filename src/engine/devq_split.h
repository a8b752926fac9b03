/*
 * devq_split.h — lab-only: where a speculative step's host time goes in the
 * device queue (devq.c). Off in every product build: the macros expand to
 * nothing unless the tree is compiled with -DDI_LAB_SPEC_SPLIT (lab/device/
 * spec_bench.sh says how to build and run such a binary). Then each step with
 * spec items that samples on the device marks, in order: SPLIT_ENTER (submit
 * starts; the time since the previous submit returned is the engine's own
 * host work), SPLIT_FWD0 (the forward is called), SPLIT_FWD1 (it returned:
 * for a recorded step the plan build and the launch, the device idle
 * meanwhile), SPLIT_IDS (the sampled ids are on the host: the sampler's launch, then the verify on the
 * device; in the pipelined order it also covers the previous drafter, which
 * this step was queued behind, and the read-back of its drafts), SPLIT_DONE
 * (acceptance, rollback and the drafter: its wait in the synchronous order,
 * only its launch in the pipelined one);
 * the means per step go to stderr when the queue is destroyed, with the
 * pipelined order's counters (devq.h spec_held, spec_fed).
 */
#ifndef DI_ENGINE_DEVQ_SPLIT_H
#define DI_ENGINE_DEVQ_SPLIT_H

#ifdef DI_LAB_SPEC_SPLIT
#include <stdio.h>
#include <time.h>

typedef struct devq_split {
    double t[5], sum[5], last_exit;
    long n;
} devq_split;

static devq_split g_devq_split;

static inline double devq_split_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static inline void devq_split_mark(int i) { g_devq_split.t[i] = devq_split_now(); }

static inline void devq_split_done(void) {
    devq_split *s = &g_devq_split;
    double done = devq_split_now();
    if (s->last_exit > 0) s->sum[0] += s->t[0] - s->last_exit;
    for (int i = 1; i < 4; i++) s->sum[i] += s->t[i] - s->t[i - 1];
    s->sum[4] += done - s->t[3];
    s->last_exit = done;
    s->n++;
}

static inline void devq_split_print(long long held, long long fed) {
    const devq_split *s = &g_devq_split;
    if (!s->n) return;
    double n = (double)s->n;
    fprintf(stderr,
            "lab spec split: %ld verify steps, ms per step: engine host %.3f, before the forward %.3f, forward "
            "(plan build + launch) %.3f, sampling launch + wait for the ids %.3f, acceptance + drafter + its "
            "wait %.3f; pipelined order: %lld drafter steps held, %lld verify steps fed on the device\n",
            s->n, s->sum[0] / (n > 1 ? n - 1 : 1), s->sum[1] / n, s->sum[2] / n, s->sum[3] / n, s->sum[4] / n, held, fed);
}

#define SPLIT_ENTER() devq_split_mark(0)
#define SPLIT_FWD0() devq_split_mark(1)
#define SPLIT_FWD1() devq_split_mark(2)
#define SPLIT_IDS() devq_split_mark(3)
#define SPLIT_DONE() devq_split_done()
#define SPLIT_PRINT(held, fed) devq_split_print((long long)(held), (long long)(fed))
#else
#define SPLIT_ENTER() ((void)0)
#define SPLIT_FWD0() ((void)0)
#define SPLIT_FWD1() ((void)0)
#define SPLIT_IDS() ((void)0)
#define SPLIT_DONE() ((void)0)
#define SPLIT_PRINT(held, fed) ((void)0)
#endif

#endif
