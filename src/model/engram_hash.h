/*
 * engram_hash.h — the n-gram hash of DeepSeek-V4.1's Engram memory
 * (architecture.md §5.8; reference inference/engram.py EngramLayout and
 * NgramHashState).
 *
 * Every position p of a sequence is hashed, per Engram layer, into
 * n_cols = (max_ngram − 1) · n_heads row ids of that layer's table: the
 * 2-gram heads first, then the 3-gram heads, ... Inputs are compressed class
 * ids (engram_token_map.h), DI_ENGRAM_DEAD for tokens that take no part in
 * n-grams (image spans, §8).
 *
 * Layout: the primes and row offsets of every column come from the config
 * (di_model_config.engram_primes / engram_offsets, derived in
 * config_derive.c: each layer in order, each n-gram size, each head takes
 * the next unused prime above engram_vocab_size − 1).
 *
 * Multipliers: the reference draws them from numpy's PCG64 stream
 * (default_rng(10007·layer_id)), which is not reproduced here. The released
 * V4.1-Flash values are built in; any other config (the golden tiny model,
 * the demo model) supplies them in a JSON sidecar, `engram_hash.json`, whose
 * object has the structure of the golden manifest's `engram` entry:
 *   { "multipliers": [[m0, m1, m2, m3], ...one row per layer],
 *     "primes": [[[...heads] per n-gram] per layer], "offsets": [[...]],
 *     "num_embeddings": [...], "pad_class": 2 }
 * Only "multipliers" is required; the other keys, when present, are checked
 * against the config's layout. A file whose top-level object has an
 * "engram" entry (a golden manifest) is read through that entry.
 */
#ifndef DI_MODEL_ENGRAM_HASH_H
#define DI_MODEL_ENGRAM_HASH_H

#include <stdint.h>

#include "io/json.h"
#include "model/config.h"
#include "util/error.h"

#define DI_ENGRAM_MAX_LAYERS 16
#define DI_ENGRAM_MAX_NGRAM 16
#define DI_ENGRAM_MAX_COLS 64
#define DI_ENGRAM_DEAD (-1)

/* The hash layout and constants of one model. Plain data (no pointers):
 * copy it freely. */
typedef struct di_engram_hash {
    int n_layers, max_ngram, n_heads, n_cols;
    int32_t layer_ids[DI_ENGRAM_MAX_LAYERS];
    int64_t num_embeddings[DI_ENGRAM_MAX_LAYERS];
    int64_t primes[DI_ENGRAM_MAX_LAYERS][DI_ENGRAM_MAX_COLS];  /* [layer][(n−2)·n_heads + head] */
    int64_t offsets[DI_ENGRAM_MAX_LAYERS][DI_ENGRAM_MAX_COLS];
    int64_t multipliers[DI_ENGRAM_MAX_LAYERS][DI_ENGRAM_MAX_NGRAM]; /* [layer][shift] */
    int32_t pad_class;     /* class of engram_pad_token_id: fills n-gram slots with no history */
    int64_t n_classes;     /* compressed vocabulary size */
} di_engram_hash;

/* Take the layout of `cfg` (a validated config with Engram layers) and set
 * the constants. `multipliers` holds n_layers × max_ngram values (row per
 * layer), or is NULL for the built-in released constants (an error names the
 * sidecar to ship when the config is not the released one). `pad_class` is
 * the token map's class of engram_pad_token_id. Errors: sizes beyond the
 * limits above, pad_class outside [0, engram_compressed_vocab_size). */
deepinfer_status di_engram_hash_init(di_engram_hash *h, const di_model_config *cfg, const int64_t *multipliers,
                                     int32_t pad_class, di_error *err);

/* Like di_engram_hash_init with the constants of a sidecar object (see the
 * top of this file) — e.g. the golden manifest's "engram" entry. Its
 * primes / offsets / num_embeddings / pad_class, when present, must match. */
deepinfer_status di_engram_hash_init_json(di_engram_hash *h, const di_model_config *cfg, const di_json *sidecar,
                                          int32_t pad_class, di_error *err);

/* Same, reading the sidecar from a file (engram_hash.json). */
deepinfer_status di_engram_hash_init_file(di_engram_hash *h, const di_model_config *cfg, const char *path,
                                          int32_t pad_class, di_error *err);

/* The built-in multipliers of the released V4.1-Flash (architecture.md
 * §5.8) for `layer_id`, given the compressed vocabulary size and the n-gram
 * size they were drawn for. Returns 1 and fills out[max_ngram] when known. */
int di_engram_builtin_multipliers(int32_t layer_id, int64_t n_classes, int max_ngram, int64_t *out);

/* ---- per-sequence history ----------------------------------------------------------------- */

/* Positions a sequence can be rolled back (di_engram_seq_truncate) and
 * still hash: DI_ENGRAM_HIST − (max_ngram − 1) (13 for the release). */
#define DI_ENGRAM_HIST 16

/* A sequence's class-id history: only the last DI_ENGRAM_HIST positions are
 * kept (hashing looks back max_ngram − 1), by absolute position, so it
 * carries across prefill chunks, decode steps and draft verification.
 * Plain data: snapshot by copying. */
typedef struct di_engram_seq {
    int64_t len;                       /* positions 0..len−1 have been pushed */
    int32_t cls[DI_ENGRAM_HIST];       /* class of position p at cls[p % DI_ENGRAM_HIST]; DEAD marks kept */
} di_engram_seq;

/* An empty sequence (position 0 next). */
void di_engram_seq_init(di_engram_seq *s);

/* Roll back to `len` positions (drop rejected draft tokens). Fails when
 * that would need history older than the ring keeps. */
deepinfer_status di_engram_seq_truncate(di_engram_seq *s, int64_t len, int max_ngram, di_error *err);

/* Record classes of positions start_pos..start_pos+n−1 without hashing
 * (restoring a cached prefix). start_pos must equal s->len. */
deepinfer_status di_engram_seq_push(di_engram_seq *s, int64_t start_pos, const int32_t *classes, int64_t n,
                                    di_error *err);

/* Hash positions start_pos..start_pos+n−1 (start_pos must equal s->len;
 * classes[i] is the class of position start_pos+i, or DI_ENGRAM_DEAD) and
 * push them. Writes ids[(i·n_layers + layer)·n_cols + col]: row indices into
 * each layer's table. Per position and shift s = 0..max_ngram−1 (§5.8):
 *   src = class[max(p − s, 0)]; blocked |= p < s || src == DEAD;
 *   tok_s = blocked ? pad_class : src;  P_s = tok_s · mult[s] (int64);
 *   h = P_0; for n = 1..: h ^= P_n; id = (h mod prime) + offset per head.
 * Classes must lie in [0, n_classes) or be DEAD. */
deepinfer_status di_engram_hash_ids(const di_engram_hash *h, di_engram_seq *s, int64_t start_pos,
                                    const int32_t *classes, int64_t n, int64_t *ids, di_error *err);

#endif
