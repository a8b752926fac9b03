/* mtp.c — the V4 MTP drafter block (architecture.md §7.1):
 *   e  = e_proj(enorm(embed[next token]))          FP8 linear -> bf16
 *   h  = h_proj(hnorm(R_main[k])) for each copy k  FP8 linear -> bf16
 *   R  = bf16(e + h[k])                            ([hc][dim])
 *   R  = block(R)   (window-only attention with its own ring, RoPE 10000,
 *                    sqrt-softplus routing over its own experts)
 *   logits = head(norm(hc_head_mtp(R)))            (shared head)
 * The block is the same code as a backbone layer; only its inputs differ.
 *
 * The drafter step (di_v4_mtp_step, V3 convention of §7.1): feed rows
 * i = q0 .. p pair the target's residual at i with the embedding of the
 * token at i + 1; row p's logits give draft 0; then the chain: row p+1+j
 * takes the MTP's own output residual of the row before and the embedding
 * of draft j, its logits give draft j+1. The chained rows' ring slots are
 * speculative: they are saved before the chain and restored after it.
 * Every op is per row, so the bits do not depend on how requests and rows
 * are grouped into passes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/attention.h"
#include "model/block.h"
#include "model/dsv4_internal.h"
#include "ops/backend.h"

#define MTP_GROUP 8 /* requests drafted per internal pass (bounds the logits scratch) */

/* Rows [r0, r0 + n) of a checked batch (n <= max_rows) through the MTP block; hin: those rows'
 * main residuals ([n][hc*dim], may be m->hbuf: normalised in place). Advances mtp_tokens. */
static void mtp_rows(di_v4_model *m, const di_v4_batch *b, int r0, int n, const uint16_t *hin) {
    const di_model_config *c = &m->core.cfg;
    const di_mtp_w *mw = &m->w.mtp[0];
    int layer = c->n_layers;
    const di_layer_cfg *L = &c->layers[layer];
    int d = (int)c->hidden_size, hc = (int)c->hc_mult, ab = c->act_block;
    float eps = (float)c->rms_norm_eps;
    uint16_t *R = m->core.R;
    di_fwd f;
    di_core_fwd_init(&m->core, b, r0, n, &m->moe, &f);
    di_ws *ws = f.ws;
    di_embed(f.x, n, f.dtok, m->w.embed, d, ws->x, (size_t)d);
    di_rmsnorm(f.x, n, ws->x, (size_t)d, mw->enorm, d, eps, ws->xn, (size_t)d);
    di_gemm(f.x, n, ws->xn, (size_t)d, &mw->e_proj, ab, NULL, ws->sub, (size_t)d);
    /* each residual copy normalised and projected on its own (rows of dim) */
    di_rmsnorm(f.x, n * hc, hin, (size_t)d, mw->hnorm, d, eps, m->hbuf, (size_t)d);
    di_gemm(f.x, n * hc, m->hbuf, (size_t)d, &mw->h_proj, ab, NULL, R, (size_t)d);
    di_add_bcast_bf16(f.x, n, ws->sub, hc, d, R);
    di_block(&f, &mw->blk, L, layer, R, 0, di_attn_block, &m->moe, NULL);
    di_v4_outputs(m, &m->core, &f, b, r0, &mw->hc_head, mw->norm);
    for (int s = 0; s < f.nseg; s++) f.segs[s].seq->mtp_tokens = f.segs[s].pos0 + f.segs[s].nrows;
}

/* mtp_rows on the drafter's own token and logits buffers for rows [0, n) of b: the model's
 * (core.ws.tok, core.dlogits) may hold a queued step's device tokens or logits not read yet
 * (model.h di_model_device_tokens, di_model_device_logits). Logit rows land in sc->dlog. */
static void mtp_rows_own(di_v4_model *m, const di_v4_batch *b, int n, const uint16_t *hin) {
    di_core *c = &m->core;
    int32_t *tok = c->ws.tok;
    float *lg = c->dlogits;
    c->ws.tok = m->msc.dtok;
    if (lg) c->dlogits = m->msc.dlog;
    mtp_rows(m, b, 0, n, hin);
    c->ws.tok = tok;
    c->dlogits = lg;
}

deepinfer_status di_v4_mtp_forward(di_v4_model *m, const di_v4_batch *b, const uint16_t *hidden_in, di_error *err) {
    const di_model_config *c = &m->core.cfg;
    if (m->w.n_mtp < 1) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "this checkpoint has no MTP block");
    if (!hidden_in) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "MTP: no main-model residual given");
    deepinfer_status st = di_core_check_batch(&m->core, b, 1, err);
    if (st) return st;
    size_t hcd = (size_t)c->hc_mult * c->hidden_size;
    for (int r0 = 0; r0 < b->n; r0 += m->core.max_rows) {
        int n = b->n - r0 < m->core.max_rows ? b->n - r0 : m->core.max_rows;
        mtp_rows(m, b, r0, n, hidden_in + (size_t)r0 * hcd);
    }
    return di_exec_sync(&m->core.x, err); /* device backends: the first failed op */
}

int di_v4_mtp_block(const di_v4_model *m) {
    if (m->w.n_mtp < 1) return 0;
    /* the feed row and the chained rows must own distinct ring slots */
    int64_t win = m->core.cfg.sliding_window;
    return win < DI_MTP_MAX_DRAFT ? (int)win : DI_MTP_MAX_DRAFT;
}

/* ---- drafting scratch ---------------------------------------------------------------------- */

deepinfer_status di_v4_mtp_init(di_v4_model *m, di_error *err) {
    di_mtp_scratch *sc = &m->msc;
    const di_model_config *c = &m->core.cfg;
    if (m->w.n_mtp < 1) return DEEPINFER_OK;
    int M = m->core.max_rows;
    size_t G = (size_t)(M < MTP_GROUP ? M : MTP_GROUP), hcd = (size_t)c->hc_mult * c->hidden_size;
    sc->G = (int)G;
    sc->tok = malloc((size_t)M * sizeof *sc->tok);
    sc->pos = malloc((size_t)M * sizeof *sc->pos);
    sc->seq = malloc((size_t)M * sizeof *sc->seq);
    sc->hsrc = malloc((size_t)M * sizeof *sc->hsrc);
    sc->lrows = malloc((size_t)M * sizeof *sc->lrows);
    /* device backends: picks read the logits in a host copy */
    sc->hlog = di_exec_on_device(&m->core.x) ? malloc(G * (size_t)c->vocab_size * sizeof *sc->hlog) : NULL;
    sc->hids = malloc(G * sizeof *sc->hids);
    sc->rdst = malloc(G * DI_MTP_MAX_DRAFT * sizeof *sc->rdst);
    sc->dids = di_dev_alloc(G * sizeof *sc->dids);
    sc->dtok = di_dev_alloc((size_t)M * sizeof *sc->dtok);
    sc->dlog = di_dev_alloc(G * (size_t)c->vocab_size * sizeof *sc->dlog);
    sc->res = di_dev_alloc(G * hcd * 2);
    sc->save = di_dev_alloc(G * DI_MTP_MAX_DRAFT * (size_t)c->head_dim * 2);
    if (!sc->tok || !sc->pos || !sc->seq || !sc->hsrc || !sc->lrows || (di_exec_on_device(&m->core.x) && !sc->hlog) ||
        !sc->hids || !sc->rdst || !sc->dids || !sc->dtok || !sc->dlog || !sc->res || !sc->save)
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the MTP drafting scratch");
    return DEEPINFER_OK;
}

void di_v4_mtp_free(di_v4_model *m) {
    di_mtp_scratch *sc = &m->msc;
    free(sc->tok), free(sc->pos), free(sc->seq), free(sc->hsrc), free(sc->lrows), free(sc->hlog), free(sc->hids);
    free(sc->rdst);
    di_dev_free(sc->dids), di_dev_free(sc->dtok), di_dev_free(sc->dlog), di_dev_free(sc->res), di_dev_free(sc->save);
    memset(sc, 0, sizeof *sc);
}

size_t di_v4_mtp_bytes(const di_v4_model *m) {
    const di_model_config *c = &m->core.cfg;
    if (m->w.n_mtp < 1) return 0;
    size_t M = (size_t)m->core.max_rows, G = (size_t)m->msc.G, hcd = (size_t)c->hc_mult * c->hidden_size;
    return M * (4 + 8 + 2 * sizeof(void *) + 4 + 4) + G * ((size_t)c->vocab_size * 4 + 4 + 4 + hcd * 2) +
           (m->msc.hlog ? G * (size_t)c->vocab_size * 4 : 0) + G * DI_MTP_MAX_DRAFT * (sizeof(void *) + (size_t)c->head_dim * 2);
}

/* ---- the engine's step: feed, then the chain (draft.h) ------------------------------------------ */

static deepinfer_status check_step(const di_v4_model *m, const di_model_draft *d, di_error *err) {
    di_draft_rules r = {.has_drafter = m->w.n_mtp >= 1,
                        .what = "the MTP chain",
                        .block = di_v4_mtp_block(m),
                        .max_context = m->core.max_context,
                        .reads_next = 1};
    return di_model_draft_check(&m->core.cfg, &r, d, err);
}

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* Draft i of the requests req[0 .. nl) from the logits of the pass just run (row l of the
 * batch's logit rows at sc->dlog + l * vocab, backend memory). */
static deepinfer_status pick_rows(di_v4_model *m, const di_model_draft *d, int nl, const int *req, int i,
                                  int block, di_error *err) {
    di_mtp_scratch *sc = &m->msc;
    di_exec *x = &m->core.x;
    int V = (int)m->core.cfg.vocab_size;
    if (di_exec_on_device(x)) {
        if (!d->pick) { /* greedy: a device argmax; only the ids come back */
            di_backend_argmax_rest(x, nl, sc->dlog, V, sc->dids);
            di_copy_d2h(x, sc->hids, sc->dids, (size_t)nl * sizeof *sc->hids);
        } else {
            di_copy_d2h(x, sc->hlog, sc->dlog, (size_t)nl * V * sizeof(float));
        }
    }
    const float *hl = di_exec_on_device(x) ? sc->hlog : sc->dlog; /* host memory on the CPU */
    for (int l = 0; l < nl; l++) {
        int r = req[l];
        int32_t t = di_exec_on_device(x) && !d->pick ? sc->hids[l]
                    : d->pick                        ? d->pick(d->pick_ctx, r, i, hl + (size_t)l * V)
                                                     : argmax(hl + (size_t)l * V, V);
        if (t < 0 || t >= V)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "MTP draft %d of request %d: the pick returned token %d, outside the vocabulary [0,%d)", i,
                                r, t, V);
        d->ids[(size_t)r * block + i] = t;
        if (d->confidence) d->confidence[(size_t)r * block + i] = NAN;
    }
    return DEEPINFER_OK;
}

/* One pass of n queued rows (sc->tok / pos / seq / hsrc), nl of them logit rows (sc->lrows) whose
 * output residuals go to sc->res rows lres[0 .. nl); then draft 0 of their requests lreq. */
static deepinfer_status feed_pass(di_v4_model *m, const di_model_draft *d, int n, int nl, const int *lreq,
                                  const int *lres, int block, di_error *err) {
    di_mtp_scratch *sc = &m->msc;
    di_exec *x = &m->core.x;
    size_t hcd = (size_t)m->core.cfg.hc_mult * m->core.cfg.hidden_size, rb = hcd * 2;
    const uint16_t *hin = sc->hsrc[0];
    for (int i = 1; i < n && hin; i++)
        if (sc->hsrc[i] != sc->hsrc[i - 1] + hcd) hin = NULL;
    if (!hin) { /* the rows' residuals gathered into hbuf, one copy per run of consecutive rows */
        for (int i = 0; i < n;) {
            int j = i + 1;
            while (j < n && sc->hsrc[j] == sc->hsrc[j - 1] + hcd) j++;
            di_copy_2d(x, 1, sc->hsrc[i], 0, m->hbuf + (size_t)i * hcd, 0, (size_t)(j - i) * rb);
            i = j;
        }
        hin = m->hbuf;
    }
    int dev = di_exec_on_device(x);
    di_v4_batch b = {.n = n, .tokens = sc->tok, .pos = sc->pos, .seq = sc->seq, .n_logits = nl, .logit_rows = sc->lrows,
                     .logits = dev ? NULL : sc->dlog, .logits_on_device = dev, .hidden = nl ? m->hbuf : NULL};
    mtp_rows_own(m, &b, n, hin);
    for (int l = 0; l < nl; l++)
        di_copy_2d(x, 1, m->hbuf + (size_t)sc->lrows[l] * hcd, 0, sc->res + (size_t)lres[l] * hcd, 0, rb);
    return nl ? pick_rows(m, d, nl, lreq, 0, block, err) : DEEPINFER_OK;
}

/* The ring slots of positions p+1 .. p+n (n < window) of s's MTP ring: runs[0..2) of (slot, count). */
static int chain_slots(int64_t p, int n, int win, int *slot, int *cnt) {
    int s0 = (int)((p + 1) % win), a = win - s0 < n ? win - s0 : n;
    slot[0] = s0, cnt[0] = a, slot[1] = 0, cnt[1] = n - a;
    return n - a > 0 ? 2 : 1;
}

/* Feed and chain the requests g[0 .. G) (each with n_feed > 0). */
static deepinfer_status mtp_group(di_v4_model *m, const di_model_draft *d, const int *g, int G, int block,
                                  di_error *err) {
    di_mtp_scratch *sc = &m->msc;
    const di_model_config *c = &m->core.cfg;
    di_exec *x = &m->core.x;
    int win = (int)c->sliding_window, hd = (int)c->head_dim, M = m->core.max_rows, layer = c->n_layers;
    size_t hcd = (size_t)c->hc_mult * c->hidden_size, rb = hcd * 2;
    int64_t p[MTP_GROUP];
    int lreq[MTP_GROUP], lres[MTP_GROUP];
    deepinfer_status st = DEEPINFER_OK, e;
    /* feed: every request's rows (only the last `window`: older ring slots are overwritten and no kept
     * row's window reaches them), in passes of max_rows rows; row p of a drafting request gives draft 0.
     * A failed pick stops the drafts, not the feed (the state stays whole). */
    int n = 0, nl = 0;
    for (int a = 0; a < G; a++) {
        int r = g[a], nf = d->n_feed[r];
        di_seq_state *s = d->seq[r];
        int64_t q0 = s->mtp_tokens;
        p[a] = q0 + nf - 1;
        for (int i = nf > win ? nf - win : 0; i < nf; i++) {
            if (n == M) {
                e = feed_pass(m, d, n, nl, lreq, lres, block, st ? NULL : err);
                st = st ? st : e;
                n = nl = 0;
            }
            sc->tok[n] = d->next[r][i], sc->pos[n] = q0 + i, sc->seq[n] = s;
            sc->hsrc[n] = d->hidden[r] + (size_t)i * hcd;
            if (i == nf - 1 && d->k[r] > 0) sc->lrows[nl] = n, lreq[nl] = r, lres[nl] = a, nl++;
            n++;
        }
    }
    if (n) {
        e = feed_pass(m, d, n, nl, lreq, lres, block, st ? NULL : err);
        st = st ? st : e;
    }
    /* the chain's ring slots saved (positions p+1 .. p+k-1) */
    int ns = 0;
    for (int a = 0; a < G && !st; a++) {
        int k = d->k[g[a]];
        if (k < 2) continue;
        uint16_t *ring = d->seq[g[a]]->layers[layer].ring;
        int slot[2], cnt[2], nr = chain_slots(p[a], k - 1, win, slot, cnt);
        for (int q = 0; q < nr; q++) {
            di_copy_2d(x, 1, ring + (size_t)slot[q] * hd, 0, sc->save + (size_t)ns * hd, 0, (size_t)cnt[q] * hd * 2);
            for (int t = 0; t < cnt[q]; t++) sc->rdst[ns++] = ring + (size_t)(slot[q] + t) * hd;
        }
    }
    /* the chain: step j runs the requests wanting more than j + 1 drafts, one row each */
    int act[MTP_GROUP], prev[MTP_GROUP];
    for (int j = 0; !st; j++) {
        int na = 0;
        for (int a = 0; a < G; a++)
            if (d->k[g[a]] > j + 1) act[na++] = a;
        if (!na) break;
        const uint16_t *hin;
        if (j == 0) { /* the feed's residuals of row p (sc->res rows by group index) */
            int same = 1;
            for (int q = 0; q < na; q++) same &= act[q] == q;
            if (same) hin = sc->res;
            else {
                for (int q = 0; q < na; q++)
                    di_copy_2d(x, 1, sc->res + (size_t)act[q] * hcd, 0, m->hbuf + (size_t)q * hcd, 0, rb);
                hin = m->hbuf;
            }
        } else { /* the previous step's outputs in hbuf, kept rows moved down in order (sources >= destinations) */
            int src = 0;
            for (int q = 0; q < na; q++) {
                while (prev[src] != act[q]) src++;
                if (src != q) di_copy_2d(x, 1, m->hbuf + (size_t)src * hcd, 0, m->hbuf + (size_t)q * hcd, 0, rb);
            }
            hin = m->hbuf;
        }
        int lr[MTP_GROUP];
        for (int q = 0; q < na; q++) {
            int r = g[act[q]];
            sc->tok[q] = d->ids[(size_t)r * block + j], sc->pos[q] = p[act[q]] + 1 + j, sc->seq[q] = d->seq[r];
            sc->lrows[q] = q, lr[q] = r;
        }
        int dev = di_exec_on_device(x);
        di_v4_batch b = {.n = na, .tokens = sc->tok, .pos = sc->pos, .seq = sc->seq, .n_logits = na,
                         .logit_rows = sc->lrows, .logits = dev ? NULL : sc->dlog, .logits_on_device = dev,
                         .hidden = m->hbuf};
        mtp_rows_own(m, &b, na, hin);
        st = pick_rows(m, d, na, lr, j + 1, block, err);
        memcpy(prev, act, sizeof(int) * (size_t)na);
    }
    /* the speculative slots restored; the drafter continues after p */
    if (ns) di_scatter_rows(x, ns, NULL, sc->save, (size_t)hd, sc->rdst, hd);
    for (int a = 0; a < G; a++) d->seq[g[a]]->mtp_tokens = p[a] + 1;
    return st;
}

deepinfer_status di_v4_mtp_step(di_v4_model *m, const di_model_draft *d, di_error *err) {
    deepinfer_status st = check_step(m, d, err);
    if (st) return st;
    int block = di_v4_mtp_block(m), g[MTP_GROUP], G = 0;
    for (int r = 0; r < d->n && !st; r++) {
        if (d->n_feed[r] > 0) g[G++] = r;
        if (G == m->msc.G || (r + 1 == d->n && G > 0)) {
            st = mtp_group(m, d, g, G, block, err);
            G = 0;
        }
    }
    if (st) {
        di_exec_sync(&m->core.x, NULL);
        return st;
    }
    return di_exec_sync(&m->core.x, err);
}
