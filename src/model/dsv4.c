/* dsv4.c — DeepSeek-V4-Flash: load and the backbone wiring (architecture.md
 * §4.1–4.9). The step plumbing is core.c; the blocks live in block.c,
 * mhc.c, attention.c, compressor.c, indexer.c and moe.c. */
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/attention.h"
#include "model/block.h"
#include "model/dsv4_internal.h"
#include "model/mhc.h"
#include "model/moe_ep.h"
#include "model/load_plan.h"
#include "model/tensor_spec.h"

deepinfer_status di_v4_load(const char *dir, const di_v4_options *opt, di_v4_model **out, di_error *err) {
    *out = NULL;
    di_v4_model *m = calloc(1, sizeof *m);
    if (!m) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    di_model_config *c = &m->core.cfg;
    deepinfer_status st = di_config_load(dir, c, err);
    if (!st && c->arch != DI_ARCH_V4)
        st = di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "model type %s: this loader runs deepseek_v4 checkpoints",
                          di_arch_name(c->arch));
    if (!st) st = di_core_check_config(c, err);
    if (!st) st = di_seq_set_max_draft(c, opt ? opt->max_draft : 0, err); /* sizes the compressor state */
    if (!st) st = di_ep_model_create(c, opt ? opt->ep_rank : 0, opt ? opt->ep_size : 0, opt ? opt->comm : NULL, &m->ep, err);
    if (st) {
        free(m);
        return st;
    }
    di_safetensors *stf = NULL;
    di_weight_spec *spec = NULL;
    di_safetensors *given = opt ? opt->weights : NULL;
    if (given) stf = given;
    else if ((st = di_st_open(dir, &stf, err))) goto fail;
    if ((st = di_spec_build(c, &spec, err))) goto fail;
    if ((st = di_spec_check(spec, stf, NULL, err))) goto fail;
    /* the plan before any large allocation: refused here when it does not fit (load_plan.h) */
    if ((st = di_load_plan_for_load(c, spec, opt, err)) || (opt && opt->plan_only)) goto fail;
    if ((st = di_v4_weights_bind_ep(&m->w, c, spec, m->ep, err))) goto fail;
    if (m->ep) di_ep_keep_spec(m->ep, spec); /* replicas bind from it (di_eplb_apply) */
    else di_spec_free(spec);
    spec = NULL;
    m->lanes_max = m->ep ? 1 : 0; /* every rank runs the same MoE calls in the same order: no lanes */
    m->st = stf == given ? NULL : stf; /* stays mapped while the model lives (di_wmat_raw); borrowed: the caller's */
    stf = NULL;

    if ((st = di_core_init(&m->core, opt, err))) goto fail;
    int64_t ep_k = c->num_experts_per_tok > c->stage_num_experts_per_tok ? c->num_experts_per_tok
                                                                          : c->stage_num_experts_per_tok;
    if ((st = di_ep_reserve(m->ep, m->core.max_rows * (int)ep_k, err))) goto fail; /* steps allocate nothing */
    m->hbuf = di_dev_alloc((size_t)m->core.max_rows * (size_t)(c->hc_mult * c->hidden_size) * 2);
    if (!m->hbuf) {
        st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for step buffers");
        goto fail;
    }
    m->moe = (di_moe_opts){.topk = (int)c->num_experts_per_tok,
                           .route_scale = (float)c->routed_scaling_factor,
                           .gate_temp = 1.0f,
                           .normalize = 1,
                           .norm_eps = 0.0f,
                           .routed_limit = (float)c->swiglu_limit,
                           .shared_limit = 0.0f}; /* V4: the shared expert is not clamped (§4.7) */
    if ((st = di_v4_mtp_init(m, err))) goto fail;
    m->step_weight_bytes = di_v4_decode_weight_bytes(m);
    *out = m;
    return DEEPINFER_OK;
fail:
    di_spec_free(spec);
    if (stf != given) di_st_close(stf);
    di_v4_free(m);
    return st;
}

void di_v4_free(di_v4_model *m) {
    if (!m) return;
    di_v4_mtp_free(m);
    di_ep_model_free(m->ep);
    di_v4_weights_free(&m->w);
    di_lane_cores_free(&m->lanes);
    di_core_free(&m->core);
    di_dev_free(m->hbuf);
    di_st_close(m->st);
    free(m);
}

const di_model_config *di_v4_config(const di_v4_model *m) { return &m->core.cfg; }
int64_t di_v4_max_context(const di_v4_model *m) { return m->core.max_context; }
size_t di_v4_weight_bytes(const di_v4_model *m) { return m->w.bytes; }

size_t di_v4_workspace_bytes(const di_v4_model *m) {
    size_t hcd = (size_t)(m->core.cfg.hc_mult * m->core.cfg.hidden_size);
    return di_core_bytes(&m->core) + (size_t)m->core.max_rows * hcd * 2 + di_v4_mtp_bytes(m); /* + the MTP scratch */
}

size_t di_v4_decode_weight_bytes(const di_v4_model *m) {
    const di_model_config *c = &m->core.cfg;
    size_t b = m->w.head.bytes + (size_t)c->hidden_size * 2;
    for (int l = 0; l < c->n_layers; l++) {
        const di_block_w *bw = &m->w.layers[l];
        b += di_block_bytes(bw) + bw->hc_attn.fn.bytes + bw->hc_ffn.fn.bytes;
        for (int e = 0; e < bw->moe.n_experts; e++) /* only num_experts_per_tok routed experts are read */
            b -= bw->moe.w1[e].bytes + bw->moe.w2[e].bytes + bw->moe.w3[e].bytes;
        b += di_moe_expert_bytes(&bw->moe) * (size_t)c->num_experts_per_tok;
    }
    return b;
}

deepinfer_status di_v4_seq_new(const di_v4_model *m, di_seq_state **out, di_error *err) {
    return di_seq_create(&m->core.cfg, m->core.max_context, out, err);
}

void di_v4_set_index_observer(di_v4_model *m, di_v4_index_observer fn, void *ctx) {
    m->core.index_obs = fn;
    m->core.index_obs_ctx = ctx;
}

void di_v4_outputs(di_v4_model *m, di_core *core, di_fwd *f, const di_v4_batch *b, int r0, const di_hc_w *hc_head,
                   const float *norm) {
    const di_model_config *c = &m->core.cfg;
    size_t hcd = (size_t)(c->hc_mult * c->hidden_size);
    int logits = di_core_has_logits(b, r0, f->M);
    if (b->hidden || !logits) di_mhc_post_pending(f, core->R); /* R is read, or there is no head */
    if (b->hidden) di_copy_2d(f->x, 1, core->R, 0, b->hidden + (size_t)r0 * hcd, 0, (size_t)f->M * hcd * 2);
    if (!logits) return;
    di_mhc_head_final(f, hc_head, norm, core->R); /* pending post, head collapse, final norm */
    di_core_logits(core, f, b, r0, NULL, &m->w.head);
}

/* Rows [r0, r0 + n) of a checked batch through the backbone on one core
 * (the model's, or a lane's), in passes of the core's max_rows. */
static void forward_rows(di_v4_model *m, di_core *core, const di_v4_batch *b, int r0, int n) {
    const di_model_config *c = &m->core.cfg;
    for (int end = r0 + n; r0 < end; r0 += core->max_rows) {
        int k = end - r0 < core->max_rows ? end - r0 : core->max_rows;
        di_fwd f;
        di_core_fwd_init(core, b, r0, k, &m->moe, &f);
        di_core_embed(core, &f, m->w.embed); /* expanded to hc copies (§4.1) */
        for (int l = 0; l < c->n_layers; l++) {
            f.hc_defer_post = l + 1 == c->n_layers; /* the last post joins the head (di_v4_outputs) */
            di_block(&f, &m->w.layers[l], &c->layers[l], l, core->R, 0, di_attn_block, &m->moe,
                     l + 1 < c->n_layers ? &m->w.layers[l + 1] : NULL);
        }
        di_v4_outputs(m, core, &f, b, r0, &m->w.hc_head, m->w.norm);
        for (int s = 0; s < f.nseg; s++) f.segs[s].seq->n_tokens = f.segs[s].pos0 + f.segs[s].nrows;
    }
}

/* Lanes (lanes.h): lane 0 on the model's core, lane i > 0 on lanes.c[i - 1]. */
typedef struct lane_ctx {
    di_v4_model *m;
    const di_v4_batch *b;
} lane_ctx;

static deepinfer_status run_lane(void *p, int lane, int r0, int n, di_error *err) {
    (void)err;
    lane_ctx *c = p;
    forward_rows(c->m, lane ? c->m->lanes.c[lane - 1] : &c->m->core, c->b, r0, n);
    return DEEPINFER_OK;
}

void di_v4_set_lanes(di_v4_model *m, int n) { m->lanes_max = m->ep ? 1 : n; }

deepinfer_status di_v4_forward(di_v4_model *m, const di_v4_batch *b, di_error *err) {
    deepinfer_status st = di_core_check_batch(&m->core, b, 0, err);
    if (st) return st;
    int start[DI_LANES_MAX + 1];
    int nl = di_lanes_plan_core(&m->core, m->lanes_max, m->step_weight_bytes, b, start);
    if (nl > 1 && !di_lane_cores_ensure(&m->lanes, &m->core, nl, NULL)) { /* no memory: op-parallel */
        lane_ctx c = {m, b};
        return di_lanes_run(nl, start, run_lane, &c, err);
    }
    forward_rows(m, &m->core, b, 0, b->n);
    st = di_exec_sync(&m->core.x, err); /* device backends: the step's first failed op */
    return st ? st : di_ep_take_status(m->ep, err);
}
