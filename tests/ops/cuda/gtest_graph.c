/* gtest_graph.c — recorded decode steps (engine/greedy_loop.h, ops/backend.h): the golden
 * prompt (one sequence, or several with prompts cut to different lengths so
 * that their compressor emissions fall on different steps) is prefilled,
 * then STEPS greedy steps run three ways: on the CPU, eagerly on the GPU
 * (the first version) and as one CUDA graph replayed per step (step plan,
 * device argmax feeding the next step). The graph's logits must be
 * bit-identical to the eager GPU path's, every trajectory identical to the
 * CPU's, and one graph captured per shape. A failure names the first
 * (step, sequence) that differs. Fast mode also runs the graph with the greedy argmax as its
 * own launch (dic_gemm_argmax_enable(0)): the same logits and ids as with the argmax fused
 * into the lm_head. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/greedy_loop.h"
#include "golden/golden_util.h"
#include "model/dsv41.h"
#include "ops/backend.h"
#include "ops/cuda/dic_gemm_int.h"

#define STEPS 20

typedef struct run_out {
    float *logits; /* [STEPS][nseq][V] */
    int32_t *ids;  /* [STEPS][nseq] */
    int V, ngraphs;
} run_out;

/* Prompt lengths: the decode steps cross ratio-4 emissions and, at
 * positions 127 / 255, ratio-128 emissions, on different steps per
 * sequence. Cut to the golden prompt's length. */
static const int plen[5] = {250, 120, 283, 280, 61};

/* Prefill nseq sequences (sequence j: the first plen[j] prompt tokens) in one step, then STEPS greedy steps. */
static int run(const char *dir, int v41, di_backend_kind k, int graph, const int32_t *prompt, int N, int nseq,
               run_out *o) {
    di_error err = {0};
    if (di_backend_use(k, &err)) {
        di_test_fail(__FILE__, __LINE__, "backend %s: %s", di_backend_name(k), err.msg);
        return 0;
    }
    char hash[4096];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(dir));
    di_v4_options opt = {.engram_hash = v41 ? hash : NULL};
    void *m = NULL;
    deepinfer_status st = v41 ? di_v41_load(di_test_data(dir), &opt, (di_v41_model **)&m, &err)
                              : di_v4_load(di_test_data(dir), &opt, (di_v4_model **)&m, &err);
    const di_model_config *c = st ? NULL : v41 ? di_v41_config(m) : di_v4_config(m);
    int V = c ? (int)c->vocab_size : 0;
    di_seq_state *seq[5] = {0};
    di_seq_state *rowseq[5 * 300];
    int32_t tok[5 * 300], first[5];
    int64_t pos[5 * 300];
    int lrows[5], n = 0;
    for (int j = 0; j < nseq && !st; j++) {
        int len = plen[j] < N ? plen[j] : N; /* <= 283 < 300 */
        st = v41 ? di_v41_seq_new(m, &seq[j], &err) : di_v4_seq_new(m, &seq[j], &err);
        for (int t = 0; t < len && !st; t++, n++) {
            tok[n] = prompt[t];
            pos[n] = t;
            rowseq[n] = seq[j];
        }
        lrows[j] = n - 1;
    }
    float *lbuf = st ? NULL : malloc(sizeof(float) * (size_t)nseq * V);
    if (!st) {
        di_v4_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = rowseq, .n_logits = nseq, .logit_rows = lrows, .logits = lbuf};
        st = v41 ? di_v41_forward(m, &b, &err) : di_v4_forward(m, &b, &err);
    }
    for (int j = 0; j < nseq && !st; j++) first[j] = golden_argmax(lbuf + (size_t)j * V, V);
    o->V = V;
    o->logits = st ? NULL : malloc(sizeof(float) * (size_t)STEPS * nseq * V);
    o->ids = st ? NULL : malloc(sizeof(int32_t) * (size_t)STEPS * nseq);
    if (!st) {
        di_model *dm = v41 ? di_model_borrow(NULL, m) : di_model_borrow(m, NULL);
        di_greedy_loop L = {.model = dm, .nseq = nseq, .seq = seq, .first = first, .steps = STEPS, .graph = graph,
                            .logits = o->logits, .ids = o->ids};
        st = dm ? di_greedy_loop_run(&L, &err) : di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        o->ngraphs = L.ngraphs;
        di_model_free(dm); /* the view only */
    }
    for (int j = 0; j < nseq; j++) di_seq_destroy(seq[j]);
    if (v41) di_v41_free(m);
    else di_v4_free(m);
    free(lbuf);
    di_backend_use(DI_BACKEND_CPU, NULL);
    if (st) di_test_fail(__FILE__, __LINE__, "%s on %s (graph %d, %d seqs): %s", dir, di_backend_name(k), graph, nseq, err.msg);
    return !st;
}

/* First (step, sequence) whose logits differ bitwise; 1 if none. */
static int same_bits(const char *what, const run_out *a, const run_out *b, int nseq) {
    size_t row = (size_t)a->V * sizeof(float);
    for (int s = 0; s < STEPS; s++)
        for (int j = 0; j < nseq; j++) {
            size_t at = ((size_t)s * nseq + j) * a->V;
            if (memcmp(a->logits + at, b->logits + at, row)) {
                fprintf(stderr, "    %s: logits differ first at step %d, sequence %d (max|d| %.3e)\n", what, s, j,
                        golden_row_max(a->logits + (size_t)s * nseq * a->V, b->logits + (size_t)s * nseq * a->V, j, a->V));
                return 0;
            }
        }
    fprintf(stderr, "    %s: bit-identical (%d steps x %d sequences)\n", what, STEPS, nseq);
    return 1;
}

static int same_ids(const char *what, const run_out *a, const run_out *b, int nseq) {
    for (int i = 0; i < STEPS * nseq; i++)
        if (a->ids[i] != b->ids[i]) {
            fprintf(stderr, "    %s: trajectories differ first at step %d, sequence %d (%d vs %d)\n", what, i / nseq,
                    i % nseq, a->ids[i], b->ids[i]);
            return 0;
        }
    fprintf(stderr, "    %s: identical trajectories\n", what);
    return 1;
}

/* fast: the batch_invariant = 0 kernels (eager vs graph still bitwise: the same kernels
 * and launch shapes; the graph's concurrent lines, docs/cuda-backend.md §9, must not
 * change a bit); the CPU trajectory is then only compared for the first steps' logits. */
static void run_case_mode(const char *dir, int v41, int nseq, int fast) {
    di_json_doc *man = golden_manifest(di_test_data(dir));
    CHECK(man != NULL);
    int N = 0;
    int32_t *prompt = man ? golden_ints(man->root, "prompt_token_ids", NULL, &N) : NULL;
    CHECK(prompt != NULL && N >= 61 && nseq <= 5);
    if (!prompt || N < 61 || nseq > 5) {
        free(prompt);
        di_json_free(man);
        return;
    }
    run_out cpu = {0}, eager = {0}, graph = {0}, sep = {0};
    fprintf(stderr, "  %s: %d sequences, prompt %d, %d greedy steps%s\n", dir, nseq, N, STEPS,
            fast ? ", fast mode (batch_invariant 0)" : "");
    if (fast) di_backend_set_batch_invariant(0);
    if (prompt && run(dir, v41, DI_BACKEND_CPU, 0, prompt, N, nseq, &cpu) &&
        run(dir, v41, DI_BACKEND_CUDA, 0, prompt, N, nseq, &eager) &&
        run(dir, v41, DI_BACKEND_CUDA, 1, prompt, N, nseq, &graph)) {
        CHECK_MSG(same_bits("graph vs eager GPU", &graph, &eager, nseq), "%s: graph logits differ from eager", dir);
        CHECK_MSG(same_ids("graph vs eager GPU", &graph, &eager, nseq), "%s: graph ids differ from eager", dir);
        if (!fast)
            CHECK_MSG(same_ids("graph vs CPU", &graph, &cpu, nseq), "%s: graph trajectory differs from the CPU's", dir);
        golden_stats s = golden_compare(graph.logits, cpu.logits, 0, STEPS * nseq, graph.V);
        fprintf(stderr, "    graph vs CPU logits: mean|d| %.3e max|d| %.3e nonfinite %d; graphs captured %d\n",
                s.mean_abs, s.max_abs, s.nonfinite, graph.ngraphs);
        CHECK(!s.nonfinite);
        CHECK_EQ_INT(graph.ngraphs, 1);
        if (fast) { /* the greedy argmax fused into the lm_head (dic_gemm_argmax) vs its own launch (the
                     * default fuses at M >= DIC_AM_MINM_DEF: below it the other run is the fused one) */
            dic_gemm_argmax_enable(nseq < DIC_AM_MINM_DEF ? 1 : 0);
            if (run(dir, v41, DI_BACKEND_CUDA, 1, prompt, N, nseq, &sep)) {
                CHECK_MSG(same_bits("graph, argmax fused vs separate", &graph, &sep, nseq),
                          "%s: logits differ with the separate argmax", dir);
                CHECK_MSG(same_ids("graph, argmax fused vs separate", &graph, &sep, nseq),
                          "%s: ids differ with the separate argmax", dir);
            }
            dic_gemm_argmax_enable(-1);
        }
    }
    if (fast) di_backend_set_batch_invariant(-1);
    free(cpu.logits), free(cpu.ids), free(eager.logits), free(eager.ids), free(graph.logits), free(graph.ids);
    free(sep.logits), free(sep.ids);
    free(prompt);
    di_json_free(man);
}

static void run_case(const char *dir, int v41, int nseq) { run_case_mode(dir, v41, nseq, 0); }

TEST(gpu_graph_v4_b1) { run_case("golden/v4-tiny-a", 0, 1); }
TEST(gpu_graph_v4_b5) { run_case("golden/v4-tiny-a", 0, 5); }
TEST(gpu_graph_v41_b1) { run_case("golden/v41-tiny-a", 1, 1); }
TEST(gpu_graph_v41_b5) { run_case("golden/v41-tiny-a", 1, 5); }
TEST(gpu_graph_v4_b1_fast) { run_case_mode("golden/v4-tiny-a", 0, 1, 1); }
TEST(gpu_graph_v41_b5_fast) { run_case_mode("golden/v41-tiny-a", 1, 5, 1); }
/* one sequence: decode rows M = 1, so the fused transition and head (M <= 4) run in the V4.1 graph */
TEST(gpu_graph_v41_b1_fast) { run_case_mode("golden/v41-tiny-a", 1, 1, 1); }
