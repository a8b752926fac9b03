/*
 * dsv41.h — the DeepSeek-V4.1-Flash model (architecture.md §5, §6.3, §7.2),
 * text-only: load a released-format checkpoint, run forward steps over
 * flat batches of token rows (the same di_v4_batch as V4, batch.h), and the
 * DSpark drafter stages.
 *
 * Every layer role comes from the config (config.h): KV sources (ratio 2
 * gated, ratio 1 ungated) with shared index keys, index sources, Reuse and
 * Reindex layers, the candidate (two-level top-k) filter, Engram layers,
 * DSpark stages and their target layers. Single-pass mHC; the final
 * collapse uses the last block's FFN pre vector.
 *
 * Results are batch invariant: a row's logits are bit-identical whatever
 * else shares the step, however a prompt is chunked, and whether decoded
 * one token at a time or prefilled (the prefill-consistent decode; the
 * released reference's stale-index-key decode is available through
 * di_v4_options.released_index_k, and then single-token decode steps differ
 * from prefill exactly as the released code's do).
 *
 * Engram: the compressed token map is <dir>/engram_token_map.json when
 * present, else computed from <dir>/tokenizer.json at load; the hash
 * constants come from di_v4_options.engram_hash, <dir>/engram_hash.json or
 * the built-in released values. The tables are read in place from the
 * mmap'd checkpoint.
 *
 * Text-only: vision tensors are ignored; a batch holding the image token
 * (image_token_id) is refused with a clear error.
 *
 * Errors (bad positions, a state without room, a token out of range) are
 * detected before any state changes.
 *
 * Backends: everything here runs on the CPU and on the CUDA backend (hidden
 * inputs, logits buffers the batch keeps on the device and the sequence
 * state's rings are backend memory).
 */
#ifndef DI_MODEL_DSV41_H
#define DI_MODEL_DSV41_H

#include <stdint.h>

#include "model/batch.h"
#include "model/config.h"
#include "model/draft.h"
#include "model/seq_state.h"
#include "util/error.h"

typedef struct di_v41_model di_v41_model;

deepinfer_status di_v41_load(const char *dir, const di_v4_options *opt, di_v41_model **out, di_error *err);
void di_v41_free(di_v41_model *m);

const di_model_config *di_v41_config(const di_v41_model *m);
int64_t di_v41_max_context(const di_v41_model *m);
size_t di_v41_weight_bytes(const di_v41_model *m);

/* Bytes of the step workspace and step buffers allocated at load. */
size_t di_v41_workspace_bytes(const di_v41_model *m);

/* Bytes one decode step reads: every dense backbone weight, num_experts_per_tok
 * routed experts per layer, the head, one embedding row, and per Engram
 * layer its wkv and the gathered table rows (the bandwidth-floor numerator). */
size_t di_v41_decode_weight_bytes(const di_v41_model *m);

/* A new, empty sequence with room for max_context positions (caller frees
 * with di_seq_destroy). */
deepinfer_status di_v41_seq_new(const di_v41_model *m, di_seq_state **out, di_error *err);

void di_v41_set_index_observer(di_v41_model *m, di_v4_index_observer fn, void *ctx);

/* Run the backbone over the rows; advances each sequence's n_tokens and
 * Engram history. b->target_hidden, if set, receives the DSpark input of
 * every row. */
deepinfer_status di_v41_forward(di_v41_model *m, const di_v4_batch *b, di_error *err);

/* ---- DSpark (§7.2) ----------------------------------------------------------------------- */

/* Feed the drafter's context rings: row i is position b->pos[i] of
 * b->seq[i] with target_hidden[i] ([n_targets*dim] bf16, from
 * di_v41_forward's b->target_hidden); positions continue seq->mtp_tokens.
 * b->tokens and the logit fields are ignored. Feed the accepted positions
 * only (a ring slot written for a rejected token corrupts an older one). */
deepinfer_status di_v41_dspark_feed(di_v41_model *m, const di_v4_batch *b, const uint16_t *target_hidden,
                                    di_error *err);

/* Picks draft token i of request `req` from its corrected logits [vocab]
 * (e.g. the engine's sampler); NULL = greedy (argmax, lowest id on ties). */
typedef di_draft_pick_fn di_dspark_pick_fn;

typedef struct di_v41_draft {
    int n;                       /* requests */
    di_seq_state *const *seq;    /* [n] distinct sequences */
    const int64_t *pos;          /* [n] p: the target processed p and fed it (seq->mtp_tokens == p + 1) */
    const int32_t *anchor;       /* [n] the token at p + 1 (the target's pick) */
    const int32_t *force;        /* optional [n][B]: Markov input of step i + 1 is force[i] instead of the
                                    draft (teacher forcing, for parity tests) */
    di_dspark_pick_fn pick;
    void *pick_ctx;
    int32_t *ids;                /* [n][B] drafts for positions p+2 .. p+B+1 (B = dspark_block_size) */
    float *logits;               /* optional [n][B][vocab]: the corrected logits each draft was picked from */
    float *confidence;           /* optional [n][B]: raw confidence logits (sigmoid = acceptance estimate) */
} di_v41_draft;

/* One block draft per request: [anchor, noise x (B-1)] at positions
 * p+1..p+B through every stage (bidirectional in the block, the ring as
 * context), the shared head, the sequential Markov correction and the
 * confidence head. Reads the sequences' rings; changes no state. */
deepinfer_status di_v41_dspark_draft(di_v41_model *m, const di_v41_draft *d, di_error *err);

/* The engine's drafter step (draft.h, model.h di_model_draft_step): per
 * request, di_v41_dspark_feed of positions mtp_tokens .. p (hidden[r]: their
 * target_hidden rows), then, when k > 0, one di_v41_dspark_draft from p with
 * the anchor next[r][n_feed - 1] (picks i = 0 .. B-1 through d->pick; the
 * first k ids and confidences written). The same bits as those two calls.
 * Errors (no DSpark stages, k outside 0 .. B, n_feed < 1 with k > 0, positions
 * the target has not processed, a bad anchor) are found before any state
 * changes; a pick outside the vocabulary fails after the feed. */
deepinfer_status di_v41_dspark_step(di_v41_model *m, const di_model_draft *d, di_error *err);

#endif
