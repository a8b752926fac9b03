/*
 * regex_compile.c — regex AST → byte NFA (Thompson) → DFA (subset
 * construction over byte classes); DFA products; bounded-depth state classes.
 *
 * Code-point classes become UTF-8 byte-range sequences (the usual split of a
 * range into pieces whose encodings form byte-range products). In JSON-string
 * mode, characters that JSON must escape become their canonical escape.
 */
#include "structured/dfa.h"

#include <stdlib.h>
#include <string.h>

/* ---- NFA ----------------------------------------------------------------- */

typedef struct nedge {
    uint32_t from, to;
    int16_t lo, hi; /* byte range; lo < 0: epsilon */
} nedge;

typedef struct nfa {
    uint32_t nstates;
    uint8_t *mid; /* 1 = inside a character's byte sequence */
    uint32_t midcap;
    nedge *e;
    size_t ne, ecap;
    uint32_t max_states;
    int over, oom;
} nfa;

static uint32_t nfa_state(nfa *n, int mid) {
    if (n->nstates >= n->max_states) {
        n->over = 1;
        return 0;
    }
    if (n->nstates >= n->midcap) {
        uint32_t nc = n->midcap ? n->midcap * 2 : 256;
        uint8_t *m = realloc(n->mid, nc);
        if (!m) {
            n->oom = 1;
            return 0;
        }
        n->mid = m, n->midcap = nc;
    }
    n->mid[n->nstates] = (uint8_t)mid;
    return n->nstates++;
}

static void nfa_edge(nfa *n, uint32_t from, uint32_t to, int lo, int hi) {
    if (n->over || n->oom) return;
    if (n->ne == n->ecap) {
        size_t nc = n->ecap ? n->ecap * 2 : 1024;
        nedge *ne = realloc(n->e, nc * sizeof *ne);
        if (!ne) {
            n->oom = 1;
            return;
        }
        n->e = ne, n->ecap = nc;
    }
    n->e[n->ne++] = (nedge){from, to, (int16_t)lo, (int16_t)hi};
}

static void nfa_bytes(nfa *n, uint32_t s, uint32_t e, const uint8_t *lo, const uint8_t *hi, int len) {
    uint32_t cur = s;
    for (int k = 0; k < len; k++) {
        uint32_t nx = k == len - 1 ? e : nfa_state(n, 1);
        if (n->over || n->oom) return;
        nfa_edge(n, cur, nx, lo[k], hi[k]);
        cur = nx;
    }
}

/* Emit byte sequences for code points [lo,hi] that share an encoded length. */
static void utf8_same_len(nfa *n, uint32_t s, uint32_t e, uint32_t lo, uint32_t hi) {
    int len = lo < 0x80 ? 1 : lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
    for (int i = 1; i < len; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_same_len(n, s, e, lo, lo | m);
                utf8_same_len(n, s, e, (lo | m) + 1, hi);
                return;
            }
            if ((hi & m) != m) {
                utf8_same_len(n, s, e, lo, (hi & ~m) - 1);
                utf8_same_len(n, s, e, hi & ~m, hi);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    so_utf8_encode(lo, a);
    so_utf8_encode(hi, b);
    nfa_bytes(n, s, e, a, b, len);
}

static void utf8_range(nfa *n, uint32_t s, uint32_t e, uint32_t lo, uint32_t hi) {
    static const uint32_t bounds[][2] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
    for (int k = 0; k < 5; k++) {
        uint32_t a = lo > bounds[k][0] ? lo : bounds[k][0];
        uint32_t b = hi < bounds[k][1] ? hi : bounds[k][1];
        if (a <= b) utf8_same_len(n, s, e, a, b);
    }
}

static void class_edges(nfa *n, uint32_t s, uint32_t e, const so_rx *c, int json) {
    uint32_t ctl = 0; /* JSON mode: allowed code points below 0x20 */
    int quote = 0, bslash = 0;
    for (uint32_t k = 0; k < c->nranges; k++) {
        uint32_t lo = c->ranges[2 * k], hi = c->ranges[2 * k + 1];
        if (!json) {
            utf8_range(n, s, e, lo, hi);
            continue;
        }
        for (uint32_t ch = lo; ch <= hi && ch < 0x20; ch++) ctl |= 1u << ch;
        uint32_t a = lo < 0x20 ? 0x20 : lo;
        while (a <= hi) {
            if (a == '"' || a == '\\') {
                if (a == '"') quote = 1;
                else bslash = 1;
                a++;
                continue;
            }
            uint32_t b = hi;
            if (a < '"' && b >= '"') b = '"' - 1;
            else if (a < '\\' && b >= '\\') b = '\\' - 1;
            utf8_range(n, s, e, a, b);
            a = b + 1;
            if (a == 0) break;
        }
    }
    if (!ctl && !quote && !bslash) return;
    /* escapes share their prefix states: \ then a letter, or \u00 + two hex digits */
    uint32_t m1 = nfa_state(n, 1);
    nfa_edge(n, s, m1, '\\', '\\');
    if (quote) nfa_edge(n, m1, e, '"', '"');
    if (bslash) nfa_edge(n, m1, e, '\\', '\\');
    static const char shortesc[32] = {[0x08] = 'b', [0x0C] = 'f', [0x0A] = 'n', [0x0D] = 'r', [0x09] = 't'};
    uint32_t longmask = 0;
    for (uint32_t ch = 0; ch < 0x20; ch++) {
        if (!((ctl >> ch) & 1)) continue;
        if (shortesc[ch]) nfa_edge(n, m1, e, shortesc[ch], shortesc[ch]);
        else longmask |= 1u << ch;
    }
    if (!longmask) return;
    static const char hex[] = "0123456789abcdef";
    uint32_t m2 = nfa_state(n, 1), m3 = nfa_state(n, 1), m4 = nfa_state(n, 1);
    nfa_edge(n, m1, m2, 'u', 'u');
    nfa_edge(n, m2, m3, '0', '0');
    nfa_edge(n, m3, m4, '0', '0');
    for (uint32_t h = 0; h < 2; h++) {
        uint32_t part = (longmask >> (16 * h)) & 0xFFFF;
        if (!part) continue;
        uint32_t m5 = nfa_state(n, 1);
        nfa_edge(n, m4, m5, '0' + (int)h, '0' + (int)h);
        for (uint32_t l = 0; l < 16; l++)
            if ((part >> l) & 1) nfa_edge(n, m5, e, hex[l], hex[l]);
    }
}

/* Build `rx` from state s; returns the end state. */
static uint32_t build(nfa *n, const so_rx *rx, uint32_t s, int json) {
    if (n->over || n->oom) return 0;
    switch (rx->kind) {
    case SO_RX_CLASS: {
        uint32_t e = nfa_state(n, 0);
        class_edges(n, s, e, rx, json);
        return e;
    }
    case SO_RX_CAT: {
        uint32_t cur = s;
        for (uint32_t k = 0; k < rx->nkids; k++) cur = build(n, rx->kids[k], cur, json);
        return cur;
    }
    case SO_RX_ALT: {
        uint32_t e = nfa_state(n, 0);
        for (uint32_t k = 0; k < rx->nkids; k++) {
            uint32_t ek = build(n, rx->kids[k], s, json);
            nfa_edge(n, ek, e, -1, -1);
        }
        return e;
    }
    case SO_RX_REP: {
        uint32_t cur = s;
        if (rx->max < 0) {
            /* X{m,} = X^(m-1) then X+ built once with a back edge through a
             * fresh state (so nested + do not double the automaton) */
            for (int k = 0; k + 1 < rx->min && !n->over && !n->oom; k++) cur = build(n, rx->kids[0], cur, json);
            uint32_t l = nfa_state(n, 0);
            nfa_edge(n, cur, l, -1, -1);
            uint32_t t = build(n, rx->kids[0], l, json);
            nfa_edge(n, t, l, -1, -1);
            return rx->min >= 1 ? t : l;
        }
        for (int k = 0; k < rx->min && !n->over && !n->oom; k++) cur = build(n, rx->kids[0], cur, json);
        uint32_t e = nfa_state(n, 0);
        nfa_edge(n, cur, e, -1, -1);
        for (int k = rx->min; k < rx->max && !n->over && !n->oom; k++) {
            cur = build(n, rx->kids[0], cur, json);
            nfa_edge(n, cur, e, -1, -1);
        }
        return e;
    }
    default:
        n->over = 2; /* anchors never reach here */
        return 0;
    }
}

/* ---- subset construction ------------------------------------------------- */

typedef struct sethash {
    uint32_t *slot; /* dfa state id + 1, 0 = empty */
    uint32_t cap;
} sethash;

typedef struct dbuild {
    /* CSR adjacency */
    uint32_t *eoff;   /* nstates+1 */
    nedge *edges;     /* sorted by from */
    /* DFA state sets: concatenated */
    uint32_t *sets;
    size_t nsets_used, sets_cap;
    size_t *set_off; /* per dfa state: offset; count = next - this */
    uint32_t nd, ndcap;
    uint32_t *trans;
    uint8_t *flags;
    sethash h;
    uint32_t *stamp, stampv;
    uint32_t *stack, *tmp;
} dbuild;

static uint64_t hash_set(const uint32_t *s, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_edge(const void *a, const void *b) {
    const nedge *x = a, *y = b;
    return x->from < y->from ? -1 : x->from > y->from;
}

/* epsilon closure of tmp[0..n) in place (result in tmp, sorted); returns size */
static size_t closure(dbuild *b, size_t n) {
    b->stampv++;
    size_t sp = 0, out = 0;
    for (size_t i = 0; i < n; i++)
        if (b->stamp[b->tmp[i]] != b->stampv) b->stamp[b->tmp[i]] = b->stampv, b->stack[sp++] = b->tmp[i];
    while (sp) {
        uint32_t s = b->stack[--sp];
        b->tmp[out++] = s;
        for (uint32_t k = b->eoff[s]; k < b->eoff[s + 1]; k++) {
            const nedge *e = &b->edges[k];
            if (e->lo < 0 && b->stamp[e->to] != b->stampv) b->stamp[e->to] = b->stampv, b->stack[sp++] = e->to;
        }
    }
    qsort(b->tmp, out, sizeof(uint32_t), cmp_u32);
    return out;
}

static void dfa_free_parts(so_dfa *d) {
    if (!d) return;
    free(d->trans);
    free(d->flags);
    free(d->eqc);
    free(d->proj);
    free(d);
}

void so_dfa_free(so_dfa *d) { dfa_free_parts(d); }

/* Find or add the DFA state for set tmp[0..n). Returns id, or UINT32_MAX on limit/oom. */
static uint32_t intern_set(dbuild *b, size_t n, uint32_t maxd, uint32_t nclasses) {
    uint64_t h = hash_set(b->tmp, n);
    if ((size_t)b->nd * 2 + 2 > b->h.cap) {
        uint32_t nc = b->h.cap ? b->h.cap * 2 : 1024;
        uint32_t *ns = calloc(nc, sizeof *ns);
        if (!ns) return UINT32_MAX;
        for (uint32_t i = 0; i < b->h.cap; i++) {
            uint32_t v = b->h.slot[i];
            if (!v) continue;
            size_t off = b->set_off[v - 1], cnt = b->set_off[v] - off;
            uint64_t hh = hash_set(b->sets + off, cnt);
            uint32_t j = (uint32_t)hh & (nc - 1);
            while (ns[j]) j = (j + 1) & (nc - 1);
            ns[j] = v;
        }
        free(b->h.slot);
        b->h.slot = ns, b->h.cap = nc;
    }
    uint32_t j = (uint32_t)h & (b->h.cap - 1);
    while (b->h.slot[j]) {
        uint32_t v = b->h.slot[j] - 1;
        size_t off = b->set_off[v], cnt = b->set_off[v + 1] - off;
        if (cnt == n && !memcmp(b->sets + off, b->tmp, n * sizeof(uint32_t))) return v;
        j = (j + 1) & (b->h.cap - 1);
    }
    if (b->nd >= maxd) return UINT32_MAX;
    if (b->nd + 1 >= b->ndcap) {
        uint32_t nc = b->ndcap ? b->ndcap * 2 : 64;
        size_t *so = realloc(b->set_off, (nc + 1) * sizeof *so);
        if (!so) return UINT32_MAX;
        b->set_off = so;
        uint32_t *nt = realloc(b->trans, (size_t)nc * nclasses * sizeof *nt);
        if (!nt) return UINT32_MAX;
        b->trans = nt;
        uint8_t *nf = realloc(b->flags, nc);
        if (!nf) return UINT32_MAX;
        b->flags = nf;
        b->ndcap = nc;
    }
    if (b->nsets_used + n > b->sets_cap) {
        size_t nc = b->sets_cap ? b->sets_cap * 2 : 4096;
        while (nc < b->nsets_used + n) nc *= 2;
        uint32_t *ns = realloc(b->sets, nc * sizeof *ns);
        if (!ns) return UINT32_MAX;
        b->sets = ns, b->sets_cap = nc;
    }
    uint32_t id = b->nd++;
    b->set_off[id] = b->nsets_used;
    if (n) memcpy(b->sets + b->nsets_used, b->tmp, n * sizeof(uint32_t));
    b->nsets_used += n;
    b->set_off[id + 1] = b->nsets_used;
    b->h.slot[j] = id + 1;
    return id;
}

/* Mark states that cannot reach acceptance as dead (redirect to 0) and set
 * SO_DFA_MORE. State 1 stays the start state even when dead. */
static int prune_dead(so_dfa *d) {
    uint32_t n = d->nstates, nc = d->nclasses;
    uint8_t *live = calloc(n, 1);
    uint32_t *cnt = calloc((size_t)n + 1, sizeof *cnt), *radj = NULL, *q = NULL;
    if (!live || !cnt) goto oom;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t c = 0; c < nc; c++) cnt[d->trans[(size_t)s * nc + c] + 1]++;
    for (uint32_t s = 0; s < n; s++) cnt[s + 1] += cnt[s];
    radj = malloc(((size_t)n * nc + 1) * sizeof *radj);
    q = malloc(((size_t)n + 1) * sizeof *q);
    if (!radj || !q) goto oom;
    {
        uint32_t *pos = malloc(((size_t)n + 1) * sizeof *pos);
        if (!pos) goto oom;
        memcpy(pos, cnt, ((size_t)n + 1) * sizeof *pos);
        for (uint32_t s = 0; s < n; s++)
            for (uint32_t c = 0; c < nc; c++) radj[pos[d->trans[(size_t)s * nc + c]]++] = s;
        free(pos);
    }
    size_t qh = 0, qt = 0;
    for (uint32_t s = 1; s < n; s++)
        if (d->flags[s] & SO_DFA_ACCEPT) live[s] = 1, q[qt++] = s;
    while (qh < qt) {
        uint32_t s = q[qh++];
        for (uint32_t k = cnt[s]; k < cnt[s + 1]; k++)
            if (!live[radj[k]] && radj[k] != 0) live[radj[k]] = 1, q[qt++] = radj[k];
    }
    for (uint32_t s = 0; s < n; s++) {
        int more = 0;
        for (uint32_t c = 0; c < nc; c++) {
            uint32_t *t = &d->trans[(size_t)s * nc + c];
            if (!live[*t]) *t = 0;
            if (*t) more = 1;
        }
        if (!live[s]) {
            d->flags[s] &= (uint8_t)~SO_DFA_ACCEPT;
            for (uint32_t c = 0; c < nc; c++) d->trans[(size_t)s * nc + c] = 0;
            more = 0;
        }
        if (more) d->flags[s] |= SO_DFA_MORE;
        else d->flags[s] &= (uint8_t)~SO_DFA_MORE;
    }
    d->flags[0] = 0;
    free(live), free(cnt), free(radj), free(q);
    return 1;
oom:
    free(live), free(cnt), free(radj), free(q);
    return 0;
}

deepinfer_status so_dfa_from_rx(const so_rx *rx, int json_string, const so_dfa_limits *lim, so_dfa **out,
                                di_error *err) {
    uint32_t maxn = lim && lim->max_nfa_states ? lim->max_nfa_states : 100000;
    uint32_t maxd = lim && lim->max_dfa_states ? lim->max_dfa_states : 20000;
    nfa n = {.max_states = maxn};
    deepinfer_status st = DEEPINFER_OK;
    so_dfa *d = NULL;
    dbuild b = {0};
    uint32_t start = nfa_state(&n, 0), end;
    if (json_string) {
        uint32_t a = nfa_state(&n, 0);
        nfa_edge(&n, start, a, '"', '"');
        uint32_t body = build(&n, rx, a, 1);
        end = nfa_state(&n, 0);
        nfa_edge(&n, body, end, '"', '"');
    } else {
        end = build(&n, rx, start, 0);
    }
    if (n.oom) {
        st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "regex: out of memory");
        goto done;
    }
    if (n.over == 2) {
        st = di_error_set(err, DEEPINFER_ERR_INTERNAL, "regex: unresolved anchor");
        goto done;
    }
    if (n.over) {
        st = di_error_set(err, DEEPINFER_ERR_LIMIT, "regex too large: more than %u automaton states", maxn);
        goto done;
    }
    /* byte classes from range boundaries */
    uint8_t cut[257] = {0};
    for (size_t k = 0; k < n.ne; k++)
        if (n.e[k].lo >= 0) cut[n.e[k].lo] = 1, cut[n.e[k].hi + 1] = 1;
    d = calloc(1, sizeof *d);
    if (!d) goto oom;
    uint32_t nc = 0;
    uint8_t rep[256];
    for (int c = 0; c < 256; c++) {
        if (c == 0 || cut[c]) rep[nc++] = (uint8_t)c;
        d->cls[c] = (uint8_t)(nc - 1);
    }
    d->nclasses = nc;
    /* CSR */
    if (n.ne) qsort(n.e, n.ne, sizeof *n.e, cmp_edge);
    b.eoff = calloc((size_t)n.nstates + 1, sizeof *b.eoff);
    b.stamp = calloc(n.nstates, sizeof *b.stamp);
    b.stack = malloc((size_t)n.nstates * sizeof *b.stack);
    b.tmp = malloc((size_t)n.nstates * sizeof *b.tmp);
    if (!b.eoff || !b.stamp || !b.stack || !b.tmp) goto oom;
    for (size_t k = 0; k < n.ne; k++) b.eoff[n.e[k].from + 1]++;
    for (uint32_t s = 0; s < n.nstates; s++) b.eoff[s + 1] += b.eoff[s];
    b.edges = n.e;
    /* state 0 = empty set, state 1 = closure(start) */
    if (intern_set(&b, 0, maxd, nc) != 0) goto oom;
    b.tmp[0] = start;
    size_t cn = closure(&b, 1);
    if (intern_set(&b, cn, maxd, nc) != 1) goto oom;
    uint64_t work = 0, max_work = lim && lim->max_work ? lim->max_work : 30000000ull;
    for (uint32_t id = 0; id < b.nd; id++) {
        size_t off = b.set_off[id], cnt = b.set_off[id + 1] - off;
        uint8_t f = 0;
        work += (uint64_t)cnt * nc + nc;
        if (work > max_work) {
            st = di_error_set(err, DEEPINFER_ERR_LIMIT, "regex too complex: automaton construction over its work budget");
            goto done;
        }
        int mid = 0;
        for (size_t i = 0; i < cnt; i++) {
            uint32_t s = b.sets[off + i];
            if (s == end) f |= SO_DFA_ACCEPT;
            if (n.mid[s]) mid = 1;
        }
        if (!mid) f |= SO_DFA_BOUNDARY;
        b.flags[id] = f;
        for (uint32_t c = 0; c < nc; c++) {
            uint8_t byte = rep[c];
            size_t m = 0;
            off = b.set_off[id];
            for (size_t i = 0; i < cnt; i++) {
                uint32_t s = b.sets[off + i];
                for (uint32_t k = b.eoff[s]; k < b.eoff[s + 1]; k++) {
                    const nedge *e = &b.edges[k];
                    if (e->lo >= 0 && e->lo <= byte && byte <= e->hi) b.tmp[m++] = e->to;
                }
            }
            uint32_t t = 0;
            work += m * 8; /* closure + sort of the moved set */
            if (m) {
                m = closure(&b, m);
                t = intern_set(&b, m, maxd, nc);
                if (t == UINT32_MAX) {
                    if (b.nd >= maxd) {
                        st = di_error_set(err, DEEPINFER_ERR_LIMIT,
                                          "regex too complex: more than %u DFA states", maxd);
                        goto done;
                    }
                    goto oom;
                }
            }
            b.trans[(size_t)id * nc + c] = t;
        }
    }
    d->nstates = b.nd;
    d->trans = b.trans, b.trans = NULL;
    d->flags = b.flags, b.flags = NULL;
    d->flags[0] = 0;
    if (!prune_dead(d)) goto oom;
    d->bytes = sizeof *d + (size_t)d->nstates * (nc * 4 + 1 + 4);
    *out = d;
    d = NULL;
    goto done;
oom:
    st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "regex: out of memory building the automaton");
done:
    dfa_free_parts(d);
    free(n.e), free(n.mid);
    free(b.eoff), free(b.stamp), free(b.stack), free(b.tmp), free(b.sets), free(b.set_off), free(b.trans),
        free(b.flags), free(b.h.slot);
    return st;
}

/* ---- product ------------------------------------------------------------- */

deepinfer_status so_dfa_product(const so_dfa *a, const so_dfa *b, int op, const so_dfa_limits *lim, so_dfa **out,
                                di_error *err) {
    uint32_t maxd = lim && lim->max_dfa_states ? lim->max_dfa_states : 20000;
    so_dfa *d = calloc(1, sizeof *d);
    if (!d) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    /* common refinement of the two byte-class maps */
    uint32_t nc = 0;
    uint8_t rep[256];
    for (int c = 0; c < 256; c++) {
        int found = -1;
        for (uint32_t k = 0; k < nc; k++)
            if (a->cls[rep[k]] == a->cls[c] && b->cls[rep[k]] == b->cls[c]) {
                found = (int)k;
                break;
            }
        if (found < 0) rep[nc] = (uint8_t)c, found = (int)nc++;
        d->cls[c] = (uint8_t)found;
    }
    d->nclasses = nc;
    /* pair -> id via open addressing */
    uint32_t cap = 1024, nd = 0, ndcap = 0;
    uint64_t *slot = calloc(cap, sizeof *slot); /* (pair+1) packed: (sa<<32|sb)+1 stored with id in parallel */
    uint32_t *sid = calloc(cap, sizeof *sid);
    uint64_t *pairs = NULL;
    uint32_t *trans = NULL;
    uint8_t *flags = NULL;
    deepinfer_status st = DEEPINFER_OK;
    if (!slot || !sid) goto oom;
#define PAIR_ID(sa, sb, res)                                                                         \
    do {                                                                                             \
        uint64_t key_ = ((uint64_t)(sa) << 32 | (sb)) + 1;                                           \
        if (op == 0 && ((sa) == 0 || (sb) == 0)) { res = 0; break; }                                 \
        if (op == 1 && (sa) == 0) { res = 0; break; }                                                \
        if ((sa) == 0 && (sb) == 0) { res = 0; break; }                                              \
        if ((size_t)nd * 2 + 2 > cap) {                                                              \
            uint32_t nc2 = cap * 2;                                                                  \
            uint64_t *ns = calloc(nc2, sizeof *ns);                                                  \
            uint32_t *ni = calloc(nc2, sizeof *ni);                                                  \
            if (!ns || !ni) { free(ns); free(ni); goto oom; }                                        \
            for (uint32_t i_ = 0; i_ < cap; i_++)                                                    \
                if (slot[i_]) {                                                                      \
                    uint32_t j_ = (uint32_t)((slot[i_] * 0x9E3779B97F4A7C15ull) >> 40) & (nc2 - 1);  \
                    while (ns[j_]) j_ = (j_ + 1) & (nc2 - 1);                                        \
                    ns[j_] = slot[i_], ni[j_] = sid[i_];                                             \
                }                                                                                    \
            free(slot), free(sid);                                                                   \
            slot = ns, sid = ni, cap = nc2;                                                          \
        }                                                                                            \
        uint32_t j_ = (uint32_t)((key_ * 0x9E3779B97F4A7C15ull) >> 40) & (cap - 1);                  \
        while (slot[j_] && slot[j_] != key_) j_ = (j_ + 1) & (cap - 1);                              \
        if (slot[j_]) { res = sid[j_]; break; }                                                      \
        if (nd >= maxd) {                                                                            \
            st = di_error_set(err, DEEPINFER_ERR_LIMIT, "regex intersection too complex: more than %u states", maxd); \
            goto fail;                                                                               \
        }                                                                                            \
        if (nd >= ndcap) {                                                                           \
            uint32_t c2 = ndcap ? ndcap * 2 : 64;                                                    \
            uint64_t *np = realloc(pairs, c2 * sizeof *np);                                          \
            if (!np) goto oom;                                                                       \
            pairs = np;                                                                              \
            uint32_t *nt = realloc(trans, (size_t)c2 * nc * sizeof *nt);                             \
            if (!nt) goto oom;                                                                       \
            trans = nt;                                                                              \
            uint8_t *nf = realloc(flags, c2);                                                        \
            if (!nf) goto oom;                                                                       \
            flags = nf;                                                                              \
            ndcap = c2;                                                                              \
        }                                                                                            \
        slot[j_] = key_, sid[j_] = nd;                                                               \
        pairs[nd] = key_ - 1;                                                                        \
        res = nd++;                                                                                  \
    } while (0)
    {
        uint32_t r;
        /* id 0: dead, reserved */
        if (ndcap == 0) {
            ndcap = 64;
            pairs = malloc(ndcap * sizeof *pairs);
            trans = malloc((size_t)ndcap * nc * sizeof *trans);
            flags = malloc(ndcap);
            if (!pairs || !trans || !flags) goto oom;
        }
        pairs[0] = 0;
        nd = 1;
        PAIR_ID(1u, 1u, r);
        if (r != 1) { /* start pair is dead: empty language */
            nd = 2;
            pairs[1] = 0;
        }
        for (uint32_t id = 1; id < nd; id++) {
            uint32_t sa = (uint32_t)(pairs[id] >> 32), sb = (uint32_t)pairs[id];
            uint8_t fa = sa < a->nstates ? a->flags[sa] : 0, fb = sb < b->nstates ? b->flags[sb] : 0;
            int aa = sa && (fa & SO_DFA_ACCEPT), ab = sb && (fb & SO_DFA_ACCEPT);
            int acc = op == 0 ? aa && ab : op == 1 ? aa && !ab : aa || ab;
            flags[id] = (uint8_t)((acc ? SO_DFA_ACCEPT : 0) | ((sa ? fa : fb) & SO_DFA_BOUNDARY));
            for (uint32_t c = 0; c < nc; c++) {
                uint32_t t = 0;
                uint32_t ta = sa ? so_dfa_next(a, sa, rep[c]) : 0;
                uint32_t tb = sb ? so_dfa_next(b, sb, rep[c]) : 0;
                PAIR_ID(ta, tb, t);
                trans[(size_t)id * nc + c] = t;
            }
        }
    }
#undef PAIR_ID
    for (uint32_t c = 0; c < nc; c++) trans[c] = 0;
    flags[0] = 0;
    d->nstates = nd;
    d->trans = trans, trans = NULL;
    d->flags = flags, flags = NULL;
    if (op == 1) {
        d->proj = malloc((size_t)nd * sizeof *d->proj);
        if (!d->proj) goto oom;
        for (uint32_t id = 0; id < nd; id++) d->proj[id] = (uint32_t)(pairs[id] >> 32);
        d->proj[0] = 0;
    }
    if (!prune_dead(d)) goto oom;
    d->bytes = sizeof *d + (size_t)d->nstates * (nc * 4 + 1 + 4);
    *out = d;
    d = NULL;
    goto fail;
oom:
    st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory in regex intersection");
fail:
    free(slot), free(sid), free(pairs), free(trans), free(flags);
    dfa_free_parts(d);
    return st;
}

/* ---- bounded-depth equivalence ------------------------------------------- */

deepinfer_status so_dfa_classes(so_dfa *d, int depth, size_t max_work, di_error *err) {
    uint32_t n = d->nstates, nc = d->nclasses;
    free(d->eqc);
    d->eqc = malloc((size_t)n * sizeof *d->eqc);
    if (!d->eqc) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    if ((size_t)n * nc * (size_t)depth > max_work) {
        for (uint32_t s = 0; s < n; s++) d->eqc[s] = s;
        d->neqc = n;
        return DEEPINFER_OK;
    }
    uint32_t *cur = d->eqc, *nxt = malloc((size_t)n * sizeof *nxt);
    uint32_t hcap = 16;
    while (hcap < 2 * n + 2) hcap *= 2;
    uint32_t *hs = malloc((size_t)hcap * sizeof *hs); /* state index + 1 of the class representative */
    uint64_t *hh = malloc((size_t)hcap * sizeof *hh);
    if (!nxt || !hs || !hh) {
        free(nxt), free(hs), free(hh);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    /* initial partition: dead / flags (start state kept distinct: counting differs there) */
    uint32_t ncls = 0;
    {
        int idx[16];
        for (int k = 0; k < 16; k++) idx[k] = -1;
        for (uint32_t s = 0; s < n; s++) {
            int key = s == 0 ? 8 : (d->flags[s] & 7);
            if (s == 1) {
                cur[s] = ncls++;
                continue;
            }
            if (idx[key] < 0) idx[key] = (int)ncls++;
            cur[s] = (uint32_t)idx[key];
        }
    }
    for (int round = 0; round < depth; round++) {
        memset(hs, 0, (size_t)hcap * sizeof *hs);
        uint32_t nn = 0;
        for (uint32_t s = 0; s < n; s++) {
            uint64_t h = 1469598103934665603ull ^ cur[s];
            const uint32_t *t = &d->trans[(size_t)s * nc];
            for (uint32_t c = 0; c < nc; c++) h = (h ^ cur[t[c]]) * 1099511628211ull;
            uint32_t j = (uint32_t)(h >> 17) & (hcap - 1);
            for (;;) {
                if (!hs[j]) {
                    hs[j] = s + 1, hh[j] = h;
                    nxt[s] = nn++;
                    break;
                }
                uint32_t r = hs[j] - 1;
                if (hh[j] == h && cur[r] == cur[s]) {
                    const uint32_t *tr = &d->trans[(size_t)r * nc];
                    uint32_t c = 0;
                    while (c < nc && cur[tr[c]] == cur[t[c]]) c++;
                    if (c == nc) {
                        nxt[s] = nxt[r];
                        break;
                    }
                }
                j = (j + 1) & (hcap - 1);
            }
        }
        uint32_t *sw = cur;
        cur = nxt, nxt = sw;
        int stable = nn == ncls;
        ncls = nn;
        if (stable) break;
    }
    if (cur != d->eqc) {
        memcpy(d->eqc, cur, (size_t)n * sizeof *cur);
        free(cur);
    } else {
        free(nxt);
    }
    d->neqc = ncls;
    free(hs), free(hh);
    return DEEPINFER_OK;
}

int so_dfa_matches(const so_dfa *d, const uint8_t *s, size_t len) {
    uint32_t st = 1;
    if (d->nstates < 2) return 0;
    for (size_t i = 0; i < len; i++) {
        st = so_dfa_next(d, st, s[i]);
        if (!st) return 0;
    }
    return (d->flags[st] & SO_DFA_ACCEPT) != 0;
}

/* ---- divisibility -------------------------------------------------------- */

/* -?(0|[1-9][0-9]*)(\.0+)? whose integer value is a multiple of m, built
 * directly: states are remainders mod m. */
deepinfer_status so_dfa_multiple(uint32_t m, so_dfa **out, di_error *err) {
    if (m < 1 || m > 100000) return di_error_set(err, DEEPINFER_ERR_LIMIT, "multipleOf %u too large", m);
    so_dfa *d = calloc(1, sizeof *d);
    if (!d) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    /* classes: 0 other, 1 '-', 2 '.', 3..12 digits */
    d->nclasses = 13;
    for (int c = 0; c < 256; c++) d->cls[c] = 0;
    d->cls['-'] = 1, d->cls['.'] = 2;
    for (int c = '0'; c <= '9'; c++) d->cls[c] = (uint8_t)(3 + c - '0');
    /* 0 dead, 1 start, 2 minus, 3 zero, 4 dot, 5 frac zeros, 6.. remainders */
    uint32_t n = 6 + m, nc = d->nclasses;
    d->nstates = n;
    d->trans = calloc((size_t)n * nc, sizeof *d->trans);
    d->flags = calloc(n, 1);
    if (!d->trans || !d->flags) {
        so_dfa_free(d);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
#define T(s, c) d->trans[(size_t)(s) * nc + (c)]
    for (uint32_t s = 1; s <= 2; s++) {
        T(s, 3) = 3;
        for (int dg = 1; dg <= 9; dg++) T(s, 3 + dg) = 6 + (uint32_t)dg % m;
    }
    T(1, 1) = 2;
    T(3, 2) = 4;
    T(4, 3) = 5;
    T(5, 3) = 5;
    for (uint32_t r = 0; r < m; r++)
        for (int dg = 0; dg <= 9; dg++) T(6 + r, 3 + dg) = 6 + (uint32_t)((r * 10ull + (uint64_t)dg) % m);
    T(6, 2) = 4;
#undef T
    d->flags[3] = d->flags[5] = d->flags[6] = SO_DFA_ACCEPT;
    for (uint32_t s = 1; s < n; s++) d->flags[s] |= SO_DFA_BOUNDARY;
    if (!prune_dead(d)) {
        so_dfa_free(d);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    d->bytes = sizeof *d + (size_t)n * (nc * 4 + 5);
    *out = d;
    return DEEPINFER_OK;
}
