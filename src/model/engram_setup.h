/*
 * engram_setup.h — everything Engram needs at model load except the weights,
 * and the per-step hash ids: the one entry point for the V4.1 forward
 * (architecture.md §5.8).
 *
 * Load (once per model):
 *   di_engram_tables t;
 *   di_engram_setup(model_dir, &model_config, tokenizer, NULL, &t, &err);
 *   then per Engram layer i: bind layers.{t.hash.layer_ids[i]}.engram.* with
 *   di_engram_layer_init (engram.h), rows = t.hash.num_embeddings[i].
 * Per step (per sequence chunk, positions start_pos..start_pos+n−1):
 *   di_engram_step_ids(&t, &seq_state, start_pos, tokens, text_mask, n, ids, &err);
 *   di_engram_prefetch(...) for each layer, then, at the start of Engram layer i,
 *   di_engram_forward(layer_i, ws, R, n, ids + i·n_cols, n_layers·n_cols, text_mask, NULL, &err).
 */
#ifndef DI_MODEL_ENGRAM_SETUP_H
#define DI_MODEL_ENGRAM_SETUP_H

#include "io/json.h"
#include "model/engram_hash.h"
#include "model/engram_token_map.h"
#include "tokenizer/tokenizer.h"

typedef struct di_engram_tables {
    di_engram_token_map map;
    di_engram_hash hash;   /* hash.n_layers == 0: the model has no Engram */
} di_engram_tables;

/* Prepare the token map and hash constants of a model with config `cfg`.
 * A config without Engram gives hash.n_layers == 0 and nothing else.
 *  - token map: <model_dir>/engram_token_map.json when present, else
 *    computed from `tok` (then required);
 *  - constants: the file `hash_file` when non-NULL (an engram_hash.json
 *    sidecar, or a golden manifest with an "engram" entry), else
 *    <model_dir>/engram_hash.json when present, else the built-in released
 *    V4.1-Flash values.
 * Fails (as the reference does) when the map's class count differs from
 * engram_compressed_vocab_size. model_dir may be NULL (no files looked up).
 * Free with di_engram_tables_free. */
deepinfer_status di_engram_setup(const char *model_dir, const di_model_config *cfg, const di_tokenizer *tok,
                                 const char *hash_file, di_engram_tables *out, di_error *err);
void di_engram_tables_free(di_engram_tables *t);

/* Classes and hash ids of positions start_pos..start_pos+n−1 of one
 * sequence (text_mask: NULL = all text; 0 = image-span token, DEAD). Writes
 * ids[(i·n_layers + layer)·n_cols + col] and advances *seq; on failure
 * (a token outside the map, a position that does not continue *seq) *seq
 * is unchanged. */
deepinfer_status di_engram_step_ids(const di_engram_tables *t, di_engram_seq *seq, int64_t start_pos,
                                    const int32_t *tokens, const uint8_t *text_mask, int64_t n, int64_t *ids,
                                    di_error *err);

#endif
