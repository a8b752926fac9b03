/*
 * weights.h — a V4-family model's weights, bound from the released
 * checkpoint layout (architecture.md §2) after di_spec_check validated every
 * tensor's dtype and shape, and packed for the CPU kernels (ops.h).
 *
 * Structs are per concept (mHC site, attention, compressor, indexer, MoE,
 * block) so that V4 and V4.1 wire the same pieces. Binding rules:
 *   FP8 linear  X.weight e4m3 + X.scale e8m0 -> di_wmat FP8
 *   FP4 expert  X.weight I8 + X.scale e8m0   -> di_wmat FP4
 *   attn.wo_a   FP8 in the checkpoint, dequantised to BF16 like the
 *               reference's convert.py, one di_wmat per output group; a
 *               device backend keeps each group's FP8 bytes + scales
 *               (di_wmat_set_raw_fp8: FP8 storage, BF16 math, same values)
 *   BF16 linear -> di_wmat BF16 (used with fp32 outputs where the reference
 *               promotes to fp32: router, head, V4 compressor)
 *   hc_*_fn     F32 -> di_wmat F32
 *   norms, sinks, biases, ape, hc base/scale -> owned fp32 arrays
 *   tid2eid     I64 -> int32 table (ids checked < n_routed_experts)
 * How bytes move (wload.h, docs/loading.md): a device backend keeps the
 * checkpoint form only (di_wmat_alloc_raw: no host panels), streamed from
 * the file through its staging ring; the CPU packs from the mapping in
 * place and drops the file pages behind (the raw form stays borrowed from
 * the mapping, which the model keeps open).
 */
#ifndef DI_MODEL_WEIGHTS_H
#define DI_MODEL_WEIGHTS_H

#include <stdint.h>

#include "model/config.h"
#include "model/tensor_spec.h"
#include "ops/ops.h"
#include "util/error.h"

typedef struct di_hc_w {
    di_wmat fn;      /* [nmix, hc*dim] F32 */
    float base[24];
    float scale[3];
    float *dbase, *dscale;  /* base, scale in backend memory (what the ops read) */
    int nmix;        /* 24 for a block site, hc (4) for the head */
} di_hc_w;

typedef struct di_compressor_w {
    int ratio, overlap, hd;   /* hd = output row size (head_dim or index_head_dim); ratio 0 = none */
    int gated;                /* wgate present: fp32 softmax pooling (else V4.1 ratio 1: BF16 projection) */
    di_wmat wkv, wgate;       /* [coff*hd, dim] BF16 (fp32 outputs when gated) */
    float *ape;               /* V4: [ratio][coff*hd]; V4.1: NULL */
    float *norm;              /* [hd] */
    int has_keys;             /* V4.1 index-key owner: keys = k_norm(wk . latent) */
    di_wmat wk;               /* attn.indexer.wk BF16 [index_head_dim, head_dim] */
    float *k_norm;            /* attn.indexer.k_norm [index_head_dim] */
} di_compressor_w;

typedef struct di_indexer_w {
    di_wmat wq_b;             /* FP8 [heads*idx_hd, q_lora] */
    di_wmat wproj;            /* BF16 [heads, dim] */
    di_compressor_w cmp;      /* V4: the indexer's private compressor (index keys); V4.1: none */
} di_indexer_w;

typedef struct di_attn_w {
    di_wmat wq_a, wq_b, wkv, wo_b;
    di_wmat *wo_a;            /* [groups] BF16 [o_lora, heads*hd/groups] */
    int groups;
    float *q_norm, *kv_norm, *sink;
    int has_cmp, has_idx;
    di_compressor_w cmp;
    di_indexer_w idx;
} di_attn_w;

typedef struct di_moe_w {
    int n_experts;
    di_wmat gate;             /* BF16 [E, dim], fp32 outputs */
    float *bias;              /* [E] or NULL (hash layers) */
    int32_t *tid2eid;         /* [vocab][topk] or NULL */
    di_wmat *w1, *w2, *w3;    /* [E] routed experts (FP4 or FP8) */
    int has_shared;
    di_wmat sw1, sw2, sw3;    /* shared expert (FP8) */
    struct di_ep_layer *ep;   /* expert parallelism (moe_ep.h): only this rank's experts are bound
                                 (the others' di_wmat stay zero); NULL: one rank, every expert */
} di_moe_w;

typedef struct di_block_w {
    di_hc_w hc_attn, hc_ffn;
    float *attn_norm, *ffn_norm;
    di_attn_w attn;
    di_moe_w moe;
} di_block_w;

typedef struct di_mtp_w {
    di_block_w blk;
    di_wmat e_proj, h_proj;   /* FP8 [dim, dim] */
    float *enorm, *hnorm, *norm;
    di_hc_w hc_head;
} di_mtp_w;

typedef struct di_v4_weights {
    uint16_t *embed;          /* [vocab][dim] bf16 */
    di_wmat head;             /* BF16 [vocab, dim], fp32 logits */
    float *norm;
    di_hc_w hc_head;
    di_block_w *layers;       /* [n_layers] */
    di_mtp_w *mtp;            /* [n_mtp] */
    int n_layers, n_mtp;
    size_t bytes;             /* packed bytes, for reporting */
} di_v4_weights;

/* Bind and pack every weight of a validated V4 checkpoint. On failure the
 * message names the tensor. _ep: under expert parallelism (ep != NULL,
 * moe_ep.h) only the rank's routed experts are bound and each MoE block gets
 * its EP state. */
struct di_ep_model;
deepinfer_status di_v4_weights_bind(di_v4_weights *w, const di_model_config *cfg, const di_weight_spec *spec,
                                    di_error *err);
deepinfer_status di_v4_weights_bind_ep(di_v4_weights *w, const di_model_config *cfg, const di_weight_spec *spec,
                                       struct di_ep_model *ep, di_error *err);
void di_v4_weights_free(di_v4_weights *w);

/* Shared binding helpers (also for V4.1). `prefix` is "layers.3." etc.; ep:
 * NULL, or the rank's expert parallelism (only its experts are bound). */
deepinfer_status di_bind_block(di_block_w *b, const di_model_config *cfg, const di_layer_cfg *L,
                               const di_weight_spec *spec, const char *prefix, int n_experts, struct di_ep_model *ep,
                               di_error *err);
void di_block_free(di_block_w *b);
size_t di_block_bytes(const di_block_w *b); /* packed bytes of a block's weights */
deepinfer_status di_bind_hc(di_hc_w *h, const di_weight_spec *spec, const char *prefix, const char *site, di_error *err);
void di_hc_free(di_hc_w *h);
/* fp32 vectors: di_bind_vec in backend memory (what ops read; free with
 * di_dev_free), di_bind_vec_host on the host (free). */
deepinfer_status di_bind_vec_host(float **out, const di_weight_spec *spec, di_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
deepinfer_status di_bind_vec(float **out, const di_weight_spec *spec, di_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
deepinfer_status di_bind_bf16(uint16_t **out, const di_weight_spec *spec, di_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5))); /* an aligned copy of a BF16 tensor */
deepinfer_status di_bind_linear(di_wmat *out, const di_model_config *cfg, const di_weight_spec *spec, di_error *err,
                                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
