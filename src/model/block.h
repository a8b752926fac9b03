/*
 * block.h — one transformer block of a V4-family model over the step's
 * residual R ([M][hc][dim] bf16): an attention site and an FFN site, each
 * wrapped in hyper-connections (architecture.md §4.2, §5.1).
 *
 *   V4   (same-site mHC): each site collapses R with the pre vector of its
 *        own mixes.
 *   V4.1 (single-pass, `chain`): the attention site collapses with the
 *        incoming pre (ws->pre_in: the previous block's FFN pre, one-hot
 *        copy 0 before the first block), the FFN site with the attention
 *        site's pre, and the FFN site's pre is left in ws->pre_in for the
 *        next block (or the final collapse).
 *
 * The attention sub-layer is a parameter: backbone layers use
 * di_attn_block, DSpark stages their block attention.
 */
#ifndef DI_MODEL_BLOCK_H
#define DI_MODEL_BLOCK_H

#include "model/forward.h"
#include "model/moe.h"
#include "model/weights.h"

/* xn: bf16 [M][dim] (attn_norm output); out: bf16 [M][dim]. */
typedef void (*di_attn_fn)(di_fwd *f, const di_attn_w *aw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                           uint16_t *out);

/* next: the block that the caller runs right after this one on the same R
 * with nothing in between that reads or writes R or ws (else NULL). Then the
 * FFN site's post and next's attention-site pre run as one transition
 * (di_mhc_site) at the end of this call, f->hc_primed is set, and the next
 * di_block call starts at its attention sub-layer. With next == NULL and
 * f->hc_defer_post set (cleared here), the FFN site's post is left pending
 * (f->hc_post_pending; ws->sub, ws->post, ws->comb must stay untouched) for
 * di_mhc_head_final, or di_mhc_post_pending where R is read first. */
void di_block(di_fwd *f, const di_block_w *bw, const di_layer_cfg *L, int layer, uint16_t *R, int chain,
              di_attn_fn attn, const di_moe_opts *moe, const di_block_w *next);

/* ws->pre_in = one-hot copy 0 for the step's rows (start of a V4.1 chain). */
void di_block_chain_start(di_fwd *f);

#endif
