/*
 * indexer.h — the lightning indexer of V4 (architecture.md §4.6) and V4.1
 * (§5.4, §5.5): per query row at position p it scores every visible
 * index-key row j < (p+1)/r with BF16 arithmetic (§3.7) and keeps the top
 * min(index_topk, visible) rows (ties: lower row first).
 *
 * Query path: qI = wq_b.qr, RoPE on the tail of each head at p, then
 * (V4) a 128-point Hadamard, and an FP4 simulation (block 32). Head weights
 * w = bf16(bf16(weights_proj.x) * idx_hd^-1/2 * heads^-1/2).
 *
 * Keys: V4 runs the layer's private indexer compressor here, before
 * scoring, so a row emitted by this very token is visible to it. V4.1 keys
 * come from a KV source (L->index_key_layer), written by the compressor
 * before the indexer runs.
 *
 * V4.1 two-level top-k: the candidate source keeps, per query, the
 * candidate_topk_blocks best blocks of candidate_block_size rows (block
 * score = max of its rows; the block of the newest visible row always
 * kept) in ws->cand; later index sources score only rows inside those
 * blocks (the others are -inf). Selections are kept in increasing row order.
 *
 * Released-reference emulation (f->released_index_k, V4.1): a single-row
 * decode segment (position > 0) scores the keys of the last index-key owner
 * that emitted a row (seq->ikey_pub) instead of its own source's; rows that
 * store does not hold yet score 0, as the reference's zero-filled cache does.
 *
 * Output: ws->topk[m * index_topk + i] for i < ws->ntopk[m] (V4: decreasing
 * score; V4.1: increasing row).
 */
#ifndef DI_MODEL_INDEXER_H
#define DI_MODEL_INDEXER_H

#include "model/forward.h"
#include "model/weights.h"

/* The indexer in three calls, so that its parts run beside the caller's: di_indexer_keys runs V4's
 * index compressor (this step's keys; its own buffers) on side line 3 of a recorded step and may be
 * called as soon as xn exists; di_indexer_begin issues the head weights (line 1) and the query (line 4;
 * qr = the normalised q_lora rows of the step) and returns on the main line; di_indexer_select joins
 * every line and selects into ws->topk / ws->ntopk. Outside a recorded step they run in call order.
 * Between them the caller may run ops that neither write qr, xn nor the indexer's buffers (ws->qi,
 * ws->iw, ws->icproj_*, ws->iemit*, the key stores). */
void di_indexer_keys(di_fwd *f, const di_indexer_w *iw, const di_layer_cfg *L, int layer, const uint16_t *xn);
void di_indexer_begin(di_fwd *f, const di_indexer_w *iw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                      const uint16_t *qr);
void di_indexer_select(di_fwd *f, const di_indexer_w *iw, const di_layer_cfg *L, int layer);

#endif
