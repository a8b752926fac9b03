/*
 * Bad input gives a clear per-request error naming the problem, and the
 * other requests of the same batch complete exactly as they would alone.
 */
#include "engine/engine_util.h"

typedef struct bad_case {
    const char *what;
    deepinfer_prompt prompt;
    void (*tweak)(deepinfer_sampling_params *);
    const char *expect; /* a substring of the error */
} bad_case;

static void p_top_p(deepinfer_sampling_params *p) { p->top_p = 1.5f; }
static void p_temp(deepinfer_sampling_params *p) { p->temperature = -0.5f; }
static void p_max0(deepinfer_sampling_params *p) { p->max_tokens = 0; }
static void p_min(deepinfer_sampling_params *p) { p->min_tokens = 9, p->max_tokens = 4; }
static void p_logprobs(deepinfer_sampling_params *p) { p->logprobs = 99; }
static void p_n(deepinfer_sampling_params *p) { p->n = 0; }
static void p_pen(deepinfer_sampling_params *p) { p->presence_penalty = 3; }
static void p_rep(deepinfer_sampling_params *p) { p->repetition_penalty = 0; }
static void p_stop_id(deepinfer_sampling_params *p) { p->stop_ids[0] = 7, p->stop_ids[1] = 5000, p->n_stop_ids = 2; }
static void p_stop_neg(deepinfer_sampling_params *p) { p->stop_ids[0] = -3, p->n_stop_ids = 1; }
static void p_stop_str(deepinfer_sampling_params *p) { p->stop[0] = "x", p->n_stop = 1; }
static void p_stop_empty(deepinfer_sampling_params *p) { p->stop[0] = "", p->n_stop = 1; }
static void p_so(deepinfer_sampling_params *p) { p->so_schema_type = "json", p->so_schema = "{}"; }
static void p_so_bad(deepinfer_sampling_params *p) { p->so_schema_type = "yaml", p->so_schema = "x"; }
static void p_huge(deepinfer_sampling_params *p) { p->max_tokens = 1000; }

TEST(engine_bad_requests_fail_alone_others_complete) {
    static int32_t ids[900];
    for (int i = 0; i < 900; i++) ids[i] = (int32_t)((i * 37 + 11) % 1024);
    static const int32_t out_of_range[] = {3, 4, 1024, 5};
    static const int32_t negative[] = {3, -1};
    const bad_case cases[] = {
        {"empty text prompt", {.text = ""}, NULL, "prompt is empty"},
        {"empty token ids", {.token_ids = ids, .n_token_ids = 0}, NULL, "prompt is empty"},
        {"two prompt sources", {.text = "a", .token_ids = ids, .n_token_ids = 3}, NULL, "exactly one of"},
        {"over-long prompt", {.token_ids = ids, .n_token_ids = 600}, NULL, "max_model_len"},
        {"token id beyond the vocabulary", {.token_ids = out_of_range, .n_token_ids = 4}, NULL, "token_ids[2] = 1024"},
        {"negative token id", {.token_ids = negative, .n_token_ids = 2}, NULL, "token_ids[1] = -1"},
        {"text without a tokenizer", {.text = "hello"}, NULL, "needs a tokenizer"},
        {"messages without a tokenizer", {.messages = "[]"}, NULL, "needs a tokenizer"},
        {"top_p", {.token_ids = ids, .n_token_ids = 8}, p_top_p, "top_p"},
        {"temperature", {.token_ids = ids, .n_token_ids = 8}, p_temp, "temperature"},
        {"max_tokens", {.token_ids = ids, .n_token_ids = 8}, p_max0, "max_tokens"},
        {"min_tokens", {.token_ids = ids, .n_token_ids = 8}, p_min, "min_tokens"},
        {"logprobs", {.token_ids = ids, .n_token_ids = 8}, p_logprobs, "logprobs"},
        {"n", {.token_ids = ids, .n_token_ids = 8}, p_n, "n must be"},
        {"presence_penalty", {.token_ids = ids, .n_token_ids = 8}, p_pen, "presence_penalty"},
        {"repetition_penalty", {.token_ids = ids, .n_token_ids = 8}, p_rep, "repetition_penalty"},
        {"unknown stop token id", {.token_ids = ids, .n_token_ids = 8}, p_stop_id, "stop_token_ids[1] = 5000"},
        {"negative stop token id", {.token_ids = ids, .n_token_ids = 8}, p_stop_neg, "stop_token_ids[0] = -3"},
        {"stop string without a tokenizer", {.token_ids = ids, .n_token_ids = 8}, p_stop_str, "stop strings need a tokenizer"},
        {"empty stop string", {.token_ids = ids, .n_token_ids = 8}, p_stop_empty, "stop[0]"},
        {"so_args without a tokenizer", {.token_ids = ids, .n_token_ids = 8}, p_so, "so_args need a tokenizer"},
        {"so_args schema_type", {.token_ids = ids, .n_token_ids = 8}, p_so_bad, "so_args.schema_type"},
        {"more than the pool can hold", {.token_ids = ids, .n_token_ids = 8}, p_huge, "state pages"},
    };
    enum { NB = sizeof cases / sizeof cases[0], NG = 3 };
    deepinfer_prompt pr[NB + NG];
    deepinfer_sampling_params sp[NB + NG];
    for (int i = 0; i < NB; i++) {
        pr[i] = cases[i].prompt;
        deepinfer_sampling_params_init(&sp[i]);
        if (cases[i].tweak) cases[i].tweak(&sp[i]);
    }
    for (int g = 0; g < NG; g++) { /* good requests mixed in */
        pr[NB + g] = (deepinfer_prompt){.token_ids = ids + 100 * g, .n_token_ids = (size_t)(20 + 40 * g)};
        deepinfer_sampling_params_init(&sp[NB + g]);
        sp[NB + g].max_tokens = 12;
        sp[NB + g].has_seed = 1;
        sp[NB + g].seed = (uint64_t)g;
        sp[NB + g].ignore_eos = 1;
    }
    /* a context of 512; a pool of 24 pages holds about 380 tokens per sequence */
    eng_opts o = {.chunk = 32, .max_model_len = 512, .page_rows = 16, .pages = 24};
    deepinfer_engine *e = eng_open(&o);
    CHECK(e);
    deepinfer_request_output **out = NULL;
    CHECK(deepinfer_generate(e, pr, NB + NG, sp, NB + NG, &out) == DEEPINFER_OK);
    for (int i = 0; i < NB; i++) {
        CHECK_MSG(out[i]->status != DEEPINFER_OK && out[i]->finished, "%s: no error", cases[i].what);
        CHECK_MSG(strstr(out[i]->error, cases[i].expect), "%s: error \"%s\" does not mention \"%s\"", cases[i].what,
                  out[i]->error, cases[i].expect);
        fprintf(stderr, "    %-32s -> %s: %s\n", cases[i].what, deepinfer_status_name(out[i]->status), out[i]->error);
    }
    for (int g = 0; g < NG; g++) {
        deepinfer_request_output **alone = NULL;
        CHECK(deepinfer_generate(e, &pr[NB + g], 1, &sp[NB + g], 1, &alone) == DEEPINFER_OK);
        CHECK(out[NB + g]->status == DEEPINFER_OK && out[NB + g]->choices[0].n_tokens == 12);
        CHECK(eng_same_output(alone[0], out[NB + g], g));
        deepinfer_outputs_free(alone, 1);
    }
    deepinfer_outputs_free(out, NB + NG);
    /* the streaming API reports the same errors synchronously, queueing nothing */
    uint64_t id = 77;
    CHECK(deepinfer_add_request(e, &pr[0], &sp[0], &id) != DEEPINFER_OK && id == 77);
    CHECK(strstr(deepinfer_engine_last_error(e), "prompt is empty"));
    CHECK(!deepinfer_has_unfinished(e));
    /* bad generate arguments */
    CHECK(deepinfer_generate(e, pr, 3, sp, 2, &out) == DEEPINFER_ERR_INVALID_ARGUMENT && !out);
    deepinfer_engine_close(e);
}

TEST(engine_bad_configs_are_rejected_with_the_field) {
    struct {
        const char *what;
        deepinfer_engine_config c;
        const char *expect;
    } cases[5];
    for (int i = 0; i < 5; i++) {
        deepinfer_engine_config_init(&cases[i].c);
        cases[i].c.model = di_test_data(ENGINE_GOLDEN);
        cases[i].c.max_model_len = 1024;
    }
    cases[0].what = "missing model", cases[0].c.model = "/nonexistent/model", cases[0].expect = "/nonexistent/model";
    cases[1].what = "budget too small", cases[1].c.memory_budget = 1 << 20, cases[1].expect = "memory_budget";
    cases[2].what = "max_num_seqs", cases[2].c.max_num_seqs = -4, cases[2].expect = "max_num_seqs";
    cases[3].what = "accelerator", cases[3].c.accelerator = "tpu", cases[3].expect = "accelerator";
    cases[4].what = "max_model_len", cases[4].c.max_model_len = 1 << 30, cases[4].expect = "max_position_embeddings";
    for (int i = 0; i < 5; i++) {
        deepinfer_engine *e = NULL;
        char msg[1024] = "";
        CHECK(deepinfer_engine_open(&cases[i].c, &e, msg, sizeof msg) != DEEPINFER_OK && !e);
        CHECK_MSG(strstr(msg, cases[i].expect), "%s: \"%s\"", cases[i].what, msg);
    }
}

TEST(engine_stops_at_the_model_context) {
    eng_opts o = {.chunk = 16, .max_model_len = 64};
    deepinfer_engine *e = eng_open(&o);
    CHECK(e);
    int32_t ids[63];
    for (int i = 0; i < 63; i++) ids[i] = (int32_t)(i * 5 % 1024);
    deepinfer_prompt pr[2] = {{.token_ids = ids, .n_token_ids = 60}, {.token_ids = ids, .n_token_ids = 63}};
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.max_tokens = 10;
    sp.ignore_eos = 1;
    deepinfer_request_output **out = NULL;
    CHECK(deepinfer_generate(e, pr, 2, &sp, 1, &out) == DEEPINFER_OK);
    /* prompt + output reaches max_model_len: finish "length" before max_tokens */
    CHECK(out[0]->status == DEEPINFER_OK && out[0]->choices[0].n_tokens == 4);
    CHECK(out[0]->choices[0].finish_reason == DEEPINFER_FINISH_LENGTH);
    CHECK(out[1]->status == DEEPINFER_OK && out[1]->choices[0].n_tokens == 1);
    deepinfer_outputs_free(out, 2);
    deepinfer_engine_close(e);
}
