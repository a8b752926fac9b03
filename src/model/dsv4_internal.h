/*
 * dsv4_internal.h — the V4 model object, shared by dsv4.c (backbone) and
 * mtp.c (drafter). Internal to src/model.
 */
#ifndef DI_MODEL_DSV4_INTERNAL_H
#define DI_MODEL_DSV4_INTERNAL_H

#include "model/core.h"
#include "model/dsv4.h"
#include "model/weights.h"

struct di_v4_model {
    di_core core;     /* config, exec, workspace, step buffers */
    di_v4_weights w;
    di_moe_opts moe;
    uint16_t *hbuf;   /* [max_rows*hc][dim] MTP scratch */
    struct di_safetensors *st; /* kept mapped: the weights' raw bytes (ops.h di_wmat_raw) */
};

/* hc_head collapse, norm and head for the rows of [r0, r0+M) listed in
 * b->logit_rows; and the residual copy-out to b->hidden. */
void di_v4_outputs(di_v4_model *m, di_fwd *f, const di_v4_batch *b, int r0, const di_hc_w *hc_head, const float *norm);

#endif
