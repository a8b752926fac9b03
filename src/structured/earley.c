/*
 * earley.c — the Earley parser (see earley.h). Nullable nonterminals are
 * handled the Aycock–Horspool way: predicting a nullable symbol also
 * advances over it, so completions never need to revisit the current set.
 */
#include "structured/earley.h"

#include <stdlib.h>
#include <string.h>

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem, uint32_t limit) {
    if (need <= *cap) return 1;
    if (need > limit) return 0;
    uint64_t nc = *cap ? (uint64_t)*cap * 2 : 256;
    while (nc < need) nc *= 2;
    if (nc > limit) nc = limit;
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np) return 0;
    *p = np, *cap = (uint32_t)nc;
    return 1;
}

/* Add item (dot, origin) to the set being built (items [lo, nitems)).
 * The dedup table holds (generation << 32 | index + 1); entries of older
 * generations count as empty, so nothing is cleared between sets. */
static uint32_t hash_item(uint32_t dot, uint32_t origin) {
    uint64_t h = ((uint64_t)dot * 0x9E3779B1u) ^ ((uint64_t)origin * 0x85EBCA77u);
    return (uint32_t)(h ^ (h >> 15));
}

static int add_item(so_parser *p, uint32_t lo, uint32_t dot, uint32_t origin) {
    uint32_t n = p->nitems - lo;
    uint64_t gen = (uint64_t)p->gen << 32;
    if ((n + 1) * 2 > p->dedup_cap) {
        uint32_t nc = p->dedup_cap ? p->dedup_cap * 2 : 64;
        while ((n + 1) * 2 > nc) nc *= 2;
        uint64_t *nd = calloc(nc, sizeof *nd);
        if (!nd) return -1;
        for (uint32_t i = lo; i < p->nitems; i++) {
            uint32_t j = hash_item(p->items[i].dot, p->items[i].origin) & (nc - 1);
            while (nd[j]) j = (j + 1) & (nc - 1);
            nd[j] = gen | (i - lo + 1);
        }
        free(p->dedup);
        p->dedup = nd, p->dedup_cap = nc;
    }
    uint32_t j = hash_item(dot, origin) & (p->dedup_cap - 1);
    while ((p->dedup[j] >> 32) == p->gen && (uint32_t)p->dedup[j]) {
        so_item *it = &p->items[lo + (uint32_t)p->dedup[j] - 1];
        if (it->dot == dot && it->origin == origin) return 0;
        j = (j + 1) & (p->dedup_cap - 1);
    }
    if (!grow((void **)&p->items, &p->itemcap, p->nitems + 1, sizeof(so_item), p->g->lim.max_items)) return -1;
    p->items[p->nitems] = (so_item){dot, origin};
    p->dedup[j] = gen | (p->nitems - lo + 1);
    p->nitems++;
    return 1;
}

static int add_thread(so_parser *p, uint32_t set, uint32_t lex, uint32_t state, uint32_t count) {
    if (!grow((void **)&p->thr, &p->thrcap, p->nthr + 1, sizeof(so_thread), 1u << 28)) return -1;
    p->thr[p->nthr++] = (so_thread){set, lex, state, count};
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

#define INDEX_MIN 24 /* smaller sets are scanned */

/* Items of closed set j whose next symbol is `sym`: [*lo, *hi) in p->widx,
 * building the set's index on first use. Returns 0 on out-of-memory. */
static int waiting(so_parser *p, uint32_t j, int32_t sym, uint32_t *lo, uint32_t *hi) {
    so_set *o = &p->sets[j];
    if (!(o->whi > o->wlo && o->whi <= p->nwidx && p->widx[o->wlo] == o->stamp)) {
        uint32_t n = o->hi - o->lo;
        if (!grow((void **)&p->widx, &p->widxcap, p->nwidx + n + 1, sizeof(uint64_t), 1u << 30)) return 0;
        uint32_t base = p->nwidx, w = base + 1;
        p->widx[base] = o->stamp;
        for (uint32_t q = o->lo; q < o->hi; q++) {
            int32_t s = p->g->seq[p->items[q].dot];
            if (!SO_IS_END(s)) p->widx[w++] = (uint64_t)(uint32_t)s << 32 | q;
        }
        qsort(p->widx + base + 1, w - base - 1, sizeof(uint64_t), cmp_u64);
        o->wlo = base, o->whi = w;
        p->nwidx = w;
    }
    uint64_t key = (uint64_t)(uint32_t)sym << 32;
    uint32_t a = o->wlo + 1, b = o->whi;
    while (a < b) { /* first entry >= key */
        uint32_t m = a + (b - a) / 2;
        if (p->widx[m] < key) a = m + 1;
        else b = m;
    }
    uint32_t e = a;
    while (e < o->whi && (p->widx[e] >> 32) == (uint32_t)sym) e++;
    *lo = a, *hi = e;
    return 1;
}

/* Add the advance of every item of set j waiting on `sym`. */
static int advance_waiting(so_parser *p, uint32_t lo_new, uint32_t j, int32_t sym) {
    so_set *o = &p->sets[j];
    if (o->hi - o->lo < INDEX_MIN) {
        for (uint32_t q = o->lo; q < o->hi; q++) {
            so_item w = p->items[q];
            if (p->g->seq[w.dot] == sym && add_item(p, lo_new, w.dot + 1, w.origin) < 0) return -1;
        }
        return 0;
    }
    uint32_t a, b;
    if (!waiting(p, j, sym, &a, &b)) return -1;
    for (uint32_t e = a; e < b; e++) {
        so_item w = p->items[(uint32_t)p->widx[e]];
        if (add_item(p, lo_new, w.dot + 1, w.origin) < 0) return -1;
    }
    return 0;
}

/* Closure of the newest set (index k, items [lo, nitems) already seeded). */
static int closure(so_parser *p, uint32_t k) {
    const so_grammar *g = p->g;
    uint32_t lo = p->sets[k].lo;
    uint32_t cid = ++p->closure_id;
    for (uint32_t i = lo; i < p->nitems; i++) {
        so_item it = p->items[i];
        int32_t s = g->seq[it.dot];
        if (SO_IS_END(s)) {
            uint32_t lhs = SO_END_LHS(s);
            if (lhs == g->start_nt && it.origin == 0) p->sets[k].accepting = 1;
            if (it.origin == k) continue; /* empty completion: handled by nullable prediction */
            if (advance_waiting(p, lo, it.origin, (int32_t)lhs) < 0) return -1;
        } else if (SO_IS_T(s)) {
            uint32_t l = SO_T_IDX(s);
            if (p->lex_stamp[l] != cid) {
                p->lex_stamp[l] = cid;
                if (add_thread(p, k, l, 1, 0) < 0) return -1;
            }
            if (g->lex[l].nullable && add_item(p, lo, it.dot + 1, it.origin) < 0) return -1;
        } else {
            for (uint32_t q = g->nt_off[s]; q < g->nt_off[s + 1]; q++)
                if (add_item(p, lo, g->nt_prods[q], k) < 0) return -1;
            if (g->nullable[s] && add_item(p, lo, it.dot + 1, it.origin) < 0) return -1;
        }
    }
    p->sets[k].hi = p->nitems;
    /* index large sets now, so the index lives and dies with the set */
    if (p->nitems - lo >= INDEX_MIN) {
        uint32_t a, b;
        if (!waiting(p, k, 0, &a, &b)) return -1;
    }
    return 0;
}

static int new_set(so_parser *p) {
    if (!grow((void **)&p->sets, &p->setcap, p->nsets + 1, sizeof(so_set), 1u << 30)) return -1;
    p->sets[p->nsets] = (so_set){p->nitems, p->nitems, p->pos, 0, (1ull << 63) | ++p->set_stamp, 0, 0};
    if (++p->gen == 0) { /* generation wrapped: clear the table once */
        if (p->dedup) memset(p->dedup, 0, (size_t)p->dedup_cap * sizeof *p->dedup);
        p->gen = 1;
    }
    return (int)p->nsets++;
}

deepinfer_status so_parser_init(so_parser *p, const so_grammar *g, di_error *err) {
    memset(p, 0, sizeof *p);
    p->g = g;
    p->lex_stamp = calloc(g->nlex + 1, sizeof *p->lex_stamp);
    if (!p->lex_stamp) {
        so_parser_free(p);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int k = new_set(p);
    if (k < 0 || add_item(p, 0, g->start_dot, 0) < 0 || closure(p, 0) < 0) {
        so_parser_free(p);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    p->fr_lo = 0, p->fr_hi = p->nthr;
    return DEEPINFER_OK;
}

void so_parser_free(so_parser *p) {
    free(p->items), free(p->sets), free(p->thr), free(p->dedup), free(p->lex_stamp), free(p->widx);
    memset(p, 0, sizeof *p);
}

int so_parser_push(so_parser *p, uint8_t b) {
    const so_grammar *g = p->g;
    so_pstate save = so_parser_save(p);
    uint32_t lo = p->fr_lo, hi = p->fr_hi;
    uint32_t out = p->nthr;
    /* completed (set, lexeme) pairs are collected at the end of thr, after the live threads */
    uint32_t ncomp = 0;
    for (uint32_t i = lo; i < hi; i++) {
        so_thread t = p->thr[i];
        const so_lexeme *l = &g->lex[t.lex];
        uint32_t c = t.count;
        uint32_t s = so_lex_step(l, t.state, &c, b);
        if (!s) continue;
        uint8_t f = l->dfa->flags[s];
        if (f & SO_DFA_ACCEPT) {
            /* a counted string only completes with enough characters (checked at the quote) */
            ncomp++;
            /* mark with the high bit: completed */
            if (add_thread(p, t.set, t.lex | 0x80000000u, s, c) < 0) goto fail;
        } else if (f & SO_DFA_MORE) {
            if (add_thread(p, t.set, t.lex, s, c) < 0) goto fail;
        }
    }
    if (p->nthr == out) {
        so_parser_restore(p, save);
        return 0;
    }
    p->pos++;
    if (ncomp) {
        int k = new_set(p);
        if (k < 0) goto fail;
        uint32_t ilo = p->nitems;
        for (uint32_t i = out; i < p->nthr; i++) {
            so_thread *t = &p->thr[i];
            if (!(t->lex & 0x80000000u)) continue;
            uint32_t l = t->lex & 0x7FFFFFFFu;
            if (advance_waiting(p, ilo, t->set, SO_T(l)) < 0) goto fail;
        }
        /* completed threads continue only if their DFA state has more */
        uint32_t w = out;
        for (uint32_t i = out; i < p->nthr; i++) {
            so_thread t = p->thr[i];
            if (t.lex & 0x80000000u) {
                t.lex &= 0x7FFFFFFFu;
                if (!(g->lex[t.lex].dfa->flags[t.state] & SO_DFA_MORE)) continue;
            }
            p->thr[w++] = t;
        }
        p->nthr = w;
        if (closure(p, (uint32_t)k) < 0) goto fail;
    }
    p->fr_lo = out, p->fr_hi = p->nthr;
    return 1;
fail:
    so_parser_restore(p, save);
    p->error = 1;
    return -1;
}

int so_parser_push_bytes(so_parser *p, const uint8_t *s, size_t n) {
    so_pstate save = so_parser_save(p);
    for (size_t i = 0; i < n; i++)
        if (so_parser_push(p, s[i]) != 1) {
            so_parser_restore(p, save);
            return 0;
        }
    return 1;
}

int so_parser_accepting(const so_parser *p) {
    if (!p->nsets) return 0;
    const so_set *s = &p->sets[p->nsets - 1];
    return s->pos == p->pos && s->accepting;
}
