/*
 * `deepinfer serve` without the network: OpenAI request bodies mapped onto
 * engine prompts and sampling params (and refused, naming the field), the
 * reasoning / content / tool-call split of streamed text, DSML tool-call
 * parsing (both dialects, malformed blocks), and the response / SSE chunk /
 * error JSON, parsed back with the strict JSON parser.
 */
#include <stdlib.h>

#include "io/json.h"
#include "serve/dsml.h"
#include "serve/oai_request.h"
#include "serve/oai_response.h"
#include "serve/oai_split.h"
#include "test.h"

static int parse(const char *body, int chat, oai_request *r, char *err, char *param) {
    return oai_request_parse(body, strlen(body), chat, r, err, 512, param, 64);
}

TEST(serve_request_chat_maps_every_field) {
    oai_request r;
    char err[512], param[64];
    const char *body =
        "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"temperature\": 0.5, "
        "\"top_p\": 0.9, \"top_k\": 7, \"max_completion_tokens\": 33, \"stop\": [\"a\", \"bc\"], \"seed\": 42, \"n\": 2, "
        "\"logprobs\": true, \"top_logprobs\": 3, \"presence_penalty\": 0.25, \"frequency_penalty\": -0.5, "
        "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": "
        "\"integer\"}}}, \"stream\": true, \"stream_options\": {\"include_usage\": true}, \"chat_template_kwargs\": "
        "{\"thinking\": true}, \"reasoning_effort\": \"max\", \"tools\": [{\"type\": \"function\", \"function\": "
        "{\"name\": \"f\", \"parameters\": {}}}], \"user\": \"u\"}";
    CHECK_MSG(parse(body, 1, &r, err, param) == 0, "%s", err);
    CHECK_STR_EQ(r.model, "m");
    CHECK(r.chat && r.stream && r.include_usage && r.has_tools && r.thinking && r.logprobs);
    CHECK_NEAR(r.params.temperature, 0.5, 1e-6);
    CHECK_NEAR(r.params.top_p, 0.9, 1e-6);
    CHECK_EQ_INT(r.params.top_k, 7);
    CHECK_EQ_INT(r.params.max_tokens, 33);
    CHECK_EQ_INT(r.params.n_stop, 2);
    CHECK_STR_EQ(r.params.stop[1], "bc");
    CHECK(r.params.has_seed && r.params.seed == 42);
    CHECK_EQ_INT(r.params.n, 2);
    CHECK_EQ_INT(r.params.logprobs, 3);
    CHECK_NEAR(r.params.presence_penalty, 0.25, 1e-6);
    CHECK_NEAR(r.params.frequency_penalty, -0.5, 1e-6);
    CHECK_STR_EQ(r.params.so_schema_type, "json");
    CHECK_STR_EQ(r.params.so_schema, "{\"type\": \"integer\"}");
    CHECK_EQ_INT(r.params.so_after_think, 1); /* thinking: constrain after </think> */
    CHECK_STR_EQ(r.prompt.reasoning_effort, "max");
    CHECK_EQ_INT(r.prompt.thinking, 1);
    /* the chat encoder's {"messages": [...], "tools": [...]} form */
    di_json_doc *doc = NULL;
    CHECK(di_json_parse(r.prompt.messages, strlen(r.prompt.messages), NULL, &doc, NULL) == DEEPINFER_OK);
    CHECK(di_json_get(doc->root, "messages") && di_json_get(doc->root, "messages")->count == 1);
    CHECK(di_json_get(doc->root, "tools") && di_json_get(doc->root, "tools")->count == 1);
    di_json_free(doc);
    oai_request_free(&r);

    /* defaults; tool_choice none drops the tools; thinking flag; json_object; stop as a string */
    CHECK(parse("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\", "
                "\"function\": {\"name\": \"f\"}}], \"tool_choice\": \"none\", \"thinking\": true, \"stop\": \"zz\", "
                "\"response_format\": {\"type\": \"json_object\"}}",
                1, &r, err, param) == 0);
    CHECK(!r.has_tools && !strstr(r.prompt.messages, "tools") && r.thinking && !r.stream && !r.logprobs);
    CHECK_EQ_INT(r.params.max_tokens, 16);
    CHECK(!r.params.has_seed && r.params.logprobs == -1 && r.params.n == 1);
    CHECK(r.params.n_stop == 1 && !strcmp(r.params.stop[0], "zz"));
    CHECK_STR_EQ(r.params.so_schema, "{\"type\": \"object\"}");
    oai_request_free(&r);
}

TEST(serve_request_completions_prompt_forms) {
    oai_request r;
    char err[512], param[64];
    CHECK(parse("{\"prompt\": \"hello\", \"max_tokens\": 3, \"logprobs\": 2}", 0, &r, err, param) == 0);
    CHECK(!r.chat && !strcmp(r.prompt.text, "hello") && r.params.max_tokens == 3 && r.params.logprobs == 2 && r.logprobs);
    oai_request_free(&r);
    CHECK(parse("{\"prompt\": [\"one\"]}", 0, &r, err, param) == 0);
    CHECK_STR_EQ(r.prompt.text, "one");
    oai_request_free(&r);
    CHECK(parse("{\"prompt\": [5, 6, 7], \"seed\": -1, \"structured_outputs\": {\"regex\": \"a+\"}}", 0, &r, err, param) == 0);
    CHECK(r.prompt.n_token_ids == 3 && r.prompt.token_ids[2] == 7);
    CHECK(r.params.has_seed && r.params.seed == UINT64_MAX);
    CHECK(!strcmp(r.params.so_schema_type, "regex") && !strcmp(r.params.so_schema, "a+"));
    oai_request_free(&r);
}

TEST(serve_request_errors_name_the_field) {
    static const struct {
        const char *body;
        int chat;
        const char *param;
    } cases[] = {
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"temperature\": \"hot\"}", 1, "temperature"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 0}", 1, "max_tokens"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 1.5}", 1, "max_tokens"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stop\": [1]}", 1, "stop"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"n\": 0}", 1, "n"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tempurature\": 1}", 1, "tempurature"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}", 1, "top_logprobs"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"yaml\"}}", 1,
         "response_format.type"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"json_schema\"}}", 1,
         "response_format.json_schema.schema"},
        {"{\"messages\": []}", 1, "messages"},
        {"{\"messages\": [\"hi\"]}", 1, "messages"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\"}]}", 1, "tools"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream\": 1}", 1, "stream"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"seed\": \"7\"}", 1, "seed"},
        {"{\"temperature\": 1}", 1, "messages"},
        {"{\"prompt\": 5}", 0, "prompt"},
        {"{\"prompt\": [\"a\", \"b\"]}", 0, "prompt"},
        {"{\"prompt\": \"a\\u0000b\"}", 0, "prompt"},
        {"{\"prompt\": \"a\", \"messages\": []}", 0, "messages"},
        {"{\"prompt\": \"a\", \"logprobs\": 21}", 0, "logprobs"},
        {"[1]", 1, ""},
        {"{\"messages\": ", 1, ""},
        {"", 0, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        oai_request r;
        char err[512], param[64];
        int rc = parse(cases[i].body, cases[i].chat, &r, err, param);
        oai_request_free(&r);
        CHECK_MSG(rc == -1, "case %zu accepted: %s", i, cases[i].body);
        CHECK_MSG(!strcmp(param, cases[i].param), "case %zu: param \"%s\", want \"%s\" (%s)", i, param, cases[i].param, err);
        CHECK_MSG(err[0], "case %zu: no message", i);
    }
}

/* Feed `text` in pieces of `step` bytes; join what the split reports. */
static void split_all(const char *text, size_t step, int thinking, int tools, char *rs, char *cs, int *n_calls,
                      dsml_call **calls) {
    oai_split s;
    oai_split_init(&s, thinking, tools);
    size_t n = strlen(text), rn = 0, cn = 0;
    *n_calls = 0;
    *calls = NULL;
    for (size_t upto = 0;;) {
        upto = upto + step > n ? n : upto + step;
        oai_span r, c;
        dsml_call *cl = NULL;
        int nc = 0;
        oai_split_step(&s, text, upto, upto == n, &r, &c, &cl, &nc);
        memcpy(rs + rn, text + r.off, r.len), rn += r.len;
        memcpy(cs + cn, text + c.off, c.len), cn += c.len;
        if (nc) *n_calls = nc, *calls = cl;
        if (upto == n) break;
        /* never a piece of the markers as text */
        rs[rn] = cs[cn] = 0;
    }
    rs[rn] = cs[cn] = 0;
}

#define V41_CALL                                                                                            \
    "<\xef\xbd\x9c" "DSML\xef\xbd\x9c calls>\n<\xef\xbd\x9c" "DSML\xef\xbd\x9c invoke name=\"get_weather\">\n"    \
    "<\xef\xbd\x9c" "DSML\xef\xbd\x9c parameter name=\"city\" string=\"true\">Paris \"FR\"</\xef\xbd\x9c"        \
    "DSML\xef\xbd\x9c parameter>\n<\xef\xbd\x9c" "DSML\xef\xbd\x9c parameter name=\"days\" string=\"false\">3</"  \
    "\xef\xbd\x9c" "DSML\xef\xbd\x9c parameter>\n</\xef\xbd\x9c" "DSML\xef\xbd\x9c invoke>\n</\xef\xbd\x9c"        \
    "DSML\xef\xbd\x9c calls>"

#define V4_CALLS                                                                                            \
    "<\xef\xbd\x9c" "DSML\xef\xbd\x9ctool_calls>\n<\xef\xbd\x9c" "DSML\xef\xbd\x9cinvoke name=\"a\">\n"         \
    "<\xef\xbd\x9c" "DSML\xef\xbd\x9cparameter name=\"o\" string=\"false\">{\"k\": [1, 2]}</\xef\xbd\x9c"       \
    "DSML\xef\xbd\x9cparameter>\n</\xef\xbd\x9c" "DSML\xef\xbd\x9cinvoke>\n<\xef\xbd\x9c" "DSML\xef\xbd\x9cinvoke " \
    "name=\"b\">\n</\xef\xbd\x9c" "DSML\xef\xbd\x9cinvoke>\n</\xef\xbd\x9c" "DSML\xef\xbd\x9ctool_calls>\n"

TEST(serve_dsml_tool_calls_parse_in_both_dialects) {
    dsml_call *c = NULL;
    const char *t = V41_CALL;
    CHECK_EQ_INT(dsml_find(t, strlen(t)), 0);
    CHECK_EQ_INT(dsml_parse(t, strlen(t), &c), 1);
    CHECK_STR_EQ(c[0].name, "get_weather");
    CHECK_STR_EQ(c[0].arguments, "{\"city\": \"Paris \\\"FR\\\"\", \"days\": 3}");
    dsml_free(c, 1);
    t = V4_CALLS;
    CHECK_EQ_INT(dsml_parse(t, strlen(t), &c), 2);
    CHECK_STR_EQ(c[0].name, "a");
    CHECK_STR_EQ(c[0].arguments, "{\"o\": {\"k\": [1, 2]}}");
    CHECK_STR_EQ(c[1].name, "b");
    CHECK_STR_EQ(c[1].arguments, "{}");
    dsml_free(c, 2);
    /* incomplete or malformed blocks are refused */
    char cut[1024];
    snprintf(cut, sizeof cut, "%s", V41_CALL);
    for (size_t n = 0; n + 1 < strlen(cut); n += 7) CHECK_MSG(dsml_parse(cut, n, &c) == -1 && !c, "prefix %zu accepted", n);
    CHECK(dsml_parse("<\xef\xbd\x9c" "DSML\xef\xbd\x9c calls>junk</\xef\xbd\x9c" "DSML\xef\xbd\x9c calls>", 40, &c) == -1);
    CHECK_EQ_INT(dsml_find("no calls here <\xef\xbd\x9c" "DSML\xef\xbd\x9c other>", 30), -1);
}

TEST(serve_split_reasoning_content_and_tool_calls_in_any_pieces) {
    char rs[2048], cs[2048];
    int nc;
    dsml_call *calls;
    for (size_t step = 1; step < 12; step++) {
        split_all("I think so.</think>The answer.", step, 1, 0, rs, cs, &nc, &calls);
        CHECK_STR_EQ(rs, "I think so.");
        CHECK_STR_EQ(cs, "The answer.");
        CHECK_EQ_INT(nc, 0);
        /* no thinking: a literal </think> is content */
        split_all("a</think>b", step, 0, 0, rs, cs, &nc, &calls);
        CHECK(!rs[0] && !strcmp(cs, "a</think>b"));
        /* tools: content before the block, the block as calls */
        split_all("hm</think>Let me check." V41_CALL, step, 1, 1, rs, cs, &nc, &calls);
        CHECK_STR_EQ(rs, "hm");
        CHECK_STR_EQ(cs, "Let me check.");
        CHECK_EQ_INT(nc, 1);
        CHECK_STR_EQ(calls[0].name, "get_weather");
        dsml_free(calls, nc);
        /* a block that never closes is content after all */
        split_all("x<\xef\xbd\x9c" "DSML\xef\xbd\x9c calls>\nbroken", step, 0, 1, rs, cs, &nc, &calls);
        CHECK_STR_EQ(cs, "x<\xef\xbd\x9c" "DSML\xef\xbd\x9c calls>\nbroken");
        CHECK_EQ_INT(nc, 0);
        /* a '<' that is not the block is released */
        split_all("a < b <c", step, 0, 1, rs, cs, &nc, &calls);
        CHECK_STR_EQ(cs, "a < b <c");
    }
    /* held back: a partial "</think>" is not streamed as reasoning */
    oai_split s;
    oai_split_init(&s, 1, 0);
    oai_span r, c;
    dsml_call *cl;
    int n;
    oai_split_step(&s, "abc</thi", 8, 0, &r, &c, &cl, &n);
    CHECK(r.off == 0 && r.len == 3 && c.len == 0);
}

static di_json_doc *json_of(const di_sbuf *b, size_t skip) {
    di_json_doc *doc = NULL;
    if (b->oom || b->n < skip || di_json_parse(b->p + skip, b->n - skip, NULL, &doc, NULL)) return NULL;
    return doc;
}

TEST(serve_response_and_chunks_are_openai_shaped) {
    oai_request r;
    char err[512], param[64];
    CHECK(parse("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"thinking\": true, \"logprobs\": true, "
                "\"top_logprobs\": 1, \"n\": 2, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}",
                1, &r, err, param) == 0);
    static const char text0[] = "why</think>ok \"q\"\n\x01";
    static const char text1[] = "t</think>" V41_CALL;
    int32_t ids[3] = {5, 6, 7};
    float lp[3] = {-0.5f, -1.0f, -1.0f / 0.0f}, tlp[3] = {-0.1f, -0.2f, -0.3f};
    int32_t tids[3] = {1, 2, 3};
    deepinfer_completion ch[2] = {
        {.index = 0, .token_ids = ids, .n_tokens = 3, .text = text0, .text_len = sizeof text0 - 1, .logprobs = lp,
         .n_top = 1, .top_ids = tids, .top_logprobs = tlp, .finish_reason = DEEPINFER_FINISH_LENGTH},
        {.index = 1, .token_ids = ids, .n_tokens = 3, .text = text1, .text_len = sizeof text1 - 1, .logprobs = lp,
         .n_top = 1, .top_ids = tids, .top_logprobs = tlp, .finish_reason = DEEPINFER_FINISH_EOS}};
    deepinfer_request_output o = {.n_prompt = 11, .finished = 1, .n_choices = 2, .choices = ch, .error = ""};
    oai_resp_ctx c = {.id = "chatcmpl-1", .created = 1700000000, .model = "demo", .req = &r, .tok = NULL};
    di_sbuf b = {0};
    oai_build_response(&b, &c, &o);
    di_json_doc *doc = json_of(&b, 0);
    CHECK_MSG(doc, "not JSON: %s", b.p);
    const di_json *root = doc->root;
    CHECK_STR_EQ(di_json_get(root, "object")->str, "chat.completion");
    CHECK_STR_EQ(di_json_get(root, "model")->str, "demo");
    const di_json *u = di_json_get(root, "usage");
    CHECK(di_json_get(u, "prompt_tokens")->i64 == 11 && di_json_get(u, "completion_tokens")->i64 == 6 &&
          di_json_get(u, "total_tokens")->i64 == 17);
    const di_json *c0 = di_json_at(di_json_get(root, "choices"), 0), *c1 = di_json_at(di_json_get(root, "choices"), 1);
    const di_json *m0 = di_json_get(c0, "message"), *m1 = di_json_get(c1, "message");
    CHECK_STR_EQ(di_json_get(m0, "role")->str, "assistant");
    CHECK_STR_EQ(di_json_get(m0, "reasoning_content")->str, "why");
    CHECK_STR_EQ(di_json_get(m0, "content")->str, "ok \"q\"\n\x01");
    CHECK_STR_EQ(di_json_get(c0, "finish_reason")->str, "length");
    const di_json *lc = di_json_get(di_json_get(c0, "logprobs"), "content");
    CHECK(lc && lc->count == 3);
    CHECK_STR_EQ(di_json_get(di_json_at(lc, 0), "token")->str, "token_id:5");
    CHECK_NEAR(di_json_get(di_json_at(lc, 1), "logprob")->num, -1.0, 1e-9);
    CHECK_NEAR(di_json_get(di_json_at(lc, 2), "logprob")->num, -9999.0, 1e-9); /* -inf has no JSON */
    CHECK_EQ_INT(di_json_get(di_json_at(lc, 0), "top_logprobs")->count, 1);
    CHECK_EQ_INT(di_json_get(m1, "content")->type, DI_JSON_NULL);
    CHECK_STR_EQ(di_json_get(c1, "finish_reason")->str, "tool_calls");
    const di_json *tc = di_json_at(di_json_get(m1, "tool_calls"), 0);
    CHECK_STR_EQ(di_json_get(tc, "type")->str, "function");
    CHECK(di_json_get(tc, "id") && di_json_get(tc, "id")->str_len > 5);
    CHECK_STR_EQ(di_json_get(di_json_get(tc, "function"), "name")->str, "get_weather");
    CHECK_STR_EQ(di_json_get(di_json_get(tc, "function"), "arguments")->str, "{\"city\": \"Paris \\\"FR\\\"\", \"days\": 3}");
    di_json_free(doc);
    di_sbuf_free(&b);

    /* a chunk: "data: {...}\n\n" with the role first, reasoning under both names */
    oai_span rs = {0, 3}, cs = {11, 2};
    oai_build_chunk(&b, &c, &ch[0], 1, rs, cs, NULL, 0, 1, NULL);
    CHECK(b.n > 8 && !memcmp(b.p, "data: ", 6) && !memcmp(b.p + b.n - 2, "\n\n", 2));
    CHECK(!strchr(b.p, '\n') || strchr(b.p, '\n') == b.p + b.n - 2); /* one line */
    doc = json_of(&b, 6);
    CHECK_MSG(doc, "chunk not JSON: %s", b.p);
    const di_json *d0 = di_json_at(di_json_get(doc->root, "choices"), 0);
    const di_json *delta = di_json_get(d0, "delta");
    CHECK_STR_EQ(di_json_get(doc->root, "object")->str, "chat.completion.chunk");
    CHECK_STR_EQ(di_json_get(delta, "role")->str, "assistant");
    CHECK_STR_EQ(di_json_get(delta, "reasoning_content")->str, "why");
    CHECK_STR_EQ(di_json_get(delta, "reasoning")->str, "why");
    CHECK_STR_EQ(di_json_get(delta, "content")->str, "ok");
    CHECK_EQ_INT(di_json_get(d0, "finish_reason")->type, DI_JSON_NULL);
    CHECK_EQ_INT(di_json_get(di_json_get(d0, "logprobs"), "content")->count, 2); /* tokens 1..2 */
    di_json_free(doc);
    di_sbuf_free(&b);
    /* an empty chunk is not written; the usage chunk has no choices */
    oai_span none = {0, 0};
    r.logprobs = 0;
    oai_build_chunk(&b, &c, &ch[0], 0, none, none, NULL, 0, 3, NULL);
    CHECK_EQ_INT(b.n, 0);
    oai_build_usage_chunk(&b, &c, 4, 5);
    doc = json_of(&b, 6);
    CHECK(doc && di_json_get(doc->root, "choices")->count == 0);
    CHECK_EQ_INT(di_json_get(di_json_get(doc->root, "usage"), "total_tokens")->i64, 9);
    di_json_free(doc);
    di_sbuf_free(&b);
    oai_request_free(&r);

    /* errors: {"error": {"message", "type", "param", "code"}} */
    oai_build_error(&b, "bad \"x\"", "invalid_request_error", "", "c");
    doc = json_of(&b, 0);
    CHECK(doc);
    const di_json *e = di_json_get(doc->root, "error");
    CHECK_STR_EQ(di_json_get(e, "message")->str, "bad \"x\"");
    CHECK_STR_EQ(di_json_get(e, "type")->str, "invalid_request_error");
    CHECK_EQ_INT(di_json_get(e, "param")->type, DI_JSON_NULL);
    CHECK_STR_EQ(di_json_get(e, "code")->str, "c");
    di_json_free(doc);
    di_sbuf_free(&b);
    /* invalid UTF-8 never reaches the JSON */
    oai_json_string(&b, "a\xff\xc3", 3);
    CHECK_STR_EQ(b.p, "\"a\xef\xbf\xbd\xef\xbf\xbd\"");
    di_sbuf_free(&b);
}
