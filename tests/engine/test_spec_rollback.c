/*
 * Partial rollback after a speculative verify step (engine/seq_snapshot.h):
 * a sequence that ran k+1 verify rows at P..P+k and was restored to keep
 * m+1 of them continues bit for bit like one that only ever ran those m+1
 * rows (the CPU is batch invariant, so how the rows are cut into steps does
 * not change the bits). Checked on the V4 tiny golden model (ratio 4 with
 * overlap, ratio 128), the V4.1 tiny golden model (ratio 2, ratio 1, Engram)
 * and the V4.1 demo model, for every residue of P that matters, k = 1..5 and
 * m = 0..k. Also: the compressor layout with max_draft = 0 is today's, a
 * larger layout gives the same logits, and the error cases.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "deepinfer.h"
#include "engine/seq_snapshot.h"
#include "engine/state_pool.h"
#include "model/dsv4.h"
#include "model/dsv41.h"
#include "model/model.h"
#include "ops/ops.h"
#include "test.h"

#define MAXK 5      /* drafts per verify step: k + 1 rows */
#define CONT 8      /* continuation rows after the rollback */
#define MAXTOK 200  /* positions a test sequence holds */

typedef struct rb_model {
    di_v4_model *v4;
    di_v41_model *v41;
    di_model *m;
    const di_model_config *cfg;
    int V;
} rb_model;

/* Load `dir` (V4.1: v41 = 1) with the load option max_draft; `hash`: the Engram hash constants (NULL: the
 * model directory's). */
static int rb_load_hash(rb_model *r, const char *dir, int v41, int max_draft, int released_index_k, const char *hash) {
    memset(r, 0, sizeof *r);
    di_v4_options o = {.max_draft = max_draft, .released_index_k = released_index_k, .engram_hash = hash};
    di_error err = {0};
    deepinfer_status st = v41 ? di_v41_load(dir, &o, &r->v41, &err) : di_v4_load(dir, &o, &r->v4, &err);
    if (st) {
        fprintf(stderr, "    load %s: %s\n", dir, err.msg);
        return 0;
    }
    r->m = di_model_borrow(r->v4, r->v41);
    r->cfg = di_model_cfg(r->m);
    r->V = (int)r->cfg->vocab_size;
    return r->m != NULL;
}

#define V41_TINY "golden/v41-tiny-a"

static int rb_load(rb_model *r, const char *dir, int v41, int max_draft, int released_index_k) {
    char hash[4096]; /* the V4.1 tiny golden model's constants live in its manifest */
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(V41_TINY));
    return rb_load_hash(r, dir, v41, max_draft, released_index_k,
                        strcmp(dir, di_test_data(V41_TINY)) ? NULL : hash);
}

static void rb_free(rb_model *r) {
    di_model_free(r->m);
    di_v4_free(r->v4);
    di_v41_free(r->v41);
}

/* One step of n rows at the sequence's next positions; logits of every row into `logits` ([n][V]) if given. */
static int rb_step(const rb_model *r, di_seq_state *s, const int32_t *tok, int n, float *logits) {
    int64_t pos[16];
    di_seq_state *seq[16];
    int rows[16];
    for (int i = 0; i < n; i++) pos[i] = s->n_tokens + i, seq[i] = s, rows[i] = i;
    di_model_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = seq, .n_logits = logits ? n : 0,
                        .logit_rows = rows, .logits = logits};
    di_error err = {0};
    if (di_model_forward(r->m, &b, &err) == DEEPINFER_OK) return 1;
    fprintf(stderr, "    forward: %s\n", err.msg);
    return 0;
}

/* The continuation: a verify step of 3 rows, then 5 single-row decode steps; logits [CONT][V]. */
static int rb_continue(const rb_model *r, di_seq_state *s, const int32_t *tok, float *logits) {
    size_t V = (size_t)r->V;
    if (!rb_step(r, s, tok, 3, logits)) return 0;
    for (int i = 3; i < CONT; i++)
        if (!rb_step(r, s, tok + i, 1, logits + (size_t)i * V)) return 0;
    return 1;
}

static uint32_t rb_rand(uint32_t *x) {
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

static int32_t rb_token(const rb_model *r, uint32_t *x) {
    int32_t t = (int32_t)(rb_rand(x) % (uint32_t)r->V);
    if (t == r->cfg->image_token_id) t = (t + 1) % r->V; /* text only */
    return t;
}

/* The header and the backbone rings of a (restored) and b (never ran the discarded rows) agree. */
static int rb_same_state(const di_model_config *cfg, const di_seq_state *a, const di_seq_state *b) {
    if (a->n_tokens != b->n_tokens || a->ikey_pub != b->ikey_pub || a->engram.len != b->engram.len) return 0;
    int back = cfg->n_engram_layer_ids ? (int)cfg->engram_max_ngram_size : 0;
    for (int64_t p = a->n_tokens - back; p < a->n_tokens; p++)
        if (p >= 0 && a->engram.cls[p % DI_ENGRAM_HIST] != b->engram.cls[p % DI_ENGRAM_HIST]) return 0;
    size_t ring = (size_t)cfg->sliding_window * (size_t)cfg->head_dim * 2;
    for (int l = 0; l < cfg->n_layers; l++)
        if (memcmp(a->layers[l].ring, b->layers[l].ring, ring)) return 0;
    return 1;
}

/* Every (P, k, m) of the brief for prompt lengths `Ps`: A = prefill P, snapshot, k+1 verify rows, restore to
 * P+m+1, continue; B = prefill P, the m+1 kept rows, continue. Returns the number of cases run (0: failed). */
static int rb_cases(const rb_model *r, const int *Ps, int nP, const char *label) {
    const di_model_config *cfg = r->cfg;
    size_t V = (size_t)r->V;
    di_seq_state *S0 = NULL, *A = NULL, *B = NULL, *Bk = NULL;
    di_error err = {0};
    if (di_seq_create(cfg, MAXTOK, &S0, &err) || di_seq_create(cfg, MAXTOK, &A, &err) ||
        di_seq_create(cfg, MAXTOK, &B, &err) || di_seq_create(cfg, MAXTOK, &Bk, &err)) {
        fprintf(stderr, "    %s\n", err.msg);
        return 0;
    }
    void *room = di_dev_alloc(di_seq_snapshot_bytes(cfg, MAXK + 1));
    float *la = malloc(sizeof(float) * V * CONT), *lb = malloc(sizeof(float) * V * CONT);
    float *sa = malloc(sizeof(float) * V * (MAXK + 1)), *sb = malloc(sizeof(float) * V * (MAXK + 1));
    int ok = room && la && lb && sa && sb, cases = 0;
    uint32_t x = 777u + (uint32_t)cfg->n_layers;
    int32_t prompt[MAXTOK];
    for (int t = 0; t < MAXTOK; t++) prompt[t] = rb_token(r, &x);
    for (int ip = 0; ok && ip < nP; ip++) {
        int P = Ps[ip];
        while (ok && S0->n_tokens < P) { /* the shared prefix, fed in chunks of up to 16 */
            int n = P - (int)S0->n_tokens < 16 ? P - (int)S0->n_tokens : 16;
            ok = rb_step(r, S0, prompt + S0->n_tokens, n, NULL);
        }
        int32_t acc[MAXK + 1], cont[CONT];
        for (int i = 0; i <= MAXK; i++) acc[i] = rb_token(r, &x);
        for (int i = 0; i < CONT; i++) cont[i] = rb_token(r, &x);
        for (int m = 0; ok && m <= MAXK; m++) {
            /* B: only the m+1 kept rows ever run */
            ok = !di_seq_copy(B, S0, cfg, &err) && rb_step(r, B, acc, m + 1, sb) && !di_seq_copy(Bk, B, cfg, &err) &&
                 rb_continue(r, B, cont, lb);
            for (int k = m > 1 ? m : 1; ok && k <= MAXK; k++) {
                int32_t rows[MAXK + 1];
                memcpy(rows, acc, sizeof(int32_t) * (size_t)(m + 1));
                for (int i = m + 1; i <= k; i++) rows[i] = rb_token(r, &x); /* the rejected drafts */
                ok = !di_seq_copy(A, S0, cfg, &err);
                di_seq_snapshot_take(A, cfg, k + 1, room);
                ok = ok && rb_step(r, A, rows, k + 1, sa);
                deepinfer_status st = ok ? di_seq_snapshot_restore_to(A, cfg, room, P + m + 1, &err) : DEEPINFER_OK;
                if (st) {
                    fprintf(stderr, "    %s P=%d k=%d m=%d: restore: %s\n", label, P, k, m, err.msg);
                    ok = 0;
                }
                if (ok && memcmp(sa, sb, sizeof(float) * V * (size_t)(m + 1))) {
                    fprintf(stderr, "    %s P=%d k=%d m=%d: the kept rows' logits differ\n", label, P, k, m);
                    ok = 0;
                }
                if (ok && !rb_same_state(cfg, A, Bk)) {
                    fprintf(stderr, "    %s P=%d k=%d m=%d: the restored header or rings differ\n", label, P, k, m);
                    ok = 0;
                }
                ok = ok && rb_continue(r, A, cont, la);
                if (ok && memcmp(la, lb, sizeof(float) * V * CONT)) {
                    for (int i = 0; i < CONT; i++)
                        if (memcmp(la + i * V, lb + i * V, sizeof(float) * V)) {
                            fprintf(stderr, "    %s P=%d k=%d m=%d: continuation row %d differs\n", label, P, k, m, i);
                            break;
                        }
                    ok = 0;
                }
                cases += ok;
            }
        }
    }
    if (!ok && err.msg[0]) fprintf(stderr, "    %s: %s\n", label, err.msg);
    di_dev_free(room);
    free(la), free(lb), free(sa), free(sb);
    di_seq_destroy(S0), di_seq_destroy(A), di_seq_destroy(B), di_seq_destroy(Bk);
    return ok ? cases : 0;
}

/* V4 tiny: ratio 4 with overlap (layers 2, 4) and ratio 128 (layer 3), window 32. P covers every residue mod 4,
 * group 0 (its previous group the reset block) and the ratio-128 group end at 127 and the window's wrap at 128. */
TEST(spec_rollback_v4_tiny_is_exact) {
    rb_model r;
    CHECK(rb_load(&r, di_test_data("golden/v4-tiny-a"), 0, MAXK, 0));
    CHECK(r.cfg->layers[2].ratio == 4 && r.cfg->layers[2].compressor_overlap && r.cfg->layers[3].ratio == 128);
    static const int Ps[] = {0, 1, 2, 3, 5, 120, 121, 122, 123, 124, 125, 126, 127, 128};
    int n = rb_cases(&r, Ps, (int)(sizeof Ps / sizeof *Ps), "v4-tiny-a");
    CHECK_MSG(n == 14 * 20, "%d of %d cases exact", n, 14 * 20);
    fprintf(stderr, "    v4-tiny-a: %d (P, k, m) rollbacks continue bitwise like the kept rows alone\n", n);
    rb_free(&r);
}

/* V4.1 tiny: ratio 2 (layers 2, 3), ratio 1 (4..7), Engram at 1 and 2, window 32; released-reference decode
 * on, so the single-row continuation reads the published index-key layer (ikey_pub). */
TEST(spec_rollback_v41_tiny_is_exact) {
    rb_model r;
    CHECK(rb_load(&r, di_test_data(V41_TINY), 1, MAXK, 1));
    CHECK(r.cfg->layers[2].ratio == 2 && r.cfg->n_engram_layer_ids == 2);
    static const int Ps[] = {0, 1, 2, 3, 29, 30, 31, 32};
    int n = rb_cases(&r, Ps, (int)(sizeof Ps / sizeof *Ps), "v41-tiny-a");
    CHECK_MSG(n == 8 * 20, "%d of %d cases exact", n, 8 * 20);
    fprintf(stderr, "    v41-tiny-a: %d (P, k, m) rollbacks continue bitwise like the kept rows alone\n", n);
    rb_free(&r);
}

/* The V4.1 demo model (ratio 2 at 2..5, ratio 1 at 6..9, Engram, window 64). */
TEST(spec_rollback_v41_demo_is_exact) {
    rb_model r;
    CHECK(rb_load(&r, di_test_data("../../models/deepinfer-demo-v41"), 1, MAXK, 0));
    CHECK(r.cfg->layers[2].ratio == 2);
    static const int Ps[] = {1, 2, 63, 64};
    int n = rb_cases(&r, Ps, (int)(sizeof Ps / sizeof *Ps), "demo-v41");
    CHECK_MSG(n == 4 * 20, "%d of %d cases exact", n, 4 * 20);
    fprintf(stderr, "    demo-v41: %d (P, k, m) rollbacks continue bitwise like the kept rows alone\n", n);
    rb_free(&r);
}

/* The layout before speculation-aware buffers: r slots per gated compressor, 2r with overlap. */
static size_t a64(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t layout_without_drafts(const di_model_config *c) {
    int nl = c->n_layers + c->n_stages;
    size_t b = a64(sizeof(di_seq_state)) + a64((size_t)nl * sizeof(di_layer_state));
    for (int l = 0; l < nl; l++) {
        const di_layer_cfg *L = &c->layers[l];
        b += a64((size_t)c->sliding_window * (size_t)c->head_dim * 2);
        if (!L->has_compressor || !L->compressor_gated) continue;
        int co = L->compressor_overlap ? 2 : 1;
        b += 2 * a64((size_t)(co * L->ratio) * (size_t)(co * c->head_dim) * 4);
        if (c->arch == DI_ARCH_V4 && L->has_index_keys)
            b += 2 * a64((size_t)(co * L->ratio) * (size_t)(co * c->index_head_dim) * 4);
    }
    if (c->n_engram_layer_ids > 0) /* the Engram class ring: max_ngram - 1 + max_draft + 1 int32 (seq_state.h) */
        b += a64((size_t)(c->engram_max_ngram_size - 1 + c->max_draft + 1) * 4);
    return b;
}

/* max_draft 0 lays sequences out as before; a larger max_draft adds groups (G = overlap + ceil((r-1+D)/r)) and
 * changes no logit; the snapshot holds the header and the backbone rings only. */
TEST(spec_layout_sizes_and_bits) {
    rb_model r0, r5, r16;
    CHECK(rb_load(&r0, di_test_data("golden/v4-tiny-a"), 0, 0, 0));
    CHECK(rb_load(&r5, di_test_data("golden/v4-tiny-a"), 0, 5, 0));
    CHECK(rb_load(&r16, di_test_data("golden/v4-tiny-a"), 0, 16, 0));
    const di_model_config *c0 = r0.cfg, *c5 = r5.cfg;
    di_seq_layout lay;
    di_seq_layout_get(c0, 16, &lay);
    CHECK_MSG(lay.fixed_bytes == layout_without_drafts(c0), "max_draft 0: %zu bytes, before %zu", lay.fixed_bytes,
              layout_without_drafts(c0));
    /* layers 2 and 4: ratio 4 with overlap; layer 3: ratio 128 */
    CHECK(di_seq_cmp_groups(c0, 2) == 2 && di_seq_cmp_groups(c0, 3) == 1 && di_seq_cmp_groups(c0, 0) == 0);
    CHECK(di_seq_cmp_groups(c5, 2) == 1 + 2 && di_seq_cmp_groups(c5, 3) == 2);
    CHECK(di_seq_cmp_groups(r16.cfg, 2) == 1 + 5 && di_seq_cmp_groups(r16.cfg, 3) == 2);
    di_seq_layout lay5;
    di_seq_layout_get(c5, 16, &lay5);
    size_t w4 = 2 * (size_t)c5->head_dim, wi = 2 * (size_t)c5->index_head_dim, w128 = (size_t)c5->head_dim;
    size_t extra = 2 * (2 * (4 * w4 * 4) + 2 * (4 * wi * 4)) + 2 * (128 * w128 * 4); /* one more group each */
    CHECK_MSG(lay5.fixed_bytes == lay.fixed_bytes + extra, "max_draft 5: %zu bytes, want %zu", lay5.fixed_bytes,
              lay.fixed_bytes + extra);
    size_t ring_row = (size_t)c0->head_dim * 2;
    CHECK(di_seq_snapshot_bytes(c0, 6) - di_seq_snapshot_bytes(c0, 0) == (size_t)c0->n_layers * 6 * ring_row);
    CHECK(di_seq_snapshot_bytes(c0, 1000) - di_seq_snapshot_bytes(c0, 0) ==
          (size_t)c0->n_layers * (size_t)c0->sliding_window * ring_row);
    /* V4.1 tiny: ratio 2 sources (no overlap) at 2 and 3, ratio 1 (no partial group) from 4 */
    rb_model v0, v5;
    CHECK(rb_load(&v0, di_test_data(V41_TINY), 1, 0, 0) && rb_load(&v5, di_test_data(V41_TINY), 1, 5, 0));
    di_seq_layout_get(v0.cfg, 16, &lay);
    CHECK(lay.fixed_bytes == layout_without_drafts(v0.cfg));
    CHECK(di_seq_engram_ring(v0.cfg) == 3 + 1 && di_seq_engram_ring(v5.cfg) == 3 + 5 + 1 && di_seq_engram_ring(c0) == 0);
    CHECK(di_seq_cmp_groups(v0.cfg, 2) == 1 && di_seq_cmp_groups(v5.cfg, 2) == 3 && di_seq_cmp_groups(v5.cfg, 4) == 0);
    /* the same 150 prompt tokens and 6 decode rows give the same bits in every layout */
    rb_model *ms[3] = {&r0, &r5, &r16};
    int V = r0.V;
    enum { ROWS = 15 + 6 }; /* the last prompt chunk's rows, then the decode rows */
    float *ref = malloc(sizeof(float) * (size_t)V * ROWS), *got = malloc(sizeof(float) * (size_t)V * ROWS);
    CHECK(ref && got);
    for (int i = 0; i < 3; i++) {
        di_seq_state *s = NULL;
        CHECK(di_seq_create(ms[i]->cfg, MAXTOK, &s, NULL) == DEEPINFER_OK);
        uint32_t x = 99;
        int32_t tok[16];
        float *out = i ? got : ref;
        for (int t = 0; t < 150; t += 15) {
            for (int j = 0; j < 15; j++) tok[j] = rb_token(ms[i], &x);
            CHECK(rb_step(ms[i], s, tok, 15, t + 15 == 150 ? out : NULL));
        }
        for (int j = 15; j < ROWS; j++) {
            tok[0] = rb_token(ms[i], &x);
            CHECK(rb_step(ms[i], s, tok, 1, out + (size_t)j * V));
        }
        di_seq_destroy(s);
        CHECK_MSG(!i || !memcmp(ref, got, sizeof(float) * (size_t)V * ROWS), "max_draft %d changed the logits",
                  ms[i]->cfg->max_draft);
    }
    fprintf(stderr, "    max_draft 0 = the layout without drafts; 5 and 16 add compressor groups, same logits\n");
    free(ref), free(got);
    rb_free(&r0), rb_free(&r5), rb_free(&r16), rb_free(&v0), rb_free(&v5);
}

/* Refused: a load option out of range, more than the Engram history rolls back, a pool for longer drafts than
 * the model was loaded for, n_keep outside the snapshot's range, more discarded rows than max_draft. A refused
 * restore changes nothing. */
TEST(spec_rollback_errors) {
    rb_model r;
    di_error err = {0};
    for (int bad = -1; bad <= 17; bad += 18) {
        di_v4_options o = {.max_draft = bad};
        di_v4_model *m = NULL;
        CHECK(di_v4_load(di_test_data("golden/v4-tiny-a"), &o, &m, &err) == DEEPINFER_ERR_INVALID_ARGUMENT && !m);
        CHECK_MSG(strstr(err.msg, "max_draft") && strstr(err.msg, "[0, 16]"), "%s", err.msg);
    }
    di_model_config probe;
    CHECK(di_config_load(di_test_data("golden/v4-tiny-a"), &probe, NULL) == DEEPINFER_OK);
    CHECK(di_seq_set_max_draft(&probe, 17, &err) == DEEPINFER_ERR_INVALID_ARGUMENT && strstr(err.msg, "max_draft"));
    CHECK(di_config_load(di_test_data(V41_TINY), &probe, NULL) == DEEPINFER_OK);
    CHECK(di_seq_set_max_draft(&probe, 14, &err) == DEEPINFER_ERR_INVALID_ARGUMENT && strstr(err.msg, "Engram"));
    CHECK(di_seq_set_max_draft(&probe, 13, &err) == DEEPINFER_OK && probe.max_draft == 13);

    CHECK(rb_load(&r, di_test_data("golden/v4-tiny-a"), 0, 3, 0));
    const di_model_config *cfg = r.cfg;
    di_pool_geom g;
    CHECK(di_pool_geom_compute(cfg, 16, 1024, 3, &g, NULL) == DEEPINFER_OK);
    CHECK(di_pool_geom_compute(cfg, 16, 1024, 4, &g, &err) == DEEPINFER_ERR_INVALID_ARGUMENT &&
          strstr(err.msg, "max_draft"));
    di_seq_state *s = NULL;
    CHECK(di_seq_create(cfg, MAXTOK, &s, NULL) == DEEPINFER_OK);
    void *room = di_dev_alloc(di_seq_snapshot_bytes(cfg, 8));
    CHECK(room);
    uint32_t x = 5;
    int32_t tok[8];
    for (int i = 0; i < 8; i++) tok[i] = rb_token(&r, &x);
    CHECK(rb_step(&r, s, tok, 7, NULL));                         /* P = 7 */
    di_seq_snapshot_take(s, cfg, 5, room);
    CHECK(rb_step(&r, s, tok, 5, NULL));                         /* at 12 */
    CHECK(di_seq_snapshot_restore_to(s, cfg, room, 6, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);  /* < P */
    CHECK(di_seq_snapshot_restore_to(s, cfg, room, 13, &err) == DEEPINFER_ERR_INVALID_ARGUMENT); /* > P + k */
    CHECK(di_seq_snapshot_restore_to(s, cfg, room, 8, &err) == DEEPINFER_ERR_INVALID_ARGUMENT &&
          strstr(err.msg, "max_draft")); /* discards 4 > 3 */
    CHECK(di_seq_snapshot_restore(s, cfg, room, &err) == DEEPINFER_ERR_INVALID_ARGUMENT); /* discards 5 */
    CHECK(s->n_tokens == 12);
    CHECK(di_seq_snapshot_restore_to(s, cfg, room, 9, &err) == DEEPINFER_OK && s->n_tokens == 9); /* discards 3 */
    /* a snapshot for 5 tokens after a step of 2: the sequence stays within [P, P + k] */
    di_seq_snapshot_take(s, cfg, 5, room);
    CHECK(rb_step(&r, s, tok, 2, NULL));
    CHECK(di_seq_snapshot_restore_to(s, cfg, room, 12, &err) == DEEPINFER_ERR_INVALID_ARGUMENT); /* never ran */
    CHECK(di_seq_snapshot_restore_to(s, cfg, room, 11, &err) == DEEPINFER_OK && s->n_tokens == 11); /* 3 counted */
    di_seq_snapshot_take(s, cfg, 2, room);
    CHECK(rb_step(&r, s, tok, 3, NULL)); /* more than the snapshot covers */
    CHECK(di_seq_snapshot_restore_to(s, cfg, room, 11, &err) == DEEPINFER_ERR_INVALID_ARGUMENT && s->n_tokens == 14);
    /* max_draft 0: nothing may be discarded, keeping everything is fine */
    rb_model r0;
    CHECK(rb_load(&r0, di_test_data("golden/v4-tiny-a"), 0, 0, 0));
    di_seq_state *s0 = NULL;
    CHECK(di_seq_create(r0.cfg, MAXTOK, &s0, NULL) == DEEPINFER_OK);
    di_seq_snapshot_take(s0, r0.cfg, 2, room);
    CHECK(rb_step(&r0, s0, tok, 2, NULL));
    CHECK(di_seq_snapshot_restore_to(s0, r0.cfg, room, 1, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(di_seq_snapshot_restore_to(s0, r0.cfg, room, 2, &err) == DEEPINFER_OK && s0->n_tokens == 2);
    di_seq_destroy(s0);
    di_seq_destroy(s);
    di_dev_free(room);
    rb_free(&r0);
    rb_free(&r);
}

/* The engine hands max_draft_tokens to the load (engine_open.c): within range it opens, beyond it is refused. */
TEST(spec_engine_max_draft_tokens_reaches_the_layout) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data("golden/v4-tiny-a");
    c.max_model_len = 512;
    c.max_num_seqs = 2;
    deepinfer_engine *e = NULL;
    char msg[512];
    deepinfer_memory_plan p0, p5;
    CHECK_MSG(deepinfer_engine_open(&c, &e, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    deepinfer_engine_plan(e, &p0);
    deepinfer_engine_close(e);
    c.max_draft_tokens = 5;
    CHECK_MSG(deepinfer_engine_open(&c, &e, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    deepinfer_engine_plan(e, &p5);
    deepinfer_engine_close(e);
    CHECK(p5.slot_bytes > p0.slot_bytes); /* the snapshot room and one more compressor group per layer */
    c.max_draft_tokens = 17;
    CHECK(deepinfer_engine_open(&c, &e, msg, sizeof msg) == DEEPINFER_ERR_INVALID_ARGUMENT && !e);
    CHECK_MSG(strstr(msg, "max_draft"), "%s", msg);
}

/* The op itself: with more groups the same rows pool to the same bits (CPU, from the reset state). */
TEST(spec_cmp_gated_rows_groups_pool_the_same) {
    enum { HD = 64, M = 40 };
    static const int cfgs[][3] = {{4, 1, 2}, {4, 1, 6}, {128, 0, 1}, {128, 0, 2}, {2, 0, 1}, {2, 0, 9}}; /* r, ov, G */
    float *ref = NULL;
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        int r = cfgs[c][0], ov = cfgs[c][1], G = cfgs[c][2], w = (ov ? 2 : 1) * HD;
        int rows = r == 128 ? 300 : M, ne = 0;
        size_t slots = (size_t)G * r * w;
        float *kv = malloc(slots * 4), *sc = malloc(slots * 4), *pk = malloc((size_t)rows * w * 4),
              *ps = malloc((size_t)rows * w * 4), *ape = malloc((size_t)r * w * 4), *out = malloc((size_t)rows * HD * 4);
        int *seg = calloc((size_t)rows, sizeof(int)), *emit = malloc((size_t)rows * sizeof(int));
        int64_t *pos = malloc((size_t)rows * sizeof(int64_t));
        CHECK(kv && sc && pk && ps && ape && out && seg && emit && pos);
        for (size_t i = 0; i < slots; i++) kv[i] = 0.0f, sc[i] = -INFINITY;
        uint32_t x = 3;
        for (size_t i = 0; i < (size_t)rows * w; i++)
            pk[i] = (float)(int)(rb_rand(&x) % 2001 - 1000) / 250.0f, ps[i] = (float)(int)(rb_rand(&x) % 2001 - 1000) / 300.0f;
        for (size_t i = 0; i < (size_t)r * w; i++) ape[i] = (float)(int)(rb_rand(&x) % 201 - 100) / 100.0f;
        for (int i = 0; i < rows; i++) pos[i] = i, emit[i] = (i + 1) % r ? -1 : ne++;
        float *skv[1] = {kv}, *ssc[1] = {sc};
        /* rows in steps of 1..7, as a decode / verify schedule would */
        for (int i0 = 0, n = 1; i0 < rows; i0 += n, n = n % 7 + 1) {
            int k = rows - i0 < n ? rows - i0 : n; /* emit[] holds indices into `out` */
            di_cmp_gated_rows(NULL, k, seg, emit + i0, pos + i0, skv, ssc, pk + (size_t)i0 * w, ps + (size_t)i0 * w,
                              ape, r, ov, G, HD, out);
        }
        if (c % 2 == 0) {
            free(ref);
            ref = malloc((size_t)ne * HD * 4);
            CHECK(ref);
            memcpy(ref, out, (size_t)ne * HD * 4);
        } else {
            CHECK_MSG(!memcmp(ref, out, (size_t)ne * HD * 4), "ratio %d overlap %d: %d groups pool differently", r,
                      ov, G);
        }
        free(kv), free(sc), free(pk), free(ps), free(ape), free(out), free(seg), free(emit), free(pos);
    }
    free(ref);
}
