/*
 * dsv41_internal.h — the V4.1 model object, shared by dsv41.c (backbone)
 * and dspark.c (drafter). Internal to src/model.
 */
#ifndef DI_MODEL_DSV41_INTERNAL_H
#define DI_MODEL_DSV41_INTERNAL_H

#include "io/safetensors.h"
#include "model/core.h"
#include "model/lanes.h"
#include "model/dsv41.h"
#include "model/engram_setup.h"
#include "model/weights_v41.h"

#define DI_DSPARK_REC_KEYS 32 /* drafter step shapes recorded at most (the others run eager) */

struct di_v41_model {
    di_core core;               /* config, exec, workspace, step buffers */
    di_v41_weights w;
    di_moe_opts moe, stage_moe; /* backbone / DSpark stage routing */
    int released_index_k;
    di_safetensors *st;         /* kept open: the Engram tables are read from its mapping */
    di_engram_tables eng;       /* token map and hash constants */
    di_engram_workspace eng_ws;
    /* Engram hash on the ops (di_engram_hash_rows; every backend unless the tables stay in host
     * memory on a device backend, whose gather needs host ids): 1, with in backend memory */
    int eng_ops;
    int32_t *eng_dmap;          /* the token map [map.n_ids] */
    int64_t *eng_dconsts;       /* per layer: multipliers [max_ngram], primes [cols], offsets [cols] */
    /* lanes (lanes.h): lane 0 runs on core / eng_ws, lane i > 0 on lanes.c[i - 1] / lane_eng[i - 1] */
    di_lane_cores lanes;
    di_engram_workspace lane_eng[DI_LANES_MAX];
    int lanes_max;              /* 0: the pool size (lanes.h); tests and benches set it (di_v41_set_lanes) */
    size_t step_weight_bytes;   /* di_v41_decode_weight_bytes, at load */
    struct di_ep_model *ep;     /* expert parallelism (moe_ep.h); NULL: one rank */
    int target_slot[DI_CFG_MAX_LAYERS]; /* position of layer l in dspark_target_layer_ids, or -1 */
    /* DSpark drafting scratch (dspark.c), for up to draft_max requests at a time. Host: */
    int draft_max;
    int32_t *dtok;              /* [draft_max*B] */
    int32_t *dprev;             /* [draft_max] the Markov inputs of one draft step */
    int64_t *dpos;              /* [draft_max*B] */
    di_seq_state **dseq;        /* [draft_max*B] */
    int32_t *dsel;              /* [draft_max][B] the drafts of a group */
    float *dconf_h;             /* [B][draft_max] their confidences */
    float *dlog_h;              /* device backends: [draft_max][vocab] a step's corrected logits; else NULL */
    int64_t *fpos;              /* [max_rows] context rows of a feed pass: positions, */
    di_seq_state **fseq;        /* [max_rows] sequences, */
    const uint16_t **fhid;      /* [max_rows] and their target-hidden rows */
    /* backend memory: */
    float *dlogits;             /* [draft_max*B][vocab] */
    float *dbias;               /* [draft_max][vocab] Markov bias of one step, then the corrected logits */
    uint16_t *dhid;             /* [draft_max*B][dim] collapsed hidden (confidence input) */
    uint16_t *dmark;            /* [draft_max][markov_rank] Markov embeddings of one step */
    uint16_t *dcin;             /* [draft_max][dim + markov_rank] confidence input */
    int32_t *dids;              /* [B + 1][draft_max] each step's Markov ids (the anchors, then the drafts) */
    int32_t *ddtok;             /* [draft_max*B] the block's tokens */
    float *dconf;               /* [B][draft_max] confidences */
    /* recorded drafter steps (dspark.c, draft.h record): the shape keys captured so far */
    uint64_t rec_keys[DI_DSPARK_REC_KEYS];
    unsigned char rec_bad[DI_DSPARK_REC_KEYS]; /* 1: the shape's replay failed its check, it runs eager */
    int n_rec_keys;
};

/* Rows [r0, r0 + n) of a checked batch through the backbone on `core`
 * (the model's or a lane's) with its Engram workspace (dsv41.c). */
deepinfer_status di_v41_forward_rows(di_v41_model *m, di_core *core, di_engram_workspace *ews, const di_v4_batch *b,
                                     int r0, int n, di_error *err);

/* Lanes (dsv41_lanes.c): how a checked batch splits (1: not at all; CPU
 * only, no index observer), running the lanes, freeing their state. */
int di_v41_lanes_plan(const di_v41_model *m, const di_v4_batch *b, int *start);
deepinfer_status di_v41_lanes_forward(di_v41_model *m, const di_v4_batch *b, int nl, const int *start, di_error *err);
void di_v41_lanes_free(di_v41_model *m);
/* At most `n` lanes a step (1: never split; 0: the pool size). For tests
 * and benches (`deepinfer bench --lanes`). */
void di_v41_set_lanes(di_v41_model *m, int n);

/* Allocate the drafting scratch (load time); its bytes (di_v41_workspace_bytes). */
deepinfer_status di_v41_dspark_init(di_v41_model *m, di_error *err);
void di_v41_dspark_free(di_v41_model *m);
size_t di_v41_dspark_bytes(const di_v41_model *m);

/* The V4.1 token checks of a batch (the image token, the Engram token map and history), before any state changes. */
deepinfer_status di_v41_check_tokens(const di_v41_model *m, const di_v4_batch *b, di_error *err);

#endif
