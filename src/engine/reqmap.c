/* reqmap.c — request id hash map (reqmap.h). */
#include "engine/reqmap.h"

#include <stdlib.h>
#include <string.h>

static size_t slot_of(uint64_t k, size_t cap) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

static void put_raw(uint64_t *keys, void **vals, size_t cap, uint64_t k, void *v) {
    size_t i = slot_of(k, cap);
    while (vals[i]) i = (i + 1) & (cap - 1);
    keys[i] = k;
    vals[i] = v;
}

int di_reqmap_reserve(di_reqmap *m, size_t extra) {
    size_t need = (m->n + extra) * 2; /* load factor <= 1/2 */
    if (need <= m->cap) return 0;
    size_t cap = m->cap ? m->cap : 64;
    while (cap < need) cap *= 2;
    uint64_t *keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->vals[i]) put_raw(keys, vals, cap, m->keys[i], m->vals[i]);
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

void di_reqmap_put(di_reqmap *m, uint64_t key, void *val) {
    put_raw(m->keys, m->vals, m->cap, key, val);
    m->n++;
}

void *di_reqmap_get(const di_reqmap *m, uint64_t key) {
    if (!m->cap) return NULL;
    for (size_t i = slot_of(key, m->cap); m->vals[i]; i = (i + 1) & (m->cap - 1))
        if (m->keys[i] == key) return m->vals[i];
    return NULL;
}

void *di_reqmap_del(di_reqmap *m, uint64_t key) {
    if (!m->cap) return NULL;
    size_t mask = m->cap - 1, i = slot_of(key, m->cap);
    while (m->vals[i] && m->keys[i] != key) i = (i + 1) & mask;
    void *v = m->vals[i];
    if (!v) return NULL;
    /* backward shift: move later entries of the run into the hole */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->vals[j]; j = (j + 1) & mask) {
        size_t home = slot_of(m->keys[j], m->cap);
        /* j may fill the hole if its home is not in (hole, j] cyclically */
        int between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (between) continue;
        m->keys[hole] = m->keys[j];
        m->vals[hole] = m->vals[j];
        hole = j;
    }
    m->vals[hole] = NULL;
    m->n--;
    return v;
}

void di_reqmap_free(di_reqmap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}
