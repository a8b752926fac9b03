/* gtest_mode_switch.c — backend.h di_backend_set_batch_invariant_live, what `bench --dummy --modes`
 * rests on: one loaded model switched between the modes runs exactly the kernels of a model loaded in
 * that mode. On the golden V4 model: a prompt prefilled at once and 4 one-row decode steps (the fast
 * mode's decode kernels: attention, q_post, mHC, k_gemm_dec), logits of every row, in four runs —
 * loaded batch-invariant (A), switched live to fast (B), switched back (C), and a second model loaded
 * in fast mode (D). C must equal A and B must equal D, bitwise; B must differ from A (the switch took
 * effect: the fast decode kernels have other bits, docs/determinism.md §7). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/golden_util.h"
#include "ops/backend.h"

#define PREFILL 100
#define DECODE 4

/* prefill then DECODE one-row steps on a new sequence of m; logits [(PREFILL + DECODE)][V] */
static int run_rows(di_v4_model *m, const int32_t *prompt, float *out, di_error *err) {
    di_seq_state *s = NULL;
    deepinfer_status st = di_v4_seq_new(m, &s, err);
    const int V = (int)di_v4_config(m)->vocab_size;
    if (!st) st = golden_run(m, s, prompt, PREFILL, 0, out, NULL, err);
    for (int i = 0; i < DECODE && !st; i++)
        st = golden_run(m, s, prompt + PREFILL + i, 1, 0, out + (size_t)(PREFILL + i) * V, NULL, err);
    di_seq_destroy(s);
    return st == DEEPINFER_OK;
}

static di_v4_model *open_v4(di_error *err) {
    di_v4_options opt = {0};
    di_v4_model *m = NULL;
    return di_v4_load(di_test_data("golden/v4-tiny-a"), &opt, &m, err) ? NULL : m;
}

TEST(gpu_mode_switch_live_equals_loaded_mode) {
    di_error err = {0};
    di_json_doc *man = golden_manifest(di_test_data("golden/v4-tiny-a"));
    int N = 0;
    int32_t *prompt = man ? golden_ints(man->root, "prompt_token_ids", NULL, &N) : NULL;
    CHECK(prompt && N >= PREFILL + DECODE);
    if (!prompt || N < PREFILL + DECODE || di_backend_use(DI_BACKEND_CUDA, &err)) {
        CHECK_MSG(0, "setup: %s", err.msg);
        free(prompt), di_json_free(man);
        return;
    }
    di_backend_set_batch_invariant(1);
    di_v4_model *m = open_v4(&err);
    CHECK_MSG(m, "load: %s", err.msg);
    const int V = m ? (int)di_v4_config(m)->vocab_size : 0;
    const size_t n = (size_t)(PREFILL + DECODE) * (size_t)V;
    float *L[4] = {malloc(n * 4), malloc(n * 4), malloc(n * 4), malloc(n * 4)};
    if (m && run_rows(m, prompt, L[0], &err)) {
        CHECK(di_backend_set_batch_invariant_live(0) >= 1);
        CHECK_MSG(run_rows(m, prompt, L[1], &err), "fast run: %s", err.msg);
        CHECK(di_backend_set_batch_invariant_live(1) >= 1);
        CHECK_MSG(run_rows(m, prompt, L[2], &err), "back to invariant: %s", err.msg);
    } else {
        CHECK_MSG(0, "invariant run: %s", err.msg);
    }
    di_v4_free(m);
    di_backend_set_batch_invariant(0);
    di_v4_model *m2 = open_v4(&err);
    CHECK_MSG(m2 && run_rows(m2, prompt, L[3], &err), "fast-loaded run: %s", err.msg);
    di_v4_free(m2);
    di_backend_set_batch_invariant(-1);
    if (!di_test_failed()) {
        size_t d_ab = 0, d_ac = 0, d_bd = 0;
        for (size_t i = 0; i < n; i++) {
            d_ab += memcmp(&L[0][i], &L[1][i], 4) != 0;
            d_ac += memcmp(&L[0][i], &L[2][i], 4) != 0;
            d_bd += memcmp(&L[1][i], &L[3][i], 4) != 0;
        }
        fprintf(stderr, "  logits differing of %zu: invariant vs live fast %zu, invariant vs back %zu, live fast vs "
                "loaded fast %zu\n", n, d_ab, d_ac, d_bd);
        CHECK_MSG(d_ac == 0, "switching back to batch-invariant changed %zu logits", d_ac);
        CHECK_MSG(d_bd == 0, "the live fast mode differs from a model loaded in fast mode in %zu logits", d_bd);
        CHECK_MSG(d_ab > 0, "the live switch to fast mode changed no logit: it did not take effect");
    }
    for (int i = 0; i < 4; i++) free(L[i]);
    free(prompt);
    di_json_free(man);
    di_backend_use(DI_BACKEND_CPU, NULL);
}
