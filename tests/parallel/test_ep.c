/*
 * MoE expert parallelism (src/model/moe_ep.h) over the loopback
 * communicator (src/parallel/comm.h): ranks are threads of this process,
 * each with its own model instance holding only its routed experts; they
 * run the same steps concurrently (sharing the process-wide thread pool,
 * threadpool.h). Every rank's logits must be bitwise those of one rank
 * with every expert: --ep 2, --ep 4 (where the experts divide), and EPLB
 * replica maps applied between steps (replicas must actually run entries).
 * V4 and V4.1 golden checkpoints and the demo model; a prefill of several
 * sequences and three decode steps of 1-2 rows each. Plus the load errors
 * and the communicator's own exchange.
 */
#include <pthread.h>
#include <stdlib.h>

#include "model/dsv41_internal.h"
#include "model/dsv4_internal.h"
#include "model/moe_ep.h"
#include "parallel/comm.h"
#include "test.h"

#define NS 5
#define STEPS 4 /* the prefill, then three decode steps */
#define MAXR 4
#define DEMO_MODEL "../../models/deepinfer-demo-v41"

typedef struct kind {
    int v41;
    const char *dir;
    const char *engram_hash; /* V4.1 golden: its manifest */
} kind;

typedef struct rank_model {
    void *m;
    int v41;
    di_seq_state *seq[NS];
} rank_model;

static const di_model_config *cfg_of(const rank_model *r) {
    return r->v41 ? di_v41_config(r->m) : di_v4_config(r->m);
}
static di_ep_model *ep_of(const rank_model *r) {
    return r->v41 ? ((di_v41_model *)r->m)->ep : ((di_v4_model *)r->m)->ep;
}

static deepinfer_status load(const kind *k, int rank, int size, di_comm *comm, rank_model *out, di_error *err) {
    memset(out, 0, sizeof *out);
    di_v4_options o = {.engram_hash = k->engram_hash, .ep_rank = rank, .ep_size = size, .comm = comm};
    out->v41 = k->v41;
    deepinfer_status st = k->v41 ? di_v41_load(k->dir, &o, (di_v41_model **)&out->m, err)
                                 : di_v4_load(k->dir, &o, (di_v4_model **)&out->m, err);
    for (int s = 0; !st && s < NS; s++)
        st = k->v41 ? di_v41_seq_new(out->m, &out->seq[s], err) : di_v4_seq_new(out->m, &out->seq[s], err);
    return st;
}

static void unload(rank_model *r) {
    for (int s = 0; s < NS; s++) di_seq_destroy(r->seq[s]);
    if (r->v41) di_v41_free(r->m);
    else di_v4_free(r->m);
}

/* Rows of one step: step 0 prefills every sequence (9 + 5s tokens), later
 * steps decode 1-2 tokens per sequence. Logits of every row. */
static int step_rows(int step, int V, int32_t *tok, int64_t *pos, int *which, const rank_model *r) {
    int n = 0;
    for (int s = 0; s < NS; s++) {
        int len = step == 0 ? 9 + 5 * s : 1 + (s + step) % 2;
        for (int i = 0; i < len; i++, n++) {
            tok[n] = 3 + (i * 31 + s * 17 + step * 53) % (V - 3);
            pos[n] = (step == 0 ? 0 : r->seq[s]->n_tokens) + i;
            which[n] = s;
        }
    }
    return n;
}

static int max_rows_total(void) { return NS * (9 + 5 * (NS - 1)) + NS * 2 * (STEPS - 1); }

typedef struct job {
    rank_model *r;
    int step;
    float *logits; /* this step's logits */
    int nrows;
    deepinfer_status st;
    di_error err;
} job;

static void *run_step(void *p) {
    job *j = p;
    const di_model_config *c = cfg_of(j->r);
    int V = (int)c->vocab_size, cap = max_rows_total();
    int32_t *tok = calloc((size_t)cap, 4);
    int64_t *pos = calloc((size_t)cap, 8);
    int *which = calloc((size_t)cap, sizeof(int)), *rows = calloc((size_t)cap, sizeof(int));
    di_seq_state **rs = calloc((size_t)cap, sizeof *rs);
    if (!tok || !pos || !which || !rows || !rs) {
        j->st = DEEPINFER_ERR_OUT_OF_MEMORY;
    } else {
        int n = step_rows(j->step, V, tok, pos, which, j->r);
        for (int i = 0; i < n; i++) rs[i] = j->r->seq[which[i]], rows[i] = i;
        di_v4_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = rs, .n_logits = n, .logit_rows = rows,
                         .logits = j->logits};
        j->nrows = n;
        j->st = j->r->v41 ? di_v41_forward(j->r->m, &b, &j->err) : di_v4_forward(j->r->m, &b, &j->err);
    }
    free(tok), free(pos), free(which), free(rows), free(rs);
    return NULL;
}

/* All steps' logits of every rank: out[r] (each STEPS * max rows * V).
 * eplb_capacity > 0: after each step a replica map is planned on every
 * rank (the same on each) and applied, rank after rank. */
static int run_group_comm(const kind *k, int S, int one_comm, int eplb_capacity, float **out, size_t *written,
                          int64_t *replica_entries) {
    di_comm *comm[8] = {0};
    rank_model rm[8];
    di_error err = {0};
    int ok = 1, nload = 0, with = S > 1 || one_comm;
    if (with && di_comm_loopback_group(S, comm, &err)) ok = 0;
    for (int r = 0; ok && r < S; r++, nload++)
        if (load(k, r, S, with ? comm[r] : NULL, &rm[r], &err)) {
            di_test_fail(__FILE__, __LINE__, "%s --ep %d rank %d: %s", k->dir, S, r, err.msg);
            ok = 0;
        }
    if (ok && with && !ep_of(&rm[0])) {
        di_test_fail(__FILE__, __LINE__, "%s --ep %d with a communicator: no EP state", k->dir, S);
        ok = 0;
    }
    size_t V = ok ? (size_t)cfg_of(&rm[0])->vocab_size : 0, per = (size_t)max_rows_total() * V;
    size_t at = 0;
    for (int step = 0; ok && step < STEPS; step++) {
        job jobs[8];
        pthread_t th[8];
        for (int r = 0; r < S; r++) {
            jobs[r] = (job){.r = &rm[r], .step = step, .logits = out[r] + at};
            if (pthread_create(&th[r], NULL, run_step, &jobs[r])) ok = 0;
        }
        for (int r = 0; r < S; r++) pthread_join(th[r], NULL);
        for (int r = 0; ok && r < S; r++)
            if (jobs[r].st) {
                di_test_fail(__FILE__, __LINE__, "%s --ep %d rank %d step %d: %s", k->dir, S, r, step, jobs[r].err.msg);
                ok = 0;
            }
        if (ok) at += (size_t)jobs[0].nrows * V;
        if (ok && at > per) ok = 0;
        for (int r = 0; ok && eplb_capacity > 0 && r < S; r++) {
            di_eplb_map map;
            if (di_eplb_plan(ep_of(&rm[r]), eplb_capacity, &map, &err) || di_eplb_apply(ep_of(&rm[r]), &map, &err)) {
                di_test_fail(__FILE__, __LINE__, "EPLB rank %d: %s", r, err.msg);
                ok = 0;
            }
            di_eplb_map_free(&map);
        }
    }
    *written = at;
    if (replica_entries) {
        *replica_entries = 0;
        for (int r = 0; ok && r < S; r++) {
            di_ep_pull_counters(ep_of(&rm[r])); /* the device counters of the last steps (CPU: host memory) */
            for (int l = 0; ep_of(&rm[r]) && l < ep_of(&rm[r])->nlayers; l++)
                *replica_entries += ep_of(&rm[r])->layers[l]->replica_entries;
        }
    }
    for (int r = 0; r < nload; r++) unload(&rm[r]);
    for (int r = 0; r < S; r++) di_comm_free(comm[r]);
    return ok;
}

static int run_group(const kind *k, int S, int eplb_capacity, float **out, size_t *written, int64_t *replica_entries) {
    return run_group_comm(k, S, 0, eplb_capacity, out, written, replica_entries);
}

/* --ep S (and EPLB with capacity `cap` when cap > 0) against one rank, bitwise. */
static void check_ep(const kind *k, const int *sizes, int nsizes, int cap) {
    di_error err = {0};
    rank_model probe;
    if (load(k, 0, 1, NULL, &probe, &err)) {
        di_test_fail(__FILE__, __LINE__, "load %s: %s", k->dir, err.msg);
        return;
    }
    size_t n = (size_t)max_rows_total() * (size_t)cfg_of(&probe)->vocab_size;
    unload(&probe);
    float *ref = calloc(n, 4), *got[8] = {0};
    int ok = ref != NULL;
    for (int r = 0; r < 8; r++) ok = ok && (got[r] = calloc(n, 4));
    size_t nref = 0, ngot = 0;
    ok = ok && run_group(k, 1, 0, &ref, &nref, NULL);
    CHECK_MSG(ok, "%s: the one-rank run", k->dir);
    for (int i = 0; ok && i < nsizes; i++) {
        int S = sizes[i];
        for (int r = 0; r < S; r++) memset(got[r], 0xff, n * 4);
        int64_t reps = 0;
        ok = run_group(k, S, cap, got, &ngot, &reps);
        CHECK_MSG(ok, "%s --ep %d", k->dir, S);
        CHECK(ngot == nref && nref > 0);
        for (int r = 0; r < S; r++)
            CHECK_MSG(!memcmp(ref, got[r], nref * 4), "%s --ep %d%s: rank %d's logits differ from one rank's", k->dir, S,
                      cap ? " with EPLB" : "", r);
        if (cap) CHECK_MSG(reps > 0, "%s --ep %d EPLB: no entry ran on a replica", k->dir, S);
    }
    free(ref);
    for (int r = 0; r < 8; r++) free(got[r]);
}

static kind v41_golden(char *hash, size_t n) {
    snprintf(hash, n, "%s/expected/manifest.json", di_test_data("golden/v41-tiny-a"));
    return (kind){1, di_test_data("golden/v41-tiny-a"), hash};
}

TEST(v4_ep_bitwise_equal_one_rank) {
    kind k = {0, di_test_data("golden/v4-tiny-a"), NULL}; /* 6 experts: --ep 2 and 3 */
    const int sizes[] = {2, 3};
    check_ep(&k, sizes, 2, 0);
}

TEST(v4_eplb_replicas_bitwise_equal_one_rank) {
    kind k = {0, di_test_data("golden/v4-tiny-a"), NULL};
    const int sizes[] = {2};
    check_ep(&k, sizes, 1, 2);
}

TEST(v41_ep_bitwise_equal_one_rank) {
    char hash[4096];
    kind k = v41_golden(hash, sizeof hash); /* 8 experts (the drafter's 4) */
    const int sizes[] = {2, 4};
    check_ep(&k, sizes, 2, 0);
}

TEST(v41_eplb_replicas_bitwise_equal_one_rank) {
    char hash[4096];
    kind k = v41_golden(hash, sizeof hash);
    const int sizes[] = {4};
    check_ep(&k, sizes, 1, 1);
}

TEST(demo_ep_and_eplb_bitwise_equal_one_rank) {
    kind k = {1, di_test_data(DEMO_MODEL), NULL};
    const int sizes[] = {2};
    check_ep(&k, sizes, 1, 0);
    check_ep(&k, sizes, 1, 2);
}

/* The EP path on a communicator of one rank (what one GPU runs over NCCL: every expert resident,
 * the selections read back, the exchange through the communicator's buffers) against the model
 * without EP, bitwise. */
static void check_one_rank_comm(const kind *k) {
    rank_model probe;
    di_error err = {0};
    if (load(k, 0, 1, NULL, &probe, &err)) {
        di_test_fail(__FILE__, __LINE__, "load %s: %s", k->dir, err.msg);
        return;
    }
    CHECK(ep_of(&probe) == NULL);
    size_t n = (size_t)max_rows_total() * (size_t)cfg_of(&probe)->vocab_size;
    unload(&probe);
    float *ref = calloc(n, 4), *got = calloc(n, 4);
    size_t nref = 0, ngot = 0;
    CHECK(ref && got);
    memset(got, 0xff, n * 4);
    CHECK(run_group(k, 1, 0, &ref, &nref, NULL));
    CHECK(run_group_comm(k, 1, 1, 0, &got, &ngot, NULL));
    CHECK(ngot == nref && nref > 0);
    CHECK_MSG(!memcmp(ref, got, nref * 4), "%s: the one-rank EP path differs from the model without EP", k->dir);
    free(ref), free(got);
}

TEST(ep_one_rank_communicator_bitwise_equal_no_ep) {
    kind v4 = {0, di_test_data("golden/v4-tiny-a"), NULL};
    check_one_rank_comm(&v4);
    char hash[4096];
    kind v41 = v41_golden(hash, sizeof hash);
    check_one_rank_comm(&v41);
}

TEST(ep_load_errors_name_the_fix) {
    di_comm *comm[4] = {0};
    di_error err = {0};
    CHECK(di_comm_loopback_group(4, comm, &err) == DEEPINFER_OK);
    kind k = {0, di_test_data("golden/v4-tiny-a"), NULL};
    rank_model rm;
    CHECK(load(&k, 0, 4, comm[0], &rm, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "6 experts are not divisible by --ep 4"), "got: %s", err.msg);
    CHECK(load(&k, 0, -1, NULL, &rm, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "at least 1"), "got: %s", err.msg);
    CHECK(load(&k, 2, 2, comm[2], &rm, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "rank 2 is out of [0, 2)"), "got: %s", err.msg);
    CHECK(load(&k, 0, 2, NULL, &rm, &err) == DEEPINFER_ERR_INVALID_ARGUMENT); /* no communicator */
    CHECK(load(&k, 1, 2, comm[1], &rm, &err) == DEEPINFER_ERR_INVALID_ARGUMENT); /* a group of 4 for --ep 2 */
    CHECK_MSG(strstr(err.msg, "communicator of 2 ranks"), "got: %s", err.msg);
    for (int r = 0; r < 4; r++) di_comm_free(comm[r]);
}

/* ---- the communicator itself ---- */

typedef struct xjob {
    di_comm *c;
    int ok;
} xjob;

/* Rank r sends (r+1)*(p+1) bytes of value 16r+p to rank p, then all-gathers
 * r+2 bytes of value r in place; repeated so that buffers are reused. */
static void *exchange(void *p) {
    xjob *j = p;
    int me = j->c->rank, S = j->c->size;
    di_error err = {0};
    j->ok = 1;
    for (int round = 0; round < 50 && j->ok; round++) {
        unsigned char send[256], recv[256], gat[64];
        size_t sb[8], so[8], rb[8], ro[8], gb[8], go[8], at = 0, rat = 0, gat_at = 0;
        for (int q = 0; q < S; q++) {
            so[q] = at, sb[q] = (size_t)(me + 1) * (size_t)(q + 1);
            memset(send + at, 16 * me + q + round, sb[q]);
            at += sb[q];
            ro[q] = rat, rb[q] = (size_t)(q + 1) * (size_t)(me + 1);
            rat += rb[q];
            go[q] = gat_at, gb[q] = (size_t)q + 2;
            gat_at += gb[q];
        }
        memset(gat, 0xee, sizeof gat);
        memset(gat + go[me], me + round, gb[me]);
        if (di_comm_alltoallv(j->c, send, sb, so, recv, rb, ro, &err) ||
            di_comm_allgatherv(j->c, gat + go[me], gb[me], gat, gb, go, &err) || di_comm_barrier(j->c, &err)) {
            j->ok = 0;
            break;
        }
        for (int q = 0; q < S; q++) {
            for (size_t i = 0; i < rb[q]; i++) j->ok &= recv[ro[q] + i] == (unsigned char)(16 * q + me + round);
            for (size_t i = 0; i < gb[q]; i++) j->ok &= gat[go[q] + i] == (unsigned char)(q + round);
        }
    }
    return NULL;
}

TEST(loopback_alltoallv_allgatherv_exchange) {
    for (int S = 1; S <= 5; S += 2) {
        di_comm *comm[8];
        di_error err = {0};
        CHECK(di_comm_loopback_group(S, comm, &err) == DEEPINFER_OK);
        xjob jobs[8];
        pthread_t th[8];
        for (int r = 0; r < S; r++) {
            jobs[r] = (xjob){comm[r], 0};
            CHECK(pthread_create(&th[r], NULL, exchange, &jobs[r]) == 0);
        }
        for (int r = 0; r < S; r++) pthread_join(th[r], NULL);
        for (int r = 0; r < S; r++) CHECK_MSG(jobs[r].ok, "%d ranks: rank %d received wrong bytes", S, r);
        for (int r = 0; r < S; r++) di_comm_free(comm[r]);
    }
    di_error err = {0};
    CHECK(di_comm_loopback_group(0, NULL, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
}

/* The device variant's contract (comm.h di_comm_loopback_group_dev) with a host copier that only
 * queues its copies (as an asynchronous device copy does) and makes them in wait: every receiver
 * must wait before the collective returns, or exchange() sees stale bytes. */
enum { QMAX = 64 };
static _Thread_local struct {
    void *dst[QMAX];
    const void *src[QMAX];
    size_t n[QMAX];
    int k;
} t_queue;
static _Thread_local int t_fail; /* wait reports a failure */
static _Atomic long g_queued;

static void queue_copy(void *dst, const void *src, size_t n) {
    if (t_queue.k == QMAX) return;
    t_queue.dst[t_queue.k] = dst, t_queue.src[t_queue.k] = src, t_queue.n[t_queue.k++] = n;
    g_queued++;
}

static int queue_wait(void) {
    for (int i = 0; i < t_queue.k; i++) memcpy(t_queue.dst[i], t_queue.src[i], t_queue.n[i]);
    t_queue.k = 0;
    return t_fail;
}

static void *failing_exchange(void *p) {
    xjob *j = p;
    t_fail = 1;
    unsigned char send[4] = {1, 2, 3, 4}, recv[4];
    size_t b[1] = {4}, o[1] = {0};
    di_error err = {0};
    j->ok = di_comm_alltoallv(j->c, send, b, o, recv, b, o, &err) == DEEPINFER_ERR_INTERNAL &&
            strstr(err.msg, "device copies failed") != NULL;
    return NULL;
}

TEST(loopback_copier_group_waits_for_its_copies) {
    static const di_comm_copier cp = {queue_copy, queue_wait};
    for (int S = 2; S <= 3; S++) {
        di_comm *comm[8];
        di_error err = {0};
        g_queued = 0;
        CHECK(di_comm_loopback_group_dev(S, &cp, comm, &err) == DEEPINFER_OK);
        xjob jobs[8];
        pthread_t th[8];
        for (int r = 0; r < S; r++) {
            jobs[r] = (xjob){comm[r], 0};
            CHECK(pthread_create(&th[r], NULL, exchange, &jobs[r]) == 0);
        }
        for (int r = 0; r < S; r++) pthread_join(th[r], NULL);
        for (int r = 0; r < S; r++) CHECK_MSG(jobs[r].ok, "%d ranks: rank %d received wrong bytes", S, r);
        /* every pair's all-to-all part and every other rank's all-gather part went through the copier */
        CHECK_MSG(g_queued == 50L * S * (2 * S - 1), "%d ranks: %ld copies queued", S, (long)g_queued);
        for (int r = 0; r < S; r++) di_comm_free(comm[r]);
    }
    di_comm *one[1];
    di_error err = {0};
    CHECK(di_comm_loopback_group_dev(1, &cp, one, &err) == DEEPINFER_OK);
    xjob j = {one[0], 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, failing_exchange, &j) == 0);
    pthread_join(th, NULL);
    CHECK_MSG(j.ok, "a failed wait is the collective's error");
    di_comm_free(one[0]);
}

TEST(nccl_missing_library_is_a_clear_error) {
    di_error err = {0};
    /* a path that cannot exist: the loader's message names the library and how to provide it */
    deepinfer_status st = di_nccl_load("/nonexistent/libnccl.so.2", &err);
    CHECK(st != DEEPINFER_OK);
    CHECK_MSG(strstr(err.msg, "libnccl.so.2") && strstr(err.msg, "DEEPINFER_NCCL_LIB"), "got: %s", err.msg);
}
