/* gtest_engine_multidev.c — the engine's parallel ranks on CUDA (src/engine/ranks.h, docs/DESIGN.md §6):
 * deepinfer_generate with accelerator "cuda", batch_invariant 1, and --ep 2 or --dp 2 --ep 2 gives the
 * outputs of the engine without parallelism on CUDA, bitwise (tokens, logprobs, top logprobs, finish
 * reasons), on the golden V4 and V4.1 checkpoints with 24 mixed requests (mixed prompt lengths, greedy
 * and seeded sampling, several choices: forked states, chunked prefill).
 *   one device: every rank on device 0 (di_engine_options.ranks_one_device, tests only): each rank
 *     thread binds its own device context, loads its model shard and state pool there, and the ranks
 *     exchange device buffers through the device loopback communicator; so the whole multi-rank
 *     device path runs on one GPU;
 *   per device: rank r on device r over NCCL (the product's path); needs 2 visible GPUs and
 *     libnccl.so.2 (SKIP otherwise, with the reason).
 * The reference samples on the host as the ranks do (their step logits come back to the host;
 * gtest_engine.c (e) shows the host and device samplers agree). Each test runs in its own forked
 * process (tests/runner.c). */
#include "engine/engine_internal.h"
#include "engine/engine_util.h"
#include "ops/backend.h"
#include "ops/cuda/engine_gpu_util.h"

#define NREQ 24

typedef struct md_case {
    const char *name, *dir;
    int v41;
    int32_t avoid; /* V4.1: the image token */
} md_case;

typedef struct md_layout {
    int ep, dp, one_device;
} md_layout;

static deepinfer_request_output **run(const md_case *k, const md_layout *l, const deepinfer_prompt *pr,
                                      const deepinfer_sampling_params *sp, char *why, size_t why_n) {
    eng_gpu_config g;
    eng_gpu_config_init(&g, k->dir, k->v41, "cuda");
    deepinfer_engine_config c = g.c; /* its Engram hash path lives in g */
    c.batch_invariant = 1;
    c.chunk_size = 16;
    c.max_num_seqs = 16;
    c.max_num_batched_tokens = 96; /* DP: several passes per step */
    c.ep = l ? l->ep : 1;
    c.dp = l ? l->dp : 1;
    di_engine_options opt = {.host_sampler = 1, .ranks_one_device = l && l->one_device};
    deepinfer_engine *e = NULL;
    di_error err = {0};
    if (di_engine_open_opts(&c, &opt, &e, &err)) {
        snprintf(why, why_n, "%s", err.msg);
        return NULL;
    }
    if (l) { /* the ranks run where the layout says */
        const char *want = l->one_device ? "on GPU 0, device loopback communicator" : "a thread and a GPU each, NCCL";
        const char *plan = deepinfer_engine_plan_text(e);
        if (!strstr(plan, want)) {
            const char *par = strstr(plan, "parallel");
            snprintf(why, why_n, "the plan does not say \"%s\": %.800s", want, par ? par : plan);
            deepinfer_engine_close(e);
            return NULL;
        }
    }
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, pr, NREQ, sp, NREQ, &out)) {
        snprintf(why, why_n, "%s", deepinfer_engine_last_error(e));
        out = NULL;
    }
    deepinfer_engine_close(e);
    return out;
}

static void check_case(const md_case *k, const md_layout *l) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
    if (!l->one_device) {
        di_cuda_info ci;
        di_backend_cuda_info(&ci);
        if (ci.device_count < 2) SKIP("--ep %d over NCCL needs 2 visible GPUs, %d visible", l->ep, ci.device_count);
    }
    static int32_t ids[NREQ * 320];
    deepinfer_prompt pr[NREQ];
    deepinfer_sampling_params sp[NREQ];
    eng_workload_avoid(NREQ, 1024, k->avoid, ids, pr, sp);
    char why[DI_ERROR_MSG_MAX] = "";
    deepinfer_request_output **ref = run(k, NULL, pr, sp, why, sizeof why);
    CHECK_MSG(ref != NULL, "%s without parallelism: %s", k->name, why);
    if (!ref) return;
    deepinfer_request_output **got = run(k, l, pr, sp, why, sizeof why);
    if (!got && !l->one_device && strstr(why, "libnccl")) {
        deepinfer_outputs_free(ref, NREQ);
        SKIP("%s", why);
    }
    CHECK_MSG(got != NULL, "%s --ep %d --dp %d (%s): %s", k->name, l->ep, l->dp,
              l->one_device ? "one device" : "per device", why);
    int same = got != NULL;
    for (int i = 0; got && i < NREQ; i++) same &= eng_same_output(ref[i], got[i], i);
    CHECK_MSG(same, "%s --ep %d --dp %d: the parallel ranks differ from the engine without them", k->name, l->ep, l->dp);
    fprintf(stderr, "    %s --ep %d --dp %d (%s): %d requests %s\n", k->name, l->ep, l->dp,
            l->one_device ? "every rank on device 0, device loopback" : "one GPU per rank, NCCL", NREQ,
            same ? "bitwise equal" : "DIFFERENT");
    deepinfer_outputs_free(ref, NREQ);
    if (got) deepinfer_outputs_free(got, NREQ);
}

static const md_case V4 = {"V4", "golden/v4-tiny-a", 0, -1}, V41 = {"V4.1", "golden/v41-tiny-a", 1, 1008};
static const md_layout EP2_ONE = {2, 1, 1}, DP2_ONE = {2, 2, 1}, EP2_DEV = {2, 1, 0}, DP2_DEV = {2, 2, 0};

TEST(engine_multidev_one_device_ep2_equals_no_parallel_v4) { check_case(&V4, &EP2_ONE); }
TEST(engine_multidev_one_device_ep2_equals_no_parallel_v41) { check_case(&V41, &EP2_ONE); }
TEST(engine_multidev_one_device_dp2_ep2_equals_no_parallel_v4) { check_case(&V4, &DP2_ONE); }
TEST(engine_multidev_one_device_dp2_ep2_equals_no_parallel_v41) { check_case(&V41, &DP2_ONE); }
TEST(engine_multidev_nccl_ep2_equals_no_parallel_v4) { check_case(&V4, &EP2_DEV); }
TEST(engine_multidev_nccl_dp2_ep2_equals_no_parallel_v41) { check_case(&V41, &DP2_DEV); }
