/*
 * Greedy outputs through the engine (deepinfer_generate) equal the
 * `deepinfer score` trajectories (di_v4_score) and the reference's own
 * greedy decode on the golden V4 checkpoint.
 */
#include "golden/golden_util.h"
#include "deepinfer.h"
#include "score/score.h"

#define GDIR "golden/v4-tiny-a"

static deepinfer_engine *open_golden(int chunk, int64_t pages) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data(GDIR);
    c.max_model_len = 1024;
    c.chunk_size = chunk;
    c.num_pages = pages;
    c.max_num_seqs = 16;
    deepinfer_engine *e = NULL;
    char msg[1024];
    if (deepinfer_engine_open(&c, &e, msg, sizeof msg)) fprintf(stderr, "    open: %s\n", msg);
    return e;
}

TEST(engine_greedy_generate_equals_score_and_reference) {
    di_json_doc *man = golden_manifest(di_test_data(GDIR));
    CHECK(man);
    int np = 0, no = 0;
    int32_t *prompt = golden_ints(man->root, "prompt_token_ids", NULL, &np);
    int32_t *want = golden_ints(man->root, "decode", "output_tokens", &no);
    int first = (int)golden_num(man->root, "decode", "first_token_from_prefill", NULL);
    CHECK(prompt && want);
    deepinfer_engine *e = open_golden(64, 0);
    CHECK(e);
    deepinfer_prompt p = {.token_ids = prompt, .n_token_ids = (size_t)np};
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.temperature = 0;
    sp.max_tokens = no + 1;
    sp.ignore_eos = 1;
    sp.logprobs = 0;
    deepinfer_request_output **outs = NULL;
    CHECK(deepinfer_generate(e, &p, 1, &sp, 1, &outs) == DEEPINFER_OK);
    const deepinfer_completion *c = &outs[0]->choices[0];
    CHECK_MSG(outs[0]->status == DEEPINFER_OK, "%s", outs[0]->error);
    CHECK_EQ_INT(c->n_tokens, no + 1);
    CHECK_EQ_INT(c->token_ids[0], first);
    for (int i = 0; i < no; i++) CHECK_MSG(c->token_ids[i + 1] == want[i], "token %d: %d vs reference %d", i + 1, c->token_ids[i + 1], want[i]);
    CHECK(c->finish_reason == DEEPINFER_FINISH_LENGTH);
    /* the score driver's greedy trajectory, and the raw logprob of each token from its logits */
    di_v4_model *m = NULL;
    di_error err = {0};
    CHECK(di_v4_load(di_test_data(GDIR), NULL, &m, &err) == DEEPINFER_OK);
    di_score_req req = {.prompt = prompt, .n_prompt = np, .steps = no};
    di_score_result sr;
    CHECK(di_v4_score(m, &req, &sr, &err) == DEEPINFER_OK);
    int V = (int)di_v4_config(m)->vocab_size;
    for (int i = 0; i <= no; i++) {
        CHECK_EQ_INT(c->token_ids[i], sr.argmax[i]);
        const float *row = sr.logits + (size_t)i * V;
        double mx = row[0], s = 0;
        for (int v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < V; v++) s += exp((double)row[v] - mx);
        float lp = (float)((double)row[c->token_ids[i]] - (mx + log(s)));
        CHECK_MSG(lp == c->logprobs[i], "logprob %d: %.9g vs %.9g", i, lp, c->logprobs[i]);
    }
    fprintf(stderr, "    generate (greedy, chunk 64): %d tokens = score trajectory = reference\n", no + 1);
    di_score_result_free(&sr);
    di_v4_free(m);
    deepinfer_outputs_free(outs, 1);
    deepinfer_engine_close(e);
    free(prompt), free(want);
    di_json_free(man);
}

/* The other V4 test checkpoint (tiny-v4-b, another shape): greedy generate,
 * chunked and beside other requests, equals the score driver's trajectory. */
TEST(engine_greedy_generate_equals_score_on_tiny_v4_b) {
    di_v4_model *m = NULL;
    di_error err = {0};
    CHECK_MSG(di_v4_load(di_test_gen_data("tiny-v4-b"), NULL, &m, &err) == DEEPINFER_OK, "%s", err.msg);
    int V = (int)di_v4_config(m)->vocab_size;
    enum { NP = 3, STEPS = 20 };
    int lens[NP] = {5, 40, 97};
    int32_t ids[NP][128];
    for (int r = 0; r < NP; r++)
        for (int i = 0; i < lens[r]; i++) ids[r][i] = (int32_t)((i * 13 + r * 101 + 1) % V);
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_gen_data("tiny-v4-b");
    c.max_model_len = 512;
    c.chunk_size = 7;
    deepinfer_engine *e = NULL;
    char msg[512];
    CHECK_MSG(deepinfer_engine_open(&c, &e, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    deepinfer_prompt p[NP];
    for (int r = 0; r < NP; r++) p[r] = (deepinfer_prompt){.token_ids = ids[r], .n_token_ids = (size_t)lens[r]};
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.temperature = 0;
    sp.max_tokens = STEPS + 1;
    sp.ignore_eos = 1;
    deepinfer_request_output **outs = NULL;
    CHECK(deepinfer_generate(e, p, NP, &sp, 1, &outs) == DEEPINFER_OK);
    for (int r = 0; r < NP; r++) {
        di_score_req req = {.prompt = ids[r], .n_prompt = lens[r], .steps = STEPS};
        di_score_result sr;
        CHECK(di_v4_score(m, &req, &sr, &err) == DEEPINFER_OK);
        CHECK(outs[r]->status == DEEPINFER_OK && outs[r]->choices[0].n_tokens == STEPS + 1);
        for (int i = 0; i <= STEPS; i++)
            CHECK_MSG(outs[r]->choices[0].token_ids[i] == sr.argmax[i], "prompt %d token %d: %d vs score %d", r, i,
                      outs[r]->choices[0].token_ids[i], sr.argmax[i]);
        di_score_result_free(&sr);
    }
    deepinfer_outputs_free(outs, NP);
    deepinfer_engine_close(e);
    di_v4_free(m);
}
