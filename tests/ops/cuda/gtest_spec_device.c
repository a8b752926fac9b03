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
 * show verify steps that ran recorded and were sampled on the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
