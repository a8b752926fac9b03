/* score_ranks.c — the score driver on parallel ranks (score_ranks.h). */
#include "score_ranks.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ranks.h"
#include "model/model.h"
#include "model/moe_ep.h"
#include "ops/backend.h"
#include "parallel/comm.h"

enum { MAXR = 64 };

struct di_score_ranks {
    int world, ep, dp, nloaded;
    di_comm *comm[MAXR];
    cli_model m[MAXR];
    di_model *view[MAXR];   /* model.h views (join_empty, max rows) */
    di_seq_state **seqs;    /* [nseq][world]: rank r's copy of sequence i; [i][0] the driver's */
    int nseq, capseq;
};

typedef struct job {
    di_score_ranks *R;
    int r;
    const di_v4_batch *b;
    deepinfer_status st;
    di_error err;
} job;

static di_seq_state *copy_of(const di_score_ranks *R, const di_seq_state *s0, int r) {
    for (int i = 0; i < R->nseq; i++)
        if (R->seqs[(size_t)i * R->world] == s0) return R->seqs[(size_t)i * R->world + r];
    return NULL;
}

static deepinfer_status seq_new(const void *model, di_seq_state **out, di_error *err) {
    di_score_ranks *R = (di_score_ranks *)model;
    if (R->nseq == R->capseq) {
        int cap = R->capseq ? 2 * R->capseq : 16;
        di_seq_state **p = realloc(R->seqs, sizeof *p * (size_t)cap * (size_t)R->world);
        if (!p) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        R->seqs = p, R->capseq = cap;
    }
    di_seq_state **row = R->seqs + (size_t)R->nseq * R->world;
    for (int r = 0; r < R->world; r++) {
        row[r] = NULL;
        if (r > 0 && R->dp > 1) continue; /* DP: the requests are rank 0's */
        deepinfer_status st = R->m[r].sm.seq_new(R->m[r].sm.model, &row[r], err);
        if (st) {
            for (int q = 1; q < r; q++) di_seq_destroy(row[q]);
            if (r) di_seq_destroy(row[0]);
            return st;
        }
    }
    R->nseq++;
    *out = row[0]; /* the driver destroys it; the others go with the group */
    return DEEPINFER_OK;
}

static void *run_rank(void *p) {
    job *j = p;
    di_score_ranks *R = j->R;
    const di_v4_batch *b = j->b;
    j->st = DEEPINFER_OK;
    if (R->dp > 1) { /* no rows: join the MoE exchanges of every pass rank 0 runs */
        int rows = di_model_max_rows(R->view[0]), passes = (b->n + rows - 1) / rows;
        for (int k = 0; k < passes && !j->st; k++) j->st = di_model_ep_join_empty(R->view[j->r], &j->err);
        return NULL;
    }
    di_seq_state **seq = malloc(sizeof *seq * (size_t)(b->n > 0 ? b->n : 1));
    if (!seq) {
        j->st = di_error_set(&j->err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    for (int i = 0; i < b->n; i++) seq[i] = copy_of(R, b->seq[i], j->r);
    di_v4_batch rb = *b;
    rb.seq = seq, rb.n_logits = 0, rb.logit_rows = NULL, rb.logits = NULL, rb.hidden = NULL, rb.target_hidden = NULL;
    j->st = R->m[j->r].sm.forward(R->m[j->r].sm.model, &rb, &j->err);
    free(seq);
    return NULL;
}

static deepinfer_status forward(void *model, const di_v4_batch *b, di_error *err) {
    di_score_ranks *R = model;
    if (b->late_from) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "compact prefill runs on one rank");
    job jobs[MAXR];
    pthread_t th[MAXR];
    int started = 1;
    for (int r = 1; r < R->world; r++, started++) {
        jobs[r] = (job){.R = R, .r = r, .b = b};
        if (pthread_create(&th[r], NULL, run_rank, &jobs[r])) break;
    }
    deepinfer_status st = started == R->world ? R->m[0].sm.forward(R->m[0].sm.model, b, err)
                                              : di_error_set(err, DEEPINFER_ERR_INTERNAL, "cannot start a rank's thread");
    for (int r = 1; r < started; r++) pthread_join(th[r], NULL);
    for (int r = 1; !st && r < R->world; r++)
        if (jobs[r].st) {
            *err = jobs[r].err;
            st = di_error_prefix(err, "rank %d", r);
        }
    return st;
}

deepinfer_status di_score_ranks_open(const char *dir, const di_v4_options *opt, int ep, int dp, di_score_ranks **out,
                                     di_score_model *sm, di_error *err) {
    *out = NULL;
    di_model_config cfg;
    deepinfer_status st = di_config_load(dir, &cfg, err);
    int world = 1;
    if (!st) st = di_ranks_check(&cfg, ep, dp, 0, di_backend_active(), DI_RANKS_SHARED, &world, err);
    if (st) return st;
    di_score_ranks *R = calloc(1, sizeof *R);
    if (!R) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    R->world = world, R->ep = ep, R->dp = dp;
    if ((st = di_comm_loopback_group(world, R->comm, err))) {
        free(R);
        return st;
    }
    for (int r = 0; !st && r < world; r++) {
        di_v4_options o = *opt;
        o.ep_rank = r, o.ep_size = ep, o.comm = R->comm[r];
        if ((st = cli_model_load(dir, &o, &R->m[r], err))) {
            st = di_error_prefix(err, "rank %d of --ep %d --dp %d", r, ep, dp);
            break;
        }
        R->nloaded = r + 1;
        R->view[r] = di_model_borrow(R->m[r].v4, R->m[r].v41);
        if (!R->view[r]) st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        else if (dp > 1) st = di_ep_set_dp(di_model_ep(R->view[r]), 1, err);
    }
    if (st) {
        di_score_ranks_free(R);
        return st;
    }
    *sm = (di_score_model){R, R->m[0].sm.cfg, R->m[0].sm.max_context, seq_new, forward};
    *out = R;
    return DEEPINFER_OK;
}

void di_score_ranks_free(di_score_ranks *R) {
    if (!R) return;
    for (int i = 0; i < R->nseq; i++)
        for (int r = 1; r < R->world; r++) di_seq_destroy(R->seqs[(size_t)i * R->world + r]);
    free(R->seqs);
    for (int r = 0; r < R->nloaded; r++) {
        di_model_free(R->view[r]);
        cli_model_free(&R->m[r]);
    }
    for (int r = 0; r < R->world; r++) di_comm_free(R->comm[r]);
    free(R);
}
