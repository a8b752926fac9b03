/*
 * Context-parallel prefill through the engine (ranks.h di_ranks_set_cp, the
 * config's cp_min_tokens): --dp 2 --ep 2 and --dp 4 --ep 4 with
 * cp_min_tokens 64 on the CPU backend give every request the outputs of one
 * rank, bitwise (tokens, logprobs, top logprobs), through deepinfer_generate:
 * long prompts (200-500 tokens, prefilled in chunks of 128 that run over
 * every rank) beside short ones (DP rows in the same steps), greedy and
 * seeded sampling. On the V4 and V4.1 golden checkpoints and the demo
 * model. Plus the refusal of cp_min_tokens without dp > 1.
 */
#include "engine/engine_internal.h"
#include "engine/engine_util.h"
#include "engine/ranks.h"

#define NREQ 8
#define LMAX 512
#define DEMO_MODEL "../../models/deepinfer-demo-v41"

typedef struct work {
    int32_t ids[NREQ * LMAX];
    deepinfer_prompt pr[NREQ];
    deepinfer_sampling_params sp[NREQ];
} work;

static void make_work(work *w) {
    static const int lens[NREQ] = {480, 5, 200, 17, 333, 9, 260, 40};
    uint32_t x = 4242;
    for (int i = 0; i < NREQ; i++) {
        int32_t *p = w->ids + (size_t)i * LMAX;
        for (int t = 0; t < lens[i]; t++) {
            x = x * 1664525u + 1013904223u;
            p[t] = 3 + (int32_t)((x >> 8) % 997u); /* below every model's image token */
        }
        w->pr[i] = (deepinfer_prompt){.token_ids = p, .n_token_ids = (size_t)lens[i]};
        deepinfer_sampling_params *s = &w->sp[i];
        deepinfer_sampling_params_init(s);
        s->max_tokens = 3;
        s->ignore_eos = 1;
        s->logprobs = i % 2 ? 2 : 0;
        if (i % 2) {
            s->temperature = 0.8f, s->top_p = 0.95f;
            s->has_seed = 1, s->seed = 7 + (uint64_t)i;
        }
    }
}

static void config_for(const char *dir, const char *hash, int dp, int cp, deepinfer_engine_config *c) {
    deepinfer_engine_config_init(c);
    c->model = dir;
    c->engram_hash = hash;
    c->accelerator = "cpu";
    c->max_model_len = 1024;
    c->max_num_seqs = 8;
    c->chunk_size = 128;
    c->max_num_batched_tokens = 192;
    c->ep = dp, c->dp = dp, c->cp_min_tokens = cp;
}

/* Every request's output (NULL on failure, reported); *cp_runs: segments run context-parallel. */
static deepinfer_request_output **run(const char *dir, const char *hash, int dp, int cp, work *w, int *cp_runs) {
    deepinfer_engine_config c;
    config_for(dir, hash, dp, cp, &c);
    deepinfer_engine *e = NULL;
    di_error err = {0};
    if (di_engine_open_opts(&c, NULL, &e, &err)) {
        di_test_fail(__FILE__, __LINE__, "%s --dp %d --cp-min-tokens %d: open: %s", dir, dp, cp, err.msg);
        return NULL;
    }
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, w->pr, NREQ, w->sp, NREQ, &out)) {
        di_test_fail(__FILE__, __LINE__, "%s --dp %d: %s", dir, dp, deepinfer_engine_last_error(e));
        out = NULL;
    }
    *cp_runs = di_ranks_cp_prefills(e->ranks);
    deepinfer_engine_close(e);
    return out;
}

static void check_model(const char *dir, const char *hash, const int *dps, int n) {
    work *w = calloc(1, sizeof *w);
    CHECK(w != NULL);
    make_work(w);
    int cps = 0;
    deepinfer_request_output **ref = run(dir, hash, 1, 0, w, &cps);
    CHECK_MSG(ref != NULL, "%s: the one-rank run", dir);
    for (int k = 0; ref && k < n; k++) {
        deepinfer_request_output **got = run(dir, hash, dps[k], 64, w, &cps);
        CHECK_MSG(got != NULL, "%s --dp %d --cp-min-tokens 64", dir, dps[k]);
        if (!got) continue;
        int same = 1;
        for (int i = 0; i < NREQ; i++) same &= eng_same_output(ref[i], got[i], i);
        CHECK_MSG(same, "%s --dp %d --ep %d --cp-min-tokens 64: outputs differ from one rank's", dir, dps[k], dps[k]);
        /* 480 + 200 + 333 + 260 tokens in chunks of 128: every full chunk of at least 64 rows */
        CHECK_MSG(cps >= 8, "%s --dp %d: only %d prefill chunks ran context-parallel", dir, dps[k], cps);
        deepinfer_outputs_free(got, NREQ);
    }
    if (ref) deepinfer_outputs_free(ref, NREQ);
    free(w);
}

TEST(engine_cp_v4_bitwise_equal_one_rank) {
    static const int dps[] = {2};
    check_model(di_test_data("golden/v4-tiny-a"), NULL, dps, 1); /* 6 experts: --ep 2 */
}

TEST(engine_cp_v41_bitwise_equal_one_rank) {
    static const int dps[] = {2, 4};
    char hash[1024];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data("golden/v41-tiny-a"));
    check_model(di_test_data("golden/v41-tiny-a"), hash, dps, 2);
}

TEST(engine_cp_demo_bitwise_equal_one_rank) {
    static const int dps[] = {2};
    check_model(di_test_data(DEMO_MODEL), NULL, dps, 1);
}

TEST(engine_cp_needs_dp) {
    deepinfer_engine_config c;
    config_for(di_test_data("golden/v4-tiny-a"), NULL, 1, 64, &c);
    deepinfer_engine *e = NULL;
    di_error err = {0};
    CHECK_EQ_INT(di_engine_open_opts(&c, NULL, &e, &err), DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(e == NULL);
    CHECK_MSG(strstr(err.msg, "cp_min_tokens needs --dp 2") != NULL, "message: %s", err.msg);
    c.dp = c.ep = 2;
    c.cp_min_tokens = -1;
    CHECK_EQ_INT(di_engine_open_opts(&c, NULL, &e, &err), DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.msg, "cp_min_tokens must be >= 0") != NULL);
}
