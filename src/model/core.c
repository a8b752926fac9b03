/* core.c — step plumbing shared by the V4 and V4.1 models (core.h). */
#include "model/core.h"

#include <stdlib.h>
#include <string.h>

#include "ops/cpu/threadpool.h"

#define DEFAULT_MAX_ROWS 256
#define DEFAULT_MAX_CONTEXT 65536

deepinfer_status di_core_check_config(const di_model_config *c, di_error *err) {
    if (c->hc_mult != 4)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "hc_mult %lld: only 4 residual copies are supported",
                            (long long)c->hc_mult);
    if (c->head_dim % 32 || c->index_head_dim != 128 || c->qk_rope_head_dim > 256 || c->qk_rope_head_dim % 2 ||
        c->head_dim > 1024 || c->qk_rope_head_dim > c->head_dim)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "head_dim %lld / index_head_dim %lld / rope dims %lld: need head_dim %% 32 == 0 (<= 1024), "
                            "index_head_dim 128, even rope dims <= 256",
                            (long long)c->head_dim, (long long)c->index_head_dim, (long long)c->qk_rope_head_dim);
    if (c->n_routed_experts > 1024 || c->num_experts_per_tok < 1 || c->stage_n_routed_experts > 1024)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "%lld routed experts (at most 1024)",
                            (long long)c->n_routed_experts);
    if (c->o_groups < 1 || (c->num_attention_heads * c->head_dim) % c->o_groups)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "o_groups %lld does not divide the heads",
                            (long long)c->o_groups);
    if (c->hidden_size % c->act_block || c->q_lora_rank % c->act_block || (c->o_groups * c->o_lora_rank) % c->act_block)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "hidden_size %lld, q_lora_rank %lld and o_groups x o_lora_rank must be multiples of the "
                            "activation block %d",
                            (long long)c->hidden_size, (long long)c->q_lora_rank, c->act_block);
    for (int l = 0; l < c->n_layers + c->n_stages; l++) {
        int r = c->layers[l].ratio;
        if (r < 0 || r > 128 || (c->layers[l].compressor_overlap && r > 8))
            return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "layer %d: compress ratio %d is not supported", l, r);
    }
    return DEEPINFER_OK;
}

/* The largest K any quantised GEMM of the model sees (sizes the activation scratch). */
static size_t max_k(const di_model_config *c) {
    int64_t k = c->hidden_size * c->hc_mult;
    int64_t cand[] = {c->q_lora_rank,
                      c->o_groups * c->o_lora_rank,
                      c->moe_intermediate_size * (c->n_shared_experts + 1),
                      c->num_attention_heads * c->head_dim,
                      (int64_t)c->engram_cols * c->engram_head_dim,
                      (int64_t)c->n_dspark_target_layer_ids * c->hidden_size};
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (cand[i] > k) k = cand[i];
    return (size_t)k;
}

/* Exec, workspace and step buffers for c->max_rows rows; `scratch_rows`
 * rows of per-row index scratch (0: one per pool thread). */
static deepinfer_status init_buffers(di_core *c, int scratch_rows, di_error *err) {
    const di_model_config *cfg = &c->cfg;
    deepinfer_status st;
    size_t scratch = di_gemm_scratch_per_row((int)max_k(cfg)) * (size_t)(c->max_rows * cfg->hc_mult);
    if ((st = di_exec_init(&c->x, scratch, err))) return st;
    if (!scratch_rows) scratch_rows = di_threadpool_size(c->x.tp);
    if ((st = di_ws_alloc(&c->ws, cfg, c->max_rows, c->max_context, scratch_rows, err))) return st;
    size_t hcd = (size_t)(cfg->hc_mult * cfg->hidden_size);
    c->R = di_dev_alloc((size_t)c->max_rows * hcd * 2);
    c->segs = malloc((size_t)c->max_rows * sizeof *c->segs);
    c->dlogits = NULL;
    if (di_exec_on_device(&c->x)) { /* logits are written to the caller's host buffer from here */
        c->dlogits = di_dev_alloc((size_t)c->max_rows * (size_t)cfg->vocab_size * sizeof(float));
        if (!c->dlogits) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of device memory for logits");
    }
    if (!c->R || !c->segs) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for step buffers");
    return DEEPINFER_OK;
}

void di_core_limits(const di_v4_options *opt, int *max_rows, int64_t *max_context) {
    *max_rows = opt && opt->max_rows > 0 ? opt->max_rows : DEFAULT_MAX_ROWS;
    *max_context = opt && opt->max_context > 0 ? opt->max_context : DEFAULT_MAX_CONTEXT;
}

void di_core_sizes(const di_model_config *cfg, int max_rows, int64_t max_context, int nthreads, int on_device,
                   di_core_size *s) {
    size_t hcd = (size_t)(cfg->hc_mult * cfg->hidden_size);
    memset(s, 0, sizeof *s);
    s->exec_scratch = di_gemm_scratch_per_row((int)max_k(cfg)) * (size_t)(max_rows * cfg->hc_mult);
    s->exec_scratch = (s->exec_scratch + 63) & ~(size_t)63; /* di_exec_init's rounding */
    di_ws_sizes(cfg, max_rows, max_context, nthreads, &s->ws_dev, &s->ws_host);
    s->step_dev = (size_t)max_rows * hcd * 2; /* R */
    if (on_device) s->step_dev += (size_t)max_rows * (size_t)cfg->vocab_size * sizeof(float); /* dlogits */
    s->step_host = (size_t)max_rows * sizeof(di_seg);
}

deepinfer_status di_core_init(di_core *c, const di_v4_options *opt, di_error *err) {
    const di_model_config *cfg = &c->cfg;
    di_core_limits(opt, &c->max_rows, &c->max_context);
    deepinfer_status st = init_buffers(c, 0, err);
    if (st) return st;
    int rd = (int)cfg->qk_rope_head_dim;
    di_rope_inv_freq(rd, cfg->rope_theta, 0, 1.0, 0, 0, c->inv_main);
    di_rope_inv_freq(rd, cfg->compress_rope_theta, (int)cfg->rope_scaling.original_max_position_embeddings,
                     cfg->rope_scaling.factor, cfg->rope_scaling.beta_fast, cfg->rope_scaling.beta_slow, c->inv_cmp);
    return DEEPINFER_OK;
}

deepinfer_status di_core_init_lane(di_core *c, const di_core *main, int max_rows, di_error *err) {
    memset(c, 0, sizeof *c);
    c->cfg = main->cfg;
    c->max_rows = max_rows;
    c->max_context = main->max_context;
    memcpy(c->inv_main, main->inv_main, sizeof c->inv_main);
    memcpy(c->inv_cmp, main->inv_cmp, sizeof c->inv_cmp);
    /* a lane's ops run on one thread: a few rows of index scratch per pass suffice */
    return init_buffers(c, 4, err);
}

size_t di_core_bytes(const di_core *c) {
    size_t hcd = (size_t)(c->cfg.hc_mult * c->cfg.hidden_size);
    return c->ws.bytes + (size_t)c->max_rows * (hcd * 2 + sizeof *c->segs);
}

void di_core_free(di_core *c) {
    di_ws_free(&c->ws);
    di_exec_free(&c->x);
    di_dev_free(c->R);
    di_dev_free(c->dlogits);
    c->dlogits = NULL;
    free(c->segs);
    free(c->keep);
    free(c->ktok);
    free(c->kpos);
    free(c->klo);
    c->keep = NULL;
    c->ktok = NULL;
    c->kpos = c->klo = NULL;
    c->R = NULL;
    c->segs = NULL;
}

deepinfer_status di_core_check_batch(const di_core *m, const di_v4_batch *b, int stage, di_error *err) {
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
        int64_t start = stage ? s->mtp_tokens : s->n_tokens;
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
        for (int l = 0; l < c->n_layers && !stage; l++) {
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
    if (b->n_logits && !b->logits && !(b->logits_on_device && m->dlogits)) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "batch: no logits buffer");
    return DEEPINFER_OK;
}

void di_core_fwd_init(di_core *m, const di_v4_batch *b, int r0, int n, const di_moe_opts *moe, di_fwd *f) {
    memset(f, 0, sizeof *f);
    f->x = &m->x;
    f->cfg = &m->cfg;
    f->ws = &m->ws;
    f->M = n;
    f->tokens = b->tokens + r0;
    f->pos = b->pos + r0;
    f->segs = m->segs;
    di_tabs *t = &m->ws.t;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && b->seq[r0 + j] == b->seq[r0 + i]) j++;
        t->seg_row0[f->nseg] = i;
        t->seg_nrows[f->nseg] = j - i;
        t->seg_pos0[f->nseg] = b->pos[r0 + i];
        for (int k = i; k < j; k++) t->row_seg[k] = f->nseg;
        f->segs[f->nseg++] = (di_seg){.seq = b->seq[r0 + i], .row0 = i, .nrows = j - i, .pos0 = b->pos[r0 + i]};
        i = j;
    }
    f->inv_freq_main = m->inv_main;
    f->inv_freq_cmp = m->inv_cmp;
    f->moe = moe;
    int rd = (int)m->cfg.qk_rope_head_dim;
    f->dtok = f->tokens;
    if (di_exec_on_device(f->x)) { /* tables built on the host, then copied (same bits) */
        if (!b->tokens_on_device) di_copy_h2d(f->x, m->ws.tok, f->tokens, (size_t)n * sizeof *f->tokens);
        f->dtok = m->ws.tok;
        size_t h = (size_t)n * (size_t)(rd / 2);
        float *t = m->ws.t.rope;
        di_rope_table(n, f->pos, m->inv_main, rd, t, t + h);
        di_rope_table(n, f->pos, m->inv_cmp, rd, t + 2 * h, t + 3 * h);
        di_copy_h2d(f->x, m->ws.rope_cs[0], t, h * sizeof *t);
        di_copy_h2d(f->x, m->ws.rope_sn[0], t + h, h * sizeof *t);
        di_copy_h2d(f->x, m->ws.rope_cs[1], t + 2 * h, h * sizeof *t);
        di_copy_h2d(f->x, m->ws.rope_sn[1], t + 3 * h, h * sizeof *t);
    } else {
        di_rope_table(n, f->pos, m->inv_main, rd, m->ws.rope_cs[0], m->ws.rope_sn[0]);
        di_rope_table(n, f->pos, m->inv_cmp, rd, m->ws.rope_cs[1], m->ws.rope_sn[1]);
    }
    f->index_obs = m->index_obs;
    f->index_obs_ctx = m->index_obs_ctx;
}

void di_core_embed(di_core *m, di_fwd *f, const uint16_t *embed) {
    int d = (int)m->cfg.hidden_size, hc = (int)m->cfg.hc_mult;
    di_embed_rep(f->x, f->M, f->dtok, embed, d, hc, m->R, (size_t)hc * d);
}

/* The logit rows of [r0, r0 + n): indices [*i0, *i1) of b->logit_rows. */
static void logit_range(const di_v4_batch *b, int r0, int n, int *i0, int *i1) {
    int a = 0;
    while (a < b->n_logits && b->logit_rows[a] < r0) a++;
    int z = a;
    while (z < b->n_logits && b->logit_rows[z] < r0 + n) z++;
    *i0 = a;
    *i1 = z;
}

int di_core_has_logits(const di_v4_batch *b, int r0, int n) {
    int i0, i1;
    logit_range(b, r0, n, &i0, &i1);
    return i1 > i0;
}

void di_core_logits(di_core *m, di_fwd *f, const di_v4_batch *b, int r0, const float *norm, const di_wmat *head) {
    const di_model_config *c = &m->cfg;
    di_ws *ws = f->ws;
    int d = (int)c->hidden_size, V = (int)c->vocab_size;
    int i0, i1;
    logit_range(b, r0, f->M, &i0, &i1);
    if (i0 == i1) return;
    if (norm) di_rmsnorm(f->x, f->M, ws->x, (size_t)d, norm, d, (float)c->rms_norm_eps, ws->xn, (size_t)d);
    for (int i = i0; i < i1;) { /* runs of consecutive rows: one GEMM each */
        int j = i + 1;
        while (j < i1 && b->logit_rows[j] == b->logit_rows[j - 1] + 1) j++;
        int row = b->logit_rows[i] - r0;
        int keep = m->dlogits && b->logits_on_device; /* device decode loops read them there */
        float *out = keep ? m->dlogits + (size_t)i * V : m->dlogits ? m->dlogits : b->logits + (size_t)i * V;
        di_gemm(f->x, j - i, ws->xn + (size_t)row * d, (size_t)d, head, 0, out, NULL, (size_t)V);
        if (m->dlogits && !keep) di_copy_d2h(f->x, b->logits + (size_t)i * V, out, sizeof(float) * (size_t)(j - i) * V);
        i = j;
    }
}
