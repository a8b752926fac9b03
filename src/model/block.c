/* block.c — block wiring: mHC sites around attention and MoE (block.h). */
#include "model/block.h"

#include "model/mhc.h"

void di_block_chain_start(di_fwd *f) { di_hc_pre_onehot(f->x, f->M, f->ws->pre_in); }

void di_block(di_fwd *f, const di_block_w *bw, const di_layer_cfg *L, int layer, uint16_t *R, int chain,
              di_attn_fn attn, const di_moe_opts *moe) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int d = (int)c->hidden_size;
    float eps = (float)c->rms_norm_eps;
    di_mhc_pre(f, &bw->hc_attn, R, chain, ws->x);
    di_rmsnorm(f->x, f->M, ws->x, (size_t)d, bw->attn_norm, d, eps, ws->xn, (size_t)d);
    attn(f, &bw->attn, L, layer, ws->xn, ws->sub);
    di_mhc_post(f, ws->sub, R);
    di_mhc_pre(f, &bw->hc_ffn, R, chain, ws->x);
    di_rmsnorm(f->x, f->M, ws->x, (size_t)d, bw->ffn_norm, d, eps, ws->xn, (size_t)d);
    di_moe_block(f, &bw->moe, moe, ws->xn, ws->sub);
    di_mhc_post(f, ws->sub, R);
}
