/*
 * dsv4_internal.h — the V4 model object, shared by dsv4.c (backbone) and
 * mtp.c (drafter). Internal to src/model.
 */
#ifndef DI_MODEL_DSV4_INTERNAL_H
#define DI_MODEL_DSV4_INTERNAL_H

#include "model/core.h"
#include "model/dsv4.h"
#include "model/lanes.h"
#include "model/weights.h"

struct di_v4_model {
    di_core core;     /* config, exec, workspace, step buffers */
    di_v4_weights w;
    di_moe_opts moe;
    uint16_t *hbuf;   /* [max_rows*hc][dim] MTP scratch */
    struct di_safetensors *st; /* kept mapped: the weights' raw bytes (ops.h di_wmat_raw) */
    di_lane_cores lanes;       /* lanes 1.. of a split step (lanes.h) */
    int lanes_max;             /* 0: the pool size (lanes.h); tests and benches set it */
    size_t step_weight_bytes;  /* di_v4_decode_weight_bytes, at load */
    struct di_ep_model *ep;    /* expert parallelism (moe_ep.h); NULL: one rank */
};

/* hc_head collapse, norm and head for the rows of [r0, r0+M) listed in
 * b->logit_rows; and the residual copy-out to b->hidden; on `core` (the model's or a lane's). */
void di_v4_outputs(di_v4_model *m, di_core *core, di_fwd *f, const di_v4_batch *b, int r0, const di_hc_w *hc_head,
                   const float *norm);

/* At most `n` lanes a step (1: never split; 0: the pool size). For tests
 * and benches (`deepinfer bench --lanes`). */
void di_v4_set_lanes(di_v4_model *m, int n);

#endif
