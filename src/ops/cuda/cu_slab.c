/* cu_slab.c — device allocations of 1..64 MiB carved from 256 MiB slabs.
 *
 * cudaMalloc maps device memory in 2 MiB granules, so an allocation of a size
 * that is not a multiple of 2 MiB wastes the rest of its last granule: a
 * V4.1-Flash routed expert matrix is 5.625 MiB and takes 6, 0.375 MiB lost on
 * each of 384 x 3 per layer (docs/loading.md §4). Allocations in that range
 * are bump-allocated instead, 256-byte aligned, from slabs; a slab is given
 * back when every piece of it has been freed (weights are freed together at
 * model free). Smaller allocations the driver already packs; larger ones
 * waste at most 2 MiB on 64. Each device context (cu_exec.c: the process's
 * and each rank thread's) has its own set of slabs, used only from the
 * threads of that context (one load at a time, wload.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cu_glue.h"

#define SLAB_BYTES ((size_t)256 << 20)
#define SLAB_MIN ((size_t)1 << 20)
#define SLAB_MAX ((size_t)64 << 20)
#define PIECE_ALIGN 256

struct cu_slab {
    unsigned char *base;
    size_t used;
    long live; /* pieces not yet freed */
};
typedef struct cu_slab slab;

int cu_slab_wants(size_t bytes) { return bytes >= SLAB_MIN && bytes < SLAB_MAX && bytes % ((size_t)2 << 20); }

void *cu_slab_alloc(cu_slabs *S, size_t bytes) {
    size_t need = (bytes + PIECE_ALIGN - 1) & ~(size_t)(PIECE_ALIGN - 1);
    if (S->cur < 0 || S->v[S->cur].used + need > SLAB_BYTES) {
        if (S->n == S->cap) {
            int cap = S->cap ? 2 * S->cap : 64;
            slab *s = realloc(S->v, (size_t)cap * sizeof *s);
            if (!s) return NULL;
            S->v = s, S->cap = cap;
        }
        void *p = NULL;
        if (cudaMalloc(&p, SLAB_BYTES) != cudaSuccess) return NULL;
        int i = S->n++;
        while (i > 0 && (uintptr_t)S->v[i - 1].base > (uintptr_t)p) S->v[i] = S->v[i - 1], i--;
        S->v[i] = (slab){(unsigned char *)p, 0, 0};
        S->cur = i;
    }
    slab *s = &S->v[S->cur];
    void *p = s->base + s->used;
    s->used += need;
    s->live++;
    return p;
}

int cu_slab_free(cu_slabs *S, void *p) {
    int lo = 0, hi = S->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        slab *s = &S->v[mid];
        if ((unsigned char *)p < s->base) hi = mid - 1;
        else if ((unsigned char *)p >= s->base + SLAB_BYTES) lo = mid + 1;
        else {
            if (--s->live > 0) return 1;
            cudaFree(s->base);
            memmove(&S->v[mid], &S->v[mid + 1], (size_t)(S->n - mid - 1) * sizeof *s);
            S->n--;
            if (S->cur == mid) S->cur = -1;
            else if (S->cur > mid) S->cur--;
            return 1;
        }
    }
    return 0;
}

void cu_slabs_release(cu_slabs *S) {
    if (S->n) return; /* pieces still live: their memory stays */
    free(S->v);
    *S = (cu_slabs){.cur = -1};
}
