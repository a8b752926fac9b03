/* cu_prof.c — per-op GPU time of eager steps (cu_step.h: di_cuda_prof_*).
 *
 * While enabled, every launch site that goes through CU_CHECK outside a
 * plan step records a CUDA event before and after its call on the exec's
 * stream; the report sums the time between each pair by launch site (the
 * op string, plus the shape tag the site set with cu_prof_tag) and prints
 * the sites by total time. Events are timestamps on the stream, so a pair
 * also counts the GPU's idle time between them (small in eager decode:
 * the host issues ahead of the GPU). Nothing is recorded in plan steps
 * (CUDA graphs). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cu_glue.h"
#include "ops/cuda/cu_step.h"

typedef struct cu_prof {
    cudaEvent_t *ev; /* [2 * cap] */
    const char **op; /* [cap] */
    char (*tag)[CU_PROF_TAG];
    int cap, n, dropped;
} cu_prof;

void cu_prof_tag(cu_exec *c, const char *fmt, ...) {
    if (!c->prof) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->prof_tag, sizeof c->prof_tag, fmt, ap);
    va_end(ap);
}

void cu_prof_begin(cu_exec *c, const char *op) {
    cu_prof *p = c->prof;
    if (cu_planning(c)) return;
    if (p->n >= p->cap) {
        p->dropped++;
        return;
    }
    p->op[p->n] = op;
    memcpy(p->tag[p->n], c->prof_tag, CU_PROF_TAG);
    cudaEventRecord(p->ev[2 * p->n], c->dc.stream);
}

void cu_prof_end(cu_exec *c) {
    cu_prof *p = c->prof;
    c->prof_tag[0] = 0;
    if (cu_planning(c) || p->n >= p->cap) return;
    cudaEventRecord(p->ev[2 * p->n + 1], c->dc.stream);
    p->n++;
}

static void prof_free(cu_prof *p) {
    if (!p) return;
    for (int i = 0; i < 2 * p->cap; i++)
        if (p->ev[i]) cudaEventDestroy(p->ev[i]);
    free(p->ev), free(p->op), free(p->tag), free(p);
}

void cu_prof_free(cu_exec *c) {
    prof_free(c->prof);
    c->prof = NULL;
}

deepinfer_status di_cuda_prof_enable(di_exec *x, int max_launches, di_error *err) {
    cu_exec *c = x && x->dev ? cu_of(x) : NULL;
    if (!c) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "op profile: not a CUDA exec");
    prof_free(c->prof);
    c->prof = NULL;
    if (max_launches <= 0) return DEEPINFER_OK;
    cu_prof *p = calloc(1, sizeof *p);
    if (!p) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "op profile: out of memory");
    p->cap = max_launches;
    p->ev = calloc((size_t)2 * max_launches, sizeof *p->ev);
    p->op = calloc((size_t)max_launches, sizeof *p->op);
    p->tag = calloc((size_t)max_launches, sizeof *p->tag);
    if (!p->ev || !p->op || !p->tag) {
        prof_free(p);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "op profile: out of memory");
    }
    for (int i = 0; i < 2 * max_launches; i++)
        if (cudaEventCreate(&p->ev[i]) != cudaSuccess) {
            prof_free(p);
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "op profile: cannot create CUDA events");
        }
    c->prof = p;
    return DEEPINFER_OK;
}

typedef struct {
    const char *op;
    const char *tag;
    double ms;
    int n;
} site;

static int by_time(const void *a, const void *b) {
    double d = ((const site *)b)->ms - ((const site *)a)->ms;
    return d > 0 ? 1 : d < 0 ? -1 : 0;
}

void di_cuda_prof_report(di_exec *x, FILE *f, const char *title, int steps) {
    cu_exec *c = x && x->dev ? cu_of(x) : NULL;
    if (!c || !c->prof) return;
    cu_prof *p = c->prof;
    cudaStreamSynchronize(c->dc.stream);
    site *s = calloc((size_t)p->n + 1, sizeof *s);
    int ns = 0;
    double total = 0;
    for (int i = 0; s && i < p->n; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, p->ev[2 * i], p->ev[2 * i + 1]) != cudaSuccess) continue;
        int j = 0;
        while (j < ns && !(s[j].op == p->op[i] && !strcmp(s[j].tag, p->tag[i]))) j++;
        if (j == ns) s[ns].op = p->op[i], s[ns].tag = p->tag[i], ns++;
        s[j].ms += ms, s[j].n++;
        total += ms;
    }
    if (s) qsort(s, (size_t)ns, sizeof *s, by_time);
    if (steps < 1) steps = 1;
    fprintf(f, "# op profile: %s — %d launches over %d step(s), %.3f ms per step in ops%s\n", title, p->n, steps,
            total / steps, p->dropped ? " (some launches not recorded: raise the cap)" : "");
    fprintf(f, "# %-28s %-36s %9s %7s %9s %6s\n", "op", "shape", "ms/step", "calls", "us/call", "share");
    for (int j = 0; s && j < ns; j++)
        fprintf(f, "  %-28s %-36s %9.4f %7.1f %9.2f %5.1f%%\n", s[j].op, s[j].tag, s[j].ms / steps,
                (double)s[j].n / steps, 1e3 * s[j].ms / s[j].n, 100 * s[j].ms / (total > 0 ? total : 1));
    free(s);
    p->n = 0;
    p->dropped = 0;
}
