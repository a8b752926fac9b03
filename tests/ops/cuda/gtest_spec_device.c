/* gtest_spec_device.c — speculative decoding on the device path
 * (docs/speculative.md, docs/cuda-backend.md §8): requests without logprobs
 * or structured outputs, so verify steps are sampled on the device (only the
 * ids come back), run as recorded steps (CUDA graphs keyed by rows and rows
 * per sequence, src/engine/devq_graph.c) and draft with device picks where
 * the pick is greedy. On the demo model (DSpark, text prompts) and the golden
 * v41-tiny-a, 1 and 8 requests, greedy and seeded temperature 0.8 / top-p
 * 0.95: outputs with speculation on (fixed drafts of 5, confidence-scheduled)
 * are bitwise equal to speculation off; fixed drafts with graphs on equal
 * graphs off (recorded verify and drafter steps = eager ones: the same
 * outputs, the same drafts accepted at every position); and the counters
 * show verify steps that ran recorded and were sampled on the device.
 *
 * The pipelined order (docs/speculative.md "One step"): greedy requests with
 * fixed drafts of 5 hold their drafts in the queue, the drafter is not
 * waited for and the next verify step reads its draft rows on the device;
 * outputs equal the synchronous order's (di_engine_options spec_sync) and
 * speculation off bitwise, the same drafts are verified and accepted at
 * every position, with graphs and eager, at batch 1 and 8; and a request
 * with logprobs beside a greedy one makes the steps it samples in take the
 * held drafts to the host first (the fallback), with the same outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/engine_util.h"
#include "engine_gpu_util.h"

typedef struct dev_case {
    const char *name, *dir;
    int v41_hash;         /* the golden checkpoint's Engram manifest (the demo carries its own) */
    int text;             /* text prompts (the demo's tokenizer), else token ids */
} dev_case;

static const dev_case DEMO = {"demo", "../../models/deepinfer-demo-v41", 0, 1};
static const dev_case V41 = {"V4.1", "golden/v41-tiny-a", 1, 0};

enum { NMAX = 8, MAXT = 48 };

static const char *TEXTS[NMAX] = {"In the beginning God created", "And Jesus said unto them,", "The LORD is my shepherd;",
                                  "And it came to pass", "Blessed are the meek:", "For God so loved the world,",
                                  "Then the king answered and said", "Now the serpent was more subtle"};

static deepinfer_engine *open_dev(const dev_case *dc, int varlen, int nextn, int graphs) {
    eng_gpu_config g;
    eng_gpu_config_init(&g, dc->dir, dc->v41_hash, "cuda");
    g.c.max_num_seqs = NMAX;
    g.c.cuda_graphs = graphs;
    g.c.mtp_varlen = varlen;
    g.c.nextn_decode = nextn;
    return eng_gpu_open(&g, dc->name);
}

static deepinfer_request_output **run(const dev_case *dc, int varlen, int nextn, int graphs, int n,
                                      const deepinfer_prompt *pr, const deepinfer_sampling_params *sp,
                                      deepinfer_engine_stats *st) {
    deepinfer_engine *e = open_dev(dc, varlen, nextn, graphs);
    if (!e) return NULL;
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, pr, (size_t)n, sp, (size_t)n, &out)) {
        di_test_fail(__FILE__, __LINE__, "%s: %s", dc->name, deepinfer_engine_last_error(e));
        out = NULL;
    }
    deepinfer_engine_get_stats(e, st);
    deepinfer_engine_close(e);
    return out;
}

/* n requests, greedy (sampled = 0) or seeded temperature 0.8 / top-p 0.95. */
static void workload(const dev_case *dc, int n, int sampled, int32_t *ids, deepinfer_prompt *pr,
                     deepinfer_sampling_params *sp) {
    uint32_t x = 777;
    for (int i = 0; i < n; i++) {
        if (dc->text) {
            pr[i] = (deepinfer_prompt){.text = TEXTS[i]};
        } else {
            int len = 20 + 9 * i;
            int32_t *p = ids + (size_t)i * 128;
            for (int t = 0; t < len; t++) {
                x = x * 1664525u + 1013904223u;
                p[t] = (int32_t)((x >> 10) % 1000u); /* below the golden V4.1's image token (1008) */
            }
            pr[i] = (deepinfer_prompt){.token_ids = p, .n_token_ids = (size_t)len};
        }
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].max_tokens = MAXT;
        sp[i].ignore_eos = 1;
        sp[i].temperature = sampled ? 0.8f : 0.0f;
        if (sampled) sp[i].top_p = 0.95f, sp[i].has_seed = 1, sp[i].seed = 4242 + (uint64_t)i;
    }
}

static void dev_case_run(const dev_case *dc, int n, int sampled) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
    static int32_t ids[NMAX * 128];
    deepinfer_prompt pr[NMAX];
    deepinfer_sampling_params sp[NMAX];
    workload(dc, n, sampled, ids, pr, sp);
    deepinfer_engine_stats st, first;
    memset(&first, 0, sizeof first);
    deepinfer_request_output **ref = run(dc, 0, 0, 1, n, pr, sp, &st);
    if (!ref) return;
    struct {
        const char *what;
        int varlen, nextn, graphs;
    } cfg[] = {{"fixed 5, graphs", 0, 5, 1}, {"fixed 5, eager", 0, 5, 0}, {"confidence-scheduled", 1, -1, 1}};
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        deepinfer_request_output **out = run(dc, cfg[k].varlen, cfg[k].nextn, cfg[k].graphs, n, pr, sp, &st);
        if (!out) break;
        int same = 1;
        for (int i = 0; i < n; i++) same &= eng_same_output(ref[i], out[i], i);
        /* a step with a verify group has at most n of them: at least ceil(spec_steps / n) verify steps,
         * so more recorded (device-sampled) steps than the other steps prove verify steps among them */
        int64_t verify_min = (st.spec_steps + n - 1) / n, others = st.steps - verify_min;
        fprintf(stderr,
                "    %s n=%d %s %-22s %s: %lld steps, %lld recorded, %lld device-sampled, %lld verify groups, tau %.2f\n",
                dc->name, n, sampled ? "T0.8" : "greedy", cfg[k].what, same ? "identical" : "DIFFERENT",
                (long long)st.steps, (long long)st.graph_steps, (long long)st.device_sampled_steps,
                (long long)st.spec_steps, st.spec_steps ? (double)(st.spec_steps + st.spec_accepted) / st.spec_steps : 0);
        CHECK_MSG(same, "%s: speculation (%s) changed outputs", dc->name, cfg[k].what);
        /* fixed drafts always verify; confidence scheduling may find drafting does not pay */
        if (!cfg[k].varlen) CHECK_MSG(st.spec_steps > 0, "%s: no draft was verified (%s)", dc->name, cfg[k].what);
        if (st.spec_steps)
            CHECK_MSG(st.device_sampled_steps > others, "%s (%s): no verify step was sampled on the device", dc->name,
                      cfg[k].what);
        if (cfg[k].graphs && !cfg[k].varlen)
            CHECK_MSG(st.graph_steps > others, "%s (%s): no verify step ran recorded", dc->name, cfg[k].what);
        if (!cfg[k].graphs) CHECK(st.graph_steps == 0);
        /* the drafts themselves: recorded drafter steps (greedy) draft what eager ones do, so the same
         * drafts are verified and accepted at every position */
        if (k == 0) first = st;
        if (k == 1)
            CHECK_MSG(!memcmp(first.spec_drafted_at, st.spec_drafted_at, sizeof st.spec_drafted_at) &&
                          !memcmp(first.spec_accepted_at, st.spec_accepted_at, sizeof st.spec_accepted_at),
                      "%s: the drafts with graphs on differ from graphs off (%lld vs %lld accepted)", dc->name,
                      (long long)first.spec_accepted, (long long)st.spec_accepted);
        deepinfer_outputs_free(out, (size_t)n);
    }
    deepinfer_outputs_free(ref, (size_t)n);
}

TEST(gpu_spec_device_demo_greedy_b1) { dev_case_run(&DEMO, 1, 0); }
TEST(gpu_spec_device_demo_greedy_b8) { dev_case_run(&DEMO, 8, 0); }
TEST(gpu_spec_device_demo_sampled_b1) { dev_case_run(&DEMO, 1, 1); }
TEST(gpu_spec_device_demo_sampled_b8) { dev_case_run(&DEMO, 8, 1); }
TEST(gpu_spec_device_v41_greedy_b1) { dev_case_run(&V41, 1, 0); }
TEST(gpu_spec_device_v41_greedy_b8) { dev_case_run(&V41, 8, 0); }
TEST(gpu_spec_device_v41_sampled_b1) { dev_case_run(&V41, 1, 1); }
TEST(gpu_spec_device_v41_sampled_b8) { dev_case_run(&V41, 8, 1); }

/* ---- the pipelined order ------------------------------------------------------------------------ */

typedef struct pipe_out {
    deepinfer_request_output **out;
    deepinfer_engine_stats st;
    int64_t held, fed;          /* the queue's counters (devq.h spec_held, spec_fed) */
} pipe_out;

static int run_pipe(const dev_case *dc, int nextn, int graphs, int sync, int n, const deepinfer_prompt *pr,
                    const deepinfer_sampling_params *sp, int chunk, pipe_out *r) {
    eng_gpu_config g;
    eng_gpu_config_init(&g, dc->dir, dc->v41_hash, "cuda");
    g.c.max_num_seqs = NMAX;
    g.c.cuda_graphs = graphs;
    g.c.mtp_varlen = 0;
    g.c.nextn_decode = nextn;
    if (chunk) g.c.chunk_size = chunk;
    const di_engine_options opt = {.spec_sync = sync};
    deepinfer_engine *e = NULL;
    di_error err = {0};
    memset(r, 0, sizeof *r);
    if (di_engine_open_opts(&g.c, &opt, &e, &err)) {
        di_test_fail(__FILE__, __LINE__, "%s: open: %s", dc->name, err.msg);
        return 0;
    }
    int ok = deepinfer_generate(e, pr, (size_t)n, sp, (size_t)n, &r->out) == DEEPINFER_OK;
    if (!ok) di_test_fail(__FILE__, __LINE__, "%s: %s", dc->name, deepinfer_engine_last_error(e));
    deepinfer_engine_get_stats(e, &r->st);
    r->held = e->dq->spec_held;
    r->fed = e->dq->spec_fed;
    deepinfer_engine_close(e);
    return ok;
}

/* Speculation off, then fixed 5 synchronous and pipelined with graphs on and off: every output the
 * same; the pipelined runs held drafts and fed them on the device (want_fed) or took some to the
 * host (fallback: held > fed), the synchronous ones neither; the same drafts verified per position. */
static void pipe_case(const dev_case *dc, int n, const deepinfer_prompt *pr, const deepinfer_sampling_params *sp,
                      int chunk, int fallback) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
    pipe_out ref;
    if (!run_pipe(dc, 0, 1, 0, n, pr, sp, chunk, &ref)) return;
    struct {
        const char *what;
        int graphs, sync;
    } cfg[] = {{"sync, graphs", 1, 1}, {"pipelined, graphs", 1, 0}, {"sync, eager", 0, 1}, {"pipelined, eager", 0, 0}};
    pipe_out prev = {0};
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        pipe_out r;
        if (!run_pipe(dc, 5, cfg[k].graphs, cfg[k].sync, n, pr, sp, chunk, &r)) break;
        int same = 1;
        for (int i = 0; i < n; i++) same &= eng_same_output(ref.out[i], r.out[i], i);
        fprintf(stderr, "    %s n=%d %-18s %s: %lld steps, %lld recorded, %lld verify groups, tau %.2f, %lld held, %lld fed\n",
                dc->name, n, cfg[k].what, same ? "identical" : "DIFFERENT", (long long)r.st.steps,
                (long long)r.st.graph_steps, (long long)r.st.spec_steps,
                r.st.spec_steps ? (double)(r.st.spec_steps + r.st.spec_accepted) / r.st.spec_steps : 0,
                (long long)r.held, (long long)r.fed);
        CHECK_MSG(same, "%s: %s changed outputs", dc->name, cfg[k].what);
        CHECK(r.st.spec_steps > 0);
        if (cfg[k].sync) {
            CHECK_MSG(r.held == 0 && r.fed == 0, "%s (%s): held drafts in the synchronous order", dc->name, cfg[k].what);
        } else if (dc == &DEMO) {
            /* v41-tiny-a's steps do not take the pipelined order on CUDA yet (docs/speculative.md "Limits"):
             * there only the outputs and the drafts verified are checked */
            CHECK_MSG(r.held > 0 && r.fed > 0, "%s (%s): no verify step read held drafts on the device", dc->name,
                      cfg[k].what);
            if (fallback) CHECK_MSG(r.held > r.fed, "%s (%s): no held draft was taken to the host", dc->name, cfg[k].what);
        }
        if (!cfg[k].graphs) CHECK(r.st.graph_steps == 0);
        /* sync then pipelined of the same recording: the same drafts verified and accepted */
        if (k % 2 == 1 && prev.out)
            CHECK_MSG(!memcmp(prev.st.spec_drafted_at, r.st.spec_drafted_at, sizeof r.st.spec_drafted_at) &&
                          !memcmp(prev.st.spec_accepted_at, r.st.spec_accepted_at, sizeof r.st.spec_accepted_at),
                      "%s (%s): other drafts verified than in the synchronous order (%lld vs %lld accepted)", dc->name,
                      cfg[k].what, (long long)r.st.spec_accepted, (long long)prev.st.spec_accepted);
        if (prev.out) deepinfer_outputs_free(prev.out, (size_t)n);
        prev = r;
    }
    if (prev.out) deepinfer_outputs_free(prev.out, (size_t)n);
    deepinfer_outputs_free(ref.out, (size_t)n);
}

static void pipe_greedy(const dev_case *dc, int n) {
    static int32_t ids[NMAX * 128];
    deepinfer_prompt pr[NMAX];
    deepinfer_sampling_params sp[NMAX];
    workload(dc, n, 0, ids, pr, sp);
    for (int i = 0; i < n; i++) sp[i].max_tokens = MAXT - (i * 7) % 17; /* requests end at different steps */
    pipe_case(dc, n, pr, sp, 0, 0);
}

/* Two greedy requests and one with logprobs whose long prompt prefills in chunks of 8 beside their
 * verify steps: the steps it samples in sample on the host, so the held drafts go to the host first;
 * its own drafter steps keep the synchronous order. */
static void pipe_fallback(const dev_case *dc) {
    static int32_t ids[NMAX * 128];
    deepinfer_prompt pr[NMAX];
    deepinfer_sampling_params sp[NMAX];
    workload(dc, 3, 0, ids, pr, sp);
    static char longtext[1024];
    snprintf(longtext, sizeof longtext, "%s %s %s %s", TEXTS[4], TEXTS[5], TEXTS[6], TEXTS[7]);
    if (dc->text) pr[2] = (deepinfer_prompt){.text = longtext};
    sp[2].logprobs = 2;
    sp[2].max_tokens = 12;
    pipe_case(dc, 3, pr, sp, 8, 1);
}

TEST(gpu_spec_pipeline_demo_greedy_b1) { pipe_greedy(&DEMO, 1); }
TEST(gpu_spec_pipeline_demo_greedy_b8) { pipe_greedy(&DEMO, 8); }
TEST(gpu_spec_pipeline_v41_greedy_b1) { pipe_greedy(&V41, 1); }
TEST(gpu_spec_pipeline_v41_greedy_b8) { pipe_greedy(&V41, 8); }
TEST(gpu_spec_pipeline_demo_fallback) { pipe_fallback(&DEMO); }
TEST(gpu_spec_pipeline_v41_fallback) { pipe_fallback(&V41); }
