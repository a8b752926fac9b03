/*
 * Prompt logprobs (deepinfer_sampling_params.prompt_logprobs, vLLM's prompt_logprobs) through the
 * engine: each equals the float rounding of a double-precision log_softmax of the model's own logits
 * for that row (di_v41_forward on a fresh sequence, the whole prompt in one batch), bitwise; top-K
 * by logprob desc, id asc; bitwise the same alone or among 16 mixed requests, chunked at 13 or 512,
 * preempted and recomputed (shrunk pool), with speculation (nextn_decode 5) on or off; n > 1 shares
 * them; an engine with yoco_compact refuses them per request.
 */
#include <math.h>
#include <stdlib.h>

#include "engine/engine_util.h"
#include "model/dsv41.h"

#define DEMO "../../models/deepinfer-demo-v41"
#define NMIX 16
#define LEN 320

typedef struct plp_cfg {
    const char *model;
    int chunk, max_seqs, page_rows, nextn, compact;
    int64_t pages;
} plp_cfg;

static deepinfer_engine *plp_open(const plp_cfg *o) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data(o->model);
    c.accelerator = "cpu";
    c.max_model_len = 1024;
    c.chunk_size = o->chunk;
    c.max_num_seqs = o->max_seqs ? o->max_seqs : 16;
    c.page_rows = o->page_rows;
    c.num_pages = o->pages;
    c.nextn_decode = o->nextn;
    c.yoco_compact = o->compact;
    deepinfer_engine *e = NULL;
    char msg[1024];
    if (deepinfer_engine_open(&c, &e, msg, sizeof msg)) fprintf(stderr, "    open: %s\n", msg);
    return e;
}

/* NMIX requests: prompt lengths 1 .. 300, mixed sampling; every other one asks for prompt logprobs
 * (K = 0, 3 or 20), request 3 with n = 3. */
static void plp_workload(int32_t *ids, deepinfer_prompt *p, deepinfer_sampling_params *sp) {
    static const int lens[NMIX] = {200, 1, 2, 33, 64, 65, 129, 300, 17, 100, 250, 5, 140, 31, 80, 160};
    uint32_t x = 99;
    for (int i = 0; i < NMIX; i++) {
        int32_t *q = ids + (size_t)i * LEN;
        for (int t = 0; t < lens[i]; t++) x = x * 1664525u + 1013904223u, q[t] = 10 + (int32_t)((x >> 10) % 1000); /* within both models' vocabularies */
        p[i] = (deepinfer_prompt){.token_ids = q, .n_token_ids = (size_t)lens[i]};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].max_tokens = 6 + i % 9;
        sp[i].ignore_eos = 1;
        sp[i].has_seed = 1;
        sp[i].seed = 7 + (uint64_t)i;
        sp[i].temperature = i % 2 ? 0.8f : 0.0f;
        sp[i].logprobs = i % 3 == 0 ? 2 : -1;
        sp[i].prompt_logprobs = i % 2 ? -1 : (i % 6 == 0 ? 3 : (i % 6 == 2 ? 0 : 20));
        if (i == 3) sp[i].n = 3, sp[i].prompt_logprobs = 5;
    }
}

static int same_f32(float a, float b) { return !memcmp(&a, &b, sizeof a); }

/* Bitwise equal prompt logprobs (and top lists) of two outputs of the same request. */
static int same_plp(const deepinfer_request_output *a, const deepinfer_request_output *b) {
    if (a->status || b->status || a->n_prompt != b->n_prompt || a->n_prompt_top != b->n_prompt_top) return 0;
    if (!a->prompt_logprobs != !b->prompt_logprobs) return 0;
    if (!a->prompt_logprobs) return 1;
    size_t K = (size_t)a->n_prompt_top;
    for (size_t i = 0; i < a->n_prompt; i++) {
        if (!same_f32(a->prompt_logprobs[i], b->prompt_logprobs[i])) return 0;
        for (size_t j = 0; j < K; j++)
            if (a->prompt_top_ids[i * K + j] != b->prompt_top_ids[i * K + j] ||
                !same_f32(a->prompt_top_logprobs[i * K + j], b->prompt_top_logprobs[i * K + j]))
                return 0;
    }
    return 1;
}

static deepinfer_request_output **plp_run(const plp_cfg *o, const deepinfer_prompt *p,
                                          const deepinfer_sampling_params *sp, int n, deepinfer_engine_stats *st) {
    deepinfer_engine *e = plp_open(o);
    if (!e) return NULL;
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, p, (size_t)n, sp, (size_t)n, &out)) {
        fprintf(stderr, "    generate: %s\n", deepinfer_engine_last_error(e));
        out = NULL;
    }
    if (st) deepinfer_engine_get_stats(e, st);
    deepinfer_engine_close(e);
    return out;
}

/* Every request of `got` has the prompt logprobs (and outputs) of its run alone in `ref`. */
static int all_same(deepinfer_request_output **ref, deepinfer_request_output **got, const char *what) {
    int ok = 1;
    for (int i = 0; i < NMIX; i++)
        if (!same_plp(ref[i], got[i]) || !eng_same_output(ref[i], got[i], 0)) {
            fprintf(stderr, "    %s: request %d differs\n", what, i);
            ok = 0;
        }
    return ok;
}

TEST(prompt_logprobs_equal_model_forward) {
    enum { N = 150, K = 4 };
    int32_t ids[N];
    uint32_t x = 3;
    for (int t = 0; t < N; t++) x = x * 1664525u + 1013904223u, ids[t] = 10 + (int32_t)((x >> 10) % 3000);
    deepinfer_prompt p = {.token_ids = ids, .n_token_ids = N};
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.max_tokens = 1;
    sp.prompt_logprobs = K;
    plp_cfg c = {.model = DEMO, .chunk = 13};
    deepinfer_request_output **out = plp_run(&c, &p, &sp, 1, NULL);
    CHECK(out && out[0]->status == DEEPINFER_OK);
    const deepinfer_request_output *o = out[0];
    CHECK(o->prompt_logprobs && o->n_prompt == N && o->n_prompt_top == K);
    CHECK(isnan(o->prompt_logprobs[0]) && o->prompt_top_ids[0] == -1);
    /* the model's own logits for rows 0 .. N-2, the whole prompt in one forward */
    di_error err = {0};
    di_v41_model *m = NULL;
    CHECK_MSG(di_v41_load(di_test_data(DEMO), NULL, &m, &err) == DEEPINFER_OK, "%s", err.msg);
    int V = (int)di_v41_config(m)->vocab_size;
    di_seq_state *s = NULL;
    CHECK(di_v41_seq_new(m, &s, &err) == DEEPINFER_OK);
    int64_t pos[N];
    di_seq_state *seq[N];
    int rows[N - 1];
    for (int t = 0; t < N; t++) pos[t] = t, seq[t] = s;
    for (int t = 0; t < N - 1; t++) rows[t] = t;
    float *lg = malloc(sizeof(float) * (size_t)(N - 1) * (size_t)V);
    CHECK(lg);
    di_v4_batch b = {.n = N, .tokens = ids, .pos = pos, .seq = seq, .n_logits = N - 1, .logit_rows = rows, .logits = lg};
    CHECK_MSG(di_v41_forward(m, &b, &err) == DEEPINFER_OK, "%s", err.msg);
    int bad = 0, bad_top = 0;
    for (int t = 0; t < N - 1; t++) {
        const float *r = lg + (size_t)t * V;
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) mx = r[v] > mx ? r[v] : mx;
        for (int v = 0; v < V; v++) sum += exp((double)r[v] - mx);
        double lse = mx + log(sum);
        if (!same_f32(o->prompt_logprobs[t + 1], (float)((double)r[ids[t + 1]] - lse))) bad++;
        const int32_t *top = o->prompt_top_ids + (size_t)(t + 1) * K;
        const float *tlp = o->prompt_top_logprobs + (size_t)(t + 1) * K;
        for (int j = 0; j < K; j++) { /* ordered, the values of those ids, and nothing better left out */
            if (!same_f32(tlp[j], (float)((double)r[top[j]] - lse))) bad_top++;
            if (j && !(r[top[j - 1]] > r[top[j]] || (r[top[j - 1]] == r[top[j]] && top[j - 1] < top[j]))) bad_top++;
        }
        for (int v = 0; v < V; v++) {
            int in = 0;
            for (int j = 0; j < K; j++) in |= top[j] == v;
            if (!in && (r[v] > r[top[K - 1]] || (r[v] == r[top[K - 1]] && v < top[K - 1]))) bad_top++;
        }
    }
    CHECK_MSG(bad == 0, "%d of %d prompt logprobs differ from the model's rows", bad, N - 1);
    CHECK_MSG(bad_top == 0, "%d top-K entries wrong", bad_top);
    free(lg);
    di_seq_destroy(s);
    di_v41_free(m);
    deepinfer_outputs_free(out, 1);
}

TEST(prompt_logprobs_batch_chunk_preemption_invariant) {
    static int32_t ids[NMIX * LEN];
    deepinfer_prompt p[NMIX];
    deepinfer_sampling_params sp[NMIX];
    plp_workload(ids, p, sp);
    deepinfer_request_output *ref[NMIX];
    plp_cfg alone = {.model = ENGINE_GOLDEN, .chunk = 512};
    for (int i = 0; i < NMIX; i++) {
        deepinfer_request_output **o = plp_run(&alone, &p[i], &sp[i], 1, NULL);
        CHECK(o && o[0]->status == DEEPINFER_OK);
        ref[i] = o[0];
        free(o);
        CHECK((sp[i].prompt_logprobs >= 0) == (ref[i]->prompt_logprobs != NULL));
    }
    /* n > 1: one set for the request, whatever the choices did */
    CHECK(ref[3]->n_choices == 3 && ref[3]->n_prompt_top == 5);
    deepinfer_engine_stats st;
    plp_cfg c13 = {.model = ENGINE_GOLDEN, .chunk = 13, .max_seqs = 16};
    deepinfer_request_output **mix = plp_run(&c13, p, sp, NMIX, &st);
    CHECK(mix && all_same(ref, mix, "16 together, chunk 13"));
    deepinfer_outputs_free(mix, NMIX);
    plp_cfg tight = {.model = ENGINE_GOLDEN, .chunk = 64, .max_seqs = 16, .page_rows = 16, .pages = 30};
    mix = plp_run(&tight, p, sp, NMIX, &st);
    CHECK(mix && all_same(ref, mix, "shrunk pool"));
    CHECK_MSG(st.preemptions > 0, "the shrunk pool caused no preemption");
    fprintf(stderr, "    shrunk pool: %lld preemptions\n", (long long)st.preemptions);
    deepinfer_outputs_free(mix, NMIX);
    for (int i = 0; i < NMIX; i++) deepinfer_output_free(ref[i]);
}

TEST(prompt_logprobs_speculation_invariant) {
    static int32_t ids[NMIX * LEN];
    deepinfer_prompt p[NMIX];
    deepinfer_sampling_params sp[NMIX];
    plp_workload(ids, p, sp);
    enum { M = 6 }; /* a few of them keep the demo model's runs short */
    plp_cfg off = {.model = DEMO, .chunk = 64, .max_seqs = 8}, on = off;
    on.nextn = 5;
    deepinfer_engine_stats st;
    deepinfer_request_output **a = plp_run(&off, p, sp, M, NULL), **b = plp_run(&on, p, sp, M, &st);
    CHECK(a && b);
    CHECK_MSG(st.spec_steps > 0, "speculation did not run");
    for (int i = 0; i < M; i++) {
        CHECK_MSG(same_plp(a[i], b[i]), "request %d: prompt logprobs differ with speculation", i);
        CHECK(eng_same_output(a[i], b[i], 0));
    }
    deepinfer_outputs_free(a, M);
    deepinfer_outputs_free(b, M);
}

TEST(prompt_logprobs_refused_in_compact_mode) {
    int32_t ids[200];
    for (int t = 0; t < 200; t++) ids[t] = 10 + t;
    deepinfer_prompt p[2] = {{.token_ids = ids, .n_token_ids = 200}, {.token_ids = ids, .n_token_ids = 180}};
    deepinfer_sampling_params sp[2];
    deepinfer_sampling_params_init(&sp[0]);
    deepinfer_sampling_params_init(&sp[1]);
    sp[0].prompt_logprobs = 0;
    sp[0].max_tokens = sp[1].max_tokens = 2;
    plp_cfg c = {.model = DEMO, .chunk = 512, .max_seqs = 4, .compact = 1};
    deepinfer_request_output **o = plp_run(&c, p, sp, 2, NULL);
    CHECK(o);
    CHECK(o[0]->status == DEEPINFER_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(o[0]->error, "yoco_compact") && strstr(o[0]->error, "prompt_logprobs"), "%s", o[0]->error);
    CHECK(o[1]->status == DEEPINFER_OK && o[1]->choices[0].n_tokens == 2 && !o[1]->prompt_logprobs);
    deepinfer_outputs_free(o, 2);
}

TEST(prompt_logprobs_bad_value) {
    plp_cfg c = {.model = ENGINE_GOLDEN, .chunk = 512};
    deepinfer_engine *e = plp_open(&c);
    CHECK(e);
    int32_t ids[3] = {1, 2, 3};
    deepinfer_prompt p = {.token_ids = ids, .n_token_ids = 3};
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    CHECK(sp.prompt_logprobs == -1);
    uint64_t id;
    sp.prompt_logprobs = DEEPINFER_MAX_LOGPROBS + 1;
    CHECK(deepinfer_add_request(e, &p, &sp, &id) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(deepinfer_engine_last_error(e), "prompt_logprobs"));
    sp.prompt_logprobs = -2;
    CHECK(deepinfer_add_request(e, &p, &sp, &id) == DEEPINFER_ERR_INVALID_ARGUMENT);
    deepinfer_engine_close(e);
}
