/* cu_slab.c — device allocations of 1..64 MiB carved from 256 MiB slabs.
 *
 * cudaMalloc maps device memory in 2 MiB granules, so an allocation of a size
 * that is not a multiple of 2 MiB wastes the rest of its last granule: a
 * V4.1-Flash routed expert matrix is 5.625 MiB and takes 6, 0.375 MiB lost on
 * each of 384 x 3 per layer (docs/loading.md §4). Allocations in that range
 * are bump-allocated instead, 256-byte aligned, from slabs; a slab is given
 * back when every piece of it has been freed (weights are freed together at
 * model free). Smaller allocations the driver already packs; larger ones
 * waste at most 2 MiB on 64. Used only from the loading thread and model
 * free (the allocator is not called concurrently). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cu_glue.h"

#define SLAB_BYTES ((size_t)256 << 20)
#define SLAB_MIN ((size_t)1 << 20)
#define SLAB_MAX ((size_t)64 << 20)
#define PIECE_ALIGN 256

typedef struct slab {
    unsigned char *base;
    size_t used;
    long live; /* pieces not yet freed */
} slab;

static slab *g_slabs; /* sorted by base */
static int g_n, g_cap, g_cur = -1;

int cu_slab_wants(size_t bytes) { return bytes >= SLAB_MIN && bytes < SLAB_MAX && bytes % ((size_t)2 << 20); }

void *cu_slab_alloc(size_t bytes) {
    size_t need = (bytes + PIECE_ALIGN - 1) & ~(size_t)(PIECE_ALIGN - 1);
    if (g_cur < 0 || g_slabs[g_cur].used + need > SLAB_BYTES) {
        if (g_n == g_cap) {
            int cap = g_cap ? 2 * g_cap : 64;
            slab *s = realloc(g_slabs, (size_t)cap * sizeof *s);
            if (!s) return NULL;
            g_slabs = s, g_cap = cap;
        }
        void *p = NULL;
        if (cudaMalloc(&p, SLAB_BYTES) != cudaSuccess) return NULL;
        int i = g_n++;
        while (i > 0 && (uintptr_t)g_slabs[i - 1].base > (uintptr_t)p) g_slabs[i] = g_slabs[i - 1], i--;
        g_slabs[i] = (slab){(unsigned char *)p, 0, 0};
        g_cur = i;
    }
    slab *s = &g_slabs[g_cur];
    void *p = s->base + s->used;
    s->used += need;
    s->live++;
    return p;
}

int cu_slab_free(void *p) {
    int lo = 0, hi = g_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        slab *s = &g_slabs[mid];
        if ((unsigned char *)p < s->base) hi = mid - 1;
        else if ((unsigned char *)p >= s->base + SLAB_BYTES) lo = mid + 1;
        else {
            if (--s->live > 0) return 1;
            cudaFree(s->base);
            memmove(&g_slabs[mid], &g_slabs[mid + 1], (size_t)(g_n - mid - 1) * sizeof *s);
            g_n--;
            if (g_cur == mid) g_cur = -1;
            else if (g_cur > mid) g_cur--;
            return 1;
        }
    }
    return 0;
}
