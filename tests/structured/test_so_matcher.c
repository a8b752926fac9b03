/* Mask engine: fast masks equal the one-token-at-a-time oracle; acceptance,
 * EOS, rollback, think-mode, errors. Synthetic vocabulary (so_testutil.h). */
#include "structured/so_testutil.h"
#include "test.h"

static int accepts(so_vocab *v, so_grammar *g, const char *text, int masks) {
    int where;
    return so_test_feed(v, g, text, masks, &where);
}

TEST(so_regex_grammar_masks_match_oracle) {
    int32_t eos;
    so_vocab *v = so_test_vocab(&eos);
    CHECK(v);
    di_error e = {0};
    so_grammar *g = so_test_compile(v, SO_SCHEMA_REGEX, "(ab|a\"b)+[0-9]{2,3}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "abab12", 1));
    CHECK(accepts(v, g, "a\"b123", 1));
    CHECK(!accepts(v, g, "ab1", 0));
    CHECK(!accepts(v, g, "ab1234", 0));
    so_grammar_free(g);
    so_vocab_free(v);
}

TEST(so_gbnf_grammar_masks_match_oracle) {
    so_vocab *v = so_test_vocab(NULL);
    CHECK(v);
    di_error e = {0};
    const char *gb = "root ::= \"{\" ws pair (\",\" ws pair)* \"}\"\n"
                     "pair ::= str ws \":\" ws val   # a comment\n"
                     "str ::= \"\\\"\" [a-z]* \"\\\"\"\n"
                     "val ::= str | [0-9]+ | \"true\" | root\n"
                     "ws ::= [ \\t\\n]{0,3}\n";
    so_grammar *g = so_test_compile(v, SO_SCHEMA_EBNF, gb, &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "{\"a\": 12}", 1));
    CHECK(accepts(v, g, "{\"name\":{\"x\" : true},\"b\":\"abc\"}", 1));
    CHECK(!accepts(v, g, "{\"a\": 12,}", 0));
    CHECK(!accepts(v, g, "{\"A\": 1}", 0));
    so_grammar_free(g);
    so_vocab_free(v);
}

TEST(so_gbnf_errors_have_positions) {
    so_vocab *v = so_test_vocab(NULL);
    CHECK(v);
    di_error e = {0};
    CHECK(!so_test_compile(v, SO_SCHEMA_EBNF, "root ::= foo\n", &e));
    CHECK_MSG(strstr(e.msg, "line 1, column 10: undefined rule 'foo'"), "%s", e.msg);
    CHECK(!so_test_compile(v, SO_SCHEMA_EBNF, "root ::= \"a\"\nx ::= (\"b\"\n", &e));
    CHECK_MSG(strstr(e.msg, "line 2"), "%s", e.msg);
    CHECK(!so_test_compile(v, SO_SCHEMA_EBNF, "rooot ::= \"a\"", &e));
    CHECK(strstr(e.msg, "no 'root' rule"));
    CHECK(!so_test_compile(v, SO_SCHEMA_EBNF, "root ::= <think> \"a\"", &e));
    CHECK(strstr(e.msg, "token references"));
    so_vocab_free(v);
}

TEST(so_json_schema_object_masks_match_oracle) {
    so_vocab *v = so_test_vocab(NULL);
    CHECK(v);
    di_error e = {0};
    const char *sc = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":4},"
                     "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
                     "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",1.5,null]},\"maxItems\":2}},"
                     "\"required\":[\"name\"],\"additionalProperties\":false}";
    so_grammar *g = so_test_compile(v, SO_SCHEMA_JSON, sc, &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "{\"name\": \"abc\", \"age\": 42}", 1));
    CHECK(accepts(v, g, "{\"name\":\"\\n\xc3\xa9\",\"tags\":[\"a\", 1.50]}", 1));
    CHECK(accepts(v, g, "{ \"name\" : \"x\" , \"tags\" : [ null ] }", 1));
    CHECK(!accepts(v, g, "{\"age\": 42}", 0));
    CHECK(!accepts(v, g, "{\"name\": \"abcde\"}", 0));
    CHECK(!accepts(v, g, "{\"name\": \"a\", \"age\": 121}", 0));
    CHECK(!accepts(v, g, "{\"name\": \"a\", \"age\": -1}", 0));
    CHECK(!accepts(v, g, "{\"name\": \"a\", \"x\": 1}", 0));
    CHECK(!accepts(v, g, "{\"name\": \"a\", \"tags\": [\"a\",\"b\",\"a\"]}", 0));
    so_grammar_free(g);
    so_vocab_free(v);
}

TEST(so_matcher_eos_rollback_think) {
    int32_t eos;
    so_vocab *v = so_test_vocab(&eos);
    CHECK(v);
    di_error e = {0};
    so_grammar *g = so_test_compile(v, SO_SCHEMA_REGEX, "ab|abc", &e);
    CHECK(g);
    so_matcher *m = NULL;
    CHECK(so_matcher_new(g, NULL, &m, &e) == DEEPINFER_OK);
    int32_t t_ab = -1, t_c = -1, t_abc = -1;
    for (int32_t t = 0; t < v->n_vocab; t++) {
        uint32_t l;
        const uint8_t *b = so_vocab_token(v, t, &l);
        if (l == 2 && !memcmp(b, "ab", 2)) t_ab = t;
        if (l == 3 && !memcmp(b, "abc", 3)) t_abc = t;
        if (l == 1 && b[0] == 'c') t_c = t;
    }
    CHECK(t_ab >= 0 && t_c >= 0 && t_abc >= 0);
    CHECK(!so_matcher_try_token(m, eos));
    CHECK(so_matcher_try_token(m, t_abc));
    CHECK(so_matcher_accept_token(m, t_ab, &e) == DEEPINFER_OK);
    CHECK(so_matcher_is_accepting(m) && so_matcher_try_token(m, eos));
    CHECK(so_matcher_accept_token(m, t_c, &e) == DEEPINFER_OK);
    CHECK(so_matcher_is_finished(m));
    CHECK(so_matcher_accept_token(m, t_c, &e) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(so_matcher_rollback(m, 1, &e) == DEEPINFER_OK);
    CHECK(so_matcher_num_tokens(m) == 1 && !so_matcher_is_finished(m));
    CHECK(so_matcher_accept_token(m, eos, &e) == DEEPINFER_OK && so_matcher_is_finished(m));
    CHECK(so_test_mask_diff(m) == -1);
    CHECK(so_matcher_rollback(m, 5, &e) == DEEPINFER_ERR_INVALID_ARGUMENT);
    so_matcher_free(m);
    /* think mode: anything until the end token, then constrained */
    so_matcher_opts o = {.think_end_id = t_c};
    CHECK(so_matcher_new(g, &o, &m, &e) == DEEPINFER_OK);
    CHECK(so_matcher_try_token(m, eos) && so_matcher_try_token(m, t_c));
    CHECK(so_matcher_accept_token(m, t_abc, &e) == DEEPINFER_OK);
    CHECK(so_matcher_accept_token(m, t_c, &e) == DEEPINFER_OK);
    CHECK(!so_matcher_try_token(m, t_c) && so_matcher_try_token(m, t_ab));
    CHECK(so_test_mask_diff(m) == -1);
    so_matcher_free(m);
    so_grammar_free(g);
    so_vocab_free(v);
}

TEST(so_args_parse) {
    di_json_doc *d = NULL;
    di_error e = {0};
    const char *js = "{\"schema_type\":\"json\",\"schema\":{\"type\":\"integer\"},\"whitespace_max\":0,\"start_after_think\":true}";
    CHECK(di_json_parse(js, strlen(js), NULL, &d, &e) == DEEPINFER_OK);
    di_arena a;
    di_arena_init(&a, 0);
    so_args args;
    CHECK(so_args_from_json(d->root, &a, &args, &e) == DEEPINFER_OK);
    CHECK(args.type == SO_SCHEMA_JSON && args.whitespace_max == 0 && args.start_after_think == 1);
    CHECK(args.schema_len == strlen("{\"type\":\"integer\"}"));
    di_json_free(d);
    const char *bad = "{\"schema_type\":\"yaml\",\"schema\":\"x\"}";
    CHECK(di_json_parse(bad, strlen(bad), NULL, &d, &e) == DEEPINFER_OK);
    CHECK(so_args_from_json(d->root, &a, &args, &e) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(e.msg, "'yaml'"));
    di_json_free(d);
    const char *typo = "{\"schema_type\":\"regex\",\"schema\":\"x\",\"lenien\":true}";
    CHECK(di_json_parse(typo, strlen(typo), NULL, &d, &e) == DEEPINFER_OK);
    CHECK(so_args_from_json(d->root, &a, &args, &e) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(e.msg, "unknown member 'lenien'"));
    di_json_free(d);
    di_arena_free(&a);
}

TEST(so_json_schema_string_lengths_counted) {
    so_vocab *v = so_test_vocab(NULL);
    CHECK(v);
    di_error e = {0};
    so_grammar *g = so_test_compile(v, SO_SCHEMA_JSON, "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "\"ab\"", 1));
    CHECK(accepts(v, g, "\"a\xc3\xa9\\n\"", 1));
    CHECK(!accepts(v, g, "\"a\"", 0));
    CHECK(!accepts(v, g, "\"abcd\"", 0));
    so_grammar_free(g);
    g = so_test_compile(v, SO_SCHEMA_JSON, "{\"type\":\"string\",\"pattern\":\"^[a-z]+(?:-[a-z0-9]+)*$\",\"minLength\":3}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "\"abc-1\"", 1));
    CHECK(!accepts(v, g, "\"ab\"", 0));
    so_grammar_free(g);
    so_vocab_free(v);
}

TEST(so_json_schema_keys_patterns_oneof_masks) {
    so_vocab *v = so_test_vocab(NULL);
    CHECK(v);
    di_error e = {0};
    /* named keys + additional keys (generic-string cache identity), minLength pending */
    so_grammar *g = so_test_compile(v, SO_SCHEMA_JSON,
                                    "{\"properties\":{\"ab\":{\"type\":\"string\",\"minLength\":3}},"
                                    "\"additionalProperties\":{\"type\":\"integer\"}}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "{\"ab\": \"xyz\", \"abc\": 1, \"a\": 2}", 1));
    CHECK(!accepts(v, g, "{\"ab\": 1}", 0));
    CHECK(!accepts(v, g, "{\"ab\": \"xy\"}", 0));
    CHECK(!accepts(v, g, "{\"x\": \"s\"}", 0));
    so_grammar_free(g);
    /* patternProperties, oneOf with a discriminator, not, if/then */
    g = so_test_compile(v, SO_SCHEMA_JSON,
                        "{\"type\":\"object\",\"oneOf\":[{\"properties\":{\"k\":{\"const\":\"a\"},\"n\":{\"type\":\"integer\"}},\"required\":[\"k\"]},"
                        "{\"properties\":{\"k\":{\"const\":\"b\"}},\"required\":[\"k\"],\"patternProperties\":{\"^x\":{\"type\":\"null\"}}}]}",
                        &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "{\"k\": \"a\", \"n\": 12}", 1));
    CHECK(accepts(v, g, "{\"k\": \"b\", \"xa\": null}", 1));
    CHECK(!accepts(v, g, "{\"k\": \"b\", \"xa\": 1}", 0));
    CHECK(!accepts(v, g, "{\"k\": \"c\"}", 0));
    so_grammar_free(g);
    g = so_test_compile(v, SO_SCHEMA_JSON, "{\"type\":\"integer\",\"not\":{\"enum\":[1,2]},\"minimum\":0,\"exclusiveMaximum\":5}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "0", 1) && accepts(v, g, "3", 1) && accepts(v, g, "4.0", 1));
    CHECK(!accepts(v, g, "1", 0) && !accepts(v, g, "2.00", 0) && !accepts(v, g, "5", 0) && !accepts(v, g, "-1", 0));
    so_grammar_free(g);
    g = so_test_compile(v, SO_SCHEMA_JSON, "{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":0.25,\"multipleOf\":0.01}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "-1.5", 1) && accepts(v, g, "0.25", 1) && accepts(v, g, "-0.07", 1) && accepts(v, g, "0", 1));
    CHECK(!accepts(v, g, "-1.51", 0) && !accepts(v, g, "0.26", 0) && !accepts(v, g, "0.001", 0) && !accepts(v, g, "1e-1", 0));
    so_grammar_free(g);
    g = so_test_compile(v, SO_SCHEMA_JSON, "{\"type\":\"number\",\"not\":{\"multipleOf\":3}}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "4", 1) && accepts(v, g, "1.5", 1) && accepts(v, g, "-7", 1));
    CHECK(!accepts(v, g, "6", 0) && !accepts(v, g, "-9.0", 0) && !accepts(v, g, "0", 0));
    so_grammar_free(g);
    /* unsupported keywords fail closed, naming the keyword */
    CHECK(!so_test_compile(v, SO_SCHEMA_JSON, "{\"$dynamicRef\":\"#x\"}", &e));
    CHECK_MSG(strstr(e.msg, "$dynamicRef"), "%s", e.msg);
    g = so_test_compile(v, SO_SCHEMA_JSON, "{\"type\":\"array\",\"contains\":{\"type\":\"integer\"},\"maxContains\":1}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "[\"a\", 12, null]", 1) && accepts(v, g, "[12]", 1));
    CHECK(!accepts(v, g, "[\"a\"]", 0) && !accepts(v, g, "[]", 0) && !accepts(v, g, "[1, 2]", 0));
    so_grammar_free(g);
    CHECK(!so_test_compile(v, SO_SCHEMA_JSON, "{\"type\":\"array\",\"uniqueItems\":true}", &e));
    CHECK_MSG(strstr(e.msg, "uniqueItems"), "%s", e.msg);
    /* overlapping oneOf branches: exactly one must hold (integer xor number = non-integral numbers) */
    g = so_test_compile(v, SO_SCHEMA_JSON, "{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "1.5", 1) && !accepts(v, g, "1", 0) && !accepts(v, g, "\"x\"", 0));
    so_grammar_free(g);
    g = so_test_compile(v, SO_SCHEMA_JSON, "{\"type\":\"object\",\"oneOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "{\"a\": 1}", 1) && accepts(v, g, "{\"b\": 1, \"c\": 2}", 1));
    CHECK(!accepts(v, g, "{\"a\": 1, \"b\": 2}", 0) && !accepts(v, g, "{}", 0));
    so_grammar_free(g);
    CHECK(!so_test_compile(v, SO_SCHEMA_JSON, "{\"type\":\"string\",\"pattern\":\"(?=a)\"}", &e));
    CHECK_MSG(strstr(e.msg, "lookahead"), "%s", e.msg);
    CHECK(!so_test_compile(v, SO_SCHEMA_JSON, "{\"$ref\":\"#/definitions/missing\"}", &e));
    CHECK_MSG(strstr(e.msg, "not found"), "%s", e.msg);
    so_vocab_free(v);
}

TEST(so_json_schema_recursion_and_limits) {
    so_vocab *v = so_test_vocab(NULL);
    CHECK(v);
    di_error e = {0};
    so_grammar *g = so_test_compile(v, SO_SCHEMA_JSON,
                                    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                                    "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
                                    "\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}", &e);
    CHECK_MSG(g, "%s", e.msg);
    CHECK(accepts(v, g, "{\"v\": 1, \"kids\": [{\"kids\": [{\"v\": 2}]}, {}]}", 1));
    CHECK(!accepts(v, g, "{\"kids\": [{\"w\": 1}]}", 0));
    so_grammar_free(g);
    /* exponential anyOf products and deep nesting fail with an error, quickly */
    char big[8192];
    size_t o = 0;
    o += (size_t)snprintf(big + o, sizeof big - o, "{\"allOf\":[");
    for (int i = 0; i < 12; i++) o += (size_t)snprintf(big + o, sizeof big - o, "%s{\"anyOf\":[{\"type\":\"integer\"},{\"minimum\":%d}]}", i ? "," : "", i);
    o += (size_t)snprintf(big + o, sizeof big - o, "]}");
    CHECK(!so_test_compile(v, SO_SCHEMA_JSON, big, &e));
    CHECK_MSG(strstr(e.msg, "too many alternatives"), "%s", e.msg);
    o = 0;
    for (int i = 0; i < 300; i++) o += (size_t)snprintf(big + o, sizeof big - o, "{\"items\":");
    o += (size_t)snprintf(big + o, sizeof big - o, "true");
    for (int i = 0; i < 300; i++) big[o++] = '}';
    big[o] = 0;
    CHECK(!so_test_compile(v, SO_SCHEMA_JSON, big, &e));
    /* a huge enum hits the automaton size limit with an error */
    size_t cap = 30000 * 24 + 64, o2 = 0;
    char *huge = malloc(cap);
    CHECK(huge);
    o2 += (size_t)snprintf(huge + o2, cap - o2, "{\"enum\":[");
    for (int i = 0; i < 30000; i++) o2 += (size_t)snprintf(huge + o2, cap - o2, "%s\"value_%d_abcdefgh\"", i ? "," : "", i);
    snprintf(huge + o2, cap - o2, "]}");
    CHECK(!so_test_compile(v, SO_SCHEMA_JSON, huge, &e));
    CHECK_MSG(strstr(e.msg, "too large"), "%s", e.msg);
    free(huge);
    /* exponential regex nesting fails fast */
    CHECK(!so_test_compile(v, SO_SCHEMA_REGEX, "((((((((((a{1,9}){1,9}){1,9}){1,9}){1,9}){1,9}){1,9}){1,9}){1,9}){1,9})", &e));
    CHECK_MSG(strstr(e.msg, "too large") || strstr(e.msg, "too complex"), "%s", e.msg);
    so_vocab_free(v);
}

/* Integers: "1.0" is an integer value in JSON Schema (and what Python's
 * json.dumps writes for 1.0), but a generation grammar must not let a model
 * loop on fraction zeros: one ".0" at most, with and without bounds. */
TEST(so_json_schema_integer_fraction_zeros_bounded) {
    so_vocab *v = so_test_vocab(NULL);
    CHECK(v);
    di_error e = {0};
    const char *schemas[] = {"{\"type\":\"integer\"}", "{\"type\":\"integer\",\"minimum\":0,\"maximum\":120}",
                             "{\"type\":\"integer\",\"multipleOf\":5}"};
    for (int i = 0; i < 3; i++) {
        so_grammar *g = so_test_compile(v, SO_SCHEMA_JSON, schemas[i], &e);
        CHECK_MSG(g, "%s", e.msg);
        CHECK(accepts(v, g, "10", 1));
        CHECK_MSG(accepts(v, g, "10.0", 1), "schema %d rejects 10.0", i);
        CHECK_MSG(!accepts(v, g, "10.00", 0), "schema %d accepts 10.00", i);
        CHECK(!accepts(v, g, "10.5", 0));
        so_grammar_free(g);
    }
    so_vocab_free(v);
}
