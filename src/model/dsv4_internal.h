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

/* MTP drafting scratch (mtp.c di_v4_mtp_step), allocated at load when the checkpoint has the block. */
typedef struct di_mtp_scratch {
    int G;                  /* requests per pass: min(max_rows, 8) */
    /* host */
    int32_t *tok;           /* [max_rows] a pass's rows: tokens, */
    int64_t *pos;           /* [max_rows] positions, */
    di_seq_state **seq;     /* [max_rows] sequences, */
    const uint16_t **hsrc;  /* [max_rows] the caller's residual rows, */
    int *lrows;             /* [max_rows] logit rows */
    float *hlog;            /* device backends: [G][vocab] the logits a pick reads; else NULL */
    int32_t *hids;          /* [G] a device argmax's ids */
    uint16_t **rdst;        /* [G * DI_MTP_MAX_DRAFT] ring slots the chain overwrote */
    /* backend memory */
    int32_t *dids;          /* [G] device argmax */
    int32_t *dtok;          /* [max_rows] a pass's tokens (the model's ws.tok may hold a queued step's) */
    float *dlog;            /* [G][vocab] a pass's logits (the model's dlogits may hold a step's) */
    uint16_t *res;          /* [G][hc*dim] each request's output residual of row p */
    uint16_t *save;         /* [G * DI_MTP_MAX_DRAFT][head_dim] those slots' contents */
} di_mtp_scratch;

struct di_v4_model {
    di_core core;     /* config, exec, workspace, step buffers */
    di_v4_weights w;
    di_moe_opts moe;
    uint16_t *hbuf;   /* [max_rows*hc][dim] MTP scratch */
    struct di_safetensors *st; /* kept mapped: the weights' raw bytes (ops.h di_wmat_raw) */
    di_lane_cores lanes;       /* lanes 1.. of a split step (lanes.h) */
    int lanes_max;             /* 0: the pool size (lanes.h); tests and benches set it */
    size_t step_weight_bytes;  /* di_v4_decode_weight_bytes, at load */
    di_mtp_scratch msc;
    struct di_ep_model *ep;    /* expert parallelism (moe_ep.h); NULL: one rank */
};

/* The MTP drafting scratch (load time; nothing without an MTP block), its bytes. */
deepinfer_status di_v4_mtp_init(di_v4_model *m, di_error *err);
void di_v4_mtp_free(di_v4_model *m);
size_t di_v4_mtp_bytes(const di_v4_model *m);

/* hc_head collapse, norm and head for the rows of [r0, r0+M) listed in
 * b->logit_rows; and the residual copy-out to b->hidden; on `core` (the model's or a lane's). */
void di_v4_outputs(di_v4_model *m, di_core *core, di_fwd *f, const di_v4_batch *b, int r0, const di_hc_w *hc_head,
                   const float *norm);

/* At most `n` lanes a step (1: never split; 0: the pool size). For tests
 * and benches (`deepinfer bench --lanes`). */
void di_v4_set_lanes(di_v4_model *m, int n);

#endif
