/*
 * core.h — the step plumbing every V4-family model shares (internal to
 * src/model): the config, the execution context and workspace, the step's
 * residual buffer, RoPE tables, batch checking, splitting a batch into
 * per-sequence segments and sub-batches, and the output head.
 *
 * dsv4.c and dsv41.c embed a di_core and add their weights; the blocks
 * (mhc, attention, compressor, indexer, moe) only ever see a di_fwd.
 */
#ifndef DI_MODEL_CORE_H
#define DI_MODEL_CORE_H

#include "model/batch.h"
#include "model/forward.h"
#include "model/moe.h"

typedef struct di_core {
    di_model_config cfg;
    di_exec x;
    di_ws ws;
    float inv_main[128], inv_cmp[128]; /* RoPE inverse frequencies (main, compressed layers) */
    uint16_t *R;      /* [max_rows][hc*dim] residual of the step */
    float *dlogits;   /* device backends: [max_rows][vocab] logits before the copy to the caller; else NULL */
    di_seg *segs;     /* [max_rows] */
    /* V4.1 compact prefill (dsv41_compact.c), allocated on first use: the late rows' step
     * indices, tokens and positions [max_rows], the per-segment window floors [max_rows] */
    int *keep;
    int32_t *ktok;
    int64_t *kpos, *klo;
    int max_rows;
    int64_t max_context;
    di_v4_index_observer index_obs;
    void *index_obs_ctx;
} di_core;

/* Check what every V4-family model needs of cfg (hc 4, head sizes, expert
 * counts, ratios). */
deepinfer_status di_core_check_config(const di_model_config *c, di_error *err);

/* The rows per pass and the context limit di_core_init takes from opt
 * (its defaults where opt leaves them 0). */
void di_core_limits(const di_v4_options *opt, int *max_rows, int64_t *max_context);

/* What di_core_init allocates, without allocating (load_plan.h): the exec's
 * host scratch (a device backend's context is sized from it too), the
 * workspace (di_ws_sizes) and the step buffers (R; the device logits when
 * on_device) in backend memory, the segment table on the host. nthreads:
 * the pool's size (the workspace's per-thread index scratch). */
typedef struct di_core_size {
    size_t exec_scratch, ws_dev, ws_host, step_dev, step_host;
} di_core_size;
void di_core_sizes(const di_model_config *cfg, int max_rows, int64_t max_context, int nthreads, int on_device,
                   di_core_size *s);

/* Size the execution context, workspace and step buffers for c->cfg
 * (already loaded) and the options. */
deepinfer_status di_core_init(di_core *c, const di_v4_options *opt, di_error *err);
void di_core_free(di_core *c);

/* A lane's core (lanes.h): main's config, RoPE frequencies and context
 * limit, its own exec, workspace and step buffers for `max_rows` rows, so
 * it can run rows of a step while other lanes run theirs. Free with
 * di_core_free; the observer is never set on a lane. */
deepinfer_status di_core_init_lane(di_core *c, const di_core *main, int max_rows, di_error *err);

/* Bytes di_core_init allocated (workspace and step buffers). */
size_t di_core_bytes(const di_core *c);

/* Check a batch (rows grouped per sequence, positions continuing the state
 * given by `stage` ? mtp_tokens : n_tokens, tokens in range, room in the
 * state, logit rows increasing). Fails before anything is changed. */
deepinfer_status di_core_check_batch(const di_core *c, const di_v4_batch *b, int stage, di_error *err);

/* A step context over rows [r0, r0 + n) of a checked batch: segments,
 * RoPE tables of the rows' positions. */
void di_core_fwd_init(di_core *c, const di_v4_batch *b, int r0, int n, const di_moe_opts *moe, di_fwd *f);

/* R[i] = hc copies of embed[tokens[i]] for the step's rows. */
void di_core_embed(di_core *c, di_fwd *f, const uint16_t *embed);

/* The output head for the rows of this piece listed in b->logit_rows:
 * logits = head . norm(ws->x) in fp32, where ws->x holds the collapsed
 * final hidden of every row (the caller's collapse). Returns 1 if the
 * piece has logit rows (call it to know whether to collapse first).
 * norm NULL: ws->xn already holds norm(ws->x) (di_mhc_head_final). */
int di_core_has_logits(const di_v4_batch *b, int r0, int n);
void di_core_logits(di_core *c, di_fwd *f, const di_v4_batch *b, int r0, const float *norm, const di_wmat *head);

#endif
