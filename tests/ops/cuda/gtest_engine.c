/* gtest_engine.c — the engine (deepinfer_generate) with accelerator "cuda"
 * on the golden V4 and V4.1 checkpoints, mirroring the CPU engine tests
 * (tests/engine/test_engine_golden.c, _invariance.c, _v41.c, _state.c):
 *   - greedy outputs equal the CPU engine's, run in the same process before
 *     the CUDA backend is installed (prompts: prefixes of the golden prompt
 *     of the lengths tests/ops/cuda/gtest_graph.c uses);
 *   - fast mode (batch_invariant 0) against the CPU engine and the golden
 *     (golden_util.h's rule): greedy equal up to the reference's first step
 *     with a top-2 margin below the reference's own CUDA-vs-CPU spread, the
 *     rest teacher-forced (the CPU's tokens appended to the prompt): the
 *     CPU's token wherever its margin is >= the spread, and every chosen
 *     token's logprob within 2 x spread of the CPU's (|d logprob| <=
 *     2 max |d logit|);
 *   - 24 mixed requests (mixed lengths and sampling parameters) run together
 *     equal each run alone, bitwise (tokens, logprobs, top logprobs;
 *     batch_invariant = 1), with prefill chunks of 16, and with the page pool
 *     shrunk until the scheduler preempts (the count is printed);
 *   - the state pool on the device: snapshot/rollback of drafts is invisible
 *     and a copied slot continues like its source (seq_snapshot.c through
 *     ops copies);
 *   - recorded decode steps (CUDA graphs, src/engine/devq_graph.c): the same
 *     requests with graphs on and off give identical outputs (tokens,
 *     logprobs, top logprobs), batch_invariant 1 and 0, and graphs were
 *     used (the engine's graph counters).
 *   - the device sampler and the asynchronous queue: the same requests
 *     sampled on the host, on the device (sync and async) and streamed with
 *     every finished request taken at once give identical outputs.
 * The other cases run with graphs on (the default), so they test the
 * recorded steps too.
 * Each test runs in its own forked process (tests/runner.c); the engine
 * installs the CUDA backend when it opens and puts the CPU back when the
 * last CUDA engine closes (src/engine/engine_backend.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/engine_util.h"
#include "engine/seq_snapshot.h"
#include "engine/state_pool.h"
#include "golden/golden_util.h"
#include "engine_gpu_util.h"
#include "model/dsv4.h"
#include "ops/backend.h"

typedef struct eng_case {
    const char *name, *dir;
    int v41;
    int32_t avoid;        /* a prompt id never used (V4.1: the image token), -1 = none */
    int64_t shrunk_pages; /* 16-row pages that force preemptions (tests/engine: 48 for V4, 80 for V4.1) */
    int shrunk_seqs;
    double spread; /* the reference's own CUDA-vs-CPU decode noise (golden manifest stability, gtest_forward.c) */
} eng_case;

static const eng_case V4 = {"V4", "golden/v4-tiny-a", 0, -1, 48, 32, 0.141};
static const eng_case V41 = {"V4.1", "golden/v41-tiny-a", 1, 1008, 80, 16, 0.538};

/* The environment must not pick the accelerator or the mode behind the test's back. */
static void clean_env(void) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
}

/* bi: batch_invariant; graphs: cuda_graphs (-1 = the default, on) */
static deepinfer_engine *open_mode(const eng_case *mc, const char *acc, int chunk, int max_seqs, int page_rows,
                                   int64_t pages, int bi, int graphs) {
    eng_gpu_config g;
    eng_gpu_config_init(&g, mc->dir, mc->v41, acc);
    g.c.batch_invariant = bi;
    g.c.cuda_graphs = graphs;
    g.c.chunk_size = chunk;
    g.c.max_num_seqs = max_seqs;
    g.c.page_rows = page_rows;
    g.c.num_pages = pages;
    return eng_gpu_open(&g, mc->name);
}

static deepinfer_engine *open_on(const eng_case *mc, const char *acc, int chunk, int max_seqs, int page_rows,
                                 int64_t pages) {
    return open_mode(mc, acc, chunk, max_seqs, page_rows, pages, 1, -1);
}

/* ---- (a) greedy: the CUDA engine's outputs follow the CPU engine's -------------------------------------
 * Neither mode gives the CPU's bits (docs/determinism.md §7), so the outputs must be equal up to the first
 * token where the CPU's choice is a near tie (its top-2 margin below the model's spread: golden_util.h's
 * rule); the rest of that output follows another input. */

enum { NGREEDY = 6, GSTEPS = 20 };
static const int glen[NGREEDY] = {0 /* the whole golden prompt */, 250, 120, 283, 280, 61};

static deepinfer_request_output **greedy_run(const eng_case *mc, const char *acc, const deepinfer_prompt *p) {
    deepinfer_engine *e = open_on(mc, acc, 64, 16, 0, 0);
    if (!e) return NULL;
    if (!strcmp(acc, "cuda")) fprintf(stderr, "%s", deepinfer_engine_plan_text(e));
    deepinfer_sampling_params sp[NGREEDY];
    for (int i = 0; i < NGREEDY; i++) {
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].temperature = 0;
        sp[i].max_tokens = GSTEPS + 1;
        sp[i].ignore_eos = 1;
        sp[i].logprobs = 2;
    }
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, p, NGREEDY, sp, NGREEDY, &out)) {
        di_test_fail(__FILE__, __LINE__, "%s generate on %s: %s", mc->name, acc, deepinfer_engine_last_error(e));
        out = NULL;
    }
    deepinfer_engine_close(e);
    return out;
}

static void greedy_case(const eng_case *mc) {
    clean_env();
    di_json_doc *man = golden_manifest(di_test_data(mc->dir));
    CHECK(man);
    int np = 0;
    int32_t *prompt = golden_ints(man->root, "prompt_token_ids", NULL, &np);
    CHECK(prompt);
    deepinfer_prompt p[NGREEDY];
    for (int i = 0; i < NGREEDY; i++) {
        int len = glen[i] && glen[i] < np ? glen[i] : np;
        p[i] = (deepinfer_prompt){.token_ids = prompt, .n_token_ids = (size_t)len};
    }
    deepinfer_request_output **cpu = greedy_run(mc, "cpu", p); /* before CUDA is installed */
    deepinfer_request_output **gpu = cpu ? greedy_run(mc, "cuda", p) : NULL;
    int same = 0, firm = 0;
    double lp_max = 0;
    for (int i = 0; gpu && i < NGREEDY; i++) {
        const deepinfer_completion *a = &cpu[i]->choices[0], *b = &gpu[i]->choices[0];
        if (cpu[i]->status || gpu[i]->status) {
            di_test_fail(__FILE__, __LINE__, "prompt %d: %s / %s", i, cpu[i]->error, gpu[i]->error);
            continue;
        }
        int eq = a->n_tokens == b->n_tokens && !memcmp(a->token_ids, b->token_ids, sizeof(int32_t) * a->n_tokens);
        same += eq;
        for (size_t t = 0; t < a->n_tokens && t < b->n_tokens; t++) {
            if (a->token_ids[t] != b->token_ids[t]) {
                const double margin = a->n_top >= 2 ? (double)a->top_logprobs[t * 2] - a->top_logprobs[t * 2 + 1] : 1e9;
                const int runner_up = a->n_top >= 2 && a->top_ids[t * 2 + 1] == b->token_ids[t];
                fprintf(stderr, "    prompt %d (%zu tokens): first difference at output %zu: cuda %d, cpu %d (cpu margin "
                        "%.3f, spread %.3f, cuda's is the cpu's runner-up: %s)\n", i, p[i].n_token_ids, t,
                        b->token_ids[t], a->token_ids[t], margin, mc->spread, runner_up ? "yes" : "no");
                firm += !(margin < mc->spread);
                break;
            }
            double d = (double)a->logprobs[t] - (double)b->logprobs[t];
            if (d < 0) d = -d;
            if (d > lp_max) lp_max = d;
        }
    }
    if (gpu) {
        fprintf(stderr, "    %s greedy generate, %d prompts x %d tokens: %d/%d equal to the CPU engine; max |logprob "
                        "cuda - cpu| %.3e\n",
                mc->name, NGREEDY, GSTEPS + 1, same, NGREEDY, lp_max);
        CHECK_MSG(firm == 0, "%s: %d greedy outputs leave the CPU engine's where the CPU is firm", mc->name, firm);
        CHECK_MSG(lp_max < mc->spread, "%s: logprobs of equal tokens %.3e apart (spread %.3f)", mc->name, lp_max,
                  mc->spread);
    }
    if (cpu) deepinfer_outputs_free(cpu, NGREEDY);
    if (gpu) deepinfer_outputs_free(gpu, NGREEDY);
    free(prompt);
    di_json_free(man);
}

TEST(gpu_engine_greedy_near_cpu_v4) { greedy_case(&V4); }
TEST(gpu_engine_greedy_near_cpu_v41) { greedy_case(&V41); }

/* ---- (a') fast mode: accuracy against the CPU engine and the golden ------------------------------ */

/* n greedy requests on accelerator acc (batch_invariant bi), max_tokens each, top-2 logprobs. */
static deepinfer_request_output **greedy_lp(const eng_case *mc, const char *acc, int bi, const deepinfer_prompt *p, int n,
                                            int max_tokens) {
    deepinfer_engine *e = open_mode(mc, acc, 64, 16, 0, 0, bi, -1);
    if (!e) return NULL;
    deepinfer_sampling_params *sp = malloc(sizeof *sp * (size_t)n);
    for (int i = 0; i < n; i++) {
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].temperature = 0;
        sp[i].max_tokens = max_tokens;
        sp[i].ignore_eos = 1;
        sp[i].logprobs = 2;
    }
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, p, (size_t)n, sp, (size_t)n, &out)) {
        di_test_fail(__FILE__, __LINE__, "%s generate on %s: %s", mc->name, acc, deepinfer_engine_last_error(e));
        out = NULL;
    }
    for (int i = 0; out && i < n; i++)
        if (out[i]->status || out[i]->choices[0].n_top < 2) {
            di_test_fail(__FILE__, __LINE__, "%s on %s, request %d: %s", mc->name, acc, i, out[i]->error);
            deepinfer_outputs_free(out, (size_t)n);
            out = NULL;
            break;
        }
    free(sp);
    deepinfer_engine_close(e);
    return out;
}

static double top2_margin(const deepinfer_completion *c, size_t t) {
    return (double)c->top_logprobs[t * (size_t)c->n_top] - (double)c->top_logprobs[t * (size_t)c->n_top + 1];
}

static void fast_case(const eng_case *mc) {
    clean_env();
    di_json_doc *man = golden_manifest(di_test_data(mc->dir));
    CHECK(man);
    int np = 0, no = 0;
    int32_t *prompt = golden_ints(man->root, "prompt_token_ids", NULL, &np);
    const char *key = mc->v41 ? "decode_fixed" : "decode";
    int32_t *gout = golden_ints(man->root, key, "output_tokens", &no);
    int gfirst = (int)golden_num(man->root, key, "first_token_from_prefill", NULL);
    double spread = golden_num(man->root, "stability", mc->v41 ? "tbt_fixed_cuda_vs_cpu" : "decode_logits_cuda_vs_cpu", "max_abs_diff");
    char path[4096];
    snprintf(path, sizeof path, "%s/expected/%s", di_test_data(mc->dir), mc->v41 ? "decode_logits_fixed.bin" : "decode_logits.bin");
    size_t ng = 0, na = 0;
    float *gdec = golden_read_f32(path, &ng);
    snprintf(path, sizeof path, "%s/expected/prefill_logits_all.bin", di_test_data(mc->dir));
    float *gall = golden_read_f32(path, &na);
    CHECK(prompt && gout && gdec && gall && spread > 0 && no >= GSTEPS);
    int V = (int)(na / (size_t)np);
    deepinfer_prompt p[NGREEDY];
    for (int i = 0; i < NGREEDY; i++) {
        int len = glen[i] && glen[i] < np ? glen[i] : np;
        p[i] = (deepinfer_prompt){.token_ids = prompt, .n_token_ids = (size_t)len};
    }
    deepinfer_request_output **cpu = greedy_lp(mc, "cpu", 1, p, NGREEDY, GSTEPS + 1); /* the reference, before CUDA */
    deepinfer_request_output **gpu = cpu ? greedy_lp(mc, "cuda", 0, p, NGREEDY, GSTEPS + 1) : NULL;
    CHECK(gpu);
    /* free-running: equal up to the CPU's first near tie; the teacher-forced rest from there on */
    int k[NGREEDY], nforced = 0, firm_bad = 0, lp_bad = 0;
    double lp_max = 0;
    for (int i = 0; i < NGREEDY; i++) {
        const deepinfer_completion *a = &cpu[i]->choices[0], *b = &gpu[i]->choices[0];
        CHECK(a->n_tokens == (size_t)GSTEPS + 1 && b->n_tokens == a->n_tokens);
        k[i] = 0;
        while (k[i] < GSTEPS + 1 && a->token_ids[k[i]] == b->token_ids[k[i]]) {
            double d = fabs((double)a->logprobs[k[i]] - (double)b->logprobs[k[i]]);
            lp_max = fmax(lp_max, d);
            lp_bad += d > 2 * spread;
            k[i]++;
        }
        if (k[i] <= GSTEPS) {
            double mg = top2_margin(a, (size_t)k[i]);
            fprintf(stderr, "    %s fast, prompt %d: %d/%d leading tokens equal to the CPU engine's; then CPU margin %.3f "
                            "(spread %.3f)\n", mc->name, i, k[i], GSTEPS + 1, mg, spread);
            firm_bad += mg >= spread;
            nforced += GSTEPS + 1 - k[i];
        }
    }
    CHECK_MSG(!firm_bad, "%s fast: %d prompts leave the CPU engine's greedy output where the CPU is firm", mc->name, firm_bad);
    /* teacher-forced: request (i, t) = prompt i + the CPU's first t tokens, one greedy token */
    deepinfer_prompt *fp = calloc((size_t)nforced + 1, sizeof *fp);
    int32_t *ids = malloc(sizeof(int32_t) * ((size_t)nforced + 1) * (size_t)(np + GSTEPS + 1));
    int *fi = malloc(sizeof(int) * ((size_t)nforced + 1)), *ft = malloc(sizeof(int) * ((size_t)nforced + 1)), nf = 0;
    for (int i = 0; i < NGREEDY; i++)
        for (int t = k[i]; t <= GSTEPS; t++, nf++) {
            int32_t *w = ids + (size_t)nf * (size_t)(np + GSTEPS + 1);
            memcpy(w, prompt, sizeof(int32_t) * p[i].n_token_ids);
            memcpy(w + p[i].n_token_ids, cpu[i]->choices[0].token_ids, sizeof(int32_t) * (size_t)t);
            fp[nf] = (deepinfer_prompt){.token_ids = w, .n_token_ids = p[i].n_token_ids + (size_t)t};
            fi[nf] = i, ft[nf] = t;
        }
    deepinfer_request_output **tf = nf ? greedy_lp(mc, "cuda", 0, fp, nf, 1) : NULL;
    int tf_bad = 0, ties = 0;
    for (int r = 0; tf && r < nf; r++) {
        const deepinfer_completion *a = &cpu[fi[r]]->choices[0], *b = &tf[r]->choices[0];
        size_t t = (size_t)ft[r];
        double d = fabs((double)a->logprobs[t] - (double)b->logprobs[0]);
        if (b->token_ids[0] != a->token_ids[t]) {
            if (top2_margin(a, t) < spread) ties++;
            else tf_bad++;
        } else {
            lp_max = fmax(lp_max, d);
            lp_bad += d > 2 * spread;
        }
    }
    fprintf(stderr, "    %s fast: %d teacher-forced steps: %d near ties, %d firm differences; max |logprob - CPU's| %.3e "
                    "(bound %.3e)\n", mc->name, nf, ties, tf_bad, lp_max, 2 * spread);
    CHECK_MSG(!nf || tf, "%s fast: the teacher-forced requests failed", mc->name);
    CHECK_MSG(!tf_bad, "%s fast: teacher-forced tokens differ from the CPU's on %d firm steps", mc->name, tf_bad);
    CHECK_MSG(!lp_bad, "%s fast: %d logprobs differ from the CPU's by more than 2 x spread", mc->name, lp_bad);
    /* against the golden: the whole-prompt request follows the golden greedy output by the same rule
     * (output 0 from the prefill's last row, output t from golden decode row t - 1) */
    const deepinfer_completion *g = &gpu[0]->choices[0];
    int kg = 0;
    while (kg < GSTEPS + 1 && g->token_ids[kg] == (kg ? gout[kg - 1] : gfirst)) kg++;
    if (kg <= GSTEPS) {
        const float *row = kg ? gdec + (size_t)(kg - 1) * V : gall + (size_t)(np - 1) * V;
        double mg = golden_margin(row, V);
        fprintf(stderr, "    %s fast vs golden: %d/%d leading tokens equal; then golden margin %.3f (spread %.3f)\n",
                mc->name, kg, GSTEPS + 1, mg, spread);
        CHECK_MSG(mg < spread, "%s fast: leaves the golden trajectory at output %d where the reference is firm", mc->name, kg);
    } else fprintf(stderr, "    %s fast vs golden: %d/%d tokens equal\n", mc->name, kg, GSTEPS + 1);
    if (tf) deepinfer_outputs_free(tf, (size_t)nf);
    free(fp), free(ids), free(fi), free(ft);
    deepinfer_outputs_free(cpu, NGREEDY);
    deepinfer_outputs_free(gpu, NGREEDY);
    free(prompt), free(gout), free(gdec), free(gall);
    di_json_free(man);
}

TEST(gpu_engine_greedy_fast_accuracy_v4) { fast_case(&V4); }
TEST(gpu_engine_greedy_fast_accuracy_v41) { fast_case(&V41); }

/* ---- (b), (c) mixed requests together equal alone; preemption ----------------------------------- */

enum { NMIX = 24 };

/* One run of all requests through one engine; prints and returns 1 if
 * every output equals `alone`. *pre: preemptions. */
static int together(const eng_case *mc, const char *what, int chunk, int max_seqs, int page_rows, int64_t pages,
                    const deepinfer_prompt *pr, const deepinfer_sampling_params *sp, deepinfer_request_output **alone,
                    long long *pre) {
    deepinfer_engine *e = open_on(mc, "cuda", chunk, max_seqs, page_rows, pages);
    if (!e) return 0;
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, pr, NMIX, sp, NMIX, &out)) {
        di_test_fail(__FILE__, __LINE__, "%s %s: %s", mc->name, what, deepinfer_engine_last_error(e));
        deepinfer_engine_close(e);
        return 0;
    }
    deepinfer_engine_stats st;
    deepinfer_engine_get_stats(e, &st);
    int same = 1;
    long tokens = 0;
    for (int i = 0; i < NMIX; i++) {
        same &= eng_same_output(alone[i], out[i], i);
        for (size_t j = 0; j < out[i]->n_choices; j++) tokens += (long)out[i]->choices[j].n_tokens;
    }
    fprintf(stderr, "    %s cuda %-34s %s: %ld tokens, %lld steps, %lld preemptions, peak %lld/%lld pages, %.2fs\n",
            mc->name, what, same ? "identical" : "DIFFERENT", tokens, (long long)st.steps, (long long)st.preemptions,
            (long long)st.pages_peak, (long long)st.num_pages, st.busy_s);
    *pre = st.preemptions;
    deepinfer_outputs_free(out, NMIX);
    deepinfer_engine_close(e);
    return same;
}

/* Each request alone on `acc`, one engine; NULL entries on failure. */
static int run_alone(const eng_case *mc, const char *acc, const deepinfer_prompt *pr, const deepinfer_sampling_params *sp,
                     deepinfer_request_output **alone) {
    deepinfer_engine *e = open_on(mc, acc, 64, 8, 0, 0);
    if (!e) return 0;
    int ok = 1;
    for (int i = 0; i < NMIX && ok; i++) {
        deepinfer_request_output **o = NULL;
        if (deepinfer_generate(e, &pr[i], 1, &sp[i], 1, &o)) {
            di_test_fail(__FILE__, __LINE__, "%s alone %d on %s: %s", mc->name, i, acc, deepinfer_engine_last_error(e));
            ok = 0;
            break;
        }
        alone[i] = o[0];
        free(o);
        if (alone[i]->status) {
            di_test_fail(__FILE__, __LINE__, "%s request %d on %s: %s", mc->name, i, acc, alone[i]->error);
            ok = 0;
        }
    }
    deepinfer_engine_close(e);
    return ok;
}

static void free_outs(deepinfer_request_output **o) {
    for (int i = 0; i < NMIX; i++) deepinfer_output_free(o[i]);
}

static void mixed_case(const eng_case *mc) {
    clean_env();
    static int32_t ids[NMIX * 320];
    deepinfer_prompt pr[NMIX];
    deepinfer_sampling_params sp[NMIX];
    eng_workload_avoid(NMIX, 1024, mc->avoid, ids, pr, sp);
    deepinfer_request_output *cpu[NMIX] = {0}, *alone[NMIX] = {0};
    /* the CPU engine first (informational: sampled tokens may differ where logits differ in rounding) */
    int ok = run_alone(mc, "cpu", pr, sp, cpu) && run_alone(mc, "cuda", pr, sp, alone);
    if (ok) {
        int same_tokens = 0;
        for (int i = 0; i < NMIX; i++) {
            int eq = cpu[i]->n_choices == alone[i]->n_choices;
            for (size_t j = 0; eq && j < cpu[i]->n_choices; j++)
                eq = cpu[i]->choices[j].n_tokens == alone[i]->choices[j].n_tokens &&
                     !memcmp(cpu[i]->choices[j].token_ids, alone[i]->choices[j].token_ids,
                             sizeof(int32_t) * cpu[i]->choices[j].n_tokens);
            same_tokens += eq;
        }
        fprintf(stderr, "    %s: %d mixed requests alone, cuda vs cpu engine: %d/%d with the same tokens (not required)\n",
                mc->name, NMIX, same_tokens, NMIX);
        long long pre_c16 = 0, pre_tight = 0;
        int same = together(mc, "together (chunk 64)", 64, NMIX, 0, 0, pr, sp, alone, &pre_c16);
        same &= together(mc, "together, chunk 16", 16, NMIX, 0, 0, pr, sp, alone, &pre_c16);
        same &= together(mc, "together, pool shrunk (16-row pages)", 64, mc->shrunk_seqs, 16, mc->shrunk_pages, pr, sp,
                         alone, &pre_tight);
        fprintf(stderr, "    %s preemptions with the shrunk pool (%lld pages): %lld\n", mc->name,
                (long long)mc->shrunk_pages, pre_tight);
        CHECK_MSG(same, "%s: requests together differ from each alone on CUDA", mc->name);
        CHECK_MSG(pre_tight > 0, "%s: the shrunk pool caused no preemption", mc->name);
    }
    free_outs(cpu);
    free_outs(alone);
}

TEST(gpu_engine_together_equal_alone_with_preemption_v4) { mixed_case(&V4); }
TEST(gpu_engine_together_equal_alone_with_preemption_v41) { mixed_case(&V41); }

/* ---- (d) recorded decode steps: graphs on equal graphs off ------------------------------------- */

/* All requests through one engine; NULL on failure. */
static deepinfer_request_output **graphs_run(const eng_case *mc, int graphs, int bi, int max_seqs, int n,
                                             const deepinfer_prompt *pr, const deepinfer_sampling_params *sp,
                                             deepinfer_engine_stats *st) {
    deepinfer_engine *e = open_mode(mc, "cuda", 64, max_seqs, 0, 0, bi, graphs);
    if (!e) return NULL;
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, pr, (size_t)n, sp, (size_t)n, &out)) {
        di_test_fail(__FILE__, __LINE__, "%s graphs %d: %s", mc->name, graphs, deepinfer_engine_last_error(e));
        out = NULL;
    }
    deepinfer_engine_get_stats(e, st);
    deepinfer_engine_close(e);
    return out;
}

/* One workload with graphs off then on: every output identical, graphs ran (only with graphs on). */
static void graphs_pair(const eng_case *mc, const char *what, int bi, int max_seqs, int n, const deepinfer_prompt *pr,
                       const deepinfer_sampling_params *sp) {
    deepinfer_engine_stats so, sg;
    deepinfer_request_output **off = graphs_run(mc, 0, bi, max_seqs, n, pr, sp, &so);
    deepinfer_request_output **on = off ? graphs_run(mc, 1, bi, max_seqs, n, pr, sp, &sg) : NULL;
    int same = on != NULL;
    for (int i = 0; on && i < n; i++) same &= eng_same_output(off[i], on[i], i);
    if (on)
        fprintf(stderr,
                "    %s %-28s batch_invariant %d: graphs on %s off; on: %lld steps, %lld recorded, %lld graphs; off: "
                "%lld steps, %lld recorded; busy %.2fs on, %.2fs off\n",
                mc->name, what, bi, same ? "==" : "DIFFERS FROM", (long long)sg.steps, (long long)sg.graph_steps,
                (long long)sg.graphs, (long long)so.steps, (long long)so.graph_steps, sg.busy_s, so.busy_s);
    if (off) deepinfer_outputs_free(off, (size_t)n);
    if (on) deepinfer_outputs_free(on, (size_t)n);
    if (!on) return;
    CHECK_MSG(same, "%s %s (batch_invariant %d): outputs with graphs differ from eager", mc->name, what, bi);
    CHECK_MSG(sg.graph_steps > 0 && sg.graphs > 0, "%s %s: no decode step ran as a graph", mc->name, what);
    CHECK_MSG(so.graph_steps == 0, "%s %s: graphs ran with cuda_graphs = 0", mc->name, what);
}

static void graphs_case(const eng_case *mc, int bi) {
    clean_env();
    /* greedy: prefixes of the golden prompt (steps cross compressor emissions at different rows) */
    di_json_doc *man = golden_manifest(di_test_data(mc->dir));
    CHECK(man);
    int np = 0;
    int32_t *prompt = man ? golden_ints(man->root, "prompt_token_ids", NULL, &np) : NULL;
    CHECK(prompt);
    if (prompt) {
        deepinfer_prompt p[NGREEDY];
        deepinfer_sampling_params gs[NGREEDY];
        for (int i = 0; i < NGREEDY; i++) {
            int len = glen[i] && glen[i] < np ? glen[i] : np;
            p[i] = (deepinfer_prompt){.token_ids = prompt, .n_token_ids = (size_t)len};
            deepinfer_sampling_params_init(&gs[i]);
            gs[i].temperature = 0;
            gs[i].max_tokens = GSTEPS + 1;
            gs[i].ignore_eos = 1;
            gs[i].logprobs = 3;
        }
        graphs_pair(mc, "greedy, 6 prompts", bi, 16, NGREEDY, p, gs);
    }
    /* 24 mixed requests (sampling, penalties, n > 1 forks, short prompts, stop ids): row counts
     * change as requests finish; a graph per count */
    static int32_t ids[NMIX * 320];
    deepinfer_prompt pr[NMIX];
    deepinfer_sampling_params sp[NMIX];
    eng_workload_avoid(NMIX, 1024, mc->avoid, ids, pr, sp);
    graphs_pair(mc, "24 mixed requests", bi, NMIX, NMIX, pr, sp);
    free(prompt);
    di_json_free(man);
}

TEST(gpu_engine_graphs_equal_eager_v4) { graphs_case(&V4, 1); }
TEST(gpu_engine_graphs_equal_eager_v41) { graphs_case(&V41, 1); }
TEST(gpu_engine_graphs_equal_eager_v4_fast) { graphs_case(&V4, 0); }
TEST(gpu_engine_graphs_equal_eager_v41_fast) { graphs_case(&V41, 0); }

/* ---- (e) the device sampler and the asynchronous queue (devq_cpu.c, cu_queue.c) --------------------------
 * The same requests sampled on the host (di_engine_options.host_sampler: logits come back, synchronous), on
 * the device with async scheduling off, on the device with async scheduling (the default: step N+1
 * queued while N runs, its tokens taken on the device), and streamed (deepinfer_step, every finished
 * request taken at once: take_output finishes an in-flight step that still writes into it): every
 * output identical. */

enum { SMODES = 4 };
static const char *const smode_name[SMODES] = {"host sampler", "device, sync", "device, async", "device, streamed"};

static deepinfer_request_output **sampler_run(const eng_case *mc, int mode, int bi, int n, const deepinfer_prompt *pr,
                                              const deepinfer_sampling_params *sp, deepinfer_engine_stats *st) {
    char hash[4096];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(mc->dir));
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data(mc->dir);
    c.engram_hash = mc->v41 ? hash : NULL;
    c.accelerator = "cuda";
    c.batch_invariant = bi;
    c.max_model_len = 1024;
    c.chunk_size = 64;
    c.max_num_seqs = NMIX;
    /* the host sampler's queue is synchronous: async scheduling 1 gives it the steps the asynchronous
     * queue runs (a choice runs one step past its end), which fast mode needs for the same bits */
    c.async_scheduling = mode == 1 ? 0 : 1;
    deepinfer_engine *e = NULL;
    di_engine_options opt = {.host_sampler = mode == 0};
    di_error oerr = {0};
    deepinfer_status o = di_engine_open_opts(&c, &opt, &e, &oerr);
    if (o) {
        di_test_fail(__FILE__, __LINE__, "%s engine (%s): %s", mc->name, smode_name[mode], oerr.msg);
        return NULL;
    }
    deepinfer_request_output **out = calloc((size_t)n, sizeof *out);
    int ok = out != NULL;
    if (ok && mode < 3) {
        deepinfer_request_output **g = NULL;
        ok = !deepinfer_generate(e, pr, (size_t)n, sp, (size_t)n, &g);
        if (ok) memcpy(out, g, sizeof *out * (size_t)n);
        free(g);
    } else if (ok) {
        uint64_t first = 0, id;
        for (int i = 0; i < n && ok; i++) {
            ok = !deepinfer_add_request(e, &pr[i], &sp[i], &id);
            if (i == 0) first = id;
        }
        int taken = 0;
        while (ok && deepinfer_has_unfinished(e)) {
            ok = !deepinfer_step(e, NULL);
            const deepinfer_request_output *const *u;
            size_t nu;
            deepinfer_read_outputs(e, &u, &nu);
            uint64_t fin[NMIX];
            int nf = 0;
            for (size_t i = 0; i < nu && nf < NMIX; i++)
                if (u[i]->finished) fin[nf++] = u[i]->request_id; /* copied: take_output changes the list */
            for (int i = 0; i < nf && ok; i++) {
                uint64_t k = fin[i] - first;
                ok = k < (uint64_t)n && !out[k] && !deepinfer_take_output(e, fin[i], &out[k]);
                taken += ok;
            }
        }
        for (int i = 0; i < n && ok; i++) /* finished but never reported as updated: a lost update */
            if (!out[i]) {
                di_test_fail(__FILE__, __LINE__, "%s streamed: request %d finished without being reported", mc->name, i);
                ok = 0;
            }
        (void)taken;
    }
    if (!ok) di_test_fail(__FILE__, __LINE__, "%s %s: %s", mc->name, smode_name[mode], deepinfer_engine_last_error(e));
    deepinfer_engine_get_stats(e, st);
    deepinfer_engine_close(e);
    if (!ok && out) {
        for (int i = 0; i < n; i++) deepinfer_output_free(out[i]);
        free(out);
        out = NULL;
    }
    return out;
}

static void sampler_workload(const eng_case *mc, const char *what, int bi, int n, const deepinfer_prompt *pr,
                             const deepinfer_sampling_params *sp, int expect_queued) {
    deepinfer_engine_stats st[SMODES];
    deepinfer_request_output **o[SMODES] = {0};
    for (int m = 0; m < SMODES; m++) o[m] = sampler_run(mc, m, bi, n, pr, sp, &st[m]);
    for (int m = 1; m < SMODES; m++) {
        if (!o[0] || !o[m]) continue;
        if (m == 1 && !bi) { /* other steps (no row past a choice's end): fast mode's bits may differ */
            CHECK_MSG(st[m].device_sampled_steps > 0, "%s %s: device, sync sampled no step on the device", mc->name,
                      what);
            continue;
        }
        int same = 1;
        for (int i = 0; i < n; i++) same &= eng_same_output(o[0][i], o[m][i], i);
        double idle = st[m].device_idle_s + st[m].device_busy_s > 0
                          ? 100.0 * st[m].device_idle_s / (st[m].device_idle_s + st[m].device_busy_s)
                          : 0;
        fprintf(stderr,
                "    %s %-34s bi %d: %-16s %s host sampler; %lld steps, %lld device-sampled, %lld queued, %lld graphs "
                "steps; device busy %.3fs idle %.3fs (%.1f%%)\n",
                mc->name, what, bi, smode_name[m], same ? "==" : "DIFFERS FROM", (long long)st[m].steps,
                (long long)st[m].device_sampled_steps, (long long)st[m].device_queued_steps,
                (long long)st[m].graph_steps, st[m].device_busy_s, st[m].device_idle_s, idle);
        CHECK_MSG(same, "%s %s (bi %d): %s differs from the host sampler", mc->name, what, bi, smode_name[m]);
        CHECK_MSG(st[m].device_sampled_steps > 0, "%s %s: %s sampled no step on the device", mc->name, what,
                  smode_name[m]);
        CHECK_MSG(st[m].device_busy_s > 0, "%s %s: no device time measured", mc->name, what);
    }
    if (o[0]) CHECK_MSG(st[0].device_sampled_steps == 0, "%s: the host sampler sampled on the device", mc->name);
    if (o[1]) CHECK_MSG(st[1].device_queued_steps == 0, "%s: async scheduling off queued steps", mc->name);
    if (o[2] && expect_queued)
        CHECK_MSG(st[2].device_queued_steps > 0, "%s %s: no step was queued behind a running one", mc->name, what);
    for (int m = 0; m < SMODES; m++)
        if (o[m]) deepinfer_outputs_free(o[m], (size_t)n);
}

static void sampler_case(const eng_case *mc, int bi) {
    clean_env();
    static int32_t ids[NMIX * 320];
    deepinfer_prompt pr[NMIX];
    deepinfer_sampling_params sp[NMIX], np[NMIX];
    eng_workload_avoid(NMIX, 1024, mc->avoid, ids, pr, sp);
    for (int i = 0; i < NMIX; i++) { /* logprobs keep a step on the host sampler */
        sp[i].logprobs = -1;
        np[i] = sp[i];
        np[i].repetition_penalty = 1.0f, np[i].presence_penalty = 0.0f, np[i].frequency_penalty = 0.0f;
    }
    /* penalties need the host's history of the previous step: nothing is queued; without them V4.1's
     * steps queue too (its Engram hash reads the device tokens, ops.h di_engram_hash_rows) */
    sampler_workload(mc, "24 mixed requests (penalties)", bi, NMIX, pr, sp, 0);
    sampler_workload(mc, "24 mixed requests, no penalties", bi, NMIX, pr, np, 1);
}

TEST(gpu_engine_device_sampler_v4) { sampler_case(&V4, 1); }
TEST(gpu_engine_device_sampler_v41) { sampler_case(&V41, 1); }
TEST(gpu_engine_device_sampler_v4_fast) { sampler_case(&V4, 0); }
TEST(gpu_engine_device_sampler_v41_fast) { sampler_case(&V41, 0); }

/* ---- the state pool on the device: snapshot/rollback and copy (test_engine_state.c's twin) -------- */

/* Logits of one row fed to `s` at its current position (host logits: the forward copies them back). */
static int feed(di_v4_model *m, di_seq_state *s, int32_t tok, float *logits) {
    int64_t pos = s->n_tokens;
    int row = 0;
    di_v4_batch b = {.n = 1, .tokens = &tok, .pos = &pos, .seq = &s, .n_logits = 1, .logit_rows = &row, .logits = logits};
    di_error err = {0};
    if (di_v4_forward(m, &b, &err) == DEEPINFER_OK) return 1;
    fprintf(stderr, "    forward: %s\n", err.msg);
    return 0;
}

static void snapshot_case(di_v4_model *m) {
    const di_model_config *cfg = di_v4_config(m);
    int V = (int)cfg->vocab_size;
    di_pool_geom g;
    CHECK(di_pool_geom_compute(cfg, 16, 1024, 8, &g, NULL) == DEEPINFER_OK);
    di_state_pool pool;
    CHECK(di_pool_init(&pool, cfg, &g, 3, 200, NULL) == DEEPINFER_OK);
    int sa = di_pool_slot_acquire(&pool), sb = di_pool_slot_acquire(&pool), sc = di_pool_slot_acquire(&pool);
    di_seq_state *A = di_pool_seq(&pool, sa), *B = di_pool_seq(&pool, sb), *C = di_pool_seq(&pool, sc);
    CHECK(!di_pool_grow(&pool, sa, 400) && !di_pool_grow(&pool, sb, 400) && !di_pool_grow(&pool, sc, 400));
    di_seq_reset(A, cfg), di_seq_reset(B, cfg);
    float *la = malloc(sizeof(float) * (size_t)V), *lb = malloc(sizeof(float) * (size_t)V);
    CHECK(la && lb);
    /* both sequences see 250 tokens (crossing window 32, ratio-4 groups and 16-row pages) */
    for (int t = 0; t < 250; t++) CHECK(feed(m, A, (t * 7 + 3) % V, la) && feed(m, B, (t * 7 + 3) % V, lb));
    int ok = 1;
    for (int round = 0; round < 6; round++) {
        int k = 1 + round; /* draft k tokens on A, roll back, feed the real token on both */
        di_seq_snapshot_take(A, cfg, k, di_pool_snapshot_room(&pool, sa));
        for (int j = 0; j < k; j++) CHECK(feed(m, A, (round * 31 + j * 17 + 5) % V, la));
        CHECK(di_seq_snapshot_restore(A, cfg, di_pool_snapshot_room(&pool, sa), NULL) == DEEPINFER_OK);
        int32_t real = (round * 13 + 1) % V;
        CHECK(feed(m, A, real, la) && feed(m, B, real, lb));
        ok &= !memcmp(la, lb, sizeof(float) * (size_t)V);
    }
    CHECK_MSG(ok, "a rolled-back draft changed the logits (device snapshot)");
    for (int round = 0; round < 12; round++) {
        /* partial rollback: A runs k drafts and keeps the first j, B runs only those j */
        int k = 1 + round % 6, j = (round * 5) % (k + 1);
        int32_t d[6];
        for (int i = 0; i < k; i++) d[i] = (round * 29 + i * 11 + 3) % V;
        int64_t P = A->n_tokens;
        di_seq_snapshot_take(A, cfg, k, di_pool_snapshot_room(&pool, sa));
        for (int i = 0; i < k; i++) CHECK(feed(m, A, d[i], la));
        CHECK(di_seq_snapshot_restore_to(A, cfg, di_pool_snapshot_room(&pool, sa), P + j, NULL) == DEEPINFER_OK);
        for (int i = 0; i < j; i++) CHECK(feed(m, B, d[i], lb));
        int32_t real = (round * 17 + 9) % V;
        CHECK(feed(m, A, real, la) && feed(m, B, real, lb));
        ok &= !memcmp(la, lb, sizeof(float) * (size_t)V);
    }
    CHECK_MSG(ok, "a partial rollback (restore_to) changed the logits (device snapshot)");
    CHECK(di_seq_copy(C, B, cfg, NULL) == DEEPINFER_OK);
    for (int t = 0; t < 40; t++) {
        CHECK(feed(m, B, (t * 5 + 2) % V, lb) && feed(m, C, (t * 5 + 2) % V, la));
        ok &= !memcmp(la, lb, sizeof(float) * (size_t)V);
    }
    CHECK_MSG(ok, "a copied device state diverged from its source");
    fprintf(stderr, "    cuda state pool: 6 drafts of 1..6 tokens rolled back bitwise invisibly, 12 partly kept like "
                    "the kept tokens alone; a copied slot tracks its source for 40 tokens\n");
    free(la), free(lb);
    di_pool_free(&pool);
}

TEST(gpu_engine_state_pool_snapshot_and_copy_v4) {
    clean_env();
    di_error err = {0};
    CHECK_MSG(di_backend_use(DI_BACKEND_CUDA, &err) == DEEPINFER_OK, "%s", err.msg);
    di_v4_model *m = NULL;
    di_v4_options o = {.max_draft = 8}; /* the compressor buffers protect up to 8 discarded rows */
    CHECK_MSG(di_v4_load(di_test_data(V4.dir), &o, &m, &err) == DEEPINFER_OK, "%s", err.msg);
    snapshot_case(m);
    di_v4_free(m);
    di_backend_use(DI_BACKEND_CPU, NULL);
}
