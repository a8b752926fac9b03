/* gtest_engine_nccl.c — the engine's one-rank NCCL path on one GPU: deepinfer_generate with
 * accelerator "cuda" and the model's expert-parallel path over an NCCL communicator of one rank
 * (di_engine_options.nccl_one_rank: every expert resident, the step's selections read back, the
 * exchange through NCCL, eager steps) gives the outputs of the engine without parallelism,
 * bitwise (tokens, logprobs, top logprobs; batch_invariant 1), on the golden V4 and V4.1
 * checkpoints with 24 mixed requests (mixed lengths, greedy and seeded sampling, chunked prefill).
 * Needs libnccl.so.2 (SKIP otherwise, with the reason). Each test runs in its own forked process
 * (tests/runner.c). */
#include "engine/engine_internal.h"
#include "engine/engine_util.h"
#include "ops/backend.h"

#define NREQ 24

typedef struct nccl_case {
    const char *name, *dir;
    int v41;
    int32_t avoid; /* V4.1: the image token */
} nccl_case;

static deepinfer_request_output **run(const nccl_case *k, int nccl, const deepinfer_prompt *pr,
                                      const deepinfer_sampling_params *sp, char *why, size_t why_n) {
    char hash[4096];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(k->dir));
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data(k->dir);
    c.engram_hash = k->v41 ? hash : NULL;
    c.accelerator = "cuda";
    c.batch_invariant = 1;
    c.max_model_len = 1024;
    c.chunk_size = 16;
    c.max_num_seqs = 16;
    di_engine_options opt = {.nccl_one_rank = nccl};
    deepinfer_engine *e = NULL;
    di_error err = {0};
    if (di_engine_open_opts(&c, &opt, &e, &err)) {
        snprintf(why, why_n, "%s", err.msg);
        return NULL;
    }
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, pr, NREQ, sp, NREQ, &out)) {
        snprintf(why, why_n, "%s", deepinfer_engine_last_error(e));
        out = NULL;
    }
    deepinfer_engine_close(e);
    return out;
}

static void check_case(const nccl_case *k) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
    static int32_t ids[NREQ * 320];
    deepinfer_prompt pr[NREQ];
    deepinfer_sampling_params sp[NREQ];
    eng_workload_avoid(NREQ, 1024, k->avoid, ids, pr, sp);
    char why[DI_ERROR_MSG_MAX] = "";
    deepinfer_request_output **ref = run(k, 0, pr, sp, why, sizeof why);
    CHECK_MSG(ref != NULL, "%s without NCCL: %s", k->name, why);
    if (!ref) return;
    deepinfer_request_output **got = run(k, 1, pr, sp, why, sizeof why);
    if (!got && strstr(why, "libnccl")) {
        deepinfer_outputs_free(ref, NREQ);
        SKIP("%s", why);
    }
    CHECK_MSG(got != NULL, "%s over NCCL: %s", k->name, why);
    int same = got != NULL;
    for (int i = 0; got && i < NREQ; i++) same &= eng_same_output(ref[i], got[i], i);
    CHECK_MSG(same, "%s: the one-rank NCCL path differs from the engine without it", k->name);
    fprintf(stderr, "    %s: %d requests over a one-rank NCCL communicator %s\n", k->name, NREQ,
            same ? "bitwise equal" : "DIFFERENT");
    deepinfer_outputs_free(ref, NREQ);
    if (got) deepinfer_outputs_free(got, NREQ);
}

static const nccl_case V4 = {"V4", "golden/v4-tiny-a", 0, -1}, V41 = {"V4.1", "golden/v41-tiny-a", 1, 1008};

TEST(engine_nccl_one_rank_equals_no_parallel_bitwise_v4) { check_case(&V4); }
TEST(engine_nccl_one_rank_equals_no_parallel_bitwise_v41) { check_case(&V41); }
