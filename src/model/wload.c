/* wload.c — checkpoint tensors into model memory (wload.h). */
#include "model/wload.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

static _Atomic uint64_t g_bytes;

uint64_t di_wload_bytes(void) { return atomic_load(&g_bytes); }

deepinfer_status di_wload_check_e8m0(const di_tensor *t, const uint8_t *b, size_t n, uint64_t off, di_error *err) {
    const uint8_t *p = memchr(b, 0xFF, n);
    if (p)
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "tensor %s: e8m0 scale %llu is NaN (0xFF)", t->name,
                            (unsigned long long)(off + (uint64_t)(p - b)));
    return DEEPINFER_OK;
}

typedef struct fill_src {
    const di_tensor *t;
    uint64_t off;
    int check_e8m0;
} fill_src;

static deepinfer_status fill_from_tensor(void *ctx, uint64_t off, void *buf, size_t n, di_error *err) {
    const fill_src *s = ctx;
    deepinfer_status st = di_st_read(s->t, s->off + off, buf, n, err);
    if (!st && s->check_e8m0) st = di_wload_check_e8m0(s->t, buf, n, s->off + off, err);
    if (!st) atomic_fetch_add(&g_bytes, (uint64_t)n);
    return st;
}

deepinfer_status di_wload_to_dev(void *dst, const di_tensor *t, uint64_t off, size_t n, int check_e8m0,
                                 di_error *err) {
    fill_src s = {t, off, check_e8m0};
    return di_dev_fill(dst, n, fill_from_tensor, &s, err);
}

void *di_wload_copy(const di_tensor *t, di_error *err) {
    size_t n = (size_t)t->nbytes;
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63 ? (n + 63) & ~(size_t)63 : 64);
    if (!p) {
        di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "tensor %s: out of memory (%zu bytes)", t->name, n);
        return NULL;
    }
    if (di_st_read(t, 0, p, n, err)) {
        free(p);
        return NULL;
    }
    atomic_fetch_add(&g_bytes, (uint64_t)n);
    return p;
}

const void *di_wload_view(const di_tensor *t, void **owned, di_error *err) {
    *owned = NULL;
    if (di_st_mapped(t) && t->data) {
        di_st_populate(t);
        atomic_fetch_add(&g_bytes, t->nbytes);
        return t->data;
    }
    return *owned = di_wload_copy(t, err);
}

/* Read-ahead runs on its own thread, one layer ahead of the binding: the layer's file-backed
 * tensors read in file order with large preads into a scratch buffer (the pattern of a
 * sequential read, which the storage serves fastest), so the binding's own preads hit the page
 * cache (POSIX_FADV_WILLNEED instead issues small asynchronous reads and blocks the caller
 * while it queues them: docs/loading.md §1). Generated images are skipped. */
#define PREFETCH_CHUNK ((size_t)16 << 20)

typedef struct prefetch_job {
    const di_weight_spec *spec;
    char prefix[64];
} prefetch_job;

static prefetch_job g_job;
static pthread_t g_thread;
static int g_running;

static int by_file_order(const void *a, const void *b) {
    const di_tensor *x = *(const di_tensor *const *)a, *y = *(const di_tensor *const *)b;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    return x->file_offset < y->file_offset ? -1 : x->file_offset > y->file_offset;
}

static void *prefetch_main(void *arg) {
    const prefetch_job *j = arg;
    size_t pl = strlen(j->prefix), n = di_spec_count(j->spec), k = 0;
    const di_tensor **ts = malloc((n ? n : 1) * sizeof *ts);
    void *buf = malloc(PREFETCH_CHUNK);
    if (ts && buf) {
        for (size_t i = 0; i < n; i++) {
            const di_tensor_spec *e = di_spec_at(j->spec, i);
            const di_tensor *t = strncmp(e->name, j->prefix, pl) ? NULL : di_spec_tensor(e);
            if (t && t->nbytes && di_st_is_file(t)) ts[k++] = t;
        }
        qsort(ts, k, sizeof *ts, by_file_order);
        for (size_t i = 0; i < k; i++)
            for (uint64_t off = 0; off < ts[i]->nbytes; off += PREFETCH_CHUNK) {
                uint64_t m = ts[i]->nbytes - off < PREFETCH_CHUNK ? ts[i]->nbytes - off : PREFETCH_CHUNK;
                if (di_st_read(ts[i], off, buf, (size_t)m, NULL)) break; /* a hint: the binding reports errors */
            }
    }
    free(ts);
    free(buf);
    return NULL;
}

static void flush_releases(void);

void di_wload_prefetch_wait(void) {
    if (g_running) pthread_join(g_thread, NULL);
    g_running = 0;
    flush_releases(); /* the layer just bound */
}

void di_wload_prefetch(const di_weight_spec *spec, const char *prefix) {
    di_wload_prefetch_wait(); /* one layer ahead at most: the page cache holds two */
    g_job.spec = spec;
    snprintf(g_job.prefix, sizeof g_job.prefix, "%s", prefix);
    if (pthread_create(&g_thread, NULL, prefetch_main, &g_job) == 0) g_running = 1;
    else prefetch_main(&g_job); /* no thread: the hints inline */
}

/* Releases wait for the layer's end and go out merged: the page cache holds large folios
 * (up to 2 MiB) that straddle tensor boundaries, which a per-tensor POSIX_FADV_DONTNEED cannot
 * drop; the merged ranges of adjacent tensors cover them (docs/loading.md §1). */
static const di_tensor **g_rel;
static size_t g_nrel, g_caprel;
static const struct di_safetensors *g_owner;

static void flush_releases(void) {
    if (!g_nrel) return;
    qsort(g_rel, g_nrel, sizeof *g_rel, by_file_order);
    for (size_t i = 0; i < g_nrel;) {
        const di_tensor *a = g_rel[i];
        uint64_t end = a->file_offset + a->nbytes;
        size_t j = i + 1;
        while (j < g_nrel && g_rel[j]->owner == a->owner && g_rel[j]->shard == a->shard && g_rel[j]->file_offset <= end) {
            uint64_t e = g_rel[j]->file_offset + g_rel[j]->nbytes;
            if (e > end) end = e;
            j++;
        }
        di_st_release_range(a, end - a->file_offset);
        i = j;
    }
    g_nrel = 0;
}

void di_wload_release(const di_tensor *t) {
    if (!t || !di_st_is_file(t)) return;
    di_st_release_map(t); /* the mapping's pages now (the CPU packed from them) */
    if (g_nrel == g_caprel) {
        size_t cap = g_caprel ? 2 * g_caprel : 4096;
        const di_tensor **r = realloc(g_rel, cap * sizeof *r);
        if (!r) {
            di_st_release(t); /* no room to defer: drop what can be dropped now */
            return;
        }
        g_rel = r, g_caprel = cap;
    }
    g_rel[g_nrel++] = t;
    g_owner = t->owner;
}

void di_wload_finish(void) {
    di_wload_prefetch_wait();
    di_dev_fill_finish(); /* every upload landed; the staging ring given back */
    if (g_owner) di_st_release_all(g_owner); /* what read-ahead brought in around the tensors */
    g_owner = NULL;
    free(g_rel);
    g_rel = NULL, g_nrel = g_caprel = 0;
}
