/*
 * counting_alloc.h — a device-like allocator for tests: host memory behind a
 * non-host di_allocator (ops/ops.h), so the code under test takes its device
 * paths, with every live byte counted in counting_alloc_live. Install it with
 * di_set_allocator(&a) where `di_allocator a = COUNTING_ALLOCATOR;`.
 */
#ifndef DI_TESTS_COUNTING_ALLOC_H
#define DI_TESTS_COUNTING_ALLOC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

static uint64_t counting_alloc_live; /* bytes allocated through it and not freed */

static inline void *counting_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    size_t *h = malloc(bytes + 16);
    if (!h) return NULL;
    h[0] = bytes;
    counting_alloc_live += bytes;
    return (unsigned char *)h + 16;
}

static inline void counting_free(void *ctx, void *p) {
    (void)ctx;
    if (!p) return;
    size_t *h = (size_t *)((unsigned char *)p - 16);
    counting_alloc_live -= h[0];
    free(h);
}

static inline void counting_zero(void *ctx, void *p, size_t n) { (void)ctx, memset(p, 0, n); }
static inline void counting_upload(void *ctx, void *d, const void *s, size_t n) { (void)ctx, memcpy(d, s, n); }

#define COUNTING_ALLOCATOR {counting_alloc, counting_free, counting_zero, counting_upload, NULL, NULL, NULL, NULL}

#endif
