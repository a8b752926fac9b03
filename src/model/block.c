/* block.c — block wiring: mHC sites around attention and MoE (block.h). */
#include "model/block.h"

#include "model/mhc.h"

void di_block_chain_start(di_fwd *f) { di_hc_pre_onehot(f->x, f->M, f->ws->pre_in); }

void di_block(di_fwd *f, const di_block_w *bw, const di_layer_cfg *L, int layer, uint16_t *R, int chain,
              di_attn_fn attn, const di_moe_opts *moe, const di_block_w *next) {
    di_ws *ws = f->ws;
    if (!f->hc_primed) di_mhc_site(f, &bw->hc_attn, bw->attn_norm, NULL, R, chain);
    f->hc_primed = 0;
    attn(f, &bw->attn, L, layer, ws->xn, ws->sub);
    di_mhc_site(f, &bw->hc_ffn, bw->ffn_norm, ws->sub, R, chain);
    di_moe_block(f, &bw->moe, moe, ws->xn, ws->sub);
    if (next) { /* this site's post and the next block's attention pre: one transition */
        di_mhc_site(f, &next->hc_attn, next->attn_norm, ws->sub, R, chain);
        f->hc_primed = 1;
    } else if (f->hc_defer_post) { /* the output head runs it (di_mhc_head_final) */
        f->hc_defer_post = 0;
        f->hc_post_pending = 1;
    } else {
        di_mhc_post(f, ws->sub, R);
    }
}
