/* Structured outputs over the real DeepSeek vocabulary (129,280 padded ids):
 * masks agree with the one-token oracle along tokenized instances, for
 * schemas exercising every cache path (generic strings, maxLength room,
 * pending minLength, named-key subtraction, patterns, numbers, enums). */
#include "structured/so_testutil.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static int check_along(so_vocab *v, const di_tokenizer *tok, const char *schema, const char *instance, int expect_ok) {
    di_error e = {0};
    so_grammar *g = so_test_compile(v, SO_SCHEMA_JSON, schema, &e);
    if (!g) {
        fprintf(stderr, "    compile: %s\n", e.msg);
        return 0;
    }
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    if (di_tokenizer_encode(tok, instance, strlen(instance), &ids, &n, &cap, &e) != DEEPINFER_OK) return 0;
    so_matcher *m = NULL;
    so_matcher_new(g, NULL, &m, &e);
    int ok = 1, good = 1;
    for (size_t i = 0; i < n && ok; i++) {
        int32_t d = so_test_mask_diff(m);
        if (d != -1) {
            uint32_t l;
            const uint8_t *b = so_vocab_token(v, d, &l);
            fprintf(stderr, "    %s: mask differs from oracle before token %zu, at token %d '%.*s'\n", schema, i, d,
                    (int)l, (const char *)b);
            good = 0;
            break;
        }
        ok = so_matcher_accept_token(m, ids[i], &e) == DEEPINFER_OK;
    }
    if (good && ok && so_test_mask_diff(m) != -1) good = 0;
    int complete = ok && so_matcher_is_accepting(m);
    free(ids);
    so_matcher_free(m);
    so_grammar_free(g);
    if (good && complete != expect_ok) fprintf(stderr, "    %s: %s accepted=%d\n", schema, instance, complete);
    return good && complete == expect_ok;
}

TEST(so_deepseek_vocab_masks_match_oracle) {
    di_tokenizer *tok = NULL;
    di_error e = {0};
    CHECK(di_tokenizer_load(di_test_data("tokenizer/tokenizer.json"), &tok, &e) == DEEPINFER_OK);
    int32_t eos = so_tokenizer_default_eos(tok);
    CHECK(eos >= 0);
    so_vocab *v = NULL;
    CHECK(so_vocab_from_tokenizer(tok, 129280, &eos, 1, &v, &e) == DEEPINFER_OK);
    CHECK(v->n_vocab == 129280 && v->n_words == 4040);
    CHECK(check_along(v, tok,
                      "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":12},"
                      "\"age\":{\"type\":\"integer\",\"minimum\":0}},\"required\":[\"name\"]}",
                      "{\"name\": \"Ada Lovelace\", \"age\": 36, \"note\": [1, \"x\"]}", 1));
    CHECK(check_along(v, tok, "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":5}}}",
                      "{\"name\": \"toolong\"}", 0));
    CHECK(check_along(v, tok,
                      "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d+$\"},"
                      "\"kind\":{\"enum\":[\"alpha\",\"beta\",3]}},\"additionalProperties\":false}",
                      "{\"id\": \"AB-123\", \"kind\": \"beta\"}", 1));
    CHECK(check_along(v, tok, "{\"type\":\"array\",\"items\":{\"type\":\"number\",\"exclusiveMaximum\":10},\"maxItems\":3}",
                      "[1.5, -2, 9.99]", 1));
    CHECK(check_along(v, tok, "{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-02-29T12:30:00Z\"", 1));
    so_vocab_free(v);
    di_tokenizer_free(tok);
}
