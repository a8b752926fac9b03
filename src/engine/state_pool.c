/* state_pool.c — slot and page pools (state_pool.h). */
#include "engine/state_pool.h"

#include <stdlib.h>
#include <string.h>

#include "engine/seq_snapshot.h"
#include "ops/ops.h"

#define DEFAULT_PAGE_ROWS 64

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Pages layer l needs for n tokens, per store. */
static void layer_pages(const di_model_config *cfg, const di_pool_geom *g, int l, int64_t n, int64_t *kv,
                        int64_t *ikey) {
    const di_layer_cfg *L = &cfg->layers[l];
    int64_t rows = di_seq_rows_needed(cfg, l, n);
    *kv = L->has_compressor ? ceil_div(rows, g->rows_kv) : 0;
    *ikey = L->has_index_keys ? ceil_div(rows, g->rows_ikey) : 0;
}

deepinfer_status di_pool_geom_compute(const di_model_config *cfg, int page_rows, int64_t max_tokens, int max_draft,
                                      di_pool_geom *g, di_error *err) {
    memset(g, 0, sizeof *g);
    if (page_rows < 0 || page_rows > 65536)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "page_rows must be in [1, 65536] (0 = %d), got %d",
                            DEFAULT_PAGE_ROWS, page_rows);
    if (max_tokens < 1) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "max_model_len must be >= 1");
    if (max_draft < 0 || max_draft > 64)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "max_draft_tokens must be in [0, 64], got %d", max_draft);
    if (max_draft > cfg->max_draft) /* the compressor buffers protect only that many discarded rows (seq_state.h) */
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "max_draft_tokens %d: the model was loaded for drafts of at most %d tokens (load option "
                            "max_draft); load it with max_draft >= %d",
                            max_draft, cfg->max_draft, max_draft);
    di_seq_layout lay;
    di_seq_layout_get(cfg, page_rows > 0 ? page_rows : DEFAULT_PAGE_ROWS, &lay);
    g->n_layers = cfg->n_layers + cfg->n_stages;
    g->max_tokens = max_tokens;
    g->fixed_bytes = align64(lay.fixed_bytes);
    g->hdr_bytes = align64(di_seq_header_bytes(cfg));
    g->rows_kv = lay.page_rows;
    g->page_bytes = lay.page_bytes_kv;
    g->rows_ikey = (int)(g->page_bytes / ((size_t)cfg->index_head_dim * 2));
    if (g->rows_ikey < 1) { /* index rows wider than a KV page: size pages for index rows instead */
        g->page_bytes = lay.page_bytes_ikey;
        g->rows_ikey = lay.page_rows;
        g->rows_kv = (int)(g->page_bytes / ((size_t)cfg->head_dim * 2));
    }
    for (int l = 0; l < g->n_layers; l++) {
        int64_t kv, ik;
        layer_pages(cfg, g, l, max_tokens, &kv, &ik);
        g->table_entries += (size_t)(kv + ik);
    }
    g->snapshot_bytes = max_draft ? align64(di_seq_snapshot_bytes(cfg, max_draft)) : 0;
    g->host_slot_bytes = g->hdr_bytes + align64(g->table_entries * sizeof(uint16_t *));
    g->dev_slot_bytes = g->fixed_bytes - g->hdr_bytes + g->snapshot_bytes;
    g->slot_bytes = g->host_slot_bytes + g->dev_slot_bytes;
    return DEEPINFER_OK;
}

int64_t di_pool_geom_pages_for(const di_model_config *cfg, const di_pool_geom *g, int64_t n_tokens) {
    int64_t total = 0;
    for (int l = 0; l < g->n_layers; l++) {
        int64_t kv, ik;
        layer_pages(cfg, g, l, n_tokens, &kv, &ik);
        total += kv + ik;
    }
    return total;
}

void di_pool_free(di_state_pool *p) {
    if (!p) return;
    free(p->slot_mem);
    di_dev_free(p->buf_mem);
    free(p->slot_free);
    free(p->slot_pages);
    free(p->tab_off_kv);
    free(p->tab_off_ikey);
    free(p->cap_kv);
    free(p->cap_ikey);
    di_dev_free(p->page_mem);
    free(p->page_free);
    memset(p, 0, sizeof *p);
}

static uint16_t **slot_tables(const di_state_pool *p, int slot) {
    return (uint16_t **)(p->slot_mem + (size_t)slot * p->g.host_slot_bytes + p->g.hdr_bytes);
}

deepinfer_status di_pool_init(di_state_pool *p, const di_model_config *cfg, const di_pool_geom *g, int n_slots,
                              int64_t n_pages, di_error *err) {
    memset(p, 0, sizeof *p);
    if (n_slots < 1 || n_pages < 0)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "state pool: %d slots, %lld pages", n_slots,
                            (long long)n_pages);
    p->cfg = cfg;
    p->g = *g;
    p->n_slots = n_slots;
    p->n_pages = n_pages;
    int nl = g->n_layers;
    p->slot_mem = aligned_alloc(64, (size_t)n_slots * g->host_slot_bytes);
    p->buf_mem = di_dev_alloc((size_t)n_slots * g->dev_slot_bytes); /* rings, compressor state: backend memory */
    p->slot_free = malloc(sizeof(int) * (size_t)n_slots);
    p->slot_pages = calloc((size_t)n_slots, sizeof(int64_t));
    p->tab_off_kv = calloc((size_t)nl, sizeof(size_t));
    p->tab_off_ikey = calloc((size_t)nl, sizeof(size_t));
    p->cap_kv = calloc((size_t)nl, sizeof(int));
    p->cap_ikey = calloc((size_t)nl, sizeof(int));
    /* pages are not touched here: the OS backs them when first written */
    p->page_mem = n_pages ? di_dev_alloc((size_t)n_pages * g->page_bytes) : NULL; /* row stores: backend memory */
    p->page_free = malloc(sizeof(int64_t) * (size_t)(n_pages ? n_pages : 1));
    if (!p->slot_mem || !p->buf_mem || !p->slot_free || !p->slot_pages || !p->tab_off_kv || !p->tab_off_ikey || !p->cap_kv ||
        !p->cap_ikey || (n_pages && !p->page_mem) || !p->page_free) {
        size_t want = (size_t)n_slots * g->slot_bytes + (size_t)n_pages * g->page_bytes;
        di_pool_free(p);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY,
                            "cannot allocate the state pools (%zu bytes: %d slots, %lld pages); lower the memory "
                            "budget, max_num_seqs or max_model_len",
                            want, n_slots, (long long)n_pages);
    }
    size_t off = 0;
    for (int l = 0; l < nl; l++) {
        int64_t kv, ik;
        layer_pages(cfg, g, l, g->max_tokens, &kv, &ik);
        p->cap_kv[l] = (int)kv;
        p->cap_ikey[l] = (int)ik;
        p->tab_off_kv[l] = off;
        off += (size_t)kv;
        p->tab_off_ikey[l] = off;
        off += (size_t)ik;
    }
    for (int s = 0; s < n_slots; s++) {
        di_seq_init_split(cfg, p->slot_mem + (size_t)s * g->host_slot_bytes, p->buf_mem + (size_t)s * g->dev_slot_bytes);
        p->slot_free[s] = n_slots - 1 - s; /* slot 0 is taken first */
    }
    p->n_slot_free = n_slots;
    for (int64_t i = 0; i < n_pages; i++) p->page_free[i] = n_pages - 1 - i;
    p->n_page_free = n_pages;
    return DEEPINFER_OK;
}

di_seq_state *di_pool_seq(const di_state_pool *p, int slot) {
    return (di_seq_state *)(p->slot_mem + (size_t)slot * p->g.host_slot_bytes);
}

void *di_pool_snapshot_room(const di_state_pool *p, int slot) {
    if (!p->g.snapshot_bytes) return NULL;
    return p->buf_mem + (size_t)(slot + 1) * p->g.dev_slot_bytes - p->g.snapshot_bytes;
}

int di_pool_slot_acquire(di_state_pool *p) {
    if (!p->n_slot_free) return -1;
    int slot = p->slot_free[--p->n_slot_free];
    di_seq_state *s = di_pool_seq(p, slot);
    uint16_t **tab = slot_tables(p, slot);
    for (int l = 0; l < p->g.n_layers; l++) {
        if (p->cap_kv[l]) di_seq_set_pages(s, l, 0, tab + p->tab_off_kv[l], 0, p->g.rows_kv);
        if (p->cap_ikey[l]) di_seq_set_pages(s, l, 1, tab + p->tab_off_ikey[l], 0, p->g.rows_ikey);
    }
    p->slot_pages[slot] = 0;
    return slot;
}

static void return_pages(di_state_pool *p, di_rowstore *r) {
    for (int i = 0; i < r->n_pages; i++) {
        int64_t id = (int64_t)(((unsigned char *)r->pages[i] - p->page_mem) / (ptrdiff_t)p->g.page_bytes);
        p->page_free[p->n_page_free++] = id;
    }
    r->n_pages = 0;
}

void di_pool_slot_release(di_state_pool *p, int slot) {
    di_seq_state *s = di_pool_seq(p, slot);
    for (int l = 0; l < p->g.n_layers; l++) {
        if (p->cap_kv[l]) return_pages(p, &s->layers[l].ckv);
        if (p->cap_ikey[l]) return_pages(p, &s->layers[l].ikey);
    }
    p->slot_pages[slot] = 0;
    p->slot_free[p->n_slot_free++] = slot;
}

/* Pages short for n_tokens, per store (kv, ikey) of layer l. */
static void short_of(const di_state_pool *p, const di_seq_state *s, int l, int64_t n, int64_t *kv, int64_t *ik) {
    layer_pages(p->cfg, &p->g, l, n, kv, ik);
    *kv = *kv > s->layers[l].ckv.n_pages ? *kv - s->layers[l].ckv.n_pages : 0;
    *ik = *ik > s->layers[l].ikey.n_pages ? *ik - s->layers[l].ikey.n_pages : 0;
}

int64_t di_pool_pages_short(const di_state_pool *p, int slot, int64_t n_tokens) {
    const di_seq_state *s = di_pool_seq(p, slot);
    int64_t total = 0;
    for (int l = 0; l < p->g.n_layers; l++) {
        int64_t kv, ik;
        short_of(p, s, l, n_tokens, &kv, &ik);
        total += kv + ik;
    }
    return total;
}

static void attach(di_state_pool *p, di_rowstore *r, int64_t k) {
    for (int64_t i = 0; i < k; i++) {
        int64_t id = p->page_free[--p->n_page_free];
        r->pages[r->n_pages++] = (uint16_t *)(p->page_mem + (size_t)id * p->g.page_bytes);
    }
}

int di_pool_grow(di_state_pool *p, int slot, int64_t n_tokens) {
    if (n_tokens > p->g.max_tokens) return -1;
    int64_t need = di_pool_pages_short(p, slot, n_tokens);
    if (need > p->n_page_free) return -1;
    di_seq_state *s = di_pool_seq(p, slot);
    for (int l = 0; l < p->g.n_layers && need; l++) {
        int64_t kv, ik;
        short_of(p, s, l, n_tokens, &kv, &ik);
        attach(p, &s->layers[l].ckv, kv);
        attach(p, &s->layers[l].ikey, ik);
    }
    p->slot_pages[slot] += need;
    int64_t used = p->n_pages - p->n_page_free;
    if (used > p->pages_peak) p->pages_peak = used;
    return 0;
}

int64_t di_pool_fit(const di_state_pool *p, int slot, int64_t from, int64_t want, int64_t spare) {
    int64_t avail = p->n_page_free - spare;
    if (avail < 0) return 0;
    if (from + want > p->g.max_tokens) want = p->g.max_tokens - from;
    if (want <= 0) return 0;
    if (di_pool_pages_short(p, slot, from + want) <= avail) return want;
    /* pages needed grow monotonically with the token count: bisect */
    int64_t lo = 0, hi = want; /* lo fits, hi does not */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (di_pool_pages_short(p, slot, from + mid) <= avail) lo = mid;
        else hi = mid;
    }
    return lo;
}
