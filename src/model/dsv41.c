/* dsv41.c — DeepSeek-V4.1-Flash: load and the backbone wiring
 * (architecture.md §5). Per row: Engram (at its layers), single-pass mHC
 * blocks whose attention role comes from the config, the final collapse
 * with the last FFN pre vector, norm, head. The step plumbing is core.c;
 * the blocks are block.c, attention.c, compressor.c, indexer.c, moe.c,
 * engram.c; DSpark is dspark.c. */
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "model/attention.h"
#include "model/block.h"
#include "model/dsv41_compact.h"
#include "model/dsv41_internal.h"
#include "model/mhc.h"
#include "model/moe_ep.h"
#include "model/load_plan.h"
#include "model/tensor_spec.h"
#include "util/file.h"

static deepinfer_status check_v41(const di_model_config *c, di_error *err) {
    if (c->arch != DI_ARCH_V41)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "model type %s: this loader runs deepseek_v41 checkpoints",
                            di_arch_name(c->arch));
    if (c->candidate_source_layer_id >= 0 && (c->candidate_block_size < 1 || c->candidate_topk_blocks < 1))
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "candidate_source_layer_id %lld needs candidate_block_size and candidate_topk_blocks >= 1",
                            (long long)c->candidate_source_layer_id);
    if (c->n_engram_layer_ids && c->engram_head_dim % c->act_block)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "engram_head_dim %lld is not a multiple of %d",
                            (long long)c->engram_head_dim, c->act_block);
    return di_core_check_config(c, err);
}

/* The token map and hash constants in backend memory, for the ops' hash (dsv41_internal.h eng_ops). */
static deepinfer_status setup_engram_ops(di_v41_model *m, di_error *err) {
    const di_engram_hash *h = &m->eng.hash;
    const int ng = h->max_ngram, nc = h->n_cols, per = ng + 2 * nc;
    int64_t *k = malloc((size_t)h->n_layers * (size_t)per * sizeof *k);
    if (!k) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram: out of memory");
    for (int l = 0; l < h->n_layers; l++) {
        int64_t *r = k + (size_t)l * (size_t)per;
        for (int g = 0; g < ng; g++) r[g] = h->multipliers[l][g];
        for (int c = 0; c < nc; c++) r[ng + c] = h->primes[l][c], r[ng + nc + c] = h->offsets[l][c];
    }
    m->eng_dconsts = di_dev_dup(k, (size_t)h->n_layers * (size_t)per * sizeof *k);
    m->eng_dmap = di_dev_dup(m->eng.map.cls, (size_t)m->eng.map.n_ids * sizeof *m->eng.map.cls);
    free(k);
    if (!m->eng_dconsts || !m->eng_dmap)
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram: out of backend memory for the token map");
    m->eng_ops = 1;
    return DEEPINFER_OK;
}

/* Token map and hash constants; the map from <dir>/engram_token_map.json or the tokenizer. */
static deepinfer_status setup_engram(di_v41_model *m, const char *dir, const di_v4_options *opt, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    if (!c->n_engram_layer_ids) return DEEPINFER_OK;
    char path[4096];
    di_tokenizer *tok = NULL;
    deepinfer_status st = DEEPINFER_OK;
    if (di_path_join(path, sizeof path, dir, "engram_token_map.json") || !di_is_file(path)) {
        if (di_path_join(path, sizeof path, dir, "tokenizer.json") || !di_is_file(path))
            return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                                "%s: Engram needs engram_token_map.json or tokenizer.json in the model directory", dir);
        if ((st = di_tokenizer_load(path, &tok, err))) return st;
    }
    st = di_engram_setup(dir, c, tok, opt ? opt->engram_hash : NULL, &m->eng, err);
    di_tokenizer_free(tok);
    if (st) return st;
    if (m->w.n_engram) st = di_engram_workspace_init(&m->eng_ws, &m->w.engram[0], m->core.max_rows, err);
    if (!st && m->w.n_engram && !m->w.engram[0].host_tables) st = setup_engram_ops(m, err);
    return st;
}

static void set_options(di_v41_model *m, const di_v4_options *opt) {
    const di_model_config *c = &m->core.cfg;
    m->released_index_k = opt && opt->released_index_k;
    m->moe = (di_moe_opts){.topk = (int)c->num_experts_per_tok,
                           .route_scale = (float)c->routed_scaling_factor,
                           .gate_temp = (float)c->gate_temp,
                           .normalize = c->norm_topk_prob && c->num_experts_per_tok > 1,
                           .norm_eps = 1e-20f, /* the reference's normaliser epsilon (not rms_norm_eps) */
                           .routed_limit = (float)c->swiglu_limit,
                           .shared_limit = (float)c->swiglu_limit}; /* V4.1 clamps the shared expert too (§5.6) */
    m->stage_moe = m->moe;
    m->stage_moe.topk = (int)c->stage_num_experts_per_tok;
    m->stage_moe.normalize = c->norm_topk_prob && c->stage_num_experts_per_tok > 1;
    for (int l = 0; l < DI_CFG_MAX_LAYERS; l++) m->target_slot[l] = -1;
    if (c->drafter == DI_DRAFTER_DSPARK)
        for (int i = 0; i < c->n_dspark_target_layer_ids; i++) m->target_slot[c->dspark_target_layer_ids[i]] = i;
}

deepinfer_status di_v41_load(const char *dir, const di_v4_options *opt, di_v41_model **out, di_error *err) {
    *out = NULL;
    di_v41_model *m = calloc(1, sizeof *m);
    if (!m) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    di_model_config *c = &m->core.cfg;
    deepinfer_status st = di_config_load(dir, c, err);
    if (!st) st = check_v41(c, err);
    if (!st) st = di_seq_set_max_draft(c, opt ? opt->max_draft : 0, err); /* sizes the compressor state */
    if (!st) st = di_ep_model_create(c, opt ? opt->ep_rank : 0, opt ? opt->ep_size : 0, opt ? opt->comm : NULL, &m->ep, err);
    if (st) {
        free(m);
        return st;
    }
    di_weight_spec *spec = NULL;
    const di_safetensors *stf = opt ? opt->weights : NULL; /* borrowed (batch.h), else the directory's, owned */
    if (!stf) {
        if ((st = di_st_open(dir, &m->st, err))) goto fail;
        stf = m->st;
    }
    if ((st = di_spec_build(c, &spec, err))) goto fail;
    if ((st = di_spec_check(spec, stf, NULL, err))) goto fail;
    /* the plan before any large allocation: refused here when it does not fit (load_plan.h) */
    if ((st = di_load_plan_for_load(c, spec, opt, err)) || (opt && opt->plan_only)) goto fail;
    if ((st = di_v41_weights_bind_opts(&m->w, c, spec, m->ep, opt ? opt->engram_host : 0, err))) goto fail;
    if (m->ep) di_ep_keep_spec(m->ep, spec); /* replicas bind from it (di_eplb_apply) */
    else di_spec_free(spec);
    spec = NULL;
    m->lanes_max = m->ep ? 1 : 0; /* every rank runs the same MoE calls in the same order: no lanes */
    if ((st = di_core_init(&m->core, opt, err))) goto fail;
    int64_t ep_k = c->num_experts_per_tok > c->stage_num_experts_per_tok ? c->num_experts_per_tok
                                                                          : c->stage_num_experts_per_tok;
    if ((st = di_ep_reserve(m->ep, m->core.max_rows * (int)ep_k, err))) goto fail; /* steps allocate nothing */
    if ((st = setup_engram(m, dir, opt, err))) goto fail;
    set_options(m, opt);
    if ((st = di_v41_dspark_init(m, err))) goto fail;
    m->step_weight_bytes = di_v41_decode_weight_bytes(m);
    *out = m;
    return DEEPINFER_OK;
fail:
    di_spec_free(spec);
    di_v41_free(m);
    return st;
}

void di_v41_free(di_v41_model *m) {
    if (!m) return;
    di_ep_model_free(m->ep);
    di_v41_dspark_free(m);
    di_v41_lanes_free(m);
    di_engram_workspace_free(&m->eng_ws);
    di_dev_free(m->eng_dmap);
    di_dev_free(m->eng_dconsts);
    di_engram_tables_free(&m->eng);
    di_v41_weights_free(&m->w);
    di_core_free(&m->core);
    di_st_close(m->st);
    free(m);
}

const di_model_config *di_v41_config(const di_v41_model *m) { return &m->core.cfg; }
int64_t di_v41_max_context(const di_v41_model *m) { return m->core.max_context; }
size_t di_v41_weight_bytes(const di_v41_model *m) { return m->w.bytes; }

size_t di_v41_workspace_bytes(const di_v41_model *m) {
    /* the core's buffers and the DSpark drafting scratch (the Engram scratch is small) */
    return di_core_bytes(&m->core) + di_v41_dspark_bytes(m);
}

size_t di_v41_decode_weight_bytes(const di_v41_model *m) {
    const di_model_config *c = &m->core.cfg;
    size_t b = m->w.head.bytes + (size_t)c->hidden_size * 2;
    for (int l = 0; l < c->n_layers; l++) {
        const di_block_w *bw = &m->w.layers[l];
        b += di_block_bytes(bw) + bw->hc_attn.fn.bytes + bw->hc_ffn.fn.bytes;
        for (int e = 0; e < bw->moe.n_experts; e++) /* only num_experts_per_tok routed experts are read */
            b -= bw->moe.w1[e].bytes + bw->moe.w2[e].bytes + bw->moe.w3[e].bytes;
        b += di_moe_expert_bytes(&bw->moe) * (size_t)c->num_experts_per_tok;
    }
    size_t row = (size_t)c->engram_head_dim + (size_t)c->engram_head_dim / 32; /* e4m3 row + e8m0 scales */
    for (int i = 0; i < m->w.n_engram; i++) b += m->w.engram_wkv[i].bytes + row * (size_t)c->engram_cols;
    return b;
}

deepinfer_status di_v41_seq_new(const di_v41_model *m, di_seq_state **out, di_error *err) {
    return di_seq_create(&m->core.cfg, m->core.max_context, out, err);
}

void di_v41_set_index_observer(di_v41_model *m, di_v4_index_observer fn, void *ctx) {
    m->core.index_obs = fn;
    m->core.index_obs_ctx = ctx;
}

/* V4.1 text-only checks on top of di_core_check_batch. */
deepinfer_status di_v41_check_tokens(const di_v41_model *m, const di_v4_batch *b, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    for (int i = 0; i < b->n; i++) {
        if (c->image_token_id >= 0 && b->tokens[i] == c->image_token_id)
            return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                                "batch row %d: token %d is the image token; this build runs DeepSeek-V4.1 text-only "
                                "(the vision tower is not loaded)",
                                i, b->tokens[i]);
        if (c->n_engram_layer_ids && b->tokens[i] >= m->eng.map.n_ids)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "batch row %d: token %d has no Engram class (the token map covers %d ids)", i,
                                b->tokens[i], m->eng.map.n_ids);
        if (c->n_engram_layer_ids && b->seq[i]->engram.len != b->seq[i]->n_tokens)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "batch row %d: the sequence's Engram history holds %lld positions, not %lld", i,
                                (long long)b->seq[i]->engram.len, (long long)b->seq[i]->n_tokens);
    }
    return DEEPINFER_OK;
}

/* What a compact-prefill batch (late_from) may ask: no full hidden states, §6.5's condition. */
static deepinfer_status check_compact(di_v41_model *m, const di_v4_batch *b, di_error *err) {
    if (b->hidden)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "compact prefill gives no full-prompt hidden states: batch.hidden must be NULL");
    return di_v41_compact_check(&m->core.cfg, m->core.cfg.sliding_window, 0, err);
}

/* Hash ids of the step's rows (advances each sequence's Engram history): on the ops from the
 * step's tokens in backend memory (f->dtok) and each sequence's class ring, or on the host
 * (tables in host memory on a device backend). Returns the ids' base (NULL without Engram). */
static const int64_t *engram_ids(di_v41_model *m, di_fwd *f, di_error *err, deepinfer_status *st_out) {
    const di_model_config *c = &m->core.cfg;
    *st_out = DEEPINFER_OK;
    if (!c->n_engram_layer_ids) return NULL;
    size_t per_tok = (size_t)c->n_engram_layer_ids * (size_t)c->engram_cols;
    if (m->eng_ops) {
        di_tabs *t = &f->ws->t;
        for (int s = 0; s < f->nseg; s++) {
            t->eng_ring[s] = f->segs[s].seq->eng_ring;
            f->segs[s].seq->engram.len = f->segs[s].pos0 + f->segs[s].nrows;
        }
        const di_engram_hash *h = &m->eng.hash;
        di_engram_hash_rows(f->x, f->M, f->dtok, m->eng_dmap, m->eng.map.n_ids, m->eng_dconsts, h->n_layers,
                            h->max_ngram, h->n_heads, h->pad_class, f->pos, t->row_seg, t->seg_pos0, t->seg_nrows,
                            t->eng_ring, f->segs[0].seq->eng_ring_len, f->ws->eng_dids);
        if (!di_exec_on_device(f->x)) /* the CPU: ids in host memory, the table pages can be hinted */
            for (int i = 0; i < m->w.n_engram; i++)
                di_engram_prefetch(&m->w.engram[i], f->ws->eng_dids + (size_t)i * c->engram_cols, (int64_t)per_tok,
                                   f->M);
        return f->ws->eng_dids;
    }
    for (int s = 0; s < f->nseg; s++) {
        const di_seg *sg = &f->segs[s];
        deepinfer_status st = di_engram_step_ids(&m->eng, &sg->seq->engram, sg->pos0, f->tokens + sg->row0, NULL,
                                                 sg->nrows, f->ws->t.eng_ids + (size_t)sg->row0 * per_tok, err);
        if (st) {
            *st_out = st;
            return NULL;
        }
    }
    for (int i = 0; i < m->w.n_engram; i++)
        di_engram_prefetch(&m->w.engram[i], f->ws->t.eng_ids + (size_t)i * c->engram_cols, (int64_t)per_tok, f->M);
    return f->ws->t.eng_ids;
}

/* The DSpark input of the step's rows for target slot t: the residual
 * entering the layer, averaged over the copies (bf16 mean, fp32 sum). */
static void capture_target(const di_core *core, const di_fwd *f, const di_v4_batch *b, int r0, int t) {
    const di_model_config *c = &core->cfg;
    int d = (int)c->hidden_size, hc = (int)c->hc_mult;
    size_t ld = (size_t)c->n_dspark_target_layer_ids * d;
    di_hc_mean(f->x, f->M, core->R, hc, d, b->target_hidden + (size_t)r0 * ld + (size_t)t * d, ld);
}

/* The same for a compacted pass of k rows: each late row into its own
 * batch row, zeros for the rows that skipped the late layers. */
static void capture_target_compact(const di_core *core, const di_fwd *f, const di_v4_batch *b, int r0, int k, int t) {
    const di_model_config *c = &core->cfg;
    int d = (int)c->hidden_size, hc = (int)c->hc_mult;
    size_t ld = (size_t)c->n_dspark_target_layer_ids * d, hcd = (size_t)hc * d;
    for (int i = 0, j = 0; i < k; i++) {
        uint16_t *dst = b->target_hidden + (size_t)(r0 + i) * ld + (size_t)t * d;
        if (j < f->M && core->keep[j] == i) di_hc_mean(f->x, 1, core->R + (size_t)j * hcd, hc, d, dst, ld), j++;
        else di_fill_f32(f->x, (float *)dst, (size_t)d / 2, 0.0f); /* bf16 zeros (d, ld even) */
    }
}

/* Rows [r0, r0 + n) of a checked batch through the backbone on one core
 * (the model's, or a lane's) and its Engram workspace, in passes of the
 * core's max_rows. */
static deepinfer_status forward_rows(di_v41_model *m, di_core *core, di_engram_workspace *ews, const di_v4_batch *b,
                                     int r0, int n, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    size_t hcd = (size_t)(c->hc_mult * c->hidden_size);
    int ncol = c->n_engram_layer_ids * c->engram_cols;
    deepinfer_status st;
    for (int end = r0 + n; r0 < end; r0 += core->max_rows) {
        int k = end - r0 < core->max_rows ? end - r0 : core->max_rows;
        di_fwd f;
        di_core_fwd_init(core, b, r0, k, &m->moe, &f);
        f.released_index_k = m->released_index_k;
        const int64_t *ids = engram_ids(m, &f, err, &st);
        if (st) return st;
        di_core_embed(core, &f, m->w.embed);
        di_block_chain_start(&f);
        /* compact prefill (dsv41_compact.h): the step shrinks to its late rows before layer `late` */
        /* (a pass it would not change runs exact: decode steps, recorded ones included) */
        int late = b->late_from && !di_v41_compact_identity(&f, b, r0) ? di_v41_late_layer(c) : c->n_layers;
        int compacted = 0;
        for (int l = 0; l < c->n_layers; l++) {
            const di_layer_cfg *L = &c->layers[l];
            if (l == late) {
                if ((st = di_v41_compact_rows(core, &f, b, r0, err))) return st;
                compacted = 1;
                if (!f.M) break; /* every row is before its tail */
            }
            if (L->engram >= 0 && (st = m->eng_ops ? di_engram_forward_ops(f.x, &m->w.engram[L->engram], ews, core->R, k,
                                                                           ids + (size_t)L->engram * c->engram_cols,
                                                                           ncol, NULL)
                                                   : di_engram_forward(f.x, &m->w.engram[L->engram], ews, core->R, k,
                                                                       ids + (size_t)L->engram * c->engram_cols, ncol,
                                                                       NULL, NULL, err)))
                return st;
            if (b->target_hidden && m->target_slot[l] >= 0) {
                if (compacted) capture_target_compact(core, &f, b, r0, k, m->target_slot[l]);
                else capture_target(core, &f, b, r0, m->target_slot[l]);
            }
            /* the next layer's pre joins this block's last post unless R is read or
             * changed in between (Engram, the DSpark target capture, the compaction) */
            int fuse = l + 1 < c->n_layers && c->layers[l + 1].engram < 0 &&
                       !(b->target_hidden && m->target_slot[l + 1] >= 0) && l + 1 != late;
            f.hc_defer_post = l + 1 == c->n_layers; /* the last post joins the head below */
            di_block(&f, &m->w.layers[l], L, l, core->R, 1, di_attn_block, &m->moe, fuse ? &m->w.layers[l + 1] : NULL);
        }
        if (compacted) {
            if (b->target_hidden && !f.M) /* no late rows: the late target slots are zeros */
                for (int l = late; l < c->n_layers; l++)
                    if (m->target_slot[l] >= 0) capture_target_compact(core, &f, b, r0, k, m->target_slot[l]);
            if (di_core_has_logits(b, r0, k)) {
                if (!f.M) return di_v41_compact_logits(core, &f, b, r0, k, &m->w.head, err); /* names the row */
                di_mhc_head_final(&f, NULL, m->w.norm, core->R);
                if ((st = di_v41_compact_logits(core, &f, b, r0, k, &m->w.head, err))) return st;
            }
            for (int i = r0; i < r0 + k; i++) b->seq[i]->n_tokens = b->pos[i] + 1; /* segments may have gone */
            continue;
        }
        int logits = di_core_has_logits(b, r0, k);
        if (b->hidden || !logits) di_mhc_post_pending(&f, core->R); /* R is read, or there is no head */
        if (b->hidden) di_copy_2d(f.x, 1, core->R, 0, b->hidden + (size_t)r0 * hcd, 0, (size_t)k * hcd * 2);
        if (logits) { /* pending post, collapse with the carried pre, final norm */
            di_mhc_head_final(&f, NULL, m->w.norm, core->R);
            di_core_logits(core, &f, b, r0, NULL, &m->w.head);
        }
        for (int s = 0; s < f.nseg; s++) f.segs[s].seq->n_tokens = f.segs[s].pos0 + f.segs[s].nrows;
    }
    return DEEPINFER_OK;
}

deepinfer_status di_v41_forward(di_v41_model *m, const di_v4_batch *b, di_error *err) {
    deepinfer_status st = di_core_check_batch(&m->core, b, 0, err);
    if (!st) st = di_v41_check_tokens(m, b, err);
    if (!st && b->late_from) st = check_compact(m, b, err);
    if (st) return st;
    int start[DI_LANES_MAX + 1];
    int nl = di_v41_lanes_plan(m, b, start);
    if (nl > 1) return di_v41_lanes_forward(m, b, nl, start, err);
    if ((st = forward_rows(m, &m->core, &m->eng_ws, b, 0, b->n, err))) return st;
    st = di_exec_sync(&m->core.x, err); /* device backends: the step's first failed op */
    return st ? st : di_ep_take_status(m->ep, err);
}

deepinfer_status di_v41_forward_rows(di_v41_model *m, di_core *core, di_engram_workspace *ews, const di_v4_batch *b,
                                     int r0, int n, di_error *err) {
    return forward_rows(m, core, ews, b, r0, n, err);
}
