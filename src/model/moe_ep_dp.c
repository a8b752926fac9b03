/* moe_ep_dp.c — the MoE sub-layer under attention data parallelism: every rank routes its own
 * rows, entries go to their experts' ranks and the outputs come back to the row's rank, combined
 * in the single-rank order (moe_ep.h "attention data parallelism"). */
#include <stdlib.h>
#include <string.h>

#include "model/moe_ep.h"
#include "model/moe_ep_internal.h"
#include "ops/backend.h"

#define MAXC DI_EP_MAX_COPIES

/* Scratch beside the dp = 1 one (which it shares: sendbuf / recvbuf, the lists), sized for the
 * same `cap` entries. */
typedef struct di_ep_dp {
    int cap;
    int *cnt, *base;      /* host [size], [size + 1]: entries per rank, their start in the table */
    int32_t *ent;         /* host [2 * cap]: the step's table, (expert, weight bits) in global order */
    int *gexec;           /* host [cap]: the executing rank of every table entry */
    int *rlist;           /* host [cap]: the table entries this rank executes, in global order */
    float *rw_h, *wv;     /* host [cap]: own weights; the received entries' weights */
    int *d_cnt;           /* backend [size] */
    int32_t *d_ent;       /* backend [2 * cap] */
    float *d_wv;          /* backend [cap] */
} di_ep_dp;

void di_ep_dp_free(di_ep_model *ep) {
    di_ep_dp *p = ep->dps;
    if (!p) return;
    free(p->cnt), free(p->base), free(p->ent), free(p->gexec), free(p->rlist), free(p->rw_h), free(p->wv);
    di_dev_free(p->d_cnt), di_dev_free(p->d_ent), di_dev_free(p->d_wv);
    free(p);
    ep->dps = NULL;
}

deepinfer_status di_ep_set_dp(di_ep_model *ep, int on, di_error *err) {
    if (!ep) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "attention DP needs expert parallelism (--ep)");
    if (!on) {
        di_ep_dp_free(ep);
        ep->dp = 0;
        return DEEPINFER_OK;
    }
    if (ep->cap < 1) return di_error_set(err, DEEPINFER_ERR_INTERNAL, "attention DP: the EP scratch is not reserved");
    di_ep_dp_free(ep);
    di_ep_dp *p = calloc(1, sizeof *p);
    size_t n = (size_t)ep->cap, S = (size_t)ep->size;
    if (p) {
        p->cap = ep->cap;
        p->cnt = calloc(S, sizeof(int)), p->base = calloc(S + 1, sizeof(int));
        p->ent = malloc(2 * n * sizeof(int32_t)), p->gexec = malloc(n * sizeof(int)), p->rlist = malloc(n * sizeof(int));
        p->rw_h = malloc(n * sizeof(float)), p->wv = malloc(n * sizeof(float));
        p->d_cnt = di_dev_alloc(S * sizeof(int)), p->d_ent = di_dev_alloc(2 * n * sizeof(int32_t));
        p->d_wv = di_dev_alloc(n * sizeof(float));
    }
    ep->dps = p;
    if (!p || !p->cnt || !p->base || !p->ent || !p->gexec || !p->rlist || !p->rw_h || !p->wv || !p->d_cnt ||
        !p->d_ent || !p->d_wv) {
        di_ep_dp_free(ep);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "attention DP: out of memory for %d routing entries",
                            ep->cap);
    }
    ep->dp = 1;
    return DEEPINFER_OK;
}

void di_ep_routed_dp(di_fwd *f, di_ep_layer *L, const di_moe_opts *o, const int *sel, const float *rw,
                     const uint16_t *xn, const uint16_t *shared, uint16_t *out) {
    di_ep_model *ep = L->ep;
    di_ep_dp *p = ep->dps;
    di_exec *x = f->x;
    di_ws *ws = f->ws;
    int M = f->M > 0 ? f->M : 0, K = o->topk, E = L->E, d = (int)ep->cfg->hidden_size, S = ep->size, me = ep->rank;
    int n = M * K;
    size_t row = (size_t)d * 2;
    di_error e = {0};
    deepinfer_status st;
    if (n > p->cap) n = p->cap, di_ep_fail(ep, DEEPINFER_ERR_INTERNAL, NULL, "rows of a DP pass over the scratch");
    if (M) di_exec_join(x); /* the shared expert's side line finished before `out` is touched */
    if (n) {
        di_copy_d2h(x, ep->sel_h, sel, sizeof(int) * (size_t)n);
        di_copy_d2h(x, p->rw_h, rw, sizeof(float) * (size_t)n);
    }
    /* 1. the step's routing table on every rank: counts, then the entries */
    for (int r = 0; r < S; r++) ep->rb[r] = sizeof(int), ep->ro[r] = (size_t)r * sizeof(int);
    di_copy_h2d(x, p->d_cnt + me, &n, sizeof(int));
    st = di_exec_sync(x, &e);
    if (!st) st = di_comm_allgatherv(ep->comm, p->d_cnt + me, sizeof(int), p->d_cnt, ep->rb, ep->ro, &e);
    if (st) {
        di_ep_fail(ep, st, &e, "DP counts");
        return;
    }
    di_copy_d2h(x, p->cnt, p->d_cnt, sizeof(int) * (size_t)S);
    p->base[0] = 0;
    for (int r = 0; r < S; r++) p->base[r + 1] = p->base[r] + p->cnt[r];
    int total = p->base[S], own = p->base[me];
    if (total > p->cap) { /* every rank sees the same total: all stop here */
        di_error_set(&e, DEEPINFER_ERR_INTERNAL, "a DP pass of %d routing entries over the reserved %d", total, p->cap);
        di_ep_fail(ep, DEEPINFER_ERR_INTERNAL, &e, "DP table");
        return;
    }
    int32_t *mine = p->ent + 2 * (size_t)own;
    for (int i = 0; i < n; i++) {
        mine[2 * i] = ep->sel_h[i];
        memcpy(&mine[2 * i + 1], &p->rw_h[i], 4);
    }
    for (int r = 0; r < S; r++) ep->rb[r] = (size_t)p->cnt[r] * 8, ep->ro[r] = (size_t)p->base[r] * 8;
    if (n) di_copy_h2d(x, p->d_ent + 2 * (size_t)own, mine, (size_t)n * 8);
    st = di_exec_sync(x, &e);
    if (!st) st = di_comm_allgatherv(ep->comm, p->d_ent + 2 * (size_t)own, (size_t)n * 8, p->d_ent, ep->rb, ep->ro, &e);
    if (st) {
        di_ep_fail(ep, st, &e, "DP table");
        return;
    }
    if (total) di_copy_d2h(x, p->ent, p->d_ent, (size_t)total * 8);
    /* 2. the executing rank of every entry, in the global order; the counters count the table */
    memset(L->seen, 0, sizeof(int) * (size_t)E);
    for (int g = 0; g < total; g++) {
        int ex = p->ent[2 * g], j = L->seen[ex]++;
        int r = L->copies[ex * MAXC + j % L->ncopies[ex]];
        L->load[ex]++;
        p->gexec[g] = r;
        if (r == me && j % L->ncopies[ex]) L->replica_entries++;
    }
    /* 3. dispatch: own entries' input rows to their executing ranks */
    int np = 0;
    for (int t = 0; t < S; t++) {
        ep->so[t] = (size_t)np * row;
        for (int i = 0; i < n; i++)
            if (p->gexec[own + i] == t) ep->pack[np++] = i / K;
        ep->sb[t] = (size_t)np * row - ep->so[t];
    }
    if (np) di_ep_gather_list(x, ep, np, ep->pack, ep->d_pack, ep->d_off1, xn, d, ep->sendbuf);
    int nr = 0;
    for (int q = 0; q < S; q++) {
        ep->ro[q] = (size_t)nr * row;
        for (int g = p->base[q]; g < p->base[q + 1]; g++)
            if (p->gexec[g] == me) p->rlist[nr++] = g;
        ep->rb[q] = (size_t)nr * row - ep->ro[q];
    }
    st = di_exec_sync(x, &e);
    if (!st) st = di_comm_alltoallv(ep->comm, ep->sendbuf, ep->sb, ep->so, ep->recvbuf, ep->rb, ep->ro, &e);
    if (st) {
        di_ep_fail(ep, st, &e, "DP dispatch");
        return;
    }
    /* 4. the received entries through the resident experts: rows of one slot each */
    int nl = L->nloc, *off = L->off;
    for (int i = 0; i < nr; i++) {
        int g = p->rlist[i], ex = p->ent[2 * g];
        ep->sel_loc[i] = L->local[ex] >= 0 ? L->local[ex] : nl;
        memcpy(&p->wv[i], &p->ent[2 * g + 1], 4);
    }
    memset(off, 0, sizeof(int) * (size_t)(nl + 2));
    for (int i = 0; i < nr; i++) off[ep->sel_loc[i] + 1]++;
    for (int g = 0; g <= nl; g++) off[g + 1] += off[g];
    for (int i = 0; i < nr; i++) ep->inv_h[i] = off[ep->sel_loc[i]]++;
    if (nr && nl) {
        int I = L->W1[0].n, ab = ep->cfg->act_block;
        di_copy_h2d(x, ep->d_sel_loc, ep->sel_loc, sizeof(int) * (size_t)nr);
        di_copy_h2d(x, p->d_wv, p->wv, sizeof(float) * (size_t)nr);
        di_moe_dispatch(x, nr, 1, ep->d_sel_loc, nl + 1, ep->d_off, ws->moe_rows, ws->moe_inv);
        di_moe_gather(x, nr, ep->d_off, nl, ws->moe_rows, 1, ep->recvbuf, (size_t)d, d, p->d_wv, ws->xe, (size_t)d,
                      ws->erw);
        di_gemm2_grouped(x, nl, L->W1, L->W3, ep->d_off, ws->xe, (size_t)d, ab, ws->g, ws->u, (size_t)I);
        di_swiglu_n(x, ep->d_off, nl, ws->g, ws->u, (size_t)I, I, o->routed_limit, ws->erw, ws->h, (size_t)I);
        di_gemm_grouped(x, nl, L->W2, ep->d_off, ws->h, (size_t)I, ab, ws->eo, (size_t)d);
    }
    /* 5. the outputs back to their rows' ranks (received order: rank by rank) */
    np = 0;
    for (int q = 0, i = 0; q < S; q++) {
        ep->so[q] = (size_t)np * row;
        for (; i < nr && p->rlist[i] < p->base[q + 1]; i++) ep->pack[np++] = ep->inv_h[i];
        ep->sb[q] = (size_t)np * row - ep->so[q];
    }
    if (np) di_ep_gather_list(x, ep, np, ep->pack, ep->d_pack, ep->d_off1, ws->eo, d, ep->sendbuf);
    size_t at = 0;
    for (int t = 0; t < S; t++) {
        ep->ro[t] = at;
        for (int i = 0; i < n; i++)
            if (p->gexec[own + i] == t) at += row;
        ep->rb[t] = at - ep->ro[t];
    }
    st = di_exec_sync(x, &e);
    if (!st) st = di_comm_alltoallv(ep->comm, ep->sendbuf, ep->sb, ep->so, ep->recvbuf, ep->rb, ep->ro, &e);
    if (st) {
        di_ep_fail(ep, st, &e, "DP combine");
        return;
    }
    if (!M) return;
    /* a row's slots in the single-rank order: increasing expert id, then slot (ops.h di_moe_combine) */
    const int *hs = ep->sel_h;
    for (int m = 0; m < M; m++)
        for (int s = 0; s < K; s++) {
            int q = 0, es = hs[m * K + s];
            for (int t = 0; t < K; t++) {
                int et = hs[m * K + t];
                q += et < es || (et == es && t < s);
            }
            ep->inv2[m * K + s] = m * K + q;
        }
    for (int t = 0; t < S; t++) {
        int src = (int)(ep->ro[t] / row);
        for (int i = 0; i < n; i++)
            if (p->gexec[own + i] == t) ep->unpack[ep->inv2[i]] = src++;
    }
    di_ep_gather_list(x, ep, n, ep->unpack, ep->d_unpack, ep->d_off1 + 2, ep->recvbuf, d, ws->xe);
    di_copy_h2d(x, ep->d_inv2, ep->inv2, sizeof(int) * (size_t)n);
    di_moe_combine(x, M, K, ep->d_inv2, ws->xe, (size_t)d, d, ws->y);
    if (shared) di_add_bf16_f32_x(x, ws->y, shared, (size_t)M * d);
    di_f32_to_bf16_x(x, ws->y, out, (size_t)M * d);
}

deepinfer_status di_ep_join_empty(di_ep_model *ep, di_exec *x, di_ws *ws, const di_moe_opts *o, di_error *err) {
    if (!ep || !ep->dp) return DEEPINFER_OK;
    di_fwd f = {.x = x, .cfg = ep->cfg, .ws = ws, .M = 0};
    for (int l = 0; l < ep->nlayers; l++)
        if (!strncmp(ep->layers[l]->prefix, "layers.", 7))
            di_ep_routed_dp(&f, ep->layers[l], o, NULL, NULL, NULL, NULL, NULL);
    deepinfer_status st = di_exec_sync(x, err);
    return st ? st : di_ep_take_status(ep, err);
}
