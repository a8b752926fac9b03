/*
 * state_pool.h — where sequences' model state lives: a slot pool and a page
 * pool, both sized once when the engine opens (no allocation afterwards).
 *
 *   slot   the fixed part of one sequence (seq_state.h: SWA rings,
 *          compressor partial groups, per layer) plus its page tables and,
 *          when drafts are enabled, room for one snapshot (seq_snapshot.h).
 *          One slot per running sequence: max_num_seqs slots. A slot is
 *          split (seq_state.h di_seq_init_split): its header (di_seq_state,
 *          layer table) and page tables in host memory, which the host
 *          reads and writes; its rings, compressor buffers and snapshot room
 *          in backend memory (di_dev_alloc), which only ops touch, so on a
 *          device backend the state lives on the device. On the CPU backend
 *          both are host memory.
 *   page   page_bytes of compressed rows. Every page has the same size; a
 *          page serves a layer's compressed-KV store (page_rows_kv rows of
 *          head_dim bf16) or its index-key store (page_rows_ikey rows of
 *          index_head_dim bf16), so one free list serves both.
 *
 * A sequence grows by attaching pages to its layers' page tables
 * (di_pool_grow); releasing its slot returns every page. Which sequence gets
 * pages, and who is preempted when they run out, is the scheduler's call.
 *
 * The pool only does bookkeeping of the state memory; resetting or copying
 * a slot's contents is a device operation (devq.h), ordered with the steps.
 */
#ifndef DI_ENGINE_STATE_POOL_H
#define DI_ENGINE_STATE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/seq_state.h"
#include "util/error.h"

/* Sizes implied by a model config; computed before any allocation. */
typedef struct di_pool_geom {
    int n_layers;            /* backbone layers + drafter stages */
    int64_t max_tokens;      /* max_model_len: the page tables' reach */
    size_t fixed_bytes;      /* seq_state fixed part (header + buffers) */
    size_t hdr_bytes;        /* its header share (host) */
    size_t page_bytes;
    int rows_kv, rows_ikey;  /* rows per page for each store */
    size_t table_entries;    /* page-table entries per slot (all layers, both stores) */
    size_t snapshot_bytes;   /* snapshot room per slot (0 without drafts) */
    size_t slot_bytes;       /* fixed + tables + snapshot, 64-byte aligned: host_slot_bytes + dev_slot_bytes */
    size_t host_slot_bytes;  /* header + page tables (host memory) */
    size_t dev_slot_bytes;   /* rings + compressor buffers + snapshot room (backend memory) */
} di_pool_geom;

/* Geometry for `cfg` with page_rows compressed-KV rows per page (0 = 64),
 * sequences up to max_tokens, and snapshots of max_draft tokens. */
deepinfer_status di_pool_geom_compute(const di_model_config *cfg, int page_rows, int64_t max_tokens, int max_draft,
                                      di_pool_geom *g, di_error *err);

/* Pages a sequence of n_tokens needs in all (every compressed layer). */
int64_t di_pool_geom_pages_for(const di_model_config *cfg, const di_pool_geom *g, int64_t n_tokens);

typedef struct di_state_pool {
    const di_model_config *cfg;
    di_pool_geom g;
    int n_slots;
    unsigned char *slot_mem;    /* n_slots * host_slot_bytes: headers, page tables (host) */
    unsigned char *buf_mem;     /* n_slots * dev_slot_bytes: rings, compressor buffers, snapshots (backend) */
    int *slot_free;             /* stack of free slot ids */
    int n_slot_free;
    int64_t *slot_pages;        /* pages attached per slot */
    size_t *tab_off_kv, *tab_off_ikey; /* per layer: offset (entries) of its page table in a slot's tables */
    int *cap_kv, *cap_ikey;     /* per layer: page-table capacity */
    int64_t n_pages;
    unsigned char *page_mem;    /* n_pages * page_bytes */
    int64_t *page_free;         /* stack of free page ids */
    int64_t n_page_free;
    int64_t pages_peak;         /* most pages in use at once */
} di_state_pool;

/* Allocate n_slots slots and n_pages pages for geometry g (from
 * di_pool_geom_compute on the same cfg, which must outlive the pool). */
deepinfer_status di_pool_init(di_state_pool *p, const di_model_config *cfg, const di_pool_geom *g, int n_slots,
                              int64_t n_pages, di_error *err);
void di_pool_free(di_state_pool *p);

/* Take a free slot (its state laid out, no pages attached); -1 if none. */
int di_pool_slot_acquire(di_state_pool *p);

/* Return a slot and all its pages. */
void di_pool_slot_release(di_state_pool *p, int slot);

/* The sequence state living in `slot`. */
di_seq_state *di_pool_seq(const di_state_pool *p, int slot);

/* The slot's snapshot room (g.snapshot_bytes, backend memory: use it
 * through seq_snapshot.h only), NULL without drafts. */
void *di_pool_snapshot_room(const di_state_pool *p, int slot);

/* Pages `slot` still needs to hold n_tokens positions. */
int64_t di_pool_pages_short(const di_state_pool *p, int slot, int64_t n_tokens);

/* Attach pages so `slot` holds n_tokens positions. Returns 0, or -1 (and
 * changes nothing) when the free pages do not suffice. */
int di_pool_grow(di_state_pool *p, int slot, int64_t n_tokens);

/* The largest k <= want such that `slot` can hold from + k positions with
 * `spare` free pages left over. */
int64_t di_pool_fit(const di_state_pool *p, int slot, int64_t from, int64_t want, int64_t spare);

static inline int64_t di_pool_pages_free(const di_state_pool *p) { return p->n_page_free; }
static inline int64_t di_pool_pages_used(const di_state_pool *p) { return p->n_pages - p->n_page_free; }
static inline int di_pool_slots_free(const di_state_pool *p) { return p->n_slot_free; }

#endif
