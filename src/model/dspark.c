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
 *
 * Device backends: activations, logits and the Markov ids live in backend
 * memory; the host reads logits only where a pick (or the caller) needs
 * them, else the greedy drafts are a device argmax feeding the next Markov
 * step, and the ids and confidences come back once per group.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "model/attention.h"
#include "model/block.h"
#include "model/dsv41_internal.h"
#include "model/mhc.h"
#include "ops/backend.h"

#define DRAFT_GROUP 8 /* requests drafted per internal pass (bounds the logits scratch) */

deepinfer_status di_v41_dspark_init(di_v41_model *m, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    if (m->w.n_stages < 1) return DEEPINFER_OK;
    int B = (int)c->dspark_block_size, V = (int)c->vocab_size, d = (int)c->hidden_size;
    int R = (int)c->dspark_markov_rank, M = m->core.max_rows;
    m->draft_max = M / B < DRAFT_GROUP ? M / B : DRAFT_GROUP;
    if (m->draft_max < 1)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "max_rows %d is smaller than the DSpark block (%d)",
                            m->core.max_rows, B);
    size_t rows = (size_t)m->draft_max * B, G = (size_t)m->draft_max;
    m->dtok = malloc(rows * sizeof *m->dtok);
    m->dprev = malloc(G * sizeof *m->dprev);
    m->dpos = malloc(rows * sizeof *m->dpos);
    m->dseq = malloc(rows * sizeof *m->dseq);
    m->dsel = malloc(rows * sizeof *m->dsel);
    m->dconf_h = malloc(rows * sizeof *m->dconf_h);
    m->fpos = malloc((size_t)M * sizeof *m->fpos);
    m->fseq = malloc((size_t)M * sizeof *m->fseq);
    m->fhid = malloc((size_t)M * sizeof *m->fhid);
    m->dlogits = di_dev_alloc(rows * (size_t)V * sizeof(float));
    m->dbias = di_dev_alloc(G * (size_t)V * sizeof(float));
    m->dhid = di_dev_alloc(rows * (size_t)d * 2);
    m->dmark = di_dev_alloc(G * (size_t)R * 2);
    m->dcin = di_dev_alloc(G * (size_t)(d + R) * 2);
    m->dids = di_dev_alloc((rows + G) * sizeof *m->dids);
    m->ddtok = di_dev_alloc(rows * sizeof *m->ddtok);
    m->dconf = di_dev_alloc(rows * sizeof *m->dconf);
    /* device backends: the host copy of a group's corrected logits (picks, di_v41_draft.logits) */
    m->dlog_h = di_exec_on_device(&m->core.x) ? malloc(G * (size_t)V * sizeof(float)) : NULL;
    if (!m->dtok || !m->dprev || !m->dpos || !m->dseq || !m->dsel || !m->dconf_h || !m->fpos || !m->fseq ||
        !m->fhid || !m->dlogits || !m->dbias || !m->dhid || !m->dmark || !m->dcin || !m->dids || !m->ddtok || !m->dconf ||
        (di_exec_on_device(&m->core.x) && !m->dlog_h))
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the DSpark scratch");
    return DEEPINFER_OK;
}

void di_v41_dspark_free(di_v41_model *m) {
    free(m->dtok), free(m->dprev), free(m->dpos), free(m->dseq), free(m->dsel), free(m->dconf_h);
    free(m->fpos), free(m->fseq), free(m->fhid), free(m->dlog_h);
    di_dev_free(m->dlogits), di_dev_free(m->dbias), di_dev_free(m->dhid), di_dev_free(m->dmark), di_dev_free(m->dcin);
    di_dev_free(m->dids), di_dev_free(m->ddtok), di_dev_free(m->dconf);
}

size_t di_v41_dspark_bytes(const di_v41_model *m) {
    const di_model_config *c = &m->core.cfg;
    if (m->w.n_stages < 1) return 0;
    size_t B = (size_t)c->dspark_block_size, G = (size_t)m->draft_max, rows = G * B, V = (size_t)c->vocab_size;
    size_t d = (size_t)c->hidden_size, R = (size_t)c->dspark_markov_rank, M = (size_t)m->core.max_rows;
    size_t host = rows * (4 + 8 + sizeof(void *) + 4 + 4) + G * 4 + M * (8 + 2 * sizeof(void *)) +
                  (m->dlog_h ? G * V * 4 : 0);
    size_t dev = rows * V * 4 + G * V * 4 + rows * d * 2 + G * R * 2 + G * (d + R) * 2 + (rows + G) * 4 + rows * 4 +
                 rows * 4;
    return host + dev;
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

/* The context rows queued in m->fseq / fpos / fhid [0, n) (any sequences, each sequence's
 * positions distinct modulo the window) into every stage's ring. main_proj runs once per run
 * of rows whose inputs are consecutive rows of one buffer (every op is per row: the same bits
 * however the rows are grouped). */
static void feed_pass(di_v41_model *m, int n) {
    const di_model_config *c = &m->core.cfg;
    di_ws *ws = &m->core.ws;
    int d = (int)c->hidden_size, hd = (int)c->head_dim, win = (int)c->sliding_window, rd = (int)c->qk_rope_head_dim;
    size_t ld = (size_t)c->n_dspark_target_layer_ids * d;
    di_fwd f = {.x = &m->core.x, .cfg = c, .ws = ws, .M = n};
    const di_v41_stage_w *s0 = &m->w.stages[0];
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && m->fhid[j] == m->fhid[j - 1] + ld) j++;
        di_gemm(f.x, j - i, m->fhid[i], ld, &s0->main_proj, c->act_block, NULL, ws->mainx + (size_t)i * d, (size_t)d);
        i = j;
    }
    di_rmsnorm(f.x, n, ws->mainx, (size_t)d, s0->main_norm, d, (float)c->rms_norm_eps, ws->mainx, (size_t)d);
    if (di_exec_on_device(f.x)) { /* the table built on the host, then copied (core.c does the same) */
        size_t h = (size_t)n * (size_t)(rd / 2);
        float *t = ws->t.rope;
        di_rope_table(n, m->fpos, m->core.inv_main, rd, t, t + h);
        di_copy_h2d(f.x, ws->rope_cs[0], t, h * sizeof *t);
        di_copy_h2d(f.x, ws->rope_sn[0], t + h, h * sizeof *t);
    } else {
        di_rope_table(n, m->fpos, m->core.inv_main, rd, ws->rope_cs[0], ws->rope_sn[0]);
    }
    for (int st = 0; st < m->w.n_stages; st++) {
        di_attn_kv(&f, &m->w.stages[st].blk.attn, ws->rope_cs[0], ws->rope_sn[0], n, ws->mainx, ws->kv, -1);
        for (int i = 0; i < n; i++) /* host table: ring slot addresses */
            ws->t.dst[i] = m->fseq[i]->layers[c->n_layers + st].ring + (size_t)(m->fpos[i] % win) * hd;
        di_scatter_rows(f.x, n, NULL, ws->kv, (size_t)hd, ws->t.dst, hd);
    }
}

/* Queue the context rows of positions q0 .. q0 + n - 1 of s (inputs hid, rows ld apart): only
 * the last `window` survive in the rings, so only those run. Full passes run on the way. */
static void feed_queue(di_v41_model *m, int *nq, di_seq_state *s, int64_t q0, int n, const uint16_t *hid) {
    const di_model_config *c = &m->core.cfg;
    size_t ld = (size_t)c->n_dspark_target_layer_ids * c->hidden_size;
    int win = (int)c->sliding_window;
    for (int i = n > win ? n - win : 0; i < n; i++) {
        if (*nq == m->core.max_rows) {
            feed_pass(m, *nq);
            *nq = 0;
        }
        m->fseq[*nq] = s;
        m->fpos[*nq] = q0 + i;
        m->fhid[*nq] = hid + (size_t)i * ld;
        (*nq)++;
    }
}

deepinfer_status di_v41_dspark_feed(di_v41_model *m, const di_v4_batch *b, const uint16_t *hid, di_error *err) {
    deepinfer_status st = check_feed(m, b, hid, err);
    if (st) return st;
    size_t ld = (size_t)m->core.cfg.n_dspark_target_layer_ids * m->core.cfg.hidden_size;
    int nq = 0;
    for (int i = 0; i < b->n;) {
        int j = i;
        while (j < b->n && b->seq[j] == b->seq[i]) j++;
        feed_queue(m, &nq, b->seq[i], b->pos[i], j - i, hid + (size_t)i * ld);
        i = j;
    }
    if (nq) feed_pass(m, nq);
    for (int i = 0; i < b->n; i++) b->seq[i]->mtp_tokens = b->pos[i] + 1;
    return di_exec_sync(&m->core.x, err); /* device backends: the first failed op */
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

/* One pass of at most draft_max block drafts: the requests, where their outputs go (indexed by
 * the caller's request index), and how many drafts of each are written out. */
typedef struct draft_job {
    int n;
    di_seq_state *seq[DRAFT_GROUP];
    int64_t pos[DRAFT_GROUP];    /* p */
    int32_t anchor[DRAFT_GROUP]; /* the token at p + 1 */
    int req[DRAFT_GROUP];        /* the caller's request index */
    int keep[DRAFT_GROUP];       /* drafts written to ids / confidence */
    const int32_t *force;        /* [caller request][B] teacher-forced Markov inputs, or NULL */
    di_draft_pick_fn pick;
    void *pick_ctx;
    int32_t *ids;                /* [caller request][B] */
    float *logits;               /* [caller request][B][vocab] or NULL */
    float *confidence;           /* [caller request][B] or NULL */
    int defer;                   /* a recorded step: the ids and confidences are read after it (markov_collect) */
    int32_t *dev_ids;            /* draft.h dev_ids (greedy on the device): the drafts stay in backend memory */
    float *dev_conf;
    int q0;                      /* with dev_ids: the job's first request among the caller's drafting ones */
} draft_job;

static deepinfer_status bad_pick(int req, int i, int32_t t, int V, di_error *err) {
    return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                        "DSpark draft %d of request %d: the pick returned token %d, outside the vocabulary [0,%d)", i,
                        req, t, V);
}

static void markov_collect(di_v41_model *m, const draft_job *j, int host_pick);
static void markov_to_dev(di_v41_model *m, const draft_job *j);

/* The Markov correction and the confidence head, step by step over a job. Step i's Markov
 * ids are m->dids row i ([B + 1][G], backend memory): the anchors, then each step's drafts. */
static deepinfer_status markov_head(di_v41_model *m, const draft_job *j, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    const di_v41_stage_w *last = &m->w.stages[m->w.n_stages - 1];
    int B = (int)c->dspark_block_size, V = (int)c->vocab_size, D = (int)c->hidden_size;
    int R = (int)c->dspark_markov_rank, G = j->n;
    di_exec *x = &m->core.x;
    int dev = di_exec_on_device(x);
    /* the corrected logits are read on the host (CPU; a pick; the caller wants them; teacher forcing,
     * whose Markov inputs take the device rows the greedy drafts would) */
    int host_pick = !dev || j->pick || j->logits || j->force;
    for (int i = 0; i < B; i++) {
        int32_t *ids = m->dids + (size_t)i * G;
        if (i == 0 || host_pick) { /* this step's Markov inputs are known on the host */
            for (int r = 0; r < G; r++)
                m->dprev[r] = i == 0     ? j->anchor[r]
                              : j->force ? j->force[(size_t)j->req[r] * B + i - 1]
                                         : m->dsel[(size_t)r * B + i - 1];
            di_copy_h2d(x, ids, m->dprev, (size_t)G * sizeof *ids);
        }
        di_embed(x, G, ids, last->markov_embed, R, m->dmark, (size_t)R);
        di_copy_2d(x, G, m->dhid + (size_t)i * D, (size_t)B * D * 2, m->dcin, (size_t)(D + R) * 2, (size_t)D * 2);
        di_copy_2d(x, G, m->dmark, (size_t)R * 2, m->dcin + D, (size_t)(D + R) * 2, (size_t)R * 2);
        di_gemm(x, G, m->dmark, (size_t)R, &last->markov_head, 0, m->dbias, NULL, (size_t)V);
        di_gemm(x, G, m->dcin, (size_t)(D + R), &last->conf, 0, m->dconf + (size_t)i * G, NULL, 1);
        for (int r = 0; r < G; r++) { /* corrected logits U_i + bias_i into dbias row r (fp32 add commutes) */
            float *bias = m->dbias + (size_t)r * V;
            di_add_f32_x(x, bias, m->dlogits + ((size_t)r * B + i) * V, bias, (size_t)V);
        }
        if (!host_pick) { /* greedy on the device: the next step's Markov ids */
            di_backend_argmax_rest(x, G, m->dbias, V, m->dids + (size_t)(i + 1) * G);
            continue;
        }
        const float *hl = m->dbias;
        if (dev) {
            di_copy_d2h(x, m->dlog_h, m->dbias, (size_t)G * V * sizeof(float));
            hl = m->dlog_h;
        }
        for (int r = 0; r < G; r++) {
            const float *row = hl + (size_t)r * V;
            int32_t t = j->pick ? j->pick(j->pick_ctx, j->req[r], i, row) : argmax(row, V);
            if (t < 0 || t >= V) return bad_pick(j->req[r], i, t, V, err);
            m->dsel[(size_t)r * B + i] = t;
            if (j->logits) memcpy(j->logits + ((size_t)j->req[r] * B + i) * V, row, sizeof(float) * (size_t)V);
        }
    }
    if (j->dev_ids && !host_pick) markov_to_dev(m, j);
    else if (!j->defer) markov_collect(m, j, host_pick);
    return DEEPINFER_OK;
}

/* draft.h dev_ids: a greedy job's drafts (dids rows 1 .. B, [B][G]) and confidences ([B][G]) into the
 * caller's backend buffers, request-major ([q0 + r][B]); copies on the stream, nothing read back (also
 * inside a recorded step: the buffers are the caller's fixed ones). */
static void markov_to_dev(di_v41_model *m, const draft_job *j) {
    int B = (int)m->core.cfg.dspark_block_size, G = j->n;
    di_exec *x = &m->core.x;
    for (int r = 0; r < G; r++) {
        size_t o = (size_t)(j->q0 + r) * B;
        di_copy_2d(x, B, m->dids + G + r, (size_t)G * 4, j->dev_ids + o, 4, 4);
        if (j->dev_conf) di_copy_2d(x, B, m->dconf + r, (size_t)G * 4, j->dev_conf + o, 4, 4);
    }
}

/* A job's drafts and confidences to the host and into the caller's arrays (after the job's device
 * work; outside a recorded step, which reads nothing back). */
static void markov_collect(di_v41_model *m, const draft_job *j, int host_pick) {
    const di_model_config *c = &m->core.cfg;
    int B = (int)c->dspark_block_size, G = j->n;
    di_exec *x = &m->core.x;
    if (!host_pick) { /* the device's drafts: rows 1 .. B of dids */
        int32_t *h = m->dtok; /* its tokens went to the device at di_core_fwd_init: free, [draft_max * B] */
        di_copy_d2h(x, h, m->dids + G, (size_t)G * B * sizeof *h);
        for (int i = 0; i < B; i++)
            for (int r = 0; r < G; r++) m->dsel[(size_t)r * B + i] = h[(size_t)i * G + r];
    }
    di_copy_d2h(x, m->dconf_h, m->dconf, (size_t)G * B * sizeof *m->dconf_h);
    for (int r = 0; r < G; r++)
        for (int i = 0; i < j->keep[r]; i++) {
            size_t o = (size_t)j->req[r] * B + i;
            j->ids[o] = m->dsel[(size_t)r * B + i];
            if (j->confidence) j->confidence[o] = m->dconf_h[(size_t)i * G + r];
        }
}

static deepinfer_status draft_job_run(di_v41_model *m, const draft_job *j, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    int B = (int)c->dspark_block_size, V = (int)c->vocab_size, D = (int)c->hidden_size, rows = j->n * B;
    for (int r = 0; r < j->n; r++)
        for (int i = 0; i < B; i++) {
            size_t k = (size_t)r * B + i;
            m->dtok[k] = i ? (int32_t)c->dspark_noise_token_id : j->anchor[r];
            m->dpos[k] = j->pos[r] + 1 + i;
            m->dseq[k] = j->seq[r];
        }
    di_v4_batch b = {.n = rows, .tokens = m->dtok, .pos = m->dpos, .seq = m->dseq};
    di_fwd f;
    int32_t *tok = m->core.ws.tok; /* the block's tokens in the drafter's own buffer: the model's may hold a
                                      queued step's device tokens (model.h di_model_device_tokens) */
    m->core.ws.tok = m->ddtok;
    di_core_fwd_init(&m->core, &b, 0, rows, &m->stage_moe, &f);
    m->core.ws.tok = tok;
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
    return markov_head(m, j, err);
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

deepinfer_status di_v41_dspark_draft(di_v41_model *m, const di_v41_draft *d, di_error *err) {
    deepinfer_status st = check_draft(m, d, err);
    if (st) return st;
    int B = (int)m->core.cfg.dspark_block_size;
    for (int g0 = 0; g0 < d->n && !st; g0 += m->draft_max) {
        draft_job j = {.n = d->n - g0 < m->draft_max ? d->n - g0 : m->draft_max, .force = d->force, .pick = d->pick,
                       .pick_ctx = d->pick_ctx, .ids = d->ids, .logits = d->logits, .confidence = d->confidence};
        for (int r = 0; r < j.n; r++) {
            int q = g0 + r;
            j.seq[r] = d->seq[q], j.pos[r] = d->pos[q], j.anchor[r] = d->anchor[q], j.req[r] = q, j.keep[r] = B;
        }
        st = draft_job_run(m, &j, err);
    }
    if (st) {
        di_exec_sync(&m->core.x, NULL);
        return st;
    }
    return di_exec_sync(&m->core.x, err);
}

/* ---- the engine's step: feed, then draft (draft.h) --------------------------------------------- */

static deepinfer_status check_step(const di_v41_model *m, const di_model_draft *d, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    di_draft_rules r = {.has_drafter = m->w.n_stages >= 1,
                        .what = "the DSpark block",
                        .block = (int)c->dspark_block_size,
                        .max_context = m->core.max_context,
                        .text_anchor = 1,
                        .whole_block = 1};
    return di_model_draft_check(c, &r, d, err);
}

/* The shape of a recorded drafter step: the fed rows' hidden-row runs (main_proj's launches and their
 * source rows), the fed row count and the drafting requests; bit 63 keeps it apart from the target's
 * step keys (engine/devq_graph.c). */
static uint64_t record_key(const di_v41_model *m, int nq, int G, int dev_out) {
    size_t ld = (size_t)m->core.cfg.n_dspark_target_layer_ids * m->core.cfg.hidden_size;
    uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    MIX(nq), MIX(G), MIX(dev_out);
    for (int i = 0; i < nq;) {
        int j = i + 1;
        while (j < nq && m->fhid[j] == m->fhid[j - 1] + ld) j++;
        MIX((uintptr_t)m->fhid[i]), MIX(j - i);
        i = j;
    }
#undef MIX
    return h | 1ull << 63;
}

/* The slot of `key` among the recorded shapes (a new one while there is room), or -1: the step
 * runs eager (no room, or a shape whose replay failed its check, rec_bad). */
static int record_shape(di_v41_model *m, uint64_t key) {
    for (int i = 0; i < m->n_rec_keys; i++)
        if (m->rec_keys[i] == key) return m->rec_bad[i] ? -1 : i;
    if (m->n_rec_keys == DI_DSPARK_REC_KEYS) return -1;
    m->rec_bad[m->n_rec_keys] = 0;
    m->rec_keys[m->n_rec_keys] = key;
    return m->n_rec_keys++;
}

deepinfer_status di_v41_dspark_step(di_v41_model *m, const di_model_draft *d, di_error *err) {
    deepinfer_status st = check_step(m, d, err);
    if (st) return st;
    int B = (int)m->core.cfg.dspark_block_size, nq = 0, win = (int)m->core.cfg.sliding_window;
    di_exec *x = &m->core.x;
    /* recorded (draft.h record): greedy on the device, one feed pass and one draft job, so nothing is read
     * back inside the step; the drafts and confidences come back after it */
    int G = 0, fed = 0;
    for (int r = 0; r < d->n; r++) {
        G += d->k[r] > 0;
        fed += d->n_feed[r] < win ? d->n_feed[r] : win;
    }
    int rec = d->record && di_exec_on_device(x) && !d->pick && G <= m->draft_max && fed <= m->core.max_rows &&
              G + fed > 0;
    /* draft.h dev_ids: greedy on the device, the drafts left in the caller's buffers, no wait */
    int dev_out = d->dev_ids && di_exec_on_device(x) && !d->pick;
    for (int r = 0; r < d->n; r++)
        if (d->n_feed[r] > 0) feed_queue(m, &nq, d->seq[r], d->seq[r]->mtp_tokens, d->n_feed[r], d->hidden[r]);
    int slot = -1;
    if (rec) {
        uint64_t key = record_key(m, nq, G, dev_out);
        slot = record_shape(m, key);
        rec = slot >= 0 && di_backend_step_begin(x, key, NULL) == DEEPINFER_OK; /* else eager */
    }
    if (nq) feed_pass(m, nq);
    for (int r = 0; r < d->n; r++) d->seq[r]->mtp_tokens += d->n_feed[r];
    draft_job j = {.pick = d->pick, .pick_ctx = d->pick_ctx, .ids = d->ids, .confidence = d->confidence, .defer = rec,
                   .dev_ids = dev_out ? d->dev_ids : NULL, .dev_conf = dev_out ? d->dev_conf : NULL};
    int drafting = 0; /* requests with k > 0 before this one (dev_ids' order) */
    for (int r = 0; r < d->n && !st; r++) {
        if (j.n == 0) j.q0 = drafting;
        if (d->k[r] > 0) {
            drafting++;
            di_seq_state *s = d->seq[r];
            j.seq[j.n] = s, j.pos[j.n] = s->mtp_tokens - 1, j.anchor[j.n] = d->next[r][d->n_feed[r] - 1];
            j.req[j.n] = r, j.keep[j.n] = d->k[r] < B ? d->k[r] : B;
            j.n++;
        }
        if ((j.n == m->draft_max && !rec) || (r + 1 == d->n && j.n > 0)) { /* recorded: one job (G <= draft_max) */
            st = draft_job_run(m, &j, err);
            if (!rec) j.n = 0; /* recorded: its results are collected after the step */
        }
    }
    if (rec) {
        if (st) {
            di_backend_step_abort(x);
        } else if ((st = di_backend_step_end(x, err)) && di_exec_sync(x, NULL) == DEEPINFER_OK) {
            /* a replay whose launches or tables differ from its graph's (cu_step.h step_end): nothing
             * was issued and the exec is sound, so the shape runs eager from now on and this step
             * again, eager, from the same rings */
            m->rec_bad[slot] = 1;
            for (int r = 0; r < d->n; r++) d->seq[r]->mtp_tokens -= d->n_feed[r];
            di_model_draft e = *d;
            e.record = 0;
            return di_v41_dspark_step(m, &e, err);
        }
        if (!st && j.n && !dev_out) markov_collect(m, &j, 0);
    }
    if (st) {
        di_exec_sync(x, NULL);
        return st;
    }
    return dev_out ? DEEPINFER_OK : di_exec_sync(x, err); /* dev_out: its failures show at the caller's next wait */
}
