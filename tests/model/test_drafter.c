/*
 * The engine's drafter step (model.h di_model_draft_step, draft.h) on the CPU:
 *   V4.1 DSpark (golden v41-tiny-a, the demo model): the same bits as
 *     di_v41_dspark_feed + di_v41_dspark_draft (ids, confidences, the
 *     teacher-forced drafts through a pick that returns the reference's
 *     draft), and the manifests' drafts and confidences under the bounds the
 *     existing DSpark tests use; k < block writes only the first k;
 *   V4 MTP (golden v4-tiny-a): draft 0 is the argmax of di_v4_mtp_forward's
 *     logits on row p, draft j + 1 that of a row-by-row reference chain
 *     (di_v4_mtp_forward with hidden_in = the MTP's own output residual of
 *     the row before, b->hidden); after the chain the MTP ring and
 *     mtp_tokens are bitwise those of a sequence fed without drafting and of
 *     the reference fed over every row (the step runs only the last window);
 *     feeding 1+1+1 positions drafts what feeding 3 at once does; a pick that
 *     returns the argmax drafts what greedy does;
 *   errors: no drafter, k > block, k > 0 without a fed position, positions
 *     the target has not processed, a shared sequence, bad tokens, a pick
 *     outside the vocabulary (the state whole afterwards); refused calls
 *     change no state.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "golden/golden_util.h"
#include "model/model.h"
#include "util/file.h"

#define V41_DIR "golden/v41-tiny-a"
#define V4_DIR "golden/v4-tiny-a"
#define DEMO_MODEL "../../models/deepinfer-demo-v41"
#define DEMO_DATA "demo"
#define MAXP 512 /* positions a test sequence holds */

/* A target sequence and the drafter input of each of its positions (by absolute position). */
typedef struct tgt {
    di_seq_state *s;
    uint16_t *hid; /* [MAXP][hidden_elems] */
} tgt;

static di_model *open_model(const char *dir, const char *hash_manifest_dir) {
    char hash[4096];
    if (hash_manifest_dir) snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(hash_manifest_dir));
    di_model_options o = {.engram_hash = hash_manifest_dir ? hash : NULL};
    di_model *m = NULL;
    di_error err = {0};
    if (di_model_load(di_test_data(dir), &o, &m, &err)) di_test_fail(__FILE__, __LINE__, "load %s: %s", dir, err.msg);
    return m;
}

static int tgt_new(di_model *m, tgt *t) {
    di_error err = {0};
    t->hid = calloc((size_t)MAXP * di_model_draft_hidden_elems(m) + 1, 2);
    return t->hid && !di_seq_create(di_model_cfg(m), MAXP, &t->s, &err);
}

static void tgt_free(tgt *t) {
    di_seq_destroy(t->s);
    free(t->hid);
}

/* The target over n tokens continuing t's sequence; the drafter inputs kept. */
static deepinfer_status tgt_run(di_model *m, tgt *t, const int32_t *tok, int n, di_error *err) {
    int64_t pos[MAXP];
    di_seq_state *seq[MAXP];
    int64_t p0 = t->s->n_tokens;
    for (int i = 0; i < n; i++) pos[i] = p0 + i, seq[i] = t->s;
    di_model_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = seq};
    di_model_batch_set_draft_hidden(m, &b, t->hid + (size_t)p0 * di_model_draft_hidden_elems(m));
    return di_model_forward(m, &b, err);
}

/* The drafter input rows of t from its first position not fed yet. */
static const uint16_t *tgt_feed_rows(const di_model *m, const tgt *t) {
    return t->hid + (size_t)t->s->mtp_tokens * di_model_draft_hidden_elems(m);
}

/* One request's draft step. */
static deepinfer_status step1(di_model *m, tgt *t, int n_feed, const int32_t *next, int k, di_draft_pick_fn pick,
                              void *ctx, int32_t *ids, float *conf, di_error *err) {
    const uint16_t *h = tgt_feed_rows(m, t);
    di_model_draft d = {.n = 1, .seq = &t->s, .n_feed = &n_feed, .hidden = &h, .next = &next, .k = &k,
                        .pick = pick, .pick_ctx = ctx, .ids = ids, .confidence = conf};
    return di_model_draft_step(m, &d, err);
}

/* A pick that returns force[i] for request `forced` (recording the argmax it saw) and the
 * argmax for every other request. */
typedef struct force_ctx {
    int forced, V;
    const int32_t *force;
    int32_t *seen;
} force_ctx;

static int32_t pick_force(void *p, int req, int i, const float *logits) {
    force_ctx *c = p;
    int32_t a = golden_argmax(logits, c->V);
    if (req != c->forced) return a;
    c->seen[i] = a;
    return c->force[i];
}

static int32_t pick_argmax(void *p, int req, int i, const float *logits) {
    (void)req, (void)i;
    return golden_argmax(logits, *(const int *)p);
}

/* ---- V4.1 DSpark ------------------------------------------------------------------------------ */

/* The golden manifest's DSpark run: per step the anchor, drafted ids [B] and confidences [B]. */
static int dspark_run(const di_json *man, int steps, int B, int32_t *anchor, int32_t *ids, float *conf) {
    const di_json *r = di_json_get(di_json_get(man, "dspark"), "fixed_run");
    if (!r || (int)r->count < steps) return 0;
    for (int i = 0; i < steps; i++) {
        const di_json *e = di_json_at(r, (size_t)i);
        int64_t v = 0;
        di_json_as_i64(di_json_get(e, "anchor"), &v);
        anchor[i] = (int32_t)v;
        for (int j = 0; j < B; j++) {
            double c = 0;
            di_json_as_i64(di_json_at(di_json_get(e, "drafted_ids"), (size_t)j), &v);
            di_json_as_f64(di_json_at(di_json_get(e, "confidence"), (size_t)j), &c);
            ids[i * B + j] = (int32_t)v;
            conf[i * B + j] = (float)c;
        }
    }
    return 1;
}

/* Agreement and confidence error of drafts against a reference run (n drafts). */
static void agree(const int32_t *a, const int32_t *ref, const float *conf, const float *ref_conf, int n, double *frac,
                  double *cmean) {
    int k = 0;
    double cs = 0;
    for (int i = 0; i < n; i++) {
        k += a[i] == ref[i];
        if (conf) cs += fabs((double)conf[i] - ref_conf[i]);
    }
    *frac = (double)k / n;
    if (cmean) *cmean = cs / n;
}

TEST(drafter_dspark_golden_equals_feed_and_draft) {
    /* manifest convention (test_golden_v41.c): the prompt's rows seed the rings; decode step i
     * (position p = N + i, teacher-forced input in[i]) feeds p and drafts from the anchor */
    di_model *m = open_model(V41_DIR, V41_DIR);
    CHECK(m != NULL);
    di_json_doc *man = golden_manifest(di_test_data(V41_DIR));
    CHECK(man != NULL);
    const di_model_config *c = di_model_cfg(m);
    CHECK(di_model_drafter(m) == DI_DRAFTER_DSPARK);
    int B = di_model_draft_block(m), V = (int)c->vocab_size, N = 0, nd = 0;
    CHECK(B == (int)c->dspark_block_size && B <= 8);
    CHECK(di_model_draft_hidden_elems(m) == (size_t)c->n_dspark_target_layer_ids * c->hidden_size);
    int32_t *prompt = golden_ints(man->root, "prompt_token_ids", NULL, &N);
    int32_t *in = golden_ints(man->root, "decode_fixed", "input_tokens", &nd);
    int32_t anchor[64], ref_ids[64 * 8];
    float ref_conf[64 * 8];
    CHECK(prompt && in && nd <= 64 && N + nd < MAXP && dspark_run(man->root, nd, B, anchor, ref_ids, ref_conf));
    double ref_mean = golden_num(man->root, "stability", "prefill_all_cuda_vs_cpu", "mean_abs_diff");
    double ref_argmax = golden_num(man->root, "stability", "prefill_all_cuda_vs_cpu", "argmax_agreement");
    /* T: teacher-forced through the pick, K2: 2 drafts, F: greedy (pick NULL), L: the model functions */
    tgt T, K2, F, L;
    CHECK(tgt_new(m, &T) && tgt_new(m, &K2) && tgt_new(m, &F) && tgt_new(m, &L));
    di_error err = {0};
    tgt *all[4] = {&T, &K2, &F, &L};
    for (int q = 0; q < 4; q++) CHECK_MSG(tgt_run(m, all[q], prompt, N, &err) == DEEPINFER_OK, "%s", err.msg);
    /* the prompt's rows into T, K2 and F in one call, without drafts */
    {
        int nf[3] = {N, N, N}, k[3] = {0, 0, 0};
        di_seq_state *seq[3] = {T.s, K2.s, F.s};
        const uint16_t *h[3] = {tgt_feed_rows(m, &T), tgt_feed_rows(m, &K2), tgt_feed_rows(m, &F)};
        di_model_draft d = {.n = 3, .seq = seq, .n_feed = nf, .hidden = h, .k = k};
        CHECK_MSG(di_model_draft_step(m, &d, &err) == DEEPINFER_OK, "%s", err.msg);
    }
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)N);
    di_seq_state **seqs = malloc(sizeof(*seqs) * (size_t)N);
    for (int i = 0; i < N; i++) pos[i] = i, seqs[i] = L.s;
    di_v41_model *m41 = NULL;
    {
        /* the model functions need the V4.1 model: a second copy of it */
        char hash[4096];
        snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(V41_DIR));
        di_v4_options o = {.engram_hash = hash};
        CHECK_MSG(di_v41_load(di_test_data(V41_DIR), &o, &m41, &err) == DEEPINFER_OK, "%s", err.msg);
    }
    di_v4_batch fb = {.n = N, .pos = pos, .seq = seqs};
    CHECK_MSG(di_v41_dspark_feed(m41, &fb, L.hid, &err) == DEEPINFER_OK, "%s", err.msg);
    static int32_t tf_seen[64 * 8], tf_ids[64 * 8], k2_ids[64 * 8], f_ids[64 * 8], l_tf[64 * 8], l_free[64 * 8];
    static float tf_conf[64 * 8], k2_conf[64 * 8], f_conf[64 * 8], l_tf_conf[64 * 8], l_free_conf[64 * 8];
    for (int i = 0; i < 64 * 8; i++) k2_ids[i] = -7, k2_conf[i] = -7.0f;
    for (int i = 0; i < nd; i++) {
        int64_t p = N + i;
        for (int q = 0; q < 4; q++) CHECK_MSG(tgt_run(m, all[q], in + i, 1, &err) == DEEPINFER_OK, "%s", err.msg);
        /* T (forced) and K2 (2 drafts, the pick's argmax) in one call; F greedy alone */
        force_ctx fc = {.forced = 0, .V = V, .force = ref_ids + i * B, .seen = tf_seen + i * B};
        int nf[2] = {1, 1}, k[2] = {B, 2};
        di_seq_state *seq[2] = {T.s, K2.s};
        const uint16_t *h[2] = {tgt_feed_rows(m, &T), tgt_feed_rows(m, &K2)};
        const int32_t *next[2] = {anchor + i, anchor + i};
        int32_t ids[2 * 8];
        float conf[2 * 8];
        for (int j = 0; j < 2 * 8; j++) ids[j] = -7, conf[j] = -7.0f;
        di_model_draft d = {.n = 2, .seq = seq, .n_feed = nf, .hidden = h, .next = next, .k = k, .pick = pick_force,
                            .pick_ctx = &fc, .ids = ids, .confidence = conf};
        CHECK_MSG(di_model_draft_step(m, &d, &err) == DEEPINFER_OK, "%s", err.msg);
        memcpy(tf_ids + i * B, ids, sizeof(int32_t) * (size_t)B);
        memcpy(tf_conf + i * B, conf, sizeof(float) * (size_t)B);
        memcpy(k2_ids + i * B, ids + B, sizeof(int32_t) * (size_t)B);
        memcpy(k2_conf + i * B, conf + B, sizeof(float) * (size_t)B);
        CHECK_MSG(step1(m, &F, 1, anchor + i, B, NULL, NULL, f_ids + i * B, f_conf + i * B, &err) == DEEPINFER_OK,
                  "%s", err.msg);
        /* the model functions */
        di_v4_batch one = {.n = 1, .pos = &p, .seq = &L.s};
        CHECK(di_v41_dspark_feed(m41, &one, L.hid + (size_t)p * di_model_draft_hidden_elems(m), &err) == DEEPINFER_OK);
        di_v41_draft tf = {.n = 1, .seq = &L.s, .pos = &p, .anchor = anchor + i, .force = ref_ids + i * B,
                           .ids = l_tf + i * B, .confidence = l_tf_conf + i * B};
        CHECK_MSG(di_v41_dspark_draft(m41, &tf, &err) == DEEPINFER_OK, "%s", err.msg);
        di_v41_draft fr = {.n = 1, .seq = &L.s, .pos = &p, .anchor = anchor + i, .ids = l_free + i * B,
                           .confidence = l_free_conf + i * B};
        CHECK_MSG(di_v41_dspark_draft(m41, &fr, &err) == DEEPINFER_OK, "%s", err.msg);
        for (int q = 0; q < 4; q++) CHECK(all[q]->s->mtp_tokens == p + 1);
    }
    size_t nb = (size_t)nd * B;
    CHECK_MSG(!memcmp(tf_ids, ref_ids, sizeof(int32_t) * nb), "the forcing pick's drafts are not the forced ids");
    CHECK_MSG(!memcmp(tf_seen, l_tf, sizeof(int32_t) * nb), "teacher-forced drafts differ from di_v41_dspark_draft's");
    CHECK_MSG(!memcmp(tf_conf, l_tf_conf, sizeof(float) * nb), "teacher-forced confidences differ");
    CHECK_MSG(!memcmp(f_ids, l_free, sizeof(int32_t) * nb), "greedy drafts differ from di_v41_dspark_draft's");
    CHECK_MSG(!memcmp(f_conf, l_free_conf, sizeof(float) * nb), "greedy confidences differ");
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < B; j++) {
            int o = i * B + j;
            if (j < 2) CHECK_MSG(k2_ids[o] == l_free[o] && k2_conf[o] == l_free_conf[o], "k = 2: step %d draft %d", i, j);
            else CHECK_MSG(k2_ids[o] == -7 && k2_conf[o] == -7.0f, "k = 2 wrote draft %d of step %d", j, i);
        }
    /* against the reference (test_golden_v41.c's bounds) */
    double a_tf, a_free, cm;
    agree(tf_seen, ref_ids, tf_conf, ref_conf, (int)nb, &a_tf, &cm);
    agree(f_ids, ref_ids, NULL, NULL, (int)nb, &a_free, NULL);
    fprintf(stderr, "    DSpark step (%d x %d): %.4f agree teacher-forced, %.4f greedy (bound %.4f); confidence mean |diff| %.5f (bound %.5f)\n",
            nd, B, a_tf, a_free, ref_argmax - 0.03, cm, 2 * ref_mean);
    CHECK(a_tf >= ref_argmax - 0.03 && a_free >= ref_argmax - 0.03 && cm <= 2 * ref_mean);
    for (int q = 0; q < 4; q++) tgt_free(all[q]);
    free(pos), free(seqs), free(prompt), free(in);
    di_json_free(man);
    di_v41_free(m41);
    di_model_free(m);
}

/* The demo reference's own CPU-vs-CUDA decode figures (test_demo_v41.c): the rows where its CPU
 * run fed the same tokens as its CUDA run. */
static int demo_decode_ref(const di_json *man, int V, double *mean, double *argmax) {
    size_t n = 0, m = 0;
    float *cdc = golden_read_f32(di_test_data(DEMO_DATA "/exact_decode_logits.bin"), &n);
    float *gdc = golden_read_f32(di_test_data(DEMO_DATA "/decode_logits.bin"), &m);
    char path[4096], *buf = NULL;
    size_t len = 0;
    di_json_doc *ex = NULL;
    snprintf(path, sizeof path, "%s/exact.json", di_test_data(DEMO_DATA));
    int ok = cdc && gdc && !di_read_file(path, 0, &buf, &len, NULL) && !di_json_parse(buf, len, NULL, &ex, NULL);
    int ne = 0, ng = 0;
    int32_t *ein = ok ? golden_ints(ex->root, "decode", "input_tokens", &ne) : NULL;
    int32_t *gin = ok ? golden_ints(man, "decode", "input_tokens", &ng) : NULL;
    ok = ok && ein && gin && ne == ng && n == m && m == (size_t)ng * V;
    if (ok) {
        int k = 0;
        while (k < ng && ein[k] == gin[k]) k++;
        golden_stats st = golden_compare(cdc, gdc, 0, k, V);
        *mean = st.mean_abs, *argmax = st.argmax_agree;
        ok = k > 0 && st.mean_abs > 0;
    }
    free(cdc), free(gdc), free(buf), free(ein), free(gin);
    di_json_free(ex);
    return ok;
}

TEST(drafter_dspark_demo_equals_feed_and_draft) {
    /* manifest convention (test_demo_v41.c): step i drafts after the target processed
     * p = N - 1 + i; the first step feeds the whole prompt */
    di_model *m = open_model(DEMO_MODEL, NULL);
    CHECK(m != NULL);
    char path[4096], *buf = NULL;
    size_t len = 0;
    di_json_doc *man = NULL;
    snprintf(path, sizeof path, "%s/manifest.json", di_test_data(DEMO_DATA));
    CHECK(!di_read_file(path, 0, &buf, &len, NULL) && !di_json_parse(buf, len, NULL, &man, NULL));
    free(buf);
    const di_model_config *c = di_model_cfg(m);
    int B = di_model_draft_block(m), V = (int)c->vocab_size, N = 0, na = 0;
    int32_t *prompt = golden_ints(man->root, "prompt_token_ids", NULL, &N);
    const di_json *ds = di_json_get(man->root, "dspark");
    int32_t *anchors = golden_ints(ds, "anchors", NULL, &na);
    CHECK(prompt && anchors && na <= 32 && B <= 8 && N + na < MAXP);
    double rmean = 0, rargmax = 0;
    CHECK(demo_decode_ref(man->root, V, &rmean, &rargmax));
    int32_t ref_ids[32 * 8];
    float ref_conf[32 * 8];
    for (int i = 0; i < na; i++)
        for (int j = 0; j < B; j++) {
            int64_t v = 0;
            double cf = 0;
            di_json_as_i64(di_json_at(di_json_at(di_json_get(ds, "drafted_ids"), (size_t)i), (size_t)j), &v);
            di_json_as_f64(di_json_at(di_json_at(di_json_get(ds, "confidence"), (size_t)i), (size_t)j), &cf);
            ref_ids[i * B + j] = (int32_t)v;
            ref_conf[i * B + j] = (float)cf;
        }
    di_v41_model *m41 = NULL;
    di_error err = {0};
    CHECK_MSG(di_v41_load(di_test_data(DEMO_MODEL), NULL, &m41, &err) == DEEPINFER_OK, "%s", err.msg);
    tgt T, F, L;
    CHECK(tgt_new(m, &T) && tgt_new(m, &F) && tgt_new(m, &L));
    tgt *all[3] = {&T, &F, &L};
    for (int q = 0; q < 3; q++) CHECK_MSG(tgt_run(m, all[q], prompt, N, &err) == DEEPINFER_OK, "%s", err.msg);
    int32_t tf_seen[32 * 8], tf_conf_ids[32 * 8], f_ids[32 * 8], l_tf[32 * 8], l_free[32 * 8];
    float tf_conf[32 * 8], f_conf[32 * 8], l_tf_conf[32 * 8], l_free_conf[32 * 8];
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)N);
    di_seq_state **seqs = malloc(sizeof(*seqs) * (size_t)N);
    for (int i = 0; i < N; i++) pos[i] = i, seqs[i] = L.s;
    for (int i = 0; i < na; i++) {
        int64_t p = N - 1 + i;
        if (i > 0)
            for (int q = 0; q < 3; q++)
                CHECK_MSG(tgt_run(m, all[q], anchors + i - 1, 1, &err) == DEEPINFER_OK, "%s", err.msg);
        int nf = i ? 1 : N;
        /* T and F in one call: T's drafts forced through the pick, F's the pick's argmax */
        force_ctx fc = {.forced = 0, .V = V, .force = ref_ids + i * B, .seen = tf_seen + i * B};
        int nfs[2] = {nf, nf}, k[2] = {B, B};
        di_seq_state *seq[2] = {T.s, F.s};
        const uint16_t *h[2] = {tgt_feed_rows(m, &T), tgt_feed_rows(m, &F)};
        int32_t nx[MAXP]; /* the tokens after the fed positions: the prompt's, then the anchor */
        for (int j = 0; j < nf; j++) nx[j] = j + 1 < nf ? prompt[j + 1] : anchors[i];
        const int32_t *next[2] = {nx, nx};
        int32_t ids[16];
        float conf[16];
        di_model_draft d = {.n = 2, .seq = seq, .n_feed = nfs, .hidden = h, .next = next, .k = k, .pick = pick_force,
                            .pick_ctx = &fc, .ids = ids, .confidence = conf};
        CHECK_MSG(di_model_draft_step(m, &d, &err) == DEEPINFER_OK, "%s", err.msg);
        memcpy(tf_conf_ids + i * B, ids, sizeof(int32_t) * (size_t)B);
        memcpy(tf_conf + i * B, conf, sizeof(float) * (size_t)B);
        memcpy(f_ids + i * B, ids + B, sizeof(int32_t) * (size_t)B);
        memcpy(f_conf + i * B, conf + B, sizeof(float) * (size_t)B);
        /* the model functions */
        di_v4_batch fb = {.n = nf, .pos = i ? &p : pos, .seq = i ? &L.s : seqs};
        CHECK_MSG(di_v41_dspark_feed(m41, &fb, L.hid + (size_t)(i ? p : 0) * di_model_draft_hidden_elems(m), &err) ==
                      DEEPINFER_OK,
                  "%s", err.msg);
        di_v41_draft tf = {.n = 1, .seq = &L.s, .pos = &p, .anchor = anchors + i, .force = ref_ids + i * B,
                           .ids = l_tf + i * B, .confidence = l_tf_conf + i * B};
        CHECK(di_v41_dspark_draft(m41, &tf, &err) == DEEPINFER_OK);
        di_v41_draft fr = {.n = 1, .seq = &L.s, .pos = &p, .anchor = anchors + i, .ids = l_free + i * B,
                           .confidence = l_free_conf + i * B};
        CHECK(di_v41_dspark_draft(m41, &fr, &err) == DEEPINFER_OK);
    }
    size_t nb = (size_t)na * B;
    CHECK(!memcmp(tf_conf_ids, ref_ids, sizeof(int32_t) * nb));
    CHECK_MSG(!memcmp(tf_seen, l_tf, sizeof(int32_t) * nb), "teacher-forced drafts differ from di_v41_dspark_draft's");
    CHECK_MSG(!memcmp(tf_conf, l_tf_conf, sizeof(float) * nb), "teacher-forced confidences differ");
    CHECK_MSG(!memcmp(f_ids, l_free, sizeof(int32_t) * nb), "argmax-pick drafts differ from di_v41_dspark_draft's");
    CHECK_MSG(!memcmp(f_conf, l_free_conf, sizeof(float) * nb), "argmax-pick confidences differ");
    double a_tf, cm;
    agree(tf_seen, ref_ids, tf_conf, ref_conf, (int)nb, &a_tf, &cm);
    fprintf(stderr, "    demo DSpark step (%d x %d): %.4f agree teacher-forced (bound %.4f); confidence mean |diff| %.4f (bound %.4f)\n",
            na, B, a_tf, rargmax - 0.03, cm, 2 * rmean);
    CHECK(a_tf >= rargmax - 0.03 && cm <= 2 * rmean);
    for (int q = 0; q < 3; q++) tgt_free(all[q]);
    free(pos), free(seqs), free(prompt), free(anchors);
    di_json_free(man);
    di_v41_free(m41);
    di_model_free(m);
}

/* ---- V4 MTP ------------------------------------------------------------------------------------ */

typedef struct v4ctx {
    di_model *m;
    di_v4_model *v4; /* a second copy, for di_v4_mtp_forward */
    di_json_doc *man;
    int32_t *prompt, *in;
    int N, nd, V, block;
    size_t hcd;
} v4ctx;

static int v4_open(v4ctx *g) {
    memset(g, 0, sizeof *g);
    di_error err = {0};
    g->m = open_model(V4_DIR, NULL);
    if (!g->m || di_v4_load(di_test_data(V4_DIR), NULL, &g->v4, &err)) return 0;
    g->man = golden_manifest(di_test_data(V4_DIR));
    if (!g->man) return 0;
    g->prompt = golden_ints(g->man->root, "prompt_token_ids", NULL, &g->N);
    g->in = golden_ints(g->man->root, "decode", "input_tokens", &g->nd);
    const di_model_config *c = di_model_cfg(g->m);
    g->V = (int)c->vocab_size;
    g->block = di_model_draft_block(g->m);
    g->hcd = (size_t)c->hc_mult * c->hidden_size;
    return g->prompt && g->in && g->N + g->nd + DI_MTP_MAX_DRAFT < MAXP && g->N > c->sliding_window;
}

static void v4_close(v4ctx *g) {
    di_model_free(g->m);
    di_v4_free(g->v4);
    di_json_free(g->man);
    free(g->prompt), free(g->in);
}

/* The tokens after positions q0 .. q0+n-1 of the run prompt ++ in: next[i] = that token at q0 + 1 + i. */
static void next_tokens(const v4ctx *g, int64_t q0, int n, int32_t *next) {
    for (int i = 0; i < n; i++) {
        int64_t t = q0 + 1 + i;
        next[i] = t < g->N ? g->prompt[t] : g->in[t - g->N];
    }
}

/* The reference: di_v4_mtp_forward over positions mtp_tokens .. +n-1 of R, then the chain row by
 * row on the MTP's own output residual (b->hidden), k drafts into ids; R's MTP ring and
 * mtp_tokens put back as the feed left them (a host copy: CPU state). */
static deepinfer_status mtp_reference(v4ctx *g, tgt *R, int n, int k, int32_t *ids, di_error *err) {
    const di_model_config *c = di_model_cfg(g->m);
    int64_t q0 = R->s->mtp_tokens, p = q0 + n - 1;
    int32_t next[MAXP];
    int64_t pos[MAXP];
    di_seq_state *seq[MAXP];
    next_tokens(g, q0, n, next);
    for (int i = 0; i < n; i++) pos[i] = q0 + i, seq[i] = R->s;
    uint16_t *res = malloc(2 * g->hcd * (size_t)(n + 1)), *res2 = malloc(2 * g->hcd);
    float *lg = malloc(sizeof(float) * (size_t)g->V);
    int last = n - 1, zero = 0;
    di_v4_batch b = {.n = n, .tokens = next, .pos = pos, .seq = seq, .n_logits = k > 0, .logit_rows = &last,
                     .logits = lg, .hidden = res};
    deepinfer_status st = di_v4_mtp_forward(g->v4, &b, R->hid + (size_t)q0 * g->hcd, err);
    size_t ring_bytes = (size_t)c->sliding_window * c->head_dim * 2;
    uint16_t *ring = R->s->layers[c->n_layers].ring, *saved = malloc(ring_bytes);
    memcpy(saved, ring, ring_bytes);
    const uint16_t *cur = res + (size_t)(n - 1) * g->hcd;
    for (int j = 0; j < k && !st; j++) {
        ids[j] = golden_argmax(lg, g->V);
        if (j + 1 == k) break;
        int64_t q = p + 1 + j;
        uint16_t *out = cur == res2 ? res : res2;
        di_v4_batch b1 = {.n = 1, .tokens = ids + j, .pos = &q, .seq = seq, .n_logits = 1, .logit_rows = &zero,
                          .logits = lg, .hidden = out};
        st = di_v4_mtp_forward(g->v4, &b1, cur, err);
        cur = out;
    }
    memcpy(ring, saved, ring_bytes);
    R->s->mtp_tokens = p + 1;
    free(res), free(res2), free(lg), free(saved);
    return st;
}

static int same_mtp_state(const di_model_config *c, const di_seq_state *a, const di_seq_state *b) {
    size_t ring_bytes = (size_t)c->sliding_window * c->head_dim * 2;
    return a->mtp_tokens == b->mtp_tokens && !memcmp(a->layers[c->n_layers].ring, b->layers[c->n_layers].ring, ring_bytes);
}

TEST(drafter_mtp_chain_matches_reference) {
    v4ctx g;
    CHECK(v4_open(&g));
    const di_model_config *c = di_model_cfg(g.m);
    CHECK(di_model_drafter(g.m) == DI_DRAFTER_MTP);
    CHECK(g.block == (c->sliding_window < DI_MTP_MAX_DRAFT ? (int)c->sliding_window : DI_MTP_MAX_DRAFT) && g.block > 2);
    CHECK(di_model_draft_hidden_elems(g.m) == g.hcd);
    di_error err = {0};
    /* A: the step; Z: the step without drafts; R: the reference */
    tgt A, Z, R;
    CHECK(tgt_new(g.m, &A) && tgt_new(g.m, &Z) && tgt_new(g.m, &R));
    tgt *all[3] = {&A, &Z, &R};
    for (int q = 0; q < 3; q++) CHECK_MSG(tgt_run(g.m, all[q], g.prompt, g.N, &err) == DEEPINFER_OK, "%s", err.msg);
    int steps = g.nd - 1 < 12 ? g.nd - 1 : 12, ndraft = 0;
    for (int i = -1; i < steps; i++) {
        /* step -1 feeds the whole prompt (more rows than the window); then one position a step */
        if (i >= 0)
            for (int q = 0; q < 3; q++) CHECK_MSG(tgt_run(g.m, all[q], g.in + i, 1, &err) == DEEPINFER_OK, "%s", err.msg);
        int nf = i < 0 ? g.N : 1, k = i < 0 ? g.block : (i * 5 + 1) % (g.block + 1);
        int32_t next[MAXP], ids[2 * DI_MTP_MAX_DRAFT], ref[DI_MTP_MAX_DRAFT];
        float conf[2 * DI_MTP_MAX_DRAFT];
        for (int j = 0; j < 2 * DI_MTP_MAX_DRAFT; j++) ids[j] = -7, conf[j] = 0;
        next_tokens(&g, A.s->mtp_tokens, nf, next);
        /* A and Z in one call (Z: no drafts) */
        int nfs[2] = {nf, nf}, ks[2] = {k, 0};
        di_seq_state *seq[2] = {A.s, Z.s};
        const uint16_t *h[2] = {tgt_feed_rows(g.m, &A), tgt_feed_rows(g.m, &Z)};
        const int32_t *nx[2] = {next, next};
        di_model_draft d = {.n = 2, .seq = seq, .n_feed = nfs, .hidden = h, .next = nx, .k = ks, .ids = ids,
                            .confidence = conf};
        CHECK_MSG(di_model_draft_step(g.m, &d, &err) == DEEPINFER_OK, "%s", err.msg);
        CHECK_MSG(mtp_reference(&g, &R, nf, k, ref, &err) == DEEPINFER_OK, "%s", err.msg);
        for (int j = 0; j < k; j++) {
            CHECK_MSG(ids[j] == ref[j], "step %d draft %d: %d, the reference chain %d", i, j, ids[j], ref[j]);
            CHECK(isnan(conf[j]));
        }
        for (int j = k; j < 2 * DI_MTP_MAX_DRAFT; j++) CHECK_MSG(ids[j] == -7, "step %d: draft %d written (k = %d)", i, j, k);
        CHECK_MSG(same_mtp_state(c, A.s, Z.s), "step %d: the MTP state after the chain differs from a feed's", i);
        CHECK_MSG(same_mtp_state(c, A.s, R.s), "step %d: the MTP state differs from di_v4_mtp_forward's", i);
        CHECK(A.s->mtp_tokens == A.s->n_tokens);
        ndraft += k;
    }
    fprintf(stderr, "    MTP step: %d drafts over %d steps equal the reference chain; rings bitwise\n", ndraft, steps + 1);
    for (int q = 0; q < 3; q++) tgt_free(all[q]);
    v4_close(&g);
}

TEST(drafter_mtp_feed_in_pieces) {
    v4ctx g;
    CHECK(v4_open(&g));
    const di_model_config *c = di_model_cfg(g.m);
    di_error err = {0};
    /* P: 1 + 1 + 1 positions, Q: 3 at once (greedy), W: 3 at once (a pick returning the argmax), Y: 3 at
     * once with k - 2 drafts, in one call with W */
    tgt P, Q, W, Y;
    CHECK(tgt_new(g.m, &P) && tgt_new(g.m, &Q) && tgt_new(g.m, &W) && tgt_new(g.m, &Y));
    tgt *all[4] = {&P, &Q, &W, &Y};
    int32_t next[MAXP];
    int K = g.block;
    for (int q = 0; q < 4; q++) {
        CHECK_MSG(tgt_run(g.m, all[q], g.prompt, g.N, &err) == DEEPINFER_OK, "%s", err.msg);
        CHECK_MSG(tgt_run(g.m, all[q], g.in, 2, &err) == DEEPINFER_OK, "%s", err.msg);
        next_tokens(&g, 0, g.N - 1, next);
        CHECK_MSG(step1(g.m, all[q], g.N - 1, next, 0, NULL, NULL, NULL, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
    }
    int64_t q0 = P.s->mtp_tokens; /* N - 1: positions N-1, N, N+1 left */
    int32_t pid[DI_MTP_MAX_DRAFT], qid[DI_MTP_MAX_DRAFT], wid[2 * DI_MTP_MAX_DRAFT];
    for (int i = 0; i < 3; i++) {
        next_tokens(&g, q0 + i, 1, next);
        CHECK_MSG(step1(g.m, &P, 1, next, i == 2 ? K : 0, NULL, NULL, pid, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
    }
    next_tokens(&g, q0, 3, next);
    CHECK_MSG(step1(g.m, &Q, 3, next, K, NULL, NULL, qid, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
    int V = g.V, nfs[2] = {3, 3}, ks[2] = {K, K - 2};
    di_seq_state *seq[2] = {W.s, Y.s};
    const uint16_t *h[2] = {tgt_feed_rows(g.m, &W), tgt_feed_rows(g.m, &Y)};
    const int32_t *nx[2] = {next, next};
    di_model_draft d = {.n = 2, .seq = seq, .n_feed = nfs, .hidden = h, .next = nx, .k = ks, .pick = pick_argmax,
                        .pick_ctx = &V, .ids = wid};
    CHECK_MSG(di_model_draft_step(g.m, &d, &err) == DEEPINFER_OK, "%s", err.msg);
    for (int j = 0; j < K; j++) {
        CHECK_MSG(pid[j] == qid[j], "draft %d: fed 1+1+1 %d, fed 3 %d", j, pid[j], qid[j]);
        CHECK_MSG(wid[j] == qid[j], "draft %d: the argmax pick %d, greedy %d", j, wid[j], qid[j]);
        if (j < K - 2) CHECK_MSG(wid[K + j] == qid[j], "draft %d with k = %d: %d, %d", j, K - 2, wid[K + j], qid[j]);
    }
    for (int q = 1; q < 4; q++) CHECK_MSG(same_mtp_state(c, P.s, all[q]->s), "sequence %d: another MTP state", q);
    for (int q = 0; q < 4; q++) tgt_free(all[q]);
    v4_close(&g);
}

/* ---- grouping ----------------------------------------------------------------------------------- */

#define NREQ 5

/* NREQ requests with prompts of different lengths (prefixes of the golden prompt), drafting from
 * the whole prompt in one call (k = block, one request k = 2), then two steps of one position;
 * every draft and confidence into ids / conf ([3][NREQ][block]). */
static int grouped_run(const char *dir, const char *hash_dir, int max_rows, int32_t *ids, float *conf) {
    char hash[4096];
    if (hash_dir) snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(hash_dir));
    di_model_options o = {.engram_hash = hash_dir ? hash : NULL, .max_rows = max_rows};
    di_model *m = NULL;
    di_error err = {0};
    di_json_doc *man = golden_manifest(di_test_data(dir));
    int N = 0;
    int32_t *prompt = man ? golden_ints(man->root, "prompt_token_ids", NULL, &N) : NULL;
    static const int len[NREQ] = {20, 45, 7, 33, 60};
    tgt t[NREQ] = {0};
    int ok = prompt && N >= 64 && !di_model_load(di_test_data(dir), &o, &m, &err);
    int B = ok ? di_model_draft_block(m) : 0;
    for (int r = 0; r < NREQ && ok; r++) ok = tgt_new(m, &t[r]) && !tgt_run(m, &t[r], prompt, len[r], &err);
    for (int s = 0; s < 3 && ok; s++) {
        int nf[NREQ], k[NREQ];
        di_seq_state *seq[NREQ];
        const uint16_t *h[NREQ];
        const int32_t *next[NREQ];
        for (int r = 0; r < NREQ; r++) {
            if (s) ok = ok && !tgt_run(m, &t[r], prompt + t[r].s->n_tokens, 1, &err);
            seq[r] = t[r].s, h[r] = tgt_feed_rows(m, &t[r]);
            nf[r] = (int)(t[r].s->n_tokens - t[r].s->mtp_tokens), k[r] = r == 1 ? 2 : B;
            next[r] = prompt + t[r].s->mtp_tokens + 1; /* the token after each fed position */
        }
        di_model_draft d = {.n = NREQ, .seq = seq, .n_feed = nf, .hidden = h, .next = next, .k = k,
                            .ids = ids + (size_t)s * NREQ * B, .confidence = conf + (size_t)s * NREQ * B};
        ok = ok && !di_model_draft_step(m, &d, &err);
    }
    if (!ok) di_test_fail(__FILE__, __LINE__, "%s, max_rows %d: %s", dir, max_rows, err.msg);
    for (int r = 0; r < NREQ; r++) tgt_free(&t[r]);
    di_model_free(m);
    di_json_free(man);
    free(prompt);
    return ok ? B : 0;
}

TEST(drafter_grouping_is_invisible) {
    /* max_rows 12: feeds split over passes (a request's rows in two), V4.1 drafts 2 requests a pass,
     * the MTP 8 requests a pass with its logit rows in different passes */
    const char *dirs[2] = {V41_DIR, V4_DIR};
    for (int c = 0; c < 2; c++) {
        static int32_t ia[3 * NREQ * 16], ib[3 * NREQ * 16];
        static float ca[3 * NREQ * 16], cb[3 * NREQ * 16];
        for (int i = 0; i < 3 * NREQ * 16; i++) ia[i] = ib[i] = -7, ca[i] = cb[i] = -7.0f;
        int B = grouped_run(dirs[c], c ? NULL : V41_DIR, 0, ia, ca);
        CHECK(B > 0 && grouped_run(dirs[c], c ? NULL : V41_DIR, 12, ib, cb) == B);
        size_t n = (size_t)3 * NREQ * B;
        CHECK_MSG(!memcmp(ia, ib, n * sizeof *ia), "%s: drafts depend on max_rows", dirs[c]);
        CHECK_MSG(!memcmp(ca, cb, n * sizeof *ca), "%s: confidences depend on max_rows", dirs[c]);
        for (size_t i = 0; i < n; i++) CHECK(ia[i] != -7 || (i / B) % NREQ == 1);
    }
}

/* ---- errors ------------------------------------------------------------------------------------- */

static int32_t pick_bad(void *p, int req, int i, const float *logits) {
    (void)p, (void)req, (void)logits;
    return i == 1 ? -1 : 3;
}

/* The refusals every drafter shares, on model m with sequences a, b (fed up to n_tokens - 2). */
static void common_errors(di_model *m, tgt *a, tgt *b, int32_t anchor) {
    di_error err = {0};
    int block = di_model_draft_block(m);
    int32_t ids[2 * 16], next[4] = {anchor, anchor, anchor, anchor};
    int64_t q0 = a->s->mtp_tokens;
    CHECK(a->s->n_tokens == q0 + 2);
    CHECK(step1(m, a, 1, next, block + 1, NULL, NULL, ids, NULL, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "drafts asked") != NULL, "%s", err.msg);
    CHECK(step1(m, a, 0, next, 1, NULL, NULL, ids, NULL, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "n_feed >= 1") != NULL, "%s", err.msg);
    CHECK(step1(m, a, 3, next, 1, NULL, NULL, ids, NULL, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "target has processed only") != NULL, "%s", err.msg);
    CHECK(step1(m, a, -1, next, 0, NULL, NULL, ids, NULL, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(step1(m, a, 1, next, 1, NULL, NULL, NULL, NULL, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    {
        int nf[2] = {1, 1}, k[2] = {1, 1};
        di_seq_state *seq[2] = {a->s, a->s};
        const uint16_t *h[2] = {tgt_feed_rows(m, a), tgt_feed_rows(m, a)};
        const int32_t *nx[2] = {next, next};
        di_model_draft d = {.n = 2, .seq = seq, .n_feed = nf, .hidden = h, .next = nx, .k = k, .ids = ids};
        CHECK(di_model_draft_step(m, &d, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
        CHECK_MSG(strstr(err.msg, "share a sequence") != NULL, "%s", err.msg);
        /* a refusal in the second request changes nothing in the first */
        seq[1] = b->s, h[1] = tgt_feed_rows(m, b), k[1] = block + 1;
        CHECK(di_model_draft_step(m, &d, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    }
    CHECK(a->s->mtp_tokens == q0 && b->s->mtp_tokens == q0);
    /* a pick outside the vocabulary: refused after the feed, the drafter state as a plain feed's */
    CHECK(step1(m, a, 1, next, block, pick_bad, NULL, ids, NULL, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "outside the vocabulary") != NULL, "%s", err.msg);
    CHECK(a->s->mtp_tokens == q0 + 1);
    CHECK(step1(m, b, 1, next, 0, NULL, NULL, NULL, NULL, &err) == DEEPINFER_OK);
    const di_model_config *c = di_model_cfg(m);
    size_t ring_bytes = (size_t)c->sliding_window * c->head_dim * 2;
    for (int l = c->n_layers; l < c->n_layers + c->n_stages; l++)
        CHECK_MSG(!memcmp(a->s->layers[l].ring, b->s->layers[l].ring, ring_bytes), "drafter layer %d ring", l);
    /* the sequences go on drafting */
    CHECK_MSG(step1(m, a, 1, next, block, NULL, NULL, ids, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK_MSG(step1(m, b, 1, next, block, NULL, NULL, ids + 16, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(!memcmp(ids, ids + 16, sizeof(int32_t) * (size_t)block));
}

TEST(drafter_step_errors) {
    di_error err = {0};
    /* V4 MTP */
    {
        v4ctx g;
        CHECK(v4_open(&g));
        tgt a, b;
        CHECK(tgt_new(g.m, &a) && tgt_new(g.m, &b));
        int32_t next[MAXP];
        next_tokens(&g, 0, 8, next);
        for (int q = 0; q < 2; q++) {
            tgt *t = q ? &b : &a;
            CHECK(tgt_run(g.m, t, g.prompt, 10, &err) == DEEPINFER_OK);
            CHECK(step1(g.m, t, 8, next, 0, NULL, NULL, NULL, NULL, &err) == DEEPINFER_OK);
        }
        common_errors(g.m, &a, &b, g.prompt[9]);
        if (di_test_failed()) return;
        CHECK(tgt_run(g.m, &a, g.prompt + 10, 1, &err) == DEEPINFER_OK);
        int32_t bad[1] = {g.V}, ids[16];
        CHECK(step1(g.m, &a, 1, bad, 0, NULL, NULL, ids, NULL, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
        CHECK_MSG(strstr(err.msg, "outside the vocabulary") != NULL, "%s", err.msg);
        tgt_free(&a), tgt_free(&b);
        v4_close(&g);
    }
    /* V4.1 DSpark */
    {
        di_model *m = open_model(V41_DIR, V41_DIR);
        CHECK(m != NULL);
        di_json_doc *man = golden_manifest(di_test_data(V41_DIR));
        int N = 0;
        int32_t *prompt = man ? golden_ints(man->root, "prompt_token_ids", NULL, &N) : NULL;
        CHECK(prompt && N >= 11);
        tgt a, b;
        CHECK(tgt_new(m, &a) && tgt_new(m, &b));
        for (int q = 0; q < 2; q++) {
            tgt *t = q ? &b : &a;
            CHECK(tgt_run(m, t, prompt, 10, &err) == DEEPINFER_OK);
            CHECK(step1(m, t, 8, NULL, 0, NULL, NULL, NULL, NULL, &err) == DEEPINFER_OK);
        }
        common_errors(m, &a, &b, prompt[9]);
        if (di_test_failed()) return;
        CHECK(tgt_run(m, &a, prompt + 10, 1, &err) == DEEPINFER_OK);
        int32_t img[1] = {(int32_t)di_model_cfg(m)->image_token_id}, ids[16];
        CHECK(img[0] >= 0);
        CHECK(step1(m, &a, 1, img, 1, NULL, NULL, ids, NULL, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
        CHECK_MSG(strstr(err.msg, "not a text token") != NULL, "%s", err.msg);
        tgt_free(&a), tgt_free(&b);
        free(prompt);
        di_json_free(man);
        di_model_free(m);
    }
}

/* A copy of v4-tiny-a's config without the MTP entry, the weights linked: a checkpoint without a drafter. */
TEST(drafter_none_without_drafter_tensors) {
    char dir[] = "/tmp/di_nodrafter_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char src[4096], dst[4096], *buf = NULL;
    size_t len = 0;
    snprintf(src, sizeof src, "%s/config.json", di_test_data(V4_DIR));
    CHECK(!di_read_file(src, 0, &buf, &len, NULL));
    char *cr = strstr(buf, "\"compress_ratios\"");
    char *end = cr ? strchr(cr, ']') : NULL;
    char *last = end;
    while (last && last > cr && *last != ',') last--; /* drop the last (MTP) entry */
    CHECK(last && last > cr && strstr(buf, "\"num_nextn_predict_layers\": 1"));
    memmove(last, end, strlen(end) + 1);
    char *nn = strstr(buf, "\"num_nextn_predict_layers\": 1");
    nn[strlen("\"num_nextn_predict_layers\": ")] = '0';
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    FILE *f = fopen(dst, "w");
    CHECK(f && fwrite(buf, 1, strlen(buf), f) == strlen(buf));
    fclose(f);
    free(buf);
    const char *files[] = {"model.safetensors.index.json", "model-00001-of-00002.safetensors",
                           "model-00002-of-00002.safetensors"};
    char cwd[2048];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    for (int i = 0; i < 3; i++) {
        const char *d = di_test_data(V4_DIR);
        if (d[0] == '/') snprintf(src, sizeof src, "%.2000s/%s", d, files[i]);
        else snprintf(src, sizeof src, "%s/%.1000s/%s", cwd, d, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        CHECK(symlink(src, dst) == 0);
    }
    di_model *m = NULL;
    di_error err = {0};
    deepinfer_status st = di_model_load(dir, NULL, &m, &err);
    int ok = st == DEEPINFER_OK;
    if (ok) {
        tgt t;
        ok = tgt_new(m, &t);
        ok = ok && di_model_drafter(m) == DI_DRAFTER_NONE && di_model_draft_block(m) == 0 &&
             di_model_draft_hidden_elems(m) == 0;
        int nf = 0, k = 0;
        const uint16_t *h = NULL;
        di_model_draft d = {.n = 1, .seq = &t.s, .n_feed = &nf, .hidden = &h, .k = &k};
        ok = ok && di_model_draft_step(m, &d, &err) == DEEPINFER_ERR_UNSUPPORTED &&
             strstr(err.msg, "no DSpark/MTP tensors") != NULL;
        tgt_free(&t);
    }
    di_model_free(m);
    for (int i = 0; i < 3; i++) {
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        unlink(dst);
    }
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    unlink(dst);
    rmdir(dir);
    CHECK_MSG(st == DEEPINFER_OK, "load without the drafter: %s", err.msg);
    CHECK_MSG(ok, "a model without drafter tensors: %s", err.msg);
}
