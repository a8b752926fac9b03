/* Engram load-time setup (engram_setup.h): which token map and constants are
 * used, and the checks the reference makes. */
#include <stdlib.h>
#include <string.h>

#include "model/engram_setup.h"
#include "test.h"
#include "util/file.h"

/* The released config with another compressed vocabulary size. */
static deepinfer_status setup(int compressed, const di_tokenizer *tok, di_engram_tables *t, di_error *err) {
    di_model_config c;
    deepinfer_status st = di_config_load(di_test_data("config/deepseek-v41-flash.json"), &c, err);
    if (st) return st;
    c.engram_compressed_vocab_size = compressed;
    return di_engram_setup(NULL, &c, tok, NULL, t, err);
}

TEST(engram_setup_checks_the_class_count) {
    di_error err;
    di_tokenizer *tok;
    CHECK(di_tokenizer_load(di_test_data("tokenizer/tokenizer.json"), &tok, &err) == DEEPINFER_OK);
    di_engram_tables t;
    /* The DeepSeek-V3 tokenizer gives 98627 classes, not the released 99092: refused. */
    deepinfer_status st1 = setup(99092, tok, &t, &err);
    int msg_ok = strstr(err.msg, "98627") != NULL && strstr(err.msg, "99092") != NULL;
    /* A config that matches the map but not the release has no built-in multipliers. */
    deepinfer_status st2 = setup(98627, tok, &t, &err);
    /* No tokenizer and no map file. */
    deepinfer_status st3 = setup(99092, NULL, &t, &err);
    di_tokenizer_free(tok);
    CHECK(st1 == DEEPINFER_ERR_FORMAT && msg_ok);
    CHECK(st2 == DEEPINFER_ERR_NOT_FOUND);
    CHECK(st3 == DEEPINFER_ERR_NOT_FOUND);
}

TEST(engram_setup_without_engram) {
    di_error err;
    di_model_config c;
    CHECK(di_config_load(di_test_data("golden/v4-tiny-a/config.json"), &c, &err) == DEEPINFER_OK);
    di_engram_tables t;
    deepinfer_status st = di_engram_setup(NULL, &c, NULL, NULL, &t, &err);
    CHECK(st == DEEPINFER_OK);
    CHECK_EQ_INT(t.hash.n_layers, 0);
    di_engram_tables_free(&t);
}

TEST(engram_step_ids_is_atomic) {
    di_error err;
    di_model_config c;
    CHECK(di_config_load(di_test_data("golden/v41-tiny-a/config.json"), &c, &err) == DEEPINFER_OK);
    di_engram_tables t;
    /* the hash constants from the golden manifest's "engram" entry */
    deepinfer_status st = di_engram_setup(di_test_data("golden/v41-tiny-a"), &c, NULL,
                                          di_test_data("golden/v41-tiny-a/expected/manifest.json"), &t, &err);
    CHECK_MSG(st == DEEPINFER_OK, "%s", err.msg);
    di_engram_seq s;
    di_engram_seq_init(&s);
    int32_t tokens[3] = {0, 5, 1024};
    uint8_t mask[3] = {1, 0, 1};
    int64_t ids[3 * 12];
    deepinfer_status bad = di_engram_step_ids(&t, &s, 0, tokens, mask, 3, ids, &err);
    int64_t len_after_bad = s.len;
    deepinfer_status good = di_engram_step_ids(&t, &s, 0, tokens, mask, 2, ids, &err);
    di_engram_tables_free(&t);
    CHECK(bad == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(len_after_bad, 0);
    CHECK(good == DEEPINFER_OK);
    CHECK_EQ_INT(s.len, 2);
    CHECK_EQ_INT(s.cls[1], DI_ENGRAM_DEAD);
}
