/*
 * mask.c — token masks from a parser state.
 *
 * 1. The lexer state is the set of live lexeme threads; its cache key is the
 *    sorted set of (lexeme id, DFA state class, counter buckets). Classes
 *    identify states that behave alike on every string as long as the
 *    longest token, so e.g. all positions of a long maxLength string share
 *    one entry.
 * 2. On a miss, a walk of the token trie with the DFAs alone (no parser)
 *    sorts tokens into: accepted (some thread survives the whole token —
 *    the parser cannot veto that), rejected (every thread dies and none
 *    completed a lexeme on the way), and "needs the parser" (every thread
 *    died, but one completed a lexeme at a proper prefix, after which other
 *    lexemes may continue). The third kind is stored as trie subtree roots.
 * 3. The mask is the cached accepted bitmap plus an exact Earley walk of the
 *    stored subtrees (a few hundred trie nodes in JSON).
 */
#include "structured/mask.h"

#include <stdlib.h>
#include <string.h>

typedef struct key_tuple {
    uint32_t gid, cls, rmax, rmin;
} key_tuple;

typedef struct rep {
    const so_lexeme *lex;
    uint32_t state, count;
    int nocap; /* walk without the character maximum (trimmed afterwards, see trim_*) */
} rep;

static int cmp_tuple(const void *a, const void *b) { return memcmp(a, b, sizeof(key_tuple)); }

static uint64_t hash_key(const uint32_t *k, uint32_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ k[i]) * 1099511628211ull, h ^= h >> 29;
    return h;
}

static inline void set_tok(const so_vocab *v, uint32_t *mask, int32_t t) {
    while (t >= 0) {
        mask[t >> 5] |= 1u << (t & 31);
        t = v->dup_next[t];
    }
}

static inline void clear_tok(const so_vocab *v, uint32_t *mask, int32_t t) {
    while (t >= 0) {
        mask[t >> 5] &= ~(1u << (t & 31));
        t = v->dup_next[t];
    }
}

static int cmp_trim(const void *a, const void *b) {
    const uint32_t *x = a, *y = b; /* (n, tok) pairs, n descending */
    return x[0] < y[0] ? 1 : x[0] > y[0] ? -1 : 0;
}

/* Lexer-only trie walk for representatives r[0..k). Each depth keeps the
 * list of threads still alive, so a node costs the threads that survived
 * its parent (usually one or two). */
static so_cache_entry *compute_entry(const so_vocab *v, const rep *r, uint32_t k, int lazy) {
    so_cache_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->acc = calloc(v->n_words, sizeof *e->acc);
    size_t D = (size_t)v->max_token_len + 2;
    uint32_t *ix = malloc(D * k * sizeof *ix), *st = malloc(D * k * sizeof *st), *cn = malloc(D * k * sizeof *cn);
    uint32_t *nl = calloc(D, sizeof *nl);
    uint8_t *accb = calloc(D, 1);
    uint32_t depcap = 64, trimcap = 0;
    e->dep = malloc(depcap * sizeof *e->dep);
    if (!e->acc || !ix || !st || !cn || !nl || !accb || !e->dep) goto oom;
    for (uint32_t t = 0; t < k; t++)
        if (r[t].state) ix[nl[0]] = t, st[nl[0]] = r[t].state, cn[nl[0]] = r[t].count, nl[0]++;
    const so_trie_node *nodes = v->nodes;
    uint32_t i = 1, n = v->nnodes;
    while (i < n) {
        const so_trie_node *nd = &nodes[i];
        uint32_t d = nd->depth;
        const uint32_t *pix = &ix[(size_t)(d - 1) * k], *pst = &st[(size_t)(d - 1) * k], *pcn = &cn[(size_t)(d - 1) * k];
        uint32_t *cix = &ix[(size_t)d * k], *cst = &st[(size_t)d * k], *ccn = &cn[(size_t)d * k];
        uint32_t np = nl[d - 1], m = 0;
        int accnow = 0, only_lazy = 1;
        for (uint32_t j = 0; j < np; j++) {
            uint32_t t = pix[j], c = pcn[j], s2;
            const so_lexeme *l = r[t].lex;
            if (r[t].nocap) {
                so_lexeme tmp = *l;
                tmp.cmax = INT32_MAX; /* still counting */
                s2 = so_lex_step(&tmp, pst[j], &c, nd->byte);
            } else {
                s2 = so_lex_step(l, pst[j], &c, nd->byte);
            }
            if (!s2) continue;
            cix[m] = t, cst[m] = s2, ccn[m] = c, m++;
            if (l->dfa->flags[s2] & SO_DFA_ACCEPT) accnow = 1;
            if ((int)t != lazy) only_lazy = 0;
        }
        nl[d] = m;
        uint8_t before = d > 1 ? accb[d - 1] : 0;
        if (m) {
            if (nd->tok >= 0) {
                set_tok(v, e->acc, nd->tok);
                if (lazy >= 0 && only_lazy) {
                    uint32_t added = ccn[0] - r[lazy].count;
                    if (added) {
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
            accb[d] = before | (uint8_t)accnow;
            i++;
        } else {
            if (before) {
                if (e->ndep == depcap) {
                    depcap *= 2;
                    uint32_t *nd2 = realloc(e->dep, depcap * sizeof *nd2);
                    if (!nd2) goto oom;
                    e->dep = nd2;
                }
                e->dep[e->ndep++] = i;
            }
            i = nd->end;
        }
    }
    if (e->ntrim) qsort(e->trim, e->ntrim, 2 * sizeof *e->trim, cmp_trim);
    free(ix), free(st), free(cn), free(nl), free(accb);
    return e;
oom:
    free(ix), free(st), free(cn), free(nl), free(accb);
    so_cache_entry_free(e);
    return NULL;
}

/* Exact walk of the subtrees rooted at roots[0..n) with the parser. */
static int walk_dep(so_parser *p, const so_vocab *v, const uint32_t *roots, uint32_t n, uint32_t *mask,
                    so_mask_stats *stats) {
    const so_trie_node *nodes = v->nodes;
    so_pstate base = so_parser_save(p);
    /* path stack: node index and the state before its byte */
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
        /* pop to an ancestor of root */
        while (sp && !(pn[sp - 1] < root && root < nodes[pn[sp - 1]].end)) so_parser_restore(p, ps[--sp]);
        /* push the path from the stack top down to root's parent */
        uint32_t top = sp ? pn[sp - 1] : 0, nc = 0;
        for (uint32_t a = nodes[root].parent; a != top && a != 0; a = nodes[a].parent) chain[nc++] = a;
        int ok = 1;
        while (nc) {
            uint32_t a = chain[--nc];
            ps[sp] = so_parser_save(p);
            int pr = so_parser_push(p, nodes[a].byte);
            if (stats) stats->nodes++;
            if (pr < 0) {
                rc = -1;
                ok = 0;
                break;
            }
            if (!pr) {
                dead_lo = a, dead_hi = nodes[a].end;
                ok = 0;
                break;
            }
            pn[sp++] = a;
        }
        if (!ok) continue;
        /* DFS of root's subtree */
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
            if (nodes[i].tok >= 0) set_tok(v, mask, nodes[i].tok);
            i++;
        }
    }
    so_parser_restore(p, base);
    free(pn), free(ps), free(chain);
    return rc;
}

deepinfer_status so_mask_fill(so_parser *p, uint32_t *mask, so_mask_stats *stats, di_error *err) {
    const so_grammar *g = p->g;
    so_vocab *v = g->vocab;
    uint32_t k = p->fr_hi - p->fr_lo;
    memset(mask, 0, (size_t)v->n_words * sizeof *mask);
    if (k) {
        key_tuple stack_keys[16];
        rep stack_reps[16];
        key_tuple *keys = k <= 16 ? stack_keys : malloc(k * sizeof *keys);
        rep *reps = k <= 16 ? stack_reps : malloc(k * sizeof *reps);
        if (!keys || !reps) {
            if (keys != stack_keys) free(keys);
            if (reps != stack_reps) free(reps);
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory computing a mask");
        }
        uint32_t D1 = (uint32_t)v->max_token_len + 1;
        int cacheable = 1, nsmall = 0;
        for (uint32_t i = 0; i < k; i++) {
            const so_lexeme *l = &g->lex[p->thr[p->fr_lo + i].lex];
            if (l->cmax >= 0 && (int64_t)l->cmax - p->thr[p->fr_lo + i].count < D1) nsmall++;
        }
        uint32_t lazy_rmax = 0;
        for (uint32_t i = 0; i < k; i++) {
            const so_thread *t = &p->thr[p->fr_lo + i];
            const so_lexeme *l = &g->lex[t->lex];
            if (l->gid == SO_GID_PRIVATE) cacheable = 0;
            uint32_t rmax = UINT32_MAX, rmin = 0;
            int nocap = 0;
            if (l->cmax >= 0) {
                int64_t rm = (int64_t)l->cmax - t->count;
                rmax = rm > D1 ? D1 : (uint32_t)(rm < 0 ? 0 : rm);
                /* one thread near its maximum: cache the uncapped walk and
                 * trim tokens with too many characters afterwards */
                if (rmax < D1 && nsmall == 1) lazy_rmax = rmax, rmax = UINT32_MAX - 1, nocap = 1;
            }
            if (l->cmin > 0) {
                int64_t rm = (int64_t)l->cmin - t->count;
                rmin = rm <= 0 ? 0 : rm > D1 ? D1 : (uint32_t)rm;
            }
            keys[i] = (key_tuple){l->gid, l->dfa->eqc[t->state], rmax, rmin};
            reps[i] = (rep){l, t->state, t->count, nocap};
        }
        /* sort keys with their representatives, then dedupe */
        for (uint32_t i = 1; i < k; i++) {
            key_tuple kt = keys[i];
            rep rt = reps[i];
            uint32_t j = i;
            while (j > 0 && cmp_tuple(&keys[j - 1], &kt) > 0) keys[j] = keys[j - 1], reps[j] = reps[j - 1], j--;
            keys[j] = kt, reps[j] = rt;
        }
        uint32_t u = 0;
        for (uint32_t i = 0; i < k; i++)
            if (!u || cmp_tuple(&keys[u - 1], &keys[i])) keys[u] = keys[i], reps[u] = reps[i], u++;
        uint32_t *kw = (uint32_t *)keys;
        uint32_t kl = u * 4;
        uint64_t h = hash_key(kw, kl);
        so_cache_entry *e = cacheable ? so_cache_lookup(v, kw, kl, h) : NULL;
        so_cache_entry *own = NULL;
        if (e) {
            if (stats) stats->hits++;
        } else {
            if (stats) stats->misses++;
            int lazy = -1;
            for (uint32_t i = 0; i < u; i++)
                if (reps[i].nocap) lazy = (int)i;
            own = compute_entry(v, reps, u, lazy);
            if (!own) {
                if (keys != stack_keys) free(keys);
                if (reps != stack_reps) free(reps);
                return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory computing a mask");
            }
            if (cacheable) {
                own->key = malloc(kl * sizeof *own->key);
                if (own->key) {
                    memcpy(own->key, kw, kl * sizeof *own->key);
                    own->keylen = kl, own->hash = h;
                    so_cache_entry *in = so_cache_insert(v, own);
                    if (in) e = in, own = NULL;
                }
            }
            if (!e) e = own;
        }
        if (keys != stack_keys) free(keys);
        if (reps != stack_reps) free(reps);
        memcpy(mask, e->acc, (size_t)v->n_words * sizeof *mask);
        for (uint32_t i = 0; i < e->ntrim && e->trim[2 * i] > lazy_rmax; i++) clear_tok(v, mask, (int32_t)e->trim[2 * i + 1]);
        int rc = walk_dep(p, v, e->dep, e->ndep, mask, stats);
        if (stats) stats->dep_roots += e->ndep;
        so_cache_entry_free(own);
        if (rc < 0) return di_error_set(err, DEEPINFER_ERR_LIMIT, "parser limit reached while computing a mask");
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
