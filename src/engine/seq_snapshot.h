/*
 * seq_snapshot.h — undoing and copying a sequence's state.
 *
 * Snapshot/rollback (for draft tokens: speculative decoding appends k
 * tokens, then keeps only the accepted ones). Appending k tokens to a
 * sequence changes exactly:
 *   - the SWA ring slots (n + j) mod window, j < k, of every layer;
 *   - the compressors' partial-group buffers (kv, score) of every layer;
 *   - compressed rows with index >= rows_needed(n) (new rows only);
 *   - n_tokens (and for drafter stages, their ring slots and mtp_tokens);
 *   - V4.1: the Engram class-id history and the published index-key layer.
 * A snapshot saves the first two and the counters before the step; restore
 * puts them back, after which rows beyond rows_needed(n) are simply unused
 * and get rewritten. Rolling back to the snapshot and then appending other
 * tokens gives the same bits as if the rejected tokens never ran.
 *
 * Copy (for n > 1 choices forking after a shared prompt prefill): the whole
 * state of one sequence into another whose pages already cover the rows.
 *
 * The rings, compressor buffers, row stores and the snapshot room may be
 * backend (device) memory (state_pool.h): every byte moves through ops
 * copies on di_dev_exec() (ops.h), ordered with the steps on the device's
 * stream; only the headers (di_seq_state) are read on the host. The
 * snapshot's layout is [header][ring rows][compressor buffers] in both
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
 * for) will overwrite. */
void di_seq_snapshot_take(const di_seq_state *s, const di_model_config *cfg, int k, void *room);

/* Restore the state saved by di_seq_snapshot_take (any number of tokens,
 * up to k, may have been appended since). */
void di_seq_snapshot_restore(di_seq_state *s, const di_model_config *cfg, const void *room);

/* Copy src's state into dst (same model). dst's pages must cover the rows
 * src holds; DEEPINFER_ERR_LIMIT (dst unchanged) otherwise. */
deepinfer_status di_seq_copy(di_seq_state *dst, const di_seq_state *src, const di_model_config *cfg, di_error *err);

#endif
