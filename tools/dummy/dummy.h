/*
 * dummy.h — a random-weight model at a released config's real dimensions,
 * with fewer layers, loaded through the normal chain (for `deepinfer bench
 * --dummy`, docs/DESIGN.md §4, and tests).
 *
 * Two steps:
 *
 *  1. di_dummy_write_dir: from a full HF config.json (bench/configs/...),
 *     write into a directory the reduced config.json (and, for V4.1 with
 *     Engram, engram_token_map.json and engram_hash.json). Every dimension is
 *     kept (hidden size, heads, all routed experts, vocabulary); only the
 *     layer count changes, keeping the layer roles:
 *       V4   the first N layers of the schedule (N = 4: compress_ratios
 *            [0,0,4,128]), then the config's trailing drafter entries (the
 *            MTP layer); num_hash_layers = min(num_hash_layers, N);
 *       V4.1 the first N − N/4 layers of the encoder half (0..19: sliding
 *            window, Engram at 1, the ratio-2 KV+index source 2, its Reuse
 *            layers) and the first N/4 of the decoder half (20..: the
 *            ratio-1 KV / index / candidate source 20, its Reuse layers,
 *            Reindex 24, ...). N = 4 keeps 0, 1, 2, 20. Layer-id lists
 *            (kv/index/candidate sources, Engram layers) are renumbered and
 *            lose the layers not kept; the DSpark stages stay (their target
 *            layers become the last min(count, N) kept layers).
 *     Engram tables are sized down: engram_vocab_size = min(its value,
 *     DI_DUMMY_ENGRAM_VOCAB), so each table has (max_ngram − 1)·n_heads
 *     primes above it as rows (24 · ~65.5k ≈ 1.57M rows, ~0.4 GB with the
 *     scales, instead of 384M, ~97 GB); the row gathers per token are
 *     unchanged. The token map is synthetic with exactly
 *     engram_compressed_vocab_size classes; the hash multipliers are fixed
 *     odd constants (engram_hash.json).
 *
 *  2. di_dummy_weights: the checkpoint of a (loaded, reduced) config as one
 *     in-memory safetensors image (anonymous mmap, header + data), every
 *     tensor tensor_spec.c expects (optional ones left out), in the released
 *     dtypes, filled in parallel (threadpool, xorshift per chunk) with values
 *     that keep activations O(1):
 *       e4m3 weights: bytes with exponent field 6 or 7 (|w| in [0.5, 2)),
 *                     never NaN; block scales 2^-round(log2 sqrt(K));
 *       e2m1 experts: random nibbles (RMS ~2.9), row scales
 *                     2^-round(log2(2.9 sqrt(K)));
 *       bf16 / f32 matrices: uniform, RMS 1/sqrt(K) (embedding rows RMS 1);
 *       norm weights, hc scales, Engram q/k weights 1; biases, hc bases,
 *       attention sinks, compressor ape 0;
 *       Engram tables: e4m3 as above with scale 1;
 *       tid2eid: num_experts_per_tok distinct experts per token.
 *     The result is opened with di_st_open_memory and passed to the loader
 *     as di_v4_options.weights (the loader validates it like any file).
 */
#ifndef DI_TOOLS_DUMMY_H
#define DI_TOOLS_DUMMY_H

#include <stdint.h>

#include "io/safetensors.h"
#include "model/config.h"
#include "util/error.h"

#define DI_DUMMY_ENGRAM_VOCAB 65536

typedef struct di_dummy_info {
    int n_layers;          /* layers kept */
    int kept[64];          /* original index of each kept layer (first min(n_layers, 64)) */
    int64_t engram_vocab;  /* engram_vocab_size written (0: no Engram) */
} di_dummy_info;

/* Write the reduced config (and sidecars) of the full config `config_path`
 * into the existing directory `dir`, keeping `n_layers` layers (1..the
 * config's count). `info` may be NULL. */
deepinfer_status di_dummy_write_dir(const char *config_path, int n_layers, const char *dir, di_dummy_info *info,
                                    di_error *err);

/* Build and open the random checkpoint of `cfg` (a validated config, e.g.
 * di_config_load of the directory above). Caller closes *out with
 * di_st_close. */
deepinfer_status di_dummy_weights(const di_model_config *cfg, uint64_t seed, di_safetensors **out, di_error *err);

#endif
