/* dsv4.c — DeepSeek-V4-Flash: load, step checking and the backbone wiring
 * (architecture.md §4.1–4.9). The blocks live in mhc.c, attention.c,
 * compressor.c, indexer.c and moe.c. */
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "io/safetensors.h"
#include "model/attention.h"
#include "model/dsv4_internal.h"
#include "model/mhc.h"
#include "model/tensor_spec.h"

#define DEFAULT_MAX_ROWS 256
#define DEFAULT_MAX_CONTEXT 65536

static deepinfer_status check_supported(const di_model_config *c, di_error *err) {
    if (c->arch != DI_ARCH_V4)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "model type %s: this loader runs deepseek_v4 checkpoints",
                            di_arch_name(c->arch));
    if (c->hc_mult != 4)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "hc_mult %lld: only 4 residual copies are supported",
                            (long long)c->hc_mult);
    if (c->head_dim % 32 || c->index_head_dim != 128 || c->qk_rope_head_dim > 256 || c->qk_rope_head_dim % 2 ||
        c->head_dim > 1024 || c->qk_rope_head_dim > c->head_dim)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "head_dim %lld / index_head_dim %lld / rope dims %lld: need head_dim %% 32 == 0 (<= 1024), "
                            "index_head_dim 128, even rope dims <= 256",
                            (long long)c->head_dim, (long long)c->index_head_dim, (long long)c->qk_rope_head_dim);
    if (c->n_routed_experts > 1024 || c->num_experts_per_tok < 1)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "%lld routed experts (at most 1024)",
                            (long long)c->n_routed_experts);
    if (c->o_groups < 1 || (c->num_attention_heads * c->head_dim) % c->o_groups)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "o_groups %lld does not divide the heads",
                            (long long)c->o_groups);
    for (int l = 0; l < c->n_layers + c->n_stages; l++) {
        int r = c->layers[l].ratio;
        if (r < 0 || r > 128 || (c->layers[l].compressor_overlap && r > 8))
            return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "layer %d: compress ratio %d is not supported", l, r);
    }
    return DEEPINFER_OK;
}

static size_t max_k(const di_model_config *c) {
    int64_t k = c->hidden_size * c->hc_mult;
    int64_t cand[] = {c->q_lora_rank, c->o_groups * c->o_lora_rank, c->moe_intermediate_size * (c->n_shared_experts + 1),
                      c->num_attention_heads * c->head_dim};
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (cand[i] > k) k = cand[i];
    return (size_t)k;
}

deepinfer_status di_v4_load(const char *dir, const di_v4_options *opt, di_v4_model **out, di_error *err) {
    *out = NULL;
    di_v4_model *m = calloc(1, sizeof *m);
    if (!m) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    deepinfer_status st = di_config_load(dir, &m->cfg, err);
    if (!st) st = check_supported(&m->cfg, err);
    if (st) {
        free(m);
        return st;
    }
    const di_model_config *c = &m->cfg;
    m->max_rows = opt && opt->max_rows > 0 ? opt->max_rows : DEFAULT_MAX_ROWS;
    m->max_context = opt && opt->max_context > 0 ? opt->max_context : DEFAULT_MAX_CONTEXT;

    di_safetensors *stf = NULL;
    di_weight_spec *spec = NULL;
    if ((st = di_st_open(dir, &stf, err))) goto fail;
    if ((st = di_spec_build(c, &spec, err))) goto fail;
    if ((st = di_spec_check(spec, stf, NULL, err))) goto fail;
    if ((st = di_v4_weights_bind(&m->w, c, spec, err))) goto fail;
    di_spec_free(spec);
    spec = NULL;
    di_st_close(stf);
    stf = NULL;

    size_t scratch = di_gemm_scratch_per_row((int)max_k(c)) * (size_t)(m->max_rows * c->hc_mult);
    if ((st = di_exec_init(&m->x, scratch, err))) goto fail;
    if ((st = di_ws_alloc(&m->ws, c, m->max_rows, m->max_context, di_threadpool_size(m->x.tp), err))) goto fail;
    size_t hcd = (size_t)(c->hc_mult * c->hidden_size);
    m->R = malloc((size_t)m->max_rows * hcd * 2);
    m->hbuf = malloc((size_t)m->max_rows * hcd * 2);
    m->segs = malloc((size_t)m->max_rows * sizeof *m->segs);
    if (!m->R || !m->hbuf || !m->segs) {
        st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for step buffers");
        goto fail;
    }
    int rd = (int)c->qk_rope_head_dim;
    di_rope_inv_freq(rd, c->rope_theta, 0, 1.0, 0, 0, m->inv_main);
    di_rope_inv_freq(rd, c->compress_rope_theta, (int)c->rope_scaling.original_max_position_embeddings,
                     c->rope_scaling.factor, c->rope_scaling.beta_fast, c->rope_scaling.beta_slow, m->inv_cmp);
    m->moe = (di_moe_opts){.topk = (int)c->num_experts_per_tok,
                           .route_scale = (float)c->routed_scaling_factor,
                           .norm_eps = 0.0f,
                           .routed_limit = (float)c->swiglu_limit,
                           .shared_limit = 0.0f}; /* V4: the shared expert is not clamped (§4.7) */
    *out = m;
    return DEEPINFER_OK;
fail:
    di_spec_free(spec);
    di_st_close(stf);
    di_v4_free(m);
    return st;
}

void di_v4_free(di_v4_model *m) {
    if (!m) return;
    di_v4_weights_free(&m->w);
    di_ws_free(&m->ws);
    di_exec_free(&m->x);
    free(m->R);
    free(m->hbuf);
    free(m->segs);
    free(m);
}

const di_model_config *di_v4_config(const di_v4_model *m) { return &m->cfg; }
int64_t di_v4_max_context(const di_v4_model *m) { return m->max_context; }
size_t di_v4_weight_bytes(const di_v4_model *m) { return m->w.bytes; }

size_t di_v4_workspace_bytes(const di_v4_model *m) {
    size_t hcd = (size_t)(m->cfg.hc_mult * m->cfg.hidden_size);
    return m->ws.bytes + (size_t)m->max_rows * (hcd * 4 + sizeof *m->segs);
}

size_t di_v4_decode_weight_bytes(const di_v4_model *m) {
    const di_model_config *c = &m->cfg;
    size_t b = m->w.head.bytes + (size_t)c->hidden_size * 2;
    for (int l = 0; l < c->n_layers; l++) {
        const di_block_w *bw = &m->w.layers[l];
        const di_attn_w *a = &bw->attn;
        b += a->wq_a.bytes + a->wq_b.bytes + a->wkv.bytes + a->wo_b.bytes;
        for (int g = 0; g < a->groups; g++) b += a->wo_a[g].bytes;
        b += a->cmp.wkv.bytes + a->cmp.wgate.bytes + a->idx.wq_b.bytes + a->idx.wproj.bytes + a->idx.cmp.wkv.bytes +
             a->idx.cmp.wgate.bytes;
        b += bw->hc_attn.fn.bytes + bw->hc_ffn.fn.bytes + bw->moe.gate.bytes;
        b += bw->moe.sw1.bytes + bw->moe.sw2.bytes + bw->moe.sw3.bytes;
        b += (bw->moe.w1[0].bytes + bw->moe.w2[0].bytes + bw->moe.w3[0].bytes) * (size_t)c->num_experts_per_tok;
    }
    return b;
}

deepinfer_status di_v4_seq_new(const di_v4_model *m, di_seq_state **out, di_error *err) {
    return di_seq_create(&m->cfg, m->max_context, out, err);
}

/* ---- step checking and segments ----------------------------------------- */

deepinfer_status di_v4_check_batch(const di_v4_model *m, const di_v4_batch *b, int mtp, di_error *err) {
    const di_model_config *c = &m->cfg;
    if (b->n < 0 || (b->n && (!b->tokens || !b->pos || !b->seq)))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "batch: missing tokens, positions or sequences");
    for (int i = 0; i < b->n; i++) {
        if (!b->seq[i]) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "batch row %d: no sequence", i);
        if (b->tokens[i] < 0 || b->tokens[i] >= c->vocab_size)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "batch row %d: token %d is outside the vocabulary [0,%lld)",
                                i, b->tokens[i], (long long)c->vocab_size);
    }
    for (int i = 0; i < b->n;) {
        di_seq_state *s = b->seq[i];
        int j = i;
        while (j < b->n && b->seq[j] == s) j++;
        for (int k = j; k < b->n; k++)
            if (b->seq[k] == s)
                return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                    "batch rows %d and %d: a sequence's rows must be contiguous", i, k);
        int64_t start = mtp ? s->mtp_tokens : s->n_tokens;
        for (int k = i; k < j; k++)
            if (b->pos[k] != start + (k - i))
                return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                    "batch row %d: position %lld, but the sequence continues at %lld", k,
                                    (long long)b->pos[k], (long long)(start + (k - i)));
        int64_t end = start + (j - i);
        if (end > m->max_context)
            return di_error_set(err, DEEPINFER_ERR_LIMIT, "batch row %d: position %lld is beyond the model's max_context %lld",
                                j - 1, (long long)(end - 1), (long long)m->max_context);
        if (s->n_layers != c->n_layers + c->n_stages)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "batch row %d: the sequence state belongs to another model", i);
        for (int l = 0; l < c->n_layers && !mtp; l++) {
            const di_layer_state *ls = &s->layers[l];
            int64_t need = di_seq_rows_needed(c, l, end);
            if (need > di_rowstore_capacity(&ls->ckv) || (ls->ikey.row_elems && need > di_rowstore_capacity(&ls->ikey)))
                return di_error_set(err, DEEPINFER_ERR_LIMIT,
                                    "batch row %d: layer %d needs %lld compressed rows, the sequence state has pages for %lld",
                                    j - 1, l, (long long)need, (long long)di_rowstore_capacity(&ls->ckv));
        }
        i = j;
    }
    for (int i = 0; i < b->n_logits; i++) {
        if (b->logit_rows[i] < 0 || b->logit_rows[i] >= b->n || (i && b->logit_rows[i] <= b->logit_rows[i - 1]))
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "logit row %d (%d) is out of range or not increasing", i,
                                b->logit_rows[i]);
    }
    if (b->n_logits && !b->logits) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "batch: no logits buffer");
    return DEEPINFER_OK;
}

int di_v4_segments(di_v4_model *m, const di_v4_batch *b, int r0, int n, di_seg *segs) {
    (void)m;
    int ns = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && b->seq[r0 + j] == b->seq[r0 + i]) j++;
        segs[ns++] = (di_seg){.seq = b->seq[r0 + i], .row0 = i, .nrows = j - i, .pos0 = b->pos[r0 + i]};
        i = j;
    }
    return ns;
}

void di_v4_fwd_init(di_v4_model *m, const di_v4_batch *b, int r0, int n, di_fwd *f) {
    memset(f, 0, sizeof *f);
    f->x = &m->x;
    f->cfg = &m->cfg;
    f->ws = &m->ws;
    f->M = n;
    f->tokens = b->tokens + r0;
    f->pos = b->pos + r0;
    f->segs = m->segs;
    f->nseg = di_v4_segments(m, b, r0, n, m->segs);
    f->inv_freq_main = m->inv_main;
    f->inv_freq_cmp = m->inv_cmp;
    f->moe = &m->moe;
    int rd = (int)m->cfg.qk_rope_head_dim;
    di_rope_table(n, f->pos, m->inv_main, rd, m->ws.rope_cs[0], m->ws.rope_sn[0]);
    di_rope_table(n, f->pos, m->inv_cmp, rd, m->ws.rope_cs[1], m->ws.rope_sn[1]);
    f->index_obs = m->index_obs;
    f->index_obs_ctx = m->index_obs_ctx;
}

void di_v4_set_index_observer(di_v4_model *m, di_v4_index_observer fn, void *ctx) {
    m->index_obs = fn;
    m->index_obs_ctx = ctx;
}

/* ---- wiring --------------------------------------------------------------- */

void di_v4_block(di_fwd *f, const di_block_w *bw, const di_layer_cfg *L, int layer, uint16_t *R) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int d = (int)c->hidden_size;
    float eps = (float)c->rms_norm_eps;
    di_mhc_pre(f, &bw->hc_attn, R, ws->x);
    di_rmsnorm(f->x, f->M, ws->x, (size_t)d, bw->attn_norm, d, eps, ws->xn, (size_t)d);
    di_attn_block(f, &bw->attn, L, layer, ws->xn, ws->sub);
    di_mhc_post(f, ws->sub, R);
    di_mhc_pre(f, &bw->hc_ffn, R, ws->x);
    di_rmsnorm(f->x, f->M, ws->x, (size_t)d, bw->ffn_norm, d, eps, ws->xn, (size_t)d);
    di_moe_block(f, &bw->moe, f->moe, ws->xn, ws->sub);
    di_mhc_post(f, ws->sub, R);
}

void di_v4_outputs(di_v4_model *m, di_fwd *f, const di_v4_batch *b, int r0, const di_hc_w *hc_head, const float *norm) {
    const di_model_config *c = &m->cfg;
    di_ws *ws = f->ws;
    int d = (int)c->hidden_size, V = (int)c->vocab_size;
    size_t hcd = (size_t)(c->hc_mult * d);
    if (b->hidden) memcpy(b->hidden + (size_t)r0 * hcd, m->R, (size_t)f->M * hcd * 2);
    /* logit rows of this piece, in runs of consecutive rows */
    int i0 = 0;
    while (i0 < b->n_logits && b->logit_rows[i0] < r0) i0++;
    int i1 = i0;
    while (i1 < b->n_logits && b->logit_rows[i1] < r0 + f->M) i1++;
    if (i0 == i1) return;
    di_mhc_head(f, hc_head, m->R, ws->x);
    di_rmsnorm(f->x, f->M, ws->x, (size_t)d, norm, d, (float)c->rms_norm_eps, ws->xn, (size_t)d);
    for (int i = i0; i < i1;) {
        int j = i + 1;
        while (j < i1 && b->logit_rows[j] == b->logit_rows[j - 1] + 1) j++;
        int row = b->logit_rows[i] - r0;
        di_gemm(f->x, j - i, ws->xn + (size_t)row * d, (size_t)d, &m->w.head, 0, b->logits + (size_t)i * V, NULL,
                (size_t)V);
        i = j;
    }
}

deepinfer_status di_v4_forward(di_v4_model *m, const di_v4_batch *b, di_error *err) {
    deepinfer_status st = di_v4_check_batch(m, b, 0, err);
    if (st) return st;
    const di_model_config *c = &m->cfg;
    int d = (int)c->hidden_size, hc = (int)c->hc_mult;
    for (int r0 = 0; r0 < b->n; r0 += m->max_rows) {
        int n = b->n - r0 < m->max_rows ? b->n - r0 : m->max_rows;
        di_fwd f;
        di_v4_fwd_init(m, b, r0, n, &f);
        for (int i = 0; i < n; i++) { /* embedding, expanded to hc copies (§4.1) */
            const uint16_t *e = m->w.embed + (size_t)f.tokens[i] * d;
            for (int k = 0; k < hc; k++) memcpy(m->R + ((size_t)i * hc + k) * d, e, (size_t)d * 2);
        }
        for (int l = 0; l < c->n_layers; l++) di_v4_block(&f, &m->w.layers[l], &c->layers[l], l, m->R);
        di_v4_outputs(m, &f, b, r0, &m->w.hc_head, m->w.norm);
        for (int s = 0; s < f.nseg; s++) f.segs[s].seq->n_tokens = f.segs[s].pos0 + f.segs[s].nrows;
    }
    return DEEPINFER_OK;
}
