#include "util/strmap.h"

#include <stdlib.h>
#include <string.h>

uint64_t di_strmap_hash(const char *key, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 0x100000001b3ull;
    }
    /* Final mix so that the low bits used for the slot depend on every byte. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static int alloc_slots(di_strmap *m, size_t cap) {
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) return -1;
    m->cap = cap;
    return 0;
}

int di_strmap_init(di_strmap *m, size_t expected) {
    m->slots = NULL;
    m->cap = 0;
    m->count = 0;
    size_t cap = 16;
    while (cap < expected * 2) {
        if (cap > SIZE_MAX / 4 / sizeof(di_strmap_slot)) return -1;
        cap *= 2;
    }
    return alloc_slots(m, cap);
}

static di_strmap_slot *find_slot(di_strmap_slot *slots, size_t cap, const char *key, size_t len) {
    size_t mask = cap - 1;
    size_t i = (size_t)di_strmap_hash(key, len) & mask;
    for (;;) {
        di_strmap_slot *s = &slots[i];
        if (!s->key || (s->len == len && memcmp(s->key, key, len) == 0)) return s;
        i = (i + 1) & mask;
    }
}

static int rehash(di_strmap *m, size_t newcap) {
    di_strmap_slot *old = m->slots;
    size_t oldcap = m->cap;
    if (alloc_slots(m, newcap) != 0) {
        m->slots = old;
        return -1;
    }
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].key) *find_slot(m->slots, m->cap, old[i].key, old[i].len) = old[i];
    free(old);
    return 0;
}

static int grow(di_strmap *m) {
    if (m->cap > SIZE_MAX / 2 / sizeof(di_strmap_slot)) return -1;
    return rehash(m, m->cap * 2);
}

int di_strmap_reserve(di_strmap *m, size_t n) {
    if (!m->slots) return -1;
    size_t cap = m->cap;
    while (cap < n * 2) {
        if (cap > SIZE_MAX / 4 / sizeof(di_strmap_slot)) return -1;
        cap *= 2;
    }
    return cap == m->cap ? 0 : rehash(m, cap);
}

int di_strmap_put(di_strmap *m, const char *key, size_t len, uint32_t val, uint32_t *existing) {
    if (len >= UINT32_MAX || !m->slots) return -1;
    if ((m->count + 1) * 2 > m->cap && grow(m) != 0) return -1;
    di_strmap_slot *s = find_slot(m->slots, m->cap, key, len);
    if (s->key) {
        if (existing) *existing = s->val;
        return 0;
    }
    s->key = key;
    s->len = (uint32_t)len;
    s->val = val;
    m->count++;
    return 1;
}

int di_strmap_get(const di_strmap *m, const char *key, size_t len, uint32_t *val) {
    if (!m->slots || len >= UINT32_MAX) return 0;
    const di_strmap_slot *s = find_slot(m->slots, m->cap, key, len);
    if (!s->key) return 0;
    *val = s->val;
    return 1;
}

void di_strmap_free(di_strmap *m) {
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}
