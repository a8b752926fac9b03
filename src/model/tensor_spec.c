/*
 * tensor_spec.c — expected tensor list of a config and the checkpoint check
 * (see tensor_spec.h; shapes from architecture.md §2.5/§2.6, confirmed on the
 * golden checkpoints).
 */
#include "model/tensor_spec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/arena.h"
#include "util/strmap.h"

#define MAX_SPEC_ENTRIES ((size_t)8 << 20)

struct di_weight_spec {
    di_arena arena;
    di_tensor_spec *items;
    size_t count, cap;
    di_strmap map;
};

/* ---- building -------------------------------------------------------------------------- */

typedef struct builder {
    di_weight_spec *s;
    const di_model_config *c;
    char prefix[32]; /* "layers.3." / "mtp.0." / "" */
    int layer, expert;
    int failed;      /* out of memory */
} builder;

static void add(builder *b, unsigned flags, di_tensor_kind kind, di_dtype dt, int alt, const char *suffix, int ndim,
                int64_t d0, int64_t d1) {
    if (b->failed) return;
    di_weight_spec *s = b->s;
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        di_tensor_spec *n = realloc(s->items, cap * sizeof *n);
        if (!n) {
            b->failed = 1;
            return;
        }
        s->items = n;
        s->cap = cap;
    }
    char name[160];
    int w = snprintf(name, sizeof name, "%s%s", b->prefix, suffix);
    char *nm = (w > 0 && (size_t)w < sizeof name) ? di_arena_strndup(&s->arena, name, (size_t)w) : NULL;
    if (!nm) {
        b->failed = 1;
        return;
    }
    di_tensor_spec *e = &s->items[s->count++];
    *e = (di_tensor_spec){.name = nm, .dtype = dt, .alt_dtype = alt, .ndim = ndim, .shape = {d0, d1},
                          .kind = kind, .layer = b->layer, .expert = b->expert, .flags = flags};
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void vec(builder *b, di_dtype dt, const char *name, int64_t n) { add(b, 0, DI_TK_PLAIN, dt, -1, name, 1, n, 0); }
static void mat(builder *b, di_dtype dt, const char *name, int64_t r, int64_t c) {
    add(b, 0, DI_TK_PLAIN, dt, -1, name, 2, r, c);
}

/* RMSNorm weight: NAME.weight BF16 [n]. */
static void norm(builder *b, const char *name, int64_t n) {
    char s[96];
    snprintf(s, sizeof s, "%s.weight", name);
    vec(b, DI_DTYPE_BF16, s, n);
}

static void bf16_linear(builder *b, const char *name, int64_t out, int64_t in) {
    char s[96];
    snprintf(s, sizeof s, "%s.weight", name);
    mat(b, DI_DTYPE_BF16, s, out, in);
}

static void fp8_linear(builder *b, const char *name, int64_t out, int64_t in) {
    char s[96];
    snprintf(s, sizeof s, "%s.weight", name);
    add(b, 0, DI_TK_FP8_WEIGHT, DI_DTYPE_F8_E4M3, -1, s, 2, out, in);
    snprintf(s, sizeof s, "%s.scale", name);
    add(b, 0, DI_TK_FP8_SCALE, DI_DTYPE_F8_E8M0, -1, s, 2, ceil_div(out, b->c->fp8_block_out),
        ceil_div(in, b->c->fp8_block_in));
}

static void expert_linear(builder *b, const char *name, int64_t out, int64_t in) {
    if (!b->c->expert_fp4) {
        fp8_linear(b, name, out, in);
        return;
    }
    char s[96];
    snprintf(s, sizeof s, "%s.weight", name);
    add(b, 0, DI_TK_FP4_WEIGHT, DI_DTYPE_I8, -1, s, 2, out, in / 2);
    snprintf(s, sizeof s, "%s.scale", name);
    add(b, 0, DI_TK_FP4_SCALE, DI_DTYPE_F8_E8M0, -1, s, 2, out, in / 32);
}

/* mHC parameters of one site ("attn"/"ffn") or the head ("head"). */
static void hc_site(builder *b, const char *site) {
    const di_model_config *c = b->c;
    int64_t hc = c->hc_mult, hcdim = hc * c->hidden_size;
    int head = !strcmp(site, "head");
    int64_t mix = head ? hc : (2 + hc) * hc;
    char s[64];
    snprintf(s, sizeof s, "hc_%s_fn", site);
    mat(b, DI_DTYPE_F32, s, mix, hcdim);
    snprintf(s, sizeof s, "hc_%s_base", site);
    vec(b, DI_DTYPE_F32, s, mix);
    snprintf(s, sizeof s, "hc_%s_scale", site);
    vec(b, DI_DTYPE_F32, s, head ? 1 : 3);
}

static void attention(builder *b, const di_layer_cfg *L) {
    const di_model_config *c = b->c;
    int64_t H = c->hidden_size, D = c->head_dim, nh = c->num_attention_heads;
    int64_t ihd = c->index_head_dim, ihn = c->index_n_heads;
    vec(b, DI_DTYPE_F32, "attn.attn_sink", nh);
    fp8_linear(b, "attn.wq_a", c->q_lora_rank, H);
    norm(b, "attn.q_norm", c->q_lora_rank);
    fp8_linear(b, "attn.wq_b", nh * D, c->q_lora_rank);
    fp8_linear(b, "attn.wkv", D, H);
    norm(b, "attn.kv_norm", D);
    fp8_linear(b, "attn.wo_a", c->o_groups * c->o_lora_rank, nh * D / c->o_groups);
    fp8_linear(b, "attn.wo_b", H, c->o_groups * c->o_lora_rank);
    if (c->arch == DI_ARCH_V4) {
        int64_t k = L->compressor_overlap ? 2 : 1;
        if (L->has_compressor) {
            mat(b, DI_DTYPE_F32, "attn.compressor.ape", L->ratio, k * D);
            bf16_linear(b, "attn.compressor.wkv", k * D, H);
            bf16_linear(b, "attn.compressor.wgate", k * D, H);
            norm(b, "attn.compressor.norm", D);
        }
        if (L->has_index_query) {
            fp8_linear(b, "attn.indexer.wq_b", ihn * ihd, c->q_lora_rank);
            bf16_linear(b, "attn.indexer.weights_proj", ihn, H);
        }
        if (L->has_index_keys) {
            mat(b, DI_DTYPE_F32, "attn.indexer.compressor.ape", L->ratio, k * ihd);
            bf16_linear(b, "attn.indexer.compressor.wkv", k * ihd, H);
            bf16_linear(b, "attn.indexer.compressor.wgate", k * ihd, H);
            norm(b, "attn.indexer.compressor.norm", ihd);
        }
    } else {
        if (L->has_compressor) {
            bf16_linear(b, "attn.compressor.wkv", D, H);
            if (L->compressor_gated) bf16_linear(b, "attn.compressor.wgate", D, H);
            norm(b, "attn.compressor.norm", D);
        }
        if (L->has_index_keys) {
            bf16_linear(b, "attn.indexer.wk", ihd, D);
            norm(b, "attn.indexer.k_norm", ihd);
        }
        if (L->has_index_query) {
            fp8_linear(b, "attn.indexer.wq_b", ihn * ihd, c->q_lora_rank);
            bf16_linear(b, "attn.indexer.weights_proj", ihn, H);
        }
    }
}

static void moe(builder *b, const di_layer_cfg *L, int64_t n_experts) {
    const di_model_config *c = b->c;
    int64_t H = c->hidden_size, I = c->moe_intermediate_size;
    bf16_linear(b, "ffn.gate", n_experts, H);
    if (L->hash_routed) {
        mat(b, DI_DTYPE_I64, "ffn.gate.tid2eid", c->vocab_size, c->num_experts_per_tok);
    } else {
        vec(b, DI_DTYPE_F32, "ffn.gate.bias", n_experts);
        if (c->arch == DI_ARCH_V41) add(b, DI_SPEC_OPTIONAL, DI_TK_PLAIN, DI_DTYPE_F32, -1, "ffn.gate.bias_vl", 1, n_experts, 0);
    }
    if (c->n_shared_experts > 0) {
        int64_t S = c->n_shared_experts * I;
        fp8_linear(b, "ffn.shared_experts.w1", S, H);
        fp8_linear(b, "ffn.shared_experts.w2", H, S);
        fp8_linear(b, "ffn.shared_experts.w3", S, H);
    }
    for (int64_t e = 0; e < n_experts && !b->failed; e++) {
        char n[64];
        b->expert = (int)e;
        snprintf(n, sizeof n, "ffn.experts.%lld.w1", (long long)e);
        expert_linear(b, n, I, H);
        snprintf(n, sizeof n, "ffn.experts.%lld.w2", (long long)e);
        expert_linear(b, n, H, I);
        snprintf(n, sizeof n, "ffn.experts.%lld.w3", (long long)e);
        expert_linear(b, n, I, H);
    }
    b->expert = -1;
}

static void engram(builder *b, int idx) {
    const di_model_config *c = b->c;
    int64_t rows = c->engram_num_embeddings[idx], ehd = c->engram_head_dim, H = c->hidden_size;
    add(b, 0, DI_TK_ENGRAM_TABLE, DI_DTYPE_F8_E4M3, -1, "engram.embed.weight", 2, rows, ehd);
    add(b, 0, DI_TK_ENGRAM_SCALE, DI_DTYPE_F8_E8M0, -1, "engram.embed.scale", 2, rows, ehd / 32);
    fp8_linear(b, "engram.wkv", H * (c->hc_mult + 1), (int64_t)c->engram_cols * ehd);
    /* BF16 in the golden checkpoint; the release may store them as F32 (architecture.md §2.4). */
    add(b, 0, DI_TK_PLAIN, DI_DTYPE_BF16, DI_DTYPE_F32, "engram.q_weight", 2, c->hc_mult, H);
    add(b, 0, DI_TK_PLAIN, DI_DTYPE_BF16, DI_DTYPE_F32, "engram.k_weight", 2, c->hc_mult, H);
}

/* A block's tensors: mHC, norms, attention, MoE (and Engram). */
static void block(builder *b, const di_layer_cfg *L, int64_t n_experts) {
    hc_site(b, "attn");
    hc_site(b, "ffn");
    norm(b, "attn_norm", b->c->hidden_size);
    norm(b, "ffn_norm", b->c->hidden_size);
    if (L->engram >= 0) engram(b, L->engram);
    attention(b, L);
    moe(b, L, n_experts);
}

static void drafter_stage(builder *b, int s) {
    const di_model_config *c = b->c;
    int64_t H = c->hidden_size, V = c->vocab_size;
    const di_layer_cfg *L = &c->layers[c->n_layers + s];
    int last = s == c->n_stages - 1;
    if (c->drafter == DI_DRAFTER_MTP) {
        block(b, L, c->n_routed_experts);
        fp8_linear(b, "e_proj", H, H);
        fp8_linear(b, "h_proj", H, H);
        norm(b, "enorm", H);
        norm(b, "hnorm", H);
        norm(b, "norm", H);
        hc_site(b, "head");
        return;
    }
    block(b, L, c->stage_n_routed_experts);
    if (s == 0) {
        fp8_linear(b, "main_proj", H, (int64_t)c->n_dspark_target_layer_ids * H);
        norm(b, "main_norm", H);
    }
    if (!last) return;
    norm(b, "norm", H);
    int64_t R = c->dspark_markov_rank;
    if (c->arch == DI_ARCH_V41) {
        mat(b, DI_DTYPE_BF16, "markov_head.embed.weight", V, R);
        mat(b, DI_DTYPE_BF16, "markov_head.head.weight", V, R);
        mat(b, DI_DTYPE_BF16, "confidence_head.proj.weight", 1, H + R);
    } else {
        /* V4-Flash-0731 DSpark head: third-party layout (architecture.md §2.6). */
        unsigned f = DI_SPEC_OPTIONAL | DI_SPEC_UNVERIFIED;
        add(b, f, DI_TK_PLAIN, DI_DTYPE_BF16, DI_DTYPE_F32, "markov_head.markov_w1.weight", 2, V, R);
        add(b, f, DI_TK_PLAIN, DI_DTYPE_F32, DI_DTYPE_BF16, "markov_head.markov_w2.weight", 2, V, R);
        add(b, f, DI_TK_PLAIN, DI_DTYPE_F32, DI_DTYPE_BF16, "confidence_head.proj.weight", 2, 1, H + R);
        hc_site(b, "head");
    }
}

static void set_prefix(builder *b, const char *fmt, int i) {
    snprintf(b->prefix, sizeof b->prefix, fmt, i);
}

deepinfer_status di_spec_build(const di_model_config *c, di_weight_spec **out, di_error *err) {
    *out = NULL;
    if (c->n_layers < 1 || c->n_layers + c->n_stages > DI_CFG_MAX_LAYERS)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "config has not been validated (n_layers = %d)",
                            c->n_layers);
    /* Bound the size first: a hostile config must not allocate without limit. */
    size_t per_block = 96;
    size_t est = 16;
    for (int l = 0; l < c->n_layers + c->n_stages; l++) {
        int64_t e = l < c->n_layers ? c->n_routed_experts : c->stage_n_routed_experts;
        est += per_block + 6 * (size_t)e;
    }
    if (est > MAX_SPEC_ENTRIES)
        return di_error_set(err, DEEPINFER_ERR_LIMIT, "config implies about %zu tensors, more than the %zu supported",
                            est, MAX_SPEC_ENTRIES);
    di_weight_spec *s = calloc(1, sizeof *s);
    if (!s) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory building the tensor spec");
    di_arena_init(&s->arena, (size_t)1 << 20);
    builder b = {.s = s, .c = c, .layer = -1, .expert = -1};
    int64_t H = c->hidden_size, V = c->vocab_size;
    mat(&b, DI_DTYPE_BF16, "embed.weight", V, H);
    mat(&b, DI_DTYPE_BF16, "head.weight", V, H);
    norm(&b, "norm", H);
    if (c->arch == DI_ARCH_V4) hc_site(&b, "head");
    for (int l = 0; l < c->n_layers && !b.failed; l++) {
        set_prefix(&b, "layers.%d.", l);
        b.layer = l;
        block(&b, &c->layers[l], c->n_routed_experts);
    }
    for (int st = 0; st < c->n_stages && !b.failed; st++) {
        set_prefix(&b, "mtp.%d.", st);
        b.layer = c->n_layers + st;
        drafter_stage(&b, st);
    }
    if (!b.failed && di_strmap_init(&s->map, s->count) != 0) b.failed = 1;
    for (size_t i = 0; i < s->count && !b.failed; i++)
        if (di_strmap_put(&s->map, s->items[i].name, strlen(s->items[i].name), (uint32_t)i, NULL) != 1) b.failed = 1;
    if (b.failed) {
        di_spec_free(s);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory building the tensor spec");
    }
    *out = s;
    return DEEPINFER_OK;
}

void di_spec_free(di_weight_spec *s) {
    if (!s) return;
    free(s->items);
    di_strmap_free(&s->map);
    di_arena_free(&s->arena);
    free(s);
}

size_t di_spec_count(const di_weight_spec *s) { return s ? s->count : 0; }

const di_tensor_spec *di_spec_at(const di_weight_spec *s, size_t i) { return (s && i < s->count) ? &s->items[i] : NULL; }

static di_tensor_spec *find_entry(const di_weight_spec *s, const char *name) {
    if (!s || !name) return NULL;
    size_t len = strlen(name);
    if (len > 6 && !memcmp(name, "model.", 6)) {
        name += 6;
        len -= 6;
    }
    uint32_t i;
    return di_strmap_get(&s->map, name, len, &i) ? &s->items[i] : NULL;
}

const di_tensor_spec *di_spec_find(const di_weight_spec *s, const char *name) { return find_entry(s, name); }

const di_tensor *di_spec_tensor(const di_tensor_spec *e) { return e ? e->tensor : NULL; }

const di_tensor *di_spec_get(const di_weight_spec *s, const char *fmt, ...) {
    char name[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof name) return NULL;
    return di_spec_tensor(find_entry(s, name));
}

/* ---- checking -------------------------------------------------------------------------- */

static int is_ignored(const char *ref) {
    static const char *const prefixes[] = {"vision.", "aligner."};
    static const char *const exact[] = {"image_start", "image_end", "image_newline"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(ref, prefixes[i], strlen(prefixes[i]))) return 1;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (!strcmp(ref, exact[i])) return 1;
    return 0;
}

static int matches(const di_tensor_spec *e, const di_tensor *t) {
    if (t->dtype != e->dtype && (e->alt_dtype < 0 || (int)t->dtype != e->alt_dtype)) return 0;
    if (t->ndim != e->ndim) return 0;
    for (int i = 0; i < e->ndim; i++)
        if (t->shape[i] != e->shape[i]) return 0;
    return 1;
}

static int push_issue(di_spec_report *r, size_t *cap, di_issue_kind k, const di_tensor_spec *e, const di_tensor *t) {
    if (!r) return 0;
    if (r->n_issues == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        di_spec_issue *n = realloc(r->issues, nc * sizeof *n);
        if (!n) return -1;
        r->issues = n;
        *cap = nc;
    }
    r->issues[r->n_issues++] = (di_spec_issue){k, e, t};
    return 0;
}

void di_spec_format_expected(const di_tensor_spec *e, char *buf, size_t n) {
    char sh[64];
    di_shape_format(e->shape, e->ndim, sh, sizeof sh);
    if (e->alt_dtype >= 0)
        snprintf(buf, n, "%s|%s %s", di_dtype_name(e->dtype), di_dtype_name((di_dtype)e->alt_dtype), sh);
    else
        snprintf(buf, n, "%s %s", di_dtype_name(e->dtype), sh);
}

void di_spec_issue_format(const di_spec_issue *is, char *buf, size_t n) {
    char exp[96] = "", got[200] = "";
    if (is->spec) di_spec_format_expected(is->spec, exp, sizeof exp);
    if (is->found) {
        char sh[160];
        di_shape_format(is->found->shape, is->found->ndim, sh, sizeof sh);
        snprintf(got, sizeof got, "%s %s", di_dtype_name(is->found->dtype), sh);
    }
    switch (is->kind) {
    case DI_ISSUE_MISSING: snprintf(buf, n, "%s: expected %s, missing", is->spec->name, exp); break;
    case DI_ISSUE_MISMATCH: snprintf(buf, n, "%s: expected %s, found %s", is->spec->name, exp, got); break;
    case DI_ISSUE_EXTRA: snprintf(buf, n, "%s: unexpected tensor (%s)", is->found->name, got); break;
    case DI_ISSUE_OPTIONAL_MISSING:
        snprintf(buf, n, "%s: optional%s, absent (would be %s)", is->spec->name,
                 (is->spec->flags & DI_SPEC_UNVERIFIED) ? " (unverified layout)" : "", exp);
        break;
    }
}

deepinfer_status di_spec_check(di_weight_spec *s, const di_safetensors *st, di_spec_report *rep, di_error *err) {
    di_spec_report local;
    di_spec_report *r = rep ? rep : &local;
    memset(r, 0, sizeof *r);
    size_t cap = 0;
    const di_spec_issue *first = NULL;
    int oom = 0;
    r->n_expected = s->count;
    for (size_t i = 0; i < s->count; i++) {
        di_tensor_spec *e = &s->items[i];
        const di_tensor *t = di_st_find(st, e->name);
        e->tensor = NULL;
        di_issue_kind k;
        if (!t) {
            int opt = (e->flags & (DI_SPEC_OPTIONAL | DI_SPEC_UNVERIFIED)) != 0;
            k = opt ? DI_ISSUE_OPTIONAL_MISSING : DI_ISSUE_MISSING;
            if (opt) r->n_optional_missing++;
            else r->n_missing++;
        } else if (!matches(e, t)) {
            k = DI_ISSUE_MISMATCH;
            r->n_mismatch++;
        } else {
            e->tensor = t;
            r->n_ok++;
            continue;
        }
        if (push_issue(rep ? r : NULL, &cap, k, e, t) != 0) oom = 1;
    }
    int hf_names = 0;
    for (size_t i = 0; i < di_st_count(st); i++) {
        const di_tensor *t = di_st_at(st, i);
        if (find_entry(s, t->ref_name)) continue;
        if (is_ignored(t->ref_name)) {
            r->n_ignored++;
            continue;
        }
        r->n_extra++;
        if (strstr(t->ref_name, ".self_attn.") || strstr(t->ref_name, ".mlp.")) hf_names = 1;
        if (push_issue(rep ? r : NULL, &cap, DI_ISSUE_EXTRA, NULL, t) != 0) oom = 1;
    }
    if (oom) {
        di_spec_report_free(rep);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory listing tensor issues");
    }
    if (r->n_missing + r->n_mismatch == 0) return DEEPINFER_OK;
    /* The first error, for the message; without a report, find it again. */
    char line[400] = "";
    di_spec_issue tmp;
    for (size_t i = 0; rep && i < r->n_issues && !first; i++)
        if (r->issues[i].kind == DI_ISSUE_MISSING || r->issues[i].kind == DI_ISSUE_MISMATCH) first = &r->issues[i];
    for (size_t i = 0; !first && i < s->count; i++) {
        const di_tensor_spec *e = &s->items[i];
        if (e->tensor || (e->flags & (DI_SPEC_OPTIONAL | DI_SPEC_UNVERIFIED))) continue;
        const di_tensor *t = di_st_find(st, e->name);
        tmp = (di_spec_issue){t ? DI_ISSUE_MISMATCH : DI_ISSUE_MISSING, e, t};
        first = &tmp;
    }
    if (first) di_spec_issue_format(first, line, sizeof line);
    return di_error_set(err, DEEPINFER_ERR_FORMAT,
                        "the checkpoint does not match config.json: %zu missing and %zu inconsistent tensor(s) of "
                        "%zu; first: %s%s",
                        r->n_missing, r->n_mismatch, r->n_expected, line,
                        hf_names ? " (its names look like a transformers conversion: deepinfer reads the released "
                                   "reference layout, e.g. layers.0.attn.wq_a.weight)"
                                 : "");
}

void di_spec_report_free(di_spec_report *r) {
    if (!r) return;
    free(r->issues);
    r->issues = NULL;
    r->n_issues = 0;
}
