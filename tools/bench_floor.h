/*
 * bench_floor.h — the work a step must do, for `deepinfer bench`'s floors
 * (docs/DESIGN.md §4): bytes a decode step reads and FLOPs a prefill does,
 * counted from the tensor list (model/tensor_spec.h) in checkpoint bytes,
 * i.e. what a device reading the released formats reads.
 */
#ifndef DI_TOOLS_BENCH_FLOOR_H
#define DI_TOOLS_BENCH_FLOOR_H

#include <stdint.h>

#include "model/config.h"
#include "util/error.h"

typedef struct bench_costs {
    double image_bytes;        /* every tensor of the checkpoint (the dummy image) */
    double dense_bytes;        /* backbone layers' weights other than routed experts (shared experts, attention,
                                  router, norms, mHC), read once per decode step */
    double expert_bytes[DI_CFG_MAX_LAYERS]; /* one routed expert of backbone layer l (w1 + w2 + w3 + scales) */
    double head_bytes;         /* head.weight, read once per step */
    double token_bytes;        /* per token: its embedding row and its Engram row gathers */
    double linear_flops;       /* per token through the backbone: 2 x weights of every linear, routed experts
                                  counted num_experts_per_tok times */
    double head_flops;         /* per logits row */
} bench_costs;

deepinfer_status bench_costs_compute(const di_model_config *c, bench_costs *k, di_error *err);

/* Expected distinct experts when B tokens each pick k of E uniformly: E (1 - (1 - k/E)^B). */
double bench_distinct_experts(double E, double k, double B);

/* Bytes one decode step reads for B sequences at context ctx: dense weights, the expected distinct
 * experts per layer, the head, per-token rows, and each sequence's state (bench_state_bytes). */
double bench_decode_bytes(const di_model_config *c, const bench_costs *k, int B, int64_t ctx);

/* Attention FLOPs of a prefill of positions 0..L-1 (sliding window, attended compressed rows
 * (top-k where the layer selects, else all), indexer scoring). An estimate: elementwise work and
 * the compressors are not counted. */
double bench_attn_flops(const di_model_config *c, int64_t L);

/* State bytes of one sequence holding ctx positions (rings, compressor buffers, compressed KV and
 * index-key rows), in this engine's layout (model/seq_state.h). */
double bench_state_bytes(const di_model_config *c, int64_t ctx);

#endif
