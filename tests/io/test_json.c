#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/json.h"
#include "test.h"

static di_json_doc *parse_ok(const char *s) {
    di_json_doc *d = NULL;
    di_error e = {0};
    if (di_json_parse(s, strlen(s), NULL, &d, &e) != DEEPINFER_OK) {
        fprintf(stderr, "    unexpected parse error: %s\n", e.msg);
        return NULL;
    }
    return d;
}

TEST(json_scalars_and_nesting) {
    di_json_doc *d = parse_ok(" {\"a\": [1, -2.5e3, true, false, null, \"x\"], \"b\": {\"c\": {}}, \"e\": []} ");
    CHECK(d);
    const di_json *a = di_json_get(d->root, "a");
    CHECK(a && a->type == DI_JSON_ARRAY && a->count == 6);
    int64_t i;
    CHECK(di_json_as_i64(di_json_at(a, 0), &i) && i == 1);
    double f;
    CHECK(di_json_as_f64(di_json_at(a, 1), &f) && f == -2500.0);
    CHECK(!di_json_as_i64(di_json_at(a, 1), &i));
    CHECK(di_json_at(a, 2)->type == DI_JSON_TRUE);
    CHECK(di_json_at(a, 4)->type == DI_JSON_NULL);
    CHECK_STR_EQ(di_json_at(a, 5)->str, "x");
    CHECK(di_json_at(a, 6) == NULL);
    const di_json *c = di_json_get(di_json_get(d->root, "b"), "c");
    CHECK(c && c->type == DI_JSON_OBJECT && c->count == 0);
    CHECK(di_json_get(d->root, "e")->count == 0);
    CHECK(di_json_get(d->root, "zz") == NULL);
    di_json_free(d);
}

TEST(json_int64_limits) {
    di_json_doc *d = parse_ok("[9223372036854775807, -9223372036854775808, 9223372036854775808, 0, -0]");
    CHECK(d);
    int64_t v;
    CHECK(di_json_as_i64(di_json_at(d->root, 0), &v) && v == INT64_MAX);
    CHECK(di_json_as_i64(di_json_at(d->root, 1), &v) && v == INT64_MIN);
    CHECK(!di_json_as_i64(di_json_at(d->root, 2), &v)); /* too large: double only */
    CHECK(di_json_at(d->root, 2)->num == 9223372036854775808.0);
    CHECK_STR_EQ(di_json_at(d->root, 2)->str, "9223372036854775808");
    CHECK(di_json_as_i64(di_json_at(d->root, 4), &v) && v == 0);
    di_json_free(d);
}

TEST(json_string_escapes_and_utf8) {
    di_json_doc *d = parse_ok("[\"a\\\"b\\\\c\\/\\n\\t\", \"\\u00e9\\u4e2d\\ud83d\\ude00\", \"caf\xc3\xa9\", \"nul\\u0000x\"]");
    CHECK(d);
    CHECK_STR_EQ(di_json_at(d->root, 0)->str, "a\"b\\c/\n\t");
    CHECK_STR_EQ(di_json_at(d->root, 1)->str, "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");
    CHECK_STR_EQ(di_json_at(d->root, 2)->str, "caf\xc3\xa9");
    const di_json *n = di_json_at(d->root, 3);
    CHECK_EQ_INT(n->str_len, 5);
    CHECK(memcmp(n->str, "nul\0x", 5) == 0);
    di_json_free(d);
}

TEST(json_duplicate_keys_last_wins) {
    di_json_doc *d = parse_ok("{\"k\": 1, \"k\": 2}");
    CHECK(d);
    int64_t v;
    CHECK(di_json_as_i64(di_json_get(d->root, "k"), &v) && v == 2);
    CHECK_EQ_INT(d->root->count, 2);
    di_json_free(d);
}

static void expect_error(const char *s, size_t len, const char *want_substr, int *ok) {
    di_json_doc *d = NULL;
    di_error e = {0};
    deepinfer_status st = di_json_parse(s, len, NULL, &d, &e);
    if (st == DEEPINFER_OK || d != NULL || !strstr(e.msg, want_substr)) {
        fprintf(stderr, "    input %.40s: status %d, message '%s', wanted '%s'\n", s, st, e.msg, want_substr);
        *ok = 0;
        di_json_free(d);
    }
}

TEST(json_errors_have_positions) {
    int ok = 1;
    expect_error("{\"a\" 1}", 7, "line 1, column 6: expected ':'", &ok);
    expect_error("[1,\n 2,,3]", 10, "line 2, column 4", &ok);
    expect_error("[1, 2", 5, "unterminated array", &ok);
    expect_error("\"abc", 4, "unterminated string", &ok);
    expect_error("01", 2, "unexpected data after", &ok);
    expect_error("1.", 2, "digit expected after '.'", &ok);
    expect_error("[tru]", 5, "invalid literal", &ok);
    expect_error("\"\\x\"", 4, "invalid escape", &ok);
    expect_error("\"\\ud800\"", 8, "unpaired UTF-16 surrogate", &ok);
    expect_error("\"\xff\"", 3, "invalid UTF-8", &ok);
    expect_error("\"\xc0\xaf\"", 4, "invalid UTF-8", &ok); /* overlong '/' */
    expect_error("\"\xed\xa0\x80\"", 5, "invalid UTF-8", &ok); /* encoded surrogate */
    expect_error("\"a\nb\"", 5, "control character", &ok);
    expect_error("", 0, "unexpected end of input", &ok);
    expect_error("{} x", 4, "unexpected data after", &ok);
    expect_error("{\"a\":1,}", 8, "expected a string key", &ok);
    CHECK(ok);
}

TEST(json_depth_limit) {
    size_t n = 100000;
    char *s = malloc(2 * n + 1);
    CHECK(s);
    memset(s, '[', n);
    memset(s + n, ']', n);
    di_json_doc *d = NULL;
    di_error e = {0};
    deepinfer_status st = di_json_parse(s, 2 * n, NULL, &d, &e);
    free(s);
    CHECK_EQ_INT(st, DEEPINFER_ERR_LIMIT);
    CHECK(strstr(e.msg, "nesting too deep"));
    di_json_options opt = {.max_depth = 3};
    CHECK_EQ_INT(di_json_parse("[[[1]]]", 7, &opt, &d, &e), DEEPINFER_OK);
    di_json_free(d);
    CHECK_EQ_INT(di_json_parse("[[[[1]]]]", 9, &opt, &d, &e), DEEPINFER_ERR_LIMIT);
}

TEST(json_memory_limit) {
    di_json_options opt = {.max_bytes = 1024};
    char big[4096];
    memset(big, 'a', sizeof big);
    big[0] = '"';
    big[sizeof big - 1] = '"';
    di_json_doc *d = NULL;
    di_error e = {0};
    CHECK_EQ_INT(di_json_parse(big, sizeof big, &opt, &d, &e), DEEPINFER_ERR_OUT_OF_MEMORY);
    CHECK(d == NULL);
}

TEST(json_not_nul_terminated_input) {
    /* The parser must never read past len. */
    char *buf = malloc(3);
    CHECK(buf);
    memcpy(buf, "[12", 3);
    di_json_doc *d = NULL;
    di_error e = {0};
    CHECK(di_json_parse(buf, 3, NULL, &d, &e) != DEEPINFER_OK);
    memcpy(buf, "123", 3);
    CHECK_EQ_INT(di_json_parse(buf, 3, NULL, &d, &e), DEEPINFER_OK);
    int64_t v;
    CHECK(di_json_as_i64(d->root, &v) && v == 123);
    di_json_free(d);
    free(buf);
}
