/*
 * safetensors.c — open, map and validate safetensors checkpoints (see safetensors.h).
 *
 * Order of work: find the shard files (index, single file or directory),
 * map each one, parse and check its header, sort its tensors by offset and
 * check they tile the data section, add them to the name table, then (with an
 * index) cross-check the index against what the shards hold.
 */
#include "io/safetensors.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/json.h"
#include "util/arena.h"
#include "util/file.h"
#include "util/strmap.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define MAX_LISTED 5 /* names quoted in one error message */

typedef struct st_meta {
    uint32_t shard;
    const char *key;
    const char *value;
} st_meta;

typedef struct index_entry {
    const char *ref;  /* reference name (arena) */
    size_t ref_len;
    const char *name; /* as written in the index */
    uint32_t shard;
} index_entry;

struct di_safetensors {
    char *path;
    di_arena arena;
    di_tensor *tensors;
    size_t count, cap;
    di_st_shard_info *shards;
    di_mapped_file *maps; /* NULL for a borrowed buffer */
    size_t nshards;
    st_meta *meta;
    size_t nmeta, meta_cap;
    di_strmap names;
    di_st_totals totals;
    int64_t index_total_size;
    di_st_gen_fn gen;       /* generated image (di_st_open_generated), else NULL */
    void *gen_ctx;
    void (*gen_free)(void *);
    unsigned char *gen_head; /* its 8-byte length + header (shard 0's data) */
};

/* ---- small helpers ---------------------------------------------------------------------- */

static const char *strip_model_prefix(const char *s, size_t *len) {
    if (*len > 6 && memcmp(s, "model.", 6) == 0) {
        *len -= 6;
        return s + 6;
    }
    return s;
}

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

void di_shape_format(const int64_t *shape, int ndim, char *buf, size_t n) {
    if (!n) return;
    size_t at = 0;
    buf[0] = '\0';
    int w = snprintf(buf, n, "[");
    if (w > 0) at = (size_t)w;
    for (int i = 0; i < ndim && at < n; i++) {
        w = snprintf(buf + at, n - at, i ? ",%lld" : "%lld", (long long)shape[i]);
        if (w < 0) return;
        at += (size_t)w;
    }
    if (at < n) snprintf(buf + at, n - at, "]");
}

static di_safetensors *st_new(const char *path) {
    di_safetensors *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->path = strdup(path);
    st->index_total_size = -1;
    di_arena_init(&st->arena, (size_t)1 << 20);
    if (!st->path || di_strmap_init(&st->names, 1024) != 0) {
        di_st_close(st);
        return NULL;
    }
    return st;
}

void di_st_close(di_safetensors *st) {
    if (!st) return;
    if (st->maps)
        for (size_t i = 0; i < st->nshards; i++) di_unmap_file(&st->maps[i]);
    free(st->maps);
    if (st->gen_free) st->gen_free(st->gen_ctx);
    free(st->gen_head);
    free(st->shards);
    free(st->tensors);
    free(st->meta);
    free(st->path);
    di_strmap_free(&st->names);
    di_arena_free(&st->arena);
    free(st);
}

static deepinfer_status oom(di_error *err, const char *what) {
    return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory while %s", what);
}

/* Room for `more` tensors beyond the current count (array and name table). */
static int reserve_tensors(di_safetensors *st, size_t more) {
    size_t need = st->count + more;
    if (need < st->count) return -1;
    if (need > st->cap) {
        di_tensor *t = realloc(st->tensors, need * sizeof *t);
        if (!t) return -1;
        st->tensors = t;
        st->cap = need;
    }
    return di_strmap_reserve(&st->names, need);
}

static di_tensor *push_tensor(di_safetensors *st) {
    if (st->count == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 1024;
        di_tensor *t = realloc(st->tensors, cap * sizeof *t);
        if (!t) return NULL;
        st->tensors = t;
        st->cap = cap;
    }
    di_tensor *t = &st->tensors[st->count++];
    memset(t, 0, sizeof *t);
    return t;
}

static int push_meta(di_safetensors *st, uint32_t shard, const char *k, size_t kl, const char *v, size_t vl) {
    if (st->nmeta == st->meta_cap) {
        size_t cap = st->meta_cap ? st->meta_cap * 2 : 16;
        st_meta *m = realloc(st->meta, cap * sizeof *m);
        if (!m) return -1;
        st->meta = m;
        st->meta_cap = cap;
    }
    const char *key = di_arena_strndup(&st->arena, k, kl);
    const char *val = di_arena_strndup(&st->arena, v, vl);
    if (!key || !val) return -1;
    st->meta[st->nmeta++] = (st_meta){shard, key, val};
    return 0;
}

/* Read a JSON number as a non-negative int64; 0 if it is not one. */
static int as_u63(const di_json *v, uint64_t *out) {
    int64_t x;
    if (!di_json_as_i64(v, &x) || x < 0) return 0;
    *out = (uint64_t)x;
    return 1;
}

/* ---- one shard header ------------------------------------------------------------------- */

/* Parse the entry of one tensor into *t (name already set). */
static deepinfer_status parse_tensor_entry(const di_json *e, di_tensor *t, uint64_t data_size,
                                           const char *shard, di_error *err) {
    const char *nm = t->name;
    if (e->type != DI_JSON_OBJECT)
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensor '%s': entry is a JSON %s, expected an object",
                            shard, nm, di_json_type_name(e->type));
    const di_json *dtype = NULL, *shape = NULL, *offs = NULL;
    for (uint32_t i = 0; i < e->count; i++) {
        const di_json *m = &e->items[i];
        if (!strcmp(m->key, "dtype") && m->key_len == 5) dtype = m;
        else if (!strcmp(m->key, "shape") && m->key_len == 5) shape = m;
        else if (!strcmp(m->key, "data_offsets") && m->key_len == 12) offs = m;
        else
            return di_error_set(err, DEEPINFER_ERR_FORMAT,
                                "%s: tensor '%s': unexpected key '%s' (allowed: dtype, shape, data_offsets)",
                                shard, nm, m->key);
    }
    if (!dtype || !shape || !offs)
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensor '%s': missing '%s'", shard, nm,
                            !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!di_json_is_string(dtype))
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensor '%s': dtype is a JSON %s, expected a string",
                            shard, nm, di_json_type_name(dtype->type));
    int r = di_dtype_parse(dtype->str, dtype->str_len, &t->dtype);
    if (r <= 0)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "%s: tensor '%s': %s dtype '%.40s' (supported: %s)",
                            shard, nm, r == 0 ? "unsupported" : "unknown", dtype->str,
                            di_dtype_supported_list());
    if (shape->type != DI_JSON_ARRAY)
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensor '%s': shape is a JSON %s, expected an array",
                            shard, nm, di_json_type_name(shape->type));
    if (shape->count > DI_ST_MAX_DIMS)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "%s: tensor '%s': %u dimensions, at most %d supported",
                            shard, nm, shape->count, DI_ST_MAX_DIMS);
    t->ndim = (int)shape->count;
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d;
        if (!as_u63(&shape->items[i], &d))
            return di_error_set(err, DEEPINFER_ERR_FORMAT,
                                "%s: tensor '%s': shape[%d] is not a non-negative integer", shard, nm, i);
        t->shape[i] = (int64_t)d;
        if (__builtin_mul_overflow(numel, d, &numel))
            return di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensor '%s': element count overflows 64 bits",
                                shard, nm);
    }
    t->numel = numel;
    if (__builtin_mul_overflow(numel, (uint64_t)di_dtype_size(t->dtype), &t->nbytes))
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensor '%s': byte size overflows 64 bits", shard, nm);
    uint64_t b, en;
    if (offs->type != DI_JSON_ARRAY || offs->count != 2 || !as_u63(&offs->items[0], &b) ||
        !as_u63(&offs->items[1], &en))
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets must be [begin, end] with non-negative integers", shard,
                            nm);
    if (b > en)
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensor '%s': data_offsets begin %llu > end %llu",
                            shard, nm, (unsigned long long)b, (unsigned long long)en);
    if (en > data_size)
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets end %llu is past the data section (%llu bytes); "
                            "the file is truncated or the header is wrong",
                            shard, nm, (unsigned long long)en, (unsigned long long)data_size);
    if (en - b != t->nbytes) {
        char sh[160];
        di_shape_format(t->shape, t->ndim, sh, sizeof sh);
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets cover %llu bytes but %s %s needs %llu", shard, nm,
                            (unsigned long long)(en - b), di_dtype_name(t->dtype), sh,
                            (unsigned long long)t->nbytes);
    }
    t->file_offset = b; /* relative for now; made absolute by the caller */
    return DEEPINFER_OK;
}

static int cmp_offset(const void *a, const void *b) {
    const di_tensor *x = a, *y = b;
    if (x->file_offset != y->file_offset) return x->file_offset < y->file_offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Parse shard `si` (data/size/path already set in st->shards[si]). */
static deepinfer_status parse_shard(di_safetensors *st, uint32_t si, di_error *err) {
    di_st_shard_info *sh = &st->shards[si];
    const char *label = sh->path;
    if (sh->size < 8)
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "%s: file is %llu bytes; a safetensors file starts with an 8-byte header length",
                            label, (unsigned long long)sh->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | sh->data[i];
    if (n > sh->size - 8)
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "%s: header length %llu exceeds the %llu bytes after it; the file is truncated or "
                            "not safetensors",
                            label, (unsigned long long)n, (unsigned long long)(sh->size - 8));
    if (n > DI_ST_MAX_HEADER)
        return di_error_set(err, DEEPINFER_ERR_LIMIT, "%s: header length %llu exceeds the 100 MiB limit", label,
                            (unsigned long long)n);
    if (n < 2)
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: header length %llu is too short for a JSON object",
                            label, (unsigned long long)n);
    sh->header_len = n;
    sh->data_start = 8 + n;
    uint64_t data_size = sh->size - 8 - n;

    di_json_doc *doc = NULL;
    di_json_options jo = {.max_depth = 8, .max_bytes = (size_t)1 << 30};
    if (di_json_parse((const char *)sh->data + 8, (size_t)n, &jo, &doc, err) != DEEPINFER_OK)
        return di_error_prefix(err, "%s: header is not valid JSON", label);
    deepinfer_status rc = DEEPINFER_OK;
    const di_json *root = doc->root;
    size_t first = st->count;
    if (root->type != DI_JSON_OBJECT) {
        rc = di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: header is a JSON %s, expected an object", label,
                          di_json_type_name(root->type));
        goto done;
    }
    if (reserve_tensors(st, root->count) != 0) {
        rc = oom(err, "reading tensor names");
        goto done;
    }
    for (uint32_t i = 0; i < root->count; i++) {
        const di_json *m = &root->items[i];
        if (m->key_len == 12 && !memcmp(m->key, "__metadata__", 12)) {
            if (m->type != DI_JSON_OBJECT) {
                rc = di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: __metadata__ is a JSON %s, expected an object",
                                  label, di_json_type_name(m->type));
                goto done;
            }
            for (uint32_t j = 0; j < m->count; j++) {
                const di_json *kv = &m->items[j];
                if (kv->type != DI_JSON_STRING) {
                    rc = di_error_set(err, DEEPINFER_ERR_FORMAT,
                                      "%s: __metadata__ value of '%s' is a JSON %s, expected a string", label,
                                      kv->key, di_json_type_name(kv->type));
                    goto done;
                }
                if (push_meta(st, si, kv->key, kv->key_len, kv->str, kv->str_len) != 0) {
                    rc = oom(err, "reading __metadata__");
                    goto done;
                }
            }
            continue;
        }
        if (m->key_len == 0 || strlen(m->key) != m->key_len) {
            rc = di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensor name %s", label,
                              m->key_len ? "contains a NUL byte" : "is empty");
            goto done;
        }
        di_tensor *t = push_tensor(st);
        char *name = t ? di_arena_strndup(&st->arena, m->key, m->key_len) : NULL;
        if (!name) {
            rc = oom(err, "reading tensor names");
            goto done;
        }
        t->name = name;
        size_t rl = m->key_len;
        t->ref_name = strip_model_prefix(name, &rl);
        if (rl > 6 && !memcmp(t->ref_name, "model.", 6)) { /* lookups strip one prefix: two would not round-trip */
            rc = di_error_set(err, DEEPINFER_ERR_FORMAT,
                              "%s: tensor name '%s' has a doubled 'model.' prefix, which lookups cannot tell from "
                              "'%s'; rename it", label, name, t->ref_name);
            goto done;
        }
        t->shard = si;
        rc = parse_tensor_entry(m, t, data_size, label, err);
        if (rc != DEEPINFER_OK) goto done;
    }

    /* Tensors must tile the data section: sorted by offset, each begins where
     * the previous ended, the first at 0 and the last ends at the file end. */
    size_t nt = st->count - first;
    di_tensor *ts = nt ? st->tensors + first : NULL; /* a header of metadata only: no array yet */
    if (nt) qsort(ts, nt, sizeof *ts, cmp_offset);
    uint64_t at = 0;
    for (size_t i = 0; i < nt; i++) {
        if (ts[i].file_offset < at) {
            rc = di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap (bytes %llu..%llu)",
                              label, ts[i - 1].name, ts[i].name, (unsigned long long)ts[i].file_offset,
                              (unsigned long long)at);
            goto done;
        }
        if (ts[i].file_offset > at) {
            rc = di_error_set(err, DEEPINFER_ERR_FORMAT,
                              "%s: data bytes %llu..%llu belong to no tensor (before '%s'); safetensors "
                              "requires tensors to cover the data section without gaps",
                              label, (unsigned long long)at, (unsigned long long)ts[i].file_offset, ts[i].name);
            goto done;
        }
        at = ts[i].file_offset + ts[i].nbytes;
    }
    if (at != data_size) {
        rc = di_error_set(err, DEEPINFER_ERR_FORMAT,
                          "%s: %llu trailing data bytes belong to no tensor (tensors end at %llu of %llu)", label,
                          (unsigned long long)(data_size - at), (unsigned long long)at,
                          (unsigned long long)data_size);
        goto done;
    }
    for (size_t i = 0; i < nt; i++) {
        di_tensor *t = &ts[i];
        t->data = t->nbytes && !st->gen ? sh->data + sh->data_start + t->file_offset : NULL;
        t->owner = st;
        t->file_offset += sh->data_start;
        size_t rl = strlen(t->ref_name);
        uint32_t prev;
        int r = di_strmap_put(&st->names, t->ref_name, rl, (uint32_t)(first + i), &prev);
        if (r < 0) {
            rc = oom(err, "indexing tensor names");
            goto done;
        }
        if (r == 0) {
            const di_tensor *o = &st->tensors[prev];
            if (o->shard == si && !strcmp(o->name, t->name))
                rc = di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensor '%s' appears twice in the header", label,
                                  t->name);
            else if (o->shard == si)
                rc = di_error_set(err, DEEPINFER_ERR_FORMAT,
                                  "%s: tensors '%s' and '%s' are the same reference name; keep one spelling",
                                  label, o->name, t->name);
            else
                rc = di_error_set(err, DEEPINFER_ERR_FORMAT, "tensor '%s' is in both %s and %s", t->ref_name,
                                  base_name(st->shards[o->shard].path), base_name(label));
            goto done;
        }
    }
    sh->tensor_count = nt;
done:
    di_json_free(doc);
    return rc;
}

/* ---- shard sets -------------------------------------------------------------------------- */

static deepinfer_status alloc_shards(di_safetensors *st, size_t n, int mapped, di_error *err) {
    st->shards = calloc(n ? n : 1, sizeof *st->shards);
    if (mapped) st->maps = calloc(n ? n : 1, sizeof *st->maps);
    if (!st->shards || (mapped && !st->maps)) return oom(err, "allocating shards");
    for (size_t i = 0; mapped && i < n; i++) st->maps[i].fd = -1;
    st->nshards = n;
    return DEEPINFER_OK;
}

static void compute_totals(di_safetensors *st) {
    memset(&st->totals, 0, sizeof st->totals);
    for (size_t i = 0; i < st->count; i++) {
        const di_tensor *t = &st->tensors[i];
        st->totals.count[t->dtype]++;
        st->totals.bytes[t->dtype] += t->nbytes;
        st->totals.total_count++;
        st->totals.total_bytes += t->nbytes;
    }
}

/* Map and parse every shard whose path is set. */
static deepinfer_status load_shards(di_safetensors *st, di_error *err) {
    for (size_t i = 0; i < st->nshards; i++) {
        di_st_shard_info *sh = &st->shards[i];
        deepinfer_status rc = di_map_file(sh->path, &st->maps[i], err);
        if (rc != DEEPINFER_OK) return rc;
        sh->data = st->maps[i].data;
        sh->size = st->maps[i].size;
        rc = parse_shard(st, (uint32_t)i, err);
        if (rc != DEEPINFER_OK) return rc;
    }
    compute_totals(st);
    return DEEPINFER_OK;
}

static int valid_shard_file_name(const char *s, size_t n) {
    if (n == 0 || n > 255 || strlen(s) != n) return 0;
    if (!strcmp(s, ".") || !strcmp(s, "..")) return 0;
    return strchr(s, '/') == NULL;
}

/* Append "a, b, c" (up to MAX_LISTED names) and " and N more". */
static void list_names(char *buf, size_t n, const char *const *names, size_t count) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < count && i < MAX_LISTED && at < n; i++) {
        int w = snprintf(buf + at, n - at, "%s%s", i ? ", " : "", names[i]);
        if (w < 0) return;
        at += (size_t)w;
    }
    if (count > MAX_LISTED && at < n) snprintf(buf + at, n - at, " and %zu more", count - MAX_LISTED);
}

/* After the shards are loaded: every index entry must exist in its shard, and
 * every tensor must be listed. */
static deepinfer_status cross_check_index(di_safetensors *st, const index_entry *ents, size_t nents,
                                          const di_strmap *idx, di_error *err) {
    const char *bad[MAX_LISTED];
    size_t nbad = 0;
    char list[768];
    for (size_t i = 0; i < nents; i++) {
        uint32_t ti;
        if (!di_strmap_get(&st->names, ents[i].ref, ents[i].ref_len, &ti)) {
            if (nbad < MAX_LISTED) bad[nbad] = ents[i].name;
            nbad++;
            continue;
        }
        const di_tensor *t = &st->tensors[ti];
        if (t->shard != ents[i].shard)
            return di_error_set(err, DEEPINFER_ERR_FORMAT,
                                "index maps tensor '%s' to %s but it is stored in %s; regenerate the index",
                                ents[i].name, base_name(st->shards[ents[i].shard].path),
                                base_name(st->shards[t->shard].path));
    }
    if (nbad) {
        list_names(list, sizeof list, bad, nbad);
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "index lists %zu tensor(s) that are not in their shard: %s; the checkpoint is "
                            "incomplete or the index is stale",
                            nbad, list);
    }
    for (size_t i = 0; i < st->count; i++) {
        uint32_t dummy;
        const di_tensor *t = &st->tensors[i];
        if (!di_strmap_get(idx, t->ref_name, strlen(t->ref_name), &dummy)) {
            if (nbad < MAX_LISTED) bad[nbad] = t->name;
            nbad++;
        }
    }
    if (nbad) {
        list_names(list, sizeof list, bad, nbad);
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "%zu tensor(s) in the shards are missing from the index: %s; regenerate the index",
                            nbad, list);
    }
    return DEEPINFER_OK;
}

static deepinfer_status open_index(di_safetensors *st, const char *index_path, di_error *err) {
    char *text = NULL;
    size_t len = 0;
    deepinfer_status rc = di_read_file(index_path, (size_t)256 << 20, &text, &len, err);
    if (rc != DEEPINFER_OK) return rc;
    di_json_doc *doc = NULL;
    index_entry *ents = NULL;
    di_strmap shard_names = {0}, idx = {0};
    const char **shard_list = NULL;
    size_t nsh = 0;
    char dir[4096];
    const char *slash = strrchr(index_path, '/');
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - index_path), index_path);
    else snprintf(dir, sizeof dir, ".");

    if (di_json_parse(text, len, NULL, &doc, err) != DEEPINFER_OK) {
        rc = di_error_prefix(err, "%s is not valid JSON", index_path);
        goto done;
    }
    const di_json *wm = di_json_get(doc->root, "weight_map");
    if (!wm || wm->type != DI_JSON_OBJECT) {
        rc = di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: missing object \"weight_map\" (tensor name → shard file)",
                          index_path);
        goto done;
    }
    const di_json *ts = di_json_get(di_json_get(doc->root, "metadata"), "total_size");
    int64_t tsv;
    if (ts && di_json_as_i64(ts, &tsv)) st->index_total_size = tsv;

    ents = calloc(wm->count ? wm->count : 1, sizeof *ents);
    if (!ents || di_strmap_init(&shard_names, 64) != 0 || di_strmap_init(&idx, wm->count) != 0) {
        rc = oom(err, "reading the index");
        goto done;
    }
    /* Distinct shard names in order of first appearance. */
    for (uint32_t i = 0; i < wm->count; i++) {
        const di_json *m = &wm->items[i];
        if (m->type != DI_JSON_STRING || !valid_shard_file_name(m->str, m->str_len)) {
            rc = di_error_set(err, DEEPINFER_ERR_FORMAT,
                              "%s: weight_map[\"%s\"] must be a shard file name in the same directory", index_path,
                              m->key);
            goto done;
        }
        if (m->key_len == 0 || strlen(m->key) != m->key_len) {
            rc = di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: weight_map has an empty or NUL-containing name",
                              index_path);
            goto done;
        }
        uint32_t si;
        int r = di_strmap_put(&shard_names, m->str, m->str_len, (uint32_t)nsh, &si);
        if (r < 0) {
            rc = oom(err, "reading the index");
            goto done;
        }
        if (r == 1) {
            si = (uint32_t)nsh++;
            const char **nl = realloc(shard_list, nsh * sizeof *nl);
            if (!nl) {
                rc = oom(err, "reading the index");
                goto done;
            }
            shard_list = nl;
            shard_list[si] = m->str;
        }
        size_t rl = m->key_len;
        const char *ref = strip_model_prefix(m->key, &rl);
        ents[i] = (index_entry){ref, rl, m->key, si};
        uint32_t prev;
        r = di_strmap_put(&idx, ref, rl, i, &prev);
        if (r < 0) {
            rc = oom(err, "reading the index");
            goto done;
        }
        if (r == 0) {
            rc = di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: tensor '%s' is listed twice (as '%s' and '%s')",
                              index_path, ref, wm->items[prev].key, m->key);
            goto done;
        }
    }
    if (nsh == 0) {
        rc = di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: weight_map is empty", index_path);
        goto done;
    }
    rc = alloc_shards(st, nsh, 1, err);
    if (rc == DEEPINFER_OK && reserve_tensors(st, wm->count) != 0) rc = oom(err, "reading the index");
    for (size_t i = 0; rc == DEEPINFER_OK && i < nsh; i++) {
        char p[4096];
        if (di_path_join(p, sizeof p, dir, shard_list[i]) != 0) {
            rc = di_error_set(err, DEEPINFER_ERR_LIMIT, "shard path too long in %s", dir);
            break;
        }
        if (!di_is_file(p)) {
            const char *who = NULL;
            size_t n_for = 0;
            for (uint32_t k = 0; k < wm->count; k++)
                if (ents[k].shard == i) {
                    if (!who) who = ents[k].name;
                    n_for++;
                }
            rc = di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                              "%s lists shard %s (for '%s' and %zu other tensors) but %s does not exist; the "
                              "download is incomplete",
                              base_name(index_path), shard_list[i], who ? who : "?", n_for ? n_for - 1 : 0, p);
            break;
        }
        st->shards[i].path = di_arena_strndup(&st->arena, p, strlen(p));
        if (!st->shards[i].path) rc = oom(err, "reading the index");
    }
    if (rc != DEEPINFER_OK) goto done;
    rc = load_shards(st, err);
    if (rc == DEEPINFER_OK) rc = cross_check_index(st, ents, wm->count, &idx, err);
done:
    free(shard_list);
    di_strmap_free(&shard_names);
    di_strmap_free(&idx);
    free(ents);
    di_json_free(doc);
    free(text);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* A directory without index or model.safetensors: every *.safetensors file. */
static deepinfer_status open_dir_files(di_safetensors *st, const char *dir, di_error *err) {
    DIR *d = opendir(dir);
    if (!d) return di_error_set(err, DEEPINFER_ERR_IO, "cannot read directory %s", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    deepinfer_status rc = DEEPINFER_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".safetensors")) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                rc = oom(err, "listing shards");
                break;
            }
            names = nn;
        }
        names[n] = strdup(e->d_name);
        if (!names[n]) {
            rc = oom(err, "listing shards");
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == DEEPINFER_OK && n == 0)
        rc = di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                          "%s has no " INDEX_NAME ", no " SINGLE_NAME " and no *.safetensors file", dir);
    if (rc == DEEPINFER_OK) {
        qsort(names, n, sizeof *names, cmp_str);
        rc = alloc_shards(st, n, 1, err);
        for (size_t i = 0; rc == DEEPINFER_OK && i < n; i++) {
            char p[4096];
            if (di_path_join(p, sizeof p, dir, names[i]) != 0) {
                rc = di_error_set(err, DEEPINFER_ERR_LIMIT, "shard path too long in %s", dir);
                break;
            }
            st->shards[i].path = di_arena_strndup(&st->arena, p, strlen(p));
            if (!st->shards[i].path) rc = oom(err, "listing shards");
        }
        if (rc == DEEPINFER_OK) rc = load_shards(st, err);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

static deepinfer_status open_single(di_safetensors *st, const char *file, di_error *err) {
    deepinfer_status rc = alloc_shards(st, 1, 1, err);
    if (rc != DEEPINFER_OK) return rc;
    st->shards[0].path = di_arena_strndup(&st->arena, file, strlen(file));
    if (!st->shards[0].path) return oom(err, "opening a checkpoint");
    return load_shards(st, err);
}

deepinfer_status di_st_open(const char *path, di_safetensors **out, di_error *err) {
    *out = NULL;
    if (!path || !*path) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "no checkpoint path given");
    di_safetensors *st = st_new(path);
    if (!st) return oom(err, "opening a checkpoint");
    deepinfer_status rc;
    char p[4096];
    if (di_is_dir(path)) {
        if (di_path_join(p, sizeof p, path, INDEX_NAME) == 0 && di_is_file(p)) rc = open_index(st, p, err);
        else if (di_path_join(p, sizeof p, path, SINGLE_NAME) == 0 && di_is_file(p)) rc = open_single(st, p, err);
        else rc = open_dir_files(st, path, err);
    } else if (!di_is_file(path)) {
        rc = di_error_set(err, DEEPINFER_ERR_NOT_FOUND, "checkpoint %s does not exist", path);
    } else if (has_suffix(path, ".json")) {
        rc = open_index(st, path, err);
    } else {
        rc = open_single(st, path, err);
    }
    if (rc != DEEPINFER_OK) {
        di_st_close(st);
        return rc;
    }
    *out = st;
    return DEEPINFER_OK;
}

deepinfer_status di_st_open_buffer(const void *data, size_t size, const char *label, di_safetensors **out,
                                   di_error *err) {
    *out = NULL;
    if (!label) label = "<memory>";
    di_safetensors *st = st_new(label);
    if (!st) return oom(err, "opening a checkpoint");
    deepinfer_status rc = alloc_shards(st, 1, 0, err);
    if (rc == DEEPINFER_OK) {
        st->shards[0].path = st->path;
        st->shards[0].data = data;
        st->shards[0].size = size;
        rc = parse_shard(st, 0, err);
    }
    if (rc != DEEPINFER_OK) {
        di_st_close(st);
        return rc;
    }
    compute_totals(st);
    *out = st;
    return DEEPINFER_OK;
}

deepinfer_status di_st_open_memory(void *image, size_t size, const char *label, di_safetensors **out,
                                   di_error *err) {
    *out = NULL;
    if (!label) label = "<memory>";
    di_safetensors *st = st_new(label);
    if (!st) {
        if (image && size) munmap(image, size);
        return oom(err, "opening a checkpoint");
    }
    deepinfer_status rc = alloc_shards(st, 1, 1, err);
    if (rc != DEEPINFER_OK) {
        if (image && size) munmap(image, size);
    } else {
        st->maps[0] = (di_mapped_file){.data = image, .size = size, .fd = -1}; /* di_st_close unmaps it */
        st->shards[0].path = st->path;
        st->shards[0].data = image;
        st->shards[0].size = size;
        rc = parse_shard(st, 0, err);
    }
    if (rc != DEEPINFER_OK) {
        di_st_close(st);
        return rc;
    }
    compute_totals(st);
    *out = st;
    return DEEPINFER_OK;
}

deepinfer_status di_st_open_generated(const char *header, size_t header_len, uint64_t data_bytes, di_st_gen_fn gen,
                                      void *ctx, void (*ctx_free)(void *), const char *label, di_safetensors **out,
                                      di_error *err) {
    *out = NULL;
    if (!label) label = "<generated>";
    di_safetensors *st = st_new(label);
    if (!st) {
        if (ctx_free) ctx_free(ctx);
        return oom(err, "opening a checkpoint");
    }
    st->gen = gen, st->gen_ctx = ctx, st->gen_free = ctx_free;
    deepinfer_status rc = gen ? alloc_shards(st, 1, 0, err)
                              : di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "%s: no generator", label);
    if (rc == DEEPINFER_OK && !(st->gen_head = malloc(8 + header_len))) rc = oom(err, "copying a header");
    if (rc == DEEPINFER_OK) {
        for (int b = 0; b < 8; b++) st->gen_head[b] = (unsigned char)((uint64_t)header_len >> (8 * b));
        memcpy(st->gen_head + 8, header, header_len);
        st->shards[0].path = st->path;
        st->shards[0].data = st->gen_head; /* parse_shard reads the length and header only */
        st->shards[0].size = 8 + header_len + data_bytes;
        rc = parse_shard(st, 0, err);
    }
    if (rc != DEEPINFER_OK) {
        di_st_close(st);
        return rc;
    }
    compute_totals(st);
    *out = st;
    return DEEPINFER_OK;
}

/* ---- reading tensor bytes (loaders) ------------------------------------------------------ */

static int shard_fd(const di_tensor *t) {
    const di_safetensors *st = t->owner;
    return st && st->maps && t->shard < st->nshards ? st->maps[t->shard].fd : -1;
}

int di_st_is_file(const di_tensor *t) { return shard_fd(t) >= 0; }

void di_st_populate(const di_tensor *t) {
#ifdef MADV_POPULATE_READ
    if (shard_fd(t) < 0 || !t->nbytes) return;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t ps = pg > 0 ? (uintptr_t)pg : 4096, b = (uintptr_t)t->data & ~(ps - 1), e = (uintptr_t)t->data + t->nbytes;
    madvise((void *)b, e - b, MADV_POPULATE_READ); /* one call instead of a fault per page; a hint (older kernels: EINVAL) */
#else
    (void)t;
#endif
}

int di_st_mapped(const di_tensor *t) { return t->owner && !t->owner->gen; }

deepinfer_status di_st_read(const di_tensor *t, uint64_t off, void *dst, size_t n, di_error *err) {
    if (off > t->nbytes || n > t->nbytes - off)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "tensor %s: bytes %llu..%llu are outside its %llu",
                            t->name, (unsigned long long)off, (unsigned long long)(off + n),
                            (unsigned long long)t->nbytes);
    if (!n) return DEEPINFER_OK;
    const di_safetensors *st = t->owner;
    if (st && st->gen) return st->gen(st->gen_ctx, t, off, dst, n, err);
    int fd = shard_fd(t);
    if (fd < 0) { /* a memory image */
        memcpy(dst, (const unsigned char *)t->data + off, n);
        return DEEPINFER_OK;
    }
    unsigned char *d = dst;
    uint64_t at = t->file_offset + off;
    while (n) {
        ssize_t r = pread(fd, d, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return di_error_set(err, DEEPINFER_ERR_IO, "%s: reading tensor %s at byte %llu: %s",
                                st->shards[t->shard].path, t->name, (unsigned long long)at,
                                r < 0 ? strerror(errno) : "unexpected end of file");
        d += r, at += (uint64_t)r, n -= (size_t)r;
    }
    return DEEPINFER_OK;
}

void di_st_prefetch(const di_tensor *t) {
    int fd = shard_fd(t);
    if (fd >= 0 && t->nbytes) posix_fadvise(fd, (off_t)t->file_offset, (off_t)t->nbytes, POSIX_FADV_WILLNEED);
}

void di_st_release_map(const di_tensor *t) {
    if (shard_fd(t) < 0 || !t->nbytes) return;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t b = (uintptr_t)t->data, e = b + t->nbytes, ps = pg > 0 ? (uintptr_t)pg : 4096;
    b = (b + ps - 1) & ~(ps - 1), e &= ~(ps - 1);
    if (e > b) madvise((void *)b, e - b, MADV_DONTNEED); /* a private read-only file mapping: pages read back */
}

void di_st_release_range(const di_tensor *t, uint64_t len) {
    int fd = shard_fd(t);
    if (fd >= 0 && len) posix_fadvise(fd, (off_t)t->file_offset, (off_t)len, POSIX_FADV_DONTNEED);
}

void di_st_release(const di_tensor *t) {
    di_st_release_map(t); /* unmap first: the page cache keeps pages that a mapping still holds */
    di_st_release_range(t, t->nbytes);
}

void di_st_release_all(const di_safetensors *st) {
    for (size_t i = 0; st && st->maps && i < st->nshards; i++)
        if (st->maps[i].fd >= 0) posix_fadvise(st->maps[i].fd, 0, 0, POSIX_FADV_DONTNEED);
}

/* ---- queries ---------------------------------------------------------------------------- */

size_t di_st_count(const di_safetensors *st) { return st ? st->count : 0; }

const di_tensor *di_st_at(const di_safetensors *st, size_t i) {
    return (st && i < st->count) ? &st->tensors[i] : NULL;
}

const di_tensor *di_st_find(const di_safetensors *st, const char *name) {
    if (!st || !name) return NULL;
    size_t len = strlen(name);
    const char *ref = strip_model_prefix(name, &len);
    uint32_t i;
    return di_strmap_get(&st->names, ref, len, &i) ? &st->tensors[i] : NULL;
}

const di_tensor *di_st_findf(const di_safetensors *st, const char *fmt, ...) {
    char name[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof name) return NULL;
    return di_st_find(st, name);
}

size_t di_st_shard_count(const di_safetensors *st) { return st ? st->nshards : 0; }

const di_st_shard_info *di_st_shard(const di_safetensors *st, size_t i) {
    return (st && i < st->nshards) ? &st->shards[i] : NULL;
}

const di_st_totals *di_st_get_totals(const di_safetensors *st) { return st ? &st->totals : NULL; }

const char *di_st_metadata(const di_safetensors *st, size_t shard, const char *key) {
    if (!st || !key) return NULL;
    for (size_t i = 0; i < st->nmeta; i++)
        if (st->meta[i].shard == shard && !strcmp(st->meta[i].key, key)) return st->meta[i].value;
    return NULL;
}

int64_t di_st_index_total_size(const di_safetensors *st) { return st ? st->index_total_size : -1; }

const char *di_st_path(const di_safetensors *st) { return st ? st->path : NULL; }
