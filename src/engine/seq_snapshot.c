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
    /* lay one state out (once, at engine start) to read its buffer sizes */
    di_seq_layout lay;
    di_seq_layout_get(cfg, 0, &lay);
    void *mem = aligned_alloc(64, (lay.fixed_bytes + 63) & ~(size_t)63);
    if (!mem) return sizeof(snap_header) + lay.fixed_bytes; /* a safe bound: rings and buffers are part of it */
    const di_seq_state *s = di_seq_init(cfg, mem);
    int k = max_tokens < cfg->sliding_window ? max_tokens : (int)cfg->sliding_window;
    size_t b = sizeof(snap_header);
    for (int l = 0; l < s->n_layers; l++) {
        const di_layer_state *ls = &s->layers[l];
        if (ls->ring) b += (size_t)k * ring_row_bytes(cfg);
        b += 2 * cmp_bytes(&ls->cmp) + 2 * cmp_bytes(&ls->icmp);
    }
    free(mem);
    return b;
}

/* The ring slot a layer's j-th appended token overwrites. */
static int64_t ring_slot(const di_seq_state *s, const di_model_config *cfg, int l, int j) {
    int64_t base = l < cfg->n_layers ? s->n_tokens : s->mtp_tokens;
    return (base + j) % cfg->sliding_window;
}

void di_seq_snapshot_take(const di_seq_state *s, const di_model_config *cfg, int k, void *room) {
    unsigned char *p = room;
    if (k > cfg->sliding_window) k = (int)cfg->sliding_window;
    snap_header h = {s->n_tokens, s->mtp_tokens, s->ikey_pub, s->engram, k};
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    size_t rb = ring_row_bytes(cfg);
    for (int l = 0; l < s->n_layers; l++) {
        const di_layer_state *ls = &s->layers[l];
        if (ls->ring)
            for (int j = 0; j < k; j++, p += rb)
                memcpy(p, (const unsigned char *)ls->ring + (size_t)ring_slot(s, cfg, l, j) * rb, rb);
        const di_cmp_state *c[2] = {&ls->cmp, &ls->icmp};
        for (int i = 0; i < 2; i++) {
            size_t b = cmp_bytes(c[i]);
            if (!b) continue;
            memcpy(p, c[i]->kv, b), p += b;
            memcpy(p, c[i]->score, b), p += b;
        }
    }
}

void di_seq_snapshot_restore(di_seq_state *s, const di_model_config *cfg, const void *room) {
    const unsigned char *p = room;
    snap_header h;
    memcpy(&h, p, sizeof h);
    p += sizeof h;
    s->n_tokens = h.n_tokens;
    s->mtp_tokens = h.mtp_tokens;
    s->ikey_pub = h.ikey_pub;
    s->engram = h.engram;
    size_t rb = ring_row_bytes(cfg);
    for (int l = 0; l < s->n_layers; l++) {
        di_layer_state *ls = &s->layers[l];
        if (ls->ring)
            for (int j = 0; j < h.k; j++, p += rb)
                memcpy((unsigned char *)ls->ring + (size_t)ring_slot(s, cfg, l, j) * rb, p, rb);
        di_cmp_state *c[2] = {&ls->cmp, &ls->icmp};
        for (int i = 0; i < 2; i++) {
            size_t b = cmp_bytes(c[i]);
            if (!b) continue;
            memcpy(c[i]->kv, p, b), p += b;
            memcpy(c[i]->score, p, b), p += b;
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
