/* moe.c — the mixture-of-experts sub-layer (moe.h). */
#include "model/moe.h"

void di_moe_block(di_fwd *f, const di_moe_w *mw, const di_moe_opts *o, const uint16_t *xn, uint16_t *out) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    di_exec *x = f->x;
    int M = f->M, d = (int)c->hidden_size, E = mw->n_experts, K = o->topk, ab = c->act_block;

    /* router (fp32 logits; fp32 scores and weights) */
    di_gemm(x, M, xn, (size_t)d, &mw->gate, 0, ws->logits_gate, NULL, (size_t)E);
    di_route_rows(x, M, ws->logits_gate, E, o->gate_temp, mw->bias, mw->tid2eid, f->dtok, K, o->route_scale,
                  o->norm_eps, o->normalize, ws->sel, ws->rw);

    /* routed experts: dispatch by expert, grouped GEMMs, combine in increasing expert id */
    int I = mw->w1[0].n;
    di_moe_dispatch(x, M, K, ws->sel, E, ws->moe_off, ws->moe_rows, ws->moe_inv);
    di_moe_gather(x, M * K, ws->moe_off, E, ws->moe_rows, K, xn, (size_t)d, d, ws->rw, ws->xe, (size_t)d, ws->erw);
    di_gemm2_grouped(x, E, mw->w1, mw->w3, ws->moe_off, ws->xe, (size_t)d, ab, ws->g, ws->u, (size_t)I);
    di_swiglu_n(x, ws->moe_off, E, ws->g, ws->u, (size_t)I, I, o->routed_limit, ws->erw, ws->h, (size_t)I);
    di_gemm_grouped(x, E, mw->w2, ws->moe_off, ws->h, (size_t)I, ab, ws->eo, (size_t)d);
    di_moe_combine(x, M, K, ws->moe_inv, ws->eo, (size_t)d, d, ws->y);

    /* shared expert, added last */
    if (mw->has_shared) {
        I = mw->sw1.n;
        di_gemm2(x, M, xn, (size_t)d, &mw->sw1, &mw->sw3, ab, NULL, ws->g, NULL, ws->u, (size_t)I);
        di_swiglu(x, M, ws->g, ws->u, (size_t)I, I, o->shared_limit, NULL, ws->h, (size_t)I);
        di_gemm(x, M, ws->h, (size_t)I, &mw->sw2, ab, NULL, ws->eo, (size_t)d);
        di_add_bf16_f32_x(x, ws->y, ws->eo, (size_t)M * d);
    }
    di_f32_to_bf16_x(x, ws->y, out, (size_t)M * d);
}
