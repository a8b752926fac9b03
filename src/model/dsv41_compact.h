/*
 * dsv41_compact.h — V4.1 bounded replay of the late layers in prefill
 * (architecture.md §6.5; DeepInfer's YOCO_PREFILL_TRUNCATION_MODE=compact).
 * Internal to src/model.
 *
 * The layers after the last KV source own no global KV. With a batch's
 * late_from (batch.h), a forward pass runs the layers up to and including
 * the last KV source on every row, then compacts the step to the rows that
 * run the late layers (decode rows, and the prompt tail of prefill
 * segments): those rows move to the front of every per-row buffer that
 * crosses layers (residual, carried mHC pre, top-k, candidate blocks), the
 * segments become their tail parts, and the late layers' windows are
 * floored at late_from.
 */
#ifndef DI_MODEL_DSV41_COMPACT_H
#define DI_MODEL_DSV41_COMPACT_H

#include "model/batch.h"
#include "model/core.h"
#include "model/forward.h"

/* The first layer after the last KV source (n_layers when there is none). */
int di_v41_late_layer(const di_model_config *c);

/* Whether compact prefill is valid for this model with `keep` tail tokens
 * and drafts of up to `draft` tokens: V4.1, no Engram, compressor or index
 * keys after the last KV source (§6.5), keep >= sliding_window + draft.
 * Named errors otherwise. */
deepinfer_status di_v41_compact_check(const di_model_config *c, int64_t keep, int64_t draft, di_error *err);

/* Whether compacting the pass [r0, r0 + f->M) of `b` would change nothing: every row runs the
 * late layers and no window reaches below its floor (decode rows, a prompt's rows past its tail's
 * first window). The pass then runs as an exact one (recorded decode steps included). */
int di_v41_compact_identity(const di_fwd *f, const di_v4_batch *b, int r0);

/* Compact the pass [r0, r0 + f->M) of `b` (b->late_from set) to its late
 * rows, in place (backend memory: row copies in stream order); core->keep[j]
 * is then the pass row of compacted row j. f->M may become 0. */
deepinfer_status di_v41_compact_rows(di_core *core, di_fwd *f, const di_v4_batch *b, int r0, di_error *err);

/* The logits of the pass's logit rows from the compacted rows (the head's
 * normed rows in ws->xn); `k` = the pass's rows before compaction. A logit
 * row that skipped the late layers is an error. */
deepinfer_status di_v41_compact_logits(di_core *core, di_fwd *f, const di_v4_batch *b, int r0, int k,
                                       const di_wmat *head, di_error *err);

#endif
