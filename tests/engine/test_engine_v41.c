/*
 * The engine on DeepSeek-V4.1 (golden v41-tiny-a: CSA2 layer roles, Engram,
 * DSpark stages in the state): greedy generate equals the score driver's
 * trajectory, and mixed requests together equal each alone — also with
 * chunk 16 and with the pool shrunk until preemption happens (Engram history
 * and compressed rows recomputed).
 */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "golden/golden_util.h"
#include "engine/engine_util.h"
#include "score/score.h"

#define V41 "golden/v41-tiny-a"

static deepinfer_engine *open_v41(const char *dir, int chunk, int page_rows, int64_t pages, int max_seqs) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = dir;
    c.max_model_len = 1024;
    c.chunk_size = chunk;
    c.page_rows = page_rows;
    c.num_pages = pages;
    c.max_num_seqs = max_seqs;
    deepinfer_engine *e = NULL;
    char msg[1024];
    if (deepinfer_engine_open(&c, &e, msg, sizeof msg)) fprintf(stderr, "    open: %s\n", msg);
    return e;
}

TEST(engine_v41_greedy_generate_equals_score) {
    char dir[64];
    CHECK(eng_golden_v41_dir(dir, sizeof dir));
    di_json_doc *man = golden_manifest(di_test_data(V41));
    int np = 0;
    int32_t *prompt = golden_ints(man->root, "prompt_token_ids", NULL, &np);
    CHECK(prompt);
    enum { STEPS = 24 };
    deepinfer_engine *e = open_v41(dir, 48, 0, 0, 8);
    CHECK(e);
    deepinfer_memory_plan plan;
    deepinfer_engine_plan(e, &plan);
    CHECK(!strcmp(plan.arch, "deepseek_v41"));
    deepinfer_prompt p = {.token_ids = prompt, .n_token_ids = (size_t)np};
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.temperature = 0;
    sp.max_tokens = STEPS + 1;
    sp.ignore_eos = 1;
    deepinfer_request_output **outs = NULL;
    CHECK(deepinfer_generate(e, &p, 1, &sp, 1, &outs) == DEEPINFER_OK);
    CHECK_MSG(outs[0]->status == DEEPINFER_OK, "%s", outs[0]->error);
    char hash[PATH_MAX];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(V41));
    di_v4_options opt = {.engram_hash = hash};
    di_v41_model *m = NULL;
    di_error err = {0};
    CHECK(di_v41_load(di_test_data(V41), &opt, &m, &err) == DEEPINFER_OK);
    di_score_req req = {.prompt = prompt, .n_prompt = np, .steps = STEPS};
    di_score_result sr;
    CHECK(di_v41_score(m, &req, &sr, &err) == DEEPINFER_OK);
    for (int i = 0; i <= STEPS; i++)
        CHECK_MSG(outs[0]->choices[0].token_ids[i] == sr.argmax[i], "token %d: %d vs score %d", i,
                  outs[0]->choices[0].token_ids[i], sr.argmax[i]);
    /* the reference's own greedy run starts the same way (first token from the prefill) */
    CHECK_EQ_INT(outs[0]->choices[0].token_ids[0], (int)golden_num(man->root, "decode_fixed", "first_token_from_prefill", NULL));
    fprintf(stderr, "    V4.1 greedy generate (chunk 48): %d tokens = score trajectory\n", STEPS + 1);
    di_score_result_free(&sr);
    di_v41_free(m);
    deepinfer_outputs_free(outs, 1);
    deepinfer_engine_close(e);
    free(prompt);
    di_json_free(man);
    eng_rm_dir(dir);
}

TEST(engine_v41_requests_together_equal_alone_with_preemption) {
    enum { N = 24 };
    char dir[64];
    CHECK(eng_golden_v41_dir(dir, sizeof dir));
    static int32_t ids[N * 320];
    deepinfer_prompt pr[N];
    deepinfer_sampling_params sp[N];
    eng_workload_avoid(N, 1024, 1008, ids, pr, sp); /* 1008: the image token */
    deepinfer_engine *e = open_v41(dir, 64, 0, 0, 8);
    CHECK(e);
    deepinfer_request_output *alone[N];
    for (int i = 0; i < N; i++) {
        deepinfer_request_output **o = NULL;
        CHECK(deepinfer_generate(e, &pr[i], 1, &sp[i], 1, &o) == DEEPINFER_OK);
        CHECK_MSG(o[0]->status == DEEPINFER_OK, "%d: %s", i, o[0]->error);
        alone[i] = o[0];
        free(o);
    }
    deepinfer_engine_close(e);
    struct {
        const char *what;
        int chunk, page_rows, max_seqs;
        int64_t pages;
    } runs[] = {{"together, chunk 16", 16, 0, 24, 0}, {"together, pool shrunk to 80 pages", 64, 16, 16, 80}};
    for (int r = 0; r < 2; r++) {
        e = open_v41(dir, runs[r].chunk, runs[r].page_rows, runs[r].pages, runs[r].max_seqs);
        CHECK(e);
        deepinfer_request_output **out = NULL;
        CHECK(deepinfer_generate(e, pr, N, sp, N, &out) == DEEPINFER_OK);
        int same = 1;
        for (int i = 0; i < N; i++) same &= eng_same_output(alone[i], out[i], i);
        deepinfer_engine_stats st;
        deepinfer_engine_get_stats(e, &st);
        fprintf(stderr, "    V4.1 %-34s %s: %lld steps, %lld preemptions, peak %lld/%lld pages\n", runs[r].what,
                same ? "identical" : "DIFFERENT", (long long)st.steps, (long long)st.preemptions,
                (long long)st.pages_peak, (long long)st.num_pages);
        CHECK(same);
        if (runs[r].pages) CHECK_MSG(st.preemptions > 0, "the shrunk pool caused no preemption");
        deepinfer_outputs_free(out, N);
        deepinfer_engine_close(e);
    }
    /* the image token in a prompt fails that request alone (the forward would refuse the whole step) */
    e = open_v41(dir, 64, 0, 0, 8);
    CHECK(e);
    int32_t img[3] = {5, 1008, 7};
    deepinfer_prompt two[2] = {{.token_ids = img, .n_token_ids = 3}, pr[1]};
    deepinfer_sampling_params both[2] = {sp[1], sp[1]};
    deepinfer_request_output **out = NULL;
    CHECK(deepinfer_generate(e, two, 2, both, 2, &out) == DEEPINFER_OK);
    CHECK(out[0]->status != DEEPINFER_OK && strstr(out[0]->error, "image token"));
    CHECK(eng_same_output(alone[1], out[1], 1));
    deepinfer_outputs_free(out, 2);
    deepinfer_engine_close(e);
    for (int i = 0; i < N; i++) deepinfer_output_free(alone[i]);
    eng_rm_dir(dir);
}
