/* moe_ep.c — MoE expert parallelism and EPLB (moe_ep.h). */
#include "model/moe_ep.h"
#include "model/moe_ep_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/load_plan.h"
#include "model/wload.h"
#include "ops/backend.h"

#define MAXC DI_EP_MAX_COPIES

deepinfer_status di_ep_model_create(const di_model_config *cfg, int ep_rank, int ep_size, di_comm *comm,
                                    di_ep_model **out, di_error *err) {
    *out = NULL;
    const deepinfer_status E = DEEPINFER_ERR_INVALID_ARGUMENT;
    if (ep_size == 0) ep_size = 1;
    if (ep_size < 1) return di_error_set(err, E, "--ep %d: the expert-parallel size must be at least 1", ep_size);
    if (ep_rank < 0 || ep_rank >= ep_size)
        return di_error_set(err, E, "expert-parallel rank %d is out of [0, %d)", ep_rank, ep_size);
    if (ep_size == 1 && !comm) return DEEPINFER_OK;
    if ((int64_t)cfg->n_routed_experts % ep_size)
        return di_error_set(err, E, "%lld experts are not divisible by --ep %d", (long long)cfg->n_routed_experts,
                            ep_size);
    if (cfg->n_stages > 0 && cfg->stage_n_routed_experts > 0 && (int64_t)cfg->stage_n_routed_experts % ep_size)
        return di_error_set(err, E, "the drafter's %lld experts are not divisible by --ep %d",
                            (long long)cfg->stage_n_routed_experts, ep_size);
    /* one GPU per rank over NCCL: refused before anything is allocated (a loopback group on one device is
     * the tests' placement, engine_internal.h ranks_one_device) */
    if (di_backend_active() == DI_BACKEND_CUDA && !di_comm_is_loopback(comm)) {
        di_cuda_info ci;
        di_backend_cuda_info(&ci);
        deepinfer_status st = di_plan_layout_check(cfg, ep_size, ci.device_count, err);
        if (st) return st;
    }
    if (!comm || comm->size != ep_size || comm->rank != ep_rank)
        return di_error_set(err, E, "--ep %d rank %d needs a communicator of %d ranks in which it is rank %d", ep_size,
                            ep_rank, ep_size, ep_rank);
    di_ep_model *ep = calloc(1, sizeof *ep);
    if (!ep) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "expert parallelism: out of memory");
    ep->comm = comm, ep->rank = ep_rank, ep->size = ep_size, ep->cfg = cfg;
    ep->sb = calloc((size_t)ep_size, sizeof(size_t)), ep->so = calloc((size_t)ep_size, sizeof(size_t));
    ep->rb = calloc((size_t)ep_size, sizeof(size_t)), ep->ro = calloc((size_t)ep_size, sizeof(size_t));
    if (!ep->sb || !ep->so || !ep->rb || !ep->ro) {
        di_ep_model_free(ep);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "expert parallelism: out of memory");
    }
    *out = ep;
    return DEEPINFER_OK;
}

static void scratch_free(di_ep_model *ep) {
    free(ep->exec), free(ep->sel_h), free(ep->sel_loc), free(ep->inv_h), free(ep->inv2), free(ep->pack);
    free(ep->unpack);
    di_dev_free(ep->d_sel_loc), di_dev_free(ep->d_inv2), di_dev_free(ep->d_pack), di_dev_free(ep->d_unpack);
    di_dev_free(ep->d_exec);
    di_dev_free(ep->d_off), di_dev_free(ep->d_off1), di_dev_free(ep->d_rw), di_dev_free(ep->d_erw);
    di_dev_free(ep->sendbuf), di_dev_free(ep->recvbuf);
    ep->exec = ep->sel_h = ep->sel_loc = ep->inv_h = ep->inv2 = ep->pack = ep->unpack = NULL;
    ep->d_sel_loc = ep->d_inv2 = ep->d_pack = ep->d_unpack = ep->d_exec = ep->d_off = ep->d_off1 = NULL;
    ep->d_rw = ep->d_erw = NULL;
    ep->sendbuf = ep->recvbuf = NULL;
    ep->cap = 0;
}

static void layer_free(di_ep_layer *L) {
    free(L->ncopies), free(L->copies), free(L->load), free(L->local), free(L->W1), free(L->W3), free(L->W2);
    free(L->seen), free(L->off), free(L->pulled);
    di_dev_free(L->d_ncopies), di_dev_free(L->d_copies), di_dev_free(L->d_local), di_dev_free(L->d_load);
    di_dev_free(L->d_replica);
    if (L->mw) L->mw->ep = NULL;
    free(L);
}

void di_ep_model_free(di_ep_model *ep) {
    if (!ep) return;
    for (int l = 0; l < ep->nlayers; l++) layer_free(ep->layers[l]);
    free(ep->layers);
    di_spec_free(ep->spec);
    scratch_free(ep);
    di_ep_dp_free(ep);
    free(ep->sb), free(ep->so), free(ep->rb), free(ep->ro);
    free(ep);
}

void di_ep_owned(const di_ep_model *ep, int E, int *lo, int *hi) {
    if (!ep) {
        *lo = 0, *hi = E;
        return;
    }
    int per = E / ep->size;
    *lo = ep->rank * per, *hi = *lo + per;
}

void di_ep_keep_spec(di_ep_model *ep, di_weight_spec *spec) { ep->spec = spec; }

deepinfer_status di_ep_take_status(di_ep_model *ep, di_error *err) {
    if (!ep || !ep->status) return DEEPINFER_OK;
    deepinfer_status st = di_error_set(err, ep->status, "%s", ep->err.msg);
    ep->status = DEEPINFER_OK;
    return st;
}

/* The resident-expert views (W1/W3/W2 in increasing id) from mw's bound experts, and the
 * replica table's copy in backend memory (between steps: the device plan reads it). */
static void rebuild_local(di_ep_layer *L, const unsigned char *resident) {
    L->nloc = 0;
    for (int e = 0; e < L->E; e++) {
        L->local[e] = resident[e] ? L->nloc : -1;
        if (!resident[e]) continue;
        L->W1[L->nloc] = L->mw->w1[e], L->W3[L->nloc] = L->mw->w3[e], L->W2[L->nloc] = L->mw->w2[e];
        L->nloc++;
    }
    size_t ni = sizeof(int) * (size_t)L->E;
    di_dev_upload(L->d_ncopies, L->ncopies, ni);
    di_dev_upload(L->d_copies, L->copies, ni * MAXC);
    di_dev_upload(L->d_local, L->local, ni);
}

deepinfer_status di_ep_attach(di_ep_model *ep, di_moe_w *mw, const char *prefix, di_error *err) {
    if (!ep) return DEEPINFER_OK;
    int E = mw->n_experts, S = ep->size;
    di_ep_layer *L = calloc(1, sizeof *L);
    if (ep->nlayers == ep->caplayers) {
        int cap = ep->caplayers ? 2 * ep->caplayers : 16;
        di_ep_layer **p = realloc(ep->layers, (size_t)cap * sizeof *p);
        if (p) ep->layers = p, ep->caplayers = cap;
    }
    unsigned char *res = calloc((size_t)E, 1);
    if (L) {
        L->ncopies = calloc((size_t)E, sizeof(int));
        L->copies = calloc((size_t)E * MAXC, sizeof(int));
        L->load = calloc((size_t)E, sizeof(int64_t));
        L->local = calloc((size_t)E, sizeof(int));
        L->W1 = calloc((size_t)E, sizeof(di_wmat)), L->W3 = calloc((size_t)E, sizeof(di_wmat));
        L->W2 = calloc((size_t)E, sizeof(di_wmat));
        L->seen = calloc((size_t)E, sizeof(int)), L->off = calloc((size_t)E + 2, sizeof(int));
        L->pulled = calloc((size_t)E + 1, sizeof(int64_t));
        size_t ni = sizeof(int) * (size_t)E;
        L->d_ncopies = di_dev_alloc(ni), L->d_copies = di_dev_alloc(ni * MAXC), L->d_local = di_dev_alloc(ni);
        L->d_load = di_dev_alloc(sizeof(int64_t) * (size_t)E), L->d_replica = di_dev_alloc(sizeof(int64_t));
    }
    if (!L || !res || ep->nlayers == ep->caplayers || !L->ncopies || !L->copies || !L->load || !L->local || !L->W1 ||
        !L->W3 || !L->W2 || !L->seen || !L->off || !L->pulled || !L->d_ncopies || !L->d_copies || !L->d_local ||
        !L->d_load || !L->d_replica) {
        if (L) layer_free(L);
        free(res);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "expert parallelism: out of memory");
    }
    ep->layers[ep->nlayers++] = L;
    L->ep = ep, L->mw = mw, L->E = E, L->per_rank = E / S;
    snprintf(L->prefix, sizeof L->prefix, "%s", prefix);
    int lo, hi;
    di_ep_owned(ep, E, &lo, &hi);
    for (int e = 0; e < E; e++) {
        L->ncopies[e] = 1;
        L->copies[e * MAXC] = e / L->per_rank;
        res[e] = e >= lo && e < hi;
    }
    rebuild_local(L, res);
    di_dev_zero(L->d_load, sizeof(int64_t) * (size_t)E);
    di_dev_zero(L->d_replica, sizeof(int64_t));
    free(res);
    mw->ep = L;
    return DEEPINFER_OK;
}

int di_ep_grow(di_ep_model *ep, int n, int d) {
    if (n <= ep->cap) return 1;
    scratch_free(ep);
    size_t ni = sizeof(int) * (size_t)n;
    int64_t E = ep->cfg->n_routed_experts > ep->cfg->stage_n_routed_experts ? ep->cfg->n_routed_experts
                                                                            : ep->cfg->stage_n_routed_experts;
    ep->exec = malloc(ni), ep->sel_h = malloc(ni), ep->sel_loc = malloc(ni), ep->inv_h = malloc(ni);
    ep->inv2 = malloc(ni), ep->pack = malloc(ni), ep->unpack = malloc(ni);
    ep->d_sel_loc = di_dev_alloc(ni), ep->d_inv2 = di_dev_alloc(ni), ep->d_pack = di_dev_alloc(ni);
    ep->d_unpack = di_dev_alloc(ni), ep->d_exec = di_dev_alloc(ni);
    ep->d_off = di_dev_alloc(sizeof(int) * (size_t)(E + 2)), ep->d_off1 = di_dev_alloc(sizeof(int) * 4);
    ep->d_rw = di_dev_alloc(sizeof(float) * (size_t)n), ep->d_erw = di_dev_alloc(sizeof(float) * (size_t)n);
    ep->sendbuf = di_dev_alloc((size_t)n * (size_t)d * 2);
    /* the fixed combine exchange receives size * ceil(M / size) * k <= n + size * k rows (k <= 64) */
    ep->recvbuf = di_dev_alloc(((size_t)n + (size_t)ep->size * 64) * (size_t)d * 2);
    if (!ep->exec || !ep->sel_h || !ep->sel_loc || !ep->inv_h || !ep->inv2 || !ep->pack || !ep->unpack ||
        !ep->d_sel_loc || !ep->d_inv2 || !ep->d_pack || !ep->d_unpack || !ep->d_exec || !ep->d_off || !ep->d_off1 || !ep->d_rw ||
        !ep->d_erw || !ep->sendbuf || !ep->recvbuf) {
        scratch_free(ep);
        return 0;
    }
    di_dev_zero(ep->d_rw, sizeof(float) * (size_t)n);
    ep->cap = n;
    return 1;
}

deepinfer_status di_ep_reserve(di_ep_model *ep, int entries, di_error *err) {
    if (!ep || di_ep_grow(ep, entries, (int)ep->cfg->hidden_size)) return DEEPINFER_OK;
    return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "expert parallelism: out of memory for %d routing entries",
                        entries);
}

void di_ep_fail(di_ep_model *ep, deepinfer_status st, const di_error *e, const char *what) {
    if (ep->status) return;
    ep->status = st;
    di_error_set(&ep->err, st, "expert parallelism (%s): %.900s", what, e ? e->msg : "out of memory");
}

/* Rows src[list[j]] -> dst[j] for j < count (bf16 rows of width d): ops.h di_moe_gather over
 * one group (k = 1), the list uploaded to backend memory. off1: the group's two offsets. */
void di_ep_gather_list(di_exec *x, di_ep_model *ep, int count, const int *list, int *d_list, int *d_off1,
                        const uint16_t *src, int d, uint16_t *dst) {
    int off[2] = {0, count};
    di_copy_h2d(x, d_list, list, sizeof(int) * (size_t)count);
    di_copy_h2d(x, d_off1, off, sizeof off);
    di_moe_gather(x, count, d_off1, 1, d_list, 1, src, (size_t)d, d, ep->d_rw, dst, (size_t)d, ep->d_erw);
}

void di_ep_pull_counters(di_ep_model *ep) {
    for (int l = 0; ep && l < ep->nlayers; l++) {
        di_ep_layer *L = ep->layers[l];
        if (!L->x) continue; /* no step ran it since the last pull */
        size_t nb = sizeof(int64_t) * (size_t)L->E;
        di_copy_d2h(L->x, L->pulled, L->d_load, nb);
        di_copy_d2h(L->x, L->pulled + L->E, L->d_replica, sizeof(int64_t));
        for (int e = 0; e < L->E; e++) L->load[e] += L->pulled[e];
        L->replica_entries += L->pulled[L->E];
        di_dev_zero(L->d_load, nb);
        di_dev_zero(L->d_replica, sizeof(int64_t));
        L->x = NULL;
    }
}

/* The exchange's collectives: stream-ordered where the communicator has them (NCCL on CUDA: no
 * host sync, comm.h di_comm_alltoallv_async); else the exec is synced first, so that the blocking
 * exchange reads finished buffers (loopback). */
static deepinfer_status exchange_ready(di_ep_model *ep, di_exec *x, di_error *e) {
    return di_comm_stream_ordered(ep->comm) ? DEEPINFER_OK : di_exec_sync(x, e);
}

void di_ep_moe_routed(di_fwd *f, di_ep_layer *L, const di_moe_opts *o, const int *sel, const float *rw,
                      const uint16_t *xn, const uint16_t *shared, uint16_t *out) {
    di_ep_model *ep = L->ep;
    di_exec *x = f->x;
    di_ws *ws = f->ws;
    const di_model_config *c = f->cfg;
    if (ep->dp) { /* attention DP: every rank its own rows (moe_ep_dp.c) */
        di_ep_routed_dp(f, L, o, sel, rw, xn, shared, out);
        return;
    }
    int M = f->M, K = o->topk, d = (int)c->hidden_size, S = ep->size, me = ep->rank, n = M * K;
    if (M <= 0) return;
    if (K > 64 || !di_ep_grow(ep, n, d)) {
        di_ep_fail(ep, DEEPINFER_ERR_OUT_OF_MEMORY, NULL, "step buffers");
        return;
    }
    L->x = x;
    di_exec_join(x); /* the shared expert's side line (moe.c) finished before `shared` / `out` are touched */
    /* 1-2. the plan on the device (the router is replicated: every rank computes the same table):
     * executing ranks, this rank's dispatch, the combine exchange's positions, the counters */
    int nl = L->nloc, a = (int)((int64_t)M * me / S), b = (int)((int64_t)M * (me + 1) / S), Ms = b - a;
    di_ep_plan_args pa = {.M = M, .k = K, .E = L->E, .sel = sel, .ncopies = L->d_ncopies, .copies = L->d_copies,
                          .maxc = MAXC, .local = L->d_local, .nloc = nl, .rank = me, .size = S,
                          .exec = ep->d_exec, .sel_loc = ep->d_sel_loc, .off = ep->d_off, .rows = ws->moe_rows,
                          .inv = ws->moe_inv, .pack = ep->d_pack, .cinv = ep->d_inv2, .unpack = ep->d_unpack,
                          .load = L->d_load, .replica = L->d_replica};
    di_ep_plan(x, &pa);
    /* 3. this rank's entries through its resident experts (the sequence of ops.h di_moe_routed; the
     * groups' row counts are read on the device, so the launches do not depend on the routing) */
    int I = L->W1[0].n, ab = c->act_block;
    di_moe_gather(x, n, ep->d_off, nl, ws->moe_rows, K, xn, (size_t)d, d, rw, ws->xe, (size_t)d, ws->erw);
    di_gemm2_grouped(x, nl, L->W1, L->W3, ep->d_off, ws->xe, (size_t)d, ab, ws->g, ws->u, (size_t)I);
    di_swiglu_n(x, ep->d_off, nl, ws->g, ws->u, (size_t)I, I, o->routed_limit, ws->erw, ws->h, (size_t)I);
    di_gemm_grouped(x, nl, L->W2, ep->d_off, ws->h, (size_t)I, ab, ws->eo, (size_t)d);
    /* 4. combine, fixed sizes: entry (m, slot) has row m*K + q (its combine place) of the send buffer;
     * rank r receives rows [a_r*K, b_r*K) from every rank into buffer s of recvbuf, Ms*K rows each,
     * and takes each entry's row from the buffer of the rank that executed it */
    di_gather_rows_bf16(x, n, ep->d_pack, ws->eo, (size_t)d, d, ep->sendbuf, (size_t)d);
    size_t row = (size_t)d * 2;
    for (int r = 0; r < S; r++) {
        size_t lo = (size_t)((int64_t)M * r / S), hi = (size_t)((int64_t)M * (r + 1) / S);
        ep->so[r] = lo * (size_t)K * row, ep->sb[r] = (hi - lo) * (size_t)K * row;
        ep->ro[r] = (size_t)r * (size_t)Ms * (size_t)K * row, ep->rb[r] = (size_t)Ms * (size_t)K * row;
    }
    di_error e = {0};
    deepinfer_status st = exchange_ready(ep, x, &e);
    if (!st) st = di_comm_alltoallv_async(ep->comm, ep->sendbuf, ep->sb, ep->so, ep->recvbuf, ep->rb, ep->ro, &e);
    if (st) {
        di_ep_fail(ep, st, &e, "combine");
        return;
    }
    if (Ms > 0) { /* a row's outputs in the single-rank order: increasing expert id, then slot (ops.h di_moe_combine) */
        di_gather_rows_bf16(x, Ms * K, ep->d_unpack, ep->recvbuf, (size_t)d, d, ws->xe, (size_t)d);
        di_moe_combine(x, Ms, K, ep->d_inv2, ws->xe, (size_t)d, d, ws->y);
        if (shared) di_add_bf16_f32_x(x, ws->y, shared + (size_t)a * d, (size_t)Ms * d);
        di_f32_to_bf16_x(x, ws->y, out + (size_t)a * d, (size_t)Ms * d);
    }
    /* 5. every rank gets every row */
    for (int r = 0; r < S; r++) {
        ep->ro[r] = (size_t)((int64_t)M * r / S) * row;
        ep->rb[r] = (size_t)((int64_t)M * (r + 1) / S - (int64_t)M * r / S) * row;
    }
    st = exchange_ready(ep, x, &e);
    if (!st) st = di_comm_allgatherv_async(ep->comm, out + (size_t)a * d, (size_t)Ms * row, out, ep->rb, ep->ro, &e);
    if (st) di_ep_fail(ep, st, &e, "all-gather");
}

/* ---- EPLB ---- */

void di_eplb_map_free(di_eplb_map *map) {
    if (!map) return;
    free(map->ncopies), free(map->copies);
    memset(map, 0, sizeof *map);
}

static int holds(const int *cp, int nc, int r) {
    for (int i = 0; i < nc; i++)
        if (cp[i] == r) return 1;
    return 0;
}

deepinfer_status di_eplb_plan(di_ep_model *ep, int capacity, di_eplb_map *out, di_error *err) {
    memset(out, 0, sizeof *out);
    if (!ep) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "EPLB: the model runs on one rank");
    di_ep_pull_counters(ep);
    if (capacity < 0) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "EPLB: capacity %d < 0", capacity);
    int S = ep->size, Emax = 1;
    for (int l = 0; l < ep->nlayers; l++)
        if (ep->layers[l]->E > Emax) Emax = ep->layers[l]->E;
    out->nlayers = ep->nlayers, out->E = Emax;
    out->ncopies = calloc((size_t)ep->nlayers * Emax + 1, sizeof(int));
    out->copies = calloc((size_t)ep->nlayers * Emax * MAXC + 1, sizeof(int));
    double *rl = calloc((size_t)S, sizeof(double));
    int *reps = calloc((size_t)S, sizeof(int));
    unsigned char *done = calloc((size_t)Emax, 1);
    if (!out->ncopies || !out->copies || !rl || !reps || !done) {
        free(rl), free(reps), free(done);
        di_eplb_map_free(out);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "EPLB: out of memory");
    }
    for (int l = 0; l < ep->nlayers; l++) {
        const di_ep_layer *L = ep->layers[l];
        int E = L->E, *nc = out->ncopies + (size_t)l * Emax, *cp = out->copies + (size_t)l * Emax * MAXC;
        memset(rl, 0, sizeof(double) * (size_t)S);
        memset(reps, 0, sizeof(int) * (size_t)S);
        memset(done, 0, (size_t)Emax);
        for (int e = 0; e < E; e++) {
            nc[e] = 1;
            cp[e * MAXC] = e / L->per_rank;
            rl[e / L->per_rank] += (double)L->load[e];
        }
        for (;;) {
            int best = -1; /* the most entries per copy; ties: lower id */
            for (int e = 0; e < E; e++) {
                if (done[e] || L->load[e] == 0 || nc[e] >= MAXC || nc[e] >= S) continue;
                if (best < 0 || L->load[e] * nc[best] > L->load[best] * nc[e]) best = e;
            }
            if (best < 0) break;
            int t = -1; /* the least loaded rank with room that lacks it; ties: lower rank */
            for (int r = 0; r < S; r++)
                if (reps[r] < capacity && !holds(cp + best * MAXC, nc[best], r) && (t < 0 || rl[r] < rl[t])) t = r;
            if (t < 0) {
                done[best] = 1;
                continue;
            }
            double before = (double)L->load[best] / nc[best], after = (double)L->load[best] / (nc[best] + 1);
            for (int i = 0; i < nc[best]; i++) rl[cp[best * MAXC + i]] -= before - after;
            rl[t] += after;
            cp[best * MAXC + nc[best]++] = t;
            reps[t]++;
        }
    }
    free(rl), free(reps), free(done);
    return DEEPINFER_OK;
}

static void drop_expert(di_moe_w *mw, int e) {
    di_wmat_free(&mw->w1[e]), di_wmat_free(&mw->w2[e]), di_wmat_free(&mw->w3[e]);
    memset(&mw->w1[e], 0, sizeof mw->w1[e]), memset(&mw->w2[e], 0, sizeof mw->w2[e]);
    memset(&mw->w3[e], 0, sizeof mw->w3[e]);
}

deepinfer_status di_eplb_apply(di_ep_model *ep, const di_eplb_map *map, di_error *err) {
    if (!ep || !map || map->nlayers != ep->nlayers)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "EPLB: the map was not planned for this model");
    if (!ep->spec) return di_error_set(err, DEEPINFER_ERR_INTERNAL, "EPLB: the model kept no checkpoint spec");
    int me = ep->rank;
    deepinfer_status st = DEEPINFER_OK;
    unsigned char *res = malloc((size_t)map->E);
    if (!res) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "EPLB: out of memory");
    di_ep_pull_counters(ep); /* the replica entries kept; the loads start again below */
    for (int l = 0; l < ep->nlayers && !st; l++) {
        di_ep_layer *L = ep->layers[l];
        const int *nc = map->ncopies + (size_t)l * map->E, *cp = map->copies + (size_t)l * map->E * MAXC;
        for (int e = 0; e < L->E && !st; e++) {
            if (nc[e] < 1 || nc[e] > MAXC || cp[e * MAXC] != e / L->per_rank) {
                st = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "EPLB: layer %s expert %d: malformed copies",
                                  L->prefix, e);
                break;
            }
            int need = holds(cp + e * MAXC, nc[e], me), has = L->local[e] >= 0;
            if (need && !has) {
                const di_model_config *c = ep->cfg;
                di_moe_w *mw = L->mw;
                if ((st = di_bind_linear(&mw->w1[e], c, ep->spec, err, "%sffn.experts.%d.w1", L->prefix, e)) ||
                    (st = di_bind_linear(&mw->w2[e], c, ep->spec, err, "%sffn.experts.%d.w2", L->prefix, e)) ||
                    (st = di_bind_linear(&mw->w3[e], c, ep->spec, err, "%sffn.experts.%d.w3", L->prefix, e))) {
                    drop_expert(mw, e);
                    need = 0;
                }
            } else if (!need && has) {
                drop_expert(L->mw, e);
            }
            res[e] = (unsigned char)need;
        }
        if (st) { /* this layer stays as it was: its resident set from before */
            for (int e = 0; e < L->E; e++) res[e] = L->local[e] >= 0 && L->mw->w1[e].n > 0;
            rebuild_local(L, res);
            break;
        }
        memcpy(L->ncopies, nc, sizeof(int) * (size_t)L->E);
        memcpy(L->copies, cp, sizeof(int) * (size_t)L->E * MAXC);
        memset(L->load, 0, sizeof(int64_t) * (size_t)L->E);
        rebuild_local(L, res);
    }
    di_wload_finish(); /* the replicas' file pages dropped behind them */
    free(res);
    return st;
}
