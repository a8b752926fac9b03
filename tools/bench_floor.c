/* bench_floor.c — decode bytes and prefill FLOPs from the tensor list (bench_floor.h). */
#include "bench_floor.h"

#include <math.h>
#include <string.h>

#include "model/seq_state.h"
#include "model/tensor_spec.h"

static int ends(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

deepinfer_status bench_costs_compute(const di_model_config *c, bench_costs *k, di_error *err) {
    memset(k, 0, sizeof *k);
    di_weight_spec *spec = NULL;
    deepinfer_status st = di_spec_build(c, &spec, err);
    if (st) return st;
    for (size_t i = 0; i < di_spec_count(spec); i++) {
        const di_tensor_spec *e = di_spec_at(spec, i);
        if (e->flags & (DI_SPEC_OPTIONAL | DI_SPEC_UNVERIFIED)) continue;
        double numel = (double)e->shape[0] * (double)(e->ndim == 2 ? e->shape[1] : 1);
        double bytes = numel * (double)di_dtype_size(e->dtype);
        k->image_bytes += bytes;
        if (e->layer < 0) {
            if (!strcmp(e->name, "head.weight")) k->head_bytes = bytes, k->head_flops = 2 * numel;
            continue;
        }
        if (e->layer >= c->n_layers) continue; /* drafter stages: not run by a backbone step */
        if (e->kind == DI_TK_ENGRAM_TABLE || e->kind == DI_TK_ENGRAM_SCALE) {
            k->token_bytes += bytes / (double)e->shape[0] * (double)c->engram_cols; /* engram_cols rows */
            continue;
        }
        int linear = e->ndim == 2 && (e->kind == DI_TK_FP8_WEIGHT || e->kind == DI_TK_FP4_WEIGHT ||
                                      (e->kind == DI_TK_PLAIN && e->dtype != DI_DTYPE_I64 && !ends(e->name, ".ape") &&
                                       !ends(e->name, "q_weight") && !ends(e->name, "k_weight")));
        double flops = linear ? 2 * numel * (e->kind == DI_TK_FP4_WEIGHT ? 2 : 1) : 0;
        if (e->expert >= 0) {
            if (e->expert == 0) k->expert_bytes[e->layer] += bytes;
            k->linear_flops += flops * (double)c->num_experts_per_tok / (double)c->n_routed_experts;
        } else if (e->dtype == DI_DTYPE_I64) {
            k->token_bytes += (double)e->shape[1] * 8; /* its tid2eid row */
        } else {
            k->dense_bytes += bytes;
            k->linear_flops += flops;
        }
    }
    k->token_bytes += (double)c->hidden_size * 2; /* the embedding row */
    di_spec_free(spec);
    return DEEPINFER_OK;
}

double bench_distinct_experts(double E, double k, double B) { return E * (1 - pow(1 - k / E, B)); }

double bench_decode_bytes(const di_model_config *c, const bench_costs *k, int B, int64_t ctx) {
    double b = k->dense_bytes + k->head_bytes + (double)B * (k->token_bytes + bench_state_bytes(c, ctx));
    double d = bench_distinct_experts((double)c->n_routed_experts, (double)c->num_experts_per_tok, (double)B);
    for (int l = 0; l < c->n_layers; l++) b += d * k->expert_bytes[l];
    return b;
}

double bench_attn_flops(const di_model_config *c, int64_t L) {
    double f = 0, nh = (double)c->num_attention_heads, D = (double)c->head_dim;
    double ih = (double)c->index_n_heads * (double)c->index_head_dim;
    for (int l = 0; l < c->n_layers; l++) {
        const di_layer_cfg *y = &c->layers[l];
        for (int64_t p = 0; p < L; p++) {
            double win = (double)(p + 1 < c->sliding_window ? p + 1 : c->sliding_window), att = win;
            if (y->ratio > 0) {
                double rows = (double)((p + 1) / y->ratio);
                att += y->topk_layer >= 0 && rows > (double)c->index_topk ? (double)c->index_topk : rows;
                if (y->has_index_query) f += 2 * ih * rows;
            }
            f += 4 * nh * D * att; /* QK^T and PV */
        }
    }
    return f;
}

double bench_state_bytes(const di_model_config *c, int64_t ctx) {
    di_seq_layout lay;
    di_seq_layout_get(c, 64, &lay);
    double kv = (double)lay.page_bytes_kv / lay.page_rows, ik = (double)lay.page_bytes_ikey / lay.page_rows;
    double b = (double)lay.fixed_bytes;
    for (int l = 0; l < c->n_layers; l++) {
        double rows = (double)di_seq_rows_needed(c, l, ctx);
        b += rows * ((c->layers[l].has_compressor ? kv : 0) + (c->layers[l].has_index_keys ? ik : 0));
    }
    return b;
}
