/* seq_snapshot.c — snapshot/rollback and copy of sequence state (seq_snapshot.h). */
#include "engine/seq_snapshot.h"

#include <string.h>

#include "ops/ops.h"

typedef struct snap_header {
    int64_t n_tokens;     /* P: the position the snapshot was taken at */
    int32_t ikey_pub;     /* its value at P (the Engram history is truncated in place, not saved) */
    int k;                /* tokens the snapshot covers */
    int k_ring;           /* ring rows saved per backbone layer: min(k, window) */
} snap_header;

static size_t ring_row_bytes(const di_model_config *cfg) { return (size_t)cfg->head_dim * 2; }

static size_t cmp_bytes(const di_cmp_state *c) { return (size_t)c->slots * (size_t)c->width * 4; }

static int ring_rows_for(const di_model_config *cfg, int k) {
    if (k < 0) k = 0;
    return k < cfg->sliding_window ? k : (int)cfg->sliding_window;
}

size_t di_seq_snapshot_bytes(const di_model_config *cfg, int max_tokens) {
    /* every layer of the layout has a ring (seq_state.c); only the backbone's are saved */
    return sizeof(snap_header) + (size_t)cfg->n_layers * (size_t)ring_rows_for(cfg, max_tokens) * ring_row_bytes(cfg);
}

/* Ring rows of backbone layer l for positions pos0 .. pos0+n-1 <-> n consecutive snapshot rows at `snap`
 * (to_snap: ring -> snapshot); n <= window, so the slots wrap at most once: one copy per contiguous run.
 * The ring and the snapshot room are backend memory, so this is an op on the state exec (seq_state.h),
 * ordered with the steps. */
static void ring_rows(const di_seq_state *s, const di_model_config *cfg, int l, int64_t pos0, int n,
                      unsigned char *snap, int to_snap) {
    size_t rb = ring_row_bytes(cfg);
    unsigned char *ring = (unsigned char *)s->layers[l].ring;
    for (int j = 0; j < n;) {
        int64_t slot = (pos0 + j) % cfg->sliding_window;
        int run = n - j;
        if (slot + run > cfg->sliding_window) run = (int)(cfg->sliding_window - slot);
        unsigned char *r = ring + (size_t)slot * rb, *q = snap + (size_t)j * rb;
        di_copy_2d(di_dev_exec(), 1, to_snap ? r : q, 0, to_snap ? q : r, 0, (size_t)run * rb);
        j += run;
    }
}

void di_seq_snapshot_take(const di_seq_state *s, const di_model_config *cfg, int k, void *room) {
    unsigned char *p = room;
    snap_header h = {.n_tokens = s->n_tokens, .ikey_pub = s->ikey_pub, .k = k < 0 ? 0 : k,
                     .k_ring = ring_rows_for(cfg, k)};
    di_copy_h2d(di_dev_exec(), p, &h, sizeof h); /* the room is backend memory */
    p += sizeof h;
    size_t rb = ring_row_bytes(cfg);
    for (int l = 0; l < cfg->n_layers; l++)
        if (s->layers[l].ring) ring_rows(s, cfg, l, s->n_tokens, h.k_ring, p, 1), p += (size_t)h.k_ring * rb;
}

/* V4.1 released-reference emulation: seq->ikey_pub after a step over positions [P, n_keep) from `pub`
 * (its value at P). A key owner emits at position t when (t + 1) mod ratio == 0 (compressor.c), the
 * step runs the layers in order, so the last owner with an emission in the range wins. */
static int32_t ikey_pub_after(const di_model_config *cfg, int32_t pub, int64_t P, int64_t n_keep) {
    if (cfg->arch != DI_ARCH_V41) return pub;
    for (int l = 0; l < cfg->n_layers; l++) {
        const di_layer_cfg *L = &cfg->layers[l];
        if (!L->has_compressor || !L->has_index_keys || L->ratio < 1) continue;
        if (n_keep / L->ratio > P / L->ratio) pub = l; /* some t + 1 in [P + 1, n_keep] is a multiple of ratio */
    }
    return pub;
}

/* restore_to with n_keep < 0: back to the snapshot's position. */
static deepinfer_status restore(di_seq_state *s, const di_model_config *cfg, const void *room, int64_t n_keep,
                                di_error *err) {
    const deepinfer_status E = DEEPINFER_ERR_INVALID_ARGUMENT;
    const unsigned char *p = room;
    snap_header h;
    di_copy_d2h(di_dev_exec(), &h, p, sizeof h); /* waits for the copies queued before it */
    p += sizeof h;
    int64_t P = h.n_tokens;
    if (n_keep < 0) n_keep = P;
    if (s->n_tokens < P || s->n_tokens > P + h.k)
        return di_error_set(err, E, "snapshot restore: the sequence is at %lld positions, the snapshot covers %lld..%lld "
                            "(taken at %lld for %d tokens)",
                            (long long)s->n_tokens, (long long)P, (long long)(P + h.k), (long long)P, h.k);
    if (n_keep < P || n_keep > s->n_tokens)
        return di_error_set(err, E, "snapshot restore: n_keep %lld must lie in [%lld, %lld] (the snapshot's position .. "
                            "the positions the step ran)",
                            (long long)n_keep, (long long)P, (long long)s->n_tokens);
    int64_t rejected = P + h.k - n_keep;
    if (rejected > cfg->max_draft)
        return di_error_set(err, E, "snapshot restore: discarding %lld of %d rows, but the state's compressor buffers "
                            "protect only %d (load the model with max_draft >= %lld)",
                            (long long)rejected, h.k, cfg->max_draft, (long long)rejected);
    if (rejected > 0 && n_keep > P && h.k > h.k_ring)
        return di_error_set(err, E, "snapshot restore: a partial rollback of a %d-token step needs steps of at most the "
                            "window (%lld tokens)", h.k, (long long)cfg->sliding_window);
    /* The Engram history: the host copy is truncated in place; the ops' class ring needs nothing
     * (seq_state.h di_seq_engram_ring: the discarded positions' slots are never read). */
    di_engram_seq eng = s->engram;
    if (cfg->n_engram_layer_ids > 0) {
        deepinfer_status st = di_engram_seq_truncate(&eng, n_keep, (int)cfg->engram_max_ngram_size, err);
        if (st) return st;
    }
    /* the ring slots of the discarded positions [n_keep, P + k_ring) come back: snapshot rows n_keep - P .. */
    size_t rb = ring_row_bytes(cfg);
    int j0 = (int)(n_keep - P), n = h.k_ring - j0;
    for (int l = 0; l < cfg->n_layers; l++) {
        if (!s->layers[l].ring) continue;
        if (n > 0) ring_rows(s, cfg, l, n_keep, n, (unsigned char *)p + (size_t)j0 * rb, 0);
        p += (size_t)h.k_ring * rb;
    }
    s->n_tokens = n_keep;
    s->ikey_pub = ikey_pub_after(cfg, h.ikey_pub, P, n_keep);
    s->engram = eng;
    return DEEPINFER_OK;
}

deepinfer_status di_seq_snapshot_restore_to(di_seq_state *s, const di_model_config *cfg, const void *room,
                                            int64_t n_keep, di_error *err) {
    if (n_keep < 0)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "snapshot restore: n_keep %lld is negative",
                            (long long)n_keep);
    return restore(s, cfg, room, n_keep, err);
}

deepinfer_status di_seq_snapshot_restore(di_seq_state *s, const di_model_config *cfg, const void *room, di_error *err) {
    return restore(s, cfg, room, -1, err);
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
    if (src->eng_ring && dst->eng_ring && src->eng_ring_len == dst->eng_ring_len)
        di_copy_2d(di_dev_exec(), 1, src->eng_ring, 0, dst->eng_ring, 0, (size_t)src->eng_ring_len * sizeof(int32_t));
    dst->engram = src->engram;
    return DEEPINFER_OK;
}
