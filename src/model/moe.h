/*
 * moe.h — the mixture-of-experts sub-layer (architecture.md §4.7, §5.6).
 * Router in fp32 (sqrt-softplus scores; top-k of score + bias, or the
 * tid2eid hash table), routed experts with clamped SwiGLU whose routing
 * weight multiplies the intermediate before w2, a shared expert (clamped or
 * not, per model), and fp32 accumulation: y = sum over experts in increasing
 * expert id (the reference's loop order), then + shared, then bf16.
 *
 * Each expert runs as one GEMM over exactly the rows that chose it; a row's
 * arithmetic never depends on which other rows share an expert.
 *
 * Under expert parallelism (mw->ep, moe_ep.h) the routed experts run on
 * their ranks and the combine keeps the order above, so the bits are one
 * rank's.
 */
#ifndef DI_MODEL_MOE_H
#define DI_MODEL_MOE_H

#include "model/forward.h"
#include "model/weights.h"

typedef struct di_moe_opts {
    int topk;             /* experts per token */
    float route_scale;
    float gate_temp;      /* router logits are divided by it (V4.1; 1 = none) */
    int normalize;        /* weights divided by their sum (V4: always; V4.1: norm_topk_prob and topk > 1) */
    float norm_eps;       /* added to the weight normaliser (0 for V4) */
    float routed_limit;   /* SwiGLU clamp of routed experts (0 = none) */
    float shared_limit;   /* SwiGLU clamp of the shared expert (V4: 0) */
} di_moe_opts;

/* xn: bf16 [M][dim] (ffn_norm output); out: bf16 [M][dim]. Hash layers use
 * f->tokens. */
void di_moe_block(di_fwd *f, const di_moe_w *mw, const di_moe_opts *o, const uint16_t *xn, uint16_t *out);

/* Packed bytes of one routed expert (w1 + w2 + w3) of the layer: the first
 * bound one (under expert parallelism a rank binds only its own). */
size_t di_moe_expert_bytes(const di_moe_w *mw);

#endif
