/*
 * mask.c — token masks from a parser state.
 *
 * The lexer state is the set of live lexeme threads. Each distinct thread
 * (lexeme DFA, state class, character-minimum bucket) has a cache entry,
 * shared by every grammar compiled against the vocabulary:
 *   acc  — tokens the thread alone carries to the end of the token (the
 *          parser cannot veto those: the lexeme is still in progress);
 *   dep  — trie subtrees where the thread completed its lexeme at a proper
 *          prefix and then died: what follows depends on the parser.
 * A token is allowed iff some thread accepts it, so the mask is the OR of
 * the threads' acc bitmaps plus an exact Earley walk of the union of their
 * dep subtrees (a few hundred trie nodes in JSON).
 *
 * State classes identify DFA states that behave alike on every string as
 * long as the longest token. Threads with a character maximum (JSON strings
 * with maxLength) are walked without it; the entry records how many
 * characters each token adds, and the room left is applied when the mask is
 * built (precomputed layers for little room, a sorted trim list otherwise).
 * `~` lexemes (generic string minus named keys) are cached under the generic
 * string's states, with every completion left to the parser ("sensitive").
 */
#include "structured/mask.h"

#include <stdlib.h>
#include <string.h>

#define NLAYERS 16

typedef struct key_tuple {
    uint32_t gid, cls, zero, flags; /* flags: 1 counted (uncapped walk), 2 sensitive, 4 minimum pending */
} key_tuple;

typedef struct rep {
    const so_lexeme *lex;
    const so_dfa *dfa; /* the DFA walked (cdfa) */
    uint32_t state, count;
    uint32_t rmax;     /* room left (counted threads) */
    int counted, sensitive, nomin;
} rep;

static uint64_t hash_key(const uint32_t *k, uint32_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ k[i]) * 1099511628211ull, h ^= h >> 29;
    return h;
}

static inline void set_tok(const so_vocab *v, uint32_t *mask, const so_trie_node *nd) {
    int32_t t = nd->tok;
    mask[t >> 5] |= 1u << (t & 31);
    if (nd->pad)
        for (t = v->dup_next[t]; t >= 0; t = v->dup_next[t]) mask[t >> 5] |= 1u << (t & 31);
}

static inline void clear_tok(const so_vocab *v, uint32_t *mask, int32_t t) {
    for (; t >= 0; t = v->dup_next[t]) mask[t >> 5] &= ~(1u << (t & 31));
}

static int cmp_trim(const void *a, const void *b) {
    const uint32_t *x = a, *y = b; /* (n, tok) pairs, n descending */
    return x[0] < y[0] ? 1 : x[0] > y[0] ? -1 : 0;
}

static int push_dep(so_cache_entry *e, uint32_t *cap, uint32_t node) {
    if (e->ndep == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        uint32_t *nd = realloc(e->dep, *cap * sizeof *nd);
        if (!nd) return 0;
        e->dep = nd;
    }
    e->dep[e->ndep++] = node;
    return 1;
}

/* Lexer-only walk of the whole trie for one thread. */
static so_cache_entry *compute_entry(const so_vocab *v, const rep *r) {
    so_cache_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->acc = calloc(v->n_words, sizeof *e->acc);
    size_t D = (size_t)v->max_token_len + 2;
    uint32_t *st = malloc(D * sizeof *st), *cn = malloc(D * sizeof *cn);
    uint8_t *accb = calloc(D, 1);
    uint32_t depcap = 0, trimcap = 0;
    if (!e->acc || !st || !cn || !accb) goto oom;
    const so_dfa *dfa = r->dfa;
    so_lexeme lx = *r->lex; /* counting parameters; DFA replaced by the walked one */
    lx.dfa = (so_dfa *)dfa;
    if (r->counted) lx.cmax = INT32_MAX; /* keep counting, apply the maximum later */
    if (r->nomin) lx.cmin = 0;           /* completions go to the parser instead */
    st[0] = r->state, cn[0] = r->count;
    const so_trie_node *nodes = v->nodes;
    uint32_t i = 1, n = v->nnodes;
    int plain = lx.cmax < 0 && lx.cmin <= 0;
    while (i < n) {
        const so_trie_node *nd = &nodes[i];
        uint32_t d = nd->depth;
        uint32_t c = cn[d - 1], s;
        if (plain) s = so_dfa_next(dfa, st[d - 1], nd->byte);
        else s = so_lex_step(&lx, st[d - 1], &c, nd->byte);
        uint8_t before = d > 1 ? accb[d - 1] : 0;
        if (!s) {
            if (before && !push_dep(e, &depcap, i)) goto oom;
            i = nd->end;
            continue;
        }
        uint8_t f = dfa->flags[s];
        if (r->sensitive && (f & SO_DFA_ACCEPT)) { /* completion: the parser decides */
            if (!push_dep(e, &depcap, i)) goto oom;
            i = nd->end;
            continue;
        }
        st[d] = s, cn[d] = c;
        accb[d] = before | (uint8_t)(f & SO_DFA_ACCEPT);
        if (nd->tok >= 0) {
            set_tok(v, e->acc, nd);
            if (r->counted) {
                uint32_t added = c - r->count;
                if (!e->layers) {
                    e->layers = calloc((size_t)NLAYERS * v->n_words, sizeof *e->layers);
                    if (!e->layers) goto oom;
                }
                for (uint32_t room = added; room < NLAYERS; room++) set_tok(v, e->layers + (size_t)room * v->n_words, nd);
                if (added >= NLAYERS) {
                    if (e->ntrim == trimcap) {
                        trimcap = trimcap ? trimcap * 2 : 1024;
                        uint32_t *nt = realloc(e->trim, (size_t)trimcap * 2 * sizeof *nt);
                        if (!nt) goto oom;
                        e->trim = nt;
                    }
                    e->trim[2 * e->ntrim] = added, e->trim[2 * e->ntrim + 1] = (uint32_t)nd->tok;
                    e->ntrim++;
                }
            }
        }
        i++;
    }
    if (e->ntrim) qsort(e->trim, e->ntrim, 2 * sizeof *e->trim, cmp_trim);
    /* narrow entries keep a token list instead of a 16 KB bitmap */
    if (!e->layers) {
        uint32_t cnt = 0;
        for (uint32_t w = 0; w < v->n_words; w++) cnt += (uint32_t)__builtin_popcount(e->acc[w]);
        if (cnt <= 1024) {
            e->list = malloc((cnt + 1) * sizeof *e->list);
            if (!e->list) goto oom;
            for (uint32_t w = 0; w < v->n_words; w++)
                for (uint32_t bits = e->acc[w]; bits; bits &= bits - 1)
                    e->list[e->nlist++] = w * 32 + (uint32_t)__builtin_ctz(bits);
            free(e->acc);
            e->acc = NULL;
        }
    }
    free(st), free(cn), free(accb);
    return e;
oom:
    free(st), free(cn), free(accb);
    so_cache_entry_free(e);
    return NULL;
}

/* Exact walk of the subtrees rooted at roots[0..n) (preorder, no nesting) with the parser. */
static int walk_dep(so_parser *p, const so_vocab *v, const uint32_t *roots, uint32_t n, uint32_t *mask,
                    so_mask_stats *stats) {
    const so_trie_node *nodes = v->nodes;
    so_pstate base = so_parser_save(p);
    uint32_t depth_max = (uint32_t)v->max_token_len + 2;
    uint32_t *pn = malloc(depth_max * sizeof *pn);
    so_pstate *ps = malloc(depth_max * sizeof *ps);
    uint32_t *chain = malloc(depth_max * sizeof *chain);
    if (!pn || !ps || !chain) {
        free(pn), free(ps), free(chain);
        return -1;
    }
    uint32_t sp = 0, dead_lo = 0, dead_hi = 0;
    int rc = 0;
    for (uint32_t r = 0; r < n && rc == 0; r++) {
        uint32_t root = roots[r];
        if (root >= dead_lo && root < dead_hi) continue;
        while (sp && !(pn[sp - 1] < root && root < nodes[pn[sp - 1]].end)) so_parser_restore(p, ps[--sp]);
        uint32_t top = sp ? pn[sp - 1] : 0, nc = 0;
        for (uint32_t a = nodes[root].parent; a != top && a != 0; a = nodes[a].parent) chain[nc++] = a;
        int ok = 1;
        while (nc) {
            uint32_t a = chain[--nc];
            ps[sp] = so_parser_save(p);
            int pr = so_parser_push(p, nodes[a].byte);
            if (stats) stats->nodes++;
            if (pr < 0) {
                rc = -1, ok = 0;
                break;
            }
            if (!pr) {
                dead_lo = a, dead_hi = nodes[a].end, ok = 0;
                break;
            }
            pn[sp++] = a;
        }
        if (!ok) continue;
        uint32_t i = root, end = nodes[root].end;
        while (i < end) {
            while (sp && !(pn[sp - 1] < i && i < nodes[pn[sp - 1]].end)) so_parser_restore(p, ps[--sp]);
            ps[sp] = so_parser_save(p);
            int pr = so_parser_push(p, nodes[i].byte);
            if (stats) stats->nodes++;
            if (pr < 0) {
                rc = -1;
                break;
            }
            if (!pr) {
                i = nodes[i].end;
                continue;
            }
            pn[sp++] = i;
            if (nodes[i].tok >= 0) set_tok(v, mask, &nodes[i]);
            i++;
        }
    }
    so_parser_restore(p, base);
    free(pn), free(ps), free(chain);
    return rc;
}

/* Merge preorder root lists, dropping duplicates and roots inside an earlier root's subtree. */
static uint32_t merge_roots(const so_vocab *v, so_cache_entry **es, uint32_t k, uint32_t *out) {
    uint32_t pos[64] = {0}, n = 0, cover_end = 0;
    for (;;) {
        uint32_t best = UINT32_MAX, bi = 0;
        for (uint32_t j = 0; j < k; j++)
            if (pos[j] < es[j]->ndep && es[j]->dep[pos[j]] < best) best = es[j]->dep[pos[j]], bi = j;
        if (best == UINT32_MAX) break;
        pos[bi]++;
        if (best < cover_end) continue;
        out[n++] = best;
        cover_end = v->nodes[best].end;
    }
    return n;
}

static so_cache_entry *get_entry(so_vocab *v, const rep *r, const key_tuple *kt, so_mask_stats *stats, int cacheable,
                                 int *owned) {
    *owned = 0;
    uint64_t h = hash_key((const uint32_t *)kt, 4);
    so_cache_entry *e = cacheable ? so_cache_lookup(v, (const uint32_t *)kt, 4, h) : NULL;
    if (e) {
        if (stats) stats->hits++;
        return e;
    }
    if (stats) stats->misses++;
    e = compute_entry(v, r);
    if (!e) return NULL;
    if (cacheable) {
        e->key = malloc(4 * sizeof *e->key);
        if (e->key) {
            memcpy(e->key, kt, 4 * sizeof *e->key);
            e->keylen = 4, e->hash = h;
            so_cache_entry *in = so_cache_insert(v, e);
            if (in) return in;
        }
    }
    *owned = 1;
    return e;
}

deepinfer_status so_mask_fill(so_parser *p, uint32_t *mask, so_mask_stats *stats, di_error *err) {
    const so_grammar *g = p->g;
    so_vocab *v = g->vocab;
    uint32_t W = v->n_words;
    uint32_t k = p->fr_hi - p->fr_lo;
    memset(mask, 0, (size_t)W * sizeof *mask);
    if (k) {
        int64_t D1 = v->max_token_len + 1;
        key_tuple keys[64];
        rep reps[64];
        uint32_t u = 0;
        deepinfer_status st = DEEPINFER_OK;
        for (uint32_t i = 0; i < k; i++) {
            const so_thread *t = &p->thr[p->fr_lo + i];
            const so_lexeme *l = &g->lex[t->lex];
            rep r = {l, l->cdfa, l->sensitive ? l->dfa->proj[t->state] : t->state, t->count, UINT32_MAX,
                     l->cmax >= 0, l->sensitive, 0};
            if (r.counted) {
                int64_t rm = (int64_t)l->cmax - t->count;
                r.rmax = rm < 0 ? 0 : rm > D1 ? (uint32_t)D1 : (uint32_t)rm;
            }
            /* a character minimum not reached yet only matters at the closing
             * quote: walk without it and leave completions to the parser */
            if (l->cmin > 0 && (int64_t)t->count < l->cmin) r.nomin = 1, r.sensitive = 1;
            key_tuple kt = {l->cgid, r.dfa->eqc[r.state], 0,
                            (uint32_t)(r.counted | (r.sensitive << 1) | (r.nomin << 2))};
            /* dedupe identical threads (room left must match too) */
            int dup = 0;
            for (uint32_t j = 0; j < u && !dup; j++) dup = !memcmp(&keys[j], &kt, sizeof kt) && reps[j].rmax == r.rmax;
            if (dup) continue;
            if (u == 64) { /* very wide frontiers: no caching, exact walk of everything */
                u = UINT32_MAX;
                break;
            }
            keys[u] = kt, reps[u] = r, u++;
        }
        if (u == UINT32_MAX) {
            /* walk the whole trie with the parser */
            uint32_t *roots = malloc((size_t)(v->nodes[0].end) * sizeof *roots);
            if (!roots) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory computing a mask");
            uint32_t nr = 0;
            for (uint32_t i = 1; i < v->nnodes; i = v->nodes[i].end) roots[nr++] = i;
            int rc = walk_dep(p, v, roots, nr, mask, stats);
            free(roots);
            if (rc < 0) return di_error_set(err, DEEPINFER_ERR_LIMIT, "parser limit reached while computing a mask");
        } else {
            so_cache_entry *es[64];
            int owned[64];
            uint32_t *tmp = NULL;
            size_t ndep = 0;
            for (uint32_t j = 0; j < u && st == DEEPINFER_OK; j++) {
                int cacheable = reps[j].lex->cgid != SO_GID_PRIVATE;
                es[j] = get_entry(v, &reps[j], &keys[j], stats, cacheable, &owned[j]);
                if (!es[j]) {
                    st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory computing a mask");
                    u = j;
                    break;
                }
                ndep += es[j]->ndep;
                if (!es[j]->acc) {
                    for (uint32_t q = 0; q < es[j]->nlist; q++) mask[es[j]->list[q] >> 5] |= 1u << (es[j]->list[q] & 31);
                    continue;
                }
                const uint32_t *src = es[j]->acc;
                uint32_t room = reps[j].rmax;
                if (es[j]->layers && room < NLAYERS) {
                    src = es[j]->layers + (size_t)room * W;
                } else if (es[j]->ntrim && es[j]->trim[0] > room) {
                    if (!tmp) tmp = malloc((size_t)W * sizeof *tmp);
                    if (!tmp) {
                        st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory computing a mask");
                        u = j + 1;
                        break;
                    }
                    memcpy(tmp, es[j]->acc, (size_t)W * sizeof *tmp);
                    for (uint32_t q = 0; q < es[j]->ntrim && es[j]->trim[2 * q] > room; q++)
                        clear_tok(v, tmp, (int32_t)es[j]->trim[2 * q + 1]);
                    src = tmp;
                }
                if (u == 1) memcpy(mask, src, (size_t)W * sizeof *mask);
                else
                    for (uint32_t w = 0; w < W; w++) mask[w] |= src[w];
            }
            if (st == DEEPINFER_OK && ndep) {
                uint32_t *roots = u == 1 ? es[0]->dep : malloc(ndep * sizeof *roots);
                uint32_t nr = u == 1 ? es[0]->ndep : 0;
                if (!roots) st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory computing a mask");
                else {
                    if (u > 1) nr = merge_roots(v, es, u, roots);
                    if (stats) stats->dep_roots += nr;
                    if (walk_dep(p, v, roots, nr, mask, stats) < 0)
                        st = di_error_set(err, DEEPINFER_ERR_LIMIT, "parser limit reached while computing a mask");
                    if (u > 1) free(roots);
                }
            }
            for (uint32_t j = 0; j < u; j++)
                if (owned[j]) so_cache_entry_free(es[j]);
            free(tmp);
            if (st != DEEPINFER_OK) return st;
        }
    }
    if (so_parser_accepting(p))
        for (int i = 0; i < v->n_eos; i++) mask[v->eos[i] >> 5] |= 1u << (v->eos[i] & 31);
    return DEEPINFER_OK;
}

int so_parser_try_bytes(so_parser *p, const uint8_t *s, size_t n) {
    so_pstate save = so_parser_save(p);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) ok = so_parser_push(p, s[i]) == 1;
    so_parser_restore(p, save);
    return ok;
}
