/*
 * Chat encoders: DeepSeek's official V4 test vectors (tests/data/chat/v4/,
 * from encoding/test_encoding_dsv4.py), and tests/data/chat/cases.jsonl
 * (expected prompts produced by the reference Python encoders; see
 * tests/data/chat/gen_cases.py), plus the error paths.
 */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "test.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"

static di_json_doc *load_json(const char *rel) {
    char *text = NULL;
    size_t len = 0;
    di_error err = {0};
    di_json_doc *doc = NULL;
    if (di_read_file(di_test_data(rel), 0, &text, &len, &err) || di_json_parse(text, len, NULL, &doc, &err))
        fprintf(stderr, "    %s: %s\n", rel, err.msg);
    free(text);
    return doc;
}

static int first_diff(const char *a, size_t an, const char *b, size_t bn) {
    size_t i = 0;
    while (i < an && i < bn && a[i] == b[i]) i++;
    return (int)i;
}

TEST(chat_v4_official_vectors) {
    /* test_encoding_dsv4.py: cases 1-3 in thinking mode, 4 in chat mode. */
    for (int i = 1; i <= 4; i++) {
        char in[64], outp[64];
        snprintf(in, sizeof in, "chat/v4/input_%d.json", i);
        snprintf(outp, sizeof outp, "chat/v4/output_%d.txt", i);
        di_json_doc *doc = load_json(in);
        CHECK(doc);
        char *gold = NULL;
        size_t gl = 0;
        di_error err = {0};
        CHECK(di_read_file(di_test_data(outp), 0, &gold, &gl, &err) == DEEPINFER_OK);
        di_chat_options opt = {.arch = DI_CHAT_V4, .thinking = i != 4};
        char *p = NULL;
        size_t pl = 0;
        CHECK_MSG(di_chat_encode(doc->root, &opt, &p, &pl, &err) == DEEPINFER_OK, "case %d: %s", i, err.msg);
        CHECK_MSG(pl == gl && !memcmp(p, gold, gl), "case %d differs at byte %d", i, first_diff(p, pl, gold, gl));
        free(p);
        free(gold);
        di_json_free(doc);
    }
}

TEST(chat_reference_cases) {
    char *text = NULL;
    size_t len = 0, pos = 0;
    di_error err = {0};
    CHECK(di_read_file(di_test_data("chat/cases.jsonl"), 0, &text, &len, &err) == DEEPINFER_OK);
    int n = 0, fails = 0;
    while (pos < len) {
        char *nl = memchr(text + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
        di_json_doc *doc = NULL;
        CHECK(di_json_parse(text + pos, ll, NULL, &doc, &err) == DEEPINFER_OK);
        const di_json *r = doc->root;
        const di_json *eff = di_json_get(r, "effort"), *exp = di_json_get(r, "expected");
        di_chat_options opt = {0};
        opt.arch = !strcmp(di_json_get(r, "arch")->str, "v4") ? DI_CHAT_V4 : DI_CHAT_V41;
        opt.thinking = di_json_get(r, "thinking")->type == DI_JSON_TRUE;
        opt.reasoning_effort = eff->type == DI_JSON_STRING ? eff->str : NULL;
        char *p = NULL;
        size_t pl = 0;
        if (di_chat_encode(di_json_get(r, "input"), &opt, &p, &pl, &err) != DEEPINFER_OK) {
            fprintf(stderr, "    case %d (%s): %s\n", n + 1, di_json_get(r, "name")->str, err.msg);
            fails++;
        } else if (pl != exp->str_len || memcmp(p, exp->str, pl)) {
            int d = first_diff(p, pl, exp->str, exp->str_len);
            if (fails < 5)
                fprintf(stderr, "    case %d (%s %s thinking=%d effort=%s) differs at %d:\n      ours: %.80s\n      want: %.80s\n",
                        n + 1, di_json_get(r, "name")->str, di_json_get(r, "arch")->str, opt.thinking,
                        opt.reasoning_effort ? opt.reasoning_effort : "-", d, p + d, exp->str + d);
            fails++;
        }
        free(p);
        di_json_free(doc);
        n++;
        pos += ll + 1;
    }
    free(text);
    fprintf(stderr, "    chat: %d/%d reference cases agree\n", n - fails, n);
    CHECK(n >= 100);
    CHECK_EQ_INT(fails, 0);
}

static deepinfer_status encode_str(const char *json, di_chat_arch arch, int thinking, const char *effort, char **out,
                                   di_error *err) {
    di_json_doc *doc = NULL;
    if (di_json_parse(json, strlen(json), NULL, &doc, err)) return DEEPINFER_ERR_FORMAT;
    di_chat_options opt = {.arch = arch, .thinking = thinking, .reasoning_effort = effort};
    size_t n;
    deepinfer_status s = di_chat_encode(doc->root, &opt, out, &n, err);
    di_json_free(doc);
    return s;
}

TEST(chat_errors_are_clear) {
    char *p = NULL;
    di_error err = {0};
    CHECK(encode_str("[{\"role\": \"robot\", \"content\": \"x\"}]", DI_CHAT_V4, 0, NULL, &p, &err) ==
          DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.msg, "robot"));
    CHECK(encode_str("[{\"role\": \"user\", \"content\": \"x\"}]", DI_CHAT_V4, 1, "low", &p, &err) ==
          DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.msg, "V4"));
    CHECK(encode_str("[{\"role\": \"user\", \"content\": \"x\"}]", DI_CHAT_V41, 1, "101", &p, &err) ==
          DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(encode_str("[{\"role\": \"user\", \"content\": \"x\"}]", DI_CHAT_V41, 1, "xhigh", &p, &err) ==
          DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(encode_str("[{\"role\": \"developer\", \"content\": \"\"}]", DI_CHAT_V4, 0, NULL, &p, &err) ==
          DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(encode_str("{\"messages\": 3}", DI_CHAT_V4, 0, NULL, &p, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(encode_str("[{\"role\": \"user\", \"content\": 5}]", DI_CHAT_V41, 0, NULL, &p, &err) ==
          DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(encode_str("[{\"role\": \"user\", \"content\": \"x\", \"task\": \"bogus\"}]", DI_CHAT_V4, 0, NULL, &p, &err) ==
          DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(encode_str("[{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]", DI_CHAT_V4, 0, NULL, &p, &err) ==
          DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.msg, "V4 takes text parts only"));
    CHECK(encode_str("[{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"function\": {}}]}]", DI_CHAT_V4,
                     0, NULL, &p, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(p == NULL);
}

TEST(chat_prompt_to_ids) {
    /* The prompt's special tokens become single ids (V3 file: <｜User｜> 128803). */
    di_tokenizer *tok = NULL;
    di_error err = {0};
    CHECK(di_tokenizer_load(di_test_data("tokenizer"), &tok, &err) == DEEPINFER_OK);
    char *p = NULL;
    CHECK(encode_str("[{\"role\": \"user\", \"content\": \"hi\"}]", DI_CHAT_V4, 0, NULL, &p, &err) == DEEPINFER_OK);
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    CHECK(di_tokenizer_encode(tok, p, strlen(p), &ids, &n, &cap, &err) == DEEPINFER_OK);
    CHECK(n >= 4);
    CHECK_EQ_INT(ids[0], 0);
    CHECK_EQ_INT(ids[1], 128803);
    CHECK_EQ_INT(ids[2], 6366);
    CHECK_EQ_INT(ids[3], 128804);
    free(ids);
    free(p);
    di_tokenizer_free(tok);
}
