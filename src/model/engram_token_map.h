/*
 * engram_token_map.h — the Engram compressed token map (architecture.md
 * §5.8): token id -> class id, where tokens whose decoded text normalizes
 * alike share a class ("The", " the", "THE"). Classes are numbered in
 * first-seen order over ids 0..n−1; the released V4.1 tokenizer yields
 * exactly 99092 classes, and every hash multiplier derives from that count.
 *
 * Two sources:
 *  - computed at load time from the tokenizer (engram_token_key.h gives the
 *    per-token key; about 0.3 s for 129k tokens);
 *  - a map file shipped with the model, in the format of the golden
 *    `engram_token_map.json`: an object with "map" (the class of every id),
 *    or "repeats" ([id, class] pairs of the ids that reuse an earlier class;
 *    every other id opens the next class), plus optional "vocab_size",
 *    "compressed_vocab_size", "pad_token_id", "pad_class" which are checked.
 */
#ifndef DI_MODEL_ENGRAM_TOKEN_MAP_H
#define DI_MODEL_ENGRAM_TOKEN_MAP_H

#include <stdint.h>

#include "io/json.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

typedef struct di_engram_token_map {
    int32_t *cls;        /* [n_ids]: class of each token id (malloc'd) */
    int32_t n_ids;       /* ids covered (the tokenizer's vocabulary size) */
    int32_t n_classes;   /* compressed vocabulary size */
} di_engram_token_map;

/* The string of token `id` as written in tokenizer.json (ByteLevel form for
 * vocab entries, the content for added tokens), or NULL for an id the
 * tokenizer does not define (it decodes to ""). */
typedef const char *(*di_engram_token_str_fn)(void *ctx, int32_t id, size_t *len);

/* Build the map of ids 0..n_ids−1 from their token strings. Caller frees
 * with di_engram_token_map_free. */
deepinfer_status di_engram_token_map_build(int32_t n_ids, di_engram_token_str_fn token_str, void *ctx,
                                           di_engram_token_map *out, di_error *err);

/* Build the map from a loaded tokenizer (all its ids). */
deepinfer_status di_engram_token_map_from_tokenizer(const di_tokenizer *tok, di_engram_token_map *out,
                                                    di_error *err);

/* Load a shipped map (format above) from a parsed document / a file. */
deepinfer_status di_engram_token_map_from_json(const di_json *root, di_engram_token_map *out, di_error *err);
deepinfer_status di_engram_token_map_load(const char *path, di_engram_token_map *out, di_error *err);

void di_engram_token_map_free(di_engram_token_map *m);

/* Classes of `n` tokens for di_engram_hash_ids: text_mask[i] == 0 (image
 * span, §8) gives DI_ENGRAM_DEAD; text_mask NULL = all text. Fails on an id
 * outside [0, n_ids). */
deepinfer_status di_engram_token_classes(const di_engram_token_map *m, const int32_t *tokens,
                                         const uint8_t *text_mask, int64_t n, int32_t *classes, di_error *err);

#endif
