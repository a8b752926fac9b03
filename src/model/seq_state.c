/* seq_state.c — laying out and resetting per-sequence state (seq_state.h). */
#include "model/seq_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

#define DEFAULT_PAGE_ROWS 64

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Groups of r slots a gated compressor keeps (seq_state.h): position t of
 * group g = t / r lives in slot (g mod G) * r + t mod r, and pooling group g
 * reads block g mod G (with overlap also block (g - 1) mod G, the previous
 * group's A halves). G = (overlap ? 1 : 0) + ceil((r - 1 + D) / r), D =
 * cfg->max_draft, is enough for a rollback to n_keep that discards up to D
 * rows: the rejected positions lie in [n_keep, n_keep + D - 1], groups
 * g_c = n_keep / r .. g_l = (n_keep + D - 1) / r, and with a = n_keep mod r,
 * g_l - g_c = floor((a + D - 1) / r) <= floor((r + D - 2) / r)
 * = ceil((r - 1 + D) / r) - 1. So without overlap g_c .. g_l are at most G
 * consecutive groups, in distinct blocks: the rejected rows of later groups
 * never land in the block of the kept partial group g_c (its own rejected
 * rows only fill slots of residues >= a, which the real positions rewrite
 * before the group pools). With overlap g_c - 1 .. g_l are at most G
 * consecutive groups, so the previous group's block (the complete group
 * g_c - 1, or for g_c = 0 the reset block of -inf scores) is not aliased
 * either. Nothing else is read: a group pools only once all r of its
 * positions have been written, and pooling writes no state. With D = 0:
 * G = 1, or 2 with overlap (the reference's [2r] buffers, §6.2). */
static int cmp_groups(const di_model_config *cfg, const di_layer_cfg *L) {
    int r = L->ratio, D = cfg->max_draft > 0 ? cfg->max_draft : 0;
    int g = (r - 1 + D + r - 1) / r;
    if (g < 1) g = 1;
    return (L->compressor_overlap ? 1 : 0) + g;
}

int di_seq_cmp_groups(const di_model_config *cfg, int layer) {
    const di_layer_cfg *L = &cfg->layers[layer];
    if (!L->has_compressor || !L->compressor_gated || L->ratio < 1) return 0;
    return cmp_groups(cfg, L);
}

deepinfer_status di_seq_set_max_draft(di_model_config *cfg, int max_draft, di_error *err) {
    if (max_draft < 0 || max_draft > DI_SEQ_MAX_DRAFT)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "max_draft (rows a speculative rollback may discard) must be in [0, %d], got %d",
                            DI_SEQ_MAX_DRAFT, max_draft);
    int engram_back = DI_ENGRAM_HIST - (int)(cfg->engram_max_ngram_size - 1);
    if (cfg->n_engram_layer_ids > 0 && max_draft > engram_back)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "max_draft %d: the Engram history (%d positions, n-grams of %lld) rolls back at most %d "
                            "positions; use max_draft <= %d",
                            max_draft, DI_ENGRAM_HIST, (long long)cfg->engram_max_ngram_size, engram_back, engram_back);
    cfg->max_draft = max_draft;
    return DEEPINFER_OK;
}

/* Compressor buffer geometry of layer l: slots x width (0 if none). The
 * main compressor (index 0) pools head_dim rows; V4's indexer has its own
 * compressor (index 1) of index_head_dim rows. V4.1 ratio-1 sources pool
 * nothing and keep no partial group. Slots = groups * ratio (above). */
static void cmp_geom(const di_model_config *cfg, const di_layer_cfg *L, int index, int *slots, int *width) {
    *slots = *width = 0;
    if (!L->has_compressor || !L->compressor_gated) return;
    if (index && (cfg->arch != DI_ARCH_V4 || !L->has_index_keys)) return;
    int coff = L->compressor_overlap ? 2 : 1;
    *slots = cmp_groups(cfg, L) * L->ratio;
    *width = coff * (int)(index ? cfg->index_head_dim : cfg->head_dim);
}

static size_t layer_fixed_bytes(const di_model_config *cfg, const di_layer_cfg *L) {
    size_t b = align64((size_t)cfg->sliding_window * (size_t)cfg->head_dim * 2);
    for (int index = 0; index < 2; index++) {
        int s, w;
        cmp_geom(cfg, L, index, &s, &w);
        b += 2 * align64((size_t)s * (size_t)w * 4);
    }
    return b;
}

int di_seq_engram_ring(const di_model_config *cfg) {
    if (cfg->n_engram_layer_ids <= 0) return 0;
    return (int)(cfg->engram_max_ngram_size - 1) + (cfg->max_draft > 0 ? cfg->max_draft : 0) + 1;
}

void di_seq_layout_get(const di_model_config *cfg, int page_rows, di_seq_layout *out) {
    memset(out, 0, sizeof *out);
    int nl = cfg->n_layers + cfg->n_stages;
    size_t b = align64(sizeof(di_seq_state)) + align64((size_t)nl * sizeof(di_layer_state));
    for (int l = 0; l < nl; l++) b += layer_fixed_bytes(cfg, &cfg->layers[l]);
    b += align64((size_t)di_seq_engram_ring(cfg) * sizeof(int32_t));
    out->fixed_bytes = b;
    out->page_rows = page_rows > 0 ? page_rows : DEFAULT_PAGE_ROWS;
    out->page_bytes_kv = align64((size_t)out->page_rows * (size_t)cfg->head_dim * 2);
    out->page_bytes_ikey = align64((size_t)out->page_rows * (size_t)cfg->index_head_dim * 2);
}

int64_t di_seq_rows_needed(const di_model_config *cfg, int layer, int64_t n_tokens) {
    const di_layer_cfg *L = &cfg->layers[layer];
    if (!L->has_compressor || L->ratio <= 0) return 0;
    return n_tokens / L->ratio;
}

static void cmp_clear(di_cmp_state *c) {
    size_t n = (size_t)c->slots * (size_t)c->width;
    di_fill_f32(di_dev_exec(), c->kv, n, 0.0f);
    di_fill_f32(di_dev_exec(), c->score, n, -INFINITY);
}

void di_seq_reset(di_seq_state *s, const di_model_config *cfg) {
    s->n_tokens = 0;
    s->mtp_tokens = 0;
    s->ikey_pub = -1;
    di_engram_seq_init(&s->engram);
    if (s->eng_ring) /* no step reads a slot before writing it (positions < 0 are pad); zeros keep copies defined */
        di_fill_f32(di_dev_exec(), (float *)s->eng_ring, (size_t)s->eng_ring_len, 0.0f);
    for (int l = 0; l < s->n_layers; l++) {
        di_layer_state *ls = &s->layers[l];
        if (ls->ring) di_fill_f32(di_dev_exec(), (float *)ls->ring, (size_t)cfg->sliding_window * (size_t)cfg->head_dim / 2, 0.0f);
        if (ls->cmp.slots) cmp_clear(&ls->cmp);
        if (ls->icmp.slots) cmp_clear(&ls->icmp);
    }
}

size_t di_seq_header_bytes(const di_model_config *cfg) {
    return align64(sizeof(di_seq_state)) + align64((size_t)(cfg->n_layers + cfg->n_stages) * sizeof(di_layer_state));
}

/* Lay out the fixed part: the header (host) in `hdr`, the rings and
 * compressor buffers (backend memory) from `mem` (64-byte aligned; the
 * layout's fixed_bytes cover both when mem = hdr + header_bytes). */
static di_seq_state *layout_fixed(const di_model_config *cfg, unsigned char *hdr, unsigned char *mem) {
    int nl = cfg->n_layers + cfg->n_stages;
    di_seq_state *s = (di_seq_state *)hdr;
    memset(s, 0, sizeof *s);
    hdr += align64(sizeof(di_seq_state));
    s->layers = (di_layer_state *)hdr;
    s->n_layers = nl;
    memset(s->layers, 0, (size_t)nl * sizeof(di_layer_state));
    for (int l = 0; l < nl; l++) {
        const di_layer_cfg *L = &cfg->layers[l];
        di_layer_state *ls = &s->layers[l];
        ls->ring = (uint16_t *)mem;
        mem += align64((size_t)cfg->sliding_window * (size_t)cfg->head_dim * 2);
        for (int index = 0; index < 2; index++) {
            di_cmp_state *cs = index ? &ls->icmp : &ls->cmp;
            int sl, w;
            cmp_geom(cfg, L, index, &sl, &w);
            cs->slots = sl;
            cs->width = w;
            cs->kv = (float *)mem;
            mem += align64((size_t)sl * (size_t)w * 4);
            cs->score = (float *)mem;
            mem += align64((size_t)sl * (size_t)w * 4);
        }
        if (L->has_compressor) ls->ckv.row_elems = (int)cfg->head_dim;
        if (L->has_index_keys) ls->ikey.row_elems = (int)cfg->index_head_dim;
    }
    s->eng_ring_len = di_seq_engram_ring(cfg);
    s->eng_ring = s->eng_ring_len ? (int32_t *)mem : NULL;
    return s;
}

di_seq_state *di_seq_place_split(const di_model_config *cfg, void *hdr, void *bufs) {
    return layout_fixed(cfg, hdr, bufs);
}

di_seq_state *di_seq_init_split(const di_model_config *cfg, void *hdr, void *bufs) {
    di_seq_state *s = layout_fixed(cfg, hdr, bufs);
    di_seq_reset(s, cfg);
    return s;
}

di_seq_state *di_seq_init(const di_model_config *cfg, void *mem) {
    di_seq_state *s = layout_fixed(cfg, mem, (unsigned char *)mem + di_seq_header_bytes(cfg));
    di_seq_reset(s, cfg);
    return s;
}

void di_seq_set_pages(di_seq_state *s, int layer, int ikey, uint16_t **pages, int n_pages, int page_rows) {
    di_rowstore *r = ikey ? &s->layers[layer].ikey : &s->layers[layer].ckv;
    r->pages = pages;
    r->n_pages = n_pages;
    r->page_rows = page_rows;
}

deepinfer_status di_seq_create(const di_model_config *cfg, int64_t max_tokens, di_seq_state **out, di_error *err) {
    *out = NULL;
    di_seq_layout lay;
    di_seq_layout_get(cfg, 0, &lay);
    int nl = cfg->n_layers + cfg->n_stages;
    /* pages: enough rows for max_tokens in every compressed layer */
    size_t page_bytes = 0, ptr_bytes = 0;
    for (int l = 0; l < nl; l++) {
        const di_layer_cfg *L = &cfg->layers[l];
        int64_t rows = di_seq_rows_needed(cfg, l, max_tokens);
        int64_t pages = (rows + lay.page_rows - 1) / lay.page_rows;
        if (L->has_compressor) page_bytes += (size_t)pages * lay.page_bytes_kv;
        if (L->has_index_keys) page_bytes += (size_t)pages * lay.page_bytes_ikey;
        ptr_bytes += align64((size_t)(2 * pages) * sizeof(uint16_t *));
    }
    size_t hb = di_seq_header_bytes(cfg), total = hb + ptr_bytes;
    unsigned char *mem = aligned_alloc(64, align64(total));
    unsigned char *bufs = di_dev_alloc(lay.fixed_bytes - hb); /* rings, compressor state: backend memory */
    unsigned char *pg = page_bytes ? di_dev_alloc(page_bytes) : NULL; /* the row stores: backend memory */
    if (!mem || !bufs || (page_bytes && !pg)) {
        free(mem);
        di_dev_free(bufs);
        di_dev_free(pg);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for a %lld-token sequence state (%zu bytes)",
                            (long long)max_tokens, total + page_bytes);
    }
    di_seq_state *s = layout_fixed(cfg, mem, bufs);
    s->owned_pages = pg;
    s->owned_bufs = bufs;
    unsigned char *p = mem + hb;
    for (int l = 0; l < nl; l++) {
        const di_layer_cfg *L = &cfg->layers[l];
        int64_t rows = di_seq_rows_needed(cfg, l, max_tokens);
        int pages = (int)((rows + lay.page_rows - 1) / lay.page_rows);
        uint16_t **tab = (uint16_t **)p;
        p += align64((size_t)(2 * pages) * sizeof(uint16_t *));
        if (L->has_compressor) {
            for (int i = 0; i < pages; i++, pg += lay.page_bytes_kv) tab[i] = (uint16_t *)pg;
            di_seq_set_pages(s, l, 0, tab, pages, lay.page_rows);
        }
        if (L->has_index_keys) {
            for (int i = 0; i < pages; i++, pg += lay.page_bytes_ikey) tab[pages + i] = (uint16_t *)pg;
            di_seq_set_pages(s, l, 1, tab + pages, pages, lay.page_rows);
        }
    }
    s->owned = mem;
    di_seq_reset(s, cfg);
    *out = s;
    return DEEPINFER_OK;
}

void di_seq_destroy(di_seq_state *s) {
    if (!s) return;
    di_dev_free(s->owned_pages);
    di_dev_free(s->owned_bufs);
    if (s->owned) free(s->owned);
}
