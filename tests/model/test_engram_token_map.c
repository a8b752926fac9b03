/* Engram compressed token map (architecture.md §5.8): the ICU normalizer on
 * hand-picked cases, the whole DeepSeek tokenizer against the independent
 * Python oracle (tools/reference/engram_token_map.py), and map files. */
#include <stdlib.h>
#include <string.h>

#include "model/engram_token_key.h"
#include "model/engram_token_map.h"
#include "test.h"

static const struct {
    const char *in, *want;
} k_norm_cases[] = {
    {" The", "the"},
    {"THE", "the"},
    {"Caf\xc3\xa9", "cafe"},                         /* NFD + StripAccents */
    {"\xef\xac\x81", "fi"},                           /* U+FB01 ligature: NFKC */
    {"\xef\xbc\xa1\xef\xbc\xa2", "ab"},               /* fullwidth AB */
    {"\xce\xa3\xce\x91\xce\xa3", "\xcf\x83\xce\xb1\xcf\x83"}, /* per-char lowercase: no final sigma */
    {"\xc4\xb0", "i"},                                /* U+0130 -> I + U+0307 -> I -> i */
    {"\xe0\xa4\x95\xe0\xa4\xbe", "\xe0\xa4\x95"},     /* Mc (U+093E) is stripped too */
    {"a\xe2\x83\x9d", "a"},                           /* Me (U+20DD) is stripped too */
    {"a\xe1\xaa\xbf", "a\xe1\xaa\xbf"},               /* U+1ABF (Mn, Unicode 13): not a mark in 9.0 */
    {"\xea\x9f\xb2", "\xea\x9f\xb2"},                 /* U+A7F2 (Unicode 14, <super> C): no 9.0 decomposition */
    {"  \t\n x  y \r\n", "x y"},
    {" ", " "},                                       /* a lone space survives Strip */
    {"\n\n", " "},
    {"\xc2\xa0x\xe3\x80\x80", "x"},                   /* NBSP, ideographic space: NFKC -> ' ' */
    {"\xe2\x80\xa8" "a", "a"},                        /* U+2028 is White_Space: stripped, not collapsed */
    {"\x1c" "a\x1c", "\x1c" "a\x1c"},                 /* U+001C is not White_Space */
    {"\xcc\x81", ""},                                 /* only a mark: empty */
    {"", ""},
};

TEST(engram_normalizer_cases) {
    di_engram_keyer *k;
    di_error err;
    CHECK(di_engram_keyer_new(&k, &err) == DEEPINFER_OK);
    for (size_t i = 0; i < sizeof k_norm_cases / sizeof k_norm_cases[0]; i++) {
        const char *out;
        size_t n;
        CHECK(di_engram_normalize(k, k_norm_cases[i].in, strlen(k_norm_cases[i].in), &out, &n, &err) == DEEPINFER_OK);
        int ok = n == strlen(k_norm_cases[i].want) && !memcmp(out, k_norm_cases[i].want, n);
        if (!ok) di_engram_keyer_free(k);
        CHECK_MSG(ok, "case %zu: got \"%.*s\", want \"%s\"", i, (int)n, out, k_norm_cases[i].want);
    }
    di_engram_keyer_free(k);
}

TEST(engram_token_key_rules) {
    di_engram_keyer *k;
    di_error err;
    CHECK(di_engram_keyer_new(&k, &err) == DEEPINFER_OK);
    const struct {
        const char *tok, *want;
    } cases[] = {
        {"\xc4\xa0The", "the"},           /* "ĠThe" = " The" */
        {"\xc3\x83", "\xc3\x83"},         /* "Ã" = byte 0xC3 alone: U+FFFD -> raw token string */
        {"\xc4\xa0\xc4\xa0", " "},        /* two spaces */
        {"\xc4\x8a", " "},                /* "Ċ" = "\n" */
        {"<\xef\xbd\x9c" "User\xef\xbd\x9c>", "<|user|>"}, /* added token: not all ByteLevel chars */
        {"\xc3\xaf\xc2\xbf\xc2\xbd", "\xc3\xaf\xc2\xbf\xc2\xbd"}, /* bytes EF BF BD = literal U+FFFD: raw */
        {"\xcc\x81", "\xcc\x81"},         /* not all ByteLevel: text U+0301 normalizes to "": key = text */
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *key;
        size_t n;
        CHECK(di_engram_token_key(k, cases[i].tok, strlen(cases[i].tok), &key, &n, &err) == DEEPINFER_OK);
        int ok = n == strlen(cases[i].want) && !memcmp(key, cases[i].want, n);
        if (!ok) di_engram_keyer_free(k);
        CHECK_MSG(ok, "case %zu: got \"%.*s\", want \"%s\"", i, (int)n, key, cases[i].want);
    }
    di_engram_keyer_free(k);
}

/* The acceptance test: 100% agreement with the oracle on the DeepSeek tokenizer. */
TEST(engram_token_map_matches_oracle) {
    di_error err;
    di_tokenizer *tok = NULL;
    di_engram_token_map got = {0}, want = {0};
    CHECK(di_tokenizer_load(di_test_data("tokenizer/tokenizer.json"), &tok, &err) == DEEPINFER_OK);
    deepinfer_status st = di_engram_token_map_from_tokenizer(tok, &got, &err);
    if (!st) st = di_engram_token_map_load(di_test_data("engram/deepseek_v3_token_map.json"), &want, &err);
    int32_t first_bad = -1, n_bad = 0;
    if (!st && got.n_ids == want.n_ids)
        for (int32_t i = 0; i < got.n_ids; i++)
            if (got.cls[i] != want.cls[i]) {
                if (first_bad < 0) first_bad = i;
                n_bad++;
            }
    size_t tl = 0;
    const char *ts = first_bad >= 0 ? di_tokenizer_token_str(tok, first_bad, &tl) : "";
    char shown[64];
    snprintf(shown, sizeof shown, "%.*s", (int)(tl < 60 ? tl : 60), ts ? ts : "");
    int32_t n_ids = got.n_ids, n_classes = got.n_classes, want_ids = want.n_ids, pad = got.cls ? got.cls[2] : -1;
    di_engram_token_map_free(&got);
    di_engram_token_map_free(&want);
    di_tokenizer_free(tok);
    CHECK_MSG(st == DEEPINFER_OK, "%s", err.msg);
    CHECK_EQ_INT(n_ids, 128815);
    CHECK_EQ_INT(want_ids, n_ids);
    CHECK_MSG(n_bad == 0, "%d ids disagree with the oracle; first id %d, token \"%s\"", n_bad, first_bad, shown);
    /* 97812 classes for the 128000 BPE tokens + one per added token; the V4.1 tokenizer's 1280
     * added tokens give 97812 + 1280 = 99092 = engram_compressed_vocab_size. */
    CHECK_EQ_INT(n_classes, 98627);
    CHECK_EQ_INT(pad, 2);
}

TEST(engram_token_map_golden_file) {
    di_error err;
    di_engram_token_map m;
    CHECK(di_engram_token_map_load(di_test_data("golden/v41-tiny-a/engram_token_map.json"), &m, &err) ==
          DEEPINFER_OK);
    int32_t n_ids = m.n_ids, n_classes = m.n_classes, c2 = m.cls[2], c3 = m.cls[3];
    int32_t tokens[4] = {0, 2, 1023, 5}, classes[4];
    uint8_t mask[4] = {1, 1, 1, 0};
    deepinfer_status st = di_engram_token_classes(&m, tokens, mask, 4, classes, &err);
    int32_t bad = 1024;
    deepinfer_status st_bad = di_engram_token_classes(&m, &bad, NULL, 1, classes + 3, &err);
    di_engram_token_map_free(&m);
    CHECK_EQ_INT(n_ids, 1024);
    CHECK_EQ_INT(n_classes, 768);
    CHECK_EQ_INT(c2, 2);
    CHECK_EQ_INT(c3, 3);
    CHECK(st == DEEPINFER_OK);
    CHECK_EQ_INT(classes[0], 0);
    CHECK_EQ_INT(classes[1], 2);
    CHECK_EQ_INT(classes[3], -1);
    CHECK(st_bad == DEEPINFER_ERR_INVALID_ARGUMENT);
}

static deepinfer_status parse_map(const char *text, di_engram_token_map *m, di_error *err) {
    di_json_doc *doc;
    deepinfer_status st = di_json_parse(text, strlen(text), NULL, &doc, err);
    if (st) return st;
    st = di_engram_token_map_from_json(doc->root, m, err);
    di_json_free(doc);
    return st;
}

TEST(engram_token_map_file_formats) {
    di_error err;
    di_engram_token_map a, b;
    CHECK(parse_map("{\"map\":[0,1,0,2,1,3],\"compressed_vocab_size\":4,\"pad_token_id\":2,\"pad_class\":0}", &a,
                    &err) == DEEPINFER_OK);
    CHECK(parse_map("{\"vocab_size\":6,\"repeats\":[[2,0],[4,1]]}", &b, &err) == DEEPINFER_OK);
    int same = a.n_ids == 6 && b.n_ids == 6 && !memcmp(a.cls, b.cls, 6 * sizeof(int32_t)) && b.n_classes == 4;
    di_engram_token_map_free(&a);
    di_engram_token_map_free(&b);
    CHECK(same);
    /* not in first-seen order, wrong count, wrong pad class, malformed repeats */
    CHECK(parse_map("{\"map\":[0,2,1]}", &a, &err) == DEEPINFER_ERR_FORMAT);
    CHECK(parse_map("{\"map\":[0,1],\"compressed_vocab_size\":3}", &a, &err) == DEEPINFER_ERR_FORMAT);
    CHECK(parse_map("{\"map\":[0,1,2],\"pad_token_id\":2,\"pad_class\":1}", &a, &err) == DEEPINFER_ERR_FORMAT);
    CHECK(parse_map("{\"vocab_size\":3,\"repeats\":[[1,1]]}", &a, &err) == DEEPINFER_ERR_FORMAT);
    CHECK(parse_map("{\"vocab_size\":3,\"repeats\":[[5,0]]}", &a, &err) == DEEPINFER_ERR_FORMAT);
    CHECK(parse_map("{\"repeats\":[]}", &a, &err) == DEEPINFER_ERR_FORMAT);
}
