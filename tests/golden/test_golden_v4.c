/* Golden parity of DeepSeek-V4-Flash against the official reference
 * (tests/data/golden/v4-tiny-a, README pass criteria). */
#include "golden_util.h"

#define GDIR "golden/v4-tiny-a"

typedef struct gctx {
    di_v4_model *m;
    di_json_doc *man;
    int32_t *prompt;
    int N, V;
    float *ref_all;
} gctx;

static int gopen(gctx *g) {
    memset(g, 0, sizeof *g);
    di_error err = {0};
    if (di_v4_load(di_test_data(GDIR), NULL, &g->m, &err)) {
        di_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return 0;
    }
    g->man = golden_manifest(di_test_data(GDIR));
    if (!g->man) return 0;
    g->prompt = golden_ints(g->man->root, "prompt_token_ids", NULL, &g->N);
    g->V = (int)di_v4_config(g->m)->vocab_size;
    size_t n = 0;
    g->ref_all = golden_read_f32(di_test_data(GDIR "/expected/prefill_logits_all.bin"), &n);
    return g->prompt && g->ref_all && n == (size_t)g->N * g->V;
}

static void gclose(gctx *g) {
    di_v4_free(g->m);
    di_json_free(g->man);
    free(g->prompt);
    free(g->ref_all);
}

TEST(v4_golden_prefill_explore) {
    gctx g;
    CHECK(gopen(&g));
    di_seq_state *s = NULL;
    di_error err = {0};
    CHECK(di_v4_seq_new(g.m, &s, &err) == DEEPINFER_OK);
    float *out = malloc(sizeof(float) * (size_t)g.N * g.V);
    CHECK_MSG(golden_run(g.m, s, g.prompt, g.N, 0, out, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
    golden_stats st = golden_compare(out, g.ref_all, 0, g.N, g.V);
    fprintf(stderr, "prefill: max %.4g mean %.4g argmax %.4f nonfinite %d\n", st.max_abs, st.mean_abs, st.argmax_agree,
            st.nonfinite);
    for (int r = 0; r < g.N; r++) fprintf(stderr, "%d:%.2g%s", r, golden_row_max(out, g.ref_all, r, g.V), r % 10 == 9 ? "\n" : " ");
    free(out);
    di_seq_destroy(s);
    gclose(&g);
}

TEST(v4_golden_chunks_explore) {
    gctx g;
    CHECK(gopen(&g));
    di_error err = {0};
    float *base = NULL;
    int chunks[4] = {0, 1, 7, 64};
    for (int ci = 0; ci < 4; ci++) {
        di_seq_state *s = NULL;
        CHECK(di_v4_seq_new(g.m, &s, &err) == DEEPINFER_OK);
        float *out = malloc(sizeof(float) * (size_t)g.N * g.V);
        CHECK_MSG(golden_run(g.m, s, g.prompt, g.N, chunks[ci], out, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
        golden_stats st = golden_compare(out, g.ref_all, 0, g.N, g.V);
        fprintf(stderr, "chunk %d: max %.4g mean %.4g argmax %.4f; bitwise==whole: %d\n", chunks[ci], st.max_abs,
                st.mean_abs, st.argmax_agree, base ? !memcmp(base, out, sizeof(float) * (size_t)g.N * g.V) : -1);
        if (!base) base = out;
        else free(out);
        di_seq_destroy(s);
    }
    free(base);
    gclose(&g);
}

TEST(v4_golden_decode_explore) {
    gctx g;
    CHECK(gopen(&g));
    di_error err = {0};
    int nd = 0, no = 0;
    int32_t *in = golden_ints(g.man->root, "decode", "input_tokens", &nd);
    int32_t *outtok = golden_ints(g.man->root, "decode", "output_tokens", &no);
    size_t n = 0;
    float *ref = golden_read_f32(di_test_data(GDIR "/expected/decode_logits.bin"), &n);
    float *tbt = golden_read_f32(di_test_data(GDIR "/expected/tbt_logits.bin"), &n);
    di_seq_state *s = NULL;
    CHECK(di_v4_seq_new(g.m, &s, &err) == DEEPINFER_OK);
    float *pl = malloc(sizeof(float) * (size_t)g.N * g.V);
    CHECK(golden_run(g.m, s, g.prompt, g.N, 0, pl, NULL, &err) == DEEPINFER_OK);
    float *dl = malloc(sizeof(float) * (size_t)nd * g.V);
    CHECK(golden_run(g.m, s, in, nd, 1, dl, NULL, &err) == DEEPINFER_OK);
    golden_stats st = golden_compare(dl, ref, 0, nd, g.V);
    fprintf(stderr, "decode TF: max %.4g mean %.4g argmax %.4f\n", st.max_abs, st.mean_abs, st.argmax_agree);
    int same = 0;
    for (int i = 0; i < nd; i++) same += golden_argmax(dl + (size_t)i * g.V, g.V) == outtok[i];
    fprintf(stderr, "decode argmax == ref tokens: %d/%d\n", same, nd);
    st = golden_compare(pl, tbt, 0, g.N, g.V);
    fprintf(stderr, "our prefill vs ref tbt: max %.4g mean %.4g argmax %.4f\n", st.max_abs, st.mean_abs, st.argmax_agree);
    free(in), free(outtok), free(ref), free(tbt), free(pl), free(dl);
    di_seq_destroy(s);
    gclose(&g);
}

TEST(v4_golden_mtp_explore) {
    gctx g;
    CHECK(gopen(&g));
    di_error err = {0};
    const di_model_config *c = di_v4_config(g.m);
    size_t hcd = (size_t)(c->hc_mult * c->hidden_size);
    int nd = 0, no = 0;
    int32_t *in = golden_ints(g.man->root, "decode", "input_tokens", &nd);
    int32_t *outtok = golden_ints(g.man->root, "decode", "output_tokens", &no);
    size_t n = 0;
    float *ref = golden_read_f32(di_test_data(GDIR "/expected/mtp_logits.bin"), &n);
    di_seq_state *s = NULL;
    CHECK(di_v4_seq_new(g.m, &s, &err) == DEEPINFER_OK);
    uint16_t *hid = malloc(2 * hcd * (size_t)g.N);
    CHECK(golden_run(g.m, s, g.prompt, g.N, 0, NULL, hid, &err) == DEEPINFER_OK);
    float *ml = malloc(sizeof(float) * (size_t)(nd + 1) * g.V);
    int32_t *next = malloc(sizeof(int32_t) * (size_t)g.N);
    for (int i = 0; i < g.N - 1; i++) next[i] = g.prompt[i + 1];
    next[g.N - 1] = in[0];
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)g.N);
    di_seq_state **seqs = malloc(sizeof(*seqs) * (size_t)g.N);
    for (int i = 0; i < g.N; i++) pos[i] = i, seqs[i] = s;
    int last = g.N - 1;
    di_v4_batch b = {.n = g.N, .tokens = next, .pos = pos, .seq = seqs, .n_logits = 1, .logit_rows = &last, .logits = ml};
    CHECK_MSG(di_v4_mtp_forward(g.m, &b, hid, &err) == DEEPINFER_OK, "%s", err.msg);
    for (int i = 0; i < nd; i++) {
        CHECK(golden_run(g.m, s, in + i, 1, 1, NULL, hid, &err) == DEEPINFER_OK);
        int64_t p = g.N + i;
        int zero = 0;
        di_v4_batch bm = {.n = 1, .tokens = outtok + i, .pos = &p, .seq = seqs, .n_logits = 1, .logit_rows = &zero,
                          .logits = ml + (size_t)(i + 1) * g.V};
        CHECK_MSG(di_v4_mtp_forward(g.m, &bm, hid, &err) == DEEPINFER_OK, "%s", err.msg);
    }
    for (int r = 0; r <= nd; r++) {
        int a = golden_argmax(ml + (size_t)r * g.V, g.V), b2 = golden_argmax(ref + (size_t)r * g.V, g.V);
        if (a != b2)
            fprintf(stderr, "mtp row %d: ours %d ref %d; ref logits %.4f vs %.4f; ours %.4f vs %.4f\n", r, a, b2,
                    ref[(size_t)r * g.V + b2], ref[(size_t)r * g.V + a], ml[(size_t)r * g.V + b2], ml[(size_t)r * g.V + a]);
    }
    golden_stats st = golden_compare(ml, ref, 0, nd + 1, g.V);
    fprintf(stderr, "mtp: max %.4g mean %.4g argmax %.4f row0 max %.4g\n", st.max_abs, st.mean_abs, st.argmax_agree,
            golden_row_max(ml, ref, 0, g.V));
    free(in), free(outtok), free(ref), free(hid), free(ml), free(next), free(pos), free(seqs);
    di_seq_destroy(s);
    gclose(&g);
}

typedef struct sel_rec {
    int n[2][400];
    int rows[2][400][16];
} sel_rec;

static void rec_sel(void *ctx, int layer, int64_t pos, const int *rows, int n) {
    sel_rec *r = ctx;
    int li = layer == 2 ? 0 : 1;
    if (pos >= 400) return;
    r->n[li][pos] = n;
    for (int i = 0; i < n && i < 16; i++) r->rows[li][pos][i] = rows[i];
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

TEST(v4_golden_indexer_explore) {
    gctx g;
    CHECK(gopen(&g));
    di_error err = {0};
    static sel_rec rec;
    di_v4_set_index_observer(g.m, rec_sel, &rec);
    di_seq_state *s = NULL;
    CHECK(di_v4_seq_new(g.m, &s, &err) == DEEPINFER_OK);
    CHECK(golden_run(g.m, s, g.prompt, g.N, 0, NULL, NULL, &err) == DEEPINFER_OK);
    char *buf;
    size_t len;
    CHECK(di_read_file(di_test_data(GDIR "/expected/indexer_selections.json"), 0, &buf, &len, &err) == 0);
    di_json_doc *doc = NULL;
    CHECK(di_json_parse(buf, len, NULL, &doc, &err) == 0);
    const char *names[2] = {"2", "4"};
    for (int li = 0; li < 2; li++) {
        const di_json *L = di_json_get(di_json_get(doc->root, "prefill"), names[li]);
        const di_json *sel = di_json_get(L, "selected_rows"), *tie = di_json_get(L, "boundary_tie");
        int mism = 0, mism_notie = 0, first = -1;
        for (int p = 0; p < g.N; p++) {
            const di_json *row = di_json_at(sel, (size_t)p);
            int ref[16], nr = 0;
            for (uint32_t i = 0; i < row->count; i++) {
                int64_t v;
                di_json_as_i64(di_json_at(row, i), &v);
                if (v >= 0) ref[nr++] = (int)v;
            }
            int mine[16], nm = rec.n[li][p];
            memcpy(mine, rec.rows[li][p], sizeof(int) * (size_t)nm);
            qsort(mine, (size_t)nm, sizeof(int), cmp_int);
            int ok = nm == nr && !memcmp(mine, ref, sizeof(int) * (size_t)nr);
            int64_t t = 0;
            di_json_as_i64(di_json_at(tie, (size_t)p), &t);
            if (!ok && mism < 3) {
                fprintf(stderr, "L%s p%d tie %d\n mine:", names[li], p, (int)t);
                for (int i = 0; i < nm; i++) fprintf(stderr, " %d", mine[i]);
                fprintf(stderr, "\n  ref:");
                for (int i = 0; i < nr; i++) fprintf(stderr, " %d", ref[i]);
                fprintf(stderr, "\n");
            }
            if (!ok) {
                mism++;
                if (!t) mism_notie++;
                if (first < 0) first = p;
            }
        }
        fprintf(stderr, "layer %s: mismatches %d (not at ties %d), first at %d\n", names[li], mism, mism_notie, first);
    }
    di_json_free(doc);
    free(buf);
    di_seq_destroy(s);
    gclose(&g);
}
