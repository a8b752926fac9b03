/*
 * seq_snapshot.h — undoing and copying a sequence's state.
 *
 * Snapshot/rollback (speculative decoding, architecture.md §7): a verify
 * step appends up to k tokens at positions P..P+k-1; the target accepts
 * some, and the state must end as if only positions < n_keep had run
 * (P <= n_keep <= P + k). Appending tokens changes:
 *   - the SWA ring slots (P + j) mod window of every backbone layer;
 *   - the compressors' partial-group buffers: their layout (seq_state.h:
 *     groups of cfg->max_draft-aware size, group g in block g mod G) keeps
 *     every slot a kept position still needs out of reach of up to
 *     cfg->max_draft discarded rows, so they need no snapshot;
 *   - compressed rows with index >= rows_needed(P) (new rows only: rows at
 *     or beyond rows_needed(n_keep) are simply unused and get rewritten);
 *   - n_tokens; V4.1: the Engram class-id history and the published
 *     index-key layer (ikey_pub).
 * A snapshot saves the ring slots of positions P..P+k-1 and the header
 * before the step; restoring to n_keep puts back only the slots of the
 * discarded positions [n_keep, P + k), truncates the Engram history, sets
 * n_tokens = n_keep and ikey_pub to its value after a step over the kept
 * positions (it follows from the positions). Continuing after it gives the
 * same bits as a sequence that never ran the discarded rows. Drafter
 * stages (their rings, mtp_tokens) are not touched by a target step and
 * not saved: the engine feeds drafters accepted positions only.
 *
 * Copy (for n > 1 choices forking after a shared prompt prefill): the whole
 * state of one sequence into another whose pages already cover the rows.
 *
 * The rings, compressor buffers, row stores and the snapshot room may be
 * backend (device) memory (state_pool.h): every byte moves through ops
 * copies on di_dev_exec() (ops.h), ordered with the steps on the device's
 * stream; only the headers (di_seq_state) are read on the host. The
 * snapshot's layout is [header][ring rows of the backbone layers] in both
 * cases; restore reads the header back to the host (a synchronising copy
 * on a device backend).
 */
#ifndef DI_ENGINE_SEQ_SNAPSHOT_H
#define DI_ENGINE_SEQ_SNAPSHOT_H

#include <stddef.h>

#include "model/config.h"
#include "model/seq_state.h"
#include "util/error.h"

/* Bytes a snapshot needs for steps of up to max_tokens tokens. */
size_t di_seq_snapshot_bytes(const di_model_config *cfg, int max_tokens);

/* Save what appending up to k tokens (k <= the max_tokens `room` was sized
 * for) overwrites that the state's layout does not protect: the backbone
 * layers' ring slots of positions n .. n+k-1 and the header. */
void di_seq_snapshot_take(const di_seq_state *s, const di_model_config *cfg, int k, void *room);

/* After di_seq_snapshot_take at n = P and a step that appended up to k
 * tokens, keep positions < n_keep. DEEPINFER_ERR_INVALID_ARGUMENT (state
 * unchanged) when n_keep lies outside [P, min(P + k, s->n_tokens)], the
 * sequence moved outside [P, P + k], more than cfg->max_draft rows would be
 * discarded (k - (n_keep - P): the layout protects no more), a partial
 * rollback of a step longer than the window, or the Engram history cannot
 * roll back that far. */
deepinfer_status di_seq_snapshot_restore_to(di_seq_state *s, const di_model_config *cfg, const void *room,
                                            int64_t n_keep, di_error *err);

/* di_seq_snapshot_restore_to(P): back to the snapshot's position. */
deepinfer_status di_seq_snapshot_restore(di_seq_state *s, const di_model_config *cfg, const void *room, di_error *err);

/* Copy src's state into dst (same model). dst's pages must cover the rows
 * src holds; DEEPINFER_ERR_LIMIT (dst unchanged) otherwise. */
deepinfer_status di_seq_copy(di_seq_state *dst, const di_seq_state *src, const di_model_config *cfg, di_error *err);

#endif
