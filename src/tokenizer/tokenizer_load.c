/*
 * tokenizer_load.c — build a di_tokenizer from a Hugging Face tokenizer.json.
 *
 * Supported (everything else is refused with an error naming the field):
 *   model        BPE with vocab + merges ("a b" strings or ["a", "b"] pairs),
 *                ignore_merges, unk_token/fuse_unk; no dropout, no
 *                byte_fallback, no continuing_subword_prefix/end_of_word_suffix
 *   normalizer   null or an empty Sequence
 *   pre_tokenizer ByteLevel, or a Sequence of Split steps ending in ByteLevel
 *   decoder      ByteLevel (or null)
 *   added_tokens any, with single_word / lstrip / rstrip / normalized / special
 *   post_processor is not applied: encode never adds BOS/EOS (DeepSeek's
 *                file has only ByteLevel there, which changes offsets only)
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tokenizer/tok_internal.h"
#include "util/file.h"

static _Atomic uint64_t g_serial = 1;

#define FAIL(code, ...) return di_error_set(err, code, __VA_ARGS__)

static int is_null(const di_json *v) { return !v || v->type == DI_JSON_NULL; }

static int get_bool(const di_json *obj, const char *key, int def) {
    const di_json *v = di_json_get(obj, key);
    int b;
    return v && di_json_as_bool(v, &b) ? b : def;
}

static const char *type_of(const di_json *obj) {
    const di_json *t = di_json_get(obj, "type");
    return t && t->type == DI_JSON_STRING ? t->str : NULL;
}

/* ---- normalizer ---- */
static deepinfer_status check_normalizer(const di_json *n, di_error *err) {
    if (is_null(n)) return DEEPINFER_OK;
    const char *t = type_of(n);
    if (t && !strcmp(t, "Sequence")) {
        const di_json *list = di_json_get(n, "normalizers");
        if (!list || list->type != DI_JSON_ARRAY)
            FAIL(DEEPINFER_ERR_FORMAT, "normalizer: a Sequence needs a \"normalizers\" array");
        for (uint32_t i = 0; i < list->count; i++) {
            deepinfer_status s = check_normalizer(&list->items[i], err);
            if (s) return s;
        }
        return DEEPINFER_OK;
    }
    FAIL(DEEPINFER_ERR_UNSUPPORTED,
         "normalizer \"%s\" is not supported (only byte-level BPE tokenizers without a normalizer, or with an empty "
         "Sequence, can be loaded)",
         t ? t : "(no type)");
}

/* ---- pre_tokenizer ---- */
static deepinfer_status add_split(di_pretok *p, const di_json *st, di_error *err) {
    if (p->nsteps >= DI_MAX_SPLITS) FAIL(DEEPINFER_ERR_UNSUPPORTED, "pre_tokenizer: more than %d Split steps", DI_MAX_SPLITS);
    const di_json *pat = di_json_get(st, "pattern");
    const di_json *re = pat ? di_json_get(pat, "Regex") : NULL;
    const di_json *lit = pat ? di_json_get(pat, "String") : NULL;
    const di_json *src = re ? re : lit;
    if (!src || src->type != DI_JSON_STRING)
        FAIL(DEEPINFER_ERR_FORMAT, "pre_tokenizer Split: \"pattern\" must be {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    const di_json *beh = di_json_get(st, "behavior");
    if (!beh || beh->type != DI_JSON_STRING) FAIL(DEEPINFER_ERR_FORMAT, "pre_tokenizer Split: missing \"behavior\"");
    static const struct {
        const char *name;
        di_split_behavior b;
    } names[] = {{"Isolated", DI_SPLIT_ISOLATED},
                 {"Removed", DI_SPLIT_REMOVED},
                 {"MergedWithPrevious", DI_SPLIT_MERGED_WITH_PREVIOUS},
                 {"MergedWithNext", DI_SPLIT_MERGED_WITH_NEXT},
                 {"Contiguous", DI_SPLIT_CONTIGUOUS}};
    int found = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(beh->str, names[i].name)) found = i;
    if (found < 0) FAIL(DEEPINFER_ERR_UNSUPPORTED, "pre_tokenizer Split: unknown behavior \"%s\"", beh->str);
    di_split_step *s = &p->steps[p->nsteps];
    s->behavior = names[found].b;
    s->invert = get_bool(st, "invert", 0);
    deepinfer_status rc = di_regex_compile(&s->re, src->str, src->str_len, lit != NULL && re == NULL, err);
    if (rc) return di_error_prefix(err, "pre_tokenizer Split %d", p->nsteps + 1);
    p->nsteps++;
    return DEEPINFER_OK;
}

#define GPT2_REGEX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static deepinfer_status add_bytelevel(di_pretok *p, const di_json *st, di_error *err) {
    p->nsplits = p->nsteps;
    p->add_prefix_space = get_bool(st, "add_prefix_space", 1);
    if (get_bool(st, "use_regex", 1)) {
        di_split_step *s = &p->steps[p->nsteps];
        s->behavior = DI_SPLIT_ISOLATED;
        deepinfer_status rc = di_regex_compile(&s->re, GPT2_REGEX, strlen(GPT2_REGEX), 0, err);
        if (rc) return rc;
        p->nsteps++;
    }
    return DEEPINFER_OK;
}

static deepinfer_status load_pretok(di_pretok *p, const di_json *pt, di_error *err) {
    const char *t = is_null(pt) ? NULL : type_of(pt);
    if (t && !strcmp(t, "ByteLevel")) return add_bytelevel(p, pt, err);
    if (!t || strcmp(t, "Sequence") != 0)
        FAIL(DEEPINFER_ERR_UNSUPPORTED,
             "pre_tokenizer \"%s\" is not supported: expected ByteLevel, or a Sequence of Split steps ending in "
             "ByteLevel (byte-level BPE)",
             t ? t : "null");
    const di_json *list = di_json_get(pt, "pretokenizers");
    if (!list || list->type != DI_JSON_ARRAY)
        FAIL(DEEPINFER_ERR_FORMAT, "pre_tokenizer: a Sequence needs a \"pretokenizers\" array");
    int have_bl = 0;
    for (uint32_t i = 0; i < list->count; i++) {
        const di_json *st = &list->items[i];
        const char *st_t = type_of(st);
        if (have_bl)
            FAIL(DEEPINFER_ERR_UNSUPPORTED, "pre_tokenizer: a step (\"%s\") after ByteLevel is not supported",
                 st_t ? st_t : "?");
        if (st_t && !strcmp(st_t, "Split")) {
            deepinfer_status s = add_split(p, st, err);
            if (s) return s;
        } else if (st_t && !strcmp(st_t, "ByteLevel")) {
            deepinfer_status s = add_bytelevel(p, st, err);
            if (s) return s;
            have_bl = 1;
        } else {
            FAIL(DEEPINFER_ERR_UNSUPPORTED, "pre_tokenizer step \"%s\" is not supported (Split and ByteLevel are)",
                 st_t ? st_t : "(no type)");
        }
    }
    if (!have_bl)
        FAIL(DEEPINFER_ERR_UNSUPPORTED, "pre_tokenizer has no ByteLevel step: only byte-level BPE is supported");
    return DEEPINFER_OK;
}

static deepinfer_status check_decoder(const di_json *d, di_error *err) {
    if (is_null(d)) return DEEPINFER_OK;
    const char *t = type_of(d);
    if (t && !strcmp(t, "ByteLevel")) return DEEPINFER_OK;
    if (t && !strcmp(t, "Sequence")) {
        const di_json *list = di_json_get(d, "decoders");
        for (uint32_t i = 0; list && i < list->count; i++) {
            deepinfer_status s = check_decoder(&list->items[i], err);
            if (s) return s;
        }
        return DEEPINFER_OK;
    }
    FAIL(DEEPINFER_ERR_UNSUPPORTED, "decoder \"%s\" is not supported (ByteLevel is)", t ? t : "(no type)");
}

/* ---- model ---- */
static deepinfer_status load_model(di_tokenizer *tok, const di_json *m, int32_t *max_id, di_error *err) {
    if (!m || m->type != DI_JSON_OBJECT) FAIL(DEEPINFER_ERR_FORMAT, "missing \"model\" object");
    const char *t = type_of(m);
    if (t && strcmp(t, "BPE") != 0)
        FAIL(DEEPINFER_ERR_UNSUPPORTED, "model type \"%s\" is not supported (only BPE)", t);
    const di_json *v = di_json_get(m, "dropout");
    double dropout = 0;
    if (!is_null(v) && (!di_json_as_f64(v, &dropout) || dropout != 0.0))
        FAIL(DEEPINFER_ERR_UNSUPPORTED, "model.dropout is set: BPE dropout is random and not supported for inference");
    if (get_bool(m, "byte_fallback", 0))
        FAIL(DEEPINFER_ERR_UNSUPPORTED, "model.byte_fallback (SentencePiece-style BPE) is not supported");
    const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        v = di_json_get(m, affix[i]);
        if (!is_null(v) && !(v->type == DI_JSON_STRING && v->str_len == 0))
            FAIL(DEEPINFER_ERR_UNSUPPORTED, "model.%s is not supported", affix[i]);
    }
    tok->ignore_merges = get_bool(m, "ignore_merges", 0);
    tok->fuse_unk = get_bool(m, "fuse_unk", 0);

    const di_json *vocab = di_json_get(m, "vocab");
    if (!vocab || vocab->type != DI_JSON_OBJECT) FAIL(DEEPINFER_ERR_FORMAT, "model.vocab must be an object");
    for (uint32_t i = 0; i < vocab->count; i++) {
        const di_json *e = &vocab->items[i];
        int64_t id;
        if (!di_json_as_i64(e, &id) || id < 0 || id >= (1 << 30))
            FAIL(DEEPINFER_ERR_FORMAT, "model.vocab[\"%.80s\"]: the id must be an integer in [0, 2^30)", e->key);
        if (tok_map_get(&tok->vocab, (const uint8_t *)e->key, e->key_len) >= 0)
            FAIL(DEEPINFER_ERR_FORMAT, "model.vocab: token \"%.80s\" appears twice", e->key);
        const char *key = di_arena_strndup(&tok->arena, e->key, e->key_len);
        if (!key || tok_map_add(&tok->vocab, (const uint8_t *)key, e->key_len, (int32_t)id))
            FAIL(DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory reading the vocab");
        if ((int32_t)id > *max_id) *max_id = (int32_t)id;
    }
    v = di_json_get(m, "unk_token");
    tok->unk_id = -1;
    if (!is_null(v)) {
        if (v->type != DI_JSON_STRING) FAIL(DEEPINFER_ERR_FORMAT, "model.unk_token must be a string or null");
        tok->unk_id = tok_map_get(&tok->vocab, (const uint8_t *)v->str, v->str_len);
        if (tok->unk_id < 0) FAIL(DEEPINFER_ERR_FORMAT, "model.unk_token \"%.80s\" is not in the vocab", v->str);
    }

    const di_json *merges = di_json_get(m, "merges");
    if (!merges || merges->type != DI_JSON_ARRAY) FAIL(DEEPINFER_ERR_FORMAT, "model.merges must be an array");
    char *cat = NULL;
    size_t cat_cap = 0;
    for (uint32_t i = 0; i < merges->count; i++) {
        const di_json *e = &merges->items[i];
        const char *a, *b;
        size_t al, bl;
        if (e->type == DI_JSON_STRING) {
            const char *sp = memchr(e->str, ' ', e->str_len);
            if (!sp || memchr(sp + 1, ' ', e->str_len - (size_t)(sp + 1 - e->str))) {
                free(cat);
                FAIL(DEEPINFER_ERR_FORMAT, "model.merges[%u] = \"%.80s\": expected two tokens separated by one space", i,
                     e->str);
            }
            a = e->str;
            al = (size_t)(sp - e->str);
            b = sp + 1;
            bl = e->str_len - al - 1;
        } else if (e->type == DI_JSON_ARRAY && e->count == 2 && e->items[0].type == DI_JSON_STRING &&
                   e->items[1].type == DI_JSON_STRING) {
            a = e->items[0].str;
            al = e->items[0].str_len;
            b = e->items[1].str;
            bl = e->items[1].str_len;
        } else {
            free(cat);
            FAIL(DEEPINFER_ERR_FORMAT, "model.merges[%u]: expected \"a b\" or [\"a\", \"b\"]", i);
        }
        int32_t ia = tok_map_get(&tok->vocab, (const uint8_t *)a, al);
        int32_t ib = tok_map_get(&tok->vocab, (const uint8_t *)b, bl);
        if (ia < 0 || ib < 0) {
            free(cat);
            FAIL(DEEPINFER_ERR_FORMAT, "model.merges[%u]: token \"%.*s\" is not in the vocab", i,
                 (int)(ia < 0 ? (al > 80 ? 80 : al) : (bl > 80 ? 80 : bl)), ia < 0 ? a : b);
        }
        if (al + bl > cat_cap) {
            cat_cap = (al + bl) * 2 + 64;
            char *nc = realloc(cat, cat_cap);
            if (!nc) {
                free(cat);
                FAIL(DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory reading merges");
            }
            cat = nc;
        }
        memcpy(cat, a, al);
        memcpy(cat + al, b, bl);
        int32_t im = tok_map_get(&tok->vocab, (const uint8_t *)cat, al + bl);
        if (im < 0) {
            di_error_set(err, DEEPINFER_ERR_FORMAT, "model.merges[%u]: the merged token \"%.*s\" is not in the vocab", i,
                         (int)(al + bl > 80 ? 80 : al + bl), cat);
            free(cat);
            return DEEPINFER_ERR_FORMAT;
        }
        if (di_bpe_add_merge(tok, ia, ib, i, im)) {
            free(cat);
            FAIL(DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory reading merges");
        }
    }
    free(cat);
    for (int b = 0; b < 256; b++) {
        uint8_t s[4];
        size_t n = di_utf8_put(di_bytelevel_char((uint8_t)b), s);
        tok->byte_id[b] = tok_map_get(&tok->vocab, s, n);
    }
    return DEEPINFER_OK;
}

/* ---- added tokens ----
 * Ids are assigned the way HF's AddedVocabulary::add_tokens does, in file
 * order, whatever the "id" fields say: a content already in the vocab (or
 * added before) keeps that id; a new one gets the vocab size, or one past
 * the largest added id once that reaches the vocab size. (HF only warns
 * when the file's id differs; DeepSeek's files agree with this rule.) A
 * repeated content keeps its id and takes the later flags. */
static deepinfer_status load_added(di_tokenizer *tok, const di_json *list, int32_t *max_id, di_error *err) {
    if (is_null(list)) return DEEPINFER_OK;
    if (list->type != DI_JSON_ARRAY) FAIL(DEEPINFER_ERR_FORMAT, "\"added_tokens\" must be an array");
    tok->added_tokens = di_arena_calloc(&tok->arena, list->count ? list->count : 1, sizeof *tok->added_tokens);
    if (!tok->added_tokens) FAIL(DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory reading added_tokens");
    int64_t vocab_size = (int64_t)tok->vocab.count, max_added = -1;
    for (uint32_t i = 0; i < list->count; i++) {
        const di_json *e = &list->items[i];
        const di_json *c = di_json_get(e, "content");
        int64_t file_id;
        if (e->type != DI_JSON_OBJECT || !c || c->type != DI_JSON_STRING)
            FAIL(DEEPINFER_ERR_FORMAT, "added_tokens[%u]: expected an object with a string \"content\"", i);
        if (!di_json_as_i64(di_json_get(e, "id"), &file_id) || file_id < 0 || file_id >= (1 << 30))
            FAIL(DEEPINFER_ERR_FORMAT, "added_tokens[%u] (\"%.80s\"): \"id\" must be an integer in [0, 2^30)", i, c->str);
        if (c->str_len == 0) continue; /* HF ignores empty added tokens */
        int32_t id = tok_map_get(&tok->added, (const uint8_t *)c->str, c->str_len);
        di_added_token *t = NULL;
        if (id >= 0) { /* seen before: same id, later flags */
            for (int k = 0; k < tok->nadded; k++)
                if (tok->added_tokens[k].id == id) t = &tok->added_tokens[k];
        } else {
            id = tok_map_get(&tok->vocab, (const uint8_t *)c->str, c->str_len);
            if (id < 0) id = (int32_t)(max_added < 0 ? vocab_size : max_added >= vocab_size ? max_added + 1 : vocab_size);
            if (id >= (1 << 30)) FAIL(DEEPINFER_ERR_FORMAT, "added_tokens: too many tokens");
            t = &tok->added_tokens[tok->nadded++];
            t->content = (const uint8_t *)di_arena_strndup(&tok->arena, c->str, c->str_len);
            if (!t->content) FAIL(DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory reading added_tokens");
            t->len = (uint32_t)c->str_len;
            t->id = id;
            if (tok_map_add(&tok->added, t->content, t->len, t->id))
                FAIL(DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory reading added_tokens");
        }
        if (id > max_added) max_added = id;
        t->single_word = (uint8_t)get_bool(e, "single_word", 0);
        t->lstrip = (uint8_t)get_bool(e, "lstrip", 0);
        t->rstrip = (uint8_t)get_bool(e, "rstrip", 0);
        t->special = (uint8_t)get_bool(e, "special", 0);
        t->normalized = (uint8_t)get_bool(e, "normalized", !t->special);
        if (t->id > *max_id) *max_id = t->id;
    }
    return DEEPINFER_OK;
}

/* Per-id tables: the file's string and the decoded bytes. */
static deepinfer_status build_id_tables(di_tokenizer *tok, int32_t max_id, di_error *err) {
    /* The tables below are indexed by id: a few ids far apart would make a small file take gigabytes
     * (found by fuzz_tokenizer_load). Real vocabularies are dense (HF also numbers added tokens in
     * order), so ids may leave holes, but not more holes than there are tokens. */
    int64_t ntok = (int64_t)tok->vocab.count + tok->nadded;
    if ((int64_t)max_id + 1 > 2 * ntok + 1024)
        FAIL(DEEPINFER_ERR_FORMAT, "token ids reach %d for %lld tokens: the id space is too sparse", max_id,
             (long long)ntok);
    tok->nids = max_id + 1;
    size_t n = (size_t)tok->nids;
    tok->id_bytes = di_arena_calloc(&tok->arena, n, sizeof *tok->id_bytes);
    tok->id_bytes_len = di_arena_calloc(&tok->arena, n, sizeof *tok->id_bytes_len);
    tok->id_str = di_arena_calloc(&tok->arena, n, sizeof *tok->id_str);
    tok->id_str_len = di_arena_calloc(&tok->arena, n, sizeof *tok->id_str_len);
    tok->id_flags = di_arena_calloc(&tok->arena, n, 1);
    if (!tok->id_bytes || !tok->id_bytes_len || !tok->id_str || !tok->id_str_len || !tok->id_flags)
        FAIL(DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory building the id tables");
    for (size_t i = 0; i < tok->vocab.cap; i++) {
        const di_strmap_slot *sl = &tok->vocab.slots[i];
        if (!sl->key) continue;
        tok->id_str[sl->val] = (const uint8_t *)sl->key;
        tok->id_str_len[sl->val] = sl->len;
        tok->id_flags[sl->val] = DI_TOKF_DEFINED;
    }
    for (int i = 0; i < tok->nadded; i++) { /* added tokens take precedence, as in HF's id_to_token */
        const di_added_token *t = &tok->added_tokens[i];
        tok->id_str[t->id] = t->content;
        tok->id_str_len[t->id] = t->len;
        tok->id_flags[t->id] = DI_TOKF_DEFINED | DI_TOKF_ADDED | (t->special ? DI_TOKF_SPECIAL : 0);
    }
    for (size_t id = 0; id < n; id++) {
        if (!tok->id_str[id]) continue;
        uint8_t *b = di_arena_alloc(&tok->arena, tok->id_str_len[id] + 1);
        if (!b) FAIL(DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory building the id tables");
        size_t bl = di_bytelevel_decode_token(tok->id_str[id], tok->id_str_len[id], b);
        b[bl] = 0;
        tok->id_bytes[id] = b;
        tok->id_bytes_len[id] = (uint32_t)bl;
    }
    return DEEPINFER_OK;
}

static deepinfer_status load_doc(di_tokenizer *tok, const di_json *root, di_error *err) {
    if (!root || root->type != DI_JSON_OBJECT) FAIL(DEEPINFER_ERR_FORMAT, "the top level must be a JSON object");
    deepinfer_status s = check_normalizer(di_json_get(root, "normalizer"), err);
    if (s) return s;
    if ((s = check_decoder(di_json_get(root, "decoder"), err))) return s;
    if ((s = load_pretok(&tok->pretok, di_json_get(root, "pre_tokenizer"), err))) return s;
    int32_t max_id = -1;
    if ((s = load_model(tok, di_json_get(root, "model"), &max_id, err))) return s;
    if ((s = load_added(tok, di_json_get(root, "added_tokens"), &max_id, err))) return s;
    if (max_id < 0) FAIL(DEEPINFER_ERR_FORMAT, "the tokenizer defines no tokens");
    if ((s = build_id_tables(tok, max_id, err))) return s;
    return di_added_build(tok, err);
}

deepinfer_status di_tokenizer_load_json(const char *text, size_t len, di_tokenizer **out, di_error *err) {
    *out = NULL;
    di_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) FAIL(DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory loading a tokenizer");
    di_arena_init(&tok->arena, 1 << 20);
    tok->serial = atomic_fetch_add(&g_serial, 1);
    tok->unk_id = -1;
    di_json_doc *doc = NULL;
    deepinfer_status s = di_json_parse(text, len, NULL, &doc, err);
    if (s == DEEPINFER_OK) s = load_doc(tok, doc->root, err);
    di_json_free(doc); /* every string we keep was copied into tok->arena */
    if (s != DEEPINFER_OK) {
        di_tokenizer_free(tok);
        return s;
    }
    *out = tok;
    return DEEPINFER_OK;
}

deepinfer_status di_tokenizer_load(const char *path, di_tokenizer **out, di_error *err) {
    char file[4096];
    if (!path) FAIL(DEEPINFER_ERR_INVALID_ARGUMENT, "no tokenizer path given");
    if (di_is_dir(path)) {
        if (di_path_join(file, sizeof file, path, "tokenizer.json"))
            FAIL(DEEPINFER_ERR_INVALID_ARGUMENT, "path too long: %s", path);
    } else {
        if (strlen(path) >= sizeof file) FAIL(DEEPINFER_ERR_INVALID_ARGUMENT, "path too long: %s", path);
        strcpy(file, path);
    }
    char *text = NULL;
    size_t len = 0;
    deepinfer_status s = di_read_file(file, 0, &text, &len, err);
    if (s) return s;
    s = di_tokenizer_load_json(text, len, out, err);
    free(text);
    if (s) di_error_prefix(err, "%s", file);
    return s;
}

void di_tokenizer_free(di_tokenizer *tok) {
    if (!tok) return;
    for (int i = 0; i < tok->pretok.nsteps; i++) di_regex_free(&tok->pretok.steps[i].re);
    di_added_free(tok);
    di_strmap_free(&tok->vocab);
    di_strmap_free(&tok->added);
    free(tok->merge_keys);
    free(tok->merge_vals);
    di_arena_free(&tok->arena);
    free(tok);
}
