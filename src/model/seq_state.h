/*
 * seq_state.h — the per-sequence inference state of a V4-family model
 * (architecture.md §6.2), laid out so an engine can pool it:
 *
 *   fixed part (per layer, size known from the config):
 *     SWA ring      [window][head_dim] bf16, slot = position mod window
 *     compressor    kv / score buffers [slots][width] fp32 (main and
 *                   indexer), scores already include `ape`; -inf = empty.
 *                   slots = G groups of `ratio`: position t's slot is
 *                   ((t / ratio) mod G) * ratio + t mod ratio, so the
 *                   rows a rollback discards (up to cfg->max_draft) never
 *                   overwrite what a kept position still needs (seq_state.c
 *                   proves G = (overlap ? 1 : 0) + ceil((ratio - 1 +
 *                   max_draft) / ratio) enough; max_draft 0: ratio slots,
 *                   2 * ratio with overlap)
 *   paged part (grows with the context):
 *     compressed KV rows [head_dim] bf16 and index-key rows
 *     [index_head_dim] bf16, addressed through a page table of
 *     `page_rows`-row pages that the caller allocates.
 *
 * Nothing here allocates during a forward step: di_seq_init lays the state
 * out in caller memory, and a step that would need a compressed row beyond
 * the pages provided fails up front (before touching the state) with
 * DEEPINFER_ERR_LIMIT. di_seq_create is a convenience that allocates one
 * sequence of a given capacity in one block (CLI, tests).
 *
 * The drafter stages (V4 MTP, V4.1 DSpark) have their own rings and
 * position counter. V4.1 adds the Engram class-id history and, for the
 * released-reference emulation, which layer's index keys were published
 * last. The fixed part holds no pointer outside itself and the caller's
 * pages: a snapshot is a byte copy of it, restored into the same memory.
 */
#ifndef DI_MODEL_SEQ_STATE_H
#define DI_MODEL_SEQ_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/engram_hash.h"
#include "util/error.h"

typedef struct di_rowstore {
    int row_elems;     /* bf16 values per row */
    int page_rows;     /* rows per page */
    int n_pages;       /* pages available */
    uint16_t **pages;  /* page table (caller memory) */
} di_rowstore;

static inline uint16_t *di_rowstore_row(const di_rowstore *s, int64_t j) {
    return s->pages[j / s->page_rows] + (size_t)(j % s->page_rows) * (size_t)s->row_elems;
}

static inline int64_t di_rowstore_capacity(const di_rowstore *s) { return (int64_t)s->n_pages * s->page_rows; }

typedef struct di_cmp_state {
    int slots, width;  /* 0 when the layer has no such compressor */
    float *kv, *score; /* [slots][width] */
} di_cmp_state;

typedef struct di_layer_state {
    uint16_t *ring;    /* [window][head_dim]; NULL if the layer has no ring */
    di_cmp_state cmp;  /* main compressor */
    di_cmp_state icmp; /* indexer compressor (V4 ratio 4) */
    di_rowstore ckv;   /* compressed KV rows (row_elems 0 when none) */
    di_rowstore ikey;  /* index-key rows */
} di_layer_state;

typedef struct di_seq_state {
    int64_t n_tokens;  /* positions 0..n_tokens-1 have been processed by the backbone */
    int64_t mtp_tokens;/* positions processed by the drafter stage(s): V4 MTP inputs, V4.1
                          DSpark context rows fed (di_v41_dspark_feed) */
    int32_t ikey_pub;  /* V4.1 released-reference emulation: the index-key owner layer that
                          last emitted a row (the reference's shared index_k), -1 = none */
    di_engram_seq engram; /* V4.1 Engram: positions hashed (len) and, for the host hash path
                             (dsv41.c with the tables in host memory), the class-id history */
    int32_t *eng_ring;    /* V4.1 Engram class ring of the ops' hash (ops.h di_engram_hash_rows):
                             eng_ring_len int32 in the buffers' block (backend memory), the class of
                             position p at p mod eng_ring_len (di_seq_engram_ring); NULL without Engram */
    int eng_ring_len;
    int n_layers;      /* backbone layers + drafter stages */
    di_layer_state *layers;
    void *owned;       /* memory owned by di_seq_create, else NULL */
    void *owned_pages; /* di_seq_create's row-store pages (backend memory, di_dev_alloc), else NULL */
    void *owned_bufs;  /* di_seq_create's rings and compressor buffers (backend memory), else NULL */
} di_seq_state;

/* Sizes for laying out one sequence. */
typedef struct di_seq_layout {
    size_t fixed_bytes;      /* ring + compressor buffers + layer table, all layers */
    int page_rows;           /* rows per page */
    size_t page_bytes_kv;    /* bytes of one compressed-KV page */
    size_t page_bytes_ikey;  /* bytes of one index-key page */
} di_seq_layout;

void di_seq_layout_get(const di_model_config *cfg, int page_rows, di_seq_layout *out);

/* The largest cfg->max_draft (a load option: di_v4_options.max_draft). */
#define DI_SEQ_MAX_DRAFT 16

/* Check a load's max_draft and set cfg->max_draft: [0, DI_SEQ_MAX_DRAFT],
 * and with Engram no more than its history can roll back
 * (di_engram_seq_truncate). DEEPINFER_ERR_INVALID_ARGUMENT otherwise. Call
 * before laying out any sequence: it sizes the compressor buffers. */
deepinfer_status di_seq_set_max_draft(di_model_config *cfg, int max_draft, di_error *err);

/* Slots of a sequence's Engram class ring (0 without Engram): (max_ngram - 1)
 * + max_draft + 1. A step over positions [P, P + k) of a sequence hashes each
 * position from the classes of the max_ngram - 1 positions before it, which
 * are rows of the step or ring slots written by earlier steps, and then
 * writes the classes of its last min(k, R) positions at slot position mod R.
 * A speculative rollback to n_keep >= P discards at most max_draft of them
 * (docs/speculative.md; seq_snapshot.c) and copies nothing back: the next
 * step reads positions n_keep - (max_ngram - 1) .. n_keep - 1 >= P + k -
 * max_draft - (max_ngram - 1) > P + k - R, so no other position of
 * [P - (max_ngram - 1), P + k) shares a slot with one of them (two positions
 * share a slot only R apart) and the discarded rows' classes, whatever they
 * were, are never read (architecture.md §5.8: only the last max_ngram - 1
 * classes are needed). Image-span DEAD marks would be kept the same way. */
int di_seq_engram_ring(const di_model_config *cfg);

/* Groups of `ratio` slots layer `layer`'s gated compressor buffers hold
 * (the layout above; all sequences of a model share it); 0 without one. */
int di_seq_cmp_groups(const di_model_config *cfg, int layer);

/* Compressed rows a layer holds after n tokens (n / ratio; 0 without a compressor). */
int64_t di_seq_rows_needed(const di_model_config *cfg, int layer, int64_t n_tokens);

/* Lay a sequence out in caller memory `mem` (64-byte aligned, at least
 * layout.fixed_bytes) and reset it. Its row stores start with no pages:
 * attach them with di_seq_set_pages. Returns the state (inside `mem`). */
di_seq_state *di_seq_init(const di_model_config *cfg, void *mem);

/* The split layout (an engine's state pool): the header (di_seq_state and
 * its layer table, read and written by the host) and the rings / compressor
 * buffers (read and written only by ops, so they may live in backend memory,
 * di_dev_alloc) in separate blocks. di_seq_header_bytes is the header's
 * share of layout.fixed_bytes, the rest (fixed_bytes - header) is the
 * buffers'. */
size_t di_seq_header_bytes(const di_model_config *cfg);

/* Lay a sequence out with its header in host memory `hdr` (64-byte aligned,
 * di_seq_header_bytes) and its buffers in `bufs` (64-byte aligned, backend
 * memory, fixed_bytes - di_seq_header_bytes), without touching `bufs`. */
di_seq_state *di_seq_place_split(const di_model_config *cfg, void *hdr, void *bufs);

/* di_seq_place_split, then reset (ops on di_dev_exec(): device fills on a
 * device backend). */
di_seq_state *di_seq_init_split(const di_model_config *cfg, void *hdr, void *bufs);

/* Attach a page table to layer `layer`'s compressed-KV store (`ikey` = 0) or
 * index-key store (`ikey` = 1). `pages` stays owned by the caller; each page
 * holds page_rows rows of the store's row size. */
void di_seq_set_pages(di_seq_state *s, int layer, int ikey, uint16_t **pages, int n_pages, int page_rows);

/* Allocate one sequence able to hold `max_tokens` positions. */
deepinfer_status di_seq_create(const di_model_config *cfg, int64_t max_tokens, di_seq_state **out, di_error *err);
void di_seq_destroy(di_seq_state *s);

/* Forget everything (position 0, empty rings and compressor buffers).
 * Pages stay attached. */
void di_seq_reset(di_seq_state *s, const di_model_config *cfg);

#endif
