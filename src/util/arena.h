/*
 * arena.h — a bump allocator for objects that live and die together
 * (a parsed JSON document, a tokenizer's tables). Freed all at once.
 */
#ifndef DI_UTIL_ARENA_H
#define DI_UTIL_ARENA_H

#include <stddef.h>

typedef struct di_arena_block di_arena_block;

typedef struct di_arena {
    di_arena_block *head;   /* newest block */
    size_t block_size;      /* default size of new blocks */
    size_t total;           /* bytes handed out, for reporting */
    size_t limit;           /* 0 = unlimited; else di_arena_alloc fails past it */
} di_arena;

/* Initialise an empty arena; `block_size` 0 picks 64 KiB. */
void di_arena_init(di_arena *a, size_t block_size);

/* Allocate `n` bytes aligned to 16. Returns NULL when out of memory or past
 * the arena's limit. Memory is uninitialised. */
void *di_arena_alloc(di_arena *a, size_t n);

/* Like di_arena_alloc, zero-filled. */
void *di_arena_calloc(di_arena *a, size_t count, size_t size);

/* Copy `n` bytes and append a NUL terminator. */
char *di_arena_strndup(di_arena *a, const char *s, size_t n);

/* Free every block. The arena can be reused after di_arena_init. */
void di_arena_free(di_arena *a);

#endif
