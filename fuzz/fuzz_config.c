/* libFuzzer target: config.json parsing and validation (di_config_parse),
 * then everything derived from an accepted config: the expected tensor list
 * (when it is small enough to build quickly) and the state estimate. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model/config.h"
#include "model/mem_estimate.h"
#include "model/tensor_spec.h"

static di_model_config g_cfg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    di_error err;
    if (di_config_parse((const char *)data, size, "fuzz.json", &g_cfg, &err) != DEEPINFER_OK) {
        if (!err.msg[0]) __builtin_trap();
        return 0;
    }
    const di_model_config *c = &g_cfg;
    if (c->n_layers < 1 || c->n_layers + c->n_stages > DI_CFG_MAX_LAYERS) __builtin_trap();
    for (int l = 0; l < c->n_layers + c->n_stages; l++) {
        const di_layer_cfg *L = &c->layers[l];
        /* Every layer reference points at an earlier-or-same backbone layer. */
        int refs[] = {L->kv_layer, L->topk_layer, L->index_key_layer, L->candidate_layer};
        for (int i = 0; i < 4; i++)
            if (refs[i] < -1 || refs[i] > l || refs[i] >= c->n_layers) __builtin_trap();
    }
    di_state_estimate e;
    di_state_estimate_compute(c, &e);
    (void)di_state_bytes_at(c, (uint64_t)1 << 20);
    /* Building the spec allocates per tensor; keep executions fast. */
    uint64_t est = 0;
    for (int l = 0; l < c->n_layers + c->n_stages; l++)
        est += 100 + 6 * (uint64_t)(l < c->n_layers ? c->n_routed_experts : c->stage_n_routed_experts);
    if (est <= 20000) {
        di_weight_spec *spec = NULL;
        if (di_spec_build(c, &spec, &err) == DEEPINFER_OK) {
            for (size_t i = 0; i < di_spec_count(spec); i++) {
                const di_tensor_spec *s = di_spec_at(spec, i);
                if (di_spec_find(spec, s->name) != s || s->shape[0] < 0 || s->shape[1] < 0) __builtin_trap();
            }
            di_spec_free(spec);
        }
    }
    return 0;
}
