/* dummy_config.c — the reduced config.json (and Engram sidecars) of a dummy
 * model (dummy.h step 1): the full config re-emitted with the layer keys
 * replaced. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "dummy/dummy.h"
#include "util/file.h"

#define MAX_KEEP 256
#define MAX_OVR 16

typedef struct override {
    const char *key;
    char *val; /* JSON text; NULL: drop the member */
} override;

typedef struct reducer {
    const di_json *text; /* the object holding the text-model keys (text_config, or the root) */
    int keep[MAX_KEEP], n, orig_n;
    override ovr[MAX_OVR];
    int novr;
    int failed;
} reducer;

/* ---- small JSON text builders ------------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int failed;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_printf(sbuf *b, const char *fmt, long long v) {
    char t[48];
    int w = snprintf(t, sizeof t, fmt, v);
    sb_put(b, t, (size_t)w);
}

static void sb_str(sbuf *b, const char *s, size_t n) {
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_put(b, e, 2);
        } else if (c < 0x20) {
            sb_printf(b, "\\u%04llx", c);
        } else {
            sb_put(b, (const char *)&c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static void emit(sbuf *b, const di_json *v, const reducer *r);

static void emit_members(sbuf *b, const di_json *o, const reducer *r) {
    int first = 1;
    sb_put(b, "{", 1);
    for (uint32_t i = 0; i < o->count; i++) {
        const di_json *m = &o->items[i];
        const char *val = NULL;
        int replaced = 0;
        for (int k = 0; o == r->text && k < r->novr; k++)
            if (!strcmp(m->key, r->ovr[k].key)) replaced = 1, val = r->ovr[k].val;
        if (replaced && !val) continue;
        if (!first) sb_put(b, ",\n", 2);
        first = 0;
        sb_str(b, m->key, m->key_len);
        sb_put(b, ": ", 2);
        if (replaced) sb_put(b, val, strlen(val));
        else emit(b, m, r);
    }
    /* overrides of keys the config lacks */
    for (int k = 0; o == r->text && k < r->novr; k++)
        if (r->ovr[k].val && !di_json_get(o, r->ovr[k].key)) {
            if (!first) sb_put(b, ",\n", 2);
            first = 0;
            sb_str(b, r->ovr[k].key, strlen(r->ovr[k].key));
            sb_put(b, ": ", 2);
            sb_put(b, r->ovr[k].val, strlen(r->ovr[k].val));
        }
    sb_put(b, "}", 1);
}

static void emit(sbuf *b, const di_json *v, const reducer *r) {
    switch (v->type) {
    case DI_JSON_NULL: sb_put(b, "null", 4); break;
    case DI_JSON_FALSE: sb_put(b, "false", 5); break;
    case DI_JSON_TRUE: sb_put(b, "true", 4); break;
    case DI_JSON_NUMBER: sb_put(b, v->str, v->str_len); break;
    case DI_JSON_STRING: sb_str(b, v->str, v->str_len); break;
    case DI_JSON_ARRAY:
        sb_put(b, "[", 1);
        for (uint32_t i = 0; i < v->count; i++) {
            if (i) sb_put(b, ", ", 2);
            emit(b, &v->items[i], r);
        }
        sb_put(b, "]", 1);
        break;
    case DI_JSON_OBJECT: emit_members(b, v, r); break;
    }
}

/* ---- the reduction ------------------------------------------------------------------------ */

static int64_t geti(const di_json *o, const char *k, int64_t dflt) {
    int64_t v;
    const di_json *j = di_json_get(o, k);
    return j && di_json_as_i64(j, &v) ? v : dflt;
}

static int new_index(const reducer *r, int64_t id) {
    for (int i = 0; i < r->n; i++)
        if (r->keep[i] == id) return i;
    return -1;
}

static void set_ovr(reducer *r, const char *key, sbuf *b) {
    if (b && b->failed) r->failed = 1;
    if (r->novr == MAX_OVR) {
        r->failed = 1;
        if (b) free(b->p);
        return;
    }
    r->ovr[r->novr++] = (override){key, b ? b->p : NULL};
}

static void set_int(reducer *r, const char *key, int64_t v) {
    sbuf b = {0};
    sb_printf(&b, "%lld", (long long)v);
    set_ovr(r, key, &b);
}

/* A layer-id list renumbered to the kept layers (ids not kept dropped). */
static void remap_list(reducer *r, const char *key) {
    const di_json *a = di_json_get(r->text, key);
    if (!a || a->type != DI_JSON_ARRAY) return;
    sbuf b = {0};
    int n = 0;
    sb_put(&b, "[", 1);
    for (uint32_t i = 0; i < a->count; i++) {
        int64_t id;
        int ni = di_json_as_i64(&a->items[i], &id) ? new_index(r, id) : -1;
        if (ni < 0) continue;
        sb_printf(&b, n++ ? ", %lld" : "%lld", ni);
    }
    sb_put(&b, "]", 1);
    set_ovr(r, key, &b);
}

static int is_prime(int64_t p) {
    if (p < 2) return 0;
    for (int64_t d = 2; d * d <= p; d++)
        if (p % d == 0) return 0;
    return 1;
}

/* Engram: vocabulary sized down, num_embeddings recomputed for the kept layers
 * (each takes the next (max_ngram-1)*n_heads unused primes above vocab-1). */
static int engram(reducer *r, di_dummy_info *info) {
    const di_json *ids = di_json_get(r->text, "engram_layer_ids");
    if (!ids || ids->type != DI_JSON_ARRAY || !ids->count) return 0;
    int64_t vocab = geti(r->text, "engram_vocab_size", 0);
    if (vocab > DI_DUMMY_ENGRAM_VOCAB) vocab = DI_DUMMY_ENGRAM_VOCAB;
    int64_t cols = (geti(r->text, "engram_max_ngram_size", 0) - 1) * geti(r->text, "engram_n_heads", 0);
    remap_list(r, "engram_layer_ids");
    set_int(r, "engram_vocab_size", vocab);
    sbuf b = {0};
    int n = 0;
    int64_t p = vocab - 1;
    sb_put(&b, "[", 1);
    for (uint32_t i = 0; i < ids->count; i++) {
        int64_t id;
        if (!di_json_as_i64(&ids->items[i], &id) || new_index(r, id) < 0) continue;
        int64_t sum = 0;
        for (int64_t c = 0; c < cols; c++) {
            do p++;
            while (!is_prime(p));
            sum += p;
        }
        sb_printf(&b, n++ ? ", %lld" : "%lld", sum);
    }
    sb_put(&b, "]", 1);
    set_ovr(r, "engram_num_embeddings", &b);
    if (info) info->engram_vocab = n ? vocab : 0;
    return n;
}

/* The layers kept (dummy.h): V4 the first n; V4.1 the first n - n/4 before the
 * decoder split (candidate_source_layer_id, else the middle) and the rest from it. */
static void choose(reducer *r, int v41) {
    int n = r->n, on = r->orig_n;
    if (!v41 || n == on) {
        for (int i = 0; i < n; i++) r->keep[i] = i;
        return;
    }
    int split = (int)geti(r->text, "candidate_source_layer_id", on / 2);
    if (split <= 0 || split >= on) split = on / 2;
    int enc = n - n / 4;
    if (enc > split) enc = split;
    if (n - enc > on - split) enc = n - (on - split);
    for (int i = 0; i < enc; i++) r->keep[i] = i;
    for (int i = enc; i < n; i++) r->keep[i] = split + (i - enc);
}

static deepinfer_status write_text(const char *dir, const char *name, const char *text, size_t len, di_error *err) {
    char path[4096];
    if (di_path_join(path, sizeof path, dir, name))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "%s: path too long", dir);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(text, 1, len, f) == len;
    if (f && fclose(f)) ok = 0;
    return ok ? DEEPINFER_OK : di_error_set(err, DEEPINFER_ERR_IO, "cannot write %s", path);
}

/* engram_token_map.json (exactly C classes: ids < C open their own, the others
 * repeat one of 3..C-1) and engram_hash.json (odd multipliers below
 * INT64_MAX / C, as the reference draws them). */
static deepinfer_status sidecars(const reducer *r, const char *dir, int n_engram, di_error *err) {
    int64_t V = geti(r->text, "vocab_size", 0), C = geti(r->text, "engram_compressed_vocab_size", 0);
    int64_t pad = geti(r->text, "engram_pad_token_id", 2), ng = geti(r->text, "engram_max_ngram_size", 0);
    if (C < 4 || C > V || pad < 0 || pad >= C)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "dummy Engram token map needs 4 <= engram_compressed_vocab_size <= vocab_size and the pad "
                            "token below it");
    sbuf b = {0};
    const char *desc = "{\"description\": \"deepinfer dummy model: synthetic map\"";
    sb_put(&b, desc, strlen(desc));
    sb_printf(&b, ", \"vocab_size\": %lld", V);
    sb_printf(&b, ", \"compressed_vocab_size\": %lld", C);
    sb_printf(&b, ", \"pad_token_id\": %lld", pad);
    sb_printf(&b, ", \"pad_class\": %lld, \"repeats\": [", pad);
    for (int64_t t = C; t < V; t++) {
        sb_printf(&b, t > C ? ", [%lld" : "[%lld", t);
        sb_printf(&b, ", %lld]", 3 + (t - C) % (C - 3));
    }
    sb_put(&b, "]}\n", 3);
    deepinfer_status st = b.failed ? di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory")
                                   : write_text(dir, "engram_token_map.json", b.p, b.len, err);
    free(b.p);
    if (st) return st;
    sbuf h = {0};
    uint64_t bound = (uint64_t)(INT64_MAX / C) / 2, x = 0x9E3779B97F4A7C15ull;
    sb_put(&h, "{\"multipliers\": [", 17);
    for (int l = 0; l < n_engram; l++) {
        sb_put(&h, l ? ", [" : "[", l ? 3 : 1);
        for (int64_t s = 0; s < ng; s++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            sb_printf(&h, s ? ", %lld" : "%lld", (long long)((x % bound) * 2 + 1));
        }
        sb_put(&h, "]", 1);
    }
    sb_put(&h, "]}\n", 3);
    st = h.failed ? di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory")
                  : write_text(dir, "engram_hash.json", h.p, h.len, err);
    free(h.p);
    return st;
}

/* --experts: n_routed_experts = E; a drafter with its own count
 * (dspark_n_routed_experts) keeps min(its count, E), at least its top-k. */
static void experts(reducer *r, int64_t E, di_dummy_info *info) {
    if (info) info->n_experts = geti(r->text, "n_routed_experts", 0);
    if (E <= 0) return;
    set_int(r, "n_routed_experts", E);
    if (info) info->n_experts = E;
    int64_t d = geti(r->text, "dspark_n_routed_experts", -1);
    if (d < 0) return;
    int64_t dk = geti(r->text, "dspark_num_experts_per_tok", geti(r->text, "num_experts_per_tok", 1));
    d = d < E ? d : E;
    set_int(r, "dspark_n_routed_experts", d > dk ? d : dk);
}

deepinfer_status di_dummy_write_dir(const char *config_path, int n_layers, const char *dir, di_dummy_info *info,
                                    di_error *err) {
    return di_dummy_write_dir_ex(config_path, n_layers, 0, dir, info, err);
}

deepinfer_status di_dummy_write_dir_ex(const char *config_path, int n_layers, int n_experts, const char *dir,
                                       di_dummy_info *info, di_error *err) {
    char *text = NULL;
    size_t len = 0;
    deepinfer_status st = di_read_file(config_path, (size_t)16 << 20, &text, &len, err);
    if (st) return st;
    di_json_doc *doc = NULL;
    if ((st = di_json_parse(text, len, NULL, &doc, err))) {
        free(text);
        return di_error_prefix(err, "%s", config_path);
    }
    reducer r = {0};
    const di_json *root = doc->root, *tc = di_json_get(root, "text_config");
    r.text = tc && tc->type == DI_JSON_OBJECT ? tc : root;
    const di_json *mt = di_json_get(root, "model_type"), *cr = di_json_get(r.text, "compress_ratios");
    int v41 = mt && di_json_is_string(mt) && strstr(mt->str, "v41") != NULL;
    r.orig_n = (int)geti(r.text, "num_hidden_layers", 0);
    r.n = n_layers;
    if (root->type != DI_JSON_OBJECT || r.orig_n < 1 || !cr || cr->type != DI_JSON_ARRAY ||
        (int)cr->count < r.orig_n) {
        st = di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: needs num_hidden_layers and compress_ratios", config_path);
    } else if (n_layers < 1 || n_layers > r.orig_n || n_layers > MAX_KEEP) {
        st = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "--layers %d: the config has %d layers", n_layers,
                          r.orig_n);
    } else if (n_experts < 0 || (n_experts > 0 && n_experts < geti(r.text, "num_experts_per_tok", 1))) {
        st = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                          "--experts %d: needs at least num_experts_per_tok = %lld routed experts (0 keeps the "
                          "config's %lld)", n_experts, (long long)geti(r.text, "num_experts_per_tok", 1),
                          (long long)geti(r.text, "n_routed_experts", 0));
    }
    if (!st) {
        experts(&r, n_experts, info);
        choose(&r, v41);
        set_int(&r, "num_hidden_layers", r.n);
        sbuf b = {0};
        sb_put(&b, "[", 1);
        for (int i = 0; i < r.n; i++) sb_put(&b, i ? ", " : "", i ? 2 : 0), emit(&b, &cr->items[r.keep[i]], &r);
        for (uint32_t i = (uint32_t)r.orig_n; i < cr->count; i++) sb_put(&b, ", ", 2), emit(&b, &cr->items[i], &r);
        sb_put(&b, "]", 1);
        set_ovr(&r, "compress_ratios", &b);
        int64_t nh = geti(r.text, "num_hash_layers", -1);
        if (nh >= 0) set_int(&r, "num_hash_layers", nh < r.n ? nh : r.n);
        remap_list(&r, "kv_source_layer_ids");
        remap_list(&r, "index_source_layer_ids");
        int64_t cand = geti(r.text, "candidate_source_layer_id", -1);
        if (cand >= 0) {
            int ni = new_index(&r, cand);
            if (ni >= 0) set_int(&r, "candidate_source_layer_id", ni);
            else set_ovr(&r, "candidate_source_layer_id", NULL);
        }
        const di_json *dt = di_json_get(r.text, "dspark_target_layer_ids");
        if (dt && dt->type == DI_JSON_ARRAY && dt->count) {
            int k = (int)dt->count < r.n ? (int)dt->count : r.n;
            sbuf d = {0};
            sb_put(&d, "[", 1);
            for (int i = r.n - k; i < r.n; i++) sb_printf(&d, i > r.n - k ? ", %lld" : "%lld", i);
            sb_put(&d, "]", 1);
            set_ovr(&r, "dspark_target_layer_ids", &d);
        }
        int n_engram = engram(&r, info);
        sbuf out = {0};
        emit(&out, root, &r);
        sb_put(&out, "\n", 1);
        if (r.failed || out.failed) st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        else st = write_text(dir, "config.json", out.p, out.len, err);
        free(out.p);
        if (!st && n_engram) st = sidecars(&r, dir, n_engram, err);
        if (info) {
            info->n_layers = r.n;
            for (int i = 0; i < r.n && i < 64; i++) info->kept[i] = r.keep[i];
            if (!n_engram) info->engram_vocab = 0;
        }
    }
    for (int k = 0; k < r.novr; k++) free(r.ovr[k].val);
    di_json_free(doc);
    free(text);
    return st;
}
