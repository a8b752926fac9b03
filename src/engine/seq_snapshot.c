/* seq_snapshot.c — snapshot/rollback and copy of sequence state (seq_snapshot.h). */
#include "engine/seq_snapshot.h"

#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

typedef struct snap_header {
    int64_t n_tokens, mtp_tokens;
    int32_t ikey_pub;
    di_engram_seq engram;
    int k;
} snap_header;

static size_t ring_row_bytes(const di_model_config *cfg) { return (size_t)cfg->head_dim * 2; }

static size_t cmp_bytes(const di_cmp_state *c) { return (size_t)c->slots * (size_t)c->width * 4; }

size_t di_seq_snapshot_bytes(const di_model_config *cfg, int max_tokens) {
    /* lay one state out (once, at engine start) to read its buffer sizes; the
     * buffers block is only addressed, never touched (it may be any memory) */
    di_seq_layout lay;
    di_seq_layout_get(cfg, 0, &lay);
    size_t hb = di_seq_header_bytes(cfg);
    void *hdr = aligned_alloc(64, hb), *bufs = aligned_alloc(64, lay.fixed_bytes - hb);
    if (!hdr || !bufs) {
        free(hdr);
        free(bufs);
        return sizeof(snap_header) + lay.fixed_bytes; /* a safe bound: rings and buffers are part of it */
    }
    const di_seq_state *s = di_seq_place_split(cfg, hdr, bufs);
    int k = max_tokens < cfg->sliding_window ? max_tokens : (int)cfg->sliding_window;
    size_t b = sizeof(snap_header);
    for (int l = 0; l < s->n_layers; l++) {
        const di_layer_state *ls = &s->layers[l];
        if (ls->ring) b += (size_t)k * ring_row_bytes(cfg);
        b += 2 * cmp_bytes(&ls->cmp) + 2 * cmp_bytes(&ls->icmp);
    }
    free(hdr);
    free(bufs);
    return b;
}

/* The ring slot a layer's j-th appended token overwrites. */
static int64_t ring_slot(const di_seq_state *s, const di_model_config *cfg, int l, int j) {
    int64_t base = l < cfg->n_layers ? s->n_tokens : s->mtp_tokens;
    return (base + j) % cfg->sliding_window;
}

/* Ring rows of the next k tokens of layer l <-> the snapshot's k rows at
 * `snap` (to_snap: ring -> snapshot). The slots wrap at most once: one copy
 * per contiguous run. The ring and the snapshot room are backend memory,
 * so this is an op on the state exec (seq_state.h), ordered with the steps. */
static void ring_rows(const di_seq_state *s, const di_model_config *cfg, int l, int k, unsigned char *snap, int to_snap) {
    size_t rb = ring_row_bytes(cfg);
    unsigned char *ring = (unsigned char *)s->layers[l].ring;
    for (int j = 0; j < k;) {
        int64_t slot = ring_slot(s, cfg, l, j);
        int n = k - j;
        if (slot + n > cfg->sliding_window) n = (int)(cfg->sliding_window - slot);
        unsigned char *r = ring + (size_t)slot * rb, *q = snap + (size_t)j * rb;
        di_copy_2d(di_dev_exec(), 1, to_snap ? r : q, 0, to_snap ? q : r, 0, (size_t)n * rb);
        j += n;
    }
}

void di_seq_snapshot_take(const di_seq_state *s, const di_model_config *cfg, int k, void *room) {
    unsigned char *p = room;
    if (k > cfg->sliding_window) k = (int)cfg->sliding_window;
    snap_header h = {s->n_tokens, s->mtp_tokens, s->ikey_pub, s->engram, k};
    di_copy_h2d(di_dev_exec(), p, &h, sizeof h); /* the room is backend memory */
    p += sizeof h;
    size_t rb = ring_row_bytes(cfg);
    for (int l = 0; l < s->n_layers; l++) {
        const di_layer_state *ls = &s->layers[l];
        if (ls->ring) ring_rows(s, cfg, l, k, p, 1), p += (size_t)k * rb;
        const di_cmp_state *c[2] = {&ls->cmp, &ls->icmp};
        for (int i = 0; i < 2; i++) {
            size_t b = cmp_bytes(c[i]);
            if (!b) continue;
            di_copy_2d(di_dev_exec(), 1, c[i]->kv, 0, p, 0, b), p += b;
            di_copy_2d(di_dev_exec(), 1, c[i]->score, 0, p, 0, b), p += b;
        }
    }
}

void di_seq_snapshot_restore(di_seq_state *s, const di_model_config *cfg, const void *room) {
    const unsigned char *p = room;
    snap_header h;
    di_copy_d2h(di_dev_exec(), &h, p, sizeof h); /* waits for the copies queued before it */
    p += sizeof h;
    s->n_tokens = h.n_tokens;
    s->mtp_tokens = h.mtp_tokens;
    s->ikey_pub = h.ikey_pub;
    s->engram = h.engram;
    size_t rb = ring_row_bytes(cfg);
    for (int l = 0; l < s->n_layers; l++) {
        di_layer_state *ls = &s->layers[l];
        if (ls->ring) ring_rows(s, cfg, l, h.k, (unsigned char *)p, 0), p += (size_t)h.k * rb;
        di_cmp_state *c[2] = {&ls->cmp, &ls->icmp};
        for (int i = 0; i < 2; i++) {
            size_t b = cmp_bytes(c[i]);
            if (!b) continue;
            di_copy_2d(di_dev_exec(), 1, p, 0, c[i]->kv, 0, b), p += b;
            di_copy_2d(di_dev_exec(), 1, p, 0, c[i]->score, 0, b), p += b;
        }
    }
}

/* Row-store rows [0, rows): one strided copy per run of rows that stays within a page on both sides. */
static void copy_rows(di_rowstore *d, const di_rowstore *s, int64_t rows) {
    size_t rb = (size_t)s->row_elems * 2;
    for (int64_t j = 0; j < rows;) {
        int64_t n = rows - j, a = s->page_rows - j % s->page_rows, b = d->page_rows - j % d->page_rows;
        if (a < n) n = a;
        if (b < n) n = b;
        di_copy_2d(di_dev_exec(), 1, di_rowstore_row(s, j), 0, di_rowstore_row(d, j), 0, (size_t)n * rb);
        j += n;
    }
}

deepinfer_status di_seq_copy(di_seq_state *dst, const di_seq_state *src, const di_model_config *cfg, di_error *err) {
    if (dst->n_layers != src->n_layers)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "copying state between different models");
    for (int l = 0; l < src->n_layers; l++) {
        int64_t rows = di_seq_rows_needed(cfg, l, l < cfg->n_layers ? src->n_tokens : src->mtp_tokens);
        const di_layer_state *a = &src->layers[l];
        const di_layer_state *b = &dst->layers[l];
        if ((a->ckv.row_elems && rows > di_rowstore_capacity(&b->ckv)) ||
            (a->ikey.row_elems && rows > di_rowstore_capacity(&b->ikey)))
            return di_error_set(err, DEEPINFER_ERR_LIMIT, "copy: layer %d needs %lld rows, the target has pages for %lld",
                                l, (long long)rows, (long long)di_rowstore_capacity(&b->ckv));
    }
    size_t ring = (size_t)cfg->sliding_window * ring_row_bytes(cfg);
    for (int l = 0; l < src->n_layers; l++) {
        const di_layer_state *a = &src->layers[l];
        di_layer_state *b = &dst->layers[l];
        if (a->ring && b->ring) di_copy_2d(di_dev_exec(), 1, a->ring, 0, b->ring, 0, ring);
        const di_cmp_state *ca[2] = {&a->cmp, &a->icmp};
        di_cmp_state *cb[2] = {&b->cmp, &b->icmp};
        for (int i = 0; i < 2; i++) {
            size_t n = cmp_bytes(ca[i]);
            if (!n) continue;
            di_copy_2d(di_dev_exec(), 1, ca[i]->kv, 0, cb[i]->kv, 0, n);
            di_copy_2d(di_dev_exec(), 1, ca[i]->score, 0, cb[i]->score, 0, n);
        }
        int64_t rows = di_seq_rows_needed(cfg, l, l < cfg->n_layers ? src->n_tokens : src->mtp_tokens);
        if (a->ckv.row_elems) copy_rows(&b->ckv, &a->ckv, rows);
        if (a->ikey.row_elems) copy_rows(&b->ikey, &a->ikey, rows);
    }
    dst->n_tokens = src->n_tokens;
    dst->mtp_tokens = src->mtp_tokens;
    dst->ikey_pub = src->ikey_pub;
    dst->engram = src->engram;
    return DEEPINFER_OK;
}
