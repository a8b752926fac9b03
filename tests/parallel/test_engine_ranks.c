/*
 * Parallel ranks through the engine (src/engine/ranks.h): deepinfer_generate
 * — the library path `deepinfer generate` takes — with --ep 2, --ep 4,
 * --dp 2 --ep 2 and EPLB with replicas on the CPU backend (ranks are threads
 * over the loopback communicator) gives every request the outputs of one
 * rank, bitwise (tokens, logprobs, top logprobs, finish reasons). 64 mixed
 * requests: prompt lengths 1..~85, greedy and seeded temperature 0.8 top-p
 * 0.95, some with two choices (forked states), prefill in chunks of 16 in
 * steps of at most 96 rows (so DP runs several passes per step). On the V4
 * and V4.1 golden checkpoints and the demo model; v4-tiny-a has 6 routed
 * experts, so its --ep 4 case is --ep 3. Plus the layout errors, named
 * before any weight is loaded.
 */
#include "engine/engine_internal.h"
#include "engine/engine_util.h"
#include "engine/ranks.h"

#define NREQ DI_TEST_SIZE(64, 24) /* 24 in the sanitizer build (test.h) */
#define LMAX 96
#define DEMO_MODEL "../../models/deepinfer-demo-v41"

typedef struct work {
    int32_t ids[NREQ * LMAX];
    deepinfer_prompt pr[NREQ];
    deepinfer_sampling_params sp[NREQ];
} work;

typedef struct model_case {
    const char *dir;
    char hash[1024]; /* V4.1 golden: its manifest's Engram constants */
} model_case;

static model_case golden_v4(void) {
    model_case m = {.dir = di_test_data("golden/v4-tiny-a")};
    return m;
}
static model_case golden_v41(void) {
    model_case m = {.dir = di_test_data("golden/v41-tiny-a")};
    snprintf(m.hash, sizeof m.hash, "%s/expected/manifest.json", m.dir);
    return m;
}
static model_case demo(void) {
    model_case m = {.dir = di_test_data(DEMO_MODEL)};
    return m;
}

static void make_work(work *w) {
    static const int lens[] = {1, 3, 9, 17, 30, 47, 64, 80};
    uint32_t x = 777;
    for (int i = 0; i < NREQ; i++) {
        int len = lens[(i * 5) % 8] + i % 5;
        int32_t *p = w->ids + (size_t)i * LMAX;
        for (int t = 0; t < len; t++) {
            x = x * 1664525u + 1013904223u;
            p[t] = 3 + (int32_t)((x >> 8) % 997u); /* below every model's image token */
        }
        w->pr[i] = (deepinfer_prompt){.token_ids = p, .n_token_ids = (size_t)len};
        deepinfer_sampling_params *s = &w->sp[i];
        deepinfer_sampling_params_init(s);
        s->max_tokens = 2 + i % 4;
        s->ignore_eos = 1;
        s->logprobs = i % 3 == 0 ? 2 : i % 3 == 1 ? 0 : -1;
        s->n = i % 16 == 5 ? 2 : 1;
        if (i % 2) {
            s->temperature = 0.8f, s->top_p = 0.95f;
            s->has_seed = 1, s->seed = 100 + (uint64_t)i;
        } else {
            s->temperature = 0;
        }
    }
}

typedef struct layout {
    int ep, dp, replicas, interval;
} layout;

typedef struct run_info {
    int64_t replica_entries;
    int rebalances;
    int dp_ranks_used; /* DP ranks that held a sequence at the end of some step (dp > 1) */
} run_info;

static void config_for(const model_case *m, const layout *l, deepinfer_engine_config *c) {
    deepinfer_engine_config_init(c);
    c->model = m->dir;
    c->engram_hash = m->hash[0] ? m->hash : NULL;
    c->accelerator = "cpu";
    c->max_model_len = 256;
    c->max_num_seqs = 16;
    c->chunk_size = 16;
    c->max_num_batched_tokens = 96;
    c->ep = l->ep, c->dp = l->dp, c->eplb_replicas = l->replicas, c->eplb_interval = l->interval;
}

/* Every request's output under layout l (NULL on failure, reported). */
static deepinfer_request_output **run(const model_case *m, const layout *l, work *w, run_info *info) {
    deepinfer_engine_config c;
    config_for(m, l, &c);
    deepinfer_engine *e = NULL;
    di_error err = {0};
    if (di_engine_open_opts(&c, NULL, &e, &err)) {
        di_test_fail(__FILE__, __LINE__, "%s --ep %d --dp %d: open: %s", m->dir, l->ep, l->dp, err.msg);
        return NULL;
    }
    if ((l->ep > 1 || l->dp > 1) != (e->ranks != NULL) || (e->ranks && !strstr(deepinfer_engine_plan_text(e), "parallel"))) {
        di_test_fail(__FILE__, __LINE__, "%s --ep %d --dp %d: the engine's ranks do not match", m->dir, l->ep, l->dp);
        deepinfer_engine_close(e);
        return NULL;
    }
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, w->pr, NREQ, w->sp, NREQ, &out)) {
        di_test_fail(__FILE__, __LINE__, "%s --ep %d --dp %d: %s", m->dir, l->ep, l->dp, deepinfer_engine_last_error(e));
        out = NULL;
    }
    memset(info, 0, sizeof *info);
    info->replica_entries = di_ranks_replica_entries(e->ranks);
    info->rebalances = di_ranks_rebalances(e->ranks);
    const int *own = di_ranks_owners(e->ranks);
    if (own) {
        unsigned used = 0;
        for (int s = 0; s < e->pool.n_slots; s++)
            if (own[s] >= 0) used |= 1u << own[s];
        for (; used; used >>= 1) info->dp_ranks_used += used & 1;
    }
    deepinfer_engine_close(e);
    return out;
}

/* Layouts against one rank, bitwise, on model m. */
static void check_layouts(const model_case *m, const layout *ls, int n) {
    work *w = calloc(1, sizeof *w);
    CHECK(w != NULL);
    if (!w) return;
    make_work(w);
    const layout one = {1, 1, 0, 0};
    run_info ri;
    deepinfer_request_output **ref = run(m, &one, w, &ri);
    CHECK_MSG(ref != NULL, "%s: the one-rank run", m->dir);
    for (int k = 0; ref && k < n; k++) {
        const layout *l = &ls[k];
        deepinfer_request_output **got = run(m, l, w, &ri);
        CHECK_MSG(got != NULL, "%s --ep %d --dp %d", m->dir, l->ep, l->dp);
        if (!got) continue;
        int same = 1;
        long tokens = 0;
        for (int i = 0; i < NREQ; i++) {
            same &= eng_same_output(ref[i], got[i], i);
            for (size_t j = 0; j < got[i]->n_choices; j++) tokens += (long)got[i]->choices[j].n_tokens;
        }
        CHECK_MSG(same, "%s --ep %d --dp %d%s: outputs differ from one rank's", m->dir, l->ep, l->dp,
                  l->replicas ? " with EPLB" : "");
        CHECK(tokens > NREQ);
        if (l->replicas) {
            CHECK_MSG(ri.rebalances > 0 && ri.replica_entries > 0, "%s EPLB: %d rebalances, %lld entries on replicas",
                      m->dir, ri.rebalances, (long long)ri.replica_entries);
        }
        if (l->dp > 1) CHECK_MSG(ri.dp_ranks_used == l->dp, "%s --dp %d: %d ranks held requests", m->dir, l->dp,
                                 ri.dp_ranks_used);
        deepinfer_outputs_free(got, NREQ);
    }
    if (ref) deepinfer_outputs_free(ref, NREQ);
    free(w);
}

TEST(engine_ep2_equals_one_rank) {
    const layout l[] = {{2, 1, 0, 0}};
    model_case a = golden_v4(), b = golden_v41(), c = demo();
    check_layouts(&a, l, 1);
    check_layouts(&b, l, 1);
    check_layouts(&c, l, 1);
}

TEST(engine_ep4_equals_one_rank) {
    const layout l4[] = {{4, 1, 0, 0}}, l3[] = {{3, 1, 0, 0}};
    model_case a = golden_v4(), b = golden_v41(), c = demo();
    check_layouts(&a, l3, 1); /* 6 experts */
    check_layouts(&b, l4, 1);
    check_layouts(&c, l4, 1);
}

TEST(engine_dp2_ep2_equals_one_rank) {
    const layout l[] = {{2, 2, 0, 0}};
    model_case a = golden_v4(), b = golden_v41(), c = demo();
    check_layouts(&a, l, 1);
    check_layouts(&b, l, 1);
    check_layouts(&c, l, 1);
}

TEST(engine_eplb_replicas_equal_one_rank) {
    const layout l[] = {{2, 1, 2, 1}}, ldp[] = {{2, 2, 1, 2}};
    model_case a = golden_v4(), b = golden_v41(), c = demo();
    check_layouts(&a, l, 1);
    check_layouts(&b, ldp, 1); /* EPLB under attention DP too */
    check_layouts(&c, l, 1);
}

/* Refused at open with a message naming the fix, before any weight is loaded. */
static void expect_open_error(const layout *l, const char *what, const char *want) {
    model_case m = golden_v4();
    deepinfer_engine_config c;
    config_for(&m, l, &c);
    if (!strcmp(what, "speculation")) c.nextn_decode = 1;
    if (!strcmp(what, "budget")) c.memory_budget = 1 << 20;
    deepinfer_engine *e = NULL;
    char msg[1024] = "";
    deepinfer_status st = deepinfer_engine_open(&c, &e, msg, sizeof msg);
    CHECK_MSG(st != DEEPINFER_OK && e == NULL, "%s: opened", what);
    CHECK_MSG(strstr(msg, want) != NULL, "%s: got \"%s\"", what, msg);
    deepinfer_engine_close(e);
}

TEST(engine_parallel_layout_errors_are_named) {
    expect_open_error(&(layout){4, 1, 0, 0}, "experts", "6 experts are not divisible by --ep 4");
    expect_open_error(&(layout){4, 2, 0, 0}, "dp", "--ep must equal --dp");
    expect_open_error(&(layout){1, 1, 2, 0}, "eplb", "it needs --ep 2 or more");
    expect_open_error(&(layout){2, 1, 0, 0}, "speculation", "speculative decoding runs on one rank");
    expect_open_error(&(layout){2, 1, 0, 0}, "budget", "rank 0 of --ep 2 --dp 1");
    /* the one-rank NCCL path (tests/ops/cuda/gtest_engine_nccl.c) is the CUDA backend's */
    {
        model_case m = golden_v4();
        deepinfer_engine_config c;
        config_for(&m, &(layout){1, 1, 0, 0}, &c);
        di_engine_options opt = {.nccl_one_rank = 1};
        deepinfer_engine *e = NULL;
        di_error oe = {0};
        CHECK(di_engine_open_opts(&c, &opt, &e, &oe) == DEEPINFER_ERR_UNSUPPORTED && !e);
        CHECK_MSG(strstr(oe.msg, "an NCCL communicator needs the CUDA backend"), "got: %s", oe.msg);
    }
    /* one GPU per rank: the rule the engine applies on CUDA before any upload */
    di_model_config cfg;
    di_error err = {0};
    CHECK(di_config_load(di_test_data("golden/v4-tiny-a"), &cfg, &err) == DEEPINFER_OK);
    int world = 0;
    CHECK(di_ranks_check(&cfg, 2, 1, 0, DI_BACKEND_CUDA, DI_RANKS_PER_DEVICE, &world, &err) ==
          DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "--ep 2 needs 2 GPUs (one per rank)"), "got: %s", err.msg);
    CHECK(di_ranks_check(&cfg, 2, 2, 0, DI_BACKEND_CPU, DI_RANKS_PER_DEVICE, &world, &err) == DEEPINFER_OK && world == 2);
    /* every rank on device 0 (the GPU tests' placement) needs no second GPU; a tool that keeps every
     * rank on its own thread's device runs one rank there */
    CHECK(di_ranks_check(&cfg, 2, 2, 0, DI_BACKEND_CUDA, DI_RANKS_ONE_DEVICE, &world, &err) == DEEPINFER_OK &&
          world == 2);
    CHECK(di_ranks_check(&cfg, 2, 1, 0, DI_BACKEND_CUDA, DI_RANKS_SHARED, &world, &err) != DEEPINFER_OK && world == 1);
}
