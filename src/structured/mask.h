/*
 * mask.h — compute the allowed-token bitmask of a parser state (mask.c).
 */
#ifndef DI_STRUCTURED_MASK_H
#define DI_STRUCTURED_MASK_H

#include <stdint.h>

#include "structured/earley.h"

typedef struct so_mask_stats {
    uint64_t hits, misses;   /* mask cache */
    uint64_t dep_roots;      /* trie subtrees checked with the parser */
    uint64_t nodes;          /* parser pushes during those checks */
} so_mask_stats;

/* Fill `mask` (vocab->n_words words, bit t = token t allowed). EOS ids are
 * set iff the parser is accepting. `stats` may be NULL. */
deepinfer_status so_mask_fill(so_parser *p, uint32_t *mask, so_mask_stats *stats, di_error *err);

/* 1 if the bytes can be consumed from the current state (state unchanged). */
int so_parser_try_bytes(so_parser *p, const uint8_t *s, size_t n);

#endif
