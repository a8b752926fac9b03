/*
 * config.h — a model's config.json as a typed, validated struct.
 *
 * Supported: `deepseek_v4` (DeepSeek-V4-Flash, V4-Flash-0731; flat layout)
 * and `deepseek_v41` / `deepseek_v41_text` (DeepSeek-V4.1-Flash; model keys nested in
 * `text_config`, `quantization_config` and `image_token_id` at the top).
 * Every key of architecture.md §1.1 is read; the reference names of §1.2
 * (`dim`, `n_layers`, `moe_inter_dim`, `rope_factor`, ...) are accepted as
 * synonyms, and a config holding both spellings with different values is
 * rejected. A config without `model_type` and `architectures` (the
 * reference `inference/config.json`) is recognised by its keys: V4.1 if it
 * has kv source layers, else V4 (stated in `note`).
 *
 * Missing keys: the keys that define shapes or routing are required; a few
 * others take the released value (hc_eps 1e-6, rms_norm_eps 1e-6 / 1e-20,
 * gate_temp 1.0, ...). Every key that took a default is listed in
 * `defaulted` so callers can show it.
 *
 * Derived per layer, from the config only (never from hard-coded layer
 * numbers): compress ratio, role, RoPE choice, hash routing (V4), Engram,
 * which tensors the layer owns, and (V4.1 CSA2) which earlier layer's
 * compressed KV, index keys, top-k selection and candidate mask it reads.
 * Drafter stages (MTP for V4, DSpark for V4.1 and V4-0731) follow the
 * backbone layers: layers[n_layers + s] is stage s.
 */
#ifndef DI_MODEL_CONFIG_H
#define DI_MODEL_CONFIG_H

#include <stdint.h>

#include "util/error.h"

#define DI_CFG_MAX_LAYERS 256      /* backbone layers + drafter stages */
#define DI_CFG_MAX_LIST 64         /* kv/index source ids, dspark targets */
#define DI_CFG_MAX_ENGRAM 16       /* Engram layers */
#define DI_CFG_MAX_ENGRAM_COLS 64  /* (max n-gram − 1) × heads per Engram layer */
#define DI_CFG_MAX_DEFAULTED 48

typedef enum di_arch {
    DI_ARCH_V4 = 1,  /* deepseek_v4 */
    DI_ARCH_V41 = 2  /* deepseek_v41 */
} di_arch;

typedef enum di_layer_role {
    DI_ROLE_SWA = 0,    /* ratio 0: sliding window only */
    DI_ROLE_CSA,        /* V4 ratio 4: overlapping gated compressor + lightning indexer */
    DI_ROLE_HCA,        /* V4 other ratio (128): non-overlapping gated compressor, every row visible */
    DI_ROLE_FULL,       /* V4.1 KV source and index source (2, 8, 14, 20 in the release) */
    DI_ROLE_KV_SOURCE,  /* V4.1 KV source that is not an index source (reuses a top-k) */
    DI_ROLE_REINDEX,    /* V4.1 index source that is not a KV source (24, 28, 32, 36) */
    DI_ROLE_REUSE       /* V4.1 ratio > 0, neither: reads the latest sources' KV and top-k */
} di_layer_role;

typedef enum di_drafter {
    DI_DRAFTER_NONE = 0,
    DI_DRAFTER_MTP,    /* V4 multi-token prediction block(s), mtp.{s}.* */
    DI_DRAFTER_DSPARK  /* DSpark stages, mtp.{s}.* (V4.1; V4-0731) */
} di_drafter;

typedef struct di_layer_cfg {
    int ratio;              /* compress_ratios[l] */
    di_layer_role role;
    int rope_compress;      /* 1: compress_rope_theta + YaRN for all RoPE in the layer; 0: rope_theta, no YaRN */
    int hash_routed;        /* V4: MoE routed by tid2eid (l < num_hash_layers) */
    int engram;             /* index into the engram_* lists, or -1 */
    /* What the layer owns (decides its tensors). */
    int has_compressor;     /* attn.compressor.* */
    int compressor_gated;   /* attn.compressor.wgate (V4 always; V4.1 ratio ≥ 2) */
    int compressor_overlap; /* V4 ratio 4: 2×head_dim projections, rows pool 2r tokens */
    int has_index_keys;     /* V4: attn.indexer.compressor.*; V4.1: attn.indexer.wk/k_norm */
    int has_index_query;    /* attn.indexer.wq_b + weights_proj */
    /* Data flow. Layer ids; -1 = none. */
    int kv_layer;           /* compressed KV this layer attends to (itself for owners) */
    int topk_layer;         /* whose top-k row selection it uses (itself for index sources; -1: V4 HCA uses every row) */
    int index_key_layer;    /* for index-query layers: whose index keys are scored */
    int candidate_layer;    /* V4.1: candidate source whose block mask restricts this layer's index scores */
    int is_candidate_source;
} di_layer_cfg;

typedef struct di_model_config {
    di_arch arch;
    char model_type[32];     /* as written, or inferred (see note) */
    char architecture[64];   /* architectures[0], or "" */

    /* ---- architecture.md §1.1 keys (HF names) ---- */
    int64_t vocab_size, hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads;
    int64_t head_dim, qk_rope_head_dim, q_lora_rank, o_lora_rank, o_groups;
    int64_t n_routed_experts, n_shared_experts, num_experts_per_tok, moe_intermediate_size;
    char scoring_func[24], topk_method[24];
    int norm_topk_prob;
    double routed_scaling_factor, gate_temp, swiglu_limit;
    int64_t num_hash_layers;  /* 0 for V4.1 */
    int64_t sliding_window;
    int n_compress_ratios;
    int compress_ratios[DI_CFG_MAX_LAYERS];
    double compress_rope_theta, rope_theta;
    struct {
        char type[16];  /* "yarn" ("type" or "rope_type") */
        double factor, beta_fast, beta_slow;
        int64_t original_max_position_embeddings;
    } rope_scaling;
    int64_t max_position_embeddings;
    int64_t index_n_heads, index_head_dim, index_topk;
    int64_t hc_mult, hc_sinkhorn_iters;
    double hc_eps, rms_norm_eps;
    int64_t num_nextn_predict_layers; /* after parsing = n_stages (V4-0731 writes 1 for 3 DSpark stages; see note) */
    /* V4.1 CSA2 */
    int n_kv_source_layer_ids, kv_source_layer_ids[DI_CFG_MAX_LIST];
    int n_index_source_layer_ids, index_source_layer_ids[DI_CFG_MAX_LIST];
    int64_t candidate_source_layer_id; /* -1 if none */
    int64_t candidate_topk_blocks, candidate_block_size;
    /* V4.1 Engram */
    int n_engram_layer_ids, engram_layer_ids[DI_CFG_MAX_ENGRAM];
    int64_t engram_num_embeddings[DI_CFG_MAX_ENGRAM];
    int64_t engram_max_ngram_size, engram_vocab_size, engram_n_heads, engram_head_dim;
    int64_t engram_pad_token_id, engram_compressed_vocab_size;
    /* DSpark (V4.1; V4-0731) */
    int64_t dspark_block_size, dspark_noise_token_id, dspark_markov_rank;
    int n_dspark_target_layer_ids, dspark_target_layer_ids[DI_CFG_MAX_LIST];
    int64_t dspark_n_routed_experts, dspark_num_experts_per_tok;
    /* tokens, misc */
    int64_t bos_token_id, eos_token_id, pad_token_id, image_token_id; /* -1 if absent */
    int tie_word_embeddings;
    char torch_dtype[16];
    /* quantization_config (or the reference's top-level dtype/scale_fmt/expert_dtype) */
    char quant_method[16], quant_fmt[16], activation_scheme[16], scale_fmt[16], expert_dtype[8];
    int64_t weight_block_size[2];
    int has_vision_config;

    /* ---- derived ---- */
    int n_layers;            /* = num_hidden_layers */
    int n_stages;            /* drafter stages = n_compress_ratios − n_layers */
    di_drafter drafter;
    di_layer_cfg layers[DI_CFG_MAX_LAYERS]; /* n_layers + n_stages entries */
    int fp8_block_out, fp8_block_in; /* FP8 weight scale tile (128×128 V4, 32×32 V4.1) */
    int act_block;           /* activation quantisation block along K = fp8_block_in */
    int expert_fp4;          /* 1: routed experts FP4 (I8 [out,in/2] + E8M0 [out,in/32]); 0: FP8 */
    int64_t stage_n_routed_experts, stage_num_experts_per_tok; /* drafter MoE */
    int engram_cols;         /* (engram_max_ngram_size − 1) × engram_n_heads */
    /* Engram hash moduli: the primes of each layer's columns (n-gram 2 heads,
     * then 3, ...) and each column's row offset in that layer's table. */
    uint64_t engram_primes[DI_CFG_MAX_ENGRAM][DI_CFG_MAX_ENGRAM_COLS];
    uint64_t engram_offsets[DI_CFG_MAX_ENGRAM][DI_CFG_MAX_ENGRAM_COLS];

    /* ---- load option (not a config.json key; 0 after parsing) ---- */
    int max_draft;           /* rows a rollback may discard (seq_snapshot.h): sizes the compressor
                                buffers (seq_state.h); 0 = no speculation */

    /* ---- provenance ---- */
    int n_defaulted;
    const char *defaulted[DI_CFG_MAX_DEFAULTED]; /* static key names that took defaults */
    char note[256];          /* how the type was recognised, drafter remarks; may be "" */
} di_model_config;

/* Parse config.json text (`len` bytes; `label` names it in messages) into
 * *cfg (caller-owned; nothing to free). Errors name the key, its line and
 * column, and what was expected. Unknown model types are rejected with the
 * supported list. */
deepinfer_status di_config_parse(const char *text, size_t len, const char *label, di_model_config *cfg,
                                 di_error *err);

/* Check the keys of *cfg for consistency and (re)compute every derived
 * field (layers, stages, drafter, Engram primes). di_config_parse calls it;
 * tests and tools that edit keys in code call it again. `label` prefixes
 * error messages. */
deepinfer_status di_config_derive(di_model_config *cfg, const char *label, di_error *err);

/* Read and parse `path`: a config.json file or a directory holding one. */
deepinfer_status di_config_load(const char *path, di_model_config *cfg, di_error *err);

const char *di_arch_name(di_arch a);           /* "deepseek_v4" / "deepseek_v41" */
const char *di_role_name(di_layer_role r);     /* "swa", "csa", "hca", "full", "kv-source", "reindex", "reuse" */
const char *di_drafter_name(di_drafter d);     /* "none", "mtp", "dspark" */

/* 1 if the key was not in config.json and took its default. */
int di_config_defaulted(const di_model_config *cfg, const char *key);

#endif
