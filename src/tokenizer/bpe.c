/*
 * bpe.c — the byte-level BPE model: merge ranks in a hash table keyed by
 * the pair of ids, and a merge loop that is O(n log n) per piece.
 *
 * The loop is HF's (models/bpe/word.rs): every adjacent pair with a merge
 * goes into a min-heap ordered by (rank, position); the lowest is merged
 * first, ties go to the leftmost pair; entries made stale by an earlier
 * merge are skipped when popped; each merge pushes the pairs it forms with
 * its neighbours.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define EMPTY UINT64_MAX

static size_t merge_slot(uint64_t key, size_t cap) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    return (size_t)h & (cap - 1);
}

static int merge_grow(di_tokenizer *tok) {
    size_t ncap = tok->merge_cap ? tok->merge_cap * 2 : 1u << 16;
    uint64_t *nk = malloc(ncap * sizeof *nk), *nv = malloc(ncap * sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -1;
    }
    for (size_t i = 0; i < ncap; i++) nk[i] = EMPTY;
    for (size_t i = 0; i < tok->merge_cap; i++) {
        if (tok->merge_keys[i] == EMPTY) continue;
        size_t j = merge_slot(tok->merge_keys[i], ncap);
        while (nk[j] != EMPTY) j = (j + 1) & (ncap - 1);
        nk[j] = tok->merge_keys[i];
        nv[j] = tok->merge_vals[i];
    }
    free(tok->merge_keys);
    free(tok->merge_vals);
    tok->merge_keys = nk;
    tok->merge_vals = nv;
    tok->merge_cap = ncap;
    return 0;
}

int di_bpe_add_merge(di_tokenizer *tok, int32_t left, int32_t right, uint32_t rank, int32_t merged) {
    if ((tok->nmerges + 1) * 2 > tok->merge_cap && merge_grow(tok) != 0) return -1;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t j = merge_slot(key, tok->merge_cap);
    while (tok->merge_keys[j] != EMPTY) {
        if (tok->merge_keys[j] == key) { /* a repeated pair: the later line wins, as in HF */
            tok->merge_vals[j] = (uint64_t)rank << 32 | (uint32_t)merged;
            return 0;
        }
        j = (j + 1) & (tok->merge_cap - 1);
    }
    tok->merge_keys[j] = key;
    tok->merge_vals[j] = (uint64_t)rank << 32 | (uint32_t)merged;
    tok->nmerges++;
    return 0;
}

/* (rank << 32 | merged id) of the pair, or EMPTY. */
static inline uint64_t merge_get(const di_tokenizer *tok, int32_t left, int32_t right) {
    if (!tok->merge_cap) return EMPTY;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t j = merge_slot(key, tok->merge_cap);
    for (;;) {
        uint64_t k = tok->merge_keys[j];
        if (k == key) return tok->merge_vals[j];
        if (k == EMPTY) return EMPTY;
        j = (j + 1) & (tok->merge_cap - 1);
    }
}

int di_idvec_push(di_idvec *v, int32_t id) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 64;
        int32_t *np = realloc(v->ids, nc * sizeof *np);
        if (!np) return -1;
        v->ids = np;
        v->cap = nc;
    }
    v->ids[v->n++] = id;
    return 0;
}

void di_bpe_work_free(di_bpe_work *w) {
    free(w->sym);
    free(w->prev);
    free(w->next);
    free(w->heap);
    memset(w, 0, sizeof *w);
}

static int work_reserve(di_bpe_work *w, size_t n) {
    if (n <= w->cap) return 0;
    size_t nc = n < 256 ? 256 : n * 2;
    int32_t *a = realloc(w->sym, nc * sizeof *a);
    if (!a) return -1;
    w->sym = a;
    a = realloc(w->prev, nc * sizeof *a);
    if (!a) return -1;
    w->prev = a;
    a = realloc(w->next, nc * sizeof *a);
    if (!a) return -1;
    w->next = a;
    w->cap = nc;
    return 0;
}

static int heap_push(di_bpe_work *w, size_t *hn, uint64_t v) {
    if (*hn == w->heap_cap) {
        size_t nc = w->heap_cap ? w->heap_cap * 2 : 256;
        uint64_t *nh = realloc(w->heap, nc * sizeof *nh);
        if (!nh) return -1;
        w->heap = nh;
        w->heap_cap = nc;
    }
    uint64_t *h = w->heap;
    size_t i = (*hn)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
    return 0;
}

static uint64_t heap_pop(di_bpe_work *w, size_t *hn) {
    uint64_t *h = w->heap;
    uint64_t top = h[0], v = h[--*hn];
    size_t n = *hn, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = v;
    return top;
}

int di_bpe_piece(const di_tokenizer *tok, const uint8_t *piece, size_t len, di_bpe_work *w, di_idvec *out) {
    if (len == 0) return 0;
    if (tok->ignore_merges) {
        /* The whole piece is a vocab entry: emit it without merging. The
         * vocab holds ByteLevel strings, so map the bytes first. */
        uint8_t buf[256];
        if (len <= sizeof buf / 2) {
            size_t o = 0;
            for (size_t i = 0; i < len; i++) o += di_utf8_put(di_bytelevel_char(piece[i]), buf + o);
            int32_t id = tok_map_get(&tok->vocab, buf, o);
            if (id >= 0) return di_idvec_push(out, id);
        }
    }
    if (work_reserve(w, len) != 0) return -1;
    /* Initial symbols: one per byte (unknown bytes become unk or vanish). */
    size_t n = 0;
    int32_t pending_unk = -1;
    for (size_t i = 0; i < len; i++) {
        int32_t id = tok->byte_id[piece[i]];
        if (id >= 0) {
            if (pending_unk >= 0) {
                w->sym[n++] = pending_unk;
                pending_unk = -1;
            }
            w->sym[n++] = id;
        } else if (tok->unk_id >= 0) {
            if (pending_unk >= 0 && !tok->fuse_unk) w->sym[n++] = pending_unk;
            pending_unk = tok->unk_id;
        }
    }
    if (pending_unk >= 0) w->sym[n++] = pending_unk;
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        w->prev[i] = (int32_t)i - 1;
        w->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        uint64_t m = merge_get(tok, w->sym[i], w->sym[i + 1]);
        if (m != EMPTY && heap_push(w, &hn, (m & 0xFFFFFFFF00000000ull) | i) != 0) return -1;
    }
    while (hn) {
        uint64_t top = heap_pop(w, &hn);
        size_t pos = (size_t)(top & 0xFFFFFFFFu);
        uint32_t rank = (uint32_t)(top >> 32);
        if (w->sym[pos] < 0) continue;       /* merged away */
        int32_t nx = w->next[pos];
        if (nx < 0) continue;
        uint64_t m = merge_get(tok, w->sym[pos], w->sym[nx]);
        if (m == EMPTY || (uint32_t)(m >> 32) != rank) continue; /* stale entry */
        /* Merge pos and nx into pos. */
        w->sym[pos] = (int32_t)(m & 0xFFFFFFFFu);
        w->sym[nx] = -1;
        int32_t nn = w->next[nx];
        w->next[pos] = nn;
        if (nn >= 0) w->prev[nn] = (int32_t)pos;
        int32_t pv = w->prev[pos];
        if (pv >= 0) {
            uint64_t pm = merge_get(tok, w->sym[pv], w->sym[pos]);
            if (pm != EMPTY && heap_push(w, &hn, (pm & 0xFFFFFFFF00000000ull) | (uint32_t)pv) != 0) return -1;
        }
        if (nn >= 0) {
            uint64_t nm = merge_get(tok, w->sym[pos], w->sym[nn]);
            if (nm != EMPTY && heap_push(w, &hn, (nm & 0xFFFFFFFF00000000ull) | pos) != 0) return -1;
        }
    }
    for (int32_t i = 0; i >= 0; i = w->next[i])
        if (di_idvec_push(out, w->sym[i]) != 0) return -1;
    return 0;
}
