/* moe.c — the mixture-of-experts sub-layer (moe.h). */
#include "model/moe.h"

#include <math.h>
#include <string.h>

#include "io/numfmt.h"

void di_moe_block(di_fwd *f, const di_moe_w *mw, const di_moe_opts *o, const uint16_t *xn, uint16_t *out) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    di_exec *x = f->x;
    int M = f->M, d = (int)c->hidden_size, E = mw->n_experts, K = o->topk, ab = c->act_block;

    /* router (fp32 logits; fp32 scores and weights) */
    di_gemm(x, M, xn, (size_t)d, &mw->gate, 0, ws->logits_gate, NULL, (size_t)E);
    if (o->gate_temp != 1.0f)
        for (size_t i = 0; i < (size_t)M * E; i++) ws->logits_gate[i] /= o->gate_temp;
    for (int m = 0; m < M; m++) {
        const int *fixed = mw->tid2eid ? mw->tid2eid + (size_t)f->tokens[m] * K : NULL;
        const float *l = ws->logits_gate + (size_t)m * E;
        int *sel = ws->sel + (size_t)m * K;
        float *w = ws->rw + (size_t)m * K;
        di_route(l, E, mw->bias, fixed, K, o->route_scale, o->norm_eps, sel, w);
        if (!o->normalize) /* the unnormalised scores: sqrt(softplus(l)) * route_scale, as di_route computes them */
            for (int k = 0; k < K; k++) {
                float z = l[sel[k]];
                w[k] = sqrtf(z > 20.0f ? z : log1pf(expf(z))) * o->route_scale;
            }
    }

    /* routed experts, in increasing expert id */
    memset(ws->y, 0, sizeof(float) * (size_t)M * d);
    for (int e = 0; e < E; e++) {
        int n = 0;
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++)
                if (ws->sel[(size_t)m * K + k] == e) {
                    ws->erows[n] = m;
                    ws->eslot[n] = k;
                    n++;
                }
        if (!n) continue;
        int I = mw->w1[e].n;
        for (int i = 0; i < n; i++) {
            memcpy(ws->xe + (size_t)i * d, xn + (size_t)ws->erows[i] * d, (size_t)d * 2);
            ws->erw[i] = ws->rw[(size_t)ws->erows[i] * K + ws->eslot[i]];
        }
        di_gemm2(x, n, ws->xe, (size_t)d, &mw->w1[e], &mw->w3[e], ab, NULL, ws->g, NULL, ws->u, (size_t)I);
        di_swiglu(x, n, ws->g, ws->u, (size_t)I, I, o->routed_limit, ws->erw, ws->h, (size_t)I);
        di_gemm(x, n, ws->h, (size_t)I, &mw->w2[e], ab, NULL, ws->eo, (size_t)d);
        for (int i = 0; i < n; i++) di_add_bf16_f32(ws->y + (size_t)ws->erows[i] * d, ws->eo + (size_t)i * d, (size_t)d);
    }

    /* shared expert, added last */
    if (mw->has_shared) {
        int I = mw->sw1.n;
        di_gemm2(x, M, xn, (size_t)d, &mw->sw1, &mw->sw3, ab, NULL, ws->g, NULL, ws->u, (size_t)I);
        di_swiglu(x, M, ws->g, ws->u, (size_t)I, I, o->shared_limit, NULL, ws->h, (size_t)I);
        di_gemm(x, M, ws->h, (size_t)I, &mw->sw2, ab, NULL, ws->eo, (size_t)d);
        di_add_bf16_f32(ws->y, ws->eo, (size_t)M * d);
    }
    di_f32_to_bf16_n(ws->y, out, (size_t)M * d);
}
