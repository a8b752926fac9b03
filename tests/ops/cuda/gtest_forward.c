/* gtest_forward.c — the whole forward on the CUDA backend (score: prefill of
 * the golden prompt, then 16 greedy decode steps) against the CPU backend in
 * the same process and against the reference's golden logits, by the golden
 * README's bounds: mean |diff| <= 2 REF.mean and argmax agreement >=
 * REF.argmax - 0.03 (REF = manifest stability.prefill_all_cuda_vs_cpu), no
 * NaN/Inf, and identical greedy trajectories. Device memory is poisoned
 * (0xFF) at allocation by the backend allocator, so reads of unwritten
 * memory show as NaN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/golden_util.h"
#include "score/score.h"
#include "ops/backend.h"

#define STEPS 16

typedef struct fwd_case {
    const char *dir;
    int v41;
} fwd_case;

/* Score the prompt + STEPS greedy steps on backend k (the model is loaded,
 * run and freed under it). Rows: every prompt position, then the steps. */
static int score_on(const fwd_case *fc, di_backend_kind k, const int32_t *prompt, int n, di_score_result *res) {
    di_error err = {0};
    if (di_backend_use(k, &err)) {
        di_test_fail(__FILE__, __LINE__, "backend %s: %s", di_backend_name(k), err.msg);
        return 0;
    }
    char hash[4096];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(fc->dir));
    di_v4_options opt = {.engram_hash = fc->v41 ? hash : NULL};
    di_score_req req = {.prompt = prompt, .n_prompt = n, .all_positions = 1, .steps = STEPS};
    deepinfer_status st;
    if (fc->v41) {
        di_v41_model *m = NULL;
        st = di_v41_load(di_test_data(fc->dir), &opt, &m, &err);
        if (!st) st = di_v41_score(m, &req, res, &err);
        di_v41_free(m);
    } else {
        di_v4_model *m = NULL;
        st = di_v4_load(di_test_data(fc->dir), &opt, &m, &err);
        if (!st) st = di_v4_score(m, &req, res, &err);
        di_v4_free(m);
    }
    di_backend_use(DI_BACKEND_CPU, NULL);
    if (st) di_test_fail(__FILE__, __LINE__, "%s on %s: %s", fc->dir, di_backend_name(k), err.msg);
    return !st;
}

static int within(const char *what, golden_stats s, double ref_mean, double ref_argmax) {
    fprintf(stderr, "    %-28s rows %4d  mean|d| %.3e (bound %.3e)  max|d| %.3e  argmax %.4f (bound %.4f)  nonfinite %d\n",
            what, s.rows, s.mean_abs, 2 * ref_mean, s.max_abs, s.argmax_agree, ref_argmax - 0.03, s.nonfinite);
    return s.mean_abs <= 2 * ref_mean && s.argmax_agree >= ref_argmax - 0.03 && !s.nonfinite;
}

/* First row (and its largest difference) where the two runs differ by more than tol. */
static void first_divergence(const float *a, const float *b, int rows, int V, int n_prompt) {
    for (int r = 0; r < rows; r++) {
        double m = golden_row_max(a, b, r, V);
        if (m > 1e-3) {
            fprintf(stderr, "    first row with max|d| > 1e-3: %d (%s %d), max|d| %.3e\n", r,
                    r < n_prompt ? "prompt position" : "decode step", r < n_prompt ? r : r - n_prompt, m);
            return;
        }
    }
    fprintf(stderr, "    every row within 1e-3\n");
}

static void run_case(const fwd_case *fc) {
    di_json_doc *man = golden_manifest(di_test_data(fc->dir));
    CHECK(man != NULL);
    int N = 0;
    int32_t *prompt = golden_ints(man->root, "prompt_token_ids", NULL, &N);
    double ref_mean = golden_num(man->root, "stability", "prefill_all_cuda_vs_cpu", "mean_abs_diff");
    double ref_argmax = golden_num(man->root, "stability", "prefill_all_cuda_vs_cpu", "argmax_agreement");
    char path[4096];
    snprintf(path, sizeof path, "%s/expected/prefill_logits_all.bin", di_test_data(fc->dir));
    size_t nref = 0;
    float *ref = golden_read_f32(path, &nref);
    di_score_result cpu = {0}, gpu = {0};
    int ok = prompt && ref && ref_mean > 0 && score_on(fc, DI_BACKEND_CPU, prompt, N, &cpu) &&
             score_on(fc, DI_BACKEND_CUDA, prompt, N, &gpu);
    if (ok) {
        int rows = cpu.n_rows, V = (int)(nref / (size_t)N);
        CHECK_EQ_INT(gpu.n_rows, rows);
        CHECK_EQ_INT(rows, N + STEPS);
        fprintf(stderr, "  %s: %d prompt rows + %d greedy steps, vocab %d\n", fc->dir, N, STEPS, V);
        int good = within("gpu vs cpu (all rows)", golden_compare(gpu.logits, cpu.logits, 0, rows, V), ref_mean, ref_argmax);
        good &= within("gpu vs cpu (prompt)", golden_compare(gpu.logits, cpu.logits, 0, N, V), ref_mean, ref_argmax);
        good &= within("gpu vs golden (prompt)", golden_compare(gpu.logits, ref, 0, N, V), ref_mean, ref_argmax);
        within("cpu vs golden (prompt)", golden_compare(cpu.logits, ref, 0, N, V), ref_mean, ref_argmax);
        first_divergence(gpu.logits, cpu.logits, rows, V, N);
        int same = 0, first_bad = -1;
        for (int i = N; i < rows; i++) {
            if (gpu.argmax[i] == cpu.argmax[i]) same++;
            else if (first_bad < 0) first_bad = i - N;
        }
        fprintf(stderr, "    greedy trajectory: %d/%d steps equal", same, STEPS);
        if (first_bad >= 0) fprintf(stderr, " (first difference at step %d: gpu %d, cpu %d)", first_bad,
                                    gpu.argmax[N + first_bad], cpu.argmax[N + first_bad]);
        fprintf(stderr, "\n");
        CHECK_MSG(good, "%s: GPU logits outside the golden bounds", fc->dir);
        CHECK_MSG(same == STEPS, "%s: greedy trajectories differ", fc->dir);
    }
    di_score_result_free(&cpu);
    di_score_result_free(&gpu);
    free(prompt);
    free(ref);
    di_json_free(man);
}

TEST(gpu_forward_v4) {
    fwd_case fc = {"golden/v4-tiny-a", 0};
    run_case(&fc);
}

TEST(gpu_forward_v41) {
    fwd_case fc = {"golden/v41-tiny-a", 1};
    run_case(&fc);
}
