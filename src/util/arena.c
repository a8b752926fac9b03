#include "util/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct di_arena_block {
    di_arena_block *next;
    size_t size;
    size_t used;
    _Alignas(16) unsigned char data[];
};

void di_arena_init(di_arena *a, size_t block_size) {
    a->head = NULL;
    a->block_size = block_size ? block_size : (size_t)64 * 1024;
    a->total = 0;
    a->limit = 0;
}

void *di_arena_alloc(di_arena *a, size_t n) {
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n) return NULL; /* overflow */
    if (a->limit && (a->total + need > a->limit || a->total + need < a->total)) return NULL;
    di_arena_block *b = a->head;
    if (!b || b->size - b->used < need) {
        size_t size = need > a->block_size ? need : a->block_size;
        if (size > SIZE_MAX - sizeof(di_arena_block)) return NULL;
        b = malloc(sizeof(di_arena_block) + size);
        if (!b) return NULL;
        b->size = size;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += need;
    a->total += need;
    return p;
}

void *di_arena_calloc(di_arena *a, size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = di_arena_alloc(a, count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

char *di_arena_strndup(di_arena *a, const char *s, size_t n) {
    if (n == SIZE_MAX) return NULL;
    char *p = di_arena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void di_arena_free(di_arena *a) {
    di_arena_block *b = a->head;
    while (b) {
        di_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->total = 0;
}
