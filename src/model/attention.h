/*
 * attention.h — the attention sub-layer (architecture.md §4.4, §5.2):
 * low-rank query with q_norm (V4 also a per-head RMS normalisation), tail
 * RoPE; one shared K=V latent per token (kv_norm, RoPE, FP8 simulation: V4
 * the non-RoPE dims in blocks of 64, V4.1 all dims in blocks of 32) kept in
 * a `window`-slot ring; compressed rows (V4 ratio 128: every visible row;
 * otherwise the selection of the layer's index source, read from the KV
 * source's store); sink attention; inverse RoPE; grouped low-rank output
 * projection (wo_a in BF16 per group, then wo_b).
 *
 * The index list of a query at position p is canonical, whatever the
 * chunking: the window part has `window` entries — positions p-window+1..p
 * in order, or 0..p followed by empty (-1) entries while p < window-1 — then
 * the compressed rows (ascending for ratio 128 and V4.1, indexer order for
 * V4 ratio 4). Window rows of earlier steps come from the ring, rows of this
 * step from the step's own K=V buffer (identical bf16 values); the ring is
 * written after attention, so a long chunk never overwrites rows it still
 * reads.
 *
 * Compressed rows are produced before attention reads them: the KV source's
 * compressor, then the indexer (V4.1 index keys come from the compressor's
 * latent; V4's indexer runs its own key compressor).
 */
#ifndef DI_MODEL_ATTENTION_H
#define DI_MODEL_ATTENTION_H

#include "model/forward.h"
#include "model/weights.h"

/* xn: bf16 [M][dim] (attn_norm output); out: bf16 [M][dim]. */
void di_attn_block(di_fwd *f, const di_attn_w *aw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                   uint16_t *out);

/* The pieces, shared with the DSpark stages (cs/sn: the rows' RoPE table). */

/* ws->qr = wq_a.xn, ws->qrn = q_norm(ws->qr); ws->q = RoPE(wq_b.qrn) (V4: per-head norm first). */
void di_attn_query(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn, const uint16_t *xn);

/* kv[M][head_dim] = QAT(RoPE(kv_norm(wkv.x))) for M rows of x (one fused
 * op, di_attn_kv_post). ring_layer >= 0: also write the rows into that
 * layer's SWA rings (the step's rows, M = f->M; only where every segment
 * has at most one row: then no row of the step still reads the slot it
 * overwrites); -1: no ring write. */
void di_attn_kv(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn, int M, const uint16_t *x,
                uint16_t *kv, int ring_layer);

/* out = wo_b(wo_a(inverse RoPE(ws->o))) per group. */
void di_attn_out(di_fwd *f, const di_attn_w *aw, const float *cs, const float *sn, uint16_t *out);

#endif
