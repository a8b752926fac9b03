/*
 * dummy.h — a random-weight model at a released config's real dimensions,
 * with fewer layers, loaded through the normal chain (for `deepinfer bench
 * --dummy`, docs/DESIGN.md §4, and tests).
 *
 * Three steps:
 *
 *  1. di_dummy_write_dir: from a full HF config.json (bench/configs/...),
 *     write into a directory the reduced config.json (and, for V4.1 with
 *     Engram, engram_token_map.json and engram_hash.json). Every dimension is
 *     kept (hidden size, heads, routed experts unless --experts, vocabulary);
 *     the layer count changes, keeping the layer roles:
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
 *     --experts E (di_dummy_write_dir_ex) also sets n_routed_experts = E
 *     (E >= num_experts_per_tok; a V4.1 drafter with its own
 *     dspark_n_routed_experts keeps min(that, E), at least its top-k), so
 *     every layer of a released config fits one GPU (the routed experts are
 *     most of the bytes). Prefill FLOPs per token do not depend on the
 *     expert count at fixed top-k (each token still runs num_experts_per_tok
 *     experts); decode bytes per step do (fewer distinct experts are read).
 *
 *  2. di_dummy_weights: the checkpoint of a (loaded, reduced) config as a
 *     *generated* safetensors handle (di_st_open_generated): the header of
 *     every tensor tensor_spec.c expects (optional ones left out), in the
 *     released dtypes, ordered by element size then spec order, and a
 *     generator that produces any byte range of any tensor on demand —
 *     nothing the size of the model exists on the host; the loader streams
 *     the bytes through its staging buffers. Ranges of 1 MB or more are
 *     filled on the threadpool in 256 KB pieces (so reads of one handle
 *     come from one thread at a time, as the loader makes them; a read
 *     from inside a pool region runs serially).
 *     The bytes are a function of (seed, tensor name, byte offset) only, the
 *     same whatever ranges are asked in whatever order:
 *       key(t)   = splitmix64(splitmix64(seed) ^ fnv1a64(t's name));
 *       word w   = splitmix64 output number w+1 from state key(t), i.e.
 *                  mix(key + (w + 1) * 0x9E3779B97F4A7C15), for bytes
 *                  [8w, 8w + 8) of the tensor (little-endian);
 *     each kind shapes its words so activations stay O(1):
 *       e4m3 weights: each byte (word & 0x8F) | 0x30: sign, exponent field
 *                     6 or 7, any mantissa (|w| in [0.5, 2)), never NaN;
 *                     block scales e8m0 2^-round(log2 sqrt(K)) (constant);
 *       e2m1 experts: the word's bytes as they are (random nibbles, RMS
 *                     ~2.9), row scales 2^-round(log2(2.9 sqrt(K)));
 *       bf16 / f32 matrices: uniform in (-a, a), a = sqrt(3/K) (RMS
 *                     1/sqrt(K); embedding rows a = sqrt(3), RMS 1): bf16
 *                     takes the word's four 16-bit lanes u, value
 *                     (u − 32767.5)/32768 · a in float, truncated to bf16;
 *                     f32 the top 24 bits u of its two 32-bit halves,
 *                     ((u + 0.5)·2/2^24 − 1) · a;
 *       norm weights, hc scales, Engram q/k weights 1; biases, hc bases,
 *                     attention sinks, compressor ape 0;
 *       Engram tables: e4m3 as above with scale 1;
 *       tid2eid (i64, one element per word): for token row r and slot j <
 *                     top-k, (splitmix64(key ^ r·0x2545F4914F6CDD1D) mod E +
 *                     j·floor(E/top-k)) mod E: top-k distinct experts.
 *     A tensor's bytes do not depend on which other tensors exist (e.g. on
 *     --experts for the layers' attention weights). The handle is passed to
 *     the loader as di_v4_options.weights (validated like any file).
 *
 *  3. di_dummy_write_checkpoint: the same bytes as files (a normal model
 *     directory with config.json from step 1, for load-rate measurement:
 *     `deepinfer dummy`, `deepinfer bench --load`): sharded safetensors
 *     model-0000i-of-0000N.safetensors split at tensor boundaries after
 *     about shard_bytes each, tensors in the generated handle's order, plus
 *     model.safetensors.index.json; streamed through two 32 MB buffers (one
 *     generated while the other is written), dirty pages written back and
 *     dropped behind the writer, every shard fsync'd.
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
    int64_t n_experts;     /* n_routed_experts written */
} di_dummy_info;

/* Write the reduced config (and sidecars) of the full config `config_path`
 * into the existing directory `dir`, keeping `n_layers` layers (1..the
 * config's count). `info` may be NULL. */
deepinfer_status di_dummy_write_dir(const char *config_path, int n_layers, const char *dir, di_dummy_info *info,
                                    di_error *err);

/* Like di_dummy_write_dir with n_routed_experts = n_experts (0: the
 * config's count; else at least num_experts_per_tok). */
deepinfer_status di_dummy_write_dir_ex(const char *config_path, int n_layers, int n_experts, const char *dir,
                                       di_dummy_info *info, di_error *err);

/* Build and open the random checkpoint of `cfg` (a validated config, e.g.
 * di_config_load of the directory above). Caller closes *out with
 * di_st_close. */
deepinfer_status di_dummy_weights(const di_model_config *cfg, uint64_t seed, di_safetensors **out, di_error *err);

/* Write the random checkpoint of `cfg` (seed as di_dummy_weights) into the
 * existing directory `dir` as shards of about `shard_bytes` (a tensor
 * larger than that is a shard of its own) and the index. Host memory: the
 * two write buffers and the headers, whatever the model size. */
deepinfer_status di_dummy_write_checkpoint(const di_model_config *cfg, uint64_t seed, const char *dir,
                                           uint64_t shard_bytes, di_error *err);

/* The same for any checkpoint handle (its tensors' bytes via di_st_read).
 * `progress` (may be NULL) is called after each shard with the bytes
 * written so far. */
deepinfer_status di_dummy_save(const di_safetensors *st, const char *dir, uint64_t shard_bytes,
                               void (*progress)(void *ctx, size_t shard, size_t n_shards, uint64_t done,
                                                uint64_t total),
                               void *progress_ctx, di_error *err);

#endif
