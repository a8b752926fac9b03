/* gtest_graph.c — recorded decode steps (engine/greedy_loop.h, ops/backend.h): the golden
 * prompt (one sequence, or several with prompts cut to different lengths so
 * that their compressor emissions fall on different steps) is prefilled,
 * then STEPS greedy steps run three ways: on the CPU, eagerly on the GPU
 * (the first version) and as one CUDA graph replayed per step (step plan,
 * device argmax feeding the next step). The graph's logits must be
 * bit-identical to the eager GPU path's, every trajectory identical to the
 * CPU's, and one graph captured per shape. A failure names the first
 * (step, sequence) that differs. The graph's argmax is fused into the lm_head where the
 * product fuses it (docs/kernels/gemv-lm-head.md), so graph = eager also covers the fused argmax. */
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
    int32_t first[5];  /* each sequence's first decode input: its prefill's argmax */
    double pmargin[5]; /* that prefill row's top-1 minus top-2 logit */
} run_out;

/* Prompt lengths: the decode steps cross ratio-4 emissions and, at
 * positions 127 / 255, ratio-128 emissions, on different steps per
 * sequence. Cut to the golden prompt's length. */
static const int plen[5] = {250, 120, 283, 280, 61};

/* Backend k in use and the golden model of dir loaded on it (V4.1 with its manifest's Engram hash);
 * 0 when the backend cannot start (the test has failed), else 1 with *st the load's status. */
static int model_open(const char *dir, int v41, di_backend_kind k, void **m, deepinfer_status *st, di_error *err) {
    if (di_backend_use(k, err)) {
        di_test_fail(__FILE__, __LINE__, "backend %s: %s", di_backend_name(k), err->msg);
        return 0;
    }
    char hash[4096];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(dir));
    di_v4_options opt = {.engram_hash = v41 ? hash : NULL};
    *m = NULL;
    *st = v41 ? di_v41_load(di_test_data(dir), &opt, (di_v41_model **)m, err)
              : di_v4_load(di_test_data(dir), &opt, (di_v4_model **)m, err);
    return 1;
}

/* Prefill nseq sequences (sequence j: the first plen[j] prompt tokens) in one step, then STEPS greedy steps. */
static int run(const char *dir, int v41, di_backend_kind k, int graph, const int32_t *prompt, int N, int nseq,
               run_out *o) {
    di_error err = {0};
    void *m = NULL;
    deepinfer_status st;
    if (!model_open(dir, v41, k, &m, &st, &err)) return 0;
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
    for (int j = 0; j < nseq && !st; j++) {
        first[j] = o->first[j] = golden_argmax(lbuf + (size_t)j * V, V);
        o->pmargin[j] = golden_margin(lbuf + (size_t)j * V, V);
    }
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

/* The decode of run() teacher-forced on backend k: the same prefill, then STEPS steps whose inputs are
 * ref's (ref->first, then ref->ids), one row per sequence, through the model's forward. Logits
 * [STEPS][nseq][V] into out. Fast mode's accuracy is checked on these rows: after a near tie the
 * free-running rows of the two runs have different inputs. */
static int forced_run(const char *dir, int v41, di_backend_kind k, const int32_t *prompt, int N, int nseq,
                      const run_out *ref, float *out) {
    di_error err = {0};
    void *m = NULL;
    deepinfer_status st;
    if (!model_open(dir, v41, k, &m, &st, &err)) return 0;
    int V = ref->V;
    di_seq_state *seq[5] = {0}, *rowseq[5 * 300];
    int32_t tok[5 * 300];
    int64_t pos[5 * 300];
    int len[5], lrows[5], n = 0;
    for (int j = 0; j < nseq && !st; j++) {
        len[j] = plen[j] < N ? plen[j] : N;
        st = v41 ? di_v41_seq_new(m, &seq[j], &err) : di_v4_seq_new(m, &seq[j], &err);
        for (int t = 0; t < len[j] && !st; t++, n++) tok[n] = prompt[t], pos[n] = t, rowseq[n] = seq[j];
        lrows[j] = j;
    }
    if (!st) {
        di_v4_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = rowseq};
        st = v41 ? di_v41_forward(m, &b, &err) : di_v4_forward(m, &b, &err);
    }
    for (int s = 0; s < STEPS && !st; s++) {
        for (int j = 0; j < nseq; j++) {
            tok[j] = s ? ref->ids[(size_t)(s - 1) * nseq + j] : ref->first[j];
            pos[j] = len[j] + s;
            rowseq[j] = seq[j];
        }
        di_v4_batch b = {.n = nseq, .tokens = tok, .pos = pos, .seq = rowseq, .n_logits = nseq, .logit_rows = lrows,
                         .logits = out + (size_t)s * nseq * V};
        st = v41 ? di_v41_forward(m, &b, &err) : di_v4_forward(m, &b, &err);
    }
    for (int j = 0; j < nseq; j++) di_seq_destroy(seq[j]);
    if (m && v41) di_v41_free(m);
    else if (m) di_v4_free(m);
    di_backend_use(DI_BACKEND_CPU, NULL);
    if (st) di_test_fail(__FILE__, __LINE__, "%s teacher-forced on %s: %s", dir, di_backend_name(k), err.msg);
    return !st;
}

/* The GPU's accuracy in either mode (golden_util.h's rule): the graph's free-running trajectory equal to the CPU's
 * up to the first step whose CPU margin is below `spread` (the reference's own CUDA-vs-CPU max |diff|),
 * and the teacher-forced GPU rows within 2 x ref_mean of the CPU's, with the CPU's argmax wherever its
 * margin is >= spread. Fails the test on a violation. */
static void gpu_accuracy(const run_out *graph, const run_out *cpu, const float *forced, int nseq, double ref_mean,
                          double spread) {
    int V = cpu->V, free_bad = 0, tf_bad = 0, ties = 0;
    for (int j = 0; j < nseq; j++) {
        CHECK_MSG(graph->first[j] == cpu->first[j] || cpu->pmargin[j] < spread,
                  "sequence %d: first token %d, CPU %d (CPU margin %.3f)", j, graph->first[j], cpu->first[j],
                  cpu->pmargin[j]);
        if (graph->first[j] != cpu->first[j]) { /* taken at the CPU's near tie: the decode follows another input */
            fprintf(stderr, "    sequence %d: first token %d, CPU %d at a CPU near tie (margin %.3f): not followed\n", j,
                    graph->first[j], cpu->first[j], cpu->pmargin[j]);
            continue;
        }
        int k = 0;
        while (k < STEPS && graph->ids[(size_t)k * nseq + j] == cpu->ids[(size_t)k * nseq + j]) k++;
        double mg = k < STEPS ? golden_margin(cpu->logits + ((size_t)k * nseq + j) * V, V) : INFINITY;
        fprintf(stderr, "    sequence %d: %d/%d leading steps equal to the CPU's%s", j, k, STEPS,
                k < STEPS ? "" : "\n");
        if (k < STEPS) fprintf(stderr, "; step %d: CPU margin %.3f (spread %.3f)\n", k, mg, spread);
        if (k < STEPS && mg >= spread) free_bad++;
    }
    golden_stats st = golden_compare(forced, cpu->logits, 0, STEPS * nseq, V);
    for (int r = 0; r < STEPS * nseq; r++) {
        if (golden_argmax(forced + (size_t)r * V, V) == cpu->ids[r]) continue;
        if (golden_margin(cpu->logits + (size_t)r * V, V) < spread) ties++;
        else tf_bad++;
    }
    fprintf(stderr, "    teacher-forced GPU vs CPU (%d rows): mean|d| %.3e (bound %.3e) max|d| %.3e; argmax differs "
                    "at %d near ties, %d firm rows; nonfinite %d\n",
            st.rows, st.mean_abs, 2 * ref_mean, st.max_abs, ties, tf_bad, st.nonfinite);
    CHECK_MSG(!free_bad, "%d sequences leave the CPU's trajectory where the CPU is firm", free_bad);
    CHECK_MSG(st.mean_abs <= 2 * ref_mean && !st.nonfinite, "teacher-forced logits mean|d| %.3e > %.3e",
              st.mean_abs, 2 * ref_mean);
    CHECK_MSG(!tf_bad, "teacher-forced argmax differs from the CPU's on %d firm rows", tf_bad);
}

/* Fast mode against the golden: sequences whose prompt is the whole golden prompt follow the golden's
 * greedy trajectory up to the first step whose golden margin is below spread. */
static void golden_trajectory_check(const di_json *man, int v41, const run_out *graph, const run_out *cpu, int N,
                                    int nseq, double spread, const float *gdec, int ngd) {
    int no = 0;
    const char *key = v41 ? "decode_fixed" : "decode";
    int32_t *want = golden_ints(man, key, "output_tokens", &no);
    int first = (int)golden_num(man, key, "first_token_from_prefill", NULL);
    int V = graph->V, steps = STEPS < no ? STEPS : no;
    CHECK(want && ngd >= steps);
    for (int j = 0; j < nseq; j++) {
        if (plen[j] < N) continue; /* a cut prompt: the golden has no trajectory for it */
        /* a first token taken at a near tie (the CPU's margin, as in gpu_accuracy) is not followed */
        if (graph->first[j] != first && cpu->first[j] == first && cpu->pmargin[j] < spread) continue;
        CHECK_MSG(graph->first[j] == first, "sequence %d: first token %d, golden %d", j, graph->first[j], first);
        int k = 0;
        while (k < steps && graph->ids[(size_t)k * nseq + j] == want[k]) k++;
        double mg = k < steps ? golden_margin(gdec + (size_t)k * V, V) : INFINITY;
        fprintf(stderr, "    sequence %d vs golden: %d/%d leading steps equal%s", j, k, steps, k < steps ? "" : "\n");
        if (k < steps) fprintf(stderr, "; step %d: golden margin %.3f (spread %.3f)\n", k, mg, spread);
        CHECK_MSG(k == steps || mg < spread, "sequence %d leaves the golden trajectory at step %d (margin %.3f >= %.3f)",
                  j, k, mg, spread);
    }
    free(want);
}

/* Both modes (fast: the batch_invariant = 0 kernels): eager vs graph bitwise (the same kernels
 * and launch shapes; the graph's concurrent lines, docs/cuda-backend.md §9, must not change a
 * bit). Neither mode gives the CPU's bits (docs/determinism.md §7), so the CPU trajectory is
 * checked by gpu_accuracy (free-running up to the CPU's first near tie, teacher-forced rows
 * within the golden tolerance) and, for the sequences with the whole golden prompt, the golden's
 * trajectory by the same rule. */
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
    run_out cpu = {0}, eager = {0}, graph = {0};
    fprintf(stderr, "  %s: %d sequences, prompt %d, %d greedy steps%s\n", dir, nseq, N, STEPS,
            fast ? ", fast mode (batch_invariant 0)" : "");
    if (fast) di_backend_set_batch_invariant(0);
    if (prompt && run(dir, v41, DI_BACKEND_CPU, 0, prompt, N, nseq, &cpu) &&
        run(dir, v41, DI_BACKEND_CUDA, 0, prompt, N, nseq, &eager) &&
        run(dir, v41, DI_BACKEND_CUDA, 1, prompt, N, nseq, &graph)) {
        CHECK_MSG(same_bits("graph vs eager GPU", &graph, &eager, nseq), "%s: graph logits differ from eager", dir);
        CHECK_MSG(same_ids("graph vs eager GPU", &graph, &eager, nseq), "%s: graph ids differ from eager", dir);
        golden_stats s = golden_compare(graph.logits, cpu.logits, 0, STEPS * nseq, graph.V);
        fprintf(stderr, "    graph vs CPU logits: mean|d| %.3e max|d| %.3e nonfinite %d; graphs captured %d\n",
                s.mean_abs, s.max_abs, s.nonfinite, graph.ngraphs);
        CHECK(!s.nonfinite);
        CHECK_EQ_INT(graph.ngraphs, 1);
        {
            double ref_mean = golden_num(man->root, "stability", "prefill_all_cuda_vs_cpu", "mean_abs_diff");
            double spread = golden_num(man->root, "stability", v41 ? "tbt_fixed_cuda_vs_cpu" : "decode_logits_cuda_vs_cpu",
                                       "max_abs_diff");
            CHECK(ref_mean > 0 && spread > 0);
            float *forced = malloc(sizeof(float) * (size_t)STEPS * nseq * cpu.V);
            if (forced_run(dir, v41, DI_BACKEND_CUDA, prompt, N, nseq, &cpu, forced))
                gpu_accuracy(&graph, &cpu, forced, nseq, ref_mean, spread);
            free(forced);
            char gp[4096];
            snprintf(gp, sizeof gp, "%s/expected/%s", di_test_data(dir), v41 ? "decode_logits_fixed.bin" : "decode_logits.bin");
            size_t ng = 0;
            float *gdec = golden_read_f32(gp, &ng);
            CHECK(gdec);
            golden_trajectory_check(man->root, v41, &graph, &cpu, N, nseq, spread, gdec, (int)(ng / (size_t)graph.V));
            free(gdec);
            if (di_test_failed()) goto done;
        }
    }
done:
    if (fast) di_backend_set_batch_invariant(-1);
    free(cpu.logits), free(cpu.ids), free(eager.logits), free(eager.ids), free(graph.logits), free(graph.ids);
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
