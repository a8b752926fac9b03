/* test_greedy_loop.c — the benchmarks' greedy decode loop (engine/greedy_loop.h) on the CPU:
 * eager steps over the model API give exactly the logits and ids of the same steps written out
 * by hand (forward, argmax, next token), for two sequences of different lengths decoded
 * together; recorded steps are refused without a device backend (ops/backend.h). */
#include "engine/greedy_loop.h"
#include "golden/golden_util.h"
#include "ops/backend.h"

#define GDIR "golden/v4-tiny-a"
#define STEPS 6
#define NSEQ 2

static const int plen[NSEQ] = {40, 23};

/* Fresh sequences prefilled with the first plen[j] prompt tokens in one forward; first[j] = the
 * argmax of its last row. */
static int prefill(di_v4_model *m, const int32_t *prompt, di_seq_state **seq, int32_t *first) {
    di_error err = {0};
    int V = (int)di_v4_config(m)->vocab_size, n = 0, last[NSEQ];
    int32_t tok[64];
    int64_t pos[64];
    di_seq_state *rowseq[64];
    for (int j = 0; j < NSEQ; j++) {
        if (di_v4_seq_new(m, &seq[j], &err)) return 0;
        for (int t = 0; t < plen[j]; t++, n++) tok[n] = prompt[t], pos[n] = t, rowseq[n] = seq[j];
        last[j] = n - 1;
    }
    float *lg = malloc(sizeof(float) * (size_t)NSEQ * V);
    di_v4_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = rowseq, .n_logits = NSEQ, .logit_rows = last, .logits = lg};
    int ok = lg && !di_v4_forward(m, &b, &err);
    for (int j = 0; j < NSEQ && ok; j++) first[j] = golden_argmax(lg + (size_t)j * V, V);
    free(lg);
    return ok;
}

TEST(greedy_loop_eager_equals_manual_steps) {
    di_error err = {0};
    di_v4_model *m = NULL;
    CHECK(di_v4_load(di_test_data(GDIR), NULL, &m, &err) == DEEPINFER_OK);
    di_json_doc *man = m ? golden_manifest(di_test_data(GDIR)) : NULL;
    int N = 0;
    int32_t *prompt = man ? golden_ints(man->root, "prompt_token_ids", NULL, &N) : NULL;
    CHECK(prompt != NULL && N >= 40);
    if (!prompt || N < 40) goto out;
    int V = (int)di_v4_config(m)->vocab_size;
    di_seq_state *sa[NSEQ] = {0}, *sb[NSEQ] = {0};
    int32_t first[NSEQ], first_b[NSEQ];
    float *la = malloc(sizeof(float) * (size_t)STEPS * NSEQ * V), *lb = malloc(sizeof(float) * (size_t)NSEQ * V);
    int32_t ida[STEPS * NSEQ];
    CHECK(la && lb && prefill(m, prompt, sa, first) && prefill(m, prompt, sb, first_b));
    di_model *dm = di_model_borrow(m, NULL);
    CHECK(dm != NULL);
    /* the loop, eager */
    di_greedy_loop L = {.model = dm, .nseq = NSEQ, .seq = sa, .first = first, .steps = STEPS, .logits = la, .ids = ida};
    CHECK(dm && di_greedy_loop_run(&L, &err) == DEEPINFER_OK);
    CHECK_EQ_INT(L.ngraphs, 0);
    /* the same steps by hand */
    int32_t tok[NSEQ] = {first_b[0], first_b[1]};
    int rows[NSEQ] = {0, 1};
    for (int s = 0; s < STEPS && la && lb; s++) {
        int64_t pos[NSEQ] = {sb[0]->n_tokens, sb[1]->n_tokens};
        di_v4_batch b = {.n = NSEQ, .tokens = tok, .pos = pos, .seq = sb, .n_logits = NSEQ, .logit_rows = rows, .logits = lb};
        CHECK(di_v4_forward(m, &b, &err) == DEEPINFER_OK);
        CHECK_MSG(!memcmp(lb, la + (size_t)s * NSEQ * V, sizeof(float) * (size_t)NSEQ * V), "step %d: logits differ", s);
        for (int j = 0; j < NSEQ; j++) {
            tok[j] = golden_argmax(lb + (size_t)j * V, V);
            CHECK_EQ_INT(ida[s * NSEQ + j], tok[j]);
        }
    }
    CHECK_EQ_INT((int)sa[0]->n_tokens, plen[0] + STEPS);
    CHECK_EQ_INT((int)sa[1]->n_tokens, plen[1] + STEPS);
    /* recorded steps need a device backend */
    di_greedy_loop G = {.model = dm, .nseq = NSEQ, .seq = sa, .first = first, .steps = 1, .graph = 1};
    CHECK(dm && di_greedy_loop_run(&G, &err) == DEEPINFER_ERR_UNSUPPORTED);
    CHECK(di_backend_plan_enable(di_model_exec(dm), 64, 0, &err) == DEEPINFER_ERR_UNSUPPORTED);
    di_model_free(dm); /* the view only: m stays loaded */
    CHECK(di_v4_config(m) != NULL);
    for (int j = 0; j < NSEQ; j++) di_seq_destroy(sa[j]), di_seq_destroy(sb[j]);
    free(la), free(lb);
out:
    free(prompt);
    di_json_free(man);
    di_v4_free(m);
}
