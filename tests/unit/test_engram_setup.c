/* Engram load-time setup (engram_setup.h): which token map and constants are
 * used, and the checks the reference makes. */
#include <stdlib.h>
#include <string.h>

#include "model/engram_setup.h"
#include "test.h"
#include "util/file.h"

static const char *k_released =
    "{\"model_type\":\"deepseek_v41\",\"text_config\":{\"engram_layer_ids\":[1,14],"
    "\"engram_num_embeddings\":[384006168,384016682],\"engram_max_ngram_size\":4,\"engram_vocab_size\":16000000,"
    "\"engram_n_heads\":8,\"engram_head_dim\":256,\"engram_pad_token_id\":2,\"engram_compressed_vocab_size\":%d}}";

static deepinfer_status setup(int compressed, const di_tokenizer *tok, di_engram_tables *t, di_error *err) {
    char text[1024];
    snprintf(text, sizeof text, k_released, compressed);
    di_json_doc *doc;
    deepinfer_status st = di_json_parse(text, strlen(text), NULL, &doc, err);
    if (st) return st;
    st = di_engram_setup(NULL, doc->root, tok, NULL, t, err);
    di_json_free(doc);
    return st;
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
    di_json_doc *doc;
    const char *text = "{\"model_type\":\"deepseek_v4\",\"hidden_size\":4096}";
    CHECK(di_json_parse(text, strlen(text), NULL, &doc, &err) == DEEPINFER_OK);
    di_engram_tables t;
    deepinfer_status st = di_engram_setup(NULL, doc->root, NULL, NULL, &t, &err);
    di_json_free(doc);
    CHECK(st == DEEPINFER_OK);
    CHECK_EQ_INT(t.cfg.n_layers, 0);
    di_engram_tables_free(&t);
}

TEST(engram_step_ids_is_atomic) {
    di_error err;
    di_json_doc *cfg, *man;
    char *buf;
    size_t len;
    CHECK(di_read_file(di_test_data("golden/v41-tiny-a/config.json"), 0, &buf, &len, &err) == 0);
    CHECK(di_json_parse(buf, len, NULL, &cfg, &err) == 0);
    free(buf);
    CHECK(di_read_file(di_test_data("golden/v41-tiny-a/expected/manifest.json"), 0, &buf, &len, &err) == 0);
    CHECK(di_json_parse(buf, len, NULL, &man, &err) == 0);
    free(buf);
    di_engram_tables t;
    deepinfer_status st = di_engram_setup(di_test_data("golden/v41-tiny-a"), cfg->root, NULL,
                                          di_json_get(man->root, "engram"), &t, &err);
    di_json_free(cfg);
    di_json_free(man);
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
