/*
 * dspark.c — the DSpark drafter of V4.1 (architecture.md §7.2; reference
 * DSparkAttention / DSparkBlock / forward_spec).
 *
 * Context: every stage keeps a window-slot ring (its layer's ring in the
 * sequence state) of kv_norm(wkv . main_x(q)), RoPE'd at the target
 * position q with the main RoPE and FP8-simulated, where
 * main_x = main_norm(main_proj . target_hidden) (stage 0's weights, shared
 * by all stages). Only the last `window` positions fed are kept.
 *
 * Drafting from position p: the block [anchor, noise x (B-1)] at positions
 * p+1..p+B runs through the stages as V4.1 blocks (single-pass mHC chained
 * across stages from a one-hot pre); each block query attends to the ring
 * slots 0..min(window, p+1)-1 (slot order, as the reference lists them)
 * and to all B block rows (bidirectional), with sink, inverse RoPE and the
 * grouped output projection. Then x = collapse(R, last pre), base logits =
 * head(norm(x)) (the last stage's norm, the shared head), and sequentially
 * for i < B: m_i = markov_embed[prev_i] (prev_0 = anchor, then the drafts),
 * logits_i += markov_head . m_i (fp32), draft_i = pick(logits_i),
 * confidence_i = proj . [x_i ; m_i] (fp32).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "model/attention.h"
#include "model/block.h"
#include "model/dsv41_internal.h"
#include "model/mhc.h"

#define DRAFT_GROUP 8 /* requests drafted per internal pass (bounds the logits scratch) */

deepinfer_status di_v41_dspark_init(di_v41_model *m, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    if (m->w.n_stages < 1) return DEEPINFER_OK;
    int B = (int)c->dspark_block_size, V = (int)c->vocab_size, d = (int)c->hidden_size;
    int R = (int)c->dspark_markov_rank;
    m->draft_max = m->core.max_rows / B < DRAFT_GROUP ? m->core.max_rows / B : DRAFT_GROUP;
    if (m->draft_max < 1)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "max_rows %d is smaller than the DSpark block (%d)",
                            m->core.max_rows, B);
    size_t rows = (size_t)m->draft_max * B;
    m->dtok = malloc(rows * sizeof *m->dtok);
    m->dprev = malloc((size_t)m->draft_max * sizeof *m->dprev);
    m->dpos = malloc(rows * sizeof *m->dpos);
    m->dseq = malloc(rows * sizeof *m->dseq);
    m->dlogits = di_dev_alloc(rows * (size_t)V * sizeof(float));
    m->dbias = di_dev_alloc((size_t)m->draft_max * (size_t)V * sizeof(float));
    m->dhid = di_dev_alloc(rows * (size_t)d * 2);
    m->dmark = di_dev_alloc((size_t)m->draft_max * (size_t)R * 2);
    m->dcin = di_dev_alloc((size_t)m->draft_max * (size_t)(d + R) * 2);
    if (!m->dtok || !m->dprev || !m->dpos || !m->dseq || !m->dlogits || !m->dbias || !m->dhid || !m->dmark || !m->dcin)
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the DSpark scratch");
    return DEEPINFER_OK;
}

void di_v41_dspark_free(di_v41_model *m) {
    free(m->dtok), free(m->dprev), free(m->dpos), free(m->dseq);
    di_dev_free(m->dlogits), di_dev_free(m->dbias), di_dev_free(m->dhid), di_dev_free(m->dmark), di_dev_free(m->dcin);
}

/* ---- context rings ------------------------------------------------------------------------- */

static deepinfer_status check_feed(const di_v41_model *m, const di_v4_batch *b, const uint16_t *hid, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    if (m->w.n_stages < 1) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "this checkpoint has no DSpark stages");
    if (b->n < 0 || (b->n && (!b->pos || !b->seq || !hid)))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "DSpark feed: missing positions, sequences or hiddens");
    for (int i = 0; i < b->n;) {
        di_seq_state *s = b->seq[i];
        if (!s || s->n_layers != c->n_layers + c->n_stages)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "DSpark feed row %d: no sequence of this model", i);
        int j = i;
        while (j < b->n && b->seq[j] == s) j++;
        for (int k = j; k < b->n; k++)
            if (b->seq[k] == s)
                return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                    "DSpark feed rows %d and %d: a sequence's rows must be contiguous", i, k);
        for (int k = i; k < j; k++)
            if (b->pos[k] != s->mtp_tokens + (k - i) || b->pos[k] >= m->core.max_context)
                return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                    "DSpark feed row %d: position %lld, but the rings continue at %lld", k,
                                    (long long)b->pos[k], (long long)(s->mtp_tokens + (k - i)));
        i = j;
    }
    return DEEPINFER_OK;
}

/* Context rows for n consecutive positions pos[0..n) of one sequence. */
static void feed_rows(di_v41_model *m, di_seq_state *s, const int64_t *pos, int n, const uint16_t *hid) {
    const di_model_config *c = &m->core.cfg;
    di_ws *ws = &m->core.ws;
    int d = (int)c->hidden_size, hd = (int)c->head_dim, win = (int)c->sliding_window, rd = (int)c->qk_rope_head_dim;
    size_t ld = (size_t)c->n_dspark_target_layer_ids * d;
    di_fwd f = {.x = &m->core.x, .cfg = c, .ws = ws, .M = n};
    const di_v41_stage_w *s0 = &m->w.stages[0];
    di_gemm(f.x, n, hid, ld, &s0->main_proj, c->act_block, NULL, ws->mainx, (size_t)d);
    di_rmsnorm(f.x, n, ws->mainx, (size_t)d, s0->main_norm, d, (float)c->rms_norm_eps, ws->mainx, (size_t)d);
    di_rope_table(n, pos, m->core.inv_main, rd, ws->rope_cs[0], ws->rope_sn[0]);
    for (int st = 0; st < m->w.n_stages; st++) {
        di_attn_kv(&f, &m->w.stages[st].blk.attn, ws->rope_cs[0], ws->rope_sn[0], n, ws->mainx, ws->kv, -1);
        uint16_t *ring = s->layers[c->n_layers + st].ring;
        for (int i = 0; i < n; i++) ws->t.dst[i] = ring + (size_t)(pos[i] % win) * hd;
        di_scatter_rows(f.x, n, NULL, ws->kv, (size_t)hd, ws->t.dst, hd);
    }
}

deepinfer_status di_v41_dspark_feed(di_v41_model *m, const di_v4_batch *b, const uint16_t *hid, di_error *err) {
    if (di_exec_on_device(&m->core.x))
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "DSpark drafting is not supported on CUDA yet");
    deepinfer_status st = check_feed(m, b, hid, err);
    if (st) return st;
    const di_model_config *c = &m->core.cfg;
    size_t ld = (size_t)c->n_dspark_target_layer_ids * c->hidden_size;
    int win = (int)c->sliding_window;
    for (int i = 0; i < b->n;) {
        int j = i;
        while (j < b->n && b->seq[j] == b->seq[i]) j++;
        /* only the last `window` positions survive in the ring */
        for (int r = j - i > win ? j - win : i; r < j; r += m->core.max_rows) {
            int k = j - r < m->core.max_rows ? j - r : m->core.max_rows;
            feed_rows(m, b->seq[i], b->pos + r, k, hid + (size_t)r * ld);
        }
        b->seq[i]->mtp_tokens = b->pos[j - 1] + 1;
        i = j;
    }
    return DEEPINFER_OK;
}

/* ---- drafting -------------------------------------------------------------------------------- */

/* Stage attention over the ring (context) and the block rows (a di_attn_fn). */
static void block_attn(di_fwd *f, const di_attn_w *aw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                       uint16_t *out) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int M = f->M, H = (int)c->num_attention_heads, hd = (int)c->head_dim, win = (int)c->sliding_window;
    const float *cs = di_fwd_rope_cs(f, L), *sn = di_fwd_rope_sn(f, L);
    size_t qld = (size_t)H * hd;
    di_attn_query(f, aw, cs, sn, xn);
    di_attn_kv(f, aw, cs, sn, M, xn, ws->kv, -1);
    di_tabs *t = &ws->t;
    for (int s = 0; s < f->nseg; s++) { /* host tables: each segment's ring and context slots */
        const di_seg *sg = &f->segs[s];
        t->ring[s] = sg->seq->layers[layer].ring;
        t->nctx[s] = sg->pos0 < win ? (int)sg->pos0 : win;
    }
    di_attn_list_block(f->x, f->nseg, t->seg_row0, t->seg_nrows, t->nctx, t->ring, ws->kv, hd, ws->kvptr,
                       ws->kvptr_stride, ws->nidx);
    di_sparse_attn(f->x, M, ws->q, qld, H, hd, ws->kvptr, ws->kvptr_stride, ws->nidx, aw->sink,
                   (float)(1.0 / sqrt((double)hd)), ws->o, qld);
    di_attn_out(f, aw, cs, sn, out);
}

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static deepinfer_status check_draft(const di_v41_model *m, const di_v41_draft *d, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    int B = (int)c->dspark_block_size;
    if (m->w.n_stages < 1) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "this checkpoint has no DSpark stages");
    if (d->n < 0 || (d->n && (!d->seq || !d->pos || !d->anchor || !d->ids)))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "DSpark draft: missing sequences, positions, anchors or ids");
    for (int i = 0; i < d->n; i++) {
        const di_seq_state *s = d->seq[i];
        if (!s || s->n_layers != c->n_layers + c->n_stages)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "DSpark draft %d: no sequence of this model", i);
        for (int k = 0; k < i; k++)
            if (d->seq[k] == s) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "DSpark drafts %d and %d share a sequence", k, i);
        if (d->pos[i] < 0 || s->mtp_tokens != d->pos[i] + 1)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "DSpark draft %d: position %lld, but the rings were fed up to %lld (feed position p first)", i,
                                (long long)d->pos[i], (long long)s->mtp_tokens - 1);
        if (d->pos[i] + 1 + B > m->core.max_context)
            return di_error_set(err, DEEPINFER_ERR_LIMIT, "DSpark draft %d: the block passes max_context %lld", i,
                                (long long)m->core.max_context);
        for (int k = -1; k < (d->force ? B : 0); k++) {
            int32_t t = k < 0 ? d->anchor[i] : d->force[(size_t)i * B + k];
            if (t < 0 || t >= c->vocab_size || t == c->image_token_id)
                return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "DSpark draft %d: token %d is not a text token", i, t);
        }
    }
    return DEEPINFER_OK;
}

/* The Markov correction and the confidence head, step by step over a group. */
static void markov_head(di_v41_model *m, const di_v41_draft *d, int g0, int G) {
    const di_model_config *c = &m->core.cfg;
    const di_v41_stage_w *last = &m->w.stages[m->w.n_stages - 1];
    int B = (int)c->dspark_block_size, V = (int)c->vocab_size, D = (int)c->hidden_size;
    int R = (int)c->dspark_markov_rank;
    di_exec *x = &m->core.x;
    for (int i = 0; i < B; i++) {
        for (int r = 0; r < G; r++) {
            int q = g0 + r;
            m->dprev[r] = i == 0 ? d->anchor[q] : d->force ? d->force[(size_t)q * B + i - 1] : d->ids[(size_t)q * B + i - 1];
        }
        di_embed(x, G, m->dprev, last->markov_embed, R, m->dmark, (size_t)R);
        di_copy_2d(x, G, m->dhid + (size_t)i * D, (size_t)B * D * 2, m->dcin, (size_t)(D + R) * 2, (size_t)D * 2);
        di_copy_2d(x, G, m->dmark, (size_t)R * 2, m->dcin + D, (size_t)(D + R) * 2, (size_t)R * 2);
        di_gemm(x, G, m->dmark, (size_t)R, &last->markov_head, 0, m->dbias, NULL, (size_t)V);
        float conf[DRAFT_GROUP];
        di_gemm(x, G, m->dcin, (size_t)(D + R), &last->conf, 0, conf, NULL, 1);
        for (int r = 0; r < G; r++) {
            int q = g0 + r;
            float *row = m->dlogits + ((size_t)r * B + i) * V;
            const float *bias = m->dbias + (size_t)r * V;
            di_add_f32_x(x, row, row, bias, (size_t)V);
            d->ids[(size_t)q * B + i] = d->pick ? d->pick(d->pick_ctx, q, i, row) : argmax(row, V);
            if (d->logits) memcpy(d->logits + ((size_t)q * B + i) * V, row, sizeof(float) * (size_t)V);
            if (d->confidence) d->confidence[(size_t)q * B + i] = conf[r];
        }
    }
}

static void draft_group(di_v41_model *m, const di_v41_draft *d, int g0, int G) {
    const di_model_config *c = &m->core.cfg;
    int B = (int)c->dspark_block_size, V = (int)c->vocab_size, D = (int)c->hidden_size, rows = G * B;
    for (int r = 0; r < G; r++)
        for (int i = 0; i < B; i++) {
            size_t k = (size_t)r * B + i;
            m->dtok[k] = i ? (int32_t)c->dspark_noise_token_id : d->anchor[g0 + r];
            m->dpos[k] = d->pos[g0 + r] + 1 + i;
            m->dseq[k] = d->seq[g0 + r];
        }
    di_v4_batch b = {.n = rows, .tokens = m->dtok, .pos = m->dpos, .seq = m->dseq};
    di_fwd f;
    di_core_fwd_init(&m->core, &b, 0, rows, &m->stage_moe, &f);
    f.mtp = 1;
    di_core_embed(&m->core, &f, m->w.embed);
    di_block_chain_start(&f);
    for (int s = 0; s < m->w.n_stages; s++) {
        int layer = c->n_layers + s;
        di_block(&f, &m->w.stages[s].blk, &c->layers[layer], layer, m->core.R, 1, block_attn, &m->stage_moe,
                 s + 1 < m->w.n_stages ? &m->w.stages[s + 1].blk : NULL);
    }
    const di_v41_stage_w *last = &m->w.stages[m->w.n_stages - 1];
    di_mhc_collapse_carried(&f, m->core.R, m->dhid);
    di_rmsnorm(f.x, rows, m->dhid, (size_t)D, last->norm, D, (float)c->rms_norm_eps, f.ws->xn, (size_t)D);
    di_gemm(f.x, rows, f.ws->xn, (size_t)D, &m->w.head, 0, m->dlogits, NULL, (size_t)V);
    markov_head(m, d, g0, G);
}

deepinfer_status di_v41_dspark_draft(di_v41_model *m, const di_v41_draft *d, di_error *err) {
    if (di_exec_on_device(&m->core.x))
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "DSpark drafting is not supported on CUDA yet");
    deepinfer_status st = check_draft(m, d, err);
    if (st) return st;
    for (int g0 = 0; g0 < d->n; g0 += m->draft_max) draft_group(m, d, g0, d->n - g0 < m->draft_max ? d->n - g0 : m->draft_max);
    return DEEPINFER_OK;
}
