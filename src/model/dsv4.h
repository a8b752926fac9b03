/*
 * dsv4.h — the DeepSeek-V4-Flash model (architecture.md §4, §6, §7.1) on the
 * CPU and CUDA backends: load a released-format checkpoint, run forward steps over
 * flat batches of token rows, and the MTP drafter block.
 *
 * A step (di_v4_batch, batch.h) is any mix of sequences: each sequence's
 * rows are contiguous and at consecutive absolute positions continuing its
 * state (seq->n_tokens), so a prefill chunk, a decode token and a
 * multi-token verify block are all the same call. Results are batch
 * invariant: a row's logits are bit-identical whatever else shares the
 * step, however a prompt is chunked, and whether decoded one token at a
 * time or prefilled.
 *
 * Errors (bad positions, a state without room, a token out of range) are
 * detected before any state changes.
 */
#ifndef DI_MODEL_DSV4_H
#define DI_MODEL_DSV4_H

#include <stdint.h>

#include "model/batch.h"
#include "model/config.h"
#include "model/draft.h"
#include "model/seq_state.h"
#include "util/error.h"

typedef struct di_v4_model di_v4_model;

/* Load a checkpoint directory (config.json + safetensors). Every tensor is
 * checked against the config's expected shapes first; a mismatch fails
 * with a message naming the tensor. */
deepinfer_status di_v4_load(const char *dir, const di_v4_options *opt, di_v4_model **out, di_error *err);
void di_v4_free(di_v4_model *m);

const di_model_config *di_v4_config(const di_v4_model *m);
int64_t di_v4_max_context(const di_v4_model *m);
size_t di_v4_weight_bytes(const di_v4_model *m);

/* Bytes of the step workspace and step buffers allocated at load (max_rows rows). */
size_t di_v4_workspace_bytes(const di_v4_model *m);

/* Bytes of packed weights one decode step reads (every dense weight of the
 * backbone, num_experts_per_tok routed experts per layer, the head and one
 * embedding row): the numerator of the memory-bandwidth floor. */
size_t di_v4_decode_weight_bytes(const di_v4_model *m);

/* A new, empty sequence with room for max_context positions (caller frees
 * with di_seq_destroy). */
deepinfer_status di_v4_seq_new(const di_v4_model *m, di_seq_state **out, di_error *err);

void di_v4_set_index_observer(di_v4_model *m, di_v4_index_observer fn, void *ctx);

/* Run the backbone over the rows; advances each sequence's n_tokens. */
deepinfer_status di_v4_forward(di_v4_model *m, const di_v4_batch *b, di_error *err);

/* The MTP block (mtp.0, §7.1): row i combines the main model's residual
 * hidden_in[i] ([hc][dim] bf16, before hc_head) with the embedding of
 * b->tokens[i] (the NEXT token) at position b->pos[i]; logits are the draft
 * for the token after that. Positions continue seq->mtp_tokens (the MTP
 * block keeps its own window ring). b->hidden, if set, receives the MTP's
 * own output residual (for chained drafts). */
deepinfer_status di_v4_mtp_forward(di_v4_model *m, const di_v4_batch *b, const uint16_t *hidden_in, di_error *err);

/* The most drafts one di_v4_mtp_step gives per request (the chain's length,
 * bounded by the MTP ring: min(DI_MTP_MAX_DRAFT, sliding_window)); 0 without
 * an MTP block. */
#define DI_MTP_MAX_DRAFT 8
int di_v4_mtp_block(const di_v4_model *m);

/* The engine's drafter step (draft.h, model.h di_model_draft_step), §7.1's
 * V3 convention: per request, rows i = mtp_tokens .. p combine the target's
 * residual hidden[r][i - mtp_tokens] (b->hidden rows of the target forward)
 * with the embedding of next[r][i - mtp_tokens] (the token at i + 1); when
 * k > 0, row p's logits give draft 0 and the chain row p+1+j (the MTP's own
 * output residual of the row before, the embedding of draft j) gives draft
 * j+1, for j < k - 1. Only the last sliding_window rows fed run (the ring
 * keeps no more; the same ring and drafts as di_v4_mtp_forward over all of
 * them). The chain's ring slots are restored afterwards, so the MTP state
 * is the one a feed without drafts leaves; seq->mtp_tokens == p + 1.
 * confidence (if set) receives NAN. Errors (no MTP block, k outside
 * 0 .. block, n_feed < 1 with k > 0, positions the target has not processed,
 * tokens outside the vocabulary) are found before any state changes; a pick
 * outside the vocabulary fails after the feed, the state whole. */
deepinfer_status di_v4_mtp_step(di_v4_model *m, const di_model_draft *d, di_error *err);

#endif
