/*
 * reqmap.h — request id → request, an open-addressing hash map (linear
 * probing, backward-shift deletion). Grown when requests are added, never
 * inside a step.
 */
#ifndef DI_ENGINE_REQMAP_H
#define DI_ENGINE_REQMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct di_reqmap {
    uint64_t *keys;
    void **vals;    /* NULL = empty slot */
    size_t cap;     /* power of two */
    size_t n;
} di_reqmap;

/* Make room for `extra` more entries; 0, or -1 when out of memory. */
int di_reqmap_reserve(di_reqmap *m, size_t extra);
/* Insert (the key must be absent and room reserved). */
void di_reqmap_put(di_reqmap *m, uint64_t key, void *val);
void *di_reqmap_get(const di_reqmap *m, uint64_t key);
/* Remove and return the value (NULL if absent). */
void *di_reqmap_del(di_reqmap *m, uint64_t key);
void di_reqmap_free(di_reqmap *m);

#endif
