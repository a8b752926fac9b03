/*
 * dsv41_internal.h — the V4.1 model object, shared by dsv41.c (backbone)
 * and dspark.c (drafter). Internal to src/model.
 */
#ifndef DI_MODEL_DSV41_INTERNAL_H
#define DI_MODEL_DSV41_INTERNAL_H

#include "io/safetensors.h"
#include "model/core.h"
#include "model/dsv41.h"
#include "model/engram_setup.h"
#include "model/weights_v41.h"

struct di_v41_model {
    di_core core;               /* config, exec, workspace, step buffers */
    di_v41_weights w;
    di_moe_opts moe, stage_moe; /* backbone / DSpark stage routing */
    int released_index_k;
    di_safetensors *st;         /* kept open: the Engram tables are read from its mapping */
    di_engram_tables eng;       /* token map and hash constants */
    di_engram_workspace eng_ws;
    int target_slot[DI_CFG_MAX_LAYERS]; /* position of layer l in dspark_target_layer_ids, or -1 */
    /* DSpark drafting scratch, for up to draft_max requests at a time */
    int draft_max;
    int32_t *dtok;              /* [draft_max*B] */
    int32_t *dprev;             /* [draft_max] the Markov inputs of one draft step */
    int64_t *dpos;              /* [draft_max*B] */
    di_seq_state **dseq;        /* [draft_max*B] */
    float *dlogits;             /* [draft_max*B][vocab] */
    float *dbias;               /* [draft_max][vocab] Markov bias of one step */
    uint16_t *dhid;             /* [draft_max*B][dim] collapsed hidden (confidence input) */
    uint16_t *dmark;            /* [draft_max][markov_rank] Markov embeddings of one step */
    uint16_t *dcin;             /* [draft_max][dim + markov_rank] confidence input */
};

/* Allocate the drafting scratch (load time). */
deepinfer_status di_v41_dspark_init(di_v41_model *m, di_error *err);
void di_v41_dspark_free(di_v41_model *m);

#endif
