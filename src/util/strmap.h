/*
 * strmap.h — a string → uint32 map (open addressing, linear probing).
 *
 * Built once and looked up many times: tensor names of a checkpoint (V4.1
 * has 96k), expected tensor names of a weight spec. The map does not copy
 * keys: the caller keeps every key alive (usually in an arena) for as long
 * as the map is used.
 */
#ifndef DI_UTIL_STRMAP_H
#define DI_UTIL_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct di_strmap_slot {
    const char *key; /* NULL = empty */
    uint32_t len;
    uint32_t val;
} di_strmap_slot;

typedef struct di_strmap {
    di_strmap_slot *slots;
    size_t cap;   /* power of two */
    size_t count;
} di_strmap;

/* Initialise a map sized for `expected` keys without rehashing. Returns 0,
 * or -1 when out of memory. Free with di_strmap_free. */
int di_strmap_init(di_strmap *m, size_t expected);

/* Make room for `n` keys in total without further rehashing. Returns 0, or
 * -1 when out of memory (the map is unchanged). */
int di_strmap_reserve(di_strmap *m, size_t n);

/* Insert `key` (`len` bytes, not copied) → `val`. Returns 1 if inserted,
 * 0 if the key was already present (then *existing, if given, receives its
 * value and the map is unchanged), -1 when out of memory or len ≥ 2^32. */
int di_strmap_put(di_strmap *m, const char *key, size_t len, uint32_t val, uint32_t *existing);

/* Look `key` up; returns 1 and sets *val when found, else 0. */
int di_strmap_get(const di_strmap *m, const char *key, size_t len, uint32_t *val);

void di_strmap_free(di_strmap *m);

/* The map's hash (64-bit FNV-1a), exposed for tests. */
uint64_t di_strmap_hash(const char *key, size_t len);

#endif
