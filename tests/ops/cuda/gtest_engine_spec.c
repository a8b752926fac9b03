/* gtest_engine_spec.c — speculative decoding through the engine on CUDA
 * (docs/speculative.md), mirroring tests/engine/test_engine_spec.c: on the
 * golden V4 (MTP, chained) and V4.1 (DSpark) checkpoints, 24 mixed requests
 * (greedy, seeded sampling with filters and penalties, n > 1, stop ids,
 * logprobs) give outputs with speculation on — fixed and confidence-scheduled
 * lengths, prefill chunks of 13, a shrunk page pool that preempts — bitwise
 * equal to speculation off, on CUDA in the default batch-invariant mode; and
 * the greedy requests' tokens equal the CPU engine's without speculation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_util.h"
#include "engine_gpu_util.h"

typedef struct spec_case {
    const char *name, *dir;
    int v41;
    int32_t avoid;
    int64_t shrunk_pages;
} spec_case;

static const spec_case V4 = {"V4", "golden/v4-tiny-a", 0, -1, 40};
static const spec_case V41 = {"V4.1", "golden/v41-tiny-a", 1, 1008, 24};

enum { NS = 24 };

static deepinfer_engine *open_spec(const spec_case *mc, const char *acc, int varlen, int nextn, int chunk, int64_t pages) {
    eng_gpu_config g;
    eng_gpu_config_init(&g, mc->dir, mc->v41, acc);
    g.c.chunk_size = chunk;
    g.c.max_num_seqs = 16;
    g.c.num_pages = pages;
    g.c.mtp_varlen = varlen;
    g.c.nextn_decode = nextn;
    return eng_gpu_open(&g, mc->name);
}

static deepinfer_request_output **run(const spec_case *mc, const char *acc, int varlen, int nextn, int chunk,
                                      int64_t pages, const deepinfer_prompt *pr, const deepinfer_sampling_params *sp,
                                      deepinfer_engine_stats *st) {
    deepinfer_engine *e = open_spec(mc, acc, varlen, nextn, chunk, pages);
    if (!e) return NULL;
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, pr, NS, sp, NS, &out)) {
        di_test_fail(__FILE__, __LINE__, "%s on %s: %s", mc->name, acc, deepinfer_engine_last_error(e));
        out = NULL;
    }
    deepinfer_engine_get_stats(e, st);
    deepinfer_engine_close(e);
    return out;
}

static void spec_case_run(const spec_case *mc) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
    static int32_t ids[NS * 320];
    deepinfer_prompt pr[NS];
    deepinfer_sampling_params sp[NS];
    eng_workload_avoid(NS, 1024, mc->avoid, ids, pr, sp);
    for (int i = 0; i < NS; i++) sp[i].max_tokens += 12;
    deepinfer_engine_stats st;
    deepinfer_request_output **ref = run(mc, "cuda", 0, 0, 64, 0, pr, sp, &st);
    deepinfer_request_output **cpu = run(mc, "cpu", 0, 0, 64, 0, pr, sp, &st);
    if (!ref || !cpu) return;
    struct {
        const char *what;
        int varlen, nextn, chunk;
        int64_t pages;
    } cfg[] = {{"fixed max", 0, mc->v41 ? 5 : 3, 64, 0},
               {"confidence-scheduled", 1, -1, 64, 0},
               {"fixed 2, chunk 13", 0, 2, 13, 0},
               {"fixed max, shrunk pool", 0, mc->v41 ? 5 : 3, 64, mc->shrunk_pages}};
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        deepinfer_request_output **out =
            run(mc, "cuda", cfg[k].varlen, cfg[k].nextn, cfg[k].chunk, cfg[k].pages, pr, sp, &st);
        if (!out) break;
        int same = 1;
        for (int i = 0; i < NS; i++) same &= eng_same_output(ref[i], out[i], i);
        fprintf(stderr, "    %s cuda speculation %-24s %s: %lld steps, %lld verify steps, %lld/%lld drafts accepted, "
                        "%lld preemptions\n",
                mc->name, cfg[k].what, same ? "identical" : "DIFFERENT", (long long)st.steps, (long long)st.spec_steps,
                (long long)st.spec_accepted, (long long)st.spec_drafted, (long long)st.preemptions);
        CHECK_MSG(same, "%s: speculation (%s) changed outputs on CUDA", mc->name, cfg[k].what);
        CHECK_MSG(st.spec_steps > 0, "%s: no draft was verified (%s)", mc->name, cfg[k].what);
        if (cfg[k].pages) CHECK_MSG(st.preemptions > 0, "%s: the shrunk pool preempted nothing", mc->name);
        deepinfer_outputs_free(out, NS);
    }
    /* greedy requests: CUDA with speculation = the CPU engine without it (batch invariant: the
     * CUDA and CPU greedy trajectories are the same, gtest_engine.c) */
    int greedy = 0, same = 0;
    for (int i = 0; i < NS; i++) {
        if (sp[i].temperature != 0 || sp[i].repetition_penalty != 1.0f) continue;
        greedy++;
        same += cpu[i]->choices[0].n_tokens == ref[i]->choices[0].n_tokens &&
                !memcmp(cpu[i]->choices[0].token_ids, ref[i]->choices[0].token_ids,
                        sizeof(int32_t) * cpu[i]->choices[0].n_tokens);
    }
    fprintf(stderr, "    %s greedy requests: %d/%d equal the CPU engine's tokens\n", mc->name, same, greedy);
    CHECK_MSG(same == greedy, "%s: greedy tokens on CUDA differ from the CPU's", mc->name);
    deepinfer_outputs_free(ref, NS);
    deepinfer_outputs_free(cpu, NS);
}

TEST(gpu_engine_spec_equals_off_v4) { spec_case_run(&V4); }
TEST(gpu_engine_spec_equals_off_v41) { spec_case_run(&V41); }
