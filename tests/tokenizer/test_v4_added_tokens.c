/*
 * The DeepSeek-V4 added tokens (tests/data/tokenizer/v4_known_added_tokens.json,
 * "v4_confirmed": ids from public third-party sources; README there). The
 * list is first checked against independent data (the released V4.1 config's
 * vocabulary size and bos/eos/pad ids; the V3 file's ids of the tokens both
 * have). V4's
 * tokenizer is V3's byte-level BPE (tests/data/tokenizer/tokenizer.json) with
 * a different added-token table (ids 128000..129279), so the test builds
 * that tokenizer: the V3 file with its added tokens replaced by V4's list
 * (placeholders at the ids the list does not know), loaded through the
 * normal loader. Then, for every listed token: the id lookup, an atomic match inside
 * text, the decode, skip_special; and DeepSeek's official V4 chat vectors
 * (tests/data/chat/v4/output_*.txt) encode every occurrence of a listed token
 * to its listed id.
 */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "model/config.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"

typedef struct v4_tok {
    const char *content;
    int32_t id;
} v4_tok;

/* The end of the JSON array that starts at s[0] == '[' (strings skipped); NULL if unbalanced. */
static const char *array_end(const char *s) {
    int depth = 0, in_str = 0;
    for (const char *p = s; *p; p++) {
        if (in_str) {
            if (*p == '\\' && p[1]) p++;
            else if (*p == '"') in_str = 0;
        } else if (*p == '"') in_str = 1;
        else if (*p == '[') depth++;
        else if (*p == ']' && --depth == 0) return p + 1;
    }
    return NULL;
}

/* A JSON string literal of s (the listed tokens need only '"' and '\\' escaped). */
static void put_json_str(char **w, const char *s) {
    *(*w)++ = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') *(*w)++ = '\\';
        *(*w)++ = *s;
    }
    *(*w)++ = '"';
}

/* One added-token entry of tokenizer.json. */
static void put_added(char **w, int first, int32_t id, const char *content) {
    *w += sprintf(*w, "%s{\"id\": %d, \"content\": ", first ? "" : ", ", id);
    put_json_str(w, content);
    *w += sprintf(*w, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
                      "\"special\": true}");
}

/* The V3 tokenizer.json text with "added_tokens" replaced by V4's table: the listed tokens below
 * 128000 (vocab entries), then every id 128000 .. 129279 in order, the listed token where the list
 * has one and a placeholder elsewhere (HF, like our loader, numbers added tokens by their order and
 * not by the file's "id", so a real V4 file fills the whole range). */
static char *v4_tokenizer_json(const v4_tok *t, int n, size_t *len) {
    char *v3 = NULL;
    size_t v3_len = 0;
    if (di_read_file(di_test_data("tokenizer/tokenizer.json"), 0, &v3, &v3_len, NULL)) return NULL;
    const char *key = strstr(v3, "\"added_tokens\"");
    const char *open = key ? strchr(key, '[') : NULL;
    const char *close = open ? array_end(open) : NULL;
    char *out = close ? malloc(v3_len + (size_t)(n + 1280) * 256 + 16) : NULL;
    if (out) {
        char *w = out;
        memcpy(w, v3, (size_t)(open - v3));
        w += open - v3;
        *w++ = '[';
        int first = 1;
        for (int i = 0; i < n; i++)
            if (t[i].id < 128000) put_added(&w, first, t[i].id, t[i].content), first = 0;
        for (int32_t id = 128000; id < 129280; id++) {
            const char *c = NULL;
            char ph[64];
            for (int i = 0; i < n; i++)
                if (t[i].id == id) c = t[i].content;
            if (!c) snprintf(ph, sizeof ph, "<|test_placeholder_%d|>", id), c = ph;
            put_added(&w, first, id, c);
            first = 0;
        }
        *w++ = ']';
        size_t rest = v3_len - (size_t)(close - v3);
        memcpy(w, close, rest);
        w += rest;
        *w = '\0';
        *len = (size_t)(w - out);
    }
    free(v3);
    return out;
}

static size_t count_sub(const char *s, size_t n, const char *sub) {
    size_t k = 0, m = strlen(sub);
    for (const char *p = s; (p = memmem(p, n - (size_t)(p - s), sub, m)); p += m) k++;
    return k;
}

TEST(v4_added_tokens_match_the_known_list) {
    char *text = NULL;
    size_t len = 0;
    di_error err = {0};
    di_json_doc *doc = NULL;
    CHECK(di_read_file(di_test_data("tokenizer/v4_known_added_tokens.json"), 0, &text, &len, &err) == DEEPINFER_OK);
    CHECK(di_json_parse(text, len, NULL, &doc, &err) == DEEPINFER_OK);
    free(text);
    const di_json *list = di_json_get(doc->root, "v4_confirmed");
    CHECK(list && list->type == DI_JSON_OBJECT && list->count == 16);
    v4_tok toks[16];
    int n = 0;
    for (uint32_t i = 0; i < list->count; i++) {
        int64_t id = -1;
        CHECK(di_json_as_i64(&list->items[i], &id) && id >= 0 && id < 129280);
        toks[n++] = (v4_tok){list->items[i].key, (int32_t)id};
    }
    /* The list against independent data: the released V4.1-Flash config (same vocabulary size and
     * bos / eos / pad ids), and the V3 file, whose added tokens V4 kept at the same ids where both
     * have them (the chat roles and the sentence markers). */
    di_model_config cfg;
    CHECK(di_config_load(di_test_data("config/deepseek-v41-flash.json"), &cfg, &err) == DEEPINFER_OK);
    int64_t vocab = 0;
    CHECK(di_json_as_i64(di_json_get(doc->root, "vocab_size_model"), &vocab) && vocab == cfg.vocab_size);
    di_tokenizer *v3 = NULL;
    CHECK(di_tokenizer_load(di_test_data("tokenizer/tokenizer.json"), &v3, &err) == DEEPINFER_OK);
    int shared = 0;
    for (int i = 0; i < n; i++) {
        int32_t id3 = di_tokenizer_token_id(v3, toks[i].content);
        if (id3 >= 0) {
            CHECK_MSG(id3 == toks[i].id, "%s: listed %d, the V3 file %d", toks[i].content, toks[i].id, id3);
            shared++;
        }
        if (!strcmp(toks[i].content, "<｜begin▁of▁sentence｜>")) CHECK_EQ_INT(toks[i].id, cfg.bos_token_id);
        if (!strcmp(toks[i].content, "<｜end▁of▁sentence｜>")) CHECK_EQ_INT(toks[i].id, cfg.eos_token_id);
        if (!strcmp(toks[i].content, "<｜▁pad▁｜>")) CHECK_EQ_INT(toks[i].id, cfg.pad_token_id);
        if (!strcmp(toks[i].content, "<｜image｜>")) CHECK_EQ_INT(toks[i].id, vocab - 1);
    }
    di_tokenizer_free(v3);
    CHECK_EQ_INT(shared, 5);
    char *json = v4_tokenizer_json(toks, n, &len);
    CHECK(json);
    di_tokenizer *tok = NULL;
    CHECK_MSG(di_tokenizer_load_json(json, len, &tok, &err) == DEEPINFER_OK, "%s", err.msg);
    free(json);
    CHECK_EQ_INT(di_tokenizer_vocab_size(tok), 129280); /* vocab_size_model: <｜image｜> = 129279 is the last id */
    int32_t *ids = NULL;
    size_t nid = 0, cap = 0;
    for (int i = 0; i < n; i++) {
        const char *c = toks[i].content;
        CHECK_MSG(di_tokenizer_token_id(tok, c) == toks[i].id, "%s: id %d, listed %d", c, di_tokenizer_token_id(tok, c),
                  toks[i].id);
        CHECK_MSG(di_tokenizer_is_special(tok, toks[i].id), "%s is not special", c);
        /* atomic inside text: "ab<tok>cd" -> ids(ab) <tok> ids(cd) */
        char in[128];
        snprintf(in, sizeof in, "ab%scd", c);
        nid = 0; /* encode appends */
        CHECK(di_tokenizer_encode(tok, in, strlen(in), &ids, &nid, &cap, &err) == DEEPINFER_OK);
        int at = -1;
        for (size_t k = 0; k < nid; k++)
            if (ids[k] == toks[i].id) at = (int)k;
        CHECK_MSG(at > 0 && at < (int)nid - 1, "%s: not one token inside \"%s\"", c, in);
        char *dec = NULL;
        size_t dl = 0;
        CHECK(di_tokenizer_decode(tok, ids, nid, 0, &dec, &dl, &err) == DEEPINFER_OK);
        CHECK_MSG(dl == strlen(in) && !memcmp(dec, in, dl), "%s: decode \"%.*s\"", c, (int)dl, dec);
        free(dec);
        CHECK(di_tokenizer_decode(tok, ids, nid, 1, &dec, &dl, &err) == DEEPINFER_OK);
        CHECK_MSG(dl == 4 && !memcmp(dec, "abcd", 4), "%s: skip_special decode \"%.*s\"", c, (int)dl, dec);
        free(dec);
    }
    /* DeepSeek's official V4 chat vectors: each occurrence of a listed token is that id */
    int seen = 0;
    for (int f = 1; f <= 4; f++) {
        char rel[64];
        snprintf(rel, sizeof rel, "chat/v4/output_%d.txt", f);
        CHECK(di_read_file(di_test_data(rel), 0, &text, &len, &err) == DEEPINFER_OK);
        nid = 0;
        CHECK(di_tokenizer_encode(tok, text, len, &ids, &nid, &cap, &err) == DEEPINFER_OK);
        for (int i = 0; i < n; i++) {
            size_t want = count_sub(text, len, toks[i].content), got = 0;
            for (size_t k = 0; k < nid; k++) got += ids[k] == toks[i].id;
            CHECK_MSG(got == want, "%s: %s occurs %zu times, id %d encoded %zu times", rel, toks[i].content, want,
                      toks[i].id, got);
            seen += want > 0;
        }
        free(text);
    }
    fprintf(stderr, "    %d V4 added tokens; %d (token, vector) pairs occur in the official V4 chat vectors\n", n, seen);
    CHECK(seen >= 4); /* the vectors use at least <｜begin▁of▁sentence｜>, <｜User｜>, <｜Assistant｜>, ｜DSML｜ */
    free(ids);
    di_tokenizer_free(tok);
    di_json_free(doc);
}
