/* strmap.c — open-addressing hash map from byte strings to int32 ids. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

uint32_t di_strmap_hash(const uint8_t *s, size_t n) {
    /* FNV-1a, 32-bit, then a final avalanche so low bits spread. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    return h;
}

static int grow(di_strmap *m) {
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    di_strmap_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < m->cap; i++) {
        di_strmap_slot *s = &m->slots[i];
        if (!s->key) continue;
        size_t j = s->hash & (ncap - 1);
        while (ns[j].key) j = (j + 1) & (ncap - 1);
        ns[j] = *s;
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int di_strmap_put(di_strmap *m, const uint8_t *key, size_t len, int32_t value) {
    if ((m->count + 1) * 4 >= m->cap * 3 && grow(m) != 0) return -1;
    uint32_t h = di_strmap_hash(key, len);
    size_t j = h & (m->cap - 1);
    while (m->slots[j].key) {
        di_strmap_slot *s = &m->slots[j];
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) {
            s->value = value;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    /* A zero-length key still needs a non-NULL pointer to mark the slot used. */
    m->slots[j] = (di_strmap_slot){key ? key : (const uint8_t *)"", (uint32_t)len, h, value};
    m->count++;
    return 0;
}

int32_t di_strmap_get(const di_strmap *m, const uint8_t *key, size_t len) {
    if (!m->cap) return -1;
    uint32_t h = di_strmap_hash(key, len);
    size_t j = h & (m->cap - 1);
    while (m->slots[j].key) {
        const di_strmap_slot *s = &m->slots[j];
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return s->value;
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void di_strmap_free(di_strmap *m) {
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}
