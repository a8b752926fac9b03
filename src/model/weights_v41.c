/* weights_v41.c — binding a V4.1 checkpoint (weights_v41.h). */
#include "model/weights_v41.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/moe_ep.h"
#include "model/wload.h"

static deepinfer_status bind_engram(di_v41_weights *w, int i, const di_model_config *cfg, const di_weight_spec *spec,
                                    di_error *err) {
    int l = cfg->engram_layer_ids[i];
    deepinfer_status st;
    if ((st = di_bind_linear(&w->engram_wkv[i], cfg, spec, err, "layers.%d.engram.wkv", l))) return st;
    if ((st = di_bind_vec_host(&w->engram_q[i], spec, err, "layers.%d.engram.q_weight", l))) return st;
    if ((st = di_bind_vec_host(&w->engram_k[i], spec, err, "layers.%d.engram.k_weight", l))) return st;
    const di_tensor *t = di_spec_get(spec, "layers.%d.engram.embed.weight", l);
    const di_tensor *s = di_spec_get(spec, "layers.%d.engram.embed.scale", l);
    if (!t || !s) return di_error_set(err, DEEPINFER_ERR_NOT_FOUND, "tensor layers.%d.engram.embed.*: missing", l);
    /* the tables: streamed into device memory; on the CPU read in place from the mapping (a
     * generated checkpoint: a host copy, the model's) */
    const uint8_t *tab = t->data, *tsc = s->data;
    int in_backend = 0, host = 0;
    if (w->engram_host) { /* host memory on a device backend (engram.h tables_host) */
        host = 1;
        if (!di_st_mapped(t) || !di_st_mapped(s)) { /* a generated checkpoint: host copies, the layer's */
            uint8_t *a = di_wload_copy(t, err), *b = a ? di_wload_copy(s, err) : NULL;
            if (!a || !b) {
                free(a);
                return di_error_prefix(err, "layer %d: the Engram table in host memory", l);
            }
            tab = a, tsc = b, host = 2;
        }
    } else if (!di_allocator_is_host() || !di_st_mapped(t) || !di_st_mapped(s)) {
        uint8_t *a = di_dev_alloc((size_t)t->nbytes), *b = di_dev_alloc((size_t)s->nbytes);
        st = !a || !b ? di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "layer %d: out of memory for the Engram table "
                                                                      "(%.2f GB)", l, (double)(t->nbytes + s->nbytes) / 1e9)
                      : di_wload_to_dev(a, t, 0, (size_t)t->nbytes, 0, err);
        if (!st) st = di_wload_to_dev(b, s, 0, (size_t)s->nbytes, 1, err);
        di_wload_release(t), di_wload_release(s);
        if (st) {
            di_dev_free(a), di_dev_free(b);
            return st;
        }
        tab = a, tsc = b, in_backend = 1;
    }
    di_engram_layer_desc d = {.dim = (int)cfg->hidden_size,
                              .hc = (int)cfg->hc_mult,
                              .n_cols = cfg->engram_cols,
                              .head_dim = (int)cfg->engram_head_dim,
                              .rows = cfg->engram_num_embeddings[i],
                              .eps = (float)cfg->rms_norm_eps,
                              .act_block = cfg->act_block,
                              .table = tab,
                              .table_scale = tsc,
                              .tables_in_backend = in_backend,
                              .tables_host = host,
                              .wkv = &w->engram_wkv[i],
                              .q_weight = w->engram_q[i],
                              .k_weight = w->engram_k[i],
                              .qk_f32 = 1}; /* bound as fp32 (exact for BF16 checkpoints) */
    w->engram_table_bytes += (size_t)t->nbytes + (size_t)s->nbytes;
    w->bytes += w->engram_wkv[i].bytes;
    if ((st = di_engram_layer_init(&w->engram[i], &d, err))) {
        if (in_backend) di_dev_free((void *)tab), di_dev_free((void *)tsc);
        if (host == 2) free((void *)tab), free((void *)tsc);
        return di_error_prefix(err, "layer %d", l);
    }
    return DEEPINFER_OK;
}

static deepinfer_status bind_stage(di_v41_stage_w *sw, int s, const di_model_config *cfg, const di_weight_spec *spec,
                                   di_ep_model *ep, di_error *err) {
    char p[32];
    snprintf(p, sizeof p, "mtp.%d.", s);
    deepinfer_status st;
    const di_layer_cfg *L = &cfg->layers[cfg->n_layers + s];
    if ((st = di_bind_block(&sw->blk, cfg, L, spec, p, (int)cfg->stage_n_routed_experts, ep, err))) return st;
    if (s == 0) {
        if ((st = di_bind_linear(&sw->main_proj, cfg, spec, err, "%smain_proj", p))) return st;
        if ((st = di_bind_vec(&sw->main_norm, spec, err, "%smain_norm.weight", p))) return st;
    }
    if (s == cfg->n_stages - 1) {
        if ((st = di_bind_vec(&sw->norm, spec, err, "%snorm.weight", p))) return st;
        if ((st = di_bind_bf16(&sw->markov_embed, spec, err, "%smarkov_head.embed.weight", p))) return st;
        if ((st = di_bind_linear(&sw->markov_head, cfg, spec, err, "%smarkov_head.head", p))) return st;
        if ((st = di_bind_linear(&sw->conf, cfg, spec, err, "%sconfidence_head.proj", p))) return st;
    }
    return DEEPINFER_OK;
}

deepinfer_status di_v41_weights_bind(di_v41_weights *w, const di_model_config *cfg, const di_weight_spec *spec,
                                     di_error *err) {
    return di_v41_weights_bind_ep(w, cfg, spec, NULL, err);
}

deepinfer_status di_v41_weights_bind_ep(di_v41_weights *w, const di_model_config *cfg, const di_weight_spec *spec,
                                        di_ep_model *ep, di_error *err) {
    return di_v41_weights_bind_opts(w, cfg, spec, ep, 0, err);
}

deepinfer_status di_v41_weights_bind_opts(di_v41_weights *w, const di_model_config *cfg, const di_weight_spec *spec,
                                          di_ep_model *ep, int engram_host, di_error *err) {
    deepinfer_status st;
    memset(w, 0, sizeof *w);
    w->engram_host = engram_host && !di_allocator_is_host();
    w->n_layers = cfg->n_layers;
    w->n_engram = cfg->n_engram_layer_ids;
    w->n_stages = cfg->drafter == DI_DRAFTER_DSPARK ? cfg->n_stages : 0;
    w->layers = calloc((size_t)w->n_layers, sizeof *w->layers);
    w->engram_wkv = calloc((size_t)w->n_engram + 1, sizeof *w->engram_wkv);
    w->engram = calloc((size_t)w->n_engram + 1, sizeof *w->engram);
    w->stages = calloc((size_t)w->n_stages + 1, sizeof *w->stages);
    if (!w->layers || !w->engram_wkv || !w->engram || !w->stages) {
        st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory binding layers");
        goto fail;
    }
    if ((st = di_bind_bf16(&w->embed, spec, err, "embed.weight"))) goto fail;
    if ((st = di_bind_linear(&w->head, cfg, spec, err, "head"))) goto fail;
    if ((st = di_bind_vec(&w->norm, spec, err, "norm.weight"))) goto fail;
    w->bytes = w->head.bytes + (size_t)(cfg->vocab_size * cfg->hidden_size * 2);
    di_wload_prefetch(spec, "layers.0.");
    for (int l = 0; l < w->n_layers; l++) {
        char p[32];
        snprintf(p, sizeof p, "layers.%d.", l + 1);
        di_wload_prefetch(spec, l + 1 < w->n_layers ? p : "mtp."); /* the next layer's pages while this one binds */
        snprintf(p, sizeof p, "layers.%d.", l);
        if ((st = di_bind_block(&w->layers[l], cfg, &cfg->layers[l], spec, p, (int)cfg->n_routed_experts, ep, err)))
            goto fail;
        w->bytes += di_block_bytes(&w->layers[l]);
    }
    di_wload_prefetch_wait(); /* the drafter's read-ahead done before it binds */
    for (int i = 0; i < w->n_engram; i++)
        if ((st = bind_engram(w, i, cfg, spec, err))) goto fail;
    for (int s = 0; s < w->n_stages; s++) {
        if ((st = bind_stage(&w->stages[s], s, cfg, spec, ep, err))) goto fail;
        const di_v41_stage_w *sw = &w->stages[s];
        w->bytes += di_block_bytes(&sw->blk) + sw->main_proj.bytes + sw->markov_head.bytes + sw->conf.bytes;
    }
    di_wload_finish();
    return DEEPINFER_OK;
fail:
    di_wload_finish();
    di_v41_weights_free(w);
    return st;
}

void di_v41_weights_free(di_v41_weights *w) {
    if (!w) return;
    di_dev_free(w->embed);
    di_wmat_free(&w->head);
    di_dev_free(w->norm);
    if (w->layers)
        for (int l = 0; l < w->n_layers; l++) di_block_free(&w->layers[l]);
    free(w->layers);
    for (int i = 0; i < w->n_engram; i++) {
        if (w->engram) di_engram_layer_free(&w->engram[i]);
        if (w->engram_wkv) di_wmat_free(&w->engram_wkv[i]);
        free(w->engram_q[i]), free(w->engram_k[i]);
    }
    free(w->engram), free(w->engram_wkv);
    if (w->stages)
        for (int s = 0; s < w->n_stages; s++) {
            di_v41_stage_w *sw = &w->stages[s];
            di_block_free(&sw->blk);
            di_wmat_free(&sw->main_proj);
            di_dev_free(sw->main_norm), di_dev_free(sw->norm), di_dev_free(sw->markov_embed);
            di_wmat_free(&sw->markov_head);
            di_wmat_free(&sw->conf);
        }
    free(w->stages);
    memset(w, 0, sizeof *w);
}
