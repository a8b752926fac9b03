/* gtest_spec_quiet.c — confidence-scheduled speculation where drafting never
 * pays is plain decoding on CUDA (docs/speculative.md "Confidence-scheduled
 * lengths", "On CUDA"): with --mtp-varlen 1 and a step-cost table whose
 * drafter costs a thousand seconds per request, no step enters the drafter's
 * stage (no probe, no drafts at a prompt's end, no prompt window fed), so
 * every step is the step speculation off runs: the same outputs, the same
 * number of steps, recorded as often, into as many graphs, sampled on the
 * device as often and queued behind the running step as often (the golden V4
 * takes its placeholder tokens on the device, so its steps queue; the demo
 * model's Engram hash needs host tokens, so neither run queues). 8 greedy and
 * seeded requests on the golden V4 (MTP) and the demo model (DSpark). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/engine_util.h"
#include "engine_gpu_util.h"

typedef struct quiet_case {
    const char *name, *dir;
    int text;       /* text prompts (the demo's tokenizer), else token ids */
    int queues;     /* its decode steps queue behind the running one (device tokens) */
} quiet_case;

static const quiet_case V4Q = {"V4", "golden/v4-tiny-a", 0, 1};
static const quiet_case DEMOQ = {"demo", "../../models/deepinfer-demo-v41", 1, 0};

enum { NQ = 8, MAXTQ = 40 };

static const char *QTEXTS[NQ] = {"In the beginning God created", "And Jesus said unto them,", "The LORD is my shepherd;",
                                 "And it came to pass", "Blessed are the meek:", "For God so loved the world,",
                                 "Then the king answered and said", "Now the serpent was more subtle"};

static deepinfer_request_output **quiet_run(const quiet_case *qc, int varlen, const deepinfer_prompt *pr,
                                            const deepinfer_sampling_params *sp, deepinfer_engine_stats *st) {
    eng_gpu_config g;
    eng_gpu_config_init(&g, qc->dir, 0, "cuda");
    g.c.max_num_seqs = NQ;
    g.c.mtp_varlen = varlen;
    g.c.nextn_decode = varlen ? -1 : 0;
    static const di_spec_cost never = {.n = 2, .rows = {1, 1024}, .sec = {1e-3, 1e-3 + 1023 * 1e-5},
                                       .nd = 1, .reqs = {1}, .dsec = {1e3}};
    const di_engine_options opt = {.spec_cost = varlen ? &never : NULL, .spec_cost_frozen = 1};
    deepinfer_engine *e = NULL;
    di_error err = {0};
    if (di_engine_open_opts(&g.c, &opt, &e, &err)) {
        di_test_fail(__FILE__, __LINE__, "%s: %s", qc->name, err.msg);
        return NULL;
    }
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, pr, NQ, sp, NQ, &out)) {
        di_test_fail(__FILE__, __LINE__, "%s: %s", qc->name, deepinfer_engine_last_error(e));
        out = NULL;
    }
    deepinfer_engine_get_stats(e, st);
    deepinfer_engine_close(e);
    return out;
}

static void quiet_case_run(const quiet_case *qc) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
    static int32_t ids[NQ * 64];
    deepinfer_prompt pr[NQ];
    deepinfer_sampling_params sp[NQ];
    uint32_t x = 4321;
    for (int i = 0; i < NQ; i++) {
        if (qc->text) {
            pr[i] = (deepinfer_prompt){.text = QTEXTS[i]};
        } else {
            int len = 12 + 5 * i;
            for (int t = 0; t < len; t++) {
                x = x * 1664525u + 1013904223u;
                ids[i * 64 + t] = (int32_t)((x >> 10) % 1000u);
            }
            pr[i] = (deepinfer_prompt){.token_ids = ids + i * 64, .n_token_ids = (size_t)len};
        }
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].max_tokens = MAXTQ;
        sp[i].ignore_eos = 1;
        if (i % 2) sp[i].temperature = 0.8f, sp[i].top_p = 0.95f, sp[i].has_seed = 1, sp[i].seed = 99 + (uint64_t)i;
        else sp[i].temperature = 0;
    }
    deepinfer_engine_stats off, on;
    deepinfer_request_output **ref = quiet_run(qc, 0, pr, sp, &off);
    deepinfer_request_output **out = quiet_run(qc, 1, pr, sp, &on);
    if (!ref || !out) return;
    int same = 1;
    for (int i = 0; i < NQ; i++) same &= eng_same_output(ref[i], out[i], i);
    const deepinfer_engine_stats *s[2] = {&off, &on};
    for (int k = 0; k < 2; k++)
        fprintf(stderr,
                "    %s %-16s %lld steps, %lld recorded, %lld graphs, %lld device-sampled, %lld queued, %lld with the "
                "drafter's stage\n",
                qc->name, k ? "never-paying" : "speculation off", (long long)s[k]->steps, (long long)s[k]->graph_steps,
                (long long)s[k]->graphs, (long long)s[k]->device_sampled_steps, (long long)s[k]->device_queued_steps,
                (long long)s[k]->spec_drafter_steps);
    CHECK_MSG(same, "%s: confidence scheduling changed outputs", qc->name);
    CHECK_MSG(on.spec_drafter_steps == 0 && on.spec_steps == 0, "%s: %lld steps ran the drafter's stage", qc->name,
              (long long)on.spec_drafter_steps);
    CHECK(on.steps == off.steps);
    CHECK_MSG(on.graph_steps == off.graph_steps && on.graphs == off.graphs,
              "%s: recorded steps %lld vs %lld, graphs %lld vs %lld", qc->name, (long long)on.graph_steps,
              (long long)off.graph_steps, (long long)on.graphs, (long long)off.graphs);
    CHECK(off.graph_steps > 0);
    CHECK(on.device_sampled_steps == off.device_sampled_steps && off.device_sampled_steps > 0);
    CHECK_MSG(on.device_queued_steps == off.device_queued_steps, "%s: %lld steps queued vs %lld", qc->name,
              (long long)on.device_queued_steps, (long long)off.device_queued_steps);
    if (qc->queues) CHECK(off.device_queued_steps > 0);
    deepinfer_outputs_free(ref, NQ);
    deepinfer_outputs_free(out, NQ);
}

TEST(gpu_spec_never_paying_is_plain_v4) { quiet_case_run(&V4Q); }
TEST(gpu_spec_never_paying_is_plain_demo) { quiet_case_run(&DEMOQ); }
