/* gtest_compact.c — V4.1 compact prefill (bounded replay of the late
 * layers, architecture.md §6.5) with accelerator "cuda" on the golden V4.1
 * checkpoint, keep 40 (window 32 + the DSpark block 5, the smallest valid
 * tail; its 3 late layers x 31 > 40, so compact really differs from exact):
 *   - greedy outputs of the CUDA engine equal the CPU engine's in compact
 *     mode (gtest_engine.c's V4.1 rule: the CPU engine runs first, in the
 *     same process, before the CUDA backend is installed), and compact
 *     differs from exact somewhere on the CPU (the case is not vacuous);
 *   - bitwise batch and chunk invariance on CUDA (batch_invariant 1): a
 *     request alone with chunk 512 equals it with chunk 13 among two others
 *     (tokens, logprobs, top logprobs), the late layers' window floor
 *     applied by the device attention (ops.h di_attn_dec seg_lo);
 *   - recorded decode steps (CUDA graphs) in compact mode: graphs on equal
 *     graphs off, and graphs ran.
 * Each test runs in its own forked process (tests/runner.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_util.h"
#include "golden/golden_util.h"

#define GDIR "golden/v41-tiny-a"
#define KEEP 40

enum { NP = 5, STEPS = 20 };
static const int plen[NP] = {0 /* the whole golden prompt */, 250, 120, 200, 61};

static void clean_env(void) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
    unsetenv("DEEPINFER_CUDA_GRAPHS");
    unsetenv("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE");
    unsetenv("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS");
}

static deepinfer_engine *open_c(const char *acc, int compact, int chunk, int graphs) {
    char hash[4096];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(GDIR));
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data(GDIR);
    c.engram_hash = hash;
    c.accelerator = acc;
    c.batch_invariant = 1;
    c.cuda_graphs = graphs;
    c.max_model_len = 1024;
    c.chunk_size = chunk;
    c.max_num_seqs = 8;
    c.yoco_compact = compact;
    c.yoco_keep_tokens = KEEP;
    deepinfer_engine *e = NULL;
    char msg[2048];
    if (deepinfer_engine_open(&c, &e, msg, sizeof msg)) {
        di_test_fail(__FILE__, __LINE__, "engine on %s (compact %d): %s", acc, compact, msg);
        return NULL;
    }
    return e;
}

typedef struct work {
    int32_t *prompt;
    deepinfer_prompt p[NP];
    deepinfer_sampling_params sp[NP];
    di_json_doc *man;
} work;

static int make_work(work *w) {
    memset(w, 0, sizeof *w);
    w->man = golden_manifest(di_test_data(GDIR));
    if (!w->man) return 0;
    int np = 0;
    w->prompt = golden_ints(w->man->root, "prompt_token_ids", NULL, &np);
    if (!w->prompt) return 0;
    for (int i = 0; i < NP; i++) {
        int len = plen[i] && plen[i] < np ? plen[i] : np;
        w->p[i] = (deepinfer_prompt){.token_ids = w->prompt, .n_token_ids = (size_t)len};
        deepinfer_sampling_params_init(&w->sp[i]);
        w->sp[i].temperature = 0;
        w->sp[i].max_tokens = STEPS + 1;
        w->sp[i].ignore_eos = 1;
        w->sp[i].logprobs = 2;
    }
    return 1;
}

static void free_work(work *w) {
    free(w->prompt);
    di_json_free(w->man);
}

static deepinfer_request_output **run(const char *acc, int compact, int chunk, int graphs, const deepinfer_prompt *p,
                                      const deepinfer_sampling_params *sp, int n, deepinfer_engine_stats *st) {
    deepinfer_engine *e = open_c(acc, compact, chunk, graphs);
    if (!e) return NULL;
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, p, (size_t)n, sp, (size_t)n, &out)) {
        di_test_fail(__FILE__, __LINE__, "generate on %s (compact %d): %s", acc, compact, deepinfer_engine_last_error(e));
        out = NULL;
    }
    for (int i = 0; out && i < n; i++)
        if (out[i]->status) {
            di_test_fail(__FILE__, __LINE__, "request %d on %s: %s", i, acc, out[i]->error);
            deepinfer_outputs_free(out, (size_t)n);
            out = NULL;
        }
    if (st) deepinfer_engine_get_stats(e, st);
    deepinfer_engine_close(e);
    return out;
}

static int same_tokens(const deepinfer_request_output *a, const deepinfer_request_output *b) {
    const deepinfer_completion *x = &a->choices[0], *y = &b->choices[0];
    return x->n_tokens == y->n_tokens && !memcmp(x->token_ids, y->token_ids, sizeof(int32_t) * x->n_tokens);
}

TEST(gpu_compact_greedy_equals_cpu_compact) {
    clean_env();
    work w;
    CHECK(make_work(&w));
    deepinfer_request_output **exact = run("cpu", 0, 64, -1, w.p, w.sp, NP, NULL); /* before CUDA is installed */
    deepinfer_request_output **cpu = exact ? run("cpu", 1, 64, -1, w.p, w.sp, NP, NULL) : NULL;
    deepinfer_request_output **gpu = cpu ? run("cuda", 1, 64, -1, w.p, w.sp, NP, NULL) : NULL;
    CHECK(gpu);
    int same = 0, differs = 0;
    for (int i = 0; gpu && i < NP; i++) {
        same += same_tokens(cpu[i], gpu[i]);
        const deepinfer_completion *a = &cpu[i]->choices[0], *b = &exact[i]->choices[0];
        differs |= !same_tokens(cpu[i], exact[i]) || memcmp(a->logprobs, b->logprobs, sizeof(float) * a->n_tokens);
    }
    fprintf(stderr, "    compact (keep %d) greedy, %d prompts x %d tokens: %d/%d CUDA equal to the CPU; compact %s exact "
                    "on the CPU\n", KEEP, NP, STEPS + 1, same, NP, differs ? "differs from" : "EQUALS");
    CHECK_MSG(same == NP, "the CUDA engine's compact greedy outputs differ from the CPU engine's");
    CHECK_MSG(differs, "compact equals exact bitwise here: the case does not test the floor");
    if (exact) deepinfer_outputs_free(exact, NP);
    if (cpu) deepinfer_outputs_free(cpu, NP);
    if (gpu) deepinfer_outputs_free(gpu, NP);
    free_work(&w);
}

TEST(gpu_compact_alone_equals_batched_chunk_13) {
    clean_env();
    work w;
    CHECK(make_work(&w));
    deepinfer_request_output **alone = run("cuda", 1, 512, -1, w.p, w.sp, 1, NULL);
    deepinfer_request_output **mixed = alone ? run("cuda", 1, 13, -1, w.p, w.sp, 3, NULL) : NULL;
    CHECK(mixed);
    if (mixed) CHECK(eng_same_output(alone[0], mixed[0], 0));
    if (alone) deepinfer_outputs_free(alone, 1);
    if (mixed) deepinfer_outputs_free(mixed, 3);
    free_work(&w);
}

TEST(gpu_compact_graphs_equal_eager) {
    clean_env();
    work w;
    CHECK(make_work(&w));
    deepinfer_engine_stats so, sg;
    deepinfer_request_output **off = run("cuda", 1, 64, 0, w.p, w.sp, NP, &so);
    deepinfer_request_output **on = off ? run("cuda", 1, 64, 1, w.p, w.sp, NP, &sg) : NULL;
    CHECK(on);
    int same = on != NULL;
    for (int i = 0; on && i < NP; i++) same &= eng_same_output(off[i], on[i], i);
    if (on) {
        fprintf(stderr, "    compact: graphs on %s off; %lld recorded steps, %lld graphs\n", same ? "==" : "DIFFERS FROM",
                (long long)sg.graph_steps, (long long)sg.graphs);
        CHECK_MSG(same, "compact: outputs with graphs differ from eager");
        CHECK_MSG(sg.graph_steps > 0 && sg.graphs > 0, "compact: no decode step ran as a graph");
    }
    if (off) deepinfer_outputs_free(off, NP);
    if (on) deepinfer_outputs_free(on, NP);
    free_work(&w);
}
