/*
 * draft.h — one drafter step of a V4-family model (model.h di_model_draft_step;
 * dsv41.h di_v41_dspark_step for V4.1 DSpark, dsv4.h di_v4_mtp_step for the
 * V4 MTP block; architecture.md §7): feed the drafter with the positions the
 * target accepted, then draft the next tokens, for many requests at once.
 *
 * Per request (seq->mtp_tokens = the first position not fed yet, q0):
 *   feed   positions q0 .. p = q0 + n_feed - 1 with their drafter input
 *          hidden[] (rows of the target forward's b->target_hidden on V4.1,
 *          b->hidden on V4; backend memory) and, V4, the tokens that follow
 *          them (next[i] = the token at q0 + 1 + i; the last is the anchor,
 *          the target's token after p);
 *   draft  k drafts, for positions p + 2 .. p + 1 + k.
 * After the call seq->mtp_tokens == p + 1 (q0 when n_feed == 0).
 */
#ifndef DI_MODEL_DRAFT_H
#define DI_MODEL_DRAFT_H

#include <stdint.h>

#include "model/config.h"
#include "model/seq_state.h"
#include "util/error.h"

/* Picks draft i of request `req` from its logits (host memory, [vocab]); NULL = greedy
 * (argmax, lowest id on ties). */
typedef int32_t (*di_draft_pick_fn)(void *ctx, int req, int i, const float *logits);

typedef struct di_model_draft {
    int n;                          /* requests */
    di_seq_state *const *seq;       /* [n] distinct sequences */
    const int *n_feed;              /* [n] positions fed now: seq->mtp_tokens .. seq->mtp_tokens + n_feed - 1
                                       (p = the last one); >= 1 when k > 0 */
    const uint16_t *const *hidden;  /* [n] those rows' drafter input, [n_feed][hidden_elems] bf16, backend
                                       memory (rows of the buffer given to di_model_batch_set_draft_hidden) */
    const int32_t *const *next;     /* [n] host: the tokens at positions mtp_tokens + 1 .. p + 1; the last is
                                       the anchor (the target's token after p). V4.1 reads only the anchor
                                       (may be NULL where k == 0) */
    const int *k;                   /* [n] drafts wanted, 0 .. block */
    di_draft_pick_fn pick;          /* NULL: greedy (argmax, lowest id on ties) */
    void *pick_ctx;
    int32_t *ids;                   /* [n][block] out: draft i is for position p + 2 + i (i < k) */
    float *confidence;              /* [n][block] out or NULL: DSpark's raw confidence logits
                                       (sigmoid = acceptance estimate); MTP writes NAN */
    int record;                     /* 1: the caller enabled the exec's step plan (ops/backend.h); DSpark on a
                                       device backend then runs a greedy step (pick NULL) as a recorded step,
                                       one CUDA graph per shape (the fed rows' layout, the drafting requests),
                                       for a bounded number of shapes; the bits are the eager step's */
    int32_t *dev_ids;               /* backend memory or NULL. DSpark on a device backend, greedy (pick NULL):
                                       the drafts stay there, dev_ids[g * block + i] = draft i of the g-th
                                       request with k > 0 (in d's order), and the step returns without
                                       waiting for the device; ids / confidence are then not written (the
                                       caller reads dev_ids after its next wait: docs/speculative.md "On
                                       CUDA", the pipelined order). Ignored elsewhere (di_model_draft_dev_out) */
    float *dev_conf;                /* with dev_ids: the confidence logits there too, same layout (or NULL) */
} di_model_draft;

/* What a drafter allows (dspark.c, mtp.c fill it): the checks of di_model_draft_check. */
typedef struct di_draft_rules {
    int has_drafter;      /* the checkpoint carries the drafter's tensors */
    const char *what;     /* names the drafter in messages ("the DSpark block") */
    int block;            /* drafts per request at most */
    int64_t max_context;
    int reads_next;       /* every fed position reads its next token (V4's MTP); else only the anchor */
    int text_anchor;      /* the anchor must not be the image token (V4.1) */
    int whole_block;      /* drafting computes the whole block after p (DSpark), else k positions */
} di_draft_rules;

/* The request d against the rules: a named error, or DEEPINFER_OK. */
deepinfer_status di_model_draft_check(const di_model_config *c, const di_draft_rules *r, const di_model_draft *d,
                                      di_error *err);

#endif
