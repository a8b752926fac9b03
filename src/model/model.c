/* model.c — architecture dispatch (model.h). */
#include "model/model.h"

#include <stdlib.h>

struct di_model {
    di_arch arch;
    di_v4_model *v4;
};

deepinfer_status di_model_load(const char *dir, const di_model_options *opt, di_model **out, di_error *err) {
    *out = NULL;
    di_model_config cfg;
    deepinfer_status st = di_config_load(dir, &cfg, err);
    if (st) return st;
    if (cfg.arch == DI_ARCH_V41)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "%s is a DeepSeek-V4.1 checkpoint; this build runs DeepSeek-V4 checkpoints only "
                            "(the V4.1 forward is not in it yet)",
                            dir);
    di_model *m = calloc(1, sizeof *m);
    if (!m) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    m->arch = cfg.arch;
    di_v4_options o = {.max_rows = opt ? opt->max_rows : 0, .max_context = opt ? opt->max_context : 0};
    if ((st = di_v4_load(dir, &o, &m->v4, err))) {
        free(m);
        return st;
    }
    *out = m;
    return DEEPINFER_OK;
}

void di_model_free(di_model *m) {
    if (!m) return;
    di_v4_free(m->v4);
    free(m);
}

const di_model_config *di_model_cfg(const di_model *m) { return di_v4_config(m->v4); }
int64_t di_model_max_context(const di_model *m) { return di_v4_max_context(m->v4); }
size_t di_model_weight_bytes(const di_model *m) { return di_v4_weight_bytes(m->v4); }
size_t di_model_workspace_bytes(const di_model *m) { return di_v4_workspace_bytes(m->v4); }
size_t di_model_decode_weight_bytes(const di_model *m) { return di_v4_decode_weight_bytes(m->v4); }

deepinfer_status di_model_forward(di_model *m, const di_model_batch *b, di_error *err) {
    return di_v4_forward(m->v4, b, err);
}
