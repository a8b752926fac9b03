/* mtp.c — the V4 MTP drafter block (architecture.md §7.1):
 *   e  = e_proj(enorm(embed[next token]))          FP8 linear -> bf16
 *   h  = h_proj(hnorm(R_main[k])) for each copy k  FP8 linear -> bf16
 *   R  = bf16(e + h[k])                            ([hc][dim])
 *   R  = block(R)   (window-only attention with its own ring, RoPE 10000,
 *                    sqrt-softplus routing over its own experts)
 *   logits = head(norm(hc_head_mtp(R)))            (shared head)
 * The block is the same code as a backbone layer; only its inputs differ. */
#include "model/attention.h"
#include "model/block.h"
#include "model/dsv4_internal.h"

deepinfer_status di_v4_mtp_forward(di_v4_model *m, const di_v4_batch *b, const uint16_t *hidden_in, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    if (m->w.n_mtp < 1) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "this checkpoint has no MTP block");
    if (di_exec_on_device(&m->core.x))
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "MTP drafting is not supported on CUDA yet");
    if (!hidden_in) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "MTP: no main-model residual given");
    deepinfer_status st = di_core_check_batch(&m->core, b, 1, err);
    if (st) return st;
    const di_mtp_w *mw = &m->w.mtp[0];
    int layer = c->n_layers;
    const di_layer_cfg *L = &c->layers[layer];
    int d = (int)c->hidden_size, hc = (int)c->hc_mult, ab = c->act_block;
    float eps = (float)c->rms_norm_eps;
    size_t hcd = (size_t)hc * d;
    uint16_t *R = m->core.R;
    for (int r0 = 0; r0 < b->n; r0 += m->core.max_rows) {
        int n = b->n - r0 < m->core.max_rows ? b->n - r0 : m->core.max_rows;
        di_fwd f;
        di_core_fwd_init(&m->core, b, r0, n, &m->moe, &f);
        di_ws *ws = f.ws;
        di_embed(f.x, n, f.dtok, m->w.embed, d, ws->x, (size_t)d);
        di_rmsnorm(f.x, n, ws->x, (size_t)d, mw->enorm, d, eps, ws->xn, (size_t)d);
        di_gemm(f.x, n, ws->xn, (size_t)d, &mw->e_proj, ab, NULL, ws->sub, (size_t)d);
        /* each residual copy normalised and projected on its own (rows of dim) */
        di_rmsnorm(f.x, n * hc, hidden_in + (size_t)r0 * hcd, (size_t)d, mw->hnorm, d, eps, m->hbuf, (size_t)d);
        di_gemm(f.x, n * hc, m->hbuf, (size_t)d, &mw->h_proj, ab, NULL, R, (size_t)d);
        di_add_bcast_bf16(f.x, n, ws->sub, hc, d, R);
        di_block(&f, &mw->blk, L, layer, R, 0, di_attn_block, &m->moe, NULL);
        di_v4_outputs(m, &m->core, &f, b, r0, &mw->hc_head, mw->norm);
        for (int s = 0; s < f.nseg; s++) f.segs[s].seq->mtp_tokens = f.segs[s].pos0 + f.segs[s].nrows;
    }
    return DEEPINFER_OK;
}
