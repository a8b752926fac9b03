/*
 * weights_v41.h — a DeepSeek-V4.1 checkpoint's weights (architecture.md
 * §2.6), bound after di_spec_check validated every tensor: the backbone
 * blocks (shared binding of weights.h), the Engram layers (tables used in
 * place from the mmap'd shards, never copied), and the DSpark stages.
 * Vision tensors and ffn.gate.bias_vl are not bound (text-only).
 */
#ifndef DI_MODEL_WEIGHTS_V41_H
#define DI_MODEL_WEIGHTS_V41_H

#include "model/engram.h"
#include "model/weights.h"

typedef struct di_v41_stage_w {
    di_block_w blk;
    di_wmat main_proj;        /* stage 0: FP8 [dim, n_targets*dim] */
    float *main_norm;         /* stage 0 */
    float *norm;              /* last stage: before the shared head */
    uint16_t *markov_embed;   /* last stage: [vocab][markov_rank] bf16 */
    di_wmat markov_head;      /* last stage: BF16 [vocab, markov_rank], fp32 out */
    di_wmat conf;             /* last stage: BF16 [1, dim + markov_rank], fp32 out */
} di_v41_stage_w;

typedef struct di_v41_weights {
    uint16_t *embed;          /* [vocab][dim] bf16 */
    di_wmat head;             /* BF16 [vocab, dim], fp32 logits */
    float *norm;
    di_block_w *layers;       /* [n_layers] */
    int n_layers;
    int n_engram;
    di_wmat *engram_wkv;      /* [n_engram] FP8 [(hc+1)*dim, cols*engram_head_dim] */
    float *engram_q[DI_CFG_MAX_ENGRAM], *engram_k[DI_CFG_MAX_ENGRAM]; /* [hc][dim] */
    di_engram_layer *engram;  /* [n_engram], in engram_layer_ids order */
    di_v41_stage_w *stages;   /* [n_stages] DSpark */
    int n_stages;
    size_t bytes;             /* packed bytes (Engram tables not included) */
    size_t engram_table_bytes;/* mmap'd Engram table + scale bytes */
    int engram_host;          /* device backend: the Engram tables stay in host memory (engram.h tables_host) */
} di_v41_weights;

/* Bind every weight of a validated V4.1 checkpoint. The Engram tables keep
 * pointing into the checkpoint's mapping: keep it open while w is used. */
deepinfer_status di_v41_weights_bind(di_v41_weights *w, const di_model_config *cfg, const di_weight_spec *spec,
                                     di_error *err);
/* The same under expert parallelism (ep != NULL: only the rank's routed experts, moe_ep.h). */
deepinfer_status di_v41_weights_bind_ep(di_v41_weights *w, const di_model_config *cfg, const di_weight_spec *spec,
                                        struct di_ep_model *ep, di_error *err);
/* ... with the Engram tables in host memory on a device backend (engram_host: di_v4_options). */
deepinfer_status di_v41_weights_bind_opts(di_v41_weights *w, const di_model_config *cfg, const di_weight_spec *spec,
                                          struct di_ep_model *ep, int engram_host, di_error *err);
void di_v41_weights_free(di_v41_weights *w);

#endif
