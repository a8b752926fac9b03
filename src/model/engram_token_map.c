/*
 * engram_token_map.c — build, load and apply the Engram compressed token map
 * (architecture.md §5.8; see engram_token_map.h).
 */
#include "model/engram_token_map.h"

#include <stdlib.h>
#include <string.h>

#include "model/engram_hash.h"
#include "model/engram_token_key.h"
#include "util/arena.h"
#include "util/file.h"

void di_engram_token_map_free(di_engram_token_map *m) {
    if (!m) return;
    free(m->cls);
    memset(m, 0, sizeof *m);
}

/* ---- build from token strings -------------------------------------------------------------- */

typedef struct key_slot {
    const char *key; /* NULL = empty slot */
    size_t len;
    uint64_t hash;
    int32_t cls;
} key_slot;

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

deepinfer_status di_engram_token_map_build(int32_t n_ids, di_engram_token_str_fn token_str, void *ctx,
                                           di_engram_token_map *out, di_error *err) {
    memset(out, 0, sizeof *out);
    if (n_ids <= 0) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "engram token map: empty vocabulary");
    size_t cap = 1;
    while (cap < (size_t)n_ids * 2) cap *= 2;
    key_slot *slots = calloc(cap, sizeof *slots);
    int32_t *cls = malloc((size_t)n_ids * sizeof *cls);
    di_engram_keyer *k = NULL;
    di_arena keys;
    di_arena_init(&keys, 1 << 20);
    deepinfer_status st = DEEPINFER_OK;
    if (!slots || !cls) st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
    if (!st) st = di_engram_keyer_new(&k, err);
    int32_t n_classes = 0;
    for (int32_t id = 0; !st && id < n_ids; id++) {
        size_t tlen = 0;
        const char *tok = token_str(ctx, id, &tlen);
        const char *key;
        size_t klen;
        if ((st = di_engram_token_key(k, tok ? tok : "", tok ? tlen : 0, &key, &klen, err))) {
            di_error_prefix(err, "token %d: ", id);
            break;
        }
        uint64_t h = fnv1a(key, klen);
        size_t i = (size_t)h & (cap - 1);
        while (slots[i].key && !(slots[i].hash == h && slots[i].len == klen && !memcmp(slots[i].key, key, klen)))
            i = (i + 1) & (cap - 1);
        if (!slots[i].key) {
            char *copy = di_arena_strndup(&keys, key, klen);
            if (!copy) {
                st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
                break;
            }
            slots[i] = (key_slot){copy, klen, h, n_classes++};
        }
        cls[id] = slots[i].cls;
    }
    di_engram_keyer_free(k);
    di_arena_free(&keys);
    free(slots);
    if (st) {
        free(cls);
        return st;
    }
    out->cls = cls;
    out->n_ids = n_ids;
    out->n_classes = n_classes;
    return DEEPINFER_OK;
}

static const char *tokenizer_str(void *ctx, int32_t id, size_t *len) {
    return di_tokenizer_token_str((const di_tokenizer *)ctx, id, len);
}

deepinfer_status di_engram_token_map_from_tokenizer(const di_tokenizer *tok, di_engram_token_map *out,
                                                    di_error *err) {
    return di_engram_token_map_build(di_tokenizer_vocab_size(tok), tokenizer_str, (void *)tok, out, err);
}

/* ---- load a shipped map -------------------------------------------------------------------- */

#define FMT_FAIL(...) di_error_set(err, DEEPINFER_ERR_FORMAT, "engram token map: " __VA_ARGS__)

static deepinfer_status check_field(const di_json *root, const char *key, int64_t want, di_error *err) {
    const di_json *v = di_json_get(root, key);
    int64_t x;
    if (v && (!di_json_as_i64(v, &x) || x != want))
        return FMT_FAIL("\"%s\" does not match the map (expected %lld)", key, (long long)want);
    return DEEPINFER_OK;
}

deepinfer_status di_engram_token_map_from_json(const di_json *root, di_engram_token_map *out, di_error *err) {
    memset(out, 0, sizeof *out);
    const di_json *map = di_json_get(root, "map");
    const di_json *rep = di_json_get(root, "repeats");
    const di_json *vs = di_json_get(root, "vocab_size");
    int64_t n;
    if (map && map->type == DI_JSON_ARRAY) n = map->count;
    else if (rep && rep->type == DI_JSON_ARRAY && di_json_as_i64(vs, &n)) {
    } else return FMT_FAIL("expected a \"map\" array, or \"repeats\" with \"vocab_size\"");
    if (n < 1 || n > INT32_MAX) return FMT_FAIL("vocabulary size %lld is out of range", (long long)n);
    int32_t *cls = malloc((size_t)n * sizeof *cls);
    if (!cls) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
    int32_t next = 0; /* classes are numbered in first-seen order: a new class is always `next` */
    size_t r = 0;
    for (int64_t id = 0; id < n; id++) {
        int64_t c = -1, rid = -1;
        if (map) {
            if (!di_json_as_i64(&map->items[id], &c) || c < 0 || c > next) {
                free(cls);
                return FMT_FAIL("map[%lld] is not a class in first-seen order (next new class is %d)",
                                (long long)id, next);
            }
        } else {
            const di_json *pair = di_json_at(rep, r);
            if (pair && (pair->type != DI_JSON_ARRAY || pair->count != 2 || !di_json_as_i64(&pair->items[0], &rid) ||
                         !di_json_as_i64(&pair->items[1], &c) || rid < id || (rid == id && (c < 0 || c >= next)))) {
                free(cls);
                return FMT_FAIL("repeats[%zu] must be [id, earlier class] in increasing id order", r);
            }
            if (pair && rid == id) r++;
            else c = next;
        }
        if (c == next) next++;
        cls[id] = (int32_t)c;
    }
    if (rep && !map && r != rep->count) {
        free(cls);
        return FMT_FAIL("repeats[%zu] names an id beyond vocab_size %lld", r, (long long)n);
    }
    out->cls = cls;
    out->n_ids = (int32_t)n;
    out->n_classes = next;
    deepinfer_status st = check_field(root, "vocab_size", n, err);
    if (!st) st = check_field(root, "compressed_vocab_size", next, err);
    int64_t pad;
    if (!st && di_json_as_i64(di_json_get(root, "pad_token_id"), &pad)) {
        if (pad < 0 || pad >= n) st = FMT_FAIL("pad_token_id %lld is outside the map", (long long)pad);
        else st = check_field(root, "pad_class", cls[pad], err);
    }
    if (st) di_engram_token_map_free(out);
    return st;
}

deepinfer_status di_engram_token_map_load(const char *path, di_engram_token_map *out, di_error *err) {
    char *text = NULL;
    size_t len = 0;
    di_json_doc *doc = NULL;
    memset(out, 0, sizeof *out);
    deepinfer_status st = di_read_file(path, 256u << 20, &text, &len, err);
    if (!st) st = di_json_parse(text, len, NULL, &doc, err);
    if (!st) st = di_engram_token_map_from_json(doc->root, out, err);
    if (st) di_error_prefix(err, "%s: ", path);
    di_json_free(doc);
    free(text);
    return st;
}

/* ---- apply --------------------------------------------------------------------------------- */

deepinfer_status di_engram_token_classes(const di_engram_token_map *m, const int32_t *tokens,
                                         const uint8_t *text_mask, int64_t n, int32_t *classes, di_error *err) {
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->n_ids)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "engram: token id %d is outside the token map [0, %d)", tokens[i], m->n_ids);
        classes[i] = text_mask && !text_mask[i] ? DI_ENGRAM_DEAD : m->cls[tokens[i]];
    }
    return DEEPINFER_OK;
}
