/*
 * attention.h — the attention sub-layer (architecture.md §4.4): low-rank
 * query with q_norm, per-head RMS normalisation (V4), tail RoPE; one shared
 * K=V latent per token (kv_norm, RoPE, FP8 simulation of the non-RoPE dims)
 * kept in a 128-slot ring; compressed rows (all visible for ratio 128, the
 * indexer's top-k for ratio 4); sink attention; inverse RoPE; grouped
 * low-rank output projection (wo_a in BF16 per group, then wo_b).
 *
 * The index list of a query at position p is canonical, whatever the
 * chunking: the window part has `window` entries — positions p-window+1..p
 * in order, or 0..p followed by empty (-1) entries while p < window-1 — then
 * the compressed rows (ascending for ratio 128, indexer order for ratio 4).
 * Window rows of earlier steps come from the ring, rows of this step from
 * the step's own K=V buffer (identical bf16 values); the ring is written
 * after attention, so a long chunk never overwrites rows it still reads.
 */
#ifndef DI_MODEL_ATTENTION_H
#define DI_MODEL_ATTENTION_H

#include "model/forward.h"
#include "model/weights.h"

/* xn: bf16 [M][dim] (attn_norm output); out: bf16 [M][dim]. */
void di_attn_block(di_fwd *f, const di_attn_w *aw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                   uint16_t *out);

#endif
