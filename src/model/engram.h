/*
 * engram.h — the Engram block of DeepSeek-V4.1 (architecture.md §5.8, §5.1
 * step 1; reference model.py Engram / ParallelEngramEmbedding): at the start
 * of an Engram layer, before the attention-site mixes, every token row's
 * residual copies R[k] (k < hc) receive a gated n-gram memory read:
 *
 *   e      = concat over the n_cols hash ids of table[id] (e4m3 × per-row
 *            e8m0 scale per 32 columns -> BF16)                 [n_cols·head_dim]
 *   kv     = wkv · e  (FP8 linear with activation quantisation, BF16 out:
 *            the shared di_gemm of src/ops/)
 *   key_k  = kv[k·dim .. (k+1)·dim), value = kv[hc·dim .. (hc+1)·dim)
 *   dot_k  = Σ_d R[k][d]·(q[k][d]·k[k][d])·key_k[d] · rsqrt(mean(R[k]²)+eps)
 *            · rsqrt(mean(key_k²)+eps) · dim^-1/2                 (fp32)
 *   gate_k = sigmoid(copysign(sqrt(max(|dot_k|, 1e-6)), dot_k))
 *   R[k]  <- bf16(R[k] + gate_k · value)
 *
 * Tokens with mask 0 (image spans, §8) get gate 0: their rows are left as
 * they are (no table read, no GEMM).
 *
 * Weights are bound by pointer (the model owns them; the table is the
 * mmap'd checkpoint tensor and is never copied: 24 rows of 256 bytes are
 * read per token; wkv is the model's packed di_wmat). Rows are independent
 * and computed identically whatever the batch (batch-invariant).
 */
#ifndef DI_MODEL_ENGRAM_H
#define DI_MODEL_ENGRAM_H

#include <stdint.h>

#include "ops/ops.h"
#include "util/error.h"

typedef struct di_engram_layer_desc {
    int dim;                     /* hidden size (5120) */
    int hc;                      /* residual copies, hc_mult (4) */
    int n_cols;                  /* hash ids per token, (max_ngram − 1)·n_heads (24) */
    int head_dim;                /* engram_head_dim (256), a multiple of 32 */
    int64_t rows;                /* table rows, engram_num_embeddings[layer] */
    float eps;                   /* rms_norm_eps (1e-20) */
    int act_block;               /* activation quantisation block of wkv's input (32) */
    const uint8_t *table;        /* engram.embed.weight  e4m3 [rows][head_dim] */
    const uint8_t *table_scale;  /* engram.embed.scale   e8m0 [rows][head_dim/32] */
    const di_wmat *wkv;          /* engram.wkv packed: FP8 [(hc+1)·dim][n_cols·head_dim] */
    const void *q_weight;        /* engram.q_weight [hc][dim], BF16 or F32 (qk_f32) */
    const void *k_weight;        /* engram.k_weight [hc][dim] */
    int qk_f32;                  /* 1: q/k weights are F32; 0: BF16 */
    int tables_in_backend;       /* 1: table / table_scale are already backend memory (di_dev_alloc),
                                    handed over when init succeeds: the layer frees them */
    int tables_host;             /* on a device backend, table / table_scale stay in host memory
                                    (di_v4_options.engram_host): 1 read in place (a mapping, borrowed);
                                    2 malloc'd copies handed over when init succeeds (freed with the
                                    layer). Each pass gathers its rows on the host into the
                                    workspace's host staging rows and copies them to the device on
                                    the model's stream (di_copy_h2d, in stream order before wkv's
                                    GEMM): the same BF16 rows as the device gather, so the same bits */
} di_engram_layer_desc;

typedef struct di_engram_layer {
    di_engram_layer_desc d;
    float *qk;                   /* [hc][dim] fp32(q)·fp32(k), as the reference forms it (owned) */
    float *dqk;                  /* qk in backend memory (the ops' copy; == qk on the host) */
    int dev_tables;              /* 1: d.table / d.table_scale are owned backend copies */
    int host_tables;             /* 1: device backend, tables in host memory (d.tables_host) */
} di_engram_layer;

/* Check the shapes and bind the weights (pointers are kept, not copied).
 * Free with di_engram_layer_free. */
deepinfer_status di_engram_layer_init(di_engram_layer *l, const di_engram_layer_desc *d, di_error *err);
void di_engram_layer_free(di_engram_layer *l);

/* Scratch for up to max_rows token rows per internal pass (about
 * 64 KB per row for the release). Allocate once, outside the step loop. */
typedef struct di_engram_workspace {
    int max_rows;
    uint16_t *e, *kv;            /* gathered rows [max_rows][n_cols·head_dim], wkv out [max_rows][(hc+1)·dim] */
    float *kvf, *h;              /* one token's wkv output and residual copy in fp32 */
    int64_t *rows;               /* indices of the unmasked tokens of a pass */
    uint16_t *e_host;            /* host tables on a device backend: the gathered rows on the host
                                    before their copy to e [max_rows][n_cols·head_dim]; else NULL */
} di_engram_workspace;

deepinfer_status di_engram_workspace_init(di_engram_workspace *ws, const di_engram_layer *l, int max_rows,
                                          di_error *err);
void di_engram_workspace_free(di_engram_workspace *ws);

/* Gather and dequantise the table rows of n_tok tokens: out[t][c·head_dim
 * + j] = e4m3(table[id][j]) · e8m0(scale[id][j/32]), rounded to BF16 (held
 * as fp32), id = ids[t·ids_stride + c]. Fails on an id outside [0, rows). */
deepinfer_status di_engram_gather(const di_engram_layer *l, const int64_t *ids, int64_t ids_stride, int64_t n_tok,
                                  float *out, di_error *err);

/* Apply the block in place to R (BF16 [n_tok][hc][dim]) for tokens whose
 * hash ids are ids[t·ids_stride + c] (from di_engram_hash_ids: pass
 * ids + layer_index·n_cols and stride n_layers·n_cols). mask: NULL = every
 * token is text; else mask[t] == 0 skips token t. gates: NULL, or receives
 * gate_k per token ([n_tok][hc], 0 for masked tokens). */
deepinfer_status di_engram_forward(di_exec *x, const di_engram_layer *l, di_engram_workspace *ws, uint16_t *R,
                                   int64_t n_tok, const int64_t *ids, int64_t ids_stride, const uint8_t *mask,
                                   float *gates, di_error *err);

/* di_engram_forward without a mask and without reading the ids on the host:
 * ids in backend memory as di_engram_hash_rows (ops.h) writes them, in
 * [0, rows) by construction (§5.8: each column's id is below its offset plus
 * its prime, and the primes of a layer sum to its rows). The tables must be
 * backend memory (not d.tables_host, whose gather reads the ids on the host). */
deepinfer_status di_engram_forward_ops(di_exec *x, const di_engram_layer *l, di_engram_workspace *ws, uint16_t *R,
                                       int64_t n_tok, const int64_t *ids, int64_t ids_stride, float *gates);

/* Ask the kernel to start reading the table pages of these ids
 * (madvise WILLNEED; a hint, never fails). Call as soon as a step's hash ids
 * are known so the reads overlap with the layers before the Engram layer. */
void di_engram_prefetch(const di_engram_layer *l, const int64_t *ids, int64_t ids_stride, int64_t n_tok);

#endif
