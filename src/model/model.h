/*
 * model.h — the engine's view of a model: a thin dispatcher over the
 * architecture-specific forwards (dsv4.h for DeepSeek-V4, dsv41.h for
 * DeepSeek-V4.1), chosen by the checkpoint's config. The engine never calls
 * di_v4_* / di_v41_* directly.
 *
 * A step is a di_model_batch (= di_v4_batch): a flat list of token rows of
 * many sequences, each sequence's rows contiguous at consecutive positions
 * continuing its state. Results are batch invariant (dsv4.h).
 */
#ifndef DI_MODEL_MODEL_H
#define DI_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/draft.h"
#include "model/dsv4.h"
#include "model/dsv41.h"
#include "model/seq_state.h"
#include "ops/ops.h"
#include "util/error.h"

typedef struct di_model di_model;
typedef di_v4_batch di_model_batch;

typedef struct di_model_options {
    int max_rows;         /* rows per internal sub-batch (workspace size); 0 = the forward's default */
    int64_t max_context;  /* longest sequence; 0 = the forward's default */
    int max_draft;        /* rows a speculative rollback may discard (di_v4_options.max_draft); 0 = none */
    const char *engram_hash; /* V4.1 Engram hash constants file; NULL = the model's (dsv41.h) */
    struct di_safetensors *weights; /* the checkpoint already open (e.g. tools/dummy/dummy.h's in-memory image):
                                       borrowed, kept open by the caller until di_model_free; NULL = open `dir`'s
                                       files */
    /* The load plan (load_plan.h; di_v4_options has the same fields): further needs in backend
     * memory / on the host that the caller allocates after the load (the engine's state pools),
     * checked with the model's before any large allocation; a total budget (0: none); where to
     * copy the plan (NULL: not copied). */
    uint64_t reserve_device, reserve_host, budget;
    struct di_load_plan *plan_out;
    /* Expert parallelism (di_v4_options' fields; model/moe_ep.h): rank ep_rank of ep_size
     * (0 = 1), over `comm` (borrowed). */
    int ep_rank, ep_size;
    struct di_comm *comm;
    int engram_host; /* V4.1 on a device backend: Engram tables stay in host memory (di_v4_options) */
} di_model_options;

/* Load the checkpoint in `dir` (config.json + safetensors, or opt->weights), V4 or V4.1.
 * Caller frees with di_model_free. */
deepinfer_status di_model_load(const char *dir, const di_model_options *opt, di_model **out, di_error *err);
void di_model_free(di_model *m);

/* The load plan of the checkpoint in `dir` for `opt` on the backend in place, without loading:
 * the config, the checkpoint's headers (or `weights`, borrowed, when not NULL), the spec check,
 * the plan and its fit check. *plan is filled whenever the plan could be computed; the status is
 * the fit check's (DEEPINFER_ERR_OUT_OF_MEMORY with both numbers when it does not fit). */
deepinfer_status di_model_plan(const char *dir, const di_model_options *opt, struct di_safetensors *weights,
                               struct di_load_plan *plan, di_error *err);

/* A di_model over a model already loaded with di_v4_load or di_v41_load
 * (exactly one non-NULL; borrowed: di_model_free then frees the view only,
 * the caller frees the model after it). NULL when out of memory. */
di_model *di_model_borrow(di_v4_model *v4, di_v41_model *v41);

const di_model_config *di_model_cfg(const di_model *m);
int64_t di_model_max_context(const di_model *m);
size_t di_model_weight_bytes(const di_model *m);
size_t di_model_workspace_bytes(const di_model *m);
/* Packed weight bytes one decode token reads (the bandwidth floor's numerator). */
size_t di_model_decode_weight_bytes(const di_model *m);

/* At most `n` lanes a CPU step splits into (lanes.h; 1: never split, every
 * op parallel on its own; 0: the default). Bits do not depend on it. For
 * measurement (`deepinfer bench-engine --lanes`) and tests. */
void di_model_set_lanes(di_model *m, int n);

/* Run the backbone over the rows (advances each sequence's n_tokens). */
deepinfer_status di_model_forward(di_model *m, const di_model_batch *b, di_error *err);

/* For recorded device steps (src/engine/devq_graph.c): the exec the forward
 * runs on; the device logits buffer that a batch with logits_on_device
 * fills (row i of the batch's logit rows at i * vocab; NULL on the CPU);
 * and the rows of one forward pass (logits_on_device needs n_logits <= it). */
di_exec *di_model_exec(di_model *m);
const float *di_model_device_logits(const di_model *m);
int di_model_max_rows(const di_model *m);
/* The device token buffer a batch with tokens_on_device reads (max_rows
 * ids; NULL on the CPU), or NULL when this model's forward needs the real
 * tokens on the host (V4.1 with its Engram tables in host memory, whose
 * hash runs on the host; otherwise the Engram hash reads the device tokens,
 * ops.h di_engram_hash_rows). */
int32_t *di_model_device_tokens(di_model *m);

/* ---- parallel ranks (moe_ep.h) ----
 * The model's expert-parallel state (NULL: loaded without a communicator), and for a rank with
 * no rows in a pass of the attention-DP layout: join every backbone MoE sub-layer's exchange
 * with zero rows (di_ep_join_empty). */
struct di_ep_model *di_model_ep(const di_model *m);
deepinfer_status di_model_ep_join_empty(di_model *m, di_error *err);

/* One prompt's prefill over the ranks of p->comm, context-parallel (cp_prefill.h; collective). */
struct di_cp_prefill;
deepinfer_status di_model_cp_prefill(di_model *m, const struct di_cp_prefill *p, di_error *err);

/* ---- the drafter (architecture.md §7; draft.h) ------------------------------------------------- */

/* The model's drafter (config.h di_drafter: DI_DRAFTER_NONE when the checkpoint has no drafter
 * tensors), the most drafts one di_model_draft_step gives per request (V4.1: dspark_block_size;
 * V4 MTP: DI_MTP_MAX_DRAFT, or the MTP ring's window if smaller; 0 without a drafter), and the
 * bf16 values per row the drafter reads from the target forward (V4.1: n_dspark_target_layer_ids
 * x hidden_size; V4: hc_mult x hidden_size; 0 without a drafter). */
di_drafter di_model_drafter(const di_model *m);
int di_model_draft_block(const di_model *m);
size_t di_model_draft_hidden_elems(const di_model *m);
/* Point the forward's drafter input at buf ([b->n][hidden_elems] bf16, backend memory: where the
 * forward writes; V4.1: b->target_hidden, V4: b->hidden). */
void di_model_batch_set_draft_hidden(const di_model *m, di_model_batch *b, uint16_t *buf);

/* Feed, then draft (draft.h's di_model_draft, di_draft_pick_fn).
 * V4.1 DSpark (dsv41.h di_v41_dspark_step): the context rings take rows mtp_tokens..p
 * (di_v41_dspark_feed semantics: only the last `window` survive), then if k > 0 one block draft
 * from p with the anchor (di_v41_dspark_draft; its picks through `pick`, i = 0..block-1, only
 * the first k kept).
 * V4 MTP (dsv4.h di_v4_mtp_step; §7.1, V3 convention): row i in [mtp_tokens, p] combines the
 * target's residual at i with the embedding of the token at i+1 (next[]) (writes the MTP ring at
 * i); when k > 0 the row p's logits give draft 0, then the chain: row p+1+j takes the MTP's own
 * output residual of the row before and the embedding of draft j, its logits give draft j+1 —
 * and the MTP ring slots the chained rows wrote (positions > p) are restored afterwards (they are
 * speculative; the next feed rewrites p+1 with the real residual).
 * After the call seq->mtp_tokens == p + 1. Rows of one request need not be contiguous with other
 * requests' (they are gathered as needed). The positions fed must have been processed by the
 * target (mtp_tokens + n_feed <= n_tokens). The drafter keeps its own token and logits buffers
 * (a queued step's di_model_device_tokens / di_model_device_logits are left alone) and runs on
 * the model's exec stream, after what is queued there. Device backends: not inside a recorded
 * step (di_backend_step_begin .. _end): the picks read logits or ids back on the host; a greedy
 * draft's device argmax clears a pending di_backend_argmax_fuse (its _rest then runs the argmax
 * itself). */
deepinfer_status di_model_draft_step(di_model *m, const di_model_draft *d, di_error *err);

/* 1 if di_model_draft_step can leave greedy drafts in backend memory without waiting (draft.h
 * dev_ids): V4.1 DSpark on a device backend. */
int di_model_draft_dev_out(const di_model *m);

#endif
