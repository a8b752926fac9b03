/* moe.c — the mixture-of-experts sub-layer (moe.h). */
#include "model/moe.h"

#include "model/moe_ep.h"

void di_moe_block(di_fwd *f, const di_moe_w *mw, const di_moe_opts *o, const uint16_t *xn, uint16_t *out) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    di_exec *x = f->x;
    int M = f->M, d = (int)c->hidden_size, E = mw->n_experts, K = o->topk, ab = c->act_block;

    /* shared expert first, straight into out; the routed op adds it after the routed sum (the
     * order of moe.h: routed experts by increasing id, then shared, then bf16; same bits as
     * computing it last).
     * Recorded steps run it on line 1 beside the router (ops.h di_exec_branch; own buffers). */
    if (mw->has_shared) {
        int Is = mw->sw1.n;
        di_exec_branch(x, 1);
        di_gemm2(x, M, xn, (size_t)d, &mw->sw1, &mw->sw3, ab, NULL, ws->sg, NULL, ws->su, (size_t)Is);
        di_swiglu(x, M, ws->sg, ws->su, (size_t)Is, Is, o->shared_limit, NULL, ws->sh, (size_t)Is);
        di_gemm(x, M, ws->sh, (size_t)Is, &mw->sw2, ab, NULL, out, (size_t)d);
        di_exec_branch(x, 0);
    }

    /* router (fp32 logits; fp32 scores and weights): gate GEMM + di_route_rows in one op (ops.h
     * di_route_gate; architecture.md §4.7, §5.6) */
    di_route_gate(x, M, xn, (size_t)d, &mw->gate, ws->logits_gate, E, o->gate_temp, mw->bias, mw->tid2eid, f->dtok,
                  K, o->route_scale, o->norm_eps, o->normalize, ws->sel, ws->rw);

    /* expert parallelism (moe_ep.h): this rank's experts, the combine in the same order across ranks */
    if (mw->ep) {
        di_ep_moe_routed(f, mw->ep, o, ws->sel, ws->rw, xn, mw->has_shared ? out : NULL, out);
        return;
    }

    /* routed experts (dispatch by expert, grouped GEMMs, combine in increasing expert id), + shared, bf16;
     * the op joins line 1 before it reads the shared output (ops.h) */
    di_moe_bufs b = {ws->moe_off, ws->moe_rows, ws->moe_inv, ws->xe, ws->g, ws->u, ws->h, ws->eo, ws->erw};
    di_moe_routed(x, M, K, ws->sel, ws->rw, E, mw->w1, mw->w3, mw->w2, xn, (size_t)d, d, ab, o->routed_limit, &b,
                  mw->has_shared ? out : NULL, ws->y, out, (size_t)d);
}

size_t di_moe_expert_bytes(const di_moe_w *mw) {
    for (int e = 0; e < mw->n_experts; e++)
        if (mw->w1[e].bytes) return mw->w1[e].bytes + mw->w2[e].bytes + mw->w3[e].bytes;
    return 0;
}
