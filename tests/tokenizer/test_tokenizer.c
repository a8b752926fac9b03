/*
 * Tokenizer unit tests: options DeepSeek's file does not use (against HF's
 * ids for synthetic files), the streaming decoder, the invalid-UTF-8 policy
 * and clear errors for bad tokenizer.json files.
 */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"

static di_tokenizer *load_deepseek(void) {
    di_tokenizer *tok = NULL;
    di_error err = {0};
    if (di_tokenizer_load(di_test_data("tokenizer"), &tok, &err) != DEEPINFER_OK) fprintf(stderr, "    %s\n", err.msg);
    return tok;
}

TEST(tokenizer_synthetic_files_match_hf) {
    /* tests/data/tokenizer/tiny/: ByteLevel regex + prefix space, added-token
     * lstrip/rstrip/single_word/normalized, Split behaviors, invert,
     * ignore_merges, unk/fuse_unk, merges as pairs (tests/oracle/gen_tiny.js). */
    char *text = NULL;
    size_t len = 0, pos = 0;
    di_error err = {0};
    CHECK(di_read_file(di_test_data("tokenizer/tiny/cases.jsonl"), 0, &text, &len, &err) == DEEPINFER_OK);
    char cur[64] = "";
    di_tokenizer *tok = NULL;
    int n = 0, fails = 0, files = 0;
    int32_t *ids = NULL;
    size_t cap = 0;
    while (pos < len) {
        char *nl = memchr(text + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
        di_json_doc *doc = NULL;
        CHECK(di_json_parse(text + pos, ll, NULL, &doc, &err) == DEEPINFER_OK);
        const char *name = di_json_get(doc->root, "tokenizer")->str;
        if (strcmp(name, cur)) {
            di_tokenizer_free(tok);
            tok = NULL;
            char rel[128];
            snprintf(rel, sizeof rel, "tokenizer/tiny/%s.json", name);
            CHECK_MSG(di_tokenizer_load(di_test_data(rel), &tok, &err) == DEEPINFER_OK, "%s: %s", name, err.msg);
            snprintf(cur, sizeof cur, "%s", name);
            files++;
        }
        const di_json *t = di_json_get(doc->root, "text"), *exp = di_json_get(doc->root, "ids");
        size_t k = 0;
        CHECK(di_tokenizer_encode(tok, t->str, t->str_len, &ids, &k, &cap, &err) == DEEPINFER_OK);
        int ok = k == exp->count;
        for (size_t i = 0; ok && i < k; i++) ok = ids[i] == exp->items[i].i64;
        if (!ok) {
            if (fails < 6) {
                fprintf(stderr, "    %s %.100s\n      ours: ", name, text + pos);
                for (size_t i = 0; i < k && i < 30; i++) fprintf(stderr, "%d ", ids[i]);
                fprintf(stderr, "\n");
            }
            fails++;
        }
        di_json_free(doc);
        n++;
        pos += ll + 1;
    }
    fprintf(stderr, "    synthetic: %d/%d cases agree over %d tokenizer files\n", n - fails, n, files);
    free(ids);
    free(text);
    di_tokenizer_free(tok);
    CHECK_EQ_INT(fails, 0);
    /* the whole oracle file ran: 9 tokenizer files x 27 texts (tests/oracle/gen_tiny.js) */
    CHECK_EQ_INT(files, 9);
    CHECK_EQ_INT(n, 243);
}

/* Push ids one at a time; every chunk must be valid UTF-8 on its own. */
static int stream_check(const di_tokenizer *tok, const int32_t *ids, size_t n, const char *want, size_t want_len) {
    char out[4096];
    size_t o = 0;
    di_detok d;
    di_detok_init(&d, tok, 0);
    for (size_t i = 0; i < n; i++) {
        char chunk[64];
        long k = di_detok_push(&d, ids[i], chunk, sizeof chunk);
        if (k < 0) return 0;
        /* A chunk never ends inside a character. */
        di_tokenizer *unused = NULL;
        (void)unused;
        for (long j = 0; j < k;) {
            unsigned char c = (unsigned char)chunk[j];
            long need = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            if (j + need > k) return 0;
            j += need;
        }
        memcpy(out + o, chunk, (size_t)k);
        o += (size_t)k;
    }
    long k = di_detok_flush(&d, out + o, sizeof out - o);
    o += (size_t)(k > 0 ? k : 0);
    return o == want_len && !memcmp(out, want, o);
}

static int32_t byte_token(const di_tokenizer *tok, unsigned char b) {
    /* The vocab entry of a single byte, in its ByteLevel spelling. */
    unsigned cp = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE ? b : 0;
    if (!cp) {
        unsigned n = 0;
        for (unsigned i = 0; i < b; i++)
            if (!((i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE)) n++;
        cp = 0x100 + n;
    }
    char s[4];
    if (cp < 0x80) {
        s[0] = (char)cp;
        s[1] = 0;
    } else {
        s[0] = (char)(0xC0 | (cp >> 6));
        s[1] = (char)(0x80 | (cp & 0x3F));
        s[2] = 0;
    }
    return di_tokenizer_token_id(tok, s);
}

TEST(detok_streams_whole_characters) {
    di_tokenizer *tok = load_deepseek();
    CHECK(tok);
    const char *samples[] = {"你好，世界", "日本語のテキスト", "👨‍👩‍👧‍👦 family 🇫🇷🇯🇵", "e\xcc\x81 n\xcc\x83 a\xcc\x8a\xcc\x81",
                             "한국어 텍스트", "Ünïcödé ✓ 𝔘𝔫𝔦", "mixed ascii and 中文 and emoji 🎉"};
    for (size_t s = 0; s < sizeof samples / sizeof *samples; s++) {
        const char *str = samples[s];
        size_t len = strlen(str);
        /* 1. the real encoding */
        int32_t *ids = NULL;
        size_t n = 0, cap = 0;
        di_error err = {0};
        CHECK(di_tokenizer_encode(tok, str, len, &ids, &n, &cap, &err) == DEEPINFER_OK);
        CHECK_MSG(stream_check(tok, ids, n, str, len), "sample %zu (encoded)", s);
        /* 2. one byte token per byte: every character is split across tokens */
        int32_t *bt = malloc(len * sizeof *bt);
        for (size_t i = 0; i < len; i++) {
            bt[i] = byte_token(tok, (unsigned char)str[i]);
            CHECK(bt[i] >= 0);
        }
        CHECK_MSG(stream_check(tok, bt, len, str, len), "sample %zu (byte tokens)", s);
        free(bt);
        free(ids);
    }
    di_tokenizer_free(tok);
}

TEST(detok_holds_then_repairs) {
    di_tokenizer *tok = load_deepseek();
    CHECK(tok);
    di_detok d;
    char out[32];
    /* 中 = E4 B8 AD: nothing comes out until the last byte. */
    di_detok_init(&d, tok, 0);
    CHECK_EQ_INT(di_detok_push(&d, byte_token(tok, 0xE4), out, sizeof out), 0);
    CHECK_EQ_INT(di_detok_push(&d, byte_token(tok, 0xB8), out, sizeof out), 0);
    CHECK_EQ_INT(di_detok_push(&d, byte_token(tok, 0xAD), out, sizeof out), 3);
    CHECK(!memcmp(out, "\xe4\xb8\xad", 3));
    /* E4 B8 then 'a': the maximal subpart E4 B8 becomes one U+FFFD. */
    di_detok_init(&d, tok, 0);
    CHECK_EQ_INT(di_detok_push(&d, byte_token(tok, 0xE4), out, sizeof out), 0);
    CHECK_EQ_INT(di_detok_push(&d, byte_token(tok, 0xB8), out, sizeof out), 0);
    CHECK_EQ_INT(di_detok_push(&d, byte_token(tok, 'a'), out, sizeof out), 4);
    CHECK(!memcmp(out, "\xef\xbf\xbd" "a", 4));
    /* A stray continuation byte is one U+FFFD right away; an incomplete tail is flushed as U+FFFD. */
    di_detok_init(&d, tok, 0);
    CHECK_EQ_INT(di_detok_push(&d, byte_token(tok, 0x80), out, sizeof out), 3);
    CHECK_EQ_INT(di_detok_push(&d, byte_token(tok, 0xF0), out, sizeof out), 0);
    CHECK_EQ_INT(di_detok_flush(&d, out, sizeof out), 3);
    CHECK(!memcmp(out, "\xef\xbf\xbd", 3));
    CHECK_EQ_INT(di_detok_flush(&d, out, sizeof out), 0);
    /* Too small a buffer consumes nothing; a bad id is reported. */
    di_detok_init(&d, tok, 0);
    int32_t long_tok = di_tokenizer_token_id(tok, "<｜begin▁of▁sentence｜>");
    CHECK_EQ_INT(di_detok_push(&d, long_tok, out, 4), -1);
    CHECK(di_detok_push(&d, long_tok, out, sizeof out) > 4);
    CHECK_EQ_INT(di_detok_push(&d, -5, out, sizeof out), -2);
    CHECK_EQ_INT(di_detok_push(&d, 1 << 29, out, sizeof out), -2);
    di_tokenizer_free(tok);
}

TEST(detok_skip_special_drops_only_special) {
    di_tokenizer *tok = load_deepseek();
    CHECK(tok);
    int32_t ids[] = {0, 128803, 6366, 128804, 1, 128000};
    char *s = NULL;
    size_t n = 0;
    di_error err = {0};
    CHECK(di_tokenizer_decode(tok, ids, 6, 1, &s, &n, &err) == DEEPINFER_OK);
    CHECK_STR_EQ(s, "<｜User｜>hi<｜Assistant｜>");
    free(s);
    CHECK(di_tokenizer_decode(tok, ids, 6, 0, &s, &n, &err) == DEEPINFER_OK);
    CHECK_STR_EQ(s, "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><｜end▁of▁sentence｜><｜place▁holder▁no▁0｜>");
    free(s);
    CHECK(di_tokenizer_is_special(tok, 0) && !di_tokenizer_is_special(tok, 128803) && di_tokenizer_is_added(tok, 128803));
    CHECK(!di_tokenizer_is_special(tok, 6366) && !di_tokenizer_is_added(tok, 6366));
    int32_t bad[] = {5, 999999};
    CHECK(di_tokenizer_decode(tok, bad, 2, 0, &s, &n, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    di_tokenizer_free(tok);
}

TEST(encode_invalid_utf8_is_lossy_repair) {
    di_tokenizer *tok = load_deepseek();
    CHECK(tok);
    /* Each maximal invalid subpart → U+FFFD, then encode (what HF sees through TextDecoder). */
    struct {
        const char *bad, *repaired;
    } cases[] = {{"a\xe4\xb8z", "a\xef\xbf\xbdz"},
                 {"\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd"},
                 {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
                 {"\xf0\x9f\x98", "\xef\xbf\xbd"},
                 {"x\xc0\xafy", "x\xef\xbf\xbd\xef\xbf\xbdy"},
                 {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0, ca = 0, cb = 0;
        di_error err = {0};
        CHECK(di_tokenizer_encode(tok, cases[i].bad, strlen(cases[i].bad), &a, &na, &ca, &err) == DEEPINFER_OK);
        CHECK(di_tokenizer_encode(tok, cases[i].repaired, strlen(cases[i].repaired), &b, &nb, &cb, &err) == DEEPINFER_OK);
        CHECK_MSG(na == nb && !memcmp(a, b, na * sizeof *a), "case %zu", i);
        char *s = NULL;
        size_t sl = 0;
        CHECK(di_tokenizer_decode(tok, a, na, 0, &s, &sl, &err) == DEEPINFER_OK);
        CHECK_STR_EQ(s, cases[i].repaired);
        free(s);
        free(a);
        free(b);
    }
    /* Embedded NUL bytes are text like any other. */
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    di_error err = {0};
    CHECK(di_tokenizer_encode(tok, "a\0b", 3, &ids, &n, &cap, &err) == DEEPINFER_OK);
    CHECK(n >= 2);
    free(ids);
    di_tokenizer_free(tok);
}

TEST(encode_appends_and_long_pieces) {
    di_tokenizer *tok = load_deepseek();
    CHECK(tok);
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    di_error err = {0};
    CHECK(di_tokenizer_encode(tok, "Hello", 5, &ids, &n, &cap, &err) == DEEPINFER_OK);
    size_t first = n;
    CHECK(di_tokenizer_encode(tok, "Hello", 5, &ids, &n, &cap, &err) == DEEPINFER_OK);
    CHECK_EQ_INT(n, 2 * first);
    /* A 1 MB piece without any split point: the merge loop must stay fast. */
    size_t big = 1 << 20;
    char *s = malloc(big);
    for (size_t i = 0; i < big; i++) s[i] = "abcdefghij"[i % 10 == 9 ? (i / 10) % 10 : i % 10];
    n = 0;
    CHECK(di_tokenizer_encode(tok, s, big, &ids, &n, &cap, &err) == DEEPINFER_OK);
    char *back = NULL;
    size_t bl = 0;
    CHECK(di_tokenizer_decode(tok, ids, n, 0, &back, &bl, &err) == DEEPINFER_OK);
    CHECK(bl == big && !memcmp(back, s, big));
    free(back);
    free(s);
    free(ids);
    CHECK_EQ_INT(di_tokenizer_vocab_size(tok), 128815);
    size_t tl;
    CHECK(di_tokenizer_token_bytes(tok, 5000, &tl) && tl > 0);
    CHECK(di_tokenizer_token_bytes(tok, 128815, &tl) == NULL);
    CHECK_EQ_INT(di_tokenizer_token_id(tok, "Ġthe"), di_tokenizer_token_id(tok, "Ġthe"));
    CHECK_EQ_INT(di_tokenizer_token_id(tok, "no-such-token-xyz"), -1);
    di_tokenizer_free(tok);
}

/* ---- bad tokenizer.json files ---- */
static const char *MINI_HEAD =
    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]},"
    " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}";

static deepinfer_status load_str(const char *json, di_error *err) {
    di_tokenizer *tok = NULL;
    deepinfer_status s = di_tokenizer_load_json(json, strlen(json), &tok, err);
    di_tokenizer_free(tok);
    return s;
}

TEST(tokenizer_load_errors_are_clear) {
    di_error err = {0};
    char buf[2048];
    snprintf(buf, sizeof buf, "%s}", MINI_HEAD);
    CHECK_MSG(load_str(buf, &err) == DEEPINFER_OK, "%s", err.msg);
    struct {
        const char *json, *needle;
        deepinfer_status code;
    } bad[] = {
        {"{\"model\": ", "line 1", DEEPINFER_ERR_FORMAT},
        {"[1, 2]", "top level", DEEPINFER_ERR_FORMAT},
        {"{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", "model", DEEPINFER_ERR_FORMAT},
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", "WordPiece",
         DEEPINFER_ERR_UNSUPPORTED},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a c\"]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "\"c\" is not in the vocab", DEEPINFER_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "merged token \"ab\"", DEEPINFER_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\"]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "two tokens", DEEPINFER_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "id must be", DEEPINFER_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Sequence\", "
         "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(unclosed\"}, \"behavior\": \"Isolated\"}, "
         "{\"type\": \"ByteLevel\"}]}}",
         "invalid regex", DEEPINFER_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Sequence\", "
         "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"[a&&b]\"}, \"behavior\": \"Isolated\"}, "
         "{\"type\": \"ByteLevel\"}]}}",
         "intersection", DEEPINFER_ERR_UNSUPPORTED},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}",
         "Whitespace", DEEPINFER_ERR_UNSUPPORTED},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Sequence\", "
         "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Isolated\"}]}}",
         "no ByteLevel", DEEPINFER_ERR_UNSUPPORTED},
        {"{\"normalizer\": {\"type\": \"NFC\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
         "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "NFC", DEEPINFER_ERR_UNSUPPORTED},
        {"{\"decoder\": {\"type\": \"WordPiece\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
         "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "decoder", DEEPINFER_ERR_UNSUPPORTED},
        {"{\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "dropout", DEEPINFER_ERR_UNSUPPORTED},
        {"{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "byte_fallback", DEEPINFER_ERR_UNSUPPORTED},
        {"{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "unk_token", DEEPINFER_ERR_FORMAT},
        {"{\"added_tokens\": {}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
         "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "must be an array", DEEPINFER_ERR_FORMAT},
        {"{\"added_tokens\": [{\"content\": \"x\"}], \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
         "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "\"id\"", DEEPINFER_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "no tokens", DEEPINFER_ERR_FORMAT},
        /* fuzz_tokenizer_load: two tokens, ids 0 and 94 million, took 2.2 GB of id tables */
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 94444444}, \"merges\": []}, "
         "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "too sparse", DEEPINFER_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Sequence\", "
         "\"pretokenizers\": [{\"type\": \"ByteLevel\"}, {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Isolated\"}]}}",
         "after ByteLevel", DEEPINFER_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        di_error e = {0};
        deepinfer_status s = load_str(bad[i].json, &e);
        CHECK_MSG(s == bad[i].code, "case %zu: status %d, message: %s", i, (int)s, e.msg);
        CHECK_MSG(strstr(e.msg, bad[i].needle), "case %zu: message \"%s\" lacks \"%s\"", i, e.msg, bad[i].needle);
    }
    di_tokenizer *tok = NULL;
    CHECK(di_tokenizer_load("/nonexistent/tokenizer.json", &tok, &err) == DEEPINFER_ERR_IO ||
          err.code != DEEPINFER_OK);
    CHECK(tok == NULL);
    CHECK(di_tokenizer_load("tests", &tok, &err) != DEEPINFER_OK); /* a directory without tokenizer.json */
    CHECK(strstr(err.msg, "tokenizer.json"));
}

/* ---- concurrent use of one tokenizer ---- */
#include <pthread.h>

typedef struct thread_job {
    const di_tokenizer *tok;
    int seed, ok;
} thread_job;

static const char *SHARED_TEXTS[] = {"The quick brown fox jumps over the lazy dog. ", "函数 返回值 是 42。",
                                     "def f(x):\n\treturn x  # ~ comment\n", "<｜User｜>hello<｜Assistant｜>",
                                     "🇫🇷 naïve café 1234567 ≥ ≤ — done"};

static void *encode_worker(void *arg) {
    thread_job *j = arg;
    j->ok = 1;
    int32_t *ids = NULL, *ref = NULL;
    size_t cap = 0, rcap = 0;
    for (int round = 0; round < 300 && j->ok; round++) {
        const char *s = SHARED_TEXTS[(round + j->seed) % 5];
        size_t n = 0, rn = 0;
        di_error err;
        if (di_tokenizer_encode(j->tok, s, strlen(s), &ids, &n, &cap, &err) ||
            di_tokenizer_encode(j->tok, s, strlen(s), &ref, &rn, &rcap, &err) || n != rn ||
            memcmp(ids, ref, n * sizeof *ids))
            j->ok = 0;
        char *back = NULL;
        size_t bl = 0;
        if (di_tokenizer_decode(j->tok, ids, n, 0, &back, &bl, &err) || bl != strlen(s) || memcmp(back, s, bl)) j->ok = 0;
        free(back);
    }
    free(ids);
    free(ref);
    return NULL;
}

TEST(tokenizer_shared_by_threads) {
    di_tokenizer *tok = load_deepseek();
    CHECK(tok);
    pthread_t th[4];
    thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){tok, i, 0};
        CHECK(pthread_create(&th[i], NULL, encode_worker, &jobs[i]) == 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) CHECK_MSG(jobs[i].ok, "thread %d saw a wrong encoding", i);
    di_tokenizer_free(tok);
}
