/*
 * Context-parallel prefill (src/model/cp_prefill.h) over the loopback
 * communicator: a long prompt prefilled by 2 and 4 ranks (threads, each
 * with its own model and sequence copy) gives logits bitwise those of one
 * rank's prefill, every rank's sequence state after it equals the one-rank
 * state byte for byte (rings, compressor buffers, compressed KV, index
 * keys, Engram history, n_tokens), and greedy decode continued on the CP
 * state (on rank 0 and on the last rank) gives the one-rank tokens and
 * logits. V4 and V4.1 golden checkpoints (2 ranks: two passes; 4 ranks:
 * one) and the demo model (max_rows 64: several passes). Plus the refusals.
 */
#include <pthread.h>
#include <stdlib.h>

#include "model/cp_prefill.h"
#include "model/dsv41_internal.h"
#include "model/dsv4_internal.h"
#include "model/moe_ep.h"
#include "parallel/comm.h"
#include "test.h"

#define DEMO_MODEL "../../models/deepinfer-demo-v41"
#define DECODE 3
#define MAXR 4

typedef struct kind {
    int v41;
    const char *dir;
    const char *engram_hash;
} kind;

typedef struct rank_model {
    void *m;
    int v41;
    di_seq_state *seq;
} rank_model;

static const di_model_config *cfg_of(const rank_model *r) {
    return r->v41 ? di_v41_config(r->m) : di_v4_config(r->m);
}

/* ep_size > 0: rank ep_rank of expert parallelism over comm, in the attention-DP layout. */
static deepinfer_status load_ep(const kind *k, int max_rows, int ep_rank, int ep_size, di_comm *comm, rank_model *out,
                                di_error *err) {
    memset(out, 0, sizeof *out);
    di_v4_options o = {.engram_hash = k->engram_hash, .max_rows = max_rows, .ep_rank = ep_rank, .ep_size = ep_size,
                       .comm = ep_size ? comm : NULL};
    out->v41 = k->v41;
    deepinfer_status st = k->v41 ? di_v41_load(k->dir, &o, (di_v41_model **)&out->m, err)
                                 : di_v4_load(k->dir, &o, (di_v4_model **)&out->m, err);
    if (!st && ep_size) {
        di_ep_model *ep = k->v41 ? ((di_v41_model *)out->m)->ep : ((di_v4_model *)out->m)->ep;
        st = di_ep_set_dp(ep, 1, err);
    }
    if (!st) st = k->v41 ? di_v41_seq_new(out->m, &out->seq, err) : di_v4_seq_new(out->m, &out->seq, err);
    return st;
}

static deepinfer_status load(const kind *k, int max_rows, rank_model *out, di_error *err) {
    return load_ep(k, max_rows, 0, 0, NULL, out, err);
}

static void unload(rank_model *r) {
    di_seq_destroy(r->seq);
    if (r->v41) di_v41_free(r->m);
    else if (r->m) di_v4_free(r->m);
}

static void prompt(int n, int V, int32_t *tok) {
    for (int i = 0; i < n; i++) tok[i] = 3 + (i * 31 + (i / 7) * 13) % (V < 900 ? V - 3 : 897); /* below V4.1's image token */
}

/* The logit rows checked: every 41st row and the last. */
static int logit_rows(int n, int *rows) {
    int k = 0;
    for (int i = 0; i < n - 1; i += 41) rows[k++] = i;
    rows[k++] = n - 1;
    return k;
}

static deepinfer_status forward(rank_model *r, const di_v4_batch *b, di_error *err) {
    return r->v41 ? di_v41_forward(r->m, b, err) : di_v4_forward(r->m, b, err);
}

static int argmax(const float *l, int V) {
    int a = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[a]) a = i;
    return a;
}

/* Greedy decode after the prefill: DECODE steps of one row; out [DECODE][V], tokens [DECODE]. */
static deepinfer_status decode(rank_model *r, const float *last, float *out, int32_t *toks, di_error *err) {
    int V = (int)cfg_of(r)->vocab_size, row = 0;
    for (int s = 0; s < DECODE; s++) {
        int32_t t = argmax(s ? out + (size_t)(s - 1) * V : last, V);
        int64_t pos = r->seq->n_tokens;
        di_seq_state *sq = r->seq;
        toks[s] = t;
        di_v4_batch b = {.n = 1, .tokens = &t, .pos = &pos, .seq = &sq, .n_logits = 1, .logit_rows = &row,
                         .logits = out + (size_t)s * V};
        deepinfer_status st = forward(r, &b, err);
        if (st) return st;
    }
    return DEEPINFER_OK;
}

/* Byte equality of two sequences' backbone state after n tokens. */
static int same_state(const di_model_config *c, const di_seq_state *a, const di_seq_state *b, int64_t n, char *why,
                      size_t wn) {
    if (a->n_tokens != b->n_tokens || a->ikey_pub != b->ikey_pub) {
        snprintf(why, wn, "n_tokens %lld / %lld, ikey_pub %d / %d", (long long)a->n_tokens, (long long)b->n_tokens,
                 a->ikey_pub, b->ikey_pub);
        return 0;
    }
    if (memcmp(&a->engram, &b->engram, sizeof a->engram)) {
        snprintf(why, wn, "Engram history");
        return 0;
    }
    size_t ring = (size_t)c->sliding_window * (size_t)c->head_dim * 2;
    for (int l = 0; l < c->n_layers; l++) {
        const di_layer_state *x = &a->layers[l], *y = &b->layers[l];
        if (x->ring && memcmp(x->ring, y->ring, ring)) return snprintf(why, wn, "layer %d: SWA ring", l), 0;
        const di_cmp_state *cx[2] = {&x->cmp, &x->icmp}, *cy[2] = {&y->cmp, &y->icmp};
        for (int i = 0; i < 2; i++) {
            size_t nb = (size_t)cx[i]->slots * (size_t)cx[i]->width * 4;
            if (nb && (memcmp(cx[i]->kv, cy[i]->kv, nb) || memcmp(cx[i]->score, cy[i]->score, nb)))
                return snprintf(why, wn, "layer %d: %s compressor buffers", l, i ? "index" : "main"), 0;
        }
        int64_t rows = di_seq_rows_needed(c, l, n);
        const di_rowstore *sx[2] = {&x->ckv, &x->ikey}, *sy[2] = {&y->ckv, &y->ikey};
        for (int i = 0; i < 2; i++) {
            if (!sx[i]->row_elems) continue;
            int64_t have = rows < di_rowstore_capacity(sx[i]) ? rows : di_rowstore_capacity(sx[i]);
            for (int64_t j = 0; j < have; j++)
                if (memcmp(di_rowstore_row(sx[i], j), di_rowstore_row(sy[i], j), (size_t)sx[i]->row_elems * 2))
                    return snprintf(why, wn, "layer %d: %s row %lld", l, i ? "index-key" : "compressed-KV", (long long)j), 0;
        }
    }
    return 1;
}

typedef struct decode_job {
    rank_model *r;
    const float *last;
    float *out;
    int32_t toks[DECODE];
    deepinfer_status st;
    di_error err;
} decode_job;

static void *run_decode(void *p) {
    decode_job *j = p;
    j->st = decode(j->r, j->last, j->out, j->toks, &j->err);
    return NULL;
}

typedef struct job {
    rank_model *r;
    di_comm *comm;
    di_cp_prefill p;
    deepinfer_status st;
    di_error err;
} job;

static void *run_cp(void *p) {
    job *j = p;
    j->p.comm = j->comm;
    j->p.seq = j->r->seq;
    j->st = j->r->v41 ? di_v41_cp_prefill(j->r->m, &j->p, &j->err) : di_v4_cp_prefill(j->r->m, &j->p, &j->err);
    return NULL;
}

/* A prompt of n rows: one rank's prefill (one batch), then CP over each of
 * sizes[], with every rank's logits, state and the decode after it compared. */
static void check_cp_ep(const kind *k, int n, int max_rows, const int *sizes, int nsizes, int with_ep) {
    di_error err = {0};
    rank_model ref;
    if (load(k, max_rows, &ref, &err)) {
        di_test_fail(__FILE__, __LINE__, "load %s: %s", k->dir, err.msg);
        unload(&ref);
        return;
    }
    const di_model_config *c = cfg_of(&ref);
    int V = (int)c->vocab_size;
    int32_t *tok = malloc((size_t)n * 4);
    int64_t *pos = malloc((size_t)n * 8);
    di_seq_state **sq = malloc((size_t)n * sizeof *sq);
    int *rows = malloc((size_t)n * sizeof *rows);
    int nl = logit_rows(n, rows);
    float *want = malloc((size_t)nl * V * 4), *wdec = malloc((size_t)DECODE * V * 4);
    float *got[MAXR], *gdec[MAXR];
    int32_t wt[DECODE];
    decode_job dj[MAXR];
    for (int r = 0; r < MAXR; r++) got[r] = malloc((size_t)nl * V * 4), gdec[r] = malloc((size_t)DECODE * V * 4);
    prompt(n, V, tok);
    for (int i = 0; i < n; i++) pos[i] = i, sq[i] = ref.seq;
    di_v4_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = sq, .n_logits = nl, .logit_rows = rows, .logits = want};
    int ok = !forward(&ref, &b, &err);
    CHECK_MSG(ok, "%s: one-rank prefill: %s", k->dir, err.msg);
    di_seq_state *ref_after = NULL; /* the one-rank state after the prefill, kept for the comparison */
    rank_model snap;
    ok = ok && !load(k, max_rows, &snap, &err);
    if (ok) {
        b.seq = (di_seq_state *const *)sq;
        for (int i = 0; i < n; i++) sq[i] = snap.seq;
        ok = !forward(&snap, &b, &err);
        ref_after = snap.seq;
    }
    ok = ok && !decode(&ref, want + (size_t)(nl - 1) * V, wdec, wt, &err);
    CHECK_MSG(ok, "%s: one-rank decode: %s", k->dir, err.msg);
    for (int si = 0; ok && si < nsizes; si++) {
        int S = sizes[si];
        di_comm *comm[MAXR] = {0};
        rank_model rm[MAXR];
        job jobs[MAXR];
        pthread_t th[MAXR];
        memset(rm, 0, sizeof rm);
        int run = !di_comm_loopback_group(S, comm, &err);
        for (int r = 0; run && r < S; r++) run = !load_ep(k, max_rows, with_ep ? r : 0, with_ep ? S : 0, comm[r], &rm[r], &err);
        CHECK_MSG(run, "%s CP %d: setup: %s", k->dir, S, err.msg);
        for (int r = 0; run && r < S; r++) {
            memset(got[r], 0xff, (size_t)nl * V * 4);
            jobs[r] = (job){.r = &rm[r], .comm = comm[r],
                            .p = {.n = n, .tokens = tok, .n_logits = nl, .logit_rows = rows, .logits = got[r]}};
            if (pthread_create(&th[r], NULL, run_cp, &jobs[r])) run = 0;
        }
        for (int r = 0; run && r < S; r++) pthread_join(th[r], NULL);
        for (int r = 0; run && r < S; r++) {
            CHECK_MSG(!jobs[r].st, "%s CP %d rank %d: %s", k->dir, S, r, jobs[r].err.msg);
            if (jobs[r].st) continue;
            int bad = -1;
            for (int i = 0; i < nl && bad < 0; i++)
                if (memcmp(got[r] + (size_t)i * V, want + (size_t)i * V, (size_t)V * 4)) bad = rows[i];
            CHECK_MSG(bad < 0, "%s CP %d rank %d: prefill logits differ (first at prompt row %d)", k->dir, S, r, bad);
            char why[160] = "";
            CHECK_MSG(same_state(c, rm[r].seq, ref_after, n, why, sizeof why), "%s CP %d rank %d: state differs: %s",
                      k->dir, S, r, why);
        }
        /* decode continues on the state of rank 0 (the owner of the last chunk) and of the last rank;
         * with EP every rank decodes at once (their MoE layers meet), each on its own copy */
        for (int r = 0; run && r < S; r++) {
            if (jobs[r].st) run = 0;
            dj[r] = (decode_job){.r = &rm[r], .last = got[r] + (size_t)(nl - 1) * V, .out = gdec[r]};
        }
        if (run && with_ep) {
            for (int r = 0; r < S; r++) pthread_create(&th[r], NULL, run_decode, &dj[r]);
            for (int r = 0; r < S; r++) pthread_join(th[r], NULL);
        } else {
            for (int r = 0; run && r < S; r += S - 1) run_decode(&dj[r]);
        }
        for (int r = 0; run && r < S; r += with_ep || S == 1 ? 1 : S - 1) {
            CHECK_MSG(!dj[r].st, "%s CP %d rank %d: decode: %s", k->dir, S, r, dj[r].err.msg);
            CHECK_MSG(!memcmp(wt, dj[r].toks, sizeof wt) && !memcmp(wdec, gdec[r], (size_t)DECODE * V * 4),
                      "%s CP %d rank %d: decode after CP differs from one rank", k->dir, S, r);
        }
        for (int r = 0; r < S; r++) unload(&rm[r]);
        for (int r = 0; r < S; r++) di_comm_free(comm[r]);
    }
    if (ref_after) unload(&snap);
    unload(&ref);
    free(tok), free(pos), free(sq), free(rows), free(want), free(wdec);
    for (int r = 0; r < MAXR; r++) free(got[r]), free(gdec[r]);
}

static void check_cp(const kind *k, int n, int max_rows, const int *sizes, int nsizes) {
    check_cp_ep(k, n, max_rows, sizes, nsizes, 0);
}

static const int SIZES[] = {2, 4};

TEST(v4_cp_prefill_bitwise_equal_one_rank) {
    kind k = {0, di_test_data("golden/v4-tiny-a"), NULL};
    check_cp(&k, 600, 256, SIZES, 2); /* 2 ranks: two passes of 300 rows; 4 ranks: one */
}

TEST(v41_cp_prefill_bitwise_equal_one_rank) {
    char hash[512];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data("golden/v41-tiny-a"));
    kind k = {1, di_test_data("golden/v41-tiny-a"), hash};
    check_cp(&k, 520, 256, SIZES, 2);
}

TEST(demo_cp_prefill_bitwise_equal_one_rank) {
    kind k = {1, di_test_data(DEMO_MODEL), NULL};
    check_cp(&k, 300, 64, SIZES, 2); /* several passes per rank count */
}

/* With expert parallelism in the attention-DP layout (the engine's --dp N --ep N): each rank's
 * MoE joins the others' rows; the MoE combine order keeps the bits. */
TEST(cp_prefill_with_ep_bitwise_equal_one_rank) {
    static const int two[] = {2};
    kind v4 = {0, di_test_data("golden/v4-tiny-a"), NULL}; /* 6 experts */
    check_cp_ep(&v4, 400, 256, two, 1, 1);
    char hash[512];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data("golden/v41-tiny-a"));
    kind v41 = {1, di_test_data("golden/v41-tiny-a"), hash}; /* 8 experts */
    check_cp_ep(&v41, 400, 256, SIZES, 2, 1);
}

/* Refusals, before any collective: too few rows, a bad token. One rank (no communicator). */
TEST(cp_prefill_refusals) {
    di_error err = {0};
    kind k = {0, di_test_data("golden/v4-tiny-a"), NULL};
    rank_model r;
    if (load(&k, 256, &r, &err)) {
        di_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        unload(&r);
        return;
    }
    int32_t tok[8] = {5, 6, 7, 8, 9, 10, 11, 12};
    di_cp_prefill p = {.seq = r.seq, .n = 1, .tokens = tok};
    CHECK_EQ_INT(di_v4_cp_prefill(r.m, &p, &err), DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.msg, "at least 2 rows") != NULL);
    tok[3] = 1 << 30;
    p.n = 8;
    CHECK_EQ_INT(di_v4_cp_prefill(r.m, &p, &err), DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.msg, "vocabulary") != NULL);
    CHECK_EQ_INT(r.seq->n_tokens, 0);
    tok[3] = 4;
    CHECK_EQ_INT(di_v4_cp_prefill(r.m, &p, &err), DEEPINFER_OK);
    CHECK_EQ_INT(r.seq->n_tokens, 8);
    unload(&r);
}

/* V4.1 loaded with the released-reference index keys (not chunk-invariant) is refused by name. */
TEST(v41_cp_prefill_refuses_released_index_keys) {
    char hash[512];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data("golden/v41-tiny-a"));
    di_v4_options o = {.engram_hash = hash, .released_index_k = 1};
    di_error err = {0};
    di_v41_model *m = NULL;
    di_seq_state *sq = NULL;
    if (di_v41_load(di_test_data("golden/v41-tiny-a"), &o, &m, &err) || di_v41_seq_new(m, &sq, &err)) {
        di_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
    } else {
        int32_t tok[8] = {5, 6, 7, 8, 9, 10, 11, 12};
        di_cp_prefill p = {.seq = sq, .n = 8, .tokens = tok};
        deepinfer_status st = di_v41_cp_prefill(m, &p, &err);
        if (st != DEEPINFER_ERR_UNSUPPORTED || !strstr(err.msg, "released_index_k") || sq->n_tokens != 0)
            di_test_fail(__FILE__, __LINE__, "status %d, n_tokens %lld: %s", st, (long long)sq->n_tokens, err.msg);
    }
    di_seq_destroy(sq);
    di_v41_free(m);
}
