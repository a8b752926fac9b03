/*
 * The embedded demo model (models/deepinfer-demo-v41, a small trained V4.1)
 * against our PyTorch V4.1 implementation (tools/reference/, run on the
 * exported quantised weights with exact numerics on CUDA; vectors in
 * tests/data/demo, manifest.json):
 *   - prefill logits of all 64 prompt positions and 16 teacher-forced
 *     decode rows within the tolerance below;
 *   - the 16-step greedy trajectory identical;
 *   - the DSpark drafts (ids and confidences) of every step with the
 *     reference's drafts as Markov inputs (free-running ids reported).
 *
 * Tolerance (the golden README's rule): REF = the reference's own CPU run
 * (torch 1.13) against its CUDA run on these vectors: prefill mean |diff|
 * 0.0639, teacher-forced decode 0.0701, argmax agreement 1.0 on both (the
 * engine against the CPU run: 0.037 / 0.047, rows 0-17 bit-identical).
 * Bounds: mean |diff| <= 2 x 0.07, argmax agreement >= 1.0 - 0.03 over the
 * 80 prompt + decode rows, no NaN/Inf.
 * Greedy trajectory: identical until the reference itself hesitates: a step
 * may differ only where the CUDA run's top-2 margin is below that row's
 * CPU-vs-CUDA noise (max |diff| of a decode row 0.2-0.55; we take 0.2). The
 * one such step of this prompt is decode step 10: CUDA margin 0.163, the
 * reference's CPU run keeps the token by 0.035, the engine flips it by 0.196.
 */
#include "golden/golden_util.h"
#include "model/dsv41.h"

#define DEMO_MODEL "../../models/deepinfer-demo-v41"
#define DEMO_DATA "demo"
#define REF_MEAN 0.07   /* reference CPU vs CUDA, decode rows (prefill 0.064) */
#define REF_ARGMAX 1.0   /* reference CPU vs CUDA argmax agreement */
#define NEAR_TIE 0.2     /* reference margin below its own CPU-vs-CUDA row noise */

typedef struct demo {
    di_v41_model *m;
    di_json_doc *man;
    int32_t *prompt;
    int N, V;
} demo;

static deepinfer_status fwd41(void *m, const di_v4_batch *b, di_error *err) { return di_v41_forward(m, b, err); }

static int demo_open(demo *d) {
    memset(d, 0, sizeof *d);
    di_error err = {0};
    if (di_v41_load(di_test_data(DEMO_MODEL), NULL, &d->m, &err)) {
        di_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return 0;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.json", di_test_data(DEMO_DATA));
    char *buf = NULL;
    size_t len = 0;
    if (di_read_file(path, 0, &buf, &len, &err) || di_json_parse(buf, len, NULL, &d->man, &err)) {
        free(buf);
        return 0;
    }
    free(buf);
    d->prompt = golden_ints(d->man->root, "prompt_token_ids", NULL, &d->N);
    d->V = (int)di_v41_config(d->m)->vocab_size;
    return d->prompt && d->N == 64;
}

static void demo_close(demo *d) {
    di_v41_free(d->m);
    di_json_free(d->man);
    free(d->prompt);
}

static deepinfer_status demo_run(demo *d, di_seq_state *s, const int32_t *tok, int n, int chunk, float *out,
                                 uint16_t *tgt, di_error *err) {
    return golden_run_fn(fwd41, d->m, di_v41_config(d->m), s, tok, n, chunk, out, NULL, tgt, err);
}

static int within(const char *what, golden_stats st) {
    fprintf(stderr, "    %s (%d rows): mean %.5f (bound %.3f) max %.4f argmax %.4f (bound %.2f) non-finite %d\n", what,
            st.rows, st.mean_abs, 2 * REF_MEAN, st.max_abs, st.argmax_agree, REF_ARGMAX - 0.03, st.nonfinite);
    return st.mean_abs <= 2 * REF_MEAN && st.argmax_agree >= REF_ARGMAX - 0.03 && st.nonfinite == 0;
}

TEST(demo_v41_logits_match_pytorch) {
    demo d;
    CHECK(demo_open(&d));
    di_error err = {0};
    size_t n = 0;
    float *ref_pf = golden_read_f32(di_test_data(DEMO_DATA "/prefill_logits_all.bin"), &n);
    CHECK(ref_pf && n == (size_t)d.N * d.V);
    int nd = 0;
    int32_t *in = golden_ints(d.man->root, "decode", "input_tokens", &nd);
    float *ref_dec = golden_read_f32(di_test_data(DEMO_DATA "/decode_logits.bin"), &n);
    CHECK(in && ref_dec && n == (size_t)nd * d.V);
    di_seq_state *s = NULL;
    CHECK(di_v41_seq_new(d.m, &s, &err) == DEEPINFER_OK);
    float *pf = malloc(sizeof(float) * (size_t)d.N * d.V), *dec = malloc(sizeof(float) * (size_t)nd * d.V);
    CHECK(demo_run(&d, s, d.prompt, d.N, 0, pf, NULL, &err) == DEEPINFER_OK);
    CHECK(demo_run(&d, s, in, nd, 1, dec, NULL, &err) == DEEPINFER_OK);
    golden_stats sp = golden_compare(pf, ref_pf, 0, d.N, d.V), sd = golden_compare(dec, ref_dec, 0, nd, d.V);
    within("demo prefill", sp);
    within("demo decode (teacher-forced)", sd);
    golden_stats all = {.rows = sp.rows + sd.rows, .nonfinite = sp.nonfinite + sd.nonfinite,
                        .max_abs = fmax(sp.max_abs, sd.max_abs),
                        .mean_abs = (sp.mean_abs * sp.rows + sd.mean_abs * sd.rows) / (sp.rows + sd.rows),
                        .argmax_agree = (sp.argmax_agree * sp.rows + sd.argmax_agree * sd.rows) / (sp.rows + sd.rows)};
    CHECK(within("demo prompt + decode rows", all));
    free(ref_pf), free(ref_dec), free(in), free(pf), free(dec);
    di_seq_destroy(s);
    demo_close(&d);
}

TEST(demo_v41_greedy_trajectory) {
    demo d;
    CHECK(demo_open(&d));
    di_error err = {0};
    int no = 0;
    int32_t *want = golden_ints(d.man->root, "decode", "output_tokens", &no);
    int first = (int)golden_num(d.man->root, "decode", "first_token_from_prefill", NULL);
    di_seq_state *s = NULL;
    CHECK(want && di_v41_seq_new(d.m, &s, &err) == DEEPINFER_OK);
    float *pf = malloc(sizeof(float) * (size_t)d.N * d.V), *row = malloc(sizeof(float) * (size_t)d.V);
    CHECK(demo_run(&d, s, d.prompt, d.N, 0, pf, NULL, &err) == DEEPINFER_OK);
    size_t n = 0;
    float *ref_dec = golden_read_f32(di_test_data(DEMO_DATA "/decode_logits.bin"), &n);
    CHECK(ref_dec && n == (size_t)no * d.V);
    int32_t tok = golden_argmax(pf + (size_t)(d.N - 1) * d.V, d.V);
    int same = tok == first ? 0 : -1;
    double margin = INFINITY;
    for (int i = 0; i < no && same == i; i++) {
        CHECK(demo_run(&d, s, &tok, 1, 1, row, NULL, &err) == DEEPINFER_OK);
        tok = golden_argmax(row, d.V);
        if (tok == want[i]) {
            same++;
            continue;
        }
        const float *r = ref_dec + (size_t)i * d.V;
        float second = -INFINITY;
        for (int v = 0; v < d.V; v++)
            if (v != want[i] && r[v] > second) second = r[v];
        margin = r[want[i]] - second;
    }
    fprintf(stderr, "    demo greedy: first token %d (reference %d), %d/%d decode tokens identical%s (reference margin %.3f)\n",
            golden_argmax(pf + (size_t)(d.N - 1) * d.V, d.V), first, same, no,
            same == no ? "" : ", then a step the reference hesitates on", same == no ? 0.0 : margin);
    CHECK(same >= 0);
    CHECK(same == no || margin < NEAR_TIE);
    free(ref_dec);
    free(want), free(pf), free(row);
    di_seq_destroy(s);
    demo_close(&d);
}

TEST(demo_v41_dspark_drafts) {
    /* manifest convention: step i drafts after the target processed p = prompt_len - 1 + i, anchor = its token */
    demo d;
    CHECK(demo_open(&d));
    di_error err = {0};
    const di_model_config *c = di_v41_config(d.m);
    int B = (int)c->dspark_block_size;
    size_t td = (size_t)c->n_dspark_target_layer_ids * c->hidden_size;
    const di_json *ds = di_json_get(d.man->root, "dspark");
    int na = 0;
    int32_t *anchors = golden_ints(ds, "anchors", NULL, &na);
    CHECK(anchors && na <= 32 && B <= 8);
    int32_t ref_ids[32 * 8], ids[32 * 8], free_ids[32 * 8];
    float ref_conf[32 * 8], conf[32 * 8];
    for (int i = 0; i < na; i++)
        for (int j = 0; j < B; j++) {
            int64_t v = 0;
            double cf = 0;
            di_json_as_i64(di_json_at(di_json_at(di_json_get(ds, "drafted_ids"), (size_t)i), (size_t)j), &v);
            di_json_as_f64(di_json_at(di_json_at(di_json_get(ds, "confidence"), (size_t)i), (size_t)j), &cf);
            ref_ids[i * B + j] = (int32_t)v;
            ref_conf[i * B + j] = (float)cf;
        }
    di_seq_state *s = NULL;
    CHECK(di_v41_seq_new(d.m, &s, &err) == DEEPINFER_OK);
    uint16_t *hid = malloc(2 * td * (size_t)d.N);
    CHECK(demo_run(&d, s, d.prompt, d.N, 0, NULL, hid, &err) == DEEPINFER_OK);
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)d.N);
    di_seq_state **seqs = malloc(sizeof(*seqs) * (size_t)d.N);
    for (int i = 0; i < d.N; i++) pos[i] = i, seqs[i] = s;
    di_v4_batch fb = {.n = d.N, .pos = pos, .seq = seqs};
    CHECK_MSG(di_v41_dspark_feed(d.m, &fb, hid, &err) == DEEPINFER_OK, "%s", err.msg);
    for (int i = 0; i < na; i++) {
        int64_t p = d.N - 1 + i;
        if (i > 0) { /* the target processes the previous anchor at p, then its input is fed */
            CHECK(demo_run(&d, s, anchors + i - 1, 1, 1, NULL, hid, &err) == DEEPINFER_OK);
            di_v4_batch one = {.n = 1, .pos = &p, .seq = &s};
            CHECK(di_v41_dspark_feed(d.m, &one, hid, &err) == DEEPINFER_OK);
        }
        di_v41_draft tf = {.n = 1, .seq = &s, .pos = &p, .anchor = anchors + i, .force = ref_ids + i * B,
                           .ids = ids + i * B, .confidence = conf + i * B};
        CHECK_MSG(di_v41_dspark_draft(d.m, &tf, &err) == DEEPINFER_OK, "%s", err.msg);
        di_v41_draft fr = {.n = 1, .seq = &s, .pos = &p, .anchor = anchors + i, .ids = free_ids + i * B};
        CHECK(di_v41_dspark_draft(d.m, &fr, &err) == DEEPINFER_OK);
    }
    int agree_tf = 0, agree_free = 0, total = na * B;
    double cmax = 0, csum = 0;
    for (int i = 0; i < total; i++) {
        agree_tf += ids[i] == ref_ids[i];
        agree_free += free_ids[i] == ref_ids[i];
        cmax = fmax(cmax, fabs((double)conf[i] - ref_conf[i]));
        csum += fabs((double)conf[i] - ref_conf[i]);
    }
    fprintf(stderr,
            "    demo DSpark (%d steps x %d): ids %d/%d identical teacher-forced, %d/%d free-running; confidence "
            "mean |diff| %.4f max %.4f (bound %.3f)\n",
            na, B, agree_tf, total, agree_free, total, csum / total, cmax, 2 * REF_MEAN);
    /* per-draft argmax agreement is measured with the reference's drafts as Markov inputs; free
     * running, one flipped draft changes the inputs of the rest of its block (reported only) */
    CHECK((double)agree_tf / total >= REF_ARGMAX - 0.03);
    CHECK(csum / total <= 2 * REF_MEAN);
    free(anchors), free(hid), free(pos), free(seqs);
    di_seq_destroy(s);
    demo_close(&d);
}
