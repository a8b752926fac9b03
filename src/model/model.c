/* model.c — architecture dispatch (model.h). */
#include "model/model.h"

#include <stdlib.h>

#include "model/cp_prefill.h"
#include "model/dsv41.h"
#include "model/dsv41_internal.h"
#include "model/dsv4_internal.h"
#include "model/moe_ep.h"

struct di_model {
    di_arch arch;
    di_v4_model *v4;
    di_v41_model *v41;
    int borrowed; /* di_model_borrow: the models are the caller's */
};

static di_v4_options v4_options(const di_model_options *opt) {
    di_v4_options o = {0};
    if (!opt) return o;
    o.max_rows = opt->max_rows;
    o.max_context = opt->max_context;
    o.max_draft = opt->max_draft;
    o.engram_hash = opt->engram_hash;
    o.weights = opt->weights;
    o.reserve_device = opt->reserve_device;
    o.reserve_host = opt->reserve_host;
    o.budget = opt->budget;
    o.plan_out = opt->plan_out;
    o.ep_rank = opt->ep_rank;
    o.ep_size = opt->ep_size;
    o.comm = opt->comm;
    o.engram_host = opt->engram_host;
    return o;
}

deepinfer_status di_model_plan(const char *dir, const di_model_options *opt, struct di_safetensors *weights,
                               struct di_load_plan *plan, di_error *err) {
    di_model_config cfg;
    deepinfer_status st = di_config_load(dir, &cfg, err);
    if (st) return st;
    di_v4_options o = v4_options(opt);
    if (weights) o.weights = weights;
    o.plan_out = plan;
    o.plan_only = 1;
    di_v4_model *v4 = NULL;
    di_v41_model *v41 = NULL;
    return cfg.arch == DI_ARCH_V41 ? di_v41_load(dir, &o, &v41, err) : di_v4_load(dir, &o, &v4, err);
}

deepinfer_status di_model_load(const char *dir, const di_model_options *opt, di_model **out, di_error *err) {
    *out = NULL;
    di_model_config cfg;
    deepinfer_status st = di_config_load(dir, &cfg, err);
    if (st) return st;
    di_model *m = calloc(1, sizeof *m);
    if (!m) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    m->arch = cfg.arch;
    di_v4_options o = v4_options(opt);
    st = m->arch == DI_ARCH_V41 ? di_v41_load(dir, &o, &m->v41, err) : di_v4_load(dir, &o, &m->v4, err);
    if (st) {
        free(m);
        return st;
    }
    *out = m;
    return DEEPINFER_OK;
}

di_model *di_model_borrow(di_v4_model *v4, di_v41_model *v41) {
    if (!v4 == !v41) return NULL;
    di_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    *m = (di_model){.arch = v41 ? DI_ARCH_V41 : DI_ARCH_V4, .v4 = v4, .v41 = v41, .borrowed = 1};
    return m;
}

void di_model_free(di_model *m) {
    if (!m) return;
    if (m->borrowed) {
        free(m);
        return;
    }
    di_v4_free(m->v4);
    di_v41_free(m->v41);
    free(m);
}

#define DISPATCH(fn, ...) (m->v41 ? di_v41_##fn(m->v41, ##__VA_ARGS__) : di_v4_##fn(m->v4, ##__VA_ARGS__))

const di_model_config *di_model_cfg(const di_model *m) { return DISPATCH(config); }
int64_t di_model_max_context(const di_model *m) { return DISPATCH(max_context); }
size_t di_model_weight_bytes(const di_model *m) { return DISPATCH(weight_bytes); }
size_t di_model_workspace_bytes(const di_model *m) { return DISPATCH(workspace_bytes); }
size_t di_model_decode_weight_bytes(const di_model *m) { return DISPATCH(decode_weight_bytes); }

void di_model_set_lanes(di_model *m, int n) { DISPATCH(set_lanes, n); }

deepinfer_status di_model_forward(di_model *m, const di_model_batch *b, di_error *err) {
    return DISPATCH(forward, b, err);
}

deepinfer_status di_model_cp_prefill(di_model *m, const di_cp_prefill *p, di_error *err) {
    return m->v41 ? di_v41_cp_prefill(m->v41, p, err) : di_v4_cp_prefill(m->v4, p, err);
}

static di_core *core_of(const di_model *m) { return m->v41 ? &m->v41->core : &m->v4->core; }

di_exec *di_model_exec(di_model *m) { return &core_of(m)->x; }
const float *di_model_device_logits(const di_model *m) { return core_of(m)->dlogits; }
int di_model_max_rows(const di_model *m) { return core_of(m)->max_rows; }
int32_t *di_model_device_tokens(di_model *m) {
    di_core *c = core_of(m);
    if (!di_exec_on_device(&c->x)) return NULL;
    if (m->v41 && c->cfg.n_engram_layer_ids > 0 && !m->v41->eng_ops) return NULL; /* host tables: host hash */
    return c->ws.tok;
}

/* ---- the drafter ---- */

di_drafter di_model_drafter(const di_model *m) {
    if (m->v41) return m->v41->w.n_stages > 0 ? DI_DRAFTER_DSPARK : DI_DRAFTER_NONE;
    return m->v4->w.n_mtp > 0 ? DI_DRAFTER_MTP : DI_DRAFTER_NONE;
}

int di_model_draft_block(const di_model *m) {
    switch (di_model_drafter(m)) {
    case DI_DRAFTER_DSPARK: return (int)m->v41->core.cfg.dspark_block_size;
    case DI_DRAFTER_MTP: return di_v4_mtp_block(m->v4);
    default: return 0;
    }
}

size_t di_model_draft_hidden_elems(const di_model *m) {
    const di_model_config *c = di_model_cfg(m);
    switch (di_model_drafter(m)) {
    case DI_DRAFTER_DSPARK: return (size_t)c->n_dspark_target_layer_ids * (size_t)c->hidden_size;
    case DI_DRAFTER_MTP: return (size_t)c->hc_mult * (size_t)c->hidden_size;
    default: return 0;
    }
}

void di_model_batch_set_draft_hidden(const di_model *m, di_model_batch *b, uint16_t *buf) {
    if (m->v41) b->target_hidden = buf;
    else b->hidden = buf;
}

int di_model_draft_dev_out(const di_model *m) {
    return m->v41 && m->v41->w.n_stages > 0 && di_exec_on_device(&m->v41->core.x);
}

deepinfer_status di_model_draft_step(di_model *m, const di_model_draft *d, di_error *err) {
    return m->v41 ? di_v41_dspark_step(m->v41, d, err) : di_v4_mtp_step(m->v4, d, err);
}

/* ---- parallel ranks (moe_ep.h; the engine's src/engine/ranks.c) ---- */

struct di_ep_model *di_model_ep(const di_model *m) { return m->v41 ? m->v41->ep : m->v4->ep; }

deepinfer_status di_model_ep_join_empty(di_model *m, di_error *err) {
    di_core *c = m->v41 ? &m->v41->core : &m->v4->core;
    const di_moe_opts *o = m->v41 ? &m->v41->moe : &m->v4->moe;
    return di_ep_join_empty(di_model_ep(m), &c->x, &c->ws, o, err);
}
