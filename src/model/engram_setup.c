/*
 * engram_setup.c — load-time assembly of the Engram token map and hash
 * constants, and per-step hash ids (see engram_setup.h).
 */
#include "model/engram_setup.h"

#include <string.h>

#include "util/file.h"

void di_engram_tables_free(di_engram_tables *t) {
    if (!t) return;
    di_engram_token_map_free(&t->map);
    memset(t, 0, sizeof *t);
}

deepinfer_status di_engram_setup(const char *model_dir, const di_model_config *cfg, const di_tokenizer *tok,
                                 const char *hash_file, di_engram_tables *out, di_error *err) {
    memset(out, 0, sizeof *out);
    deepinfer_status st = DEEPINFER_OK;
    if (cfg->n_engram_layer_ids == 0) return DEEPINFER_OK;

    char path[4096];
    if (model_dir && !di_path_join(path, sizeof path, model_dir, "engram_token_map.json") && di_is_file(path))
        st = di_engram_token_map_load(path, &out->map, err);
    else if (tok)
        st = di_engram_token_map_from_tokenizer(tok, &out->map, err);
    else
        st = di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                          "engram: no engram_token_map.json in the model directory and no tokenizer to compute it");
    if (st) goto fail;
    if (out->map.n_classes != cfg->engram_compressed_vocab_size) {
        st = di_error_set(err, DEEPINFER_ERR_FORMAT,
                          "engram: the compressed token map has %d classes but engram_compressed_vocab_size is "
                          "%lld; every hash would differ from the model's (wrong tokenizer?)",
                          out->map.n_classes, (long long)cfg->engram_compressed_vocab_size);
        goto fail;
    }
    if (cfg->engram_pad_token_id >= out->map.n_ids) {
        st = di_error_set(err, DEEPINFER_ERR_FORMAT, "engram: pad token %lld is outside the token map (%d ids)",
                          (long long)cfg->engram_pad_token_id, out->map.n_ids);
        goto fail;
    }
    const int32_t pad = out->map.cls[cfg->engram_pad_token_id];
    if (hash_file)
        st = di_engram_hash_init_file(&out->hash, cfg, hash_file, pad, err);
    else if (model_dir && !di_path_join(path, sizeof path, model_dir, "engram_hash.json") && di_is_file(path))
        st = di_engram_hash_init_file(&out->hash, cfg, path, pad, err);
    else
        st = di_engram_hash_init(&out->hash, cfg, NULL, pad, err);
    if (!st) return DEEPINFER_OK;
fail:
    di_engram_tables_free(out);
    return st;
}

deepinfer_status di_engram_step_ids(const di_engram_tables *t, di_engram_seq *seq, int64_t start_pos,
                                    const int32_t *tokens, const uint8_t *text_mask, int64_t n, int64_t *ids,
                                    di_error *err) {
    enum { CHUNK = 4096 };
    int32_t cls[CHUNK];
    const int64_t per_tok = (int64_t)t->hash.n_layers * t->hash.n_cols;
    for (int64_t i = 0; i < n; i++) /* validate first, so a failure leaves *seq untouched */
        if (tokens[i] < 0 || tokens[i] >= t->map.n_ids)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "engram: token id %d at position %lld is outside the token map [0, %d)", tokens[i],
                                (long long)(start_pos + i), t->map.n_ids);
    for (int64_t i = 0; i < n; i += CHUNK) {
        const int64_t m = n - i < CHUNK ? n - i : CHUNK;
        deepinfer_status st = di_engram_token_classes(&t->map, tokens + i, text_mask ? text_mask + i : NULL, m, cls, err);
        if (!st) st = di_engram_hash_ids(&t->hash, seq, start_pos + i, cls, m, ids + i * per_tok, err);
        if (st) return st;
    }
    return DEEPINFER_OK;
}
