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

#include "structured/json_schema_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "structured/json_formats.h"
#include "structured/lexspec.h"

int js_failf(ctx *c, deepinfer_status code, const char *fmt, const char *arg) {
    if (c->st == DEEPINFER_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, fmt, arg ? arg : "");
        c->st = di_error_set(c->err, code, "json schema: %s", msg);
    }
    return 0;
}

int js_unsupported(ctx *c, const char *what) {
    return js_failf(c, DEEPINFER_ERR_UNSUPPORTED, "unsupported: %s (set lenient to ignore it)", what);
}

int js_oom(ctx *c) { return js_failf(c, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory%s", ""); }

void *js_grow(ctx *c, void *p, uint32_t n, size_t elem) {
    /* arena arrays grow by copying at powers of two */
    if (n && (n & (n - 1))) return p;
    uint32_t cap = n ? n * 2 : 4;
    void *np = di_arena_alloc(&c->a, cap * elem);
    if (!np) return js_oom(c), NULL;
    if (n) memcpy(np, p, n * elem);
    return np;
}




int js_time_up(ctx *c) {
    if (c->st != DEEPINFER_OK) return 1;
    if (clock() > c->deadline) return js_failf(c, DEEPINFER_ERR_LIMIT, "compile time limit exceeded%s", ""), 1;
    return 0;
}

int32_t js_sym_for(ctx *c, const conj *q);

int js_cmp_mem(const void *a, const void *b) {
    mem x = *(const mem *)a, y = *(const mem *)b;
    return x < y ? -1 : x > y;
}

int32_t js_sym_for_node(ctx *c, const di_json *n) {
    mem m = (mem)n;
    conj q = {&m, 1};
    return js_sym_for(c, &q);
}

int32_t js_sym_for(ctx *c, const conj *q0) {
    if (js_time_up(c)) return 0;
    /* canonical key */
    mem key[MAX_EXPAND + 1];
    if (q0->n > MAX_EXPAND) return js_failf(c, DEEPINFER_ERR_LIMIT, "schema too large%s", ""), 0;
    if (q0->n) memcpy(key, q0->m, q0->n * sizeof *key);
    qsort(key, q0->n, sizeof *key, js_cmp_mem);
    uint32_t n = 0;
    for (uint32_t i = 0; i < q0->n; i++)
        if (!n || key[n - 1] != key[i]) key[n++] = key[i];
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ (uint64_t)key[i]) * 1099511628211ull;
    for (uint32_t i = 0; i < c->nmemo; i++)
        if (c->memo[i].h == h && c->memo[i].n == n && !memcmp(c->memo[i].key, key, n * sizeof *key)) return c->memo[i].nt;
    int32_t nt = so_gb_nt(c->b);
    memo mm = {di_arena_alloc(&c->a, (n + 1) * sizeof *key), n, h, nt};
    if (!mm.key) return js_oom(c), 0;
    if (n) memcpy(mm.key, key, n * sizeof *key);
    PUSH(c, c->memo, c->nmemo, mm);
    if (++c->depth > MAX_DEPTH) {
        c->depth--;
        return js_failf(c, DEEPINFER_ERR_LIMIT, "schema nested too deeply%s", ""), 0;
    }
    sn s;
    if (!js_flatten(c, q0, &s)) {
        c->depth--;
        return nt;
    }
    if (!s.ngroups) {
        js_build_plain(c, nt, &s);
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
            return js_failf(c, DEEPINFER_ERR_LIMIT, "too many alternatives (anyOf/oneOf/if/dependencies product above %s)", "256"), 0;
        }
    }
    /* oneOf must be exclusive given the rest: when the branches are not
     * provably disjoint, branch i becomes "i and not any other branch" */
    for (uint32_t g = 0; g < s.ngroups && c->st == DEEPINFER_OK; g++) {
        if (!s.groups[g].oneof || s.groups[g].n < 2) continue;
        int exclusive = 1;
        for (uint32_t i = 0; i < s.groups[g].n && exclusive && c->st == DEEPINFER_OK; i++)
            for (uint32_t j = i + 1; j < s.groups[g].n && exclusive && c->st == DEEPINFER_OK; j++) {
                conj x = {0}, y = {0};
                for (uint32_t k = 0; k < s.members.n; k++) {
                    PUSH(c, x.m, x.n, s.members.m[k] | 1);
                    PUSH(c, y.m, y.n, s.members.m[k] | 1);
                }
                for (uint32_t k = 0; k < s.groups[g].alts[i].n; k++) PUSH(c, x.m, x.n, s.groups[g].alts[i].m[k]);
                for (uint32_t k = 0; k < s.groups[g].alts[j].n; k++) PUSH(c, y.m, y.n, s.groups[g].alts[j].m[k]);
                exclusive = js_disjoint_conj(c, &x, &y, 0);
            }
        if (c->st != DEEPINFER_OK) {
            c->depth--;
            return nt;
        }
        if (exclusive || c->lenient) continue; /* lenient: treated as anyOf */
        group *gr = &s.groups[g];
        conj *nalts = NULL;
        uint32_t nn = 0;
        for (uint32_t i = 0; i < gr->n && c->st == DEEPINFER_OK; i++) {
            conj q = {0};
            for (uint32_t k = 0; k < gr->alts[i].n; k++) PUSH(c, q.m, q.n, gr->alts[i].m[k]);
            for (uint32_t j = 0; j < gr->n; j++) {
                if (j == i) continue;
                for (uint32_t k = 0; k < gr->alts[j].n; k++) {
                    di_json *neg = js_wrap1(c, "not", js_M_NODE_CONST(gr->alts[j].m[k]));
                    if (!neg) break;
                    PUSH(c, q.m, q.n, (mem)neg);
                }
            }
            PUSH(c, nalts, nn, q);
        }
        gr->alts = nalts, gr->n = nn;
    }
    uint32_t idx[64] = {0};
    if (s.ngroups > 64) {
        c->depth--;
        return js_failf(c, DEEPINFER_ERR_LIMIT, "too many anyOf/oneOf groups%s", ""), 0;
    }
    for (uint32_t combo = 0; combo < total && c->st == DEEPINFER_OK; combo++) {
        conj alt = {0};
        for (uint32_t k = 0; k < s.members.n; k++) PUSH(c, alt.m, alt.n, s.members.m[k] | 1);
        for (uint32_t g = 0; g < s.ngroups; g++) {
            const conj *a = &s.groups[g].alts[idx[g]];
            for (uint32_t k = 0; k < a->n; k++) PUSH(c, alt.m, alt.n, a->m[k]);
        }
        int32_t as = js_sym_for(c, &alt);
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

void js_any_value(ctx *c) {
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

int js_detect_draft(const di_json *root) {
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
    c.draft = js_detect_draft(doc->root);
    di_arena_init(&c.a, 0);
    if (c.ws > 0) snprintf(c.wsre, sizeof c.wsre, "[ \\t\\n\\r]{0,%d}", c.ws);
    else c.wsre[0] = 0;
    char re[128];
    snprintf(re, sizeof re, "\\{%s", c.wsre), c.s_lbrace = js_lex_regex(&c, re);
    snprintf(re, sizeof re, "%s\\}", c.wsre), c.s_rbrace = js_lex_regex(&c, re);
    snprintf(re, sizeof re, "\\[%s", c.wsre), c.s_lbrack = js_lex_regex(&c, re);
    snprintf(re, sizeof re, "%s\\]", c.wsre), c.s_rbrack = js_lex_regex(&c, re);
    snprintf(re, sizeof re, "%s,%s", c.wsre, c.wsre), c.s_comma = js_lex_regex(&c, re);
    snprintf(re, sizeof re, "%s:%s", c.wsre, c.wsre), c.s_colon = js_lex_regex(&c, re);
    c.s_str = js_lex_regex(&c, JS_GENERIC_STR);
    c.s_num = js_lex_regex(&c, "-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");
    c.s_true = js_lex_regex(&c, "true");
    c.s_false = js_lex_regex(&c, "false");
    c.s_null = js_lex_regex(&c, "null");
    js_any_value(&c);
    int32_t r = js_sym_for_node(&c, doc->root);
    if (c.st == DEEPINFER_OK && b->failed) c.st = di_error_set(err, b->fail_code, "json schema: %s", b->fail_msg);
    st = c.st;
    di_arena_free(&c.a);
    di_json_free(doc);
    if (st == DEEPINFER_OK) *root = r;
    return st;
}

