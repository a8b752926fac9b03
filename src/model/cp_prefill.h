/*
 * cp_prefill.h — balanced context parallelism for one long prompt's
 * prefill (docs/DESIGN.md §6 "Context parallelism").
 *
 * The R ranks of a communicator (loopback: threads of one process) prefill
 * one prompt together. The prompt runs in passes; a pass of P rows is cut
 * into 2R chunks, chunk k = rows [k P / 2R, (k + 1) P / 2R), and rank r
 * runs chunks r and 2R-1-r (zig-zag: every rank the same causal attention
 * work). Everything row-local (embedding, mHC, norms, MoE, Engram) runs on
 * the row's rank only. Per layer, the ranks all-gather the attention input
 * (the attention norm's output) of every row; each rank then advances its
 * own copy of the sequence state through the rows in position order: the
 * rows of other ranks' chunks through the state writes only (the
 * compressors' state and emitted rows, the index keys, the kv rows into the
 * SWA ring), its own chunks through the whole attention sub-layer. These
 * are the one-rank ops on the same inputs, so every row's output and the
 * state after the prefill (SWA rings, compressor partial groups,
 * compressed KV, index keys, V4.1 Engram history, n_tokens) are bitwise
 * those of one rank: the state writes do not depend on how the rows are
 * chunked (forward.h). Every rank ends holding the whole sequence state, so
 * decode continues on whichever rank owns the sequence. The state writes of
 * other ranks' rows are repeated on every rank (the linear kv / compressor
 * projections); the attention and indexer scoring, the query path, the
 * output projection and the MoE are split. Per-row results that later
 * layers read from the workspace (V4.1: the top-k of the last index source,
 * the candidate blocks) stay at each segment's own rows.
 *
 * Refused with DEEPINFER_ERR_UNSUPPORTED: expert parallelism in the dp = 1
 * layout (every rank runs every row there: use dp = ep), a device backend
 * (the CPU backend only), fewer than 2R rows, max_rows < 6, and V4.1 loaded
 * with the released-reference index keys (released_index_k: not chunk
 * invariant). Not offered: the drafter stages' feed (MTP / DSpark context
 * rows: the caller's), hidden-state and DSpark target-hidden output, V4.1
 * compact prefill.
 */
#ifndef DI_MODEL_CP_PREFILL_H
#define DI_MODEL_CP_PREFILL_H

#include <stdint.h>

#include "model/dsv4.h"
#include "model/dsv41.h"
#include "parallel/comm.h"

typedef struct di_cp_prefill {
    struct di_comm *comm;   /* the group (every rank calls at once); NULL: one rank */
    di_seq_state *seq;      /* this rank's copy of the sequence: the same state on every rank */
    int n;                  /* prompt rows, at positions seq->n_tokens .. + n - 1 */
    const int32_t *tokens;  /* [n], the same on every rank */
    int n_logits;           /* rows whose logits are wanted, increasing, in [0, n) */
    const int *logit_rows;
    float *logits;          /* [n_logits][vocab] fp32: every rank receives all of them */
} di_cp_prefill;

/* Rows [*lo, *hi) of chunk k of a pass of n rows over R ranks. */
void di_cp_chunk(int n, int R, int k, int *lo, int *hi);

/* The fewest rows a CP prefill over R ranks takes (every chunk nonempty). */
int di_cp_min_rows(int R);

/* Run the prefill (collective: every rank of p->comm, with the same n and
 * tokens). Errors (bad tokens, no room, too few rows, an unsupported
 * layout) are found before the first collective and before any state
 * changes; every rank checks the same conditions. */
deepinfer_status di_v4_cp_prefill(di_v4_model *m, const di_cp_prefill *p, di_error *err);
deepinfer_status di_v41_cp_prefill(di_v41_model *m, const di_cp_prefill *p, di_error *err);

#endif
