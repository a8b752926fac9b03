/*
 * dsv4_internal.h — the V4 model object and the step plumbing shared by
 * dsv4.c (backbone) and mtp.c (drafter). Internal to src/model.
 */
#ifndef DI_MODEL_DSV4_INTERNAL_H
#define DI_MODEL_DSV4_INTERNAL_H

#include "model/dsv4.h"
#include "model/forward.h"
#include "model/moe.h"
#include "model/weights.h"

struct di_v4_model {
    di_model_config cfg;
    di_v4_weights w;
    di_exec x;
    di_ws ws;
    di_moe_opts moe;
    float inv_main[128], inv_cmp[128];   /* RoPE inverse frequencies */
    uint16_t *R;      /* [max_rows][hc*dim] residual of the step */
    uint16_t *hbuf;   /* [max_rows*hc][dim] MTP scratch */
    di_seg *segs;     /* [max_rows] */
    int max_rows;
    int64_t max_context;
    di_v4_index_observer index_obs;
    void *index_obs_ctx;
};

/* Check a batch (rows grouped per sequence, positions continuing the state
 * given by `mtp` ? mtp_tokens : n_tokens, tokens in range, room in the
 * state, logit rows increasing). Fails before anything is changed. */
deepinfer_status di_v4_check_batch(const di_v4_model *m, const di_v4_batch *b, int mtp, di_error *err);

/* Segments of rows [r0, r0 + n) of a checked batch; returns their count. */
int di_v4_segments(di_v4_model *m, const di_v4_batch *b, int r0, int n, di_seg *segs);

/* A step context over rows [r0, r0 + n). */
void di_v4_fwd_init(di_v4_model *m, const di_v4_batch *b, int r0, int n, di_fwd *f);

/* One V4 block (same-site mHC, attention, MoE) over R ([M][hc*dim]). */
void di_v4_block(di_fwd *f, const di_block_w *bw, const di_layer_cfg *L, int layer, uint16_t *R);

/* hc_head collapse, norm and head for the rows of [r0, r0+M) listed in
 * b->logit_rows; and the residual copy-out to b->hidden. */
void di_v4_outputs(di_v4_model *m, di_fwd *f, const di_v4_batch *b, int r0, const di_hc_w *hc_head, const float *norm);

#endif
