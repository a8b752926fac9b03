/* ranks.c — the engine's parallel ranks (ranks.h).
 *
 * Every rank's work runs on the rank's own thread (rank 0: the caller's): run_on hands one job to
 * every rank at once, or to one rank, and waits. On CUDA a rank thread binds its device first
 * (backend.h di_backend_rank_bind) and everything that touches its memory is such a job: its
 * communicator, its load plan and model, its state pool, its state operations, its forwards,
 * its EPLB loads, its frees. Loads run one rank at a time (one load at a time per process,
 * wload.h). */
#include "engine/ranks.h"

#include <stddef.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cp_prefill.h"
#include "model/load_plan.h"
#include "engine/seq_snapshot.h"
#include "model/moe_ep.h"
#include "ops/dev_ops.h"
#include "parallel/comm.h"

enum { DI_RANKS_MAX = 64 };

typedef struct rank_job {
    int n;                      /* this step's rows of the rank */
    int32_t *tokens;            /* [cap] */
    int64_t *pos;               /* [cap] */
    di_seq_state **seq;         /* [cap] the rank's own states */
    int *lrow;                  /* [cap] logit rows, local to the rank's row list */
    int *lidx;                  /* [cap] their index in the step's logits */
    int nl;
    float *logits;              /* [cap_logits][vocab] */
    int cap, cap_logits;
    deepinfer_status st;
    di_error err;
} rank_job;

typedef void (*rank_fn)(di_ranks *R, int r);

struct di_ranks {
    int world, ep, dp, replicas, interval;
    di_backend_kind bk;
    di_rank_placement place;
    /* the job run_on hands out: fn on every rank (only < 0) or on rank `only` */
    rank_fn fn;
    int only;
    /* the jobs' arguments */
    const char *load_dir;
    const di_model_options *load_mo;
    const di_step *ops_step;
    int *op_rank;                    /* [op_cap] DP: the rank of each op of the step */
    int op_cap;
    int cp_own;                      /* context parallelism: the rank whose state the others copy */
    const di_eplb_map *eplb_map;
    di_nccl_id nccl_id;
    di_comm *comm[DI_RANKS_MAX];
    di_model *model[DI_RANKS_MAX];   /* [0] the engine's (borrowed) */
    di_state_pool pool[DI_RANKS_MAX]; /* [0] unused: rank 0's is the engine's */
    unsigned char pool_made[DI_RANKS_MAX];
    di_state_pool *pool0;
    int *owner;                      /* [n_slots] DP rank of a slot, -1 = none */
    unsigned char *free_slot;        /* [n_slots] scratch */
    int pass_rows;                   /* DP: rows of one rank per pass */
    const di_model_batch *step_b;    /* the step being run (dp = 1: every rank's rows) */
    int npass;
    rank_job job[DI_RANKS_MAX];
    /* workers */
    struct worker_arg *warg;         /* [world] */
    pthread_t th[DI_RANKS_MAX];
    int nthreads;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long gen;
    int ndone, quit;
    int steps, rebalances;
    /* context parallelism (di_ranks_set_cp): a step's prefill segment of at least cp_min rows runs
     * over every rank (cp_prefill.h), before the step's other rows */
    int cp_min;
    unsigned char *cp_skip;          /* [cp_cap] the step's rows that ran context-parallel */
    int cp_cap;
    struct {
        int slot, row0, n, nl;
        int *lrow;                   /* [n] logit rows, local to the segment */
        int *lidx;                   /* [n] their index in the step's logits */
        float *logits[DI_RANKS_MAX]; /* [n logits][vocab] each rank's copy */
        int cap, cap_logits;
        int active;
    } cp;
    int cp_prefills;
};

/* ---- the rank threads ---- */

typedef struct worker_arg {
    di_ranks *R;
    int r;
} worker_arg;

static void *worker(void *arg) {
    di_ranks *R = ((worker_arg *)arg)->R;
    int r = ((worker_arg *)arg)->r;
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&R->mu);
        while (R->gen == seen && !R->quit) pthread_cond_wait(&R->go, &R->mu);
        if (R->quit) {
            pthread_mutex_unlock(&R->mu);
            return NULL;
        }
        seen = R->gen;
        rank_fn fn = R->fn;
        int only = R->only;
        pthread_mutex_unlock(&R->mu);
        if (only < 0 || only == r) fn(R, r);
        pthread_mutex_lock(&R->mu);
        R->ndone++;
        pthread_cond_signal(&R->done);
        pthread_mutex_unlock(&R->mu);
    }
}

/* fn on every rank at once (only < 0: ranks 1.. on their threads, rank 0 here) or on rank `only`
 * alone (on its thread; rank 0 here); returns when it is done. Every job's status starts OK. */
static void run_on(di_ranks *R, rank_fn fn, int only) {
    for (int r = 0; r < R->world; r++) R->job[r].st = DEEPINFER_OK;
    if (only == 0 || R->nthreads == 0) {
        if (only <= 0) fn(R, 0);
        return;
    }
    pthread_mutex_lock(&R->mu);
    R->fn = fn, R->only = only;
    R->gen++;
    R->ndone = 0;
    pthread_cond_broadcast(&R->go);
    pthread_mutex_unlock(&R->mu);
    if (only < 0) fn(R, 0);
    pthread_mutex_lock(&R->mu);
    while (R->ndone < R->nthreads) pthread_cond_wait(&R->done, &R->mu);
    pthread_mutex_unlock(&R->mu);
}

static deepinfer_status rank_errors(di_ranks *R, di_error *err) {
    for (int r = 0; r < R->world; r++)
        if (R->job[r].st) {
            *err = R->job[r].err;
            return di_error_prefix(err, "rank %d", r);
        }
    return DEEPINFER_OK;
}

/* The device of rank r (ranks.h di_rank_placement). */
static int device_of(const di_ranks *R, int r) { return R->place == DI_RANKS_ONE_DEVICE ? 0 : r; }

static void bind_job(di_ranks *R, int r) {
    if (r > 0) R->job[r].st = di_backend_rank_bind(device_of(R, r), &R->job[r].err);
}

static void nccl_job(di_ranks *R, int r) {
    R->job[r].st = di_backend_comm_rank(&R->nccl_id, r, R->world, &R->comm[r], &R->job[r].err);
}

/* The threads, each on its device, and the communicators: the loopback group on the CPU (and for
 * callers that keep every rank on their thread's device), the device loopback group for ranks on
 * one GPU, NCCL (one device per rank) otherwise. */
static deepinfer_status start_ranks(di_ranks *R, di_error *err) {
    deepinfer_status st;
    if (!(R->warg = calloc((size_t)R->world, sizeof *R->warg)))
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    for (int r = 1; r < R->world; r++) {
        R->warg[r] = (worker_arg){R, r};
        if (pthread_create(&R->th[r], NULL, worker, &R->warg[r]))
            return di_error_set(err, DEEPINFER_ERR_INTERNAL, "cannot start the thread of rank %d", r);
        R->nthreads = r;
    }
    const int device = R->bk == DI_BACKEND_CUDA && R->place != DI_RANKS_SHARED;
    if (device) {
        run_on(R, bind_job, -1);
        if ((st = rank_errors(R, err))) return st;
    }
    if (!device) return di_comm_loopback_group(R->world, R->comm, err);
    if (R->place == DI_RANKS_ONE_DEVICE) return di_backend_comm_loopback_dev(R->world, R->comm, err);
    if ((st = di_nccl_unique_id(&R->nccl_id, err))) return st;
    run_on(R, nccl_job, -1); /* ncclCommInitRank on every rank at once */
    return rank_errors(R, err);
}

int di_ranks_world(const di_ranks *R) { return R ? R->world : 1; }
di_comm *di_ranks_comm(const di_ranks *R, int rank) { return R ? R->comm[rank] : NULL; }
const int *di_ranks_owners(const di_ranks *R) { return R ? R->owner : NULL; }
int di_ranks_rebalances(const di_ranks *R) { return R ? R->rebalances : 0; }

deepinfer_status di_ranks_check(const di_model_config *cfg, int ep, int dp, int eplb_replicas, di_backend_kind bk,
                                di_rank_placement place, int *world, di_error *err) {
    const deepinfer_status E = DEEPINFER_ERR_INVALID_ARGUMENT;
    *world = 1;
    if (ep < 1) return di_error_set(err, E, "--ep %d: the expert-parallel size must be at least 1", ep);
    if (dp < 1) return di_error_set(err, E, "--dp %d: the data-parallel size must be at least 1", dp);
    if (dp > 1 && dp != ep)
        return di_error_set(err, E,
                            "--dp %d --ep %d: attention DP runs one rank per DP replica with the experts sharded over "
                            "all of them, so --ep must equal --dp (or use --dp 1)",
                            dp, ep);
    int w = ep > dp ? ep : dp;
    if (w > DI_RANKS_MAX) return di_error_set(err, E, "--ep %d: at most %d ranks", w, DI_RANKS_MAX);
    if (eplb_replicas < 0) return di_error_set(err, E, "eplb_replicas must be >= 0, got %d", eplb_replicas);
    if (eplb_replicas > 0 && ep < 2)
        return di_error_set(err, E, "EPLB (eplb_replicas %d) balances experts over ranks: it needs --ep 2 or more",
                            eplb_replicas);
    if (w > 1 || eplb_replicas) {
        deepinfer_status st = di_plan_layout_check(cfg, ep, -1, err); /* experts divisible by ep */
        if (st) return st;
    }
    if (bk == DI_BACKEND_CUDA && w > 1 && place != DI_RANKS_ONE_DEVICE) {
        di_cuda_info ci;
        di_backend_cuda_info(&ci);
        deepinfer_status st = di_plan_layout_check(cfg, w, ci.device_count, err); /* one GPU per rank */
        if (st) return st;
        if (place == DI_RANKS_SHARED)
            return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                                "--ep %d --dp %d on CUDA: this tool runs every rank on one thread's GPU, so it runs "
                                "one rank there; run --ep/--dp > 1 on the CPU backend (--accelerator cpu) or "
                                "through the engine (one GPU per rank)",
                                ep, dp);
    }
    *world = w;
    return DEEPINFER_OK;
}

deepinfer_status di_ranks_new(int ep, int dp, int eplb_replicas, int eplb_interval, di_backend_kind bk,
                              di_rank_placement place, di_ranks **out, di_error *err) {
    *out = NULL;
    di_ranks *R = calloc(1, sizeof *R);
    if (!R) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    R->ep = ep, R->dp = dp, R->world = ep > dp ? ep : dp;
    R->replicas = eplb_replicas, R->interval = eplb_interval > 0 ? eplb_interval : 32;
    R->bk = bk, R->place = place;
    pthread_mutex_init(&R->mu, NULL);
    pthread_cond_init(&R->go, NULL);
    pthread_cond_init(&R->done, NULL);
    deepinfer_status st = start_ranks(R, err);
    if (st) {
        di_ranks_free(R);
        return st;
    }
    *out = R;
    return DEEPINFER_OK;
}

static di_model_options rank_options(const di_ranks *R, const di_model_options *mo, int r) {
    di_model_options o = *mo;
    o.ep_rank = r, o.ep_size = R->ep, o.comm = R->comm[r];
    o.plan_out = NULL;
    return o;
}

/* Rank r's load plan on its thread (its device's memory). */
static void plan_job(di_ranks *R, int r) {
    di_model_options o = rank_options(R, R->load_mo, r);
    di_load_plan plan;
    R->job[r].st = di_model_plan(R->load_dir, &o, R->load_mo->weights, &plan, &R->job[r].err);
}

static void load_job(di_ranks *R, int r) {
    di_model_options o = rank_options(R, R->load_mo, r);
    R->job[r].st = di_model_load(R->load_dir, &o, &R->model[r], &R->job[r].err);
}

/* job on each rank from `first` on, one after another; the first failure named by its rank. */
static deepinfer_status each_rank(di_ranks *R, rank_fn job, int first, const char *dir, const di_model_options *mo,
                                  di_error *err) {
    R->load_dir = dir, R->load_mo = mo;
    for (int r = first; r < R->world; r++) {
        run_on(R, job, r);
        if (R->job[r].st) {
            *err = R->job[r].err;
            return di_error_prefix(err, "rank %d of --ep %d --dp %d", r, R->ep, R->dp);
        }
    }
    return DEEPINFER_OK;
}

deepinfer_status di_ranks_plan_all(di_ranks *R, const char *dir, const di_model_options *mo, di_error *err) {
    return each_rank(R, plan_job, 0, dir, mo, err);
}

deepinfer_status di_ranks_load(di_ranks *R, const char *dir, const di_model_options *mo, di_error *err) {
    return each_rank(R, load_job, 1, dir, mo, err);
}

/* ---- state mirrors ---- */

static int slot_of(const di_ranks *R, const di_seq_state *s) {
    return (int)(((const unsigned char *)s - R->pool0->slot_mem) / (ptrdiff_t)R->pool0->g.host_slot_bytes);
}

static void sync_store(const di_state_pool *p0, const di_rowstore *src, const di_state_pool *pr, di_rowstore *dst) {
    for (int i = 0; i < src->n_pages; i++)
        dst->pages[i] = (uint16_t *)(pr->page_mem + ((const unsigned char *)src->pages[i] - p0->page_mem));
    dst->n_pages = src->n_pages;
}

/* Rank r's copy of slot's page tables: the engine pool's pages, at the same offsets in r's pages. */
static di_seq_state *mirror(di_ranks *R, int r, int slot) {
    di_seq_state *src = di_pool_seq(R->pool0, slot);
    if (r == 0) return src;
    di_state_pool *pr = &R->pool[r];
    di_seq_state *dst = di_pool_seq(pr, slot);
    for (int l = 0; l < src->n_layers; l++) {
        if (R->pool0->cap_kv[l]) sync_store(R->pool0, &src->layers[l].ckv, pr, &dst->layers[l].ckv);
        if (R->pool0->cap_ikey[l]) sync_store(R->pool0, &src->layers[l].ikey, pr, &dst->layers[l].ikey);
    }
    return dst;
}

/* DP: the rank for a slot reset now: fewest pages of its running sequences, then fewest slots,
 * then the lowest rank. */
static int least_occupied(di_ranks *R, int slot) {
    const di_state_pool *p = R->pool0;
    memset(R->free_slot, 0, (size_t)p->n_slots);
    for (int i = 0; i < p->n_slot_free; i++) R->free_slot[p->slot_free[i]] = 1;
    int64_t pages[DI_RANKS_MAX] = {0};
    int slots[DI_RANKS_MAX] = {0};
    for (int s = 0; s < p->n_slots; s++) {
        if (s == slot || R->free_slot[s] || R->owner[s] < 0) continue;
        pages[R->owner[s]] += p->slot_pages[s];
        slots[R->owner[s]]++;
    }
    int best = 0;
    for (int r = 1; r < R->dp; r++)
        if (pages[r] < pages[best] || (pages[r] == pages[best] && slots[r] < slots[best])) best = r;
    return best;
}

/* Rank r's part of the step's state operations (ops_step, op_rank), on its thread; waited for, so
 * that another rank may read the state next (context parallelism). */
static void ops_job(di_ranks *R, int r) {
    const di_step *s = R->ops_step;
    if (r == 0) return; /* rank 0's ran on the queue */
    const di_model_config *cfg = di_model_cfg(R->model[r]);
    deepinfer_status st = DEEPINFER_OK;
    for (int i = 0; !st && i < s->n_ops; i++) {
        const di_state_op *op = &s->ops[i];
        if (op->kind == DI_OP_NONE || (R->dp > 1 && R->op_rank[i] != r)) continue;
        di_seq_state *dst = mirror(R, r, op->dst);
        if (op->kind == DI_OP_RESET) di_seq_reset(dst, cfg);
        else st = di_seq_copy(dst, mirror(R, r, op->src), cfg, &R->job[r].err);
    }
    if (!st) st = di_exec_sync(di_dev_exec(), &R->job[r].err);
    R->job[r].st = st;
}

/* The step's state operations on the ranks that hold the slots: under DP each op's rank first, in
 * op order (a reset's rank is chosen here), then every rank's operations on its thread. */
static deepinfer_status mirror_ops(di_ranks *R, const di_step *s, di_error *err) {
    int any = 0;
    if (s->n_ops > R->op_cap) {
        int *a = realloc(R->op_rank, sizeof *a * (size_t)s->n_ops);
        if (!a) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for a step's state operations");
        R->op_rank = a, R->op_cap = s->n_ops;
    }
    for (int i = 0; i < s->n_ops; i++) {
        const di_state_op *op = &s->ops[i];
        if (op->kind == DI_OP_NONE) continue;
        if (R->dp > 1) R->owner[op->dst] = op->kind == DI_OP_RESET ? least_occupied(R, op->dst) : R->owner[op->src];
        R->op_rank[i] = R->dp > 1 ? R->owner[op->dst] : -1;
        any |= R->dp == 1 || R->op_rank[i] > 0;
    }
    if (!any) return DEEPINFER_OK;
    R->ops_step = s;
    run_on(R, ops_job, -1);
    return rank_errors(R, err);
}

/* ---- a step ---- */

static int job_reserve(rank_job *j, int rows, int logits, size_t V) {
    if (rows > j->cap) {
        int32_t *t = realloc(j->tokens, sizeof *t * (size_t)rows);
        if (t) j->tokens = t;
        int64_t *p = realloc(j->pos, sizeof *p * (size_t)rows);
        if (p) j->pos = p;
        di_seq_state **s = realloc(j->seq, sizeof *s * (size_t)rows);
        if (s) j->seq = s;
        int *a = realloc(j->lrow, sizeof *a * (size_t)rows);
        if (a) j->lrow = a;
        int *b = realloc(j->lidx, sizeof *b * (size_t)rows);
        if (b) j->lidx = b;
        if (!t || !p || !s || !a || !b) return 0;
        j->cap = rows;
    }
    if (logits > j->cap_logits) {
        float *l = realloc(j->logits, sizeof *l * (size_t)logits * V);
        if (!l) return 0;
        j->logits = l;
        j->cap_logits = logits;
    }
    return 1;
}

/* Rank r's rows of the step (dp = 1: all of them). */
static deepinfer_status build_job(di_ranks *R, int r, const di_model_batch *b, di_error *err) {
    rank_job *j = &R->job[r];
    size_t V = (size_t)di_model_cfg(R->model[r])->vocab_size;
    if (!job_reserve(j, b->n, R->dp > 1 ? b->n_logits : 0, V))
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "rank %d: out of memory for a step of %d rows", r, b->n);
    j->n = j->nl = 0;
    for (int i = 0, li = 0; i < b->n; i++) {
        int slot = slot_of(R, b->seq[i]);
        int mine = R->dp == 1 || R->owner[slot] == r;
        while (li < b->n_logits && b->logit_rows[li] < i) li++;
        if (!mine || (R->cp_skip && i < R->cp_cap && R->cp_skip[i])) continue;
        if (R->dp > 1 && li < b->n_logits && b->logit_rows[li] == i) {
            j->lrow[j->nl] = j->n;
            j->lidx[j->nl++] = li;
        }
        j->tokens[j->n] = b->tokens[i];
        j->pos[j->n] = b->pos[i];
        j->seq[j->n++] = mirror(R, r, slot);
    }
    return DEEPINFER_OK;
}

static void run_rank(di_ranks *R, int r) {
    rank_job *j = &R->job[r];
    j->st = DEEPINFER_OK;
    const di_model_batch *b = R->step_b;
    if (R->cp.active) { /* one prompt segment over every rank, each on its copy of the state */
        di_cp_prefill p = {.comm = R->comm[r], .seq = mirror(R, r, R->cp.slot), .n = R->cp.n,
                           .tokens = b->tokens + R->cp.row0, .n_logits = R->cp.nl, .logit_rows = R->cp.lrow,
                           .logits = R->cp.logits[r]};
        j->st = di_model_cp_prefill(R->model[r], &p, &j->err);
        return;
    }
    if (R->dp == 1) { /* the whole batch; rank 0 the logits */
        di_model_batch rb = *b;
        if (r > 0) {
            rb.tokens = j->tokens, rb.pos = j->pos, rb.seq = j->seq;
            rb.n_logits = 0, rb.logit_rows = NULL, rb.logits = NULL;
        }
        j->st = di_model_forward(R->model[r], &rb, &j->err);
        return;
    }
    int lo = 0; /* logits of earlier passes */
    for (int p = 0; p < R->npass; p++) {
        int r0 = p * R->pass_rows, n = j->n - r0 < R->pass_rows ? j->n - r0 : R->pass_rows;
        deepinfer_status st;
        if (n <= 0) {
            st = di_model_ep_join_empty(R->model[r], &j->err);
        } else {
            int l1 = lo;
            while (l1 < j->nl && j->lrow[l1] < r0 + n) j->lrow[l1] -= r0, l1++;
            di_model_batch pb = {.n = n, .tokens = j->tokens + r0, .pos = j->pos + r0, .seq = j->seq + r0,
                                 .n_logits = l1 - lo, .logit_rows = j->lrow + lo,
                                 .logits = j->logits + (size_t)lo * (size_t)di_model_cfg(R->model[r])->vocab_size};
            st = di_model_forward(R->model[r], &pb, &j->err);
            lo = l1;
        }
        if (st && !j->st) j->st = st;
    }
}

/* Every rank's part of the step at once. */
static void run_all(di_ranks *R) { run_on(R, run_rank, -1); }

static void eplb_job(di_ranks *R, int r) {
    R->job[r].st = di_eplb_apply(di_model_ep(R->model[r]), R->eplb_map, &R->job[r].err);
}

/* EPLB between steps: rank 0 plans from its counters (every rank counted the same entries), every
 * rank applies the map on its thread, one after another (one load at a time per process, wload.h). */
static deepinfer_status rebalance(di_ranks *R, di_error *err) {
    di_eplb_map map;
    deepinfer_status st = di_eplb_plan(di_model_ep(R->model[0]), R->replicas, &map, err);
    R->eplb_map = &map;
    for (int r = 0; !st && r < R->world; r++) {
        run_on(R, eplb_job, r);
        if ((st = R->job[r].st)) *err = R->job[r].err;
    }
    R->eplb_map = NULL;
    di_eplb_map_free(&map);
    if (!st) R->rebalances++;
    return st ? di_error_prefix(err, "EPLB rebalance") : DEEPINFER_OK;
}

void di_ranks_set_cp(di_ranks *R, int min_tokens) {
    if (R) R->cp_min = min_tokens;
}

int di_ranks_cp_prefills(const di_ranks *R) { return R ? R->cp_prefills : 0; }

/* Context parallelism: rank r's copy of the slot becomes the owner's state (on r's thread; the
 * source may be on another device: a device-to-device copy). */
static void cp_copy_job(di_ranks *R, int r) {
    if (r == R->cp_own) return;
    const di_model_config *cfg = di_model_cfg(R->model[r]);
    deepinfer_status st = di_seq_copy(mirror(R, r, R->cp.slot), mirror(R, R->cp_own, R->cp.slot), cfg, &R->job[r].err);
    if (!st) st = di_exec_sync(di_dev_exec(), &R->job[r].err);
    if (st) di_error_prefix(&R->job[r].err, "context parallelism: the copy of the state");
    R->job[r].st = st;
}

/* Rows [row0, row0 + n) of the step (one sequence's prefill segment) over every rank: the owner's
 * state copied to the other ranks' copies of the slot first, so that every rank starts from it and
 * ends holding the state after the segment (the owner decodes on). */
static deepinfer_status cp_segment(di_ranks *R, di_model_batch *b, int row0, int n, di_error *err) {
    size_t V = (size_t)di_model_cfg(R->model[0])->vocab_size;
    int slot = slot_of(R, b->seq[row0]), own = R->owner[slot];
    /* rank 0's state operations ran on the queue, on the process's state exec: done before others read */
    deepinfer_status st0 = di_exec_sync(di_dev_exec(), err);
    if (st0) return st0;
    R->cp.slot = slot, R->cp_own = own;
    run_on(R, cp_copy_job, -1);
    if ((st0 = rank_errors(R, err))) return st0;
    int nl = 0;
    for (int i = 0; i < b->n_logits; i++) nl += b->logit_rows[i] >= row0 && b->logit_rows[i] < row0 + n;
    if (n > R->cp.cap) {
        int *a = realloc(R->cp.lrow, sizeof *a * (size_t)n), *c = a ? realloc(R->cp.lidx, sizeof *c * (size_t)n) : NULL;
        if (a) R->cp.lrow = a;
        if (c) R->cp.lidx = c;
        if (!a || !c) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for a context-parallel prefill");
        R->cp.cap = n;
    }
    if (nl > R->cp.cap_logits) {
        for (int r = 0; r < R->world; r++) {
            float *l = realloc(R->cp.logits[r], sizeof *l * (size_t)nl * V);
            if (!l) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for a context-parallel prefill");
            R->cp.logits[r] = l;
        }
        R->cp.cap_logits = nl;
    }
    R->cp.nl = 0;
    for (int i = 0; i < b->n_logits; i++)
        if (b->logit_rows[i] >= row0 && b->logit_rows[i] < row0 + n) {
            R->cp.lrow[R->cp.nl] = b->logit_rows[i] - row0;
            R->cp.lidx[R->cp.nl++] = i;
        }
    R->cp.slot = slot, R->cp.row0 = row0, R->cp.n = n, R->cp.active = 1;
    run_all(R);
    R->cp.active = 0;
    deepinfer_status st = rank_errors(R, err);
    if (st) return st;
    for (int i = 0; i < R->cp.nl; i++) /* every rank received them all: rank 0's copy */
        memcpy(b->logits + (size_t)R->cp.lidx[i] * V, R->cp.logits[0] + (size_t)i * V, V * sizeof(float));
    for (int i = row0; i < row0 + n; i++) R->cp_skip[i] = 1;
    R->cp_prefills++;
    return DEEPINFER_OK;
}

/* Attention DP with cp_min: the step's segments of at least cp_min rows (and 2 x world), each over
 * every rank. Returns the rows left for the DP path. */
static deepinfer_status cp_segments(di_ranks *R, di_model_batch *b, int *left, di_error *err) {
    *left = b->n;
    if (R->dp <= 1 || R->cp_min <= 0) return DEEPINFER_OK;
    if (b->n > R->cp_cap) {
        unsigned char *k = realloc(R->cp_skip, (size_t)b->n);
        if (!k) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for a context-parallel prefill");
        R->cp_skip = k;
        R->cp_cap = b->n;
    }
    memset(R->cp_skip, 0, (size_t)R->cp_cap);
    int min = R->cp_min > di_cp_min_rows(R->world) ? R->cp_min : di_cp_min_rows(R->world);
    for (int i = 0; i < b->n;) {
        int j = i;
        while (j < b->n && b->seq[j] == b->seq[i]) j++;
        if (j - i >= min) {
            deepinfer_status st = cp_segment(R, b, i, j - i, err);
            if (st) return st;
            *left -= j - i;
        }
        i = j;
    }
    return DEEPINFER_OK;
}

deepinfer_status di_ranks_forward(void *ctx, const di_step *s, di_model_batch *b, di_error *err) {
    di_ranks *R = ctx;
    deepinfer_status st = mirror_ops(R, s, err);
    if (st || b->n <= 0) return st;
    if (b->late_from || b->hidden || b->target_hidden || b->tokens_on_device || b->logits_on_device)
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "parallel ranks: a step with device tokens, device logits, "
                                                         "compact prefill or drafter inputs");
    for (int i = 0; R->dp > 1 && i < b->n; i++) /* every row's sequence has its DP rank (from its reset / fork) */
        if (R->owner[slot_of(R, b->seq[i])] < 0)
            return di_error_set(err, DEEPINFER_ERR_INTERNAL, "attention DP: row %d's sequence has no rank", i);
    R->step_b = b;
    int left = b->n;
    if ((st = cp_segments(R, b, &left, err))) return st;
    if (!left) goto done;
    R->npass = 1;
    for (int r = 0; r < R->world; r++) {
        if (r == 0 && R->dp == 1) continue; /* rank 0 runs the step's own batch */
        if ((st = build_job(R, r, b, err))) return st;
        if (R->dp > 1) {
            int np = (R->job[r].n + R->pass_rows - 1) / R->pass_rows;
            if (np > R->npass) R->npass = np;
        }
    }
    run_all(R);
    if ((st = rank_errors(R, err))) return st;
    if (R->dp > 1) { /* every rank's logits to the step's rows */
        size_t V = (size_t)di_model_cfg(R->model[0])->vocab_size;
        for (int r = 0; r < R->world; r++)
            for (int i = 0; i < R->job[r].nl; i++)
                memcpy(b->logits + (size_t)R->job[r].lidx[i] * V, R->job[r].logits + (size_t)i * V, V * sizeof(float));
    }
done:
    if (R->cp_skip) memset(R->cp_skip, 0, (size_t)R->cp_cap);
    if (R->replicas > 0 && ++R->steps % R->interval == 0) return rebalance(R, err);
    return DEEPINFER_OK;
}

/* Rank r's state pool of the engine pool's geometry (r > 0) and the DP switch of its model. */
static void pool_job(di_ranks *R, int r) {
    const di_state_pool *pool0 = R->pool0;
    rank_job *j = &R->job[r];
    if (r > 0) {
        j->st = di_pool_init(&R->pool[r], di_model_cfg(R->model[r]), &pool0->g, pool0->n_slots, pool0->n_pages, &j->err);
        if (j->st) {
            di_error_prefix(&j->err, "its state pool");
            return;
        }
        R->pool_made[r] = 1;
        /* every slot laid out once; their page tables follow the engine pool's (mirror) */
        for (int s = 0; s < pool0->n_slots; s++) di_pool_slot_acquire(&R->pool[r]);
    }
    if (R->dp > 1) j->st = di_ep_set_dp(di_model_ep(R->model[r]), 1, &j->err);
}

deepinfer_status di_ranks_start(di_ranks *R, di_model *model0, di_state_pool *pool0, di_devq *dq, di_error *err) {
    R->model[0] = model0;
    R->pool0 = pool0;
    R->owner = malloc(sizeof(int) * (size_t)pool0->n_slots);
    R->free_slot = malloc((size_t)pool0->n_slots);
    if (!R->owner || !R->free_slot) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    for (int s = 0; s < pool0->n_slots; s++) R->owner[s] = -1;
    int rows = di_model_max_rows(model0);
    R->pass_rows = rows / R->dp > 0 ? rows / R->dp : 1;
    run_on(R, pool_job, -1);
    deepinfer_status st = rank_errors(R, err);
    if (st) return st;
    di_devq_set_forward(dq, di_ranks_forward, R);
    return DEEPINFER_OK;
}

/* The rank's device counters onto the host (moe_ep.h di_ep_pull_counters), on its thread. */
static void pull_job(di_ranks *R, int r) { di_ep_pull_counters(di_model_ep(R->model[r])); }

int64_t di_ranks_replica_entries(di_ranks *R) {
    int64_t n = 0;
    for (int r = 0; R && r < R->world; r++)
        if (R->model[r]) run_on(R, pull_job, r);
    for (int r = 0; R && r < R->world; r++) {
        const di_ep_model *ep = R->model[r] ? di_model_ep(R->model[r]) : NULL;
        for (int l = 0; ep && l < ep->nlayers; l++) n += ep->layers[l]->replica_entries;
    }
    return n;
}

void di_ranks_describe(const di_ranks *R, char *buf, size_t n) {
    if (!R) {
        snprintf(buf, n, "one rank");
        return;
    }
    const char *how = R->bk != DI_BACKEND_CUDA || R->place == DI_RANKS_SHARED
                          ? "threads of this process, loopback communicator"
                      : R->place == DI_RANKS_ONE_DEVICE ? "threads of this process on GPU 0, device loopback communicator"
                                                        : "a thread and a GPU each, NCCL";
    int k = snprintf(buf, n, "%d ranks (%s): --ep %d", R->world, how, R->ep);
    if (k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k,
                      R->dp > 1 ? ", --dp %d (each rank its own requests and state, passes of up to %d rows per rank)"
                                : ", --dp %d (every rank runs the whole batch)",
                      R->dp, R->pass_rows);
    if (k > 0 && (size_t)k < n && R->replicas)
        snprintf(buf + k, n - (size_t)k, "; EPLB: %d replica slots per rank, rebalanced every %d steps", R->replicas,
                 R->interval);
}

/* Rank r's model, pool and communicator freed on its thread (all at once: NCCL's destroy may wait
 * for the group), then its device given back. */
static void free_job(di_ranks *R, int r) {
    if (r > 0) {
        di_model_free(R->model[r]);
        if (R->pool_made[r]) di_pool_free(&R->pool[r]);
    }
    di_comm_free(R->comm[r]);
    if (r > 0 && R->bk == DI_BACKEND_CUDA && R->place != DI_RANKS_SHARED) di_backend_rank_unbind();
}

void di_ranks_free(di_ranks *R) {
    if (!R) return;
    run_on(R, free_job, -1);
    for (int r = R->nthreads + 1; r < R->world; r++) di_comm_free(R->comm[r]); /* ranks without a thread */
    pthread_mutex_lock(&R->mu);
    R->quit = 1;
    pthread_cond_broadcast(&R->go);
    pthread_mutex_unlock(&R->mu);
    for (int r = 1; r <= R->nthreads; r++) pthread_join(R->th[r], NULL);
    for (int r = 0; r < R->world; r++) {
        rank_job *j = &R->job[r];
        free(j->tokens), free(j->pos), free(j->seq), free(j->lrow), free(j->lidx), free(j->logits);
    }
    free(R->owner), free(R->op_rank);
    free(R->cp_skip), free(R->cp.lrow), free(R->cp.lidx);
    for (int r = 0; r < DI_RANKS_MAX; r++) free(R->cp.logits[r]);
    free(R->free_slot);
    free(R->warg);
    pthread_mutex_destroy(&R->mu);
    pthread_cond_destroy(&R->go);
    pthread_cond_destroy(&R->done);
    free(R);
}
