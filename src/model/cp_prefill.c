/* cp_prefill.c — balanced context-parallel prefill (cp_prefill.h). */
#include "model/cp_prefill.h"

#include <stdlib.h>
#include <string.h>

#include "model/attention.h"
#include "model/block.h"
#include "model/compressor.h"
#include "model/dsv41_internal.h"
#include "model/dsv4_internal.h"
#include "model/engram_setup.h"
#include "model/indexer.h"
#include "model/mhc.h"
#include "model/moe_ep.h"

#define CP_MAX_RANKS 64

void di_cp_chunk(int n, int R, int k, int *lo, int *hi) {
    *lo = (int)((int64_t)k * n / (2 * R));
    *hi = (int)((int64_t)(k + 1) * n / (2 * R));
}

int di_cp_min_rows(int R) { return 2 * R; }

/* One rank's CP prefill in flight (di_fwd.cp while its layers run). */
struct cp_ctx {
    di_comm *comm;
    int R, rank;
    size_t d;                  /* hidden size */
    di_seq_state *seq;
    di_core aux;               /* runs the state writes of the rows of other chunks */
    const di_moe_opts *moe;
    int64_t *pos;              /* [n] the prompt's positions */
    di_seq_state **seqs;       /* [n] all seq */
    const int32_t *tokens;     /* [n] */
    /* the pass */
    int r0, P;                 /* its prompt rows [r0, r0 + P) */
    int lo[2 * CP_MAX_RANKS + 1]; /* chunk k = pass rows [lo[k], lo[k + 1]) */
    int own[2];                /* this rank's chunks */
    size_t rb[CP_MAX_RANKS], ro[CP_MAX_RANKS]; /* all-gather of the attention inputs: bytes, offsets */
    uint16_t *xall;            /* [pass rows][d]: every rank's attention inputs, rank-major */
    /* this rank's rows of the pass */
    int M;
    int32_t *otok;             /* [max_rows] */
    int64_t *opos;
    di_seq_state **oseq;
    int *orows;                /* its logit rows (own-row indices) */
    float *ologits;            /* [max_rows][V] */
    float *glogits;            /* [pass rows][V] every rank's, rank-major */
    int64_t *ids;              /* V4.1 Engram: [n][per token] the prompt's hash ids (host hash path) */
    int64_t *dids;             /* the same from the ops' hash (dsv41_internal.h eng_ops), backend memory */
    di_engram_seq eng;         /* the history after the prompt (set on the sequence at the end) */
    deepinfer_status st;       /* the first collective failure */
    di_error err;
};
typedef struct cp_ctx cp_ctx;

static int owner(const cp_ctx *c, int k) { return k < c->R ? k : 2 * c->R - 1 - k; }
static int chunk_len(const cp_ctx *c, int k) { return c->lo[k + 1] - c->lo[k]; }

/* Chunk k's first row in xall (rank-major: each rank's first chunk, then its second). */
static size_t chunk_at(const cp_ctx *c, int k) {
    int q = owner(c, k);
    return c->ro[q] / (c->d * 2) + (size_t)(k < c->R ? 0 : chunk_len(c, q));
}

static void gather(cp_ctx *c, const void *send, size_t bytes, void *recv, const size_t *rb, const size_t *ro) {
    if (c->st) return;
    if (!c->comm) {
        memmove((char *)recv + ro[0], send, bytes);
        return;
    }
    c->st = di_comm_allgatherv(c->comm, send, bytes, recv, rb, ro, &c->err);
}

/* The host tables of f's segments (forward.h di_tabs). */
static void set_tabs(const di_fwd *f) {
    di_tabs *t = &f->ws->t;
    for (int s = 0; s < f->nseg; s++) {
        const di_seg *sg = &f->segs[s];
        t->seg_row0[s] = sg->row0;
        t->seg_nrows[s] = sg->nrows;
        t->seg_pos0[s] = sg->pos0;
        for (int i = 0; i < sg->nrows; i++) t->row_seg[sg->row0 + i] = s;
    }
}

/* Chunk k of another rank through layer `layer`'s state writes, on the aux
 * core: the ops of di_attn_block that write the state, on the same inputs. */
static void advance(cp_ctx *c, const di_fwd *f, const di_attn_w *aw, const di_layer_cfg *L, int layer, int k) {
    const uint16_t *x = c->xall + chunk_at(c, k) * c->d;
    for (int a = c->lo[k], end = c->lo[k + 1]; a < end; a += c->aux.max_rows) {
        int n = end - a < c->aux.max_rows ? end - a : c->aux.max_rows;
        int g = c->r0 + a; /* prompt row */
        di_v4_batch b = {.n = n, .tokens = c->tokens + g, .pos = c->pos + g, .seq = c->seqs + g};
        di_fwd fa;
        di_core_fwd_init(&c->aux, &b, 0, n, c->moe, &fa);
        const uint16_t *xr = x + (size_t)(a - c->lo[k]) * c->d;
        if (aw->has_cmp)
            di_compressor_run(&fa, &aw->cmp, L, layer, f->cfg->arch == DI_ARCH_V4 ? DI_CMP_MAIN : DI_CMP_LATENT, xr);
        if (aw->has_idx) di_indexer_keys(&fa, &aw->idx, L, layer, xr);
        di_attn_kv(&fa, aw, di_fwd_rope_cs(&fa, L), di_fwd_rope_sn(&fa, L), n, xr, fa.ws->kv, layer);
        di_exec_join(fa.x);
    }
}

/* This rank's segment s through the whole attention sub-layer: a view of
 * the step holding that segment only. */
static void own_attn(const di_fwd *f, const di_attn_w *aw, const di_layer_cfg *L, int layer, int s, const uint16_t *xn,
                     uint16_t *out) {
    const di_seg *sg = &f->segs[s];
    size_t d = (size_t)f->cfg->hidden_size, h = (size_t)(f->cfg->qk_rope_head_dim / 2);
    di_ws wv = *f->ws;
    for (int i = 0; i < 2; i++) {
        wv.rope_cs[i] += (size_t)sg->row0 * h;
        wv.rope_sn[i] += (size_t)sg->row0 * h;
    }
    di_fwd fv = *f;
    di_seg one = *sg;
    one.row0 = 0;
    fv.ws = &wv;
    fv.M = sg->nrows;
    fv.pos += sg->row0;
    fv.tokens += sg->row0;
    fv.dtok += sg->row0;
    fv.segs = &one;
    fv.nseg = 1;
    /* per-row results carried across layers (V4.1: a layer without its own indexer reuses the
     * top-k of the last index source, later layers the candidate blocks): the segment's own rows */
    wv.topk += (size_t)sg->row0 * (size_t)f->cfg->index_topk;
    wv.ntopk += sg->row0;
    if (wv.cand) {
        wv.cand += (size_t)sg->row0 * (size_t)f->cfg->candidate_topk_blocks;
        wv.ncand += sg->row0;
    }
    set_tabs(&fv);
    di_attn_block(&fv, aw, L, layer, xn + (size_t)sg->row0 * d, out + (size_t)sg->row0 * d);
    set_tabs(f);
}

/* The attention sub-layer under CP (block.h di_attn_fn): gather every rank's
 * inputs, then the pass's chunks in position order. */
static void cp_attn(di_fwd *f, const di_attn_w *aw, const di_layer_cfg *L, int layer, const uint16_t *xn,
                    uint16_t *out) {
    cp_ctx *c = f->cp;
    gather(c, xn, (size_t)f->M * c->d * 2, c->xall, c->rb, c->ro);
    int next = 0;
    for (int s = 0; s < 2; s++) {
        for (; next < c->own[s]; next++) advance(c, f, aw, L, layer, next);
        own_attn(f, aw, L, layer, s, xn, out);
        next = c->own[s] + 1;
    }
    for (; next < 2 * c->R; next++) advance(c, f, aw, L, layer, next);
}

/* Indices [*i0, *i1) of the logit rows inside prompt rows [a, b). */
static void logit_span(const di_cp_prefill *p, int a, int b, int *i0, int *i1) {
    int i = 0;
    while (i < p->n_logits && p->logit_rows[i] < a) i++;
    int j = i;
    while (j < p->n_logits && p->logit_rows[j] < b) j++;
    *i0 = i;
    *i1 = j;
}

/* Lay out pass [r0, r0 + P): chunks, this rank's rows and logit rows, the
 * gather's counts; f over this rank's two segments. */
static void pass_begin(cp_ctx *c, di_core *core, const di_cp_prefill *p, int r0, int P, di_v4_batch *b, di_fwd *f) {
    c->r0 = r0;
    c->P = P;
    for (int k = 0; k <= 2 * c->R; k++) c->lo[k] = (int)((int64_t)k * P / (2 * c->R));
    c->own[0] = c->rank;
    c->own[1] = 2 * c->R - 1 - c->rank;
    size_t off = 0;
    for (int q = 0; q < c->R; q++) {
        size_t rows = (size_t)(chunk_len(c, q) + chunk_len(c, 2 * c->R - 1 - q));
        c->rb[q] = rows * c->d * 2;
        c->ro[q] = off;
        off += c->rb[q];
    }
    int M = 0, nl = 0;
    for (int s = 0; s < 2; s++) {
        int k = c->own[s], i0, i1;
        logit_span(p, r0 + c->lo[k], r0 + c->lo[k + 1], &i0, &i1);
        for (int i = i0; i < i1; i++) c->orows[nl++] = M + p->logit_rows[i] - (r0 + c->lo[k]);
        for (int i = c->lo[k]; i < c->lo[k + 1]; i++, M++) {
            c->otok[M] = p->tokens[r0 + i];
            c->opos[M] = c->pos[r0 + i];
            c->oseq[M] = c->seq;
        }
    }
    c->M = M;
    *b = (di_v4_batch){.n = M, .tokens = c->otok, .pos = c->opos, .seq = c->oseq, .n_logits = nl, .logit_rows = c->orows,
                       .logits = c->ologits};
    di_core_fwd_init(core, b, 0, M, c->moe, f);
    int na = chunk_len(c, c->own[0]);
    f->nseg = 2;
    f->segs[0] = (di_seg){.seq = c->seq, .row0 = 0, .nrows = na, .pos0 = c->opos[0]};
    f->segs[1] = (di_seg){.seq = c->seq, .row0 = na, .nrows = M - na, .pos0 = c->opos[na]};
    set_tabs(f);
    f->cp = c;
}

/* Every rank's logits of the pass to every rank, in logit-row order. */
static void pass_logits(cp_ctx *c, const di_cp_prefill *p, size_t V, int n_own) {
    if (!p->n_logits) return;
    size_t rb[CP_MAX_RANKS], ro[CP_MAX_RANKS], off = 0;
    for (int q = 0; q < c->R; q++) {
        int n = 0;
        for (int s = 0; s < 2; s++) {
            int k = s ? 2 * c->R - 1 - q : q, i0, i1;
            logit_span(p, c->r0 + c->lo[k], c->r0 + c->lo[k + 1], &i0, &i1);
            n += i1 - i0;
        }
        rb[q] = (size_t)n * V * 4;
        ro[q] = off;
        off += rb[q];
    }
    if (!off) return;
    gather(c, c->ologits, (size_t)n_own * V * 4, c->glogits, rb, ro);
    if (c->st) return;
    for (int q = 0; q < c->R; q++) {
        const float *src = (const float *)((const char *)c->glogits + ro[q]);
        for (int s = 0; s < 2; s++) {
            int k = s ? 2 * c->R - 1 - q : q, i0, i1;
            logit_span(p, c->r0 + c->lo[k], c->r0 + c->lo[k + 1], &i0, &i1);
            memcpy(p->logits + (size_t)i0 * V, src, (size_t)(i1 - i0) * V * 4);
            src += (size_t)(i1 - i0) * V;
        }
    }
}

static void ctx_free(cp_ctx *c) {
    di_core_free(&c->aux);
    free(c->pos), free(c->seqs), free(c->otok), free(c->opos), free(c->oseq), free(c->orows);
    free(c->ologits), free(c->glogits), free(c->ids);
    di_dev_free(c->xall);
    di_dev_free(c->dids);
}

/* The rows of the largest pass: at most max_rows - 2 rows per rank; with expert parallelism at
 * most max_rows over all ranks (every rank's EP scratch holds one pass's routing entries of every
 * rank: max_rows x k, moe_ep.h). */
static int pass_cap(const di_core *core, const di_ep_model *ep, int R) {
    return ep ? core->max_rows : R * (core->max_rows - 2);
}

/* Checks and buffers, before any collective; then every rank learns whether
 * every rank is ready (one all-gather of a status word), so that no rank is
 * left waiting in a layer's collective. */
typedef deepinfer_status (*prep_fn)(void *m, cp_ctx *c, const di_cp_prefill *p, di_error *err);

static deepinfer_status ctx_init(cp_ctx *c, void *m, di_core *core, di_ep_model *ep, const di_moe_opts *moe,
                                 const di_cp_prefill *p, prep_fn prep, di_error *err) {
    memset(c, 0, sizeof *c);
    c->comm = p->comm;
    c->R = di_comm_size(p->comm);
    c->rank = di_comm_rank(p->comm);
    c->seq = p->seq;
    c->moe = moe;
    c->tokens = p->tokens;
    c->d = (size_t)core->cfg.hidden_size;
    deepinfer_status st = DEEPINFER_OK;
    if (c->R > CP_MAX_RANKS)
        st = di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "context parallelism over %d ranks: at most %d", c->R,
                          CP_MAX_RANKS);
    else if (!p->seq || !p->tokens || p->n < di_cp_min_rows(c->R) || (p->n_logits && (!p->logit_rows || !p->logits)))
        st = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                          "context-parallel prefill: needs the sequence, tokens, logit buffers and at least %d rows "
                          "over %d ranks (got %d)",
                          di_cp_min_rows(c->R), c->R, p->n);
    else if (di_exec_on_device(&core->x))
        st = di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "context-parallel prefill runs on the CPU backend only");
    else if (core->max_rows < 6 || (ep && core->max_rows < 4 * c->R))
        st = di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                          "context-parallel prefill over %d ranks needs max_rows >= %d (got %d)", c->R,
                          ep && 4 * c->R > 6 ? 4 * c->R : 6, core->max_rows);
    else if (ep && (!ep->dp || ep->size != c->R || ep->comm != p->comm))
        st = di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                          "context-parallel prefill with expert parallelism needs the attention-DP layout (dp = ep) "
                          "over the same ranks: with dp = 1 every rank runs every row");
    for (int i = 1; !st && i < p->n_logits; i++)
        if (p->logit_rows[i] <= p->logit_rows[i - 1] || p->logit_rows[i] >= p->n || p->logit_rows[0] < 0)
            st = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "logit row %d is out of range or not increasing", i);
    if (!st && p->n_logits && (p->logit_rows[0] < 0 || p->logit_rows[p->n_logits - 1] >= p->n))
        st = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "a logit row is outside [0, %d)", p->n);
    int cap = st ? 0 : pass_cap(core, ep, c->R);
    size_t V = (size_t)core->cfg.vocab_size, mr = (size_t)core->max_rows;
    if (!st) {
        c->pos = malloc((size_t)p->n * sizeof *c->pos);
        c->seqs = malloc((size_t)p->n * sizeof *c->seqs);
        c->otok = malloc(mr * sizeof *c->otok);
        c->opos = malloc(mr * sizeof *c->opos);
        c->oseq = malloc(mr * sizeof *c->oseq);
        c->orows = malloc(mr * sizeof *c->orows);
        c->ologits = malloc(mr * V * 4);
        c->glogits = malloc((size_t)cap * V * 4);
        c->xall = di_dev_alloc((size_t)cap * c->d * 2);
        if (!c->pos || !c->seqs || !c->otok || !c->opos || !c->oseq || !c->orows || !c->ologits || !c->glogits ||
            !c->xall)
            st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the context-parallel prefill");
    }
    if (!st) {
        for (int i = 0; i < p->n; i++) c->pos[i] = p->seq->n_tokens + i, c->seqs[i] = p->seq;
        di_v4_batch full = {.n = p->n, .tokens = p->tokens, .pos = c->pos, .seq = c->seqs};
        st = di_core_check_batch(core, &full, 0, err);
    }
    if (!st) st = di_core_init_lane(&c->aux, core, core->max_rows, err);
    if (!st && prep) st = prep(m, c, p, err);
    if (!c->comm) return st;
    /* every rank's verdict */
    int32_t mine = (int32_t)st, all[CP_MAX_RANKS] = {0};
    size_t rb[CP_MAX_RANKS], ro[CP_MAX_RANKS];
    int R = c->R > CP_MAX_RANKS ? CP_MAX_RANKS : c->R;
    for (int q = 0; q < R; q++) rb[q] = 4, ro[q] = (size_t)q * 4;
    di_error e2 = {0};
    if (c->R <= CP_MAX_RANKS && di_comm_allgatherv(c->comm, &mine, 4, all, rb, ro, &e2))
        return st ? st : di_error_set(err, e2.code ? e2.code : DEEPINFER_ERR_INTERNAL, "%s", e2.msg);
    for (int q = 0; !st && q < R; q++)
        if (all[q])
            st = di_error_set(err, (deepinfer_status)all[q], "context-parallel prefill: rank %d refused it", q);
    return st;
}

/* The passes: each one's rows run `layers` on this rank's chunks. */
typedef deepinfer_status (*pass_fn)(void *m, cp_ctx *c, di_fwd *f, di_v4_batch *b, di_error *err);

static deepinfer_status run_passes(void *m, di_core *core, di_ep_model *ep, const di_moe_opts *moe,
                                   const di_cp_prefill *p, pass_fn layers, prep_fn prep, di_error *err) {
    cp_ctx *c = malloc(sizeof *c);
    if (!c) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the context-parallel prefill");
    deepinfer_status st = ctx_init(c, m, core, ep, moe, p, prep, err);
    if (st) {
        ctx_free(c);
        free(c);
        return st;
    }
    int cap = pass_cap(core, ep, c->R), npass = (p->n + cap - 1) / cap;
    int64_t start = p->seq->n_tokens;
    for (int i = 0; !st && i < npass; i++) {
        int r0 = (int)((int64_t)i * p->n / npass), P = (int)((int64_t)(i + 1) * p->n / npass) - r0;
        di_v4_batch b;
        di_fwd f;
        pass_begin(c, core, p, r0, P, &b, &f);
        st = layers(m, c, &f, &b, err);
        if (!st) st = di_exec_sync(&core->x, err);
        if (!st && c->st) st = di_error_set(err, c->st, "context-parallel prefill: %s", c->err.msg);
        if (!st) pass_logits(c, p, (size_t)core->cfg.vocab_size, b.n_logits);
        if (!st && c->st) st = di_error_set(err, c->st, "context-parallel prefill: %s", c->err.msg);
        p->seq->n_tokens = start + r0 + P;
    }
    if (!st) st = di_ep_take_status(ep, err);
    if (!st && c->ids) p->seq->engram = c->eng;
    if (!st && c->dids) p->seq->engram.len = start + p->n;
    ctx_free(c);
    free(c);
    return st;
}

/* ---- V4 (dsv4.c forward_rows with the CP attention) ---- */

static deepinfer_status v4_layers(void *mp, cp_ctx *c, di_fwd *f, di_v4_batch *b, di_error *err) {
    (void)c, (void)err;
    di_v4_model *m = mp;
    const di_model_config *cfg = &m->core.cfg;
    di_core_embed(&m->core, f, m->w.embed);
    for (int l = 0; l < cfg->n_layers; l++) {
        f->hc_defer_post = l + 1 == cfg->n_layers;
        di_block(f, &m->w.layers[l], &cfg->layers[l], l, m->core.R, 0, cp_attn, &m->moe,
                 l + 1 < cfg->n_layers ? &m->w.layers[l + 1] : NULL);
    }
    di_v4_outputs(m, &m->core, f, b, 0, &m->w.hc_head, m->w.norm);
    return DEEPINFER_OK;
}

deepinfer_status di_v4_cp_prefill(di_v4_model *m, const di_cp_prefill *p, di_error *err) {
    return run_passes(m, &m->core, m->ep, &m->moe, p, v4_layers, NULL, err);
}

/* ---- V4.1 (dsv41.c forward_rows with the CP attention; no compact prefill, no DSpark targets) ---- */

static size_t eng_per_tok(const di_model_config *cfg) {
    return (size_t)cfg->n_engram_layer_ids * (size_t)cfg->engram_cols;
}

/* The same on the ops: the whole prompt as one segment from the sequence's class ring, on this
 * rank's exec (every rank holds the owner's state, so every rank computes the same ids and leaves
 * the same ring). */
static deepinfer_status v41_prep_ops(di_v41_model *m, cp_ctx *c, const di_cp_prefill *p, di_error *err) {
    const di_engram_hash *h = &m->eng.hash;
    di_exec *x = &m->core.x;
    size_t per = eng_per_tok(&m->core.cfg);
    int32_t *dtok = di_dev_alloc((size_t)p->n * sizeof *dtok);
    int *row_seg = calloc((size_t)p->n, sizeof *row_seg);
    c->dids = di_dev_alloc((size_t)p->n * per * sizeof *c->dids);
    deepinfer_status st = DEEPINFER_OK;
    if (!dtok || !row_seg || !c->dids) {
        st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the prompt's Engram ids");
    } else {
        int64_t pos0 = p->seq->n_tokens;
        int nrows = p->n;
        int32_t *ring = p->seq->eng_ring;
        di_copy_h2d(x, dtok, p->tokens, (size_t)p->n * sizeof *dtok);
        di_engram_hash_rows(x, p->n, dtok, m->eng_dmap, m->eng.map.n_ids, m->eng_dconsts, h->n_layers, h->max_ngram,
                            h->n_heads, h->pad_class, c->pos, row_seg, &pos0, &nrows, &ring, p->seq->eng_ring_len,
                            c->dids);
        st = di_exec_sync(x, err); /* the host tables above are this frame's */
    }
    di_dev_free(dtok);
    free(row_seg);
    return st;
}

/* The Engram hash ids of the whole prompt, from a copy of the history (the
 * sequence's is advanced after the prefill, as one rank advances it). */
static deepinfer_status v41_prep(void *mp, cp_ctx *c, const di_cp_prefill *p, di_error *err) {
    di_v41_model *m = mp;
    const di_model_config *cfg = &m->core.cfg;
    if (m->released_index_k)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "context-parallel prefill: the released-reference index keys (released_index_k) depend "
                            "on how a prompt is chunked; load without them");
    di_v4_batch full = {.n = p->n, .tokens = p->tokens, .pos = c->pos, .seq = c->seqs};
    deepinfer_status st = di_v41_check_tokens(m, &full, err);
    if (st) return st;
    size_t per = eng_per_tok(cfg);
    if (!per) return DEEPINFER_OK;
    if (m->eng_ops) return v41_prep_ops(m, c, p, err);
    c->ids = malloc((size_t)p->n * per * sizeof *c->ids);
    if (!c->ids) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the prompt's Engram ids");
    c->eng = p->seq->engram;
    return di_engram_step_ids(&m->eng, &c->eng, p->seq->n_tokens, p->tokens, NULL, p->n, c->ids, err);
}

static deepinfer_status v41_layers(void *mp, cp_ctx *c, di_fwd *f, di_v4_batch *b, di_error *err) {
    di_v41_model *m = mp;
    const di_model_config *cfg = &m->core.cfg;
    di_core *core = &m->core;
    size_t per = eng_per_tok(cfg);
    int ncol = (int)per;
    if (per && c->dids) { /* this rank's rows' ids, from the prompt's (backend memory) */
        for (int s = 0, at = 0; s < 2; s++) {
            int k = c->own[s], nr = chunk_len(c, k);
            di_copy_2d(f->x, 1, c->dids + (size_t)(c->r0 + c->lo[k]) * per, 0, f->ws->eng_dids + (size_t)at * per, 0,
                       (size_t)nr * per * sizeof *c->dids);
            at += nr;
        }
        if (!di_exec_on_device(f->x))
            for (int i = 0; i < m->w.n_engram; i++)
                di_engram_prefetch(&m->w.engram[i], f->ws->eng_dids + (size_t)i * cfg->engram_cols, (int64_t)per, f->M);
    } else if (per) { /* this rank's rows' ids, from the prompt's */
        for (int s = 0, at = 0; s < 2; s++) {
            int k = c->own[s], nr = chunk_len(c, k);
            memcpy(f->ws->t.eng_ids + (size_t)at * per, c->ids + (size_t)(c->r0 + c->lo[k]) * per,
                   (size_t)nr * per * sizeof *c->ids);
            at += nr;
        }
        for (int i = 0; i < m->w.n_engram; i++)
            di_engram_prefetch(&m->w.engram[i], f->ws->t.eng_ids + (size_t)i * cfg->engram_cols, (int64_t)per, f->M);
    }
    di_core_embed(core, f, m->w.embed);
    di_block_chain_start(f);
    deepinfer_status st;
    for (int l = 0; l < cfg->n_layers; l++) {
        const di_layer_cfg *L = &cfg->layers[l];
        if (L->engram >= 0 &&
            (st = c->dids ? di_engram_forward_ops(f->x, &m->w.engram[L->engram], &m->eng_ws, core->R, f->M,
                                                  f->ws->eng_dids + (size_t)L->engram * cfg->engram_cols, ncol, NULL)
                          : di_engram_forward(f->x, &m->w.engram[L->engram], &m->eng_ws, core->R, f->M,
                                              f->ws->t.eng_ids + (size_t)L->engram * cfg->engram_cols, ncol, NULL,
                                              NULL, err)))
            return st; /* the same on every rank: the ids and rows checked before the first collective */
        int fuse = l + 1 < cfg->n_layers && cfg->layers[l + 1].engram < 0;
        f->hc_defer_post = l + 1 == cfg->n_layers;
        di_block(f, &m->w.layers[l], L, l, core->R, 1, cp_attn, &m->moe, fuse ? &m->w.layers[l + 1] : NULL);
    }
    if (b->n_logits) {
        di_mhc_head_final(f, NULL, m->w.norm, core->R);
        di_core_logits(core, f, b, 0, NULL, &m->w.head);
    } else {
        di_mhc_post_pending(f, core->R);
    }
    return DEEPINFER_OK;
}

deepinfer_status di_v41_cp_prefill(di_v41_model *m, const di_cp_prefill *p, di_error *err) {
    return run_passes(m, &m->core, m->ep, &m->moe, p, v41_layers, v41_prep, err);
}
