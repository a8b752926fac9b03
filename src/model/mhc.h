/*
 * mhc.h — manifold-constrained hyper-connections at the block level
 * (architecture.md §4.2, §4.8). The residual R of a row is hc (= 4) bf16
 * copies of the hidden state, [hc][dim].
 *
 *   mixes(R)  = (hc_fn . flatten(R)) * rsqrt(mean(flatten(R)^2) + rms_eps)
 *   pre       : Sinkhorn split (§4.2) -> pre, post, comb (kept in ws)
 *   collapse  : x = sum_k pre_k R[k]              (bf16)
 *   expand    : R'[k] = post_k f + sum_j comb[j][k] R[j]   (bf16)
 *   head      : pre_k = sigmoid(m_k * s + b_k) + hc_eps; x = sum_k pre_k R[k]
 *
 * V4 collapses a site with the pre of its own mixes; V4.1's single-pass
 * chaining (§5.1) collapses with the pre carried in ws->pre_in (the
 * previous site's) and then carries this site's pre forward.
 */
#ifndef DI_MODEL_MHC_H
#define DI_MODEL_MHC_H

#include "model/forward.h"
#include "model/weights.h"

/* One site transition (ops.h di_hc_transition): with sub != NULL (bf16
 * [M][dim]) first R = expand(sub, R) with the post/comb of the previous
 * site; then mixes -> pre/post/comb in ws for all rows, ws->x = collapse(R)
 * with this site's pre, or with `chain`: with ws->pre_in, after which
 * ws->pre_in = this site's pre; then ws->xn = rmsnorm(ws->x, norm). */
void di_mhc_site(di_fwd *f, const di_hc_w *hc, const float *norm, const uint16_t *sub, uint16_t *R, int chain);

/* x = collapse(R) with ws->pre_in (the V4.1 final collapse). */
void di_mhc_collapse_carried(di_fwd *f, const uint16_t *R, uint16_t *x);

/* R = expand(sub, R) with the post/comb of the last di_mhc_site. In place. */
void di_mhc_post(di_fwd *f, const uint16_t *sub, uint16_t *R);

/* The output-head collapse (no Sinkhorn): x = sum_k pre_k R[k]. */
void di_mhc_head(di_fwd *f, const di_hc_w *hc, const uint16_t *R, uint16_t *x);

/* The output head in one op (ops.h di_hc_head_final): the pending post of
 * the last block (f->hc_post_pending, cleared), then with hc (V4) the head
 * collapse of di_mhc_head, without (V4.1) the collapse with ws->pre_in, into
 * ws->x, then ws->xn = rmsnorm(ws->x, norm) (the final norm before lm_head:
 * di_core_logits with norm NULL). */
void di_mhc_head_final(di_fwd *f, const di_hc_w *hc, const float *norm, uint16_t *R);

/* The pending post of the last block (f->hc_post_pending), if any: where R
 * is read (or the head skipped) before di_mhc_head_final. */
void di_mhc_post_pending(di_fwd *f, uint16_t *R);

#endif
