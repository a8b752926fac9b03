/* mhc.c — block-level hyper-connections (mhc.h). */
#include "model/mhc.h"


static void mixes(di_fwd *f, const di_hc_w *hc, const uint16_t *R) {
    const di_model_config *c = f->cfg;
    int hcd = (int)(c->hc_mult * c->hidden_size);
    di_gemm(f->x, f->M, R, (size_t)hcd, &hc->fn, 0, f->ws->mixes, NULL, (size_t)hc->nmix);
    di_hc_scale_mixes(f->x, f->M, R, (size_t)hcd, hcd, (float)c->rms_norm_eps, f->ws->mixes, hc->nmix, f->ws->mixes);
}

void di_mhc_site(di_fwd *f, const di_hc_w *hc, const float *norm, const uint16_t *sub, uint16_t *R, int chain) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int d = (int)c->hidden_size, hcd = (int)(c->hc_mult * d);
    di_hc_transition(f->x, f->M, sub, (size_t)d, R, (size_t)hcd, d, &hc->fn, hc->dscale, hc->dbase,
                     (int)c->hc_sinkhorn_iters, (float)c->hc_eps, (float)c->rms_norm_eps, ws->mixes, ws->pre, ws->post,
                     ws->comb, chain ? ws->pre_in : NULL, norm, (float)c->rms_norm_eps, ws->x, ws->xn, (size_t)d);
}

void di_mhc_collapse_carried(di_fwd *f, const uint16_t *R, uint16_t *x) {
    int d = (int)f->cfg->hidden_size, hcd = (int)(f->cfg->hc_mult * d);
    di_hc_collapse(f->x, f->M, f->ws->pre_in, R, (size_t)hcd, d, x, (size_t)d);
}

void di_mhc_post(di_fwd *f, const uint16_t *sub, uint16_t *R) {
    const di_model_config *c = f->cfg;
    int d = (int)c->hidden_size, hcd = (int)(c->hc_mult * d);
    di_hc_expand(f->x, f->M, f->ws->post, f->ws->comb, sub, (size_t)d, R, R, (size_t)hcd, d);
}

void di_mhc_head(di_fwd *f, const di_hc_w *hc, const uint16_t *R, uint16_t *x) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int d = (int)c->hidden_size, hcd = (int)(c->hc_mult * d), hcm = (int)c->hc_mult;
    mixes(f, hc, R);
    di_hc_head_pre(f->x, f->M, ws->mixes, hcm, hc->scale[0], hc->dbase, (float)c->hc_eps, ws->pre);
    di_hc_collapse(f->x, f->M, ws->pre, R, (size_t)hcd, d, x, (size_t)d);
}

void di_mhc_head_final(di_fwd *f, const di_hc_w *hc, const float *norm, uint16_t *R) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int d = (int)c->hidden_size, hcd = (int)(c->hc_mult * d);
    const uint16_t *sub = f->hc_post_pending ? ws->sub : NULL;
    f->hc_post_pending = 0;
    di_hc_head_final(f->x, f->M, sub, (size_t)d, ws->post, ws->comb, R, (size_t)hcd, d, hc ? &hc->fn : NULL,
                     hc ? hc->scale[0] : 0.0f, hc ? hc->dbase : NULL, (float)c->hc_eps, (float)c->rms_norm_eps,
                     ws->mixes, hc ? ws->pre : ws->pre_in, norm, (float)c->rms_norm_eps, ws->x, ws->xn, (size_t)d);
}

void di_mhc_post_pending(di_fwd *f, uint16_t *R) {
    if (!f->hc_post_pending) return;
    f->hc_post_pending = 0;
    di_mhc_post(f, f->ws->sub, R);
}
