/*
 * json_schema.c — JSON Schema → grammar IR (see json_schema.h).
 *
 * A schema position is a conjunction of raw schema nodes (allOf members,
 * $ref targets, ...). flatten() merges their keywords into one `sn`
 * (intersection: tightest bounds, union of required, per-property
 * conjunctions) and collects disjunctions (anyOf, oneOf, negations,
 * if/then/else, dependencies) as groups. A node with groups becomes the
 * union of its alternatives: each alternative is the conjunction again with
 * the already-expanded members marked "stripped" (their applicators are not
 * expanded a second time) plus the chosen branches. Every conjunction gets
 * one nonterminal, memoised by its member list, which is what makes
 * recursive $ref terminate.
 */
#include "structured/json_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "io/json.h"
#include "structured/json_formats.h"
#include "structured/json_numbers.h"
#include "structured/json_write.h"
#include "structured/lexspec.h"

#define T_NULL 1u
#define T_BOOL 2u
#define T_INT 4u
#define T_NUM 8u /* any number (implies integers) */
#define T_STR 16u
#define T_ARR 32u
#define T_OBJ 64u
#define T_ALL 127u

#define MAX_ALTS 256
#define MAX_EXPAND 512
#define MAX_DEPTH 200

typedef uintptr_t mem; /* di_json pointer | 1 when "stripped" */
#define M_NODE(m) ((const di_json *)((m) & ~(uintptr_t)1))
#define M_STRIPPED(m) ((int)((m)&1))

typedef struct conj {
    mem *m;
    uint32_t n;
} conj;

typedef struct facet {
    const di_json *props, *pprops, *addl;
} facet;

typedef struct afacet {
    const di_json *prefix; /* array or NULL */
    const di_json *rest;   /* schema for positions past prefix, or NULL */
} afacet;

typedef struct group {
    conj *alts;
    uint32_t n;
    int oneof;
} group;

typedef struct sn {
    uint32_t types;
    int unsat;
    int has_enum;
    const di_json **enums;
    uint32_t nenum;
    const di_json **excl;
    uint32_t nexcl;
    int64_t minlen, maxlen;
    const di_json **pats, **npats, **fmts;
    uint32_t npat, nnpat, nfmt;
    int has_lo, has_hi, lo_excl, hi_excl;
    so_dec lo, hi;
    const di_json **mult;
    uint32_t nmult;
    int nonint;
    afacet *af;
    uint32_t naf;
    int64_t minitems, maxitems;
    int unique;
    facet *of;
    uint32_t nof;
    const di_json **req;
    uint32_t nreq;
    int64_t minprops, maxprops;
    conj propnames;
    group *groups;
    uint32_t ngroups;
    conj members; /* expanded members */
} sn;

typedef struct memo {
    mem *key;
    uint32_t n;
    uint64_t h;
    int32_t nt;
} memo;

typedef struct ctx {
    so_gb *b;
    so_vocab *v;
    di_error *err;
    deepinfer_status st;
    const di_json *root;
    int draft; /* 4, 6, 7, 2019, 2020 */
    int lenient;
    int ws;
    di_arena a;
    memo *memo;
    uint32_t nmemo, memocap;
    clock_t deadline;
    int depth;
    /* shared symbols */
    int32_t s_lbrace, s_rbrace, s_lbrack, s_rbrack, s_comma, s_colon, s_str, s_num, s_true, s_false, s_null;
    int32_t nt_any;
    char wsre[40];
} ctx;

/* ---- small helpers ------------------------------------------------------- */

static int failf(ctx *c, deepinfer_status code, const char *fmt, const char *arg) {
    if (c->st == DEEPINFER_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, fmt, arg ? arg : "");
        c->st = di_error_set(c->err, code, "json schema: %s", msg);
    }
    return 0;
}

static int unsupported(ctx *c, const char *what) {
    return failf(c, DEEPINFER_ERR_UNSUPPORTED, "unsupported: %s (set lenient to ignore it)", what);
}

static int oom(ctx *c) { return failf(c, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory%s", ""); }

static void *grow(ctx *c, void *p, uint32_t n, size_t elem) {
    /* arena arrays grow by copying at powers of two */
    if (n && (n & (n - 1))) return p;
    uint32_t cap = n ? n * 2 : 4;
    void *np = di_arena_alloc(&c->a, cap * elem);
    if (!np) return oom(c), NULL;
    if (n) memcpy(np, p, n * elem);
    return np;
}

#define PUSH(c, arr, n, val)                                                   \
    do {                                                                       \
        void *np_ = grow(c, (void *)(arr), (n), sizeof *(arr));                \
        if (!np_) break;                                                       \
        (arr) = np_;                                                           \
        (arr)[(n)++] = (val);                                                  \
    } while (0)

static int key_is(const di_json *m, const char *k) { return m->key_len == strlen(k) && !memcmp(m->key, k, m->key_len); }

static const di_json *get(const di_json *o, const char *k) {
    if (!o || o->type != DI_JSON_OBJECT) return NULL;
    const di_json *r = NULL;
    for (uint32_t i = 0; i < o->count; i++)
        if (key_is(&o->items[i], k)) r = &o->items[i];
    return r;
}

static int time_up(ctx *c) {
    if (c->st != DEEPINFER_OK) return 1;
    if (clock() > c->deadline) return failf(c, DEEPINFER_ERR_LIMIT, "compile time limit exceeded%s", ""), 1;
    return 0;
}

/* synthetic nodes (arena) */
static di_json *mk(ctx *c, di_json_type t) {
    di_json *j = di_arena_calloc(&c->a, 1, sizeof *j);
    if (!j) return oom(c), NULL;
    j->type = t;
    j->key = "";
    return j;
}

static di_json *mk_obj(ctx *c, uint32_t n) {
    di_json *o = mk(c, DI_JSON_OBJECT);
    if (!o) return NULL;
    o->items = di_arena_calloc(&c->a, n + 1, sizeof *o->items);
    if (!o->items) return oom(c), NULL;
    o->count = n;
    return o;
}

static void set_member(di_json *o, uint32_t i, const char *key, size_t klen, const di_json *val) {
    o->items[i] = *val;
    o->items[i].key = key;
    o->items[i].key_len = klen;
}

static di_json *mk_str(ctx *c, const char *s, size_t n) {
    di_json *j = mk(c, DI_JSON_STRING);
    if (!j) return NULL;
    j->str = di_arena_strndup(&c->a, s, n);
    j->str_len = n;
    return j->str ? j : (oom(c), NULL);
}

/* {"type": [types]} */
static di_json *mk_types(ctx *c, uint32_t types) {
    static const char *names[] = {"null", "boolean", "integer", "number", "string", "array", "object"};
    uint32_t n = 0;
    if (types & T_NUM) types &= ~T_INT;
    for (int k = 0; k < 7; k++) n += (types >> k) & 1;
    di_json *arr = mk(c, DI_JSON_ARRAY);
    if (!arr) return NULL;
    arr->items = di_arena_calloc(&c->a, n + 1, sizeof *arr->items);
    if (!arr->items) return oom(c), NULL;
    arr->count = n;
    uint32_t w = 0;
    for (int k = 0; k < 7; k++)
        if ((types >> k) & 1) {
            di_json *s = mk_str(c, names[k], strlen(names[k]));
            if (!s) return NULL;
            arr->items[w++] = *s;
        }
    di_json *o = mk_obj(c, 1);
    if (!o) return NULL;
    set_member(o, 0, "type", 4, arr);
    return o;
}

/* ---- $ref resolution ----------------------------------------------------- */

static int hexd(int h) {
    if (h >= '0' && h <= '9') return h - '0';
    h |= 32;
    return h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
}

static int pct_decode(const char *s, size_t n, char *out, size_t *on) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n) return 0;
            int v1 = hexd((unsigned char)s[i + 1]), v2 = hexd((unsigned char)s[i + 2]);
            if (v1 < 0 || v2 < 0) return 0;
            out[o++] = (char)(v1 * 16 + v2);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    *on = o;
    return 1;
}

static int count_anchor(const di_json *n, const char *key, const char *val, size_t vlen, int depth) {
    if (!n || depth > MAX_DEPTH) return 0;
    int cnt = 0;
    if (n->type == DI_JSON_OBJECT) {
        const di_json *a = get(n, key);
        if (a && a->type == DI_JSON_STRING && a->str_len == vlen && !memcmp(a->str, val, vlen)) cnt++;
    }
    if (n->type == DI_JSON_OBJECT || n->type == DI_JSON_ARRAY)
        for (uint32_t i = 0; i < n->count; i++) {
            if (n->type == DI_JSON_OBJECT && (key_is(&n->items[i], "enum") || key_is(&n->items[i], "const"))) continue;
            cnt += count_anchor(&n->items[i], key, val, vlen, depth + 1);
        }
    return cnt;
}

static const di_json *find_anchor(const di_json *n, const char *key, const char *val, size_t vlen, int depth) {
    if (!n || depth > MAX_DEPTH) return NULL;
    if (n->type == DI_JSON_OBJECT) {
        const di_json *a = get(n, key);
        if (a && a->type == DI_JSON_STRING && a->str_len == vlen && !memcmp(a->str, val, vlen)) return n;
    }
    if (n->type == DI_JSON_OBJECT || n->type == DI_JSON_ARRAY) {
        for (uint32_t i = 0; i < n->count; i++) {
            if (n->type == DI_JSON_OBJECT && (key_is(&n->items[i], "enum") || key_is(&n->items[i], "const"))) continue;
            const di_json *r = find_anchor(&n->items[i], key, val, vlen, depth + 1);
            if (r) return r;
        }
    }
    return NULL;
}

static const di_json *resolve_ref(ctx *c, const di_json *ref) {
    if (ref->type != DI_JSON_STRING) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "$ref must be a string%s", ""), NULL;
    const char *s = ref->str;
    size_t n = ref->str_len;
    const char *hash = memchr(s, '#', n);
    const di_json *base = c->root;
    if (hash != s) {
        /* "other.json#..." : look for a subschema whose $id is that */
        size_t idlen = hash ? (size_t)(hash - s) : n;
        base = find_anchor(c->root, "$id", s, idlen, 0);
        if (!base) base = find_anchor(c->root, "id", s, idlen, 0);
        if (!base) {
            /* the root's own $id may be a URL whose last segment is referenced */
            const di_json *rid = get(c->root, "$id");
            if (rid && rid->type == DI_JSON_STRING && rid->str_len >= idlen &&
                !memcmp(rid->str + rid->str_len - idlen, s, idlen))
                base = c->root;
        }
        if (!base) {
            char msg[200];
            snprintf(msg, sizeof msg, "%.*s", (int)(n > 150 ? 150 : n), s);
            return failf(c, DEEPINFER_ERR_UNSUPPORTED, "unsupported: $ref to a remote or unknown document '%s'", msg), NULL;
        }
        if (!hash) return base;
        n -= (size_t)(hash - s);
        s = hash;
    }
    s++, n--; /* skip '#' */
    if (n == 0) return base;
    char *buf = di_arena_alloc(&c->a, n + 1);
    size_t bn;
    if (!buf || !pct_decode(s, n, buf, &bn))
        return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "bad $ref '%s'", ref->str), NULL;
    if (buf[0] != '/') {
        if (count_anchor(c->root, "$anchor", buf, bn, 0) > 1)
            return failf(c, DEEPINFER_ERR_UNSUPPORTED, "unsupported: $anchor '%s' defined in several resources", ref->str), NULL;
        const di_json *a = find_anchor(base, "$anchor", buf, bn, 0);
        if (!a) a = find_anchor(base, "$id", ref->str, ref->str_len, 0);
        if (!a) {
            char tmp[210];
            snprintf(tmp, sizeof tmp, "#%.*s", (int)(bn > 200 ? 200 : bn), buf);
            a = find_anchor(base, "$id", tmp, strlen(tmp), 0);
            if (!a) a = find_anchor(base, "id", tmp, strlen(tmp), 0);
        }
        if (!a) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "$ref '%s' not found", ref->str), NULL;
        return a;
    }
    const di_json *cur = base;
    size_t i = 1;
    char tok[1024];
    while (cur) {
        size_t tl = 0;
        while (i < bn && buf[i] != '/') {
            if (tl >= sizeof tok - 1) return failf(c, DEEPINFER_ERR_LIMIT, "$ref path segment too long%s", ""), NULL;
            if (buf[i] == '~' && i + 1 < bn && (buf[i + 1] == '0' || buf[i + 1] == '1')) {
                tok[tl++] = buf[i + 1] == '0' ? '~' : '/';
                i += 2;
            } else {
                tok[tl++] = buf[i++];
            }
        }
        tok[tl] = 0;
        if (cur->type == DI_JSON_OBJECT) {
            const di_json *nx = NULL;
            for (uint32_t k = 0; k < cur->count; k++)
                if (cur->items[k].key_len == tl && !memcmp(cur->items[k].key, tok, tl)) nx = &cur->items[k];
            cur = nx;
        } else if (cur->type == DI_JSON_ARRAY) {
            char *end;
            long idx = strtol(tok, &end, 10);
            cur = (*end || idx < 0 || tl == 0) ? NULL : di_json_at(cur, (size_t)idx);
        } else {
            cur = NULL;
        }
        if (i >= bn) break;
        i++;
    }
    if (!cur) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "$ref '%s' not found", ref->str), NULL;
    return cur;
}

/* ---- values -------------------------------------------------------------- */

static int json_equal(const di_json *a, const di_json *b, int depth) {
    if (depth > MAX_DEPTH) return 0;
    if (a->type == DI_JSON_NUMBER && b->type == DI_JSON_NUMBER) {
        so_dec x, y;
        if (so_dec_parse(a->str, a->str_len, &x) && so_dec_parse(b->str, b->str_len, &y)) return so_dec_cmp(&x, &y) == 0;
        return a->num == b->num;
    }
    if (a->type != b->type) return 0;
    switch (a->type) {
    case DI_JSON_STRING: return a->str_len == b->str_len && !memcmp(a->str, b->str, a->str_len);
    case DI_JSON_ARRAY:
        if (a->count != b->count) return 0;
        for (uint32_t i = 0; i < a->count; i++)
            if (!json_equal(&a->items[i], &b->items[i], depth + 1)) return 0;
        return 1;
    case DI_JSON_OBJECT:
        if (a->count != b->count) return 0;
        for (uint32_t i = 0; i < a->count; i++) {
            const di_json *bv = NULL;
            for (uint32_t k = 0; k < b->count; k++)
                if (b->items[k].key_len == a->items[i].key_len && !memcmp(b->items[k].key, a->items[i].key, a->items[i].key_len))
                    bv = &b->items[k];
            if (!bv || !json_equal(&a->items[i], bv, depth + 1)) return 0;
        }
        return 1;
    default: return 1;
    }
}

static uint32_t value_type(const di_json *v) {
    switch (v->type) {
    case DI_JSON_NULL: return T_NULL;
    case DI_JSON_TRUE: case DI_JSON_FALSE: return T_BOOL;
    case DI_JSON_NUMBER: {
        so_dec d;
        if (so_dec_parse(v->str, v->str_len, &d) && so_dec_is_int(&d)) return T_INT | T_NUM;
        return T_NUM;
    }
    case DI_JSON_STRING: return T_STR;
    case DI_JSON_ARRAY: return T_ARR;
    default: return T_OBJ;
    }
}

static uint32_t parse_types(ctx *c, const di_json *t) {
    uint32_t r = 0;
    const di_json *one = t;
    uint32_t n = 1;
    if (t->type == DI_JSON_ARRAY) n = t->count;
    for (uint32_t i = 0; i < n; i++) {
        if (t->type == DI_JSON_ARRAY) one = &t->items[i];
        if (one->type != DI_JSON_STRING) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "type must be a string or array of strings%s", ""), 0;
        const char *s = one->str;
        if (!strcmp(s, "null")) r |= T_NULL;
        else if (!strcmp(s, "boolean")) r |= T_BOOL;
        else if (!strcmp(s, "integer")) r |= T_INT;
        else if (!strcmp(s, "number")) r |= T_NUM | T_INT;
        else if (!strcmp(s, "string")) r |= T_STR;
        else if (!strcmp(s, "array")) r |= T_ARR;
        else if (!strcmp(s, "object")) r |= T_OBJ;
        else return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "unknown type '%s'", s), 0;
    }
    return r;
}

/* ---- expansion of a conjunction ------------------------------------------ */

static int conj_has(const conj *q, mem m) {
    for (uint32_t i = 0; i < q->n; i++)
        if (q->m[i] == m || (M_NODE(q->m[i]) == M_NODE(m) && !M_STRIPPED(q->m[i]))) return 1;
    return 0;
}

static int is_annotation(const di_json *m) {
    static const char *ann[] = {"title", "description", "default", "examples", "$comment", "$schema", "$id", "id",
                                "$anchor", "readOnly", "writeOnly", "deprecated", "contentMediaType",
                                "contentEncoding", "contentSchema", "$vocabulary", "$defs", "definitions",
                                "$dynamicAnchor", "$recursiveAnchor", "example", "discriminator", NULL};
    for (int i = 0; ann[i]; i++)
        if (key_is(m, ann[i])) return 1;
    return 0;
}

/* Expand allOf / $ref (not for stripped members) into out. */
static int expand(ctx *c, const conj *in, conj *out) {
    mem work[MAX_EXPAND];
    uint32_t nw = 0;
    for (uint32_t i = in->n; i-- > 0;) {
        if (nw >= MAX_EXPAND) return failf(c, DEEPINFER_ERR_LIMIT, "schema too large (allOf/$ref expansion)%s", "");
        work[nw++] = in->m[i];
    }
    while (nw) {
        mem m = work[--nw];
        const di_json *n = M_NODE(m);
        if (conj_has(out, m)) continue;
        if (out->n > MAX_EXPAND) return failf(c, DEEPINFER_ERR_LIMIT, "schema too large (allOf/$ref expansion)%s", "");
        PUSH(c, out->m, out->n, m);
        if (c->st != DEEPINFER_OK) return 0;
        if (n->type != DI_JSON_OBJECT || M_STRIPPED(m)) continue;
        const di_json *ref = get(n, "$ref");
        const di_json *all = get(n, "allOf");
        if (all) {
            if (all->type != DI_JSON_ARRAY) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "allOf must be an array%s", "");
            for (uint32_t k = all->count; k-- > 0;) {
                if (nw >= MAX_EXPAND) return failf(c, DEEPINFER_ERR_LIMIT, "schema too large (allOf/$ref expansion)%s", "");
                work[nw++] = (mem)&all->items[k];
            }
        }
        if (ref) {
            const di_json *t = resolve_ref(c, ref);
            if (!t) return 0;
            if (nw >= MAX_EXPAND) return failf(c, DEEPINFER_ERR_LIMIT, "schema too large (allOf/$ref expansion)%s", "");
            work[nw++] = (mem)t;
        }
    }
    return 1;
}

/* ---- negation ------------------------------------------------------------ */

static di_json *wrap1(ctx *c, const char *k, const di_json *v) {
    di_json *o = mk_obj(c, 1);
    if (o) set_member(o, 0, k, strlen(k), v);
    return o;
}

static int add_alt1(ctx *c, group *g, const di_json *a, const di_json *b) {
    conj q = {0};
    if (a) PUSH(c, q.m, q.n, (mem)a);
    if (b) PUSH(c, q.m, q.n, (mem)b);
    PUSH(c, g->alts, g->n, q);
    return c->st == DEEPINFER_OK;
}


/* alternatives whose union is the complement of node n */
static int negate(ctx *c, const di_json *n, group *g, int depth);

static int negate_kw(ctx *c, const di_json *node, const di_json *m, group *g, int depth) {
    di_json *o;
    if (key_is(m, "type")) {
        uint32_t t = parse_types(c, m);
        if (c->st) return 0;
        uint32_t comp = T_ALL & ~t;
        if (t & T_INT && !(t & T_NUM)) comp |= T_NUM; /* non-integral numbers */
        if (!comp) return 1;
        if ((t & T_INT) && !(t & T_NUM)) {
            /* not integer: non-numbers, or numbers with a fraction */
            di_json *nonint = mk_obj(c, 2);
            di_json *tr = mk(c, DI_JSON_TRUE);
            if (!nonint || !tr) return 0;
            set_member(nonint, 0, "type", 4, &mk_types(c, T_NUM)->items[0]);
            set_member(nonint, 1, "\0so-nonint", 10, tr);
            if (!add_alt1(c, g, nonint, NULL)) return 0;
            comp &= ~(T_NUM | T_INT);
            if (!comp) return 1;
        }
        return add_alt1(c, g, mk_types(c, comp), NULL);
    }
    if (key_is(m, "enum") || key_is(m, "const")) {
        di_json *arr = (di_json *)m;
        if (key_is(m, "const")) {
            arr = mk(c, DI_JSON_ARRAY);
            if (!arr) return 0;
            arr->items = (di_json *)m, arr->count = 1;
        }
        if (arr->type != DI_JSON_ARRAY) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "enum must be an array%s", "");
        o = mk_obj(c, 1);
        if (!o) return 0;
        set_member(o, 0, "\0so-exclude", 11, arr);
        return add_alt1(c, g, o, NULL);
    }
    if (key_is(m, "required")) {
        if (m->type != DI_JSON_ARRAY) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "required must be an array%s", "");
        for (uint32_t i = 0; i < m->count; i++) {
            di_json *f = mk(c, DI_JSON_FALSE);
            di_json *props = mk_obj(c, 1);
            if (!f || !props) return 0;
            set_member(props, 0, m->items[i].str, m->items[i].str_len, f);
            di_json *alt = mk_obj(c, 2);
            if (!alt) return 0;
            set_member(alt, 0, "properties", 10, props);
            set_member(alt, 1, "type", 4, &mk_types(c, T_OBJ)->items[0]);
            if (!add_alt1(c, g, alt, NULL)) return 0;
        }
        return 1;
    }
    if (key_is(m, "properties")) {
        if (m->type != DI_JSON_OBJECT) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "properties must be an object%s", "");
        for (uint32_t i = 0; i < m->count; i++) {
            const di_json *ps = &m->items[i];
            di_json *nn = wrap1(c, "not", ps);
            di_json *props = mk_obj(c, 1);
            di_json *req = mk(c, DI_JSON_ARRAY);
            di_json *ks = mk_str(c, ps->key, ps->key_len);
            if (!nn || !props || !req || !ks) return 0;
            set_member(props, 0, ps->key, ps->key_len, nn);
            req->items = ks, req->count = 1;
            di_json *alt = mk_obj(c, 3);
            if (!alt) return 0;
            set_member(alt, 0, "properties", 10, props);
            set_member(alt, 1, "required", 8, req);
            set_member(alt, 2, "type", 4, &mk_types(c, T_OBJ)->items[0]);
            if (!add_alt1(c, g, alt, NULL)) return 0;
        }
        return 1;
    }
    struct {
        const char *kw, *neg;
        uint32_t type;
        int delta;
    } num[] = {{"minLength", "maxLength", T_STR, -1}, {"maxLength", "minLength", T_STR, 1},
               {"minItems", "maxItems", T_ARR, -1},   {"maxItems", "minItems", T_ARR, 1},
               {"minProperties", "maxProperties", T_OBJ, -1}, {"maxProperties", "minProperties", T_OBJ, 1},
               {"minimum", "exclusiveMaximum", T_NUM | T_INT, 0}, {"maximum", "exclusiveMinimum", T_NUM | T_INT, 0},
               {"exclusiveMinimum", "maximum", T_NUM | T_INT, 0}, {"exclusiveMaximum", "minimum", T_NUM | T_INT, 0},
               {"pattern", "\0so-notpattern", T_STR, 0}};
    for (size_t k = 0; k < sizeof num / sizeof num[0]; k++) {
        if (!key_is(m, num[k].kw)) continue;
        if (m->type == DI_JSON_TRUE || m->type == DI_JSON_FALSE) {
            /* draft-04 boolean exclusive*: part of minimum/maximum */
            return 1;
        }
        if (!add_alt1(c, g, mk_types(c, T_ALL & ~num[k].type), NULL)) return 0;
        const di_json *val = m;
        const char *kw = num[k].neg;
        if (num[k].delta) {
            int64_t x;
            if (!di_json_as_i64(m, &x)) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "%s must be an integer", num[k].kw);
            x += num[k].delta;
            if (x < 0) return 1;
            char *t = di_arena_alloc(&c->a, 32);
            di_json *nv = mk(c, DI_JSON_NUMBER);
            if (!t || !nv) return oom(c);
            snprintf(t, 32, "%lld", (long long)x);
            nv->str = t, nv->str_len = strlen(t), nv->i64 = x, nv->is_int = 1, nv->num = (double)x;
            val = nv;
        } else if (!strcmp(num[k].kw, "minimum") || !strcmp(num[k].kw, "maximum")) {
            /* draft-04: minimum with exclusiveMinimum: true */
            const di_json *ex = get(node, !strcmp(num[k].kw, "minimum") ? "exclusiveMinimum" : "exclusiveMaximum");
            if (ex && ex->type == DI_JSON_TRUE) kw = !strcmp(num[k].kw, "minimum") ? "maximum" : "minimum";
        }
        di_json *alt = mk_obj(c, 2);
        if (!alt) return 0;
        set_member(alt, 0, kw, kw[0] ? strlen(kw) : 14, val);
        set_member(alt, 1, "type", 4, &mk_types(c, num[k].type)->items[0]);
        return add_alt1(c, g, alt, NULL);
    }
    if (key_is(m, "anyOf")) {
        if (m->type != DI_JSON_ARRAY) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "anyOf must be an array%s", "");
        conj q = {0};
        for (uint32_t i = 0; i < m->count; i++) {
            di_json *nn = wrap1(c, "not", &m->items[i]);
            if (!nn) return 0;
            PUSH(c, q.m, q.n, (mem)nn);
        }
        PUSH(c, g->alts, g->n, q);
        return c->st == DEEPINFER_OK;
    }
    if (key_is(m, "allOf")) {
        if (m->type != DI_JSON_ARRAY) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "allOf must be an array%s", "");
        for (uint32_t i = 0; i < m->count; i++)
            if (!negate(c, &m->items[i], g, depth + 1)) return 0;
        return 1;
    }
    if (key_is(m, "not")) return add_alt1(c, g, m, NULL);
    if (key_is(m, "$ref")) {
        const di_json *t = resolve_ref(c, m);
        return t ? negate(c, t, g, depth + 1) : 0;
    }
    if (is_annotation(m) || key_is(m, "format") || key_is(m, "$defs") || key_is(m, "definitions")) {
        if (key_is(m, "format")) {
            const char *re;
            int ml;
            if (m->type == DI_JSON_STRING && so_format_regex(m->str, &re, &ml) != 0)
                return unsupported(c, "not with format");
        }
        return 1;
    }
    char what[96];
    snprintf(what, sizeof what, "'not' of keyword '%.40s'", m->key);
    return unsupported(c, what);
}

static int negate(ctx *c, const di_json *n, group *g, int depth) {
    if (depth > 32) return failf(c, DEEPINFER_ERR_LIMIT, "negation nested too deeply%s", "");
    if (n->type == DI_JSON_TRUE) return 1;
    if (n->type == DI_JSON_FALSE) return add_alt1(c, g, mk(c, DI_JSON_TRUE), NULL);
    if (n->type != DI_JSON_OBJECT) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "a schema must be an object or boolean%s", "");
    if (get(n, "$ref") && c->draft <= 7) {
        const di_json *t = resolve_ref(c, get(n, "$ref"));
        return t ? negate(c, t, g, depth + 1) : 0;
    }
    for (uint32_t i = 0; i < n->count; i++)
        if (!negate_kw(c, n, &n->items[i], g, depth)) return 0;
    return 1;
}

/* ---- flatten ------------------------------------------------------------- */

static void tighten_min(int64_t *cur, int64_t v) {
    if (v > *cur) *cur = v;
}
static void tighten_max(int64_t *cur, int64_t v) {
    if (*cur < 0 || v < *cur) *cur = v;
}

static int num_bound(ctx *c, sn *s, const di_json *v, int lower, int excl) {
    so_dec d;
    if (v->type != DI_JSON_NUMBER || !so_dec_parse(v->str, v->str_len, &d))
        return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "numeric bound must be a number%s", "");
    if (lower) {
        int cmp = s->has_lo ? so_dec_cmp(&d, &s->lo) : 1;
        if (cmp > 0 || (cmp == 0 && excl)) s->lo = d, s->lo_excl = excl, s->has_lo = 1;
    } else {
        int cmp = s->has_hi ? so_dec_cmp(&d, &s->hi) : -1;
        if (cmp < 0 || (cmp == 0 && excl)) s->hi = d, s->hi_excl = excl, s->has_hi = 1;
    }
    return 1;
}

static int get_count(ctx *c, const di_json *m, int64_t *out) {
    if (!di_json_as_i64(m, out)) {
        double d;
        if (di_json_as_f64(m, &d) && d == (double)(int64_t)d && d >= 0) {
            *out = (int64_t)d;
            return 1;
        }
        return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "'%s' must be a non-negative integer", m->key);
    }
    if (*out < 0) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "'%s' must be a non-negative integer", m->key);
    return 1;
}

static int add_group_from_array(ctx *c, sn *s, const di_json *arr, int oneof) {
    if (arr->type != DI_JSON_ARRAY || arr->count == 0)
        return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "%s must be a non-empty array", oneof ? "oneOf" : "anyOf");
    group g = {0};
    g.oneof = oneof;
    for (uint32_t i = 0; i < arr->count; i++)
        if (!add_alt1(c, &g, &arr->items[i], NULL)) return 0;
    PUSH(c, s->groups, s->ngroups, g);
    return c->st == DEEPINFER_OK;
}

static int apply_member(ctx *c, sn *s, const di_json *n, int stripped) {
    if (n->type == DI_JSON_TRUE) return 1;
    if (n->type == DI_JSON_FALSE) {
        s->unsat = 1;
        return 1;
    }
    if (n->type != DI_JSON_OBJECT) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "a schema must be an object or boolean%s", "");
    if (get(n, "$ref") && c->draft <= 7) return 1; /* draft-07: siblings of $ref are ignored */
    const di_json *exmin = get(n, "exclusiveMinimum"), *exmax = get(n, "exclusiveMaximum");
    afacet af = {0};
    facet of = {0};
    int has_af = 0, has_of = 0;
    for (uint32_t i = 0; i < n->count && c->st == DEEPINFER_OK; i++) {
        const di_json *m = &n->items[i];
        if (is_annotation(m) || key_is(m, "$ref") || key_is(m, "allOf")) continue;
        if (m->key_len && m->key[0] == 0) { /* internal keywords of synthetic nodes */
            if (m->key_len == 11 && !memcmp(m->key, "\0so-exclude", 11))
                for (uint32_t k = 0; k < m->count; k++) PUSH(c, s->excl, s->nexcl, &m->items[k]);
            else if (m->key_len == 14 && !memcmp(m->key, "\0so-notpattern", 14))
                PUSH(c, s->npats, s->nnpat, m);
            else if (m->key_len == 10 && !memcmp(m->key, "\0so-nonint", 10))
                s->nonint = 1;
            continue;
        }
        if (key_is(m, "type")) {
            uint32_t t = parse_types(c, m);
            if (c->st) return 0;
            if ((s->types & T_NUM) && !(t & T_NUM) && (t & T_INT)) s->types &= ~T_NUM;
            s->types &= t;
        } else if (key_is(m, "enum") || key_is(m, "const")) {
            const di_json *vals = m;
            uint32_t nv = 1;
            if (key_is(m, "enum")) {
                if (m->type != DI_JSON_ARRAY) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "enum must be an array%s", "");
                nv = m->count, vals = m->items;
            }
            if (!s->has_enum) {
                s->has_enum = 1;
                for (uint32_t k = 0; k < nv; k++) PUSH(c, s->enums, s->nenum, &vals[k]);
            } else {
                uint32_t w = 0;
                for (uint32_t k = 0; k < s->nenum; k++) {
                    int keep = 0;
                    for (uint32_t j = 0; j < nv && !keep; j++) keep = json_equal(s->enums[k], &vals[j], 0);
                    if (keep) s->enums[w++] = s->enums[k];
                }
                s->nenum = w;
            }
        } else if (key_is(m, "minLength")) {
            int64_t x;
            if (!get_count(c, m, &x)) return 0;
            tighten_min(&s->minlen, x);
        } else if (key_is(m, "maxLength")) {
            int64_t x;
            if (!get_count(c, m, &x)) return 0;
            tighten_max(&s->maxlen, x);
        } else if (key_is(m, "pattern")) {
            if (m->type != DI_JSON_STRING) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "pattern must be a string%s", "");
            PUSH(c, s->pats, s->npat, m);
        } else if (key_is(m, "format")) {
            const char *re;
            int ml;
            if (m->type != DI_JSON_STRING) continue;
            int r = so_format_regex(m->str, &re, &ml);
            if (r > 0) PUSH(c, s->fmts, s->nfmt, m);
            else if (r < 0 && !c->lenient) {
                char w[96];
                snprintf(w, sizeof w, "format '%.60s'", m->str);
                return unsupported(c, w);
            }
        } else if (key_is(m, "minimum")) {
            if (!num_bound(c, s, m, 1, exmin && exmin->type == DI_JSON_TRUE)) return 0;
        } else if (key_is(m, "maximum")) {
            if (!num_bound(c, s, m, 0, exmax && exmax->type == DI_JSON_TRUE)) return 0;
        } else if (key_is(m, "exclusiveMinimum")) {
            if (m->type == DI_JSON_NUMBER && !num_bound(c, s, m, 1, 1)) return 0;
        } else if (key_is(m, "exclusiveMaximum")) {
            if (m->type == DI_JSON_NUMBER && !num_bound(c, s, m, 0, 1)) return 0;
        } else if (key_is(m, "multipleOf")) {
            if (m->type != DI_JSON_NUMBER) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "multipleOf must be a number%s", "");
            PUSH(c, s->mult, s->nmult, m);
        } else if (key_is(m, "items")) {
            has_af = 1;
            if (m->type == DI_JSON_ARRAY) {
                af.prefix = m;
                const di_json *ai = get(n, "additionalItems");
                if (ai) af.rest = ai;
            } else {
                af.rest = m;
            }
        } else if (key_is(m, "prefixItems")) {
            if (m->type != DI_JSON_ARRAY) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "prefixItems must be an array%s", "");
            has_af = 1, af.prefix = m;
        } else if (key_is(m, "additionalItems")) {
            continue; /* with array-form items only */
        } else if (key_is(m, "minItems")) {
            int64_t x;
            if (!get_count(c, m, &x)) return 0;
            tighten_min(&s->minitems, x);
        } else if (key_is(m, "maxItems")) {
            int64_t x;
            if (!get_count(c, m, &x)) return 0;
            tighten_max(&s->maxitems, x);
        } else if (key_is(m, "uniqueItems")) {
            if (m->type == DI_JSON_TRUE) s->unique = 1;
        } else if (key_is(m, "properties")) {
            if (m->type != DI_JSON_OBJECT) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "properties must be an object%s", "");
            has_of = 1, of.props = m;
        } else if (key_is(m, "patternProperties")) {
            if (m->type != DI_JSON_OBJECT) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "patternProperties must be an object%s", "");
            has_of = 1, of.pprops = m;
        } else if (key_is(m, "additionalProperties")) {
            has_of = 1, of.addl = m;
        } else if (key_is(m, "required")) {
            if (m->type != DI_JSON_ARRAY) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "required must be an array%s", "");
            for (uint32_t k = 0; k < m->count; k++) {
                if (m->items[k].type != DI_JSON_STRING) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "required must list strings%s", "");
                int dup = 0;
                for (uint32_t j = 0; j < s->nreq && !dup; j++)
                    dup = s->req[j]->str_len == m->items[k].str_len && !memcmp(s->req[j]->str, m->items[k].str, m->items[k].str_len);
                if (!dup) PUSH(c, s->req, s->nreq, &m->items[k]);
            }
        } else if (key_is(m, "minProperties")) {
            int64_t x;
            if (!get_count(c, m, &x)) return 0;
            tighten_min(&s->minprops, x);
        } else if (key_is(m, "maxProperties")) {
            int64_t x;
            if (!get_count(c, m, &x)) return 0;
            tighten_max(&s->maxprops, x);
        } else if (key_is(m, "propertyNames")) {
            PUSH(c, s->propnames.m, s->propnames.n, (mem)m);
        } else if (key_is(m, "anyOf") || key_is(m, "oneOf")) {
            if (!stripped && !add_group_from_array(c, s, m, key_is(m, "oneOf"))) return 0;
        } else if (key_is(m, "not")) {
            if (stripped) continue;
            group g = {0};
            if (!negate(c, m, &g, 0)) return 0;
            PUSH(c, s->groups, s->ngroups, g);
        } else if (key_is(m, "if")) {
            if (stripped) continue;
            const di_json *th = get(n, "then"), *el = get(n, "else");
            group g = {0};
            if (!add_alt1(c, &g, m, th)) return 0;
            group ng = {0};
            if (!negate(c, m, &ng, 0)) return 0;
            for (uint32_t k = 0; k < ng.n; k++) {
                if (el) PUSH(c, ng.alts[k].m, ng.alts[k].n, (mem)el);
                PUSH(c, g.alts, g.n, ng.alts[k]);
            }
            PUSH(c, s->groups, s->ngroups, g);
        } else if (key_is(m, "then") || key_is(m, "else")) {
            continue;
        } else if (key_is(m, "dependentRequired") || key_is(m, "dependentSchemas") || key_is(m, "dependencies")) {
            if (stripped) continue;
            if (m->type != DI_JSON_OBJECT) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "%s must be an object", m->key);
            for (uint32_t k = 0; k < m->count; k++) {
                const di_json *d = &m->items[k];
                group g = {0};
                di_json *f = mk(c, DI_JSON_FALSE);
                di_json *props = mk_obj(c, 1);
                if (!f || !props) return 0;
                set_member(props, 0, d->key, d->key_len, f);
                if (!add_alt1(c, &g, wrap1(c, "properties", props), NULL)) return 0;
                di_json *ks = mk_str(c, d->key, d->key_len);
                di_json *req = mk(c, DI_JSON_ARRAY);
                if (!ks || !req) return 0;
                req->items = ks, req->count = 1;
                di_json *rq = wrap1(c, "required", req);
                if (d->type == DI_JSON_ARRAY) {
                    if (!add_alt1(c, &g, rq, wrap1(c, "required", d))) return 0;
                } else {
                    if (!add_alt1(c, &g, rq, d)) return 0;
                }
                PUSH(c, s->groups, s->ngroups, g);
            }
        } else if (key_is(m, "unevaluatedProperties") || key_is(m, "unevaluatedItems")) {
            if (m->type == DI_JSON_TRUE || (m->type == DI_JSON_OBJECT && m->count == 0)) continue;
            if (!c->lenient) return unsupported(c, m->key);
        } else if (key_is(m, "contains") || key_is(m, "minContains") || key_is(m, "maxContains") ||
                   key_is(m, "$dynamicRef") || key_is(m, "$recursiveRef")) {
            if (key_is(m, "minContains") || key_is(m, "maxContains")) {
                if (!get(n, "contains") && c->draft >= 2019) continue;
            }
            if (!c->lenient) return unsupported(c, m->key);
        }
        /* anything else: not a validation keyword of the supported drafts — an annotation */
    }
    if (has_af) PUSH(c, s->af, s->naf, af);
    if (has_of) PUSH(c, s->of, s->nof, of);
    return c->st == DEEPINFER_OK;
}

static int flatten(ctx *c, const conj *q, sn *s) {
    memset(s, 0, sizeof *s);
    s->types = T_ALL;
    s->maxlen = s->maxitems = s->maxprops = -1;
    if (!expand(c, q, &s->members)) return 0;
    for (uint32_t i = 0; i < s->members.n && c->st == DEEPINFER_OK; i++)
        if (!apply_member(c, s, M_NODE(s->members.m[i]), M_STRIPPED(s->members.m[i]))) return 0;
    return c->st == DEEPINFER_OK;
}

/* ---- lexeme specs -------------------------------------------------------- */

static int spec_leaf(so_buf *b, char kind, const char *re, size_t n) {
    char h[32];
    snprintf(h, sizeof h, "%c%zu:", kind, n);
    return so_buf_puts(b, h) && so_buf_put(b, re, n);
}

static int32_t lex_spec(ctx *c, const so_buf *b, int32_t cmin, int32_t cmax) {
    return so_gb_lex(c->b, b->p, b->n, cmin, cmax);
}

static int32_t lex_regex(ctx *c, const char *re) {
    so_buf b = {0};
    spec_leaf(&b, 'R', re, strlen(re));
    int32_t r = lex_spec(c, &b, 0, -1);
    free(b.p);
    return r;
}

/* regex text matching exactly the bytes s (escaped) */
static int regex_lit(so_buf *b, const char *s, size_t n) {
    char *tmp = malloc(n * 4 + 8);
    if (!tmp) return 0;
    long l = so_rx_escape(s, n, tmp, n * 4 + 8);
    int ok = l >= 0 && so_buf_put(b, tmp, (size_t)l);
    free(tmp);
    return ok;
}

/* ---- string constraints -------------------------------------------------- */

static const char *GENERIC_STR = "\"([^\"\\\\\\x00-\\x1F]|\\\\([\"\\\\/bfnrt]|u[0-9a-fA-F]{4}))*\"";

/* Build the spec for strings under s's constraints. *plain = 1 when it is the
 * generic string (any escapes). */
static int string_spec(ctx *c, const sn *s, so_buf *out, int32_t *cmin, int32_t *cmax, int *plain) {
    *cmin = s->minlen > 0 ? (int32_t)(s->minlen > INT32_MAX ? INT32_MAX : s->minlen) : 0;
    *cmax = s->maxlen >= 0 ? (int32_t)(s->maxlen > INT32_MAX ? INT32_MAX : s->maxlen) : -1;
    int nparts = (int)(s->npat + s->nfmt);
    *plain = 0;
    if (!nparts && !s->nnpat && !*cmin && *cmax < 0) {
        *plain = 1;
        return spec_leaf(out, 'R', GENERIC_STR, strlen(GENERIC_STR));
    }
    /* excluded literal strings are subtracted by the caller (enum path) */
    for (uint32_t k = 0; k < s->nnpat; k++) so_buf_puts(out, "-");
    for (int k = 1; k < (nparts ? nparts : 1); k++) so_buf_puts(out, "&");
    if (!nparts) spec_leaf(out, 'J', "[\\s\\S]*", 7);
    for (uint32_t k = 0; k < s->npat; k++) {
        const di_json *p = s->pats[k];
        /* validate early so the error names the pattern */
        di_arena a;
        di_arena_init(&a, 0);
        so_rx *rx;
        di_error e = {0};
        deepinfer_status st = so_rx_parse(&a, p->str, p->str_len, SO_RX_SEARCH, &rx, &e);
        di_arena_free(&a);
        if (st != DEEPINFER_OK) {
            if (c->st == DEEPINFER_OK) c->st = di_error_set(c->err, st, "json schema: pattern \"%.100s\": %s", p->str, e.msg);
            return 0;
        }
        spec_leaf(out, 'S', p->str, p->str_len);
    }
    for (uint32_t k = 0; k < s->nfmt; k++) {
        const char *re;
        int ml;
        const char *ex = NULL;
        so_format_regex(s->fmts[k]->str, &re, &ml);
        so_format_exclude(s->fmts[k]->str, &ex);
        if (ex) so_buf_puts(out, "-");
        spec_leaf(out, 'J', re, strlen(re));
        if (ex) spec_leaf(out, 'S', ex, strlen(ex));
        if (ml >= 0 && (*cmax < 0 || ml < *cmax)) *cmax = ml;
    }
    for (uint32_t k = 0; k < s->nnpat; k++) {
        const di_json *p = s->npats[k];
        if (p->type != DI_JSON_STRING) return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "pattern must be a string%s", "");
        spec_leaf(out, 'S', p->str, p->str_len);
    }
    if (*cmax >= 0 && *cmin > *cmax) return 0;
    return 1;
}

/* ---- enum values --------------------------------------------------------- */

static int str_len_chars(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* Does scalar value v satisfy s (ignoring enum)? -1 = cannot tell. */
static int value_ok(ctx *c, const sn *s, const di_json *v) {
    uint32_t vt = value_type(v);
    if (!(vt & s->types)) return 0;
    if (vt == T_NUM && !(s->types & T_NUM)) return 0;
    for (uint32_t k = 0; k < s->nexcl; k++)
        if (json_equal(s->excl[k], v, 0)) return 0;
    if (vt & T_STR) {
        int L = str_len_chars(v->str, v->str_len);
        if (L < s->minlen || (s->maxlen >= 0 && L > s->maxlen)) return 0;
        if (s->npat || s->nfmt || s->nnpat) {
            so_buf spec = {0}, enc = {0};
            int32_t cmin, cmax;
            int plain;
            int ok = string_spec(c, s, &spec, &cmin, &cmax, &plain);
            if (ok) ok = so_json_write_string(&enc, v->str, v->str_len);
            int r = -1;
            if (ok) {
                uint32_t gid;
                so_dfa *d;
                int owned;
                if (so_vocab_lexeme(c->v, spec.p, spec.n, &gid, &d, &owned, c->err) == DEEPINFER_OK) {
                    r = so_dfa_matches(d, (const uint8_t *)enc.p, enc.n);
                    if (owned) so_dfa_free(d);
                } else {
                    c->st = c->err ? c->err->code : DEEPINFER_ERR_INVALID_ARGUMENT;
                }
            }
            free(spec.p), free(enc.p);
            if (r <= 0) return r < 0 ? -1 : 0;
        }
    }
    if (vt & (T_NUM | T_INT)) {
        so_dec d;
        if (!so_dec_parse(v->str, v->str_len, &d)) return -1;
        if (s->has_lo) {
            int cmp = so_dec_cmp(&d, &s->lo);
            if (cmp < 0 || (cmp == 0 && s->lo_excl)) return 0;
        }
        if (s->has_hi) {
            int cmp = so_dec_cmp(&d, &s->hi);
            if (cmp > 0 || (cmp == 0 && s->hi_excl)) return 0;
        }
        for (uint32_t k = 0; k < s->nmult; k++) {
            so_dec m;
            if (!so_dec_parse(s->mult[k]->str, s->mult[k]->str_len, &m)) return -1;
            /* exact check only for integers */
            if (!so_dec_is_int(&d) || !so_dec_is_int(&m)) return -1;
            double x = v->num, y = s->mult[k]->num;
            if (y == 0 || x != (double)(long long)x || fabs(x) > 9e15) return -1;
            if ((long long)x % (long long)y) return 0;
        }
    }
    if (vt & (T_ARR | T_OBJ)) {
        if (s->naf || s->minitems > 0 || s->maxitems >= 0 || s->nof || s->nreq || s->minprops > 0 || s->maxprops >= 0 ||
            s->unique || s->propnames.n)
            return -1;
    }
    return 1;
}

static int32_t literal_sym(ctx *c, const di_json *v, int depth);

static int32_t literal_sym(ctx *c, const di_json *v, int depth) {
    if (depth > MAX_DEPTH) return failf(c, DEEPINFER_ERR_LIMIT, "enum value nested too deeply%s", ""), 0;
    if (v->type == DI_JSON_ARRAY || v->type == DI_JSON_OBJECT) {
        int32_t nt = so_gb_nt(c->b);
        int obj = v->type == DI_JSON_OBJECT;
        uint32_t n = v->count;
        int32_t *syms = malloc((4 * (size_t)n + 4) * sizeof *syms);
        if (!syms) return oom(c), 0;
        uint32_t k = 0;
        syms[k++] = obj ? c->s_lbrace : c->s_lbrack;
        for (uint32_t i = 0; i < n && c->st == DEEPINFER_OK; i++) {
            if (i) syms[k++] = c->s_comma;
            if (obj) {
                so_buf re = {0}, enc = {0};
                so_json_write_string(&enc, v->items[i].key, v->items[i].key_len);
                regex_lit(&re, enc.p, enc.n);
                so_buf_puts(&re, c->wsre), so_buf_puts(&re, ":"), so_buf_puts(&re, c->wsre);
                syms[k++] = lex_regex(c, re.p);
                free(re.p), free(enc.p);
            }
            syms[k++] = literal_sym(c, &v->items[i], depth + 1);
        }
        syms[k++] = obj ? c->s_rbrace : c->s_rbrack;
        so_gb_prod(c->b, nt, syms, k);
        free(syms);
        return nt;
    }
    so_buf re = {0};
    if (v->type == DI_JSON_NUMBER) {
        so_dec d;
        if (so_dec_parse(v->str, v->str_len, &d)) so_number_eq_regex(&re, &d);
        else regex_lit(&re, v->str, v->str_len);
    } else {
        so_buf enc = {0};
        so_json_write(&enc, v, SO_JSON_COMPACT);
        regex_lit(&re, enc.p, enc.n);
        free(enc.p);
    }
    int32_t r = lex_regex(c, re.p ? re.p : "");
    free(re.p);
    return r;
}

/* ---- conjunction → nonterminal ------------------------------------------- */

static int32_t sym_for(ctx *c, const conj *q);

static int cmp_mem(const void *a, const void *b) {
    mem x = *(const mem *)a, y = *(const mem *)b;
    return x < y ? -1 : x > y;
}

static int32_t sym_for_node(ctx *c, const di_json *n) {
    mem m = (mem)n;
    conj q = {&m, 1};
    return sym_for(c, &q);
}

static int32_t number_sym(ctx *c, const sn *s) {
    int integer = !(s->types & T_NUM);
    if (s->nonint && integer) return INT32_MIN;
    /* draft-04 counts 1.0 as a number, not an integer */
    const char *intre = c->draft <= 4 ? "-?(0|[1-9][0-9]*)" : "-?(0|[1-9][0-9]*)(\\.0+)?";
    if (!s->has_lo && !s->has_hi && !s->nmult && !s->nexcl && !s->nonint) return integer ? lex_regex(c, intre) : c->s_num;
    so_buf spec = {0}, parts = {0};
    int nparts = 0;
    if (integer && c->draft <= 4) {
        spec_leaf(&parts, 'R', intre, strlen(intre));
        nparts++;
    }
    if (s->has_lo || s->has_hi) {
        if (!so_number_range_spec(&parts, s->has_lo ? &s->lo : NULL, s->lo_excl, s->has_hi ? &s->hi : NULL, s->hi_excl, integer)) {
            free(parts.p);
            return INT32_MIN; /* empty */
        }
        nparts++;
    } else {
        const char *re = integer ? "-?(0|[1-9][0-9]*)(\\.0+)?" : "-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?";
        if (s->nmult) re = integer ? "-?(0|[1-9][0-9]*)(\\.0+)?" : "-?(0|[1-9][0-9]*)(\\.[0-9]+)?";
        spec_leaf(&parts, 'R', re, strlen(re));
        nparts++;
    }
    if (s->nonint) {
        const char *re = "-?(0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*";
        spec_leaf(&parts, 'R', re, strlen(re));
        nparts++;
    }
    for (uint32_t k = 0; k < s->nmult; k++) {
        so_dec m;
        const di_json *mv = s->mult[k];
        if (!so_dec_parse(mv->str, mv->str_len, &m) || !m.nd || m.neg) {
            free(parts.p);
            return failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "multipleOf must be positive%s", ""), 0;
        }
        char t[64];
        if (so_dec_is_int(&m)) {
            if (m.e > 6) {
                free(parts.p);
                return unsupported(c, "multipleOf above 1000000"), 0;
            }
            long mv_i = 0;
            for (int i = 0; i < m.e; i++) mv_i = mv_i * 10 + (i < m.nd ? m.d[i] - '0' : 0);
            if (mv_i == 1) snprintf(t, sizeof t, "M1:");
            else snprintf(t, sizeof t, "M%ld:", mv_i);
            so_buf_puts(&parts, t);
        } else if (m.nd == 1 && m.d[0] == '1') {
            /* 10^-k: at most k fraction digits (then zeros) */
            int kdig = -m.e + 1;
            char re[96];
            snprintf(re, sizeof re, "-?(0|[1-9][0-9]*)(\\.[0-9]{1,%d}0*)?", kdig);
            spec_leaf(&parts, 'R', re, strlen(re));
        } else if (m.nd == 1 && m.d[0] == '5' && m.e == 0) {
            spec_leaf(&parts, 'R', "-?(0|[1-9][0-9]*)(\\.(0+|50*))?", 30);
        } else {
            free(parts.p);
            char w[96];
            snprintf(w, sizeof w, "multipleOf %.40s", mv->str);
            return unsupported(c, w), 0;
        }
        nparts++;
    }
    for (uint32_t k = 0; k < s->nexcl; k++)
        if (s->excl[k]->type == DI_JSON_NUMBER) so_buf_puts(&spec, "-");
    for (int k = 1; k < nparts; k++) so_buf_puts(&spec, "&");
    so_buf_put(&spec, parts.p, parts.n);
    for (uint32_t k = 0; k < s->nexcl; k++)
        if (s->excl[k]->type == DI_JSON_NUMBER) {
            so_dec d;
            so_buf re = {0};
            if (so_dec_parse(s->excl[k]->str, s->excl[k]->str_len, &d)) so_number_eq_regex(&re, &d);
            spec_leaf(&spec, 'R', re.p ? re.p : "", re.n);
            free(re.p);
        }
    int32_t r = lex_spec(c, &spec, 0, -1);
    free(spec.p), free(parts.p);
    return r;
}

static int32_t string_sym(ctx *c, const sn *s) {
    so_buf spec = {0}, full = {0};
    int32_t cmin, cmax;
    int plain;
    if (!string_spec(c, s, &spec, &cmin, &cmax, &plain)) {
        free(spec.p);
        return INT32_MIN;
    }
    uint32_t nex = 0;
    for (uint32_t k = 0; k < s->nexcl; k++) nex += s->excl[k]->type == DI_JSON_STRING;
    if (nex) {
        for (uint32_t k = 0; k < nex; k++) so_buf_puts(&full, plain && cmax < 0 ? "~" : "-");
        if (plain) { /* canonical encoding so that excluded values cannot be spelled differently */
            free(spec.p);
            spec = (so_buf){0};
            spec_leaf(&spec, 'J', "[\\s\\S]*", 7);
        }
        so_buf_put(&full, spec.p, spec.n);
        for (uint32_t k = 0; k < s->nexcl; k++)
            if (s->excl[k]->type == DI_JSON_STRING) {
                so_buf enc = {0}, re = {0};
                so_json_write_string(&enc, s->excl[k]->str, s->excl[k]->str_len);
                regex_lit(&re, enc.p, enc.n);
                spec_leaf(&full, 'R', re.p, re.n);
                free(enc.p), free(re.p);
            }
        free(spec.p);
        spec = full;
    }
    int32_t r = lex_spec(c, &spec, cmin, cmax);
    free(spec.p);
    return r;
}

/* array: positions 0..; per-position conj */
static int32_t array_sym(ctx *c, const sn *s) {
    if (s->unique && s->maxitems != 0 && s->maxitems != 1 && !c->lenient) return unsupported(c, "uniqueItems"), 0;
    uint32_t np = 0;
    for (uint32_t k = 0; k < s->naf; k++)
        if (s->af[k].prefix && s->af[k].prefix->count > np) np = s->af[k].prefix->count;
    int64_t minI = s->minitems, maxI = s->maxitems;
    if (maxI >= 0 && (int64_t)np > maxI) np = (uint32_t)maxI;
    /* symbol for the items past the prefix */
    conj rest = {0};
    int rest_false = 0;
    for (uint32_t k = 0; k < s->naf; k++)
        if (s->af[k].rest) {
            if (s->af[k].rest->type == DI_JSON_FALSE) rest_false = 1;
            PUSH(c, rest.m, rest.n, (mem)s->af[k].rest);
        }
    int32_t *pos = malloc((np + 1) * sizeof *pos);
    if (!pos) return oom(c), 0;
    for (uint32_t i = 0; i < np && c->st == DEEPINFER_OK; i++) {
        conj q = {0};
        for (uint32_t k = 0; k < s->naf; k++) {
            const afacet *f = &s->af[k];
            if (f->prefix && i < f->prefix->count) PUSH(c, q.m, q.n, (mem)&f->prefix->items[i]);
            else if (f->rest) PUSH(c, q.m, q.n, (mem)f->rest);
        }
        pos[i] = q.n ? sym_for(c, &q) : c->nt_any;
    }
    int32_t item = rest_false ? -1 : rest.n ? sym_for(c, &rest) : c->nt_any;
    if (c->st != DEEPINFER_OK) {
        free(pos);
        return 0;
    }
    /* tail(i): after i items */
    int32_t next = -1; /* tail(np) */
    {
        int32_t t = so_gb_nt(c->b);
        if ((int64_t)np >= minI) so_gb_prod(c->b, t, NULL, 0);
        if (item >= 0 && (maxI < 0 || maxI > (int64_t)np)) {
            int64_t lo = minI - (int64_t)np;
            if (lo < 1) lo = 1;
            int64_t hi = maxI < 0 ? -1 : maxI - (int64_t)np;
            if (lo > 100000 || hi > 100000) {
                free(pos);
                return failf(c, DEEPINFER_ERR_LIMIT, "minItems/maxItems too large%s", ""), 0;
            }
            int32_t rep = so_gb_repeat(c->b, item, (int32_t)lo, (int32_t)hi, c->s_comma);
            if (np > 0) {
                int32_t s2[2] = {c->s_comma, rep};
                so_gb_prod(c->b, t, s2, 2);
            } else {
                so_gb_prod(c->b, t, &rep, 1);
            }
        }
        next = t;
    }
    for (uint32_t i = np; i-- > 0;) {
        int32_t t = so_gb_nt(c->b);
        if ((int64_t)i >= minI) so_gb_prod(c->b, t, NULL, 0);
        int32_t s3[3];
        uint32_t k = 0;
        if (i > 0) s3[k++] = c->s_comma;
        s3[k++] = pos[i];
        s3[k++] = next;
        so_gb_prod(c->b, t, s3, k);
        next = t;
    }
    free(pos);
    int32_t nt = so_gb_nt(c->b);
    int32_t s3[3] = {c->s_lbrack, next, c->s_rbrack};
    so_gb_prod(c->b, nt, s3, 3);
    return nt;
}

/* key lexeme for a named property (with the colon) */
static int32_t key_sym(ctx *c, const char *k, size_t n) {
    so_buf enc = {0}, re = {0};
    so_json_write_string(&enc, k, n);
    regex_lit(&re, enc.p, enc.n);
    so_buf_puts(&re, c->wsre), so_buf_puts(&re, ":"), so_buf_puts(&re, c->wsre);
    int32_t r = lex_regex(c, re.p);
    free(enc.p), free(re.p);
    return r;
}

static int pattern_matches(ctx *c, const char *pat, size_t plen, const char *k, size_t kn) {
    so_buf spec = {0}, enc = {0};
    spec_leaf(&spec, 'S', pat, plen);
    so_json_write_string(&enc, k, kn);
    uint32_t gid;
    so_dfa *d;
    int owned, r = -1;
    if (so_vocab_lexeme(c->v, spec.p, spec.n, &gid, &d, &owned, c->err) == DEEPINFER_OK) {
        r = so_dfa_matches(d, (const uint8_t *)enc.p, enc.n);
        if (owned) so_dfa_free(d);
    } else {
        c->st = c->err ? c->err->code : DEEPINFER_ERR_INVALID_ARGUMENT;
    }
    free(spec.p), free(enc.p);
    return r;
}

typedef struct nprop {
    const char *name;
    size_t len;
    int required;
    conj q;
} nprop;

static int32_t object_sym(ctx *c, const sn *s) {
    /* named properties in first-seen order */
    nprop *props = NULL;
    uint32_t np = 0;
    const facet *pf = NULL;
    for (uint32_t k = 0; k < s->nof; k++) {
        if (s->of[k].pprops && s->of[k].pprops->count) {
            if (pf && !c->lenient) return unsupported(c, "patternProperties in several allOf branches"), 0;
            pf = &s->of[k];
        }
        const di_json *p = s->of[k].props;
        for (uint32_t i = 0; p && i < p->count; i++) {
            int dup = 0;
            for (uint32_t j = 0; j < np && !dup; j++) dup = props[j].len == p->items[i].key_len && !memcmp(props[j].name, p->items[i].key, props[j].len);
            if (!dup) PUSH(c, props, np, ((nprop){p->items[i].key, p->items[i].key_len, 0, {0}}));
        }
    }
    for (uint32_t r = 0; r < s->nreq; r++) {
        int found = 0;
        for (uint32_t j = 0; j < np && !found; j++)
            if (props[j].len == s->req[r]->str_len && !memcmp(props[j].name, s->req[r]->str, props[j].len)) props[j].required = 1, found = 1;
        if (!found) PUSH(c, props, np, ((nprop){s->req[r]->str, s->req[r]->str_len, 1, {0}}));
    }
    if (c->st != DEEPINFER_OK) return 0;
    /* order: by where each property is first defined in the schema text
     * (allOf branches are merged in document order), required-only last */
    {
        size_t *off = malloc((np + 1) * sizeof *off);
        if (!off) return oom(c), 0;
        for (uint32_t j = 0; j < np; j++) {
            off[j] = SIZE_MAX;
            for (uint32_t k = 0; k < s->nof; k++)
                for (uint32_t i = 0; s->of[k].props && i < s->of[k].props->count; i++) {
                    const di_json *d = &s->of[k].props->items[i];
                    if (d->key_len == props[j].len && !memcmp(d->key, props[j].name, d->key_len) && d->offset &&
                        d->offset < off[j])
                        off[j] = d->offset;
                }
        }
        for (uint32_t j = 1; j < np; j++) { /* stable insertion sort */
            nprop pj = props[j];
            size_t oj = off[j];
            uint32_t i = j;
            while (i > 0 && off[i - 1] > oj) props[i] = props[i - 1], off[i] = off[i - 1], i--;
            props[i] = pj, off[i] = oj;
        }
        free(off);
    }
    /* pattern disjointness */
    if (pf && pf->pprops->count > 1) {
        for (uint32_t i = 0; i < pf->pprops->count; i++)
            for (uint32_t j = i + 1; j < pf->pprops->count; j++) {
                so_buf sp = {0};
                so_buf_puts(&sp, "&");
                spec_leaf(&sp, 'S', pf->pprops->items[i].key, pf->pprops->items[i].key_len);
                spec_leaf(&sp, 'S', pf->pprops->items[j].key, pf->pprops->items[j].key_len);
                uint32_t gid;
                so_dfa *d;
                int owned;
                deepinfer_status st = so_vocab_lexeme(c->v, sp.p, sp.n, &gid, &d, &owned, c->err);
                free(sp.p);
                if (st != DEEPINFER_OK) return c->st = st, 0;
                int empty = so_dfa_empty(d);
                if (owned) so_dfa_free(d);
                if (!empty) return unsupported(c, "overlapping patternProperties"), 0;
            }
    }
    /* property names constraint */
    sn pn;
    int has_pn = 0;
    so_buf pnspec = {0};
    int32_t pncmin = 0, pncmax = -1;
    if (s->propnames.n) {
        conj q = {0};
        for (uint32_t k = 0; k < s->propnames.n; k++) PUSH(c, q.m, q.n, (mem)M_NODE(s->propnames.m[k]));
        if (!flatten(c, &q, &pn)) return 0;
        if (pn.ngroups || pn.naf || pn.nof) return unsupported(c, "propertyNames with non-string keywords"), 0;
        if (pn.unsat || !(pn.types & T_STR)) {
            /* no key is allowed */
            pn.unsat = 1;
        }
        has_pn = 1;
        int plain;
        if (!pn.unsat && !pn.has_enum && !string_spec(c, &pn, &pnspec, &pncmin, &pncmax, &plain)) pn.unsat = 1;
    }
    /* value conj per named property */
    for (uint32_t j = 0; j < np; j++) {
        nprop *p = &props[j];
        if (has_pn) {
            di_json ks = {.type = DI_JSON_STRING, .str = p->name, .str_len = p->len, .key = ""};
            int ok;
            if (pn.unsat) ok = 0;
            else if (pn.has_enum) {
                ok = 0;
                for (uint32_t e = 0; e < pn.nenum && !ok; e++) ok = json_equal(pn.enums[e], &ks, 0);
            } else ok = value_ok(c, &pn, &ks);
            if (ok < 0) return unsupported(c, "propertyNames check"), 0;
            if (!ok) {
                di_json *f = mk(c, DI_JSON_FALSE);
                if (!f) return 0;
                PUSH(c, p->q.m, p->q.n, (mem)f);
                continue;
            }
        }
        for (uint32_t k = 0; k < s->nof; k++) {
            const facet *f = &s->of[k];
            const di_json *ps = NULL;
            for (uint32_t i = 0; f->props && i < f->props->count; i++)
                if (f->props->items[i].key_len == p->len && !memcmp(f->props->items[i].key, p->name, p->len)) ps = &f->props->items[i];
            if (ps) PUSH(c, p->q.m, p->q.n, (mem)ps);
            int matched = ps != NULL; /* properties and matching patternProperties both apply */
            for (uint32_t i = 0; f->pprops && i < f->pprops->count; i++) {
                int r = pattern_matches(c, f->pprops->items[i].key, f->pprops->items[i].key_len, p->name, p->len);
                if (r < 0) return 0;
                if (r) {
                    PUSH(c, p->q.m, p->q.n, (mem)&f->pprops->items[i]);
                    matched = 1;
                }
            }
            if (!matched && f->addl) PUSH(c, p->q.m, p->q.n, (mem)f->addl);
        }
    }
    if (c->st != DEEPINFER_OK) return 0;
    /* additional keys: per pattern, and the rest */
    int addl_false = 0;
    conj addl = {0};
    for (uint32_t k = 0; k < s->nof; k++)
        if (s->of[k].addl) {
            if (s->of[k].addl->type == DI_JSON_FALSE) addl_false = 1;
            PUSH(c, addl.m, addl.n, (mem)s->of[k].addl);
        }
    if (has_pn && pn.has_enum) addl_false = 1; /* keys limited to the enum: all named */
    /* named keys, as a regex alternation of their encodings */
    so_buf named = {0};
    for (uint32_t j = 0; j < np; j++) {
        so_buf enc = {0};
        so_json_write_string(&enc, props[j].name, props[j].len);
        if (j) so_buf_puts(&named, "|");
        regex_lit(&named, enc.p, enc.n);
        free(enc.p);
    }
    int32_t key_kinds[2 * 64 + 2], val_kinds[2 * 64 + 2];
    uint32_t nk = 0;
    uint32_t npp = pf ? pf->pprops->count : 0;
    if (npp > 64) return unsupported(c, "more than 64 patternProperties"), 0;
    for (uint32_t i = 0; i < npp; i++) {
        const di_json *pp = &pf->pprops->items[i];
        so_buf spec = {0};
        if (np) so_buf_puts(&spec, "-");
        if (has_pn && !pn.unsat) so_buf_puts(&spec, "&");
        spec_leaf(&spec, 'S', pp->key, pp->key_len);
        if (has_pn && !pn.unsat) so_buf_put(&spec, pnspec.p, pnspec.n);
        if (np) spec_leaf(&spec, 'R', named.p, named.n);
        if (has_pn && pn.unsat) {
            free(spec.p);
            continue;
        }
        conj q = {0};
        PUSH(c, q.m, q.n, (mem)pp);
        for (uint32_t k = 0; k < s->nof; k++)
            if (&s->of[k] != pf && s->of[k].addl) PUSH(c, q.m, q.n, (mem)s->of[k].addl);
        key_kinds[nk] = lex_spec(c, &spec, has_pn ? pncmin : 0, has_pn ? pncmax : -1);
        val_kinds[nk++] = sym_for(c, &q);
        free(spec.p);
    }
    if (!addl_false && !(has_pn && pn.unsat)) {
        so_buf spec = {0};
        int sub = np || npp;
        /* named keys only: '~' lets the mask cache use the generic string's states */
        if (sub) so_buf_puts(&spec, npp || has_pn ? "-" : "~");
        if (has_pn) so_buf_puts(&spec, "&");
        if (sub || has_pn) spec_leaf(&spec, 'J', "[\\s\\S]*", 7);
        else spec_leaf(&spec, 'R', GENERIC_STR, strlen(GENERIC_STR));
        if (has_pn) so_buf_put(&spec, pnspec.p, pnspec.n);
        if (sub) {
            so_buf alt = {0};
            if (np) so_buf_put(&alt, named.p, named.n);
            uint32_t u = (np ? 1 : 0) + npp;
            for (uint32_t i = 1; i < u; i++) so_buf_puts(&spec, "|");
            if (np) spec_leaf(&spec, 'R', alt.p, alt.n);
            for (uint32_t i = 0; i < npp; i++) spec_leaf(&spec, 'S', pf->pprops->items[i].key, pf->pprops->items[i].key_len);
            free(alt.p);
        }
        key_kinds[nk] = lex_spec(c, &spec, has_pn ? pncmin : 0, has_pn ? pncmax : -1);
        val_kinds[nk++] = addl.n ? sym_for(c, &addl) : c->nt_any;
        free(spec.p);
    }
    free(named.p), free(pnspec.p);
    if (c->st != DEEPINFER_OK) return 0;
    /* key symbols and value symbols of named properties */
    int32_t *ksym = malloc((np + 1) * sizeof *ksym), *vsym = malloc((np + 1) * sizeof *vsym);
    if (!ksym || !vsym) {
        free(ksym), free(vsym);
        return oom(c), 0;
    }
    for (uint32_t j = 0; j < np && c->st == DEEPINFER_OK; j++) {
        ksym[j] = key_sym(c, props[j].name, props[j].len);
        vsym[j] = props[j].q.n ? sym_for(c, &props[j].q) : c->nt_any;
    }
    /* counts: k in [0, cap]; cap = max(1, maxProperties or minProperties) */
    int64_t minP = s->minprops, maxP = s->maxprops;
    int64_t cap = maxP >= 0 ? maxP : minP;
    if (cap < 1) cap = 1;
    if (maxP >= 0 && cap > maxP) cap = maxP;
    if ((int64_t)(np + 1) * (cap + 1) > 50000) {
        free(ksym), free(vsym);
        return failf(c, DEEPINFER_ERR_LIMIT, "object too large (properties x min/maxProperties)%s", ""), 0;
    }
    uint32_t K = (uint32_t)cap + 1;
    int32_t *rest = malloc((size_t)(np + 1) * K * sizeof *rest);
    if (!rest) {
        free(ksym), free(vsym);
        return oom(c), 0;
    }
    /* additional(k) for k in [0, cap] */
    for (uint32_t k = 0; k < K; k++) rest[(size_t)np * K + k] = so_gb_nt(c->b);
    for (uint32_t k = 0; k < K && c->st == DEEPINFER_OK; k++) {
        int32_t a = rest[(size_t)np * K + k];
        if ((int64_t)k >= minP) so_gb_prod(c->b, a, NULL, 0);
        if (maxP >= 0 && (int64_t)k >= maxP) continue;
        int sat = (int64_t)k == cap && maxP < 0; /* count no longer matters: loop */
        for (uint32_t j = 0; j < nk; j++) {
            int32_t seq[5];
            uint32_t L = 0;
            if (k > 0) seq[L++] = c->s_comma;
            seq[L++] = key_kinds[j];
            seq[L++] = c->s_colon;
            seq[L++] = val_kinds[j];
            seq[L++] = rest[(size_t)np * K + (sat ? k : k + 1)];
            so_gb_prod(c->b, a, seq, L);
        }
    }
    for (uint32_t jj = np; jj-- > 0 && c->st == DEEPINFER_OK;) {
        for (uint32_t k = 0; k < K; k++) {
            int32_t r = so_gb_nt(c->b);
            rest[(size_t)jj * K + k] = r;
            if (!props[jj].required) so_gb_prod(c->b, r, &rest[(size_t)(jj + 1) * K + k], 1);
            if (maxP >= 0 && (int64_t)k >= maxP) continue;
            uint32_t k2 = k + 1 < K ? k + 1 : k;
            int32_t seq[4];
            uint32_t L = 0;
            if (k > 0) seq[L++] = c->s_comma;
            seq[L++] = ksym[jj];
            seq[L++] = vsym[jj];
            seq[L++] = rest[(size_t)(jj + 1) * K + k2];
            so_gb_prod(c->b, r, seq, L);
        }
    }
    int32_t nt = so_gb_nt(c->b);
    int32_t s3[3] = {c->s_lbrace, rest[0], c->s_rbrace};
    so_gb_prod(c->b, nt, s3, 3);
    free(ksym), free(vsym), free(rest);
    return nt;
}

/* conservative: 1 only if no value satisfies both */
static int disjoint(ctx *c, const sn *a, const sn *b, int depth);

static int disjoint_conj(ctx *c, const conj *x, const conj *y, int depth) {
    sn a, b;
    if (depth > 4) return 0;
    if (!flatten(c, x, &a) || !flatten(c, y, &b)) return 0;
    return disjoint(c, &a, &b, depth + 1);
}

static int prop_conj(ctx *c, const sn *s, const char *name, size_t len, conj *q, int *forbidden) {
    *forbidden = 0;
    for (uint32_t k = 0; k < s->nof; k++) {
        const facet *f = &s->of[k];
        const di_json *ps = NULL;
        for (uint32_t i = 0; f->props && i < f->props->count; i++)
            if (f->props->items[i].key_len == len && !memcmp(f->props->items[i].key, name, len)) ps = &f->props->items[i];
        if (ps) PUSH(c, q->m, q->n, (mem)ps);
        int matched = ps != NULL;
        for (uint32_t i = 0; f->pprops && i < f->pprops->count; i++) {
            int r = pattern_matches(c, f->pprops->items[i].key, f->pprops->items[i].key_len, name, len);
            if (r < 0) return 0;
            if (r) {
                PUSH(c, q->m, q->n, (mem)&f->pprops->items[i]);
                matched = 1;
            }
        }
        if (!matched && f->addl) {
            if (f->addl->type == DI_JSON_FALSE) *forbidden = 1;
            PUSH(c, q->m, q->n, (mem)f->addl);
        }
    }
    return 1;
}

static int has_req(const sn *s, const char *name, size_t len) {
    for (uint32_t r = 0; r < s->nreq; r++)
        if (s->req[r]->str_len == len && !memcmp(s->req[r]->str, name, len)) return 1;
    return 0;
}

static int disjoint(ctx *c, const sn *a, const sn *b, int depth) {
    if (a->unsat || b->unsat) return 1;
    if (a->ngroups || b->ngroups) {
        /* disjoint only through type/enum checks below */
    }
    uint32_t common = a->types & b->types;
    if ((a->types & T_INT) && (b->types & T_NUM) && !(a->types & T_NUM)) common |= T_INT;
    if ((b->types & T_INT) && (a->types & T_NUM) && !(b->types & T_NUM)) common |= T_INT;
    if (!common) return 1;
    if (a->has_enum && b->has_enum) {
        for (uint32_t i = 0; i < a->nenum; i++)
            for (uint32_t j = 0; j < b->nenum; j++)
                if (json_equal(a->enums[i], b->enums[j], 0)) return 0;
        return 1;
    }
    const sn *e = a->has_enum ? a : b->has_enum ? b : NULL;
    if (e) {
        const sn *o = e == a ? b : a;
        for (uint32_t i = 0; i < e->nenum; i++) {
            if (!(value_type(e->enums[i]) & o->types)) continue;
            int r = value_ok(c, o, e->enums[i]);
            if (r != 0 || o->ngroups) return 0;
        }
        return 1;
    }
    /* every common type must be disjoint */
    for (uint32_t t = 1; t <= T_OBJ; t <<= 1) {
        if (!(common & t)) continue;
        if (t == T_OBJ) {
            int dj = 0;
            const sn *pairs[2][2] = {{a, b}, {b, a}};
            for (int w = 0; w < 2 && !dj; w++) {
                const sn *x = pairs[w][0], *y = pairs[w][1];
                for (uint32_t r = 0; r < x->nreq && !dj; r++) {
                    conj qx = {0}, qy = {0};
                    int fx, fy;
                    if (!prop_conj(c, y, x->req[r]->str, x->req[r]->str_len, &qy, &fy)) continue;
                    if (fy) dj = 1;
                    if (dj) break;
                    if (!has_req(y, x->req[r]->str, x->req[r]->str_len)) continue;
                    if (!prop_conj(c, x, x->req[r]->str, x->req[r]->str_len, &qx, &fx)) continue;
                    if (qx.n && qy.n && disjoint_conj(c, &qx, &qy, depth + 1)) dj = 1;
                }
            }
            if (!dj) return 0;
        } else if (t == T_NUM || t == T_INT) {
            /* ranges */
            int dj = 0;
            if (a->has_hi && b->has_lo) {
                int cmp = so_dec_cmp(&a->hi, &b->lo);
                if (cmp < 0 || (cmp == 0 && (a->hi_excl || b->lo_excl))) dj = 1;
            }
            if (b->has_hi && a->has_lo) {
                int cmp = so_dec_cmp(&b->hi, &a->lo);
                if (cmp < 0 || (cmp == 0 && (b->hi_excl || a->lo_excl))) dj = 1;
            }
            if (!dj) return 0;
        } else if (t == T_ARR) {
            int dj = (a->maxitems >= 0 && a->maxitems < b->minitems) || (b->maxitems >= 0 && b->maxitems < a->minitems);
            if (!dj) return 0;
        } else if (t == T_STR) {
            int dj = (a->maxlen >= 0 && a->maxlen < b->minlen) || (b->maxlen >= 0 && b->maxlen < a->minlen);
            if (!dj) return 0;
        } else {
            return 0;
        }
    }
    return 1;
}

/* The nonterminal for a flattened node without groups. */
static int32_t build_plain(ctx *c, int32_t nt, const sn *s) {
    if (s->unsat) return nt; /* no productions: matches nothing */
    if (s->has_enum) {
        /* scalar literals in one lexeme; objects/arrays as small grammars */
        so_buf re = {0};
        int any = 0;
        for (uint32_t k = 0; k < s->nenum && c->st == DEEPINFER_OK; k++) {
            const di_json *v = s->enums[k];
            int ok = value_ok(c, s, v);
            if (c->st != DEEPINFER_OK) break;
            if (ok < 0) {
                free(re.p);
                return unsupported(c, "enum values combined with keywords that cannot be checked on them"), nt;
            }
            if (!ok) continue;
            if (v->type == DI_JSON_ARRAY || v->type == DI_JSON_OBJECT) {
                int32_t ls = literal_sym(c, v, 0);
                so_gb_prod(c->b, nt, &ls, 1);
                continue;
            }
            if (any) so_buf_puts(&re, "|");
            if (v->type == DI_JSON_NUMBER) {
                so_dec d;
                if (so_dec_parse(v->str, v->str_len, &d)) so_number_eq_regex(&re, &d);
                else regex_lit(&re, v->str, v->str_len);
            } else {
                so_buf enc = {0};
                so_json_write(&enc, v, SO_JSON_COMPACT);
                so_buf_puts(&re, "(");
                regex_lit(&re, enc.p, enc.n);
                so_buf_puts(&re, ")");
                free(enc.p);
            }
            any = 1;
        }
        if (any) {
            int32_t l = lex_regex(c, re.p);
            so_gb_prod(c->b, nt, &l, 1);
        }
        free(re.p);
        return nt;
    }
    uint32_t t = s->types;
    if (t & T_NULL) {
        int ex = 0;
        for (uint32_t k = 0; k < s->nexcl; k++) ex |= s->excl[k]->type == DI_JSON_NULL;
        if (!ex) so_gb_prod(c->b, nt, &c->s_null, 1);
    }
    if (t & T_BOOL) {
        int ext = 0, exf = 0;
        for (uint32_t k = 0; k < s->nexcl; k++) ext |= s->excl[k]->type == DI_JSON_TRUE, exf |= s->excl[k]->type == DI_JSON_FALSE;
        if (!ext) so_gb_prod(c->b, nt, &c->s_true, 1);
        if (!exf) so_gb_prod(c->b, nt, &c->s_false, 1);
    }
    if (t & (T_INT | T_NUM)) {
        int32_t ns = number_sym(c, s);
        if (ns != INT32_MIN && c->st == DEEPINFER_OK) so_gb_prod(c->b, nt, &ns, 1);
    }
    if (t & T_STR) {
        int32_t ss = string_sym(c, s);
        if (ss != INT32_MIN && c->st == DEEPINFER_OK) so_gb_prod(c->b, nt, &ss, 1);
    }
    for (uint32_t k = 0; k < s->nexcl; k++)
        if ((s->excl[k]->type == DI_JSON_ARRAY && (t & T_ARR)) || (s->excl[k]->type == DI_JSON_OBJECT && (t & T_OBJ)))
            return unsupported(c, "'not' of an object or array value"), nt;
    if (t & T_ARR) {
        int32_t as = array_sym(c, s);
        if (c->st == DEEPINFER_OK) so_gb_prod(c->b, nt, &as, 1);
    }
    if (t & T_OBJ) {
        int32_t os = object_sym(c, s);
        if (c->st == DEEPINFER_OK) so_gb_prod(c->b, nt, &os, 1);
    }
    return nt;
}

static int32_t sym_for(ctx *c, const conj *q0) {
    if (time_up(c)) return 0;
    /* canonical key */
    mem key[MAX_EXPAND + 1];
    if (q0->n > MAX_EXPAND) return failf(c, DEEPINFER_ERR_LIMIT, "schema too large%s", ""), 0;
    if (q0->n) memcpy(key, q0->m, q0->n * sizeof *key);
    qsort(key, q0->n, sizeof *key, cmp_mem);
    uint32_t n = 0;
    for (uint32_t i = 0; i < q0->n; i++)
        if (!n || key[n - 1] != key[i]) key[n++] = key[i];
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ (uint64_t)key[i]) * 1099511628211ull;
    for (uint32_t i = 0; i < c->nmemo; i++)
        if (c->memo[i].h == h && c->memo[i].n == n && !memcmp(c->memo[i].key, key, n * sizeof *key)) return c->memo[i].nt;
    int32_t nt = so_gb_nt(c->b);
    memo mm = {di_arena_alloc(&c->a, (n + 1) * sizeof *key), n, h, nt};
    if (!mm.key) return oom(c), 0;
    if (n) memcpy(mm.key, key, n * sizeof *key);
    PUSH(c, c->memo, c->nmemo, mm);
    if (++c->depth > MAX_DEPTH) {
        c->depth--;
        return failf(c, DEEPINFER_ERR_LIMIT, "schema nested too deeply%s", ""), 0;
    }
    sn s;
    if (!flatten(c, q0, &s)) {
        c->depth--;
        return nt;
    }
    if (!s.ngroups) {
        build_plain(c, nt, &s);
        c->depth--;
        return nt;
    }
    /* distribute the groups: cross product of alternatives */
    uint32_t total = 1;
    for (uint32_t g = 0; g < s.ngroups; g++) {
        if (!s.groups[g].n) {
            c->depth--;
            return nt; /* an empty disjunction: unsatisfiable */
        }
        total *= s.groups[g].n;
        if (total > MAX_ALTS) {
            c->depth--;
            return failf(c, DEEPINFER_ERR_LIMIT, "too many alternatives (anyOf/oneOf/if/dependencies product above %s)", "256"), 0;
        }
    }
    /* oneOf must be exclusive given the rest */
    for (uint32_t g = 0; g < s.ngroups && c->st == DEEPINFER_OK; g++) {
        if (!s.groups[g].oneof || s.groups[g].n < 2) continue;
        for (uint32_t i = 0; i < s.groups[g].n && c->st == DEEPINFER_OK; i++)
            for (uint32_t j = i + 1; j < s.groups[g].n && c->st == DEEPINFER_OK; j++) {
                conj x = {0}, y = {0};
                for (uint32_t k = 0; k < s.members.n; k++) {
                    PUSH(c, x.m, x.n, s.members.m[k] | 1);
                    PUSH(c, y.m, y.n, s.members.m[k] | 1);
                }
                for (uint32_t k = 0; k < s.groups[g].alts[i].n; k++) PUSH(c, x.m, x.n, s.groups[g].alts[i].m[k]);
                for (uint32_t k = 0; k < s.groups[g].alts[j].n; k++) PUSH(c, y.m, y.n, s.groups[g].alts[j].m[k]);
                int dj = disjoint_conj(c, &x, &y, 0);
                if (c->st != DEEPINFER_OK) {
                    c->depth--;
                    return nt;
                }
                if (!dj && !c->lenient) {
                    c->depth--;
                    return unsupported(c, "oneOf whose alternatives may overlap (cannot be enforced exactly)"), 0;
                }
            }
    }
    uint32_t idx[64] = {0};
    if (s.ngroups > 64) {
        c->depth--;
        return failf(c, DEEPINFER_ERR_LIMIT, "too many anyOf/oneOf groups%s", ""), 0;
    }
    for (uint32_t combo = 0; combo < total && c->st == DEEPINFER_OK; combo++) {
        conj alt = {0};
        for (uint32_t k = 0; k < s.members.n; k++) PUSH(c, alt.m, alt.n, s.members.m[k] | 1);
        for (uint32_t g = 0; g < s.ngroups; g++) {
            const conj *a = &s.groups[g].alts[idx[g]];
            for (uint32_t k = 0; k < a->n; k++) PUSH(c, alt.m, alt.n, a->m[k]);
        }
        int32_t as = sym_for(c, &alt);
        so_gb_prod(c->b, nt, &as, 1);
        for (uint32_t g = 0; g < s.ngroups; g++) {
            if (++idx[g] < s.groups[g].n) break;
            idx[g] = 0;
        }
    }
    c->depth--;
    return nt;
}

/* ---- entry --------------------------------------------------------------- */

static void any_value(ctx *c) {
    int32_t v = so_gb_nt(c->b), obj = so_gb_nt(c->b), arr = so_gb_nt(c->b), mem_ = so_gb_nt(c->b), el = so_gb_nt(c->b);
    c->nt_any = v;
    int32_t alts[] = {obj, arr, c->s_str, c->s_num, c->s_true, c->s_false, c->s_null};
    for (int i = 0; i < 7; i++) so_gb_prod(c->b, v, &alts[i], 1);
    int32_t kv[3] = {c->s_str, c->s_colon, v};
    so_gb_prod(c->b, mem_, kv, 3);
    int32_t kv2[5] = {mem_, c->s_comma, c->s_str, c->s_colon, v};
    so_gb_prod(c->b, mem_, kv2, 5);
    int32_t o1[2] = {c->s_lbrace, c->s_rbrace}, o2[3] = {c->s_lbrace, mem_, c->s_rbrace};
    so_gb_prod(c->b, obj, o1, 2);
    so_gb_prod(c->b, obj, o2, 3);
    so_gb_prod(c->b, el, &v, 1);
    int32_t e2[3] = {el, c->s_comma, v};
    so_gb_prod(c->b, el, e2, 3);
    int32_t a1[2] = {c->s_lbrack, c->s_rbrack}, a2[3] = {c->s_lbrack, el, c->s_rbrack};
    so_gb_prod(c->b, arr, a1, 2);
    so_gb_prod(c->b, arr, a2, 3);
}

static int detect_draft(const di_json *root) {
    const di_json *s = get(root, "$schema");
    if (!s || s->type != DI_JSON_STRING) return 2020;
    if (strstr(s->str, "draft-04") || strstr(s->str, "draft-03")) return 4;
    if (strstr(s->str, "draft-06")) return 6;
    if (strstr(s->str, "draft-07")) return 7;
    if (strstr(s->str, "2019-09")) return 2019;
    return 2020;
}

deepinfer_status so_json_schema_build(const char *schema, size_t len, const so_limits *lim, so_vocab *v, so_gb *b,
                                      int32_t *root, di_error *err) {
    di_json_doc *doc = NULL;
    di_json_options jo = {.max_depth = 128, .max_bytes = (size_t)256 << 20};
    deepinfer_status st = di_json_parse(schema, len, &jo, &doc, err);
    if (st != DEEPINFER_OK) return di_error_prefix(err, "json schema is not valid JSON");
    ctx c = {.b = b, .v = v, .err = err, .st = DEEPINFER_OK, .root = doc->root};
    c.lenient = lim ? lim->lenient : 0;
    c.ws = lim && lim->whitespace_max >= 0 ? lim->whitespace_max : 20;
    uint32_t ms = lim && lim->max_compile_ms ? lim->max_compile_ms : 10000;
    c.deadline = clock() + (clock_t)((double)ms * CLOCKS_PER_SEC / 1000.0);
    c.draft = detect_draft(doc->root);
    di_arena_init(&c.a, 0);
    if (c.ws > 0) snprintf(c.wsre, sizeof c.wsre, "[ \\t\\n\\r]{0,%d}", c.ws);
    else c.wsre[0] = 0;
    char re[128];
    snprintf(re, sizeof re, "\\{%s", c.wsre), c.s_lbrace = lex_regex(&c, re);
    snprintf(re, sizeof re, "%s\\}", c.wsre), c.s_rbrace = lex_regex(&c, re);
    snprintf(re, sizeof re, "\\[%s", c.wsre), c.s_lbrack = lex_regex(&c, re);
    snprintf(re, sizeof re, "%s\\]", c.wsre), c.s_rbrack = lex_regex(&c, re);
    snprintf(re, sizeof re, "%s,%s", c.wsre, c.wsre), c.s_comma = lex_regex(&c, re);
    snprintf(re, sizeof re, "%s:%s", c.wsre, c.wsre), c.s_colon = lex_regex(&c, re);
    c.s_str = lex_regex(&c, GENERIC_STR);
    c.s_num = lex_regex(&c, "-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");
    c.s_true = lex_regex(&c, "true");
    c.s_false = lex_regex(&c, "false");
    c.s_null = lex_regex(&c, "null");
    any_value(&c);
    int32_t r = sym_for_node(&c, doc->root);
    if (c.st == DEEPINFER_OK && b->failed) c.st = di_error_set(err, b->fail_code, "json schema: %s", b->fail_msg);
    st = c.st;
    di_arena_free(&c.a);
    di_json_free(doc);
    if (st == DEEPINFER_OK) *root = r;
    return st;
}
