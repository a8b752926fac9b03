/*
 * config_derive.c — consistency checks and the derived layer schedule of a
 * di_model_config (called by di_config_parse once every key is read).
 *
 * Everything here comes from the config values: the compress ratio of each
 * layer, the V4 role (SWA / CSA / HCA) or the V4.1 CSA2 role (Full /
 * KV-source / Reindex / Reuse) with the layers each one reads from, RoPE
 * choice, hash routing, Engram layers and their hash primes, drafter stages.
 */
#include <stdio.h>
#include <string.h>

#include "model/config.h"

#define FAIL(...) return di_error_set(err, DEEPINFER_ERR_FORMAT, __VA_ARGS__)

static void drop_default(di_model_config *g, const char *key) {
    for (int i = 0; i < g->n_defaulted; i++)
        if (!strcmp(g->defaulted[i], key)) {
            memmove(&g->defaulted[i], &g->defaulted[i + 1], (size_t)(g->n_defaulted - i - 1) * sizeof(char *));
            g->n_defaulted--;
            return;
        }
}

static void add_note(di_model_config *g, const char *text) {
    size_t at = strlen(g->note);
    snprintf(g->note + at, sizeof g->note - at, "%s%s", at ? "; " : "", text);
}

/* ---- primes for the Engram hash layout ---------------------------------------------------- */

static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m) { return (uint64_t)((__uint128_t)a * b % m); }

static uint64_t powmod(uint64_t a, uint64_t e, uint64_t m) {
    uint64_t r = 1;
    a %= m;
    while (e) {
        if (e & 1) r = mulmod(r, a, m);
        a = mulmod(a, a, m);
        e >>= 1;
    }
    return r;
}

/* Deterministic Miller–Rabin for 64-bit n (these bases cover all n < 3.3e24). */
static int is_prime(uint64_t n) {
    static const uint64_t bases[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
    if (n < 2) return 0;
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        if (n == bases[i]) return 1;
        if (n % bases[i] == 0) return 0;
    }
    uint64_t d = n - 1;
    int s = 0;
    while (!(d & 1)) {
        d >>= 1;
        s++;
    }
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        uint64_t x = powmod(bases[i], d, n);
        if (x == 1 || x == n - 1) continue;
        int comp = 1;
        for (int r = 1; r < s && comp; r++) {
            x = mulmod(x, x, n);
            if (x == n - 1) comp = 0;
        }
        if (comp) return 0;
    }
    return 1;
}

/* Engram: each layer (in list order), each n-gram size 2..max, each head takes
 * the next unused prime above engram_vocab_size − 1; a layer's table has the
 * sum of its primes as rows (architecture.md §5.8). */
static deepinfer_status derive_engram(di_model_config *g, di_error *err) {
    int ne = g->n_engram_layer_ids;
    if (!ne) return DEEPINFER_OK;
    int64_t cols = (g->engram_max_ngram_size - 1) * g->engram_n_heads;
    if (cols > DI_CFG_MAX_ENGRAM_COLS)
        FAIL("(engram_max_ngram_size − 1) × engram_n_heads = %lld exceeds the supported %d", (long long)cols,
             DI_CFG_MAX_ENGRAM_COLS);
    g->engram_cols = (int)cols;
    if (g->engram_head_dim % 32)
        FAIL("engram_head_dim = %lld must be a multiple of 32 (one E8M0 scale per 32 columns)",
             (long long)g->engram_head_dim);
    if (g->engram_pad_token_id >= g->vocab_size)
        FAIL("engram_pad_token_id = %lld is not below vocab_size %lld", (long long)g->engram_pad_token_id,
             (long long)g->vocab_size);
    if (g->engram_compressed_vocab_size > g->vocab_size)
        FAIL("engram_compressed_vocab_size = %lld exceeds vocab_size %lld (classes group tokens)",
             (long long)g->engram_compressed_vocab_size, (long long)g->vocab_size);
    uint64_t p = (uint64_t)g->engram_vocab_size - 1;
    for (int i = 0; i < ne; i++) {
        for (int j = 0; j < i; j++)
            if (g->engram_layer_ids[j] == g->engram_layer_ids[i])
                FAIL("engram_layer_ids lists layer %d twice", g->engram_layer_ids[i]);
        uint64_t sum = 0;
        for (int k = 0; k < g->engram_cols; k++) {
            do p++;
            while (!is_prime(p));
            g->engram_offsets[i][k] = sum;
            g->engram_primes[i][k] = p;
            sum += p;
        }
        if ((int64_t)sum != g->engram_num_embeddings[i])
            FAIL("engram_num_embeddings[%d] = %lld, but the hash layout (the next %d primes above "
                 "engram_vocab_size − 1 = %lld per layer) gives %llu rows for layer %d",
                 i, (long long)g->engram_num_embeddings[i], g->engram_cols, (long long)g->engram_vocab_size - 1,
                 (unsigned long long)sum, g->engram_layer_ids[i]);
        g->layers[g->engram_layer_ids[i]].engram = i;
    }
    return DEEPINFER_OK;
}

/* ---- dimensions ----------------------------------------------------------------------- */

static deepinfer_status check_dims(di_model_config *g, di_error *err) {
    if (g->num_key_value_heads != 1)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "num_key_value_heads = %lld: DeepSeek V4 attention has one shared K=V head",
                            (long long)g->num_key_value_heads);
    if (g->qk_rope_head_dim < 2 || g->qk_rope_head_dim % 2)
        FAIL("qk_rope_head_dim = %lld must be a positive even number", (long long)g->qk_rope_head_dim);
    if (g->head_dim < g->qk_rope_head_dim)
        FAIL("head_dim = %lld is smaller than qk_rope_head_dim = %lld (RoPE covers the tail of each head)",
             (long long)g->head_dim, (long long)g->qk_rope_head_dim);
    if (g->index_head_dim < g->qk_rope_head_dim)
        FAIL("index_head_dim = %lld is smaller than qk_rope_head_dim = %lld (indexer heads carry RoPE too)",
             (long long)g->index_head_dim, (long long)g->qk_rope_head_dim);
    if (g->num_attention_heads % g->o_groups)
        FAIL("num_attention_heads = %lld is not a multiple of o_groups = %lld", (long long)g->num_attention_heads,
             (long long)g->o_groups);
    if (g->num_experts_per_tok > g->n_routed_experts)
        FAIL("num_experts_per_tok = %lld exceeds n_routed_experts = %lld", (long long)g->num_experts_per_tok,
             (long long)g->n_routed_experts);
    if (g->expert_fp4 && (g->hidden_size % 32 || g->moe_intermediate_size % 32))
        FAIL("FP4 experts need hidden_size (%lld) and moe_intermediate_size (%lld) to be multiples of 32",
             (long long)g->hidden_size, (long long)g->moe_intermediate_size);
    if (g->num_hash_layers > g->num_hidden_layers)
        FAIL("num_hash_layers = %lld exceeds num_hidden_layers = %lld", (long long)g->num_hash_layers,
             (long long)g->num_hidden_layers);
    const struct {
        const char *key;
        int64_t v;
    } toks[] = {{"bos_token_id", g->bos_token_id},
                {"eos_token_id", g->eos_token_id},
                {"pad_token_id", g->pad_token_id},
                {"image_token_id", g->image_token_id},
                {"dspark_noise_token_id", g->dspark_noise_token_id}};
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++)
        if (toks[i].v >= g->vocab_size)
            FAIL("%s = %lld is not below vocab_size = %lld", toks[i].key, (long long)toks[i].v,
                 (long long)g->vocab_size);
    if (g->arch == DI_ARCH_V4) {
        if (!di_config_defaulted(g, "gate_temp") && g->gate_temp != 1.0)
            FAIL("gate_temp = %g: V4 routers have no temperature (gate_temp is a V4.1 key)", g->gate_temp);
        drop_default(g, "gate_temp");
    } else {
        drop_default(g, "num_hash_layers");
    }
    return DEEPINFER_OK;
}

/* ---- layer schedule -------------------------------------------------------------------- */

static void init_layer(di_layer_cfg *L, int ratio) {
    memset(L, 0, sizeof *L);
    L->ratio = ratio;
    L->role = DI_ROLE_SWA;
    L->engram = -1;
    L->kv_layer = L->topk_layer = L->index_key_layer = L->candidate_layer = -1;
    L->rope_compress = ratio > 0;
}

static deepinfer_status derive_v4(di_model_config *g, di_error *err) {
    for (int l = 0; l < g->n_layers; l++) {
        di_layer_cfg *L = &g->layers[l];
        int r = g->compress_ratios[l];
        init_layer(L, r);
        L->hash_routed = l < g->num_hash_layers;
        if (r == 0) continue;
        if (r == 1)
            FAIL("compress_ratios[%d] = 1: V4 layers use 0 (sliding window), 4 (CSA) or a larger ratio (HCA)", l);
        L->has_compressor = L->compressor_gated = 1;
        L->kv_layer = l;
        if (r == 4) {
            L->role = DI_ROLE_CSA;
            L->compressor_overlap = L->has_index_keys = L->has_index_query = 1;
            L->topk_layer = L->index_key_layer = l;
        } else {
            L->role = DI_ROLE_HCA;
        }
    }
    return DEEPINFER_OK;
}

static int in_list(const int *ids, int n, int l) {
    for (int i = 0; i < n; i++)
        if (ids[i] == l) return 1;
    return 0;
}

static deepinfer_status check_unique(const int *ids, int n, const char *key, di_error *err) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (ids[i] == ids[j]) FAIL("%s lists layer %d twice", key, ids[i]);
    return DEEPINFER_OK;
}

/* V4.1 CSA2 roles (architecture.md §5.0): only KV sources own compressors;
 * other layers with a ratio read the latest earlier source of that ratio. */
static deepinfer_status derive_v41(di_model_config *g, di_error *err) {
    deepinfer_status rc;
    if ((rc = check_unique(g->kv_source_layer_ids, g->n_kv_source_layer_ids, "kv_source_layer_ids", err)) ||
        (rc = check_unique(g->index_source_layer_ids, g->n_index_source_layer_ids, "index_source_layer_ids", err)))
        return rc;
    int cand = (int)g->candidate_source_layer_id;
    if (cand >= 0 && !in_list(g->index_source_layer_ids, g->n_index_source_layer_ids, cand))
        FAIL("candidate_source_layer_id = %d is not in index_source_layer_ids (the candidate source scores rows)",
             cand);
    int latest_kv = -1, latest_idx = -1;
    for (int l = 0; l < g->n_layers; l++) {
        di_layer_cfg *L = &g->layers[l];
        int r = g->compress_ratios[l];
        init_layer(L, r);
        int is_kv = in_list(g->kv_source_layer_ids, g->n_kv_source_layer_ids, l);
        int is_idx = in_list(g->index_source_layer_ids, g->n_index_source_layer_ids, l);
        if (r == 0) {
            if (is_kv || is_idx)
                FAIL("layer %d is in %s but compress_ratios[%d] = 0", l,
                     is_kv ? "kv_source_layer_ids" : "index_source_layer_ids", l);
            continue;
        }
        if (is_kv) {
            latest_kv = l;
            L->has_compressor = 1;
            L->compressor_gated = r >= 2;
            L->has_index_keys = 1;
        } else if (latest_kv < 0) {
            FAIL("compress_ratios[%d] = %d but no layer of kv_source_layer_ids comes at or before layer %d", l, r, l);
        } else if (g->compress_ratios[latest_kv] != r) {
            FAIL("compress_ratios[%d] = %d but the KV source it reads (layer %d, the latest in kv_source_layer_ids) "
                 "has ratio %d",
                 l, r, latest_kv, g->compress_ratios[latest_kv]);
        }
        L->kv_layer = latest_kv;
        if (is_idx) {
            latest_idx = l;
            L->has_index_query = 1;
            L->topk_layer = l;
            L->index_key_layer = latest_kv;
            L->is_candidate_source = l == cand;
            if (cand >= 0 && cand < l) {
                if (g->layers[cand].index_key_layer != latest_kv)
                    FAIL("index source layer %d scores the keys of layer %d but candidate_source_layer_id = %d "
                         "selects blocks of layer %d's rows",
                         l, latest_kv, cand, g->layers[cand].index_key_layer);
                L->candidate_layer = cand;
            }
        } else {
            if (latest_idx < 0)
                FAIL("compress_ratios[%d] = %d but no layer of index_source_layer_ids comes at or before layer %d",
                     l, r, l);
            if (g->layers[latest_idx].index_key_layer != latest_kv)
                FAIL("layer %d reads the compressed KV of layer %d but the top-k of layer %d, which selects rows of "
                     "layer %d; put an index source after layer %d",
                     l, latest_kv, latest_idx, g->layers[latest_idx].index_key_layer, latest_kv);
            L->topk_layer = latest_idx;
        }
        L->role = is_kv && is_idx ? DI_ROLE_FULL : is_kv ? DI_ROLE_KV_SOURCE : is_idx ? DI_ROLE_REINDEX : DI_ROLE_REUSE;
    }
    return DEEPINFER_OK;
}

/* Drafter stages: the entries of compress_ratios past num_hidden_layers. */
static deepinfer_status derive_stages(di_model_config *g, di_error *err) {
    g->n_stages = g->n_compress_ratios - g->n_layers;
    if (g->n_stages < 0)
        FAIL("compress_ratios has %d entries but num_hidden_layers = %d; it needs one per layer plus one per "
             "drafter stage",
             g->n_compress_ratios, g->n_layers);
    for (int s = 0; s < g->n_stages; s++) {
        int l = g->n_layers + s;
        if (g->compress_ratios[l] != 0)
            FAIL("compress_ratios[%d] = %d: entries past num_hidden_layers belong to drafter stages and must be 0",
                 l, g->compress_ratios[l]);
        init_layer(&g->layers[l], 0);
    }
    int dspark = g->dspark_block_size > 0;
    int nextn_given = !di_config_defaulted(g, "num_nextn_predict_layers");
    if (g->n_stages == 0) {
        if (nextn_given && g->num_nextn_predict_layers > 0)
            FAIL("num_nextn_predict_layers = %lld but compress_ratios has no entry past num_hidden_layers = %d "
                 "(one per drafter stage)",
                 (long long)g->num_nextn_predict_layers, g->n_layers);
        g->drafter = DI_DRAFTER_NONE;
        g->num_nextn_predict_layers = 0;
        return DEEPINFER_OK;
    }
    if (g->arch == DI_ARCH_V41 && !dspark)
        FAIL("compress_ratios has %d drafter entries but dspark_block_size is missing (V4.1 drafters are DSpark)",
             g->n_stages);
    if (dspark) {
        g->drafter = DI_DRAFTER_DSPARK;
        if (g->n_dspark_target_layer_ids < 1) FAIL("dspark_target_layer_ids must list at least one layer");
        g->stage_n_routed_experts = g->dspark_n_routed_experts;
        g->stage_num_experts_per_tok = g->dspark_num_experts_per_tok;
        if (g->dspark_noise_token_id < 0) FAIL("dspark_noise_token_id is required with dspark_block_size");
        if (g->arch == DI_ARCH_V4 && nextn_given && g->num_nextn_predict_layers != g->n_stages) {
            char t[160];
            snprintf(t, sizeof t,
                     "num_nextn_predict_layers = %lld but compress_ratios gives %d DSpark stages (as in "
                     "V4-Flash-0731); using %d",
                     (long long)g->num_nextn_predict_layers, g->n_stages, g->n_stages);
            add_note(g, t);
        } else if (nextn_given && g->num_nextn_predict_layers != g->n_stages) {
            FAIL("num_nextn_predict_layers = %lld but compress_ratios has %d entries past num_hidden_layers = %d",
                 (long long)g->num_nextn_predict_layers, g->n_stages, g->n_layers);
        }
    } else {
        g->drafter = DI_DRAFTER_MTP;
        g->stage_n_routed_experts = g->n_routed_experts;
        g->stage_num_experts_per_tok = g->num_experts_per_tok;
        if (nextn_given && g->num_nextn_predict_layers != g->n_stages)
            FAIL("num_nextn_predict_layers = %lld but compress_ratios has %d entries past num_hidden_layers = %d",
                 (long long)g->num_nextn_predict_layers, g->n_stages, g->n_layers);
    }
    if (g->stage_num_experts_per_tok > g->stage_n_routed_experts)
        FAIL("dspark_num_experts_per_tok = %lld exceeds dspark_n_routed_experts = %lld",
             (long long)g->stage_num_experts_per_tok, (long long)g->stage_n_routed_experts);
    g->num_nextn_predict_layers = g->n_stages;
    return DEEPINFER_OK;
}

deepinfer_status di_config_derive(di_model_config *g, const char *label, di_error *err) {
    g->n_layers = (int)g->num_hidden_layers;
    deepinfer_status rc = DEEPINFER_OK;
    if (g->n_compress_ratios < g->n_layers)
        rc = di_error_set(err, DEEPINFER_ERR_FORMAT,
                          "compress_ratios has %d entries but num_hidden_layers = %d; it needs one per layer plus one "
                          "per drafter stage",
                          g->n_compress_ratios, g->n_layers);
    if (rc == DEEPINFER_OK) rc = check_dims(g, err);
    if (rc == DEEPINFER_OK) rc = g->arch == DI_ARCH_V41 ? derive_v41(g, err) : derive_v4(g, err);
    if (rc == DEEPINFER_OK) rc = derive_stages(g, err);
    if (rc == DEEPINFER_OK) rc = derive_engram(g, err);
    if (rc == DEEPINFER_OK && g->drafter != DI_DRAFTER_DSPARK)
        for (int i = g->n_defaulted - 1; i >= 0; i--)
            if (!strncmp(g->defaulted[i], "dspark_", 7)) drop_default(g, g->defaulted[i]);
    if (rc != DEEPINFER_OK) di_error_prefix(err, "%s", label);
    return rc;
}
