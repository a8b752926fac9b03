/*
 * The embedded demo model against the PyTorch implementation's exact-order
 * mode (tools/reference/dsv41_exact.py, `RT.order`; vectors from
 * tools/reference/exact_check.py in tests/data/demo/exact*.{json,bin}).
 * Exact mode evaluates the model in the summation orders ops.h documents
 * (GEMM pair order and K-blocks, attention lane tree, di_expf, double
 * sums of squares, ...), so the engine must agree BIT FOR BIT:
 *   - all 64 prefill logit rows (one prefill from position 0) and the 16
 *     teacher-forced decode rows (one token per step) equal, every float;
 *   - the 16-step greedy trajectory identical.
 * (test_demo_v41.c keeps the tolerance test against the default-mode CUDA
 * vectors, whose PyTorch summation orders differ from the engine's.)
 */
#include "golden/golden_util.h"
#include "model/dsv41.h"

#define DEMO_MODEL "../../models/deepinfer-demo-v41"
#define DEMO_DATA "demo"

typedef struct exact_demo {
    di_v41_model *m;
    di_json_doc *man, *ex;
    int32_t *prompt;
    int N, V;
} exact_demo;

static deepinfer_status fwd41(void *m, const di_v4_batch *b, di_error *err) { return di_v41_forward(m, b, err); }

static di_json_doc *read_json(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", di_test_data(DEMO_DATA), name);
    char *buf = NULL;
    size_t len = 0;
    di_error err = {0};
    di_json_doc *d = NULL;
    if (di_read_file(path, 0, &buf, &len, &err) || di_json_parse(buf, len, NULL, &d, &err)) d = NULL;
    free(buf);
    return d;
}

static int ex_open(exact_demo *d) {
    memset(d, 0, sizeof *d);
    di_error err = {0};
    if (di_v41_load(di_test_data(DEMO_MODEL), NULL, &d->m, &err)) {
        di_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return 0;
    }
    d->man = read_json("manifest.json");
    d->ex = read_json("exact.json");
    if (!d->man || !d->ex) return 0;
    d->prompt = golden_ints(d->man->root, "prompt_token_ids", NULL, &d->N);
    d->V = (int)di_v41_config(d->m)->vocab_size;
    return d->prompt && d->N == 64;
}

static void ex_close(exact_demo *d) {
    di_v41_free(d->m);
    di_json_free(d->man);
    di_json_free(d->ex);
    free(d->prompt);
}

static deepinfer_status ex_run(exact_demo *d, di_seq_state *s, const int32_t *tok, int n, int chunk, float *out,
                               di_error *err) {
    return golden_run_fn(fwd41, d->m, di_v41_config(d->m), s, tok, n, chunk, out, NULL, NULL, err);
}

/* Rows whose every float has the reference's bit pattern; reports the first differing row. */
static int equal_rows(const char *what, const float *got, const float *want, int rows, int V) {
    int eq = 0, first = -1;
    double maxd = 0;
    for (int r = 0; r < rows; r++) {
        const float *a = got + (size_t)r * V, *b = want + (size_t)r * V;
        if (!memcmp(a, b, sizeof(float) * (size_t)V)) {
            eq++;
            continue;
        }
        if (first < 0) first = r;
        for (int v = 0; v < V; v++) maxd = fmax(maxd, fabs((double)a[v] - b[v]));
    }
    fprintf(stderr, "    %s: %d/%d rows bit-identical", what, eq, rows);
    if (first >= 0) fprintf(stderr, " (first differing row %d, max |diff| %.3g)", first, maxd);
    fprintf(stderr, "\n");
    return eq;
}

TEST(demo_exact_logits_bitwise) {
    exact_demo d;
    CHECK(ex_open(&d));
    di_error err = {0};
    size_t n = 0;
    float *ref_pf = golden_read_f32(di_test_data(DEMO_DATA "/exact_prefill_logits.bin"), &n);
    CHECK(ref_pf && n == (size_t)d.N * d.V);
    int nd = 0;
    int32_t *in = golden_ints(d.ex->root, "decode", "input_tokens", &nd);
    float *ref_dec = golden_read_f32(di_test_data(DEMO_DATA "/exact_decode_logits.bin"), &n);
    CHECK(in && ref_dec && nd == 16 && n == (size_t)nd * d.V);
    di_seq_state *s = NULL;
    CHECK(di_v41_seq_new(d.m, &s, &err) == DEEPINFER_OK);
    float *pf = malloc(sizeof(float) * (size_t)d.N * d.V), *dec = malloc(sizeof(float) * (size_t)nd * d.V);
    CHECK(ex_run(&d, s, d.prompt, d.N, 0, pf, &err) == DEEPINFER_OK);
    CHECK(ex_run(&d, s, in, nd, 1, dec, &err) == DEEPINFER_OK);
    int ep = equal_rows("exact prefill", pf, ref_pf, d.N, d.V);
    int ed = equal_rows("exact decode (teacher-forced)", dec, ref_dec, nd, d.V);
    CHECK(ep == d.N);
    CHECK(ed == nd);
    free(ref_pf), free(ref_dec), free(in), free(pf), free(dec);
    di_seq_destroy(s);
    ex_close(&d);
}

TEST(demo_exact_greedy_trajectory) {
    exact_demo d;
    CHECK(ex_open(&d));
    di_error err = {0};
    int no = 0;
    int32_t *want = golden_ints(d.ex->root, "decode", "output_tokens", &no);
    int first = (int)golden_num(d.ex->root, "decode", "first_token_from_prefill", NULL);
    di_seq_state *s = NULL;
    CHECK(want && no == 16 && di_v41_seq_new(d.m, &s, &err) == DEEPINFER_OK);
    float *pf = malloc(sizeof(float) * (size_t)d.N * d.V), *row = malloc(sizeof(float) * (size_t)d.V);
    CHECK(ex_run(&d, s, d.prompt, d.N, 0, pf, &err) == DEEPINFER_OK);
    int32_t tok = golden_argmax(pf + (size_t)(d.N - 1) * d.V, d.V);
    int same = tok == first ? 0 : -1;
    for (int i = 0; i < no && same == i; i++) {
        CHECK(ex_run(&d, s, &tok, 1, 1, row, &err) == DEEPINFER_OK);
        tok = golden_argmax(row, d.V);
        if (tok == want[i]) same++;
    }
    fprintf(stderr, "    exact greedy: first token %d (exact mode %d), %d/%d decode tokens identical\n",
            golden_argmax(pf + (size_t)(d.N - 1) * d.V, d.V), first, same < 0 ? 0 : same, no);
    CHECK(same == no);
    free(want), free(pf), free(row);
    di_seq_destroy(s);
    ex_close(&d);
}
