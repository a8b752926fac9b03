/*
 * indexer.h — the V4 lightning indexer (architecture.md §4.6): per query row
 * it scores every visible index-key row j < (p+1)/r with BF16 arithmetic
 * (§3.7) and keeps the top min(index_topk, visible) rows, in decreasing score
 * order (ties: lower row first). Query path: qI = wq_b.qr, RoPE on the tail
 * at p, 128-point Hadamard, FP4 simulation; head weights
 * w = bf16(bf16(weights_proj.x) * idx_hd^-1/2 * heads^-1/2). The index keys
 * come from the indexer's own compressor (run here, before scoring, so a row
 * emitted by this very token is visible to it).
 *
 * Output: ws->topk[m * index_topk + i] for i < ws->ntopk[m].
 */
#ifndef DI_MODEL_INDEXER_H
#define DI_MODEL_INDEXER_H

#include "model/forward.h"
#include "model/weights.h"

void di_indexer_run(di_fwd *f, const di_indexer_w *iw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                    const uint16_t *qr);

#endif
