/* mem_estimate.c — see mem_estimate.h for the formulas and their sources. */
#include "model/mem_estimate.h"

#include <string.h>

static uint64_t kv_row(const di_model_config *c) {
    uint64_t D = (uint64_t)c->head_dim, rd = (uint64_t)c->qk_rope_head_dim;
    if (c->arch == DI_ARCH_V4) return (D - rd) + 2 * rd + (D - rd + 63) / 64;
    return D / 2 + (D + 15) / 16;
}

static uint64_t index_row(const di_model_config *c) {
    uint64_t ih = (uint64_t)c->index_head_dim;
    return ih / 2 + (ih + 31) / 32;
}

/* Partial-group compressor state of one layer: kv + score buffers in fp32. */
static uint64_t compressor_state(const di_model_config *c, const di_layer_cfg *L) {
    if (!L->has_compressor) return 0;
    uint64_t r = (uint64_t)L->ratio, D = (uint64_t)c->head_dim, ih = (uint64_t)c->index_head_dim;
    if (c->arch == DI_ARCH_V41) return r >= 2 ? 2 * r * D * 4 : 0; /* ratio 1 keeps no partial group */
    if (L->compressor_overlap) return 2 * (2 * r) * (2 * D) * 4 + 2 * (2 * r) * (2 * ih) * 4;
    return 2 * r * D * 4;
}

void di_state_estimate_compute(const di_model_config *c, di_state_estimate *e) {
    memset(e, 0, sizeof *e);
    e->kv_row_bytes = kv_row(c);
    e->index_row_bytes = index_row(c);
    for (int l = 0; l < c->n_layers; l++) {
        const di_layer_cfg *L = &c->layers[l];
        if (!L->has_compressor) continue;
        e->kv_bytes_per_token += (double)e->kv_row_bytes / L->ratio;
        if (L->has_index_keys) e->index_bytes_per_token += (double)e->index_row_bytes / L->ratio;
        e->compressor_state_bytes += compressor_state(c, L);
    }
    if (c->n_engram_layer_ids) e->history_bytes_per_token = 4;
    e->bytes_per_token = e->kv_bytes_per_token + e->index_bytes_per_token + e->history_bytes_per_token;
    e->swa_ring_bytes = (uint64_t)(c->n_layers + c->n_stages) * (uint64_t)c->sliding_window *
                        (uint64_t)c->head_dim * 2;
    e->fixed_bytes = e->swa_ring_bytes + e->compressor_state_bytes;
}

uint64_t di_state_bytes_at(const di_model_config *c, uint64_t n) {
    di_state_estimate e;
    di_state_estimate_compute(c, &e);
    uint64_t total = e.fixed_bytes;
    for (int l = 0; l < c->n_layers; l++) {
        const di_layer_cfg *L = &c->layers[l];
        if (!L->has_compressor) continue;
        uint64_t rows = n / (uint64_t)L->ratio;
        total += rows * e.kv_row_bytes + (L->has_index_keys ? rows * e.index_row_bytes : 0);
    }
    if (c->n_engram_layer_ids) total += 4 * n;
    return total;
}
