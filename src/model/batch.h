/*
 * batch.h — what a forward step of a V4-family model takes (dsv4.h, dsv41.h):
 * load options, a flat batch of token rows, and the indexer observer.
 *
 * A step (di_v4_batch) is any mix of sequences: each sequence's rows are
 * contiguous and at consecutive absolute positions continuing its state
 * (seq->n_tokens), so a prefill chunk, a decode token and a multi-token
 * verify block are all the same call.
 */
#ifndef DI_MODEL_BATCH_H
#define DI_MODEL_BATCH_H

#include <stdint.h>

#include "model/seq_state.h"

typedef struct di_v4_options {
    int max_rows;         /* rows per internal sub-batch (workspace size); 0 = 256 */
    int64_t max_context;  /* longest sequence supported; 0 = 65536 */
    int max_draft;        /* rows a speculative rollback may discard (di_model_config.max_draft,
                             engine/seq_snapshot.h), 0..DI_SEQ_MAX_DRAFT; 0 = no speculation */
    /* V4.1 only (ignored by V4): */
    int released_index_k; /* 1: reproduce the released reference's stale-index-key decode
                             (architecture.md §5.4); 0: decode equals prefill */
    const char *engram_hash; /* Engram hash constants: an engram_hash.json sidecar, or a golden
                                manifest whose "engram" entry holds them; NULL = the model
                                directory's engram_hash.json, else the built-in released ones */
    /* Weights already open (di_st_open_memory: a dummy model, tools/dummy/dummy.h),
     * borrowed: used instead of the directory's safetensors files, must
     * outlive the model. NULL = open the directory's. */
    struct di_safetensors *weights;
    /* The load plan (model/load_plan.h), computed after the spec check and
     * before any large allocation: reserve_device / reserve_host are what
     * the caller will allocate after the load (the engine's state pools, a
     * benchmark's sequences), in backend memory / on the host, checked with
     * the model's needs against free memory; budget, when nonzero, a total
     * the plan must stay within (the engine's memory_budget); plan_out, when
     * set, receives the plan (also when the check refuses); plan_only: plan
     * and check, load nothing (*out stays NULL). */
    uint64_t reserve_device, reserve_host, budget;
    struct di_load_plan *plan_out;
    int plan_only;
    /* Expert parallelism (model/moe_ep.h): this process or thread is rank ep_rank of ep_size
     * (0 = 1: every expert here); it binds only its routed experts and runs its MoE blocks over
     * `comm` (borrowed, size ep_size; must outlive the model). */
    int ep_rank, ep_size;
    struct di_comm *comm;
    /* V4.1 on a device backend: the Engram tables stay in host memory (the checkpoint's mapped
     * bytes, read in place; a generated checkpoint: a host copy) instead of device memory; each
     * pass gathers its rows on the host and copies them to the device on the model's stream
     * (engram.h). No effect on the CPU, where the tables are host memory already. */
    int engram_host;
} di_v4_options;

typedef struct di_v4_batch {
    int n;                       /* rows */
    const int32_t *tokens;       /* [n] */
    const int64_t *pos;          /* [n] absolute positions */
    di_seq_state *const *seq;    /* [n] the sequence of each row */
    int n_logits;                /* rows whose logits are wanted */
    const int *logit_rows;       /* [n_logits] row indices, increasing */
    float *logits;               /* [n_logits][vocab] fp32 */
    uint16_t *hidden;            /* optional [n][hc*dim] bf16: the final residual
                                    stream before the output collapse (V4: the MTP's input) */
    uint16_t *target_hidden;     /* optional, V4.1: [n][n_targets*dim] bf16, the DSpark
                                    drafter's input: for each dspark_target_layer_ids layer, the
                                    residual entering it averaged over the hc copies */
    /* V4.1 bounded replay (architecture.md §6.5, DeepInfer's compact prefill): optional [n];
     * row i runs the layers after the last KV source only when pos[i] >= late_from[i]
     * (the engine gives every row of a request max(0, prompt length - keep tokens)), and
     * those layers' windows see no position below late_from. Rows that skip them give no
     * logits, hidden states or late target hiddens (zeros). NULL = every row runs every
     * layer (exact). `hidden` must be NULL. */
    const int64_t *late_from;
    /* Device backends only (the engine queue and greedy loop, ops/backend.h); the CPU ignores both: */
    int tokens_on_device;        /* 1: the step's tokens are already in the model's device token
                                    buffer (a device argmax wrote them); `tokens` still serves the
                                    host checks and, V4.1, the Engram hash */
    int logits_on_device;        /* 1: logits stay in the model's device logits buffer, row i at
                                    i * vocab; `logits` may be NULL */
} di_v4_batch;

/* Optional observer of the lightning indexer's choices (tests, debugging):
 * called on the calling thread for every query row of an indexed layer with
 * the selected compressed rows (V4: in decreasing score order; V4.1: in
 * increasing row order, as the reference keeps them). */
typedef void (*di_v4_index_observer)(void *ctx, int layer, int64_t pos, const int *rows, int n);

#endif
