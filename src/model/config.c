/*
 * config.c — read config.json keys into di_model_config (see config.h).
 *
 * This file only reads and type-checks keys; config_derive.c checks their
 * consistency and derives the layer schedule.
 */
#include "model/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "util/file.h"

typedef struct cctx {
    const char *text;
    size_t len;
    const char *label;
    const di_json *root;
    const di_json *model; /* text_config, or the root for flat configs */
    const di_json *quant; /* quantization_config or NULL */
    di_model_config *cfg;
    di_error *err;
    char keybuf[128];
} cctx;

/* The key as the user sees it: "text_config.hidden_size" in nested configs. */
static const char *mkey(cctx *c, const char *k) {
    if (c->model == c->root) return k;
    snprintf(c->keybuf, sizeof c->keybuf, "text_config.%s", k);
    return c->keybuf;
}

#define TRY(x)                                                                                      \
    do {                                                                                            \
        if ((x) != 0) return -1;                                                                    \
    } while (0)

static void note_default(cctx *c, const char *key) {
    if (c->cfg->n_defaulted < DI_CFG_MAX_DEFAULTED) c->cfg->defaulted[c->cfg->n_defaulted++] = key;
}

int di_config_defaulted(const di_model_config *cfg, const char *key) {
    for (int i = 0; i < cfg->n_defaulted; i++)
        if (!strcmp(cfg->defaulted[i], key)) return 1;
    return 0;
}

static int fail_at(cctx *c, const di_json *v, const char *key, const char *fmt, const char *detail) {
    int line = 0, col = 0;
    if (v) di_json_line_col(c->text, c->len, v->offset, &line, &col);
    char what[256];
    snprintf(what, sizeof what, fmt, detail ? detail : "");
    if (v)
        di_error_set(c->err, DEEPINFER_ERR_FORMAT, "%s: '%s' (line %d, column %d): %s", c->label, key, line, col,
                     what);
    else
        di_error_set(c->err, DEEPINFER_ERR_FORMAT, "%s: '%s': %s", c->label, key, what);
    return -1;
}

static int json_equal(const di_json *a, const di_json *b) {
    if (a->type != b->type) {
        return 0;
    }
    switch (a->type) {
    case DI_JSON_NUMBER: return a->num == b->num;
    case DI_JSON_STRING: return a->str_len == b->str_len && !memcmp(a->str, b->str, a->str_len);
    case DI_JSON_ARRAY:
        if (a->count != b->count) return 0;
        for (uint32_t i = 0; i < a->count; i++)
            if (!json_equal(&a->items[i], &b->items[i])) return 0;
        return 1;
    case DI_JSON_OBJECT: return 0; /* never compared */
    default: return 1;
    }
}

/* Find `hf` (or its reference synonym `ref`) in `sec`, then in `fallback`.
 * Both spellings with different values is an error. JSON null counts as
 * absent. *name receives the spelling found. */
static int find2(cctx *c, const di_json *sec, const di_json *fallback, const char *hf, const char *ref,
                 const di_json **out, const char **name) {
    *out = NULL;
    const di_json *secs[2] = {sec, fallback};
    for (int s = 0; s < 2 && !*out; s++) {
        if (!secs[s] || (s == 1 && secs[1] == secs[0])) continue;
        const di_json *a = di_json_get(secs[s], hf);
        const di_json *b = ref ? di_json_get(secs[s], ref) : NULL;
        if (a && a->type == DI_JSON_NULL) a = NULL;
        if (b && b->type == DI_JSON_NULL) b = NULL;
        if (a && b && !json_equal(a, b)) {
            char d[160];
            snprintf(d, sizeof d, "conflicts with its reference spelling '%s'; keep one", ref);
            return fail_at(c, a, hf, "%s", d);
        }
        *out = a ? a : b;
        if (name) *name = a ? hf : ref;
    }
    if (!*out && name) *name = hf;
    return 0;
}

static int find_model(cctx *c, const char *hf, const char *ref, const di_json **out, const char **name) {
    return find2(c, c->model, NULL, hf, ref, out, name);
}

/* Integer key in the model section. */
static int get_int(cctx *c, const char *hf, const char *ref, int required, int64_t def, int64_t lo, int64_t hi,
                   int64_t *out) {
    const di_json *v;
    const char *nm;
    TRY(find_model(c, hf, ref, &v, &nm));
    if (!v) {
        if (required) return fail_at(c, NULL, mkey(c, hf), "required key is missing%s", "");
        *out = def;
        note_default(c, hf);
        return 0;
    }
    int64_t x;
    if (!di_json_as_i64(v, &x)) return fail_at(c, v, mkey(c, nm), "expected an integer, found a JSON %s", di_json_type_name(v->type));
    if (x < lo || x > hi) {
        char d[128];
        snprintf(d, sizeof d, "%lld is out of range [%lld, %lld]", (long long)x, (long long)lo, (long long)hi);
        return fail_at(c, v, mkey(c, nm), "%s", d);
    }
    *out = x;
    return 0;
}

static int num_of(cctx *c, const di_json *v, const char *nm, double lo, double hi, double *out) {
    double x;
    if (!di_json_as_f64(v, &x)) return fail_at(c, v, nm, "expected a number, found a JSON %s", di_json_type_name(v->type));
    if (!(x >= lo && x <= hi)) {
        char d[128];
        snprintf(d, sizeof d, "%g is out of range [%g, %g]", x, lo, hi);
        return fail_at(c, v, nm, "%s", d);
    }
    *out = x;
    return 0;
}

static int get_num(cctx *c, const char *hf, const char *ref, int required, double def, double lo, double hi,
                   double *out) {
    const di_json *v;
    const char *nm;
    TRY(find_model(c, hf, ref, &v, &nm));
    if (!v) {
        if (required) return fail_at(c, NULL, mkey(c, hf), "required key is missing%s", "");
        *out = def;
        note_default(c, hf);
        return 0;
    }
    return num_of(c, v, mkey(c, nm), lo, hi, out);
}

static int get_bool(cctx *c, const char *hf, int def, int *out) {
    const di_json *v;
    const char *nm;
    TRY(find2(c, c->model, c->root, hf, NULL, &v, &nm));
    if (!v) {
        *out = def;
        note_default(c, hf);
        return 0;
    }
    if (!di_json_as_bool(v, out)) return fail_at(c, v, nm, "expected true or false, found a JSON %s", di_json_type_name(v->type));
    return 0;
}

static int str_of(cctx *c, const di_json *v, const char *nm, char *out, size_t n) {
    if (!di_json_is_string(v)) return fail_at(c, v, nm, "expected a string, found a JSON %s", di_json_type_name(v->type));
    if (v->str_len >= n || strlen(v->str) != v->str_len) return fail_at(c, v, nm, "string is too long or has NUL bytes%s", "");
    memcpy(out, v->str, v->str_len + 1);
    return 0;
}

static int get_str(cctx *c, const char *hf, const char *ref, const char *def, char *out, size_t n) {
    const di_json *v;
    const char *nm;
    TRY(find_model(c, hf, ref, &v, &nm));
    if (!v) {
        snprintf(out, n, "%s", def);
        note_default(c, hf);
        return 0;
    }
    return str_of(c, v, mkey(c, nm), out, n);
}

/* Integer list; `required` 0 means absent → empty list. */
static int get_list(cctx *c, const char *hf, const char *ref, int required, int64_t lo, int64_t hi, int maxn,
                    int *count, int *ivals, int64_t *lvals) {
    const di_json *v;
    const char *nm;
    *count = 0;
    TRY(find_model(c, hf, ref, &v, &nm));
    if (!v) {
        if (required) return fail_at(c, NULL, mkey(c, hf), "required key is missing%s", "");
        return 0;
    }
    if (v->type != DI_JSON_ARRAY) return fail_at(c, v, mkey(c, nm), "expected an array of integers, found a JSON %s", di_json_type_name(v->type));
    if (v->count > (uint32_t)maxn) {
        char d[96];
        snprintf(d, sizeof d, "%u entries, at most %d supported", v->count, maxn);
        return fail_at(c, v, mkey(c, nm), "%s", d);
    }
    for (uint32_t i = 0; i < v->count; i++) {
        int64_t x;
        if (!di_json_as_i64(&v->items[i], &x) || x < lo || x > hi) {
            char d[128];
            snprintf(d, sizeof d, "entry %u must be an integer in [%lld, %lld]", i, (long long)lo, (long long)hi);
            return fail_at(c, &v->items[i], mkey(c, nm), "%s", d);
        }
        if (ivals) ivals[i] = (int)x;
        if (lvals) lvals[i] = x;
    }
    *count = (int)v->count;
    return 0;
}

/* Token id: model section, then the top level; absent → -1. */
static int get_token(cctx *c, const char *hf, int64_t def, int64_t *out) {
    const di_json *v;
    const char *nm;
    TRY(find2(c, c->model, c->root, hf, NULL, &v, &nm));
    if (!v || (v->type == DI_JSON_NULL && def < 0)) { /* optional ids may be absent or null */
        *out = def;
        if (def >= 0) note_default(c, hf);
        return 0;
    }
    if (!di_json_as_i64(v, out) || *out < 0 || *out > INT32_MAX)
        return fail_at(c, v, nm, "expected a non-negative integer token id%s", "");
    return 0;
}

/* ---- model type ------------------------------------------------------------------------- */

static const char *const SUPPORTED =
    "deepseek_v4 (DeepseekV4ForCausalLM), deepseek_v41 or deepseek_v41_text (DeepseekV41ForCausalLM)";

static int read_type(cctx *c) {
    di_model_config *cfg = c->cfg;
    const di_json *mt = di_json_get(c->root, "model_type");
    const di_json *ar = di_json_get(c->root, "architectures");
    if (ar && ar->type != DI_JSON_NULL) {
        if (ar->type != DI_JSON_ARRAY || ar->count == 0)
            return fail_at(c, ar, "architectures", "expected a non-empty array of strings%s", "");
        TRY(str_of(c, &ar->items[0], "architectures", cfg->architecture, sizeof cfg->architecture));
    }
    if (mt && mt->type != DI_JSON_NULL) {
        TRY(str_of(c, mt, "model_type", cfg->model_type, sizeof cfg->model_type));
        if (!strcmp(cfg->model_type, "deepseek_v4")) cfg->arch = DI_ARCH_V4;
        else if (!strcmp(cfg->model_type, "deepseek_v41") || !strcmp(cfg->model_type, "deepseek_v41_text"))
            cfg->arch = DI_ARCH_V41;
        else {
            di_error_set(c->err, DEEPINFER_ERR_UNSUPPORTED, "%s: model_type '%s' is not supported (supported: %s)",
                         c->label, cfg->model_type, SUPPORTED);
            return -1;
        }
    } else if (cfg->architecture[0]) {
        if (!strcmp(cfg->architecture, "DeepseekV4ForCausalLM")) cfg->arch = DI_ARCH_V4;
        else if (!strncmp(cfg->architecture, "DeepseekV41For", 14)) cfg->arch = DI_ARCH_V41;
        else {
            di_error_set(c->err, DEEPINFER_ERR_UNSUPPORTED,
                         "%s: architecture '%s' is not supported and there is no model_type (supported: %s)",
                         c->label, cfg->architecture, SUPPORTED);
            return -1;
        }
        snprintf(cfg->model_type, sizeof cfg->model_type, "%s", di_arch_name(cfg->arch));
        snprintf(cfg->note, sizeof cfg->note, "model type taken from architectures[0]");
    } else {
        /* The reference inference/config.json has neither key. */
        const di_json *sec = di_json_get(c->root, "text_config");
        if (!sec) sec = c->root;
        int refstyle = di_json_get(sec, "dim") || di_json_get(sec, "n_layers") || di_json_get(sec, "hidden_size");
        if (!refstyle) {
            di_error_set(c->err, DEEPINFER_ERR_UNSUPPORTED,
                         "%s: no model_type or architectures, and no model keys; is this a DeepSeek V4 config? "
                         "(supported: %s)",
                         c->label, SUPPORTED);
            return -1;
        }
        int v41 = di_json_get(sec, "kv_source_layer_ids") || di_json_get(sec, "kv_source_layers");
        cfg->arch = v41 ? DI_ARCH_V41 : DI_ARCH_V4;
        snprintf(cfg->model_type, sizeof cfg->model_type, "%s", di_arch_name(cfg->arch));
        snprintf(cfg->note, sizeof cfg->note, "no model_type: recognised as %s by its keys (%s)",
                 di_arch_name(cfg->arch), v41 ? "kv source layers present" : "no kv source layers");
    }
    return 0;
}

/* ---- key groups ------------------------------------------------------------------------- */

#define I64MAX INT64_MAX
#define DIM_MAX ((int64_t)1 << 24)

static int read_dims(cctx *c) {
    di_model_config *g = c->cfg;
    TRY(get_int(c, "vocab_size", NULL, 1, 0, 1, INT32_MAX, &g->vocab_size));
    TRY(get_int(c, "hidden_size", "dim", 1, 0, 1, DIM_MAX, &g->hidden_size));
    TRY(get_int(c, "num_hidden_layers", "n_layers", 1, 0, 1, DI_CFG_MAX_LAYERS, &g->num_hidden_layers));
    TRY(get_int(c, "num_attention_heads", "n_heads", 1, 0, 1, 4096, &g->num_attention_heads));
    TRY(get_int(c, "num_key_value_heads", NULL, 0, 1, 1, 4096, &g->num_key_value_heads));
    TRY(get_int(c, "head_dim", NULL, 1, 0, 1, 65536, &g->head_dim));
    TRY(get_int(c, "qk_rope_head_dim", "rope_head_dim", 1, 0, 0, 65536, &g->qk_rope_head_dim));
    TRY(get_int(c, "q_lora_rank", NULL, 1, 0, 1, DIM_MAX, &g->q_lora_rank));
    TRY(get_int(c, "o_lora_rank", NULL, 1, 0, 1, DIM_MAX, &g->o_lora_rank));
    TRY(get_int(c, "o_groups", NULL, 1, 0, 1, 4096, &g->o_groups));
    TRY(get_int(c, "n_routed_experts", NULL, 1, 0, 1, 65536, &g->n_routed_experts));
    TRY(get_int(c, "n_shared_experts", NULL, 1, 0, 0, 64, &g->n_shared_experts));
    TRY(get_int(c, "num_experts_per_tok", "n_activated_experts", 1, 0, 1, 65536, &g->num_experts_per_tok));
    TRY(get_int(c, "moe_intermediate_size", "moe_inter_dim", 1, 0, 1, DIM_MAX, &g->moe_intermediate_size));
    TRY(get_int(c, "sliding_window", "window_size", 1, 0, 1, (int64_t)1 << 20, &g->sliding_window));
    TRY(get_int(c, "max_position_embeddings", NULL, 0, 1048576, 1, (int64_t)1 << 40, &g->max_position_embeddings));
    TRY(get_int(c, "index_n_heads", NULL, 1, 0, 1, 4096, &g->index_n_heads));
    TRY(get_int(c, "index_head_dim", NULL, 1, 0, 1, 65536, &g->index_head_dim));
    TRY(get_int(c, "index_topk", NULL, 1, 0, 1, (int64_t)1 << 30, &g->index_topk));
    TRY(get_int(c, "hc_mult", NULL, 1, 0, 1, 64, &g->hc_mult));
    TRY(get_int(c, "hc_sinkhorn_iters", NULL, 1, 0, 1, 1000, &g->hc_sinkhorn_iters));
    int64_t nh_def = 0;
    int v4 = g->arch == DI_ARCH_V4;
    TRY(get_int(c, "num_hash_layers", "n_hash_layers", v4, nh_def, 0, DI_CFG_MAX_LAYERS, &g->num_hash_layers));
    if (!v4 && g->num_hash_layers != 0)
        return fail_at(c, NULL, "num_hash_layers", "V4.1 has no hash-routed layers; expected 0 or absent%s", "");
    TRY(get_int(c, "num_nextn_predict_layers", "n_mtp_layers", 0, 1, 0, 64, &g->num_nextn_predict_layers));
    return 0;
}

static int read_routing(cctx *c) {
    di_model_config *g = c->cfg;
    TRY(get_str(c, "scoring_func", "score_func", "sqrtsoftplus", g->scoring_func, sizeof g->scoring_func));
    if (strcmp(g->scoring_func, "sqrtsoftplus") != 0)
        return fail_at(c, NULL, "scoring_func", "'%s' is not supported (supported: sqrtsoftplus)", g->scoring_func);
    TRY(get_str(c, "topk_method", NULL, "noaux_tc", g->topk_method, sizeof g->topk_method));
    if (strcmp(g->topk_method, "noaux_tc") != 0)
        return fail_at(c, NULL, "topk_method", "'%s' is not supported (supported: noaux_tc)", g->topk_method);
    TRY(get_bool(c, "norm_topk_prob", 1, &g->norm_topk_prob));
    TRY(get_num(c, "routed_scaling_factor", "route_scale", 1, 0, 0, 1e6, &g->routed_scaling_factor));
    TRY(get_num(c, "gate_temp", NULL, 0, 1.0, 1e-30, 1e30, &g->gate_temp));
    TRY(get_num(c, "swiglu_limit", NULL, 1, 0, 0, 1e30, &g->swiglu_limit));
    return 0;
}

static int read_norms_rope(cctx *c) {
    di_model_config *g = c->cfg;
    double eps_def = g->arch == DI_ARCH_V41 ? 1e-20 : 1e-6;
    TRY(get_num(c, "rms_norm_eps", "norm_eps", 0, eps_def, 0, 1, &g->rms_norm_eps));
    TRY(get_num(c, "hc_eps", NULL, 0, 1e-6, 0, 1, &g->hc_eps));
    TRY(get_num(c, "rope_theta", NULL, 1, 0, 1e-30, 1e30, &g->rope_theta));
    TRY(get_num(c, "compress_rope_theta", NULL, 1, 0, 1e-30, 1e30, &g->compress_rope_theta));

    /* rope_scaling {type|rope_type, factor, beta_fast, beta_slow, original_max_position_embeddings},
     * or the reference's top-level rope_factor / beta_fast / beta_slow / original_seq_len. */
    const di_json *rs;
    TRY(find_model(c, "rope_scaling", NULL, &rs, NULL));
    if (rs && rs->type != DI_JSON_OBJECT)
        return fail_at(c, rs, "rope_scaling", "expected an object, found a JSON %s", di_json_type_name(rs->type));
    const di_json *ty = NULL, *fa = NULL, *bf = NULL, *bs = NULL, *om = NULL;
    const char *tyn = "rope_scaling.type";
    if (rs) {
        const di_json *t1 = di_json_get(rs, "type"), *t2 = di_json_get(rs, "rope_type");
        if (t1 && t2 && !json_equal(t1, t2))
            return fail_at(c, t2, "rope_scaling.rope_type", "conflicts with rope_scaling.type%s", "");
        ty = t1 ? t1 : t2;
        if (t2 && !t1) tyn = "rope_scaling.rope_type";
        fa = di_json_get(rs, "factor");
        bf = di_json_get(rs, "beta_fast");
        bs = di_json_get(rs, "beta_slow");
        om = di_json_get(rs, "original_max_position_embeddings");
    }
    /* Reference spellings at the top of the model section. */
    struct {
        const di_json **slot;
        const char *hf, *ref;
    } alt[] = {{&fa, "rope_scaling.factor", "rope_factor"},
               {&bf, "rope_scaling.beta_fast", "beta_fast"},
               {&bs, "rope_scaling.beta_slow", "beta_slow"},
               {&om, "rope_scaling.original_max_position_embeddings", "original_seq_len"}};
    for (size_t i = 0; i < sizeof alt / sizeof alt[0]; i++) {
        const di_json *r = di_json_get(c->model, alt[i].ref);
        if (r && r->type == DI_JSON_NULL) r = NULL;
        if (r && *alt[i].slot && !json_equal(r, *alt[i].slot)) {
            char d[160];
            snprintf(d, sizeof d, "conflicts with its reference spelling '%s'; keep one", alt[i].ref);
            return fail_at(c, *alt[i].slot, alt[i].hf, "%s", d);
        }
        if (!*alt[i].slot) *alt[i].slot = r;
    }
    if (ty) {
        TRY(str_of(c, ty, tyn, g->rope_scaling.type, sizeof g->rope_scaling.type));
        if (strcmp(g->rope_scaling.type, "yarn") != 0)
            return fail_at(c, ty, tyn, "'%s' is not supported (DeepSeek V4 compressed layers use yarn)",
                           g->rope_scaling.type);
    } else {
        snprintf(g->rope_scaling.type, sizeof g->rope_scaling.type, "yarn");
        note_default(c, "rope_scaling.type");
    }
    if (!fa) return fail_at(c, rs, "rope_scaling.factor", "required (or the reference key 'rope_factor')%s", "");
    TRY(num_of(c, fa, "rope_scaling.factor", 1, 1e9, &g->rope_scaling.factor));
    if (bf) TRY(num_of(c, bf, "rope_scaling.beta_fast", 0, 1e9, &g->rope_scaling.beta_fast));
    else {
        g->rope_scaling.beta_fast = 32;
        note_default(c, "rope_scaling.beta_fast");
    }
    if (bs) TRY(num_of(c, bs, "rope_scaling.beta_slow", 0, 1e9, &g->rope_scaling.beta_slow));
    else {
        g->rope_scaling.beta_slow = 1;
        note_default(c, "rope_scaling.beta_slow");
    }
    if (!om)
        return fail_at(c, rs, "rope_scaling.original_max_position_embeddings",
                       "required (or the reference key 'original_seq_len')%s", "");
    int64_t x;
    if (!di_json_as_i64(om, &x) || x < 1 || x > ((int64_t)1 << 40))
        return fail_at(c, om, "rope_scaling.original_max_position_embeddings", "expected a positive integer%s", "");
    g->rope_scaling.original_max_position_embeddings = x;
    return 0;
}

static int read_v41(cctx *c) {
    di_model_config *g = c->cfg;
    int64_t nl = g->num_hidden_layers;
    g->candidate_source_layer_id = -1;
    if (g->arch != DI_ARCH_V41) {
        static const char *const v41_only[][2] = {{"kv_source_layer_ids", "kv_source_layers"},
                                                  {"index_source_layer_ids", "index_source_layers"},
                                                  {"candidate_source_layer_id", "candidate_source_layer"},
                                                  {"engram_layer_ids", NULL}};
        for (size_t i = 0; i < sizeof v41_only / sizeof v41_only[0]; i++) {
            const di_json *v;
            TRY(find_model(c, v41_only[i][0], v41_only[i][1], &v, NULL));
            if (v) return fail_at(c, v, v41_only[i][0], "is a V4.1 key but model_type is %s", g->model_type);
        }
        return 0;
    }
    TRY(get_list(c, "kv_source_layer_ids", "kv_source_layers", 1, 0, nl - 1, DI_CFG_MAX_LIST,
                 &g->n_kv_source_layer_ids, g->kv_source_layer_ids, NULL));
    TRY(get_list(c, "index_source_layer_ids", "index_source_layers", 1, 0, nl - 1, DI_CFG_MAX_LIST,
                 &g->n_index_source_layer_ids, g->index_source_layer_ids, NULL));
    TRY(get_int(c, "candidate_source_layer_id", "candidate_source_layer", 0, -1, -1, nl - 1,
                &g->candidate_source_layer_id));
    int has_cand = g->candidate_source_layer_id >= 0;
    TRY(get_int(c, "candidate_topk_blocks", NULL, has_cand, 0, 0, (int64_t)1 << 30, &g->candidate_topk_blocks));
    TRY(get_int(c, "candidate_block_size", NULL, has_cand, 0, 0, (int64_t)1 << 20, &g->candidate_block_size));
    if (has_cand && (g->candidate_topk_blocks < 1 || g->candidate_block_size < 1))
        return fail_at(c, NULL, "candidate_topk_blocks", "candidate_topk_blocks and candidate_block_size must be ≥ 1%s", "");

    TRY(get_list(c, "engram_layer_ids", NULL, 0, 0, nl - 1, DI_CFG_MAX_ENGRAM, &g->n_engram_layer_ids,
                 g->engram_layer_ids, NULL));
    int ne = g->n_engram_layer_ids, req = ne > 0;
    int nn = 0;
    TRY(get_list(c, "engram_num_embeddings", NULL, req, 1, (int64_t)1 << 40, DI_CFG_MAX_ENGRAM, &nn, NULL,
                 g->engram_num_embeddings));
    if (nn != ne) {
        char d[96];
        snprintf(d, sizeof d, "has %d entries but engram_layer_ids has %d", nn, ne);
        return fail_at(c, NULL, "engram_num_embeddings", "%s", d);
    }
    TRY(get_int(c, "engram_max_ngram_size", NULL, req, 0, req ? 2 : 0, 64, &g->engram_max_ngram_size));
    TRY(get_int(c, "engram_vocab_size", NULL, req, 0, req ? 1 : 0, (int64_t)1 << 40, &g->engram_vocab_size));
    TRY(get_int(c, "engram_n_heads", NULL, req, 0, req ? 1 : 0, 64, &g->engram_n_heads));
    TRY(get_int(c, "engram_head_dim", NULL, req, 0, req ? 1 : 0, 65536, &g->engram_head_dim));
    TRY(get_int(c, "engram_pad_token_id", "engram_pad_id", req, 0, 0, INT32_MAX, &g->engram_pad_token_id));
    TRY(get_int(c, "engram_compressed_vocab_size", NULL, req, 0, req ? 1 : 0, INT32_MAX,
                &g->engram_compressed_vocab_size));
    return 0;
}

static int read_dspark(cctx *c) {
    di_model_config *g = c->cfg;
    const di_json *probe;
    TRY(find_model(c, "dspark_block_size", NULL, &probe, NULL));
    int has = probe != NULL;
    TRY(get_int(c, "dspark_block_size", NULL, 0, 0, has, 1024, &g->dspark_block_size));
    TRY(get_int(c, "dspark_noise_token_id", NULL, has, -1, -1, INT32_MAX, &g->dspark_noise_token_id));
    TRY(get_int(c, "dspark_markov_rank", NULL, has, 0, has, DIM_MAX, &g->dspark_markov_rank));
    TRY(get_list(c, "dspark_target_layer_ids", NULL, has, 0, g->num_hidden_layers - 1, DI_CFG_MAX_LIST,
                 &g->n_dspark_target_layer_ids, g->dspark_target_layer_ids, NULL));
    TRY(get_int(c, "dspark_n_routed_experts", NULL, 0, g->n_routed_experts, 1, 65536, &g->dspark_n_routed_experts));
    TRY(get_int(c, "dspark_num_experts_per_tok", "dspark_n_activated_experts", 0, g->num_experts_per_tok, 1, 65536,
                &g->dspark_num_experts_per_tok));
    return 0;
}

static int read_tokens_misc(cctx *c) {
    di_model_config *g = c->cfg;
    TRY(get_token(c, "bos_token_id", 0, &g->bos_token_id));
    TRY(get_token(c, "eos_token_id", 1, &g->eos_token_id));
    TRY(get_token(c, "pad_token_id", -1, &g->pad_token_id));
    TRY(get_token(c, "image_token_id", -1, &g->image_token_id));
    TRY(get_bool(c, "tie_word_embeddings", 0, &g->tie_word_embeddings));
    if (g->tie_word_embeddings)
        return fail_at(c, NULL, "tie_word_embeddings", "must be false: DeepSeek V4 has separate embed and head%s", "");
    /* torch dtype: HF "torch_dtype" or "dtype" (but the reference's dtype "fp8" means quantisation). */
    const di_json *v;
    const char *nm;
    TRY(find2(c, c->model, c->root, "torch_dtype", NULL, &v, &nm));
    if (!v) {
        TRY(find2(c, c->model, c->root, "dtype", NULL, &v, &nm));
        if (v && di_json_is_string(v) && !strcmp(v->str, "fp8")) v = NULL;
    }
    if (v) TRY(str_of(c, v, nm, g->torch_dtype, sizeof g->torch_dtype));
    else {
        snprintf(g->torch_dtype, sizeof g->torch_dtype, "bfloat16");
        note_default(c, "torch_dtype");
    }
    const di_json *vis = di_json_get(c->root, "vision_config");
    g->has_vision_config = vis && vis->type == DI_JSON_OBJECT;
    return 0;
}

/* quantization_config, or the reference's top-level dtype "fp8" + scale_fmt + expert_dtype. */
static int read_quant(cctx *c) {
    di_model_config *g = c->cfg;
    const di_json *q = c->quant;
    const di_json *v;
    if (q && q->type != DI_JSON_OBJECT)
        return fail_at(c, q, "quantization_config", "expected an object, found a JSON %s", di_json_type_name(q->type));
    if (q) {
        v = di_json_get(q, "quant_method");
        if (!v) return fail_at(c, q, "quantization_config.quant_method", "required key is missing%s", "");
        TRY(str_of(c, v, "quantization_config.quant_method", g->quant_method, sizeof g->quant_method));
    } else {
        TRY(find2(c, c->model, c->root, "dtype", NULL, &v, NULL));
        if (!v || !di_json_is_string(v) || strcmp(v->str, "fp8") != 0) {
            di_error_set(c->err, DEEPINFER_ERR_UNSUPPORTED,
                         "%s: no quantization_config: deepinfer reads the released FP8/FP4 checkpoints "
                         "(quantization_config.quant_method \"fp8\")",
                         c->label);
            return -1;
        }
        snprintf(g->quant_method, sizeof g->quant_method, "fp8");
    }
    if (strcmp(g->quant_method, "fp8") != 0)
        return fail_at(c, q, "quantization_config.quant_method", "'%s' is not supported (supported: fp8)", g->quant_method);

    struct {
        const char *key;
        char *out;
        size_t n;
        const char *def;
        const char *only; /* the one supported value */
    } s[] = {{"fmt", g->quant_fmt, sizeof g->quant_fmt, "e4m3", "e4m3"},
             {"activation_scheme", g->activation_scheme, sizeof g->activation_scheme, "dynamic", "dynamic"},
             {"scale_fmt", g->scale_fmt, sizeof g->scale_fmt, "ue8m0", "ue8m0"},
             {"expert_dtype", g->expert_dtype, sizeof g->expert_dtype, "fp4", NULL}};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        char qn[64];
        snprintf(qn, sizeof qn, "quantization_config.%s", s[i].key);
        const di_json *a = q ? di_json_get(q, s[i].key) : NULL, *b;
        const char *bn;
        TRY(find2(c, c->root, c->model, s[i].key, NULL, &b, &bn));
        if (a && a->type == DI_JSON_NULL) a = NULL;
        if (a && b && !json_equal(a, b)) return fail_at(c, a, qn, "conflicts with the top-level '%s'", s[i].key);
        if (a) TRY(str_of(c, a, qn, s[i].out, s[i].n));
        else if (b) TRY(str_of(c, b, bn, s[i].out, s[i].n));
        else {
            snprintf(s[i].out, s[i].n, "%s", s[i].def);
            note_default(c, s[i].key);
        }
        if (s[i].only && strcmp(s[i].out, s[i].only) != 0) {
            char d[96];
            snprintf(d, sizeof d, "'%s' is not supported (supported: %s)", s[i].out, s[i].only);
            return fail_at(c, a ? a : b, a ? qn : s[i].key, "%s", d);
        }
    }
    if (strcmp(g->expert_dtype, "fp4") && strcmp(g->expert_dtype, "fp8"))
        return fail_at(c, NULL, "expert_dtype", "'%s' is not supported (supported: fp4, fp8)", g->expert_dtype);
    g->expert_fp4 = !strcmp(g->expert_dtype, "fp4");

    v = q ? di_json_get(q, "weight_block_size") : NULL;
    if (v && v->type != DI_JSON_NULL) {
        int64_t a, b;
        if (v->type != DI_JSON_ARRAY || v->count != 2 || !di_json_as_i64(&v->items[0], &a) ||
            !di_json_as_i64(&v->items[1], &b) || a < 1 || b < 1 || a > 65536 || b > 65536)
            return fail_at(c, v, "quantization_config.weight_block_size", "expected [out, in] positive integers%s", "");
        g->weight_block_size[0] = a;
        g->weight_block_size[1] = b;
    } else {
        int64_t b = g->arch == DI_ARCH_V41 ? 32 : 128;
        g->weight_block_size[0] = g->weight_block_size[1] = b;
        note_default(c, "weight_block_size");
    }
    g->fp8_block_out = (int)g->weight_block_size[0];
    g->fp8_block_in = (int)g->weight_block_size[1];
    g->act_block = g->fp8_block_in;
    return 0;
}

deepinfer_status di_config_parse(const char *text, size_t len, const char *label, di_model_config *cfg,
                                 di_error *err) {
    memset(cfg, 0, sizeof *cfg);
    if (!label) label = "config.json";
    di_json_doc *doc = NULL;
    di_json_options jo = {.max_depth = 32, .max_bytes = (size_t)64 << 20};
    if (di_json_parse(text, len, &jo, &doc, err) != DEEPINFER_OK)
        return di_error_prefix(err, "%s is not valid JSON", label);
    cctx c = {.text = text, .len = len, .label = label, .root = doc->root, .model = doc->root, .cfg = cfg, .err = err};
    deepinfer_status rc = DEEPINFER_ERR_FORMAT;
    if (doc->root->type != DI_JSON_OBJECT) {
        di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: expected a JSON object, found a JSON %s", label,
                     di_json_type_name(doc->root->type));
        goto done;
    }
    if (read_type(&c) != 0) {
        rc = err ? err->code : DEEPINFER_ERR_FORMAT;
        goto done;
    }
    const di_json *tc = di_json_get(doc->root, "text_config");
    if (tc && tc->type != DI_JSON_NULL) {
        if (tc->type != DI_JSON_OBJECT) {
            fail_at(&c, tc, "text_config", "expected an object, found a JSON %s", di_json_type_name(tc->type));
            goto done;
        }
        c.model = tc;
    }
    c.quant = di_json_get(doc->root, "quantization_config");
    if (!c.quant && c.model != doc->root) c.quant = di_json_get(c.model, "quantization_config");
    if (c.quant && c.quant->type == DI_JSON_NULL) c.quant = NULL;

    /* compress_ratios first: its length bounds nothing else, but layers do. */
    if (read_dims(&c) || read_routing(&c) || read_norms_rope(&c)) goto fail;
    if (get_list(&c, "compress_ratios", NULL, 1, 0, 1 << 20, DI_CFG_MAX_LAYERS, &cfg->n_compress_ratios,
                 cfg->compress_ratios, NULL))
        goto fail;
    if (read_v41(&c) || read_dspark(&c) || read_tokens_misc(&c) || read_quant(&c)) goto fail;
    rc = di_config_derive(cfg, label, err);
    goto done;
fail:
    rc = err ? err->code : DEEPINFER_ERR_FORMAT;
    if (rc == DEEPINFER_OK) rc = DEEPINFER_ERR_FORMAT;
done:
    di_json_free(doc);
    return rc;
}

deepinfer_status di_config_load(const char *path, di_model_config *cfg, di_error *err) {
    char p[4096];
    if (di_is_dir(path)) {
        if (di_path_join(p, sizeof p, path, "config.json") != 0)
            return di_error_set(err, DEEPINFER_ERR_LIMIT, "path too long: %s", path);
        path = p;
    }
    char *text = NULL;
    size_t len = 0;
    deepinfer_status rc = di_read_file(path, (size_t)16 << 20, &text, &len, err);
    if (rc != DEEPINFER_OK) return rc;
    rc = di_config_parse(text, len, path, cfg, err);
    free(text);
    return rc;
}

const char *di_arch_name(di_arch a) {
    return a == DI_ARCH_V4 ? "deepseek_v4" : a == DI_ARCH_V41 ? "deepseek_v41" : "?";
}

const char *di_role_name(di_layer_role r) {
    static const char *const n[] = {"swa", "csa", "hca", "full", "kv-source", "reindex", "reuse"};
    return ((unsigned)r < sizeof n / sizeof n[0]) ? n[r] : "?";
}

const char *di_drafter_name(di_drafter d) {
    return d == DI_DRAFTER_MTP ? "mtp" : d == DI_DRAFTER_DSPARK ? "dspark" : "none";
}
