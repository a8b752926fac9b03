/* gtest_engine_prompt_lp.c — prompt logprobs through the engine on CUDA, mirroring
 * tests/engine/test_prompt_logprobs.c: on the golden V4 checkpoint, 16 mixed requests (half with
 * prompt_logprobs 0, 3 or 20, one with n = 3) give prompt logprobs on CUDA, in the default
 * batch-invariant mode, bitwise equal alone (chunk 512) and together (chunk 13; a shrunk page pool
 * that preempts); and near the CPU engine's: the CUDA kernels' rounding differs from the CPU's (the
 * default mode's BF16 GEMMs run tensor-core chains), so per request the mean |difference| stays within
 * the golden V4 logits bound (tests/data/golden README: 3.5e-2) and none exceeds 0.5 (a wrong row or
 * token is off by units); a sanity bound, not a contract. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_util.h"

enum { NP = 16, PLEN = 320 };

static deepinfer_request_output **plp_gpu_run(const char *acc, int chunk, int64_t pages, const deepinfer_prompt *p,
                                              const deepinfer_sampling_params *sp, int n, deepinfer_engine_stats *st) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data(ENGINE_GOLDEN);
    c.accelerator = acc;
    c.max_model_len = 1024;
    c.chunk_size = chunk;
    c.max_num_seqs = 16;
    c.page_rows = pages ? 16 : 0;
    c.num_pages = pages;
    deepinfer_engine *e = NULL;
    char msg[2048];
    if (deepinfer_engine_open(&c, &e, msg, sizeof msg)) {
        di_test_fail(__FILE__, __LINE__, "engine on %s: %s", acc, msg);
        return NULL;
    }
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, p, (size_t)n, sp, (size_t)n, &out)) {
        di_test_fail(__FILE__, __LINE__, "generate on %s: %s", acc, deepinfer_engine_last_error(e));
        out = NULL;
    }
    if (st) deepinfer_engine_get_stats(e, st);
    deepinfer_engine_close(e);
    return out;
}

static void plp_gpu_workload(int32_t *ids, deepinfer_prompt *p, deepinfer_sampling_params *sp) {
    static const int lens[NP] = {200, 1, 2, 33, 64, 65, 129, 300, 17, 100, 250, 5, 140, 31, 80, 160};
    uint32_t x = 99;
    for (int i = 0; i < NP; i++) {
        int32_t *q = ids + (size_t)i * PLEN;
        for (int t = 0; t < lens[i]; t++) x = x * 1664525u + 1013904223u, q[t] = 10 + (int32_t)((x >> 10) % 1000);
        p[i] = (deepinfer_prompt){.token_ids = q, .n_token_ids = (size_t)lens[i]};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].max_tokens = 6 + i % 9;
        sp[i].ignore_eos = 1;
        sp[i].has_seed = 1;
        sp[i].seed = 7 + (uint64_t)i;
        sp[i].temperature = i % 2 ? 0.8f : 0.0f;
        sp[i].prompt_logprobs = i % 2 ? -1 : (i % 6 == 0 ? 3 : (i % 6 == 2 ? 0 : 20));
        if (i == 3) sp[i].n = 3, sp[i].prompt_logprobs = 5;
    }
}

/* Count positions whose prompt logprobs (and top lists) differ: bitwise, or beyond tol when tol > 0. */
static int plp_diff(const deepinfer_request_output *a, const deepinfer_request_output *b, double tol) {
    if (a->status || b->status || a->n_prompt != b->n_prompt || !a->prompt_logprobs != !b->prompt_logprobs) return 1;
    if (!a->prompt_logprobs) return 0;
    int bad = 0;
    size_t K = (size_t)a->n_prompt_top;
    for (size_t i = 1; i < a->n_prompt; i++) {
        float x = a->prompt_logprobs[i], y = b->prompt_logprobs[i];
        if (tol > 0 ? !(fabs((double)x - y) <= tol) : memcmp(&x, &y, sizeof x) != 0) bad++;
        if (tol == 0)
            for (size_t j = 0; j < K; j++)
                bad += a->prompt_top_ids[i * K + j] != b->prompt_top_ids[i * K + j] ||
                       memcmp(&a->prompt_top_logprobs[i * K + j], &b->prompt_top_logprobs[i * K + j], sizeof(float));
    }
    return bad;
}

/* Mean and largest |difference| of the prompt logprobs of a and b (positions 1 ..). */
static void plp_dist(const deepinfer_request_output *a, const deepinfer_request_output *b, double *mean,
                     double *mx) {
    double s = 0, m = 0;
    size_t n = 0;
    for (size_t i = 1; a->prompt_logprobs && i < a->n_prompt && i < b->n_prompt; i++, n++) {
        const double d = fabs((double)a->prompt_logprobs[i] - b->prompt_logprobs[i]);
        s += d;
        m = d > m || d != d ? d : m;
    }
    *mean = n ? s / (double)n : 0, *mx = m;
}

TEST(gpu_engine_prompt_logprobs_invariant_and_near_cpu) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
    static int32_t ids[NP * PLEN];
    deepinfer_prompt p[NP];
    deepinfer_sampling_params sp[NP];
    plp_gpu_workload(ids, p, sp);
    deepinfer_request_output *alone[NP];
    for (int i = 0; i < NP; i++) {
        deepinfer_request_output **o = plp_gpu_run("cuda", 512, 0, &p[i], &sp[i], 1, NULL);
        CHECK(o && o[0]->status == DEEPINFER_OK);
        alone[i] = o[0];
        free(o);
    }
    deepinfer_engine_stats st;
    deepinfer_request_output **mix = plp_gpu_run("cuda", 13, 0, p, sp, NP, &st);
    deepinfer_request_output **tight = plp_gpu_run("cuda", 64, 30, p, sp, NP, &st);
    deepinfer_request_output **cpu = plp_gpu_run("cpu", 512, 0, p, sp, NP, NULL);
    CHECK(mix && tight && cpu);
    CHECK_MSG(st.preemptions > 0, "the shrunk pool caused no preemption");
    double worst_mean = 0, worst_max = 0;
    for (int i = 0; i < NP; i++) {
        CHECK_MSG(!plp_diff(alone[i], mix[i], 0), "request %d: together (chunk 13) differs from alone", i);
        CHECK_MSG(!plp_diff(alone[i], tight[i], 0), "request %d: preempted differs from alone", i);
        double mean = 0, mx = 0;
        CHECK_MSG(!plp_diff(alone[i], cpu[i], 1e30), "request %d: CUDA and CPU differ in shape or status", i);
        plp_dist(alone[i], cpu[i], &mean, &mx);
        if (mx > worst_max) worst_max = mx;
        if (mean > worst_mean) worst_mean = mean;
        CHECK_MSG(mean <= 3.5e-2 && mx <= 0.5, "request %d: CUDA vs CPU prompt logprobs mean |d| %.3g, max %.3g", i,
                  mean, mx);
        deepinfer_output_free(alone[i]);
    }
    fprintf(stderr, "    CUDA vs CPU prompt logprobs: worst request mean |d| %.3g, worst max |d| %.3g\n", worst_mean,
            worst_max);
    deepinfer_outputs_free(mix, NP);
    deepinfer_outputs_free(tight, NP);
    deepinfer_outputs_free(cpu, NP);
}
