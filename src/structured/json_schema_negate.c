/*
 * json_schema_negate.c — not and if/then/else: the complement of a schema node as
 * a union of alternatives (synthetic schema nodes), for the negatable
 * keywords; anything else is reported.
 */
#include "structured/json_schema_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "structured/json_formats.h"
#include "structured/lexspec.h"

/* synthetic nodes (arena) */
di_json *js_mk(ctx *c, di_json_type t) {
    di_json *j = di_arena_calloc(&c->a, 1, sizeof *j);
    if (!j) return js_oom(c), NULL;
    j->type = t;
    j->key = "";
    return j;
}

di_json *js_mk_obj(ctx *c, uint32_t n) {
    di_json *o = js_mk(c, DI_JSON_OBJECT);
    if (!o) return NULL;
    o->items = di_arena_calloc(&c->a, n + 1, sizeof *o->items);
    if (!o->items) return js_oom(c), NULL;
    o->count = n;
    return o;
}

void js_set_member(di_json *o, uint32_t i, const char *key, size_t klen, const di_json *val) {
    o->items[i] = *val;
    o->items[i].key = key;
    o->items[i].key_len = klen;
}

di_json *js_mk_str(ctx *c, const char *s, size_t n) {
    di_json *j = js_mk(c, DI_JSON_STRING);
    if (!j) return NULL;
    j->str = di_arena_strndup(&c->a, s, n);
    j->str_len = n;
    return j->str ? j : (js_oom(c), NULL);
}

/* {"type": [types]} */
di_json *js_mk_types(ctx *c, uint32_t types) {
    static const char *names[] = {"null", "boolean", "integer", "number", "string", "array", "object"};
    uint32_t n = 0;
    if (types & T_NUM) types &= ~T_INT;
    for (int k = 0; k < 7; k++) n += (types >> k) & 1;
    di_json *arr = js_mk(c, DI_JSON_ARRAY);
    if (!arr) return NULL;
    arr->items = di_arena_calloc(&c->a, n + 1, sizeof *arr->items);
    if (!arr->items) return js_oom(c), NULL;
    arr->count = n;
    uint32_t w = 0;
    for (int k = 0; k < 7; k++)
        if ((types >> k) & 1) {
            di_json *s = js_mk_str(c, names[k], strlen(names[k]));
            if (!s) return NULL;
            arr->items[w++] = *s;
        }
    di_json *o = js_mk_obj(c, 1);
    if (!o) return NULL;
    js_set_member(o, 0, "type", 4, arr);
    return o;
}

/* ---- $ref resolution ----------------------------------------------------- */

di_json *js_wrap1(ctx *c, const char *k, const di_json *v) {
    di_json *o = js_mk_obj(c, 1);
    if (o) js_set_member(o, 0, k, strlen(k), v);
    return o;
}

int js_add_alt1(ctx *c, group *g, const di_json *a, const di_json *b) {
    conj q = {0};
    if (a) PUSH(c, q.m, q.n, (mem)a);
    if (b) PUSH(c, q.m, q.n, (mem)b);
    PUSH(c, g->alts, g->n, q);
    return c->st == DEEPINFER_OK;
}


/* alternatives whose union is the complement of node n */
int js_negate(ctx *c, const di_json *n, group *g, int depth);

int js_negate_kw(ctx *c, const di_json *node, const di_json *m, group *g, int depth) {
    di_json *o;
    if (key_is(m, "type")) {
        uint32_t t = js_parse_types(c, m);
        if (c->st) return 0;
        uint32_t comp = T_ALL & ~t;
        if (t & T_INT && !(t & T_NUM)) comp |= T_NUM; /* non-integral numbers */
        if (!comp) return 1;
        if ((t & T_INT) && !(t & T_NUM)) {
            /* not integer: non-numbers, or numbers with a fraction */
            di_json *nonint = js_mk_obj(c, 2);
            di_json *tr = js_mk(c, DI_JSON_TRUE);
            if (!nonint || !tr) return 0;
            js_set_member(nonint, 0, "type", 4, &js_mk_types(c, T_NUM)->items[0]);
            js_set_member(nonint, 1, "\0so-nonint", 10, tr);
            if (!js_add_alt1(c, g, nonint, NULL)) return 0;
            comp &= ~(T_NUM | T_INT);
            if (!comp) return 1;
        }
        return js_add_alt1(c, g, js_mk_types(c, comp), NULL);
    }
    if (key_is(m, "enum") || key_is(m, "const")) {
        di_json *arr = (di_json *)m;
        if (key_is(m, "const")) {
            arr = js_mk(c, DI_JSON_ARRAY);
            if (!arr) return 0;
            arr->items = (di_json *)m, arr->count = 1;
        }
        if (arr->type != DI_JSON_ARRAY) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "enum must be an array%s", "");
        o = js_mk_obj(c, 1);
        if (!o) return 0;
        js_set_member(o, 0, "\0so-exclude", 11, arr);
        return js_add_alt1(c, g, o, NULL);
    }
    if (key_is(m, "required")) {
        if (m->type != DI_JSON_ARRAY) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "required must be an array%s", "");
        for (uint32_t i = 0; i < m->count; i++) {
            di_json *f = js_mk(c, DI_JSON_FALSE);
            di_json *props = js_mk_obj(c, 1);
            if (!f || !props) return 0;
            js_set_member(props, 0, m->items[i].str, m->items[i].str_len, f);
            di_json *alt = js_mk_obj(c, 2);
            if (!alt) return 0;
            js_set_member(alt, 0, "properties", 10, props);
            js_set_member(alt, 1, "type", 4, &js_mk_types(c, T_OBJ)->items[0]);
            if (!js_add_alt1(c, g, alt, NULL)) return 0;
        }
        return 1;
    }
    if (key_is(m, "properties")) {
        if (m->type != DI_JSON_OBJECT) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "properties must be an object%s", "");
        for (uint32_t i = 0; i < m->count; i++) {
            const di_json *ps = &m->items[i];
            di_json *nn = js_wrap1(c, "not", ps);
            di_json *props = js_mk_obj(c, 1);
            di_json *req = js_mk(c, DI_JSON_ARRAY);
            di_json *ks = js_mk_str(c, ps->key, ps->key_len);
            if (!nn || !props || !req || !ks) return 0;
            js_set_member(props, 0, ps->key, ps->key_len, nn);
            req->items = ks, req->count = 1;
            di_json *alt = js_mk_obj(c, 3);
            if (!alt) return 0;
            js_set_member(alt, 0, "properties", 10, props);
            js_set_member(alt, 1, "required", 8, req);
            js_set_member(alt, 2, "type", 4, &js_mk_types(c, T_OBJ)->items[0]);
            if (!js_add_alt1(c, g, alt, NULL)) return 0;
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
        if (!js_add_alt1(c, g, js_mk_types(c, T_ALL & ~num[k].type), NULL)) return 0;
        const di_json *val = m;
        const char *kw = num[k].neg;
        if (num[k].delta) {
            int64_t x;
            if (!di_json_as_i64(m, &x)) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "%s must be an integer", num[k].kw);
            x += num[k].delta;
            if (x < 0) return 1;
            char *t = di_arena_alloc(&c->a, 32);
            di_json *nv = js_mk(c, DI_JSON_NUMBER);
            if (!t || !nv) return js_oom(c);
            snprintf(t, 32, "%lld", (long long)x);
            nv->str = t, nv->str_len = strlen(t), nv->i64 = x, nv->is_int = 1, nv->num = (double)x;
            val = nv;
        } else if (!strcmp(num[k].kw, "minimum") || !strcmp(num[k].kw, "maximum")) {
            /* draft-04: minimum with exclusiveMinimum: true */
            const di_json *ex = get(node, !strcmp(num[k].kw, "minimum") ? "exclusiveMinimum" : "exclusiveMaximum");
            if (ex && ex->type == DI_JSON_TRUE) kw = !strcmp(num[k].kw, "minimum") ? "maximum" : "minimum";
        }
        di_json *alt = js_mk_obj(c, 2);
        if (!alt) return 0;
        js_set_member(alt, 0, kw, kw[0] ? strlen(kw) : 14, val);
        js_set_member(alt, 1, "type", 4, &js_mk_types(c, num[k].type)->items[0]);
        return js_add_alt1(c, g, alt, NULL);
    }
    if (key_is(m, "multipleOf")) {
        /* not a multiple of an integer k: non-numbers, or numbers that are not */
        so_dec d;
        if (m->type != DI_JSON_NUMBER || !so_dec_parse(m->str, m->str_len, &d) || !so_dec_is_int(&d) || d.neg || d.e > 6)
            return js_unsupported(c, "'not' of multipleOf other than a positive integer");
        if (!js_add_alt1(c, g, js_mk_types(c, T_ALL & ~(T_NUM | T_INT)), NULL)) return 0;
        di_json *alt = js_mk_obj(c, 2);
        if (!alt) return 0;
        js_set_member(alt, 0, "\0so-notmult", 12, m);
        js_set_member(alt, 1, "type", 4, &js_mk_types(c, T_NUM)->items[0]);
        return js_add_alt1(c, g, alt, NULL);
    }
    if (key_is(m, "anyOf")) {
        if (m->type != DI_JSON_ARRAY) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "anyOf must be an array%s", "");
        conj q = {0};
        for (uint32_t i = 0; i < m->count; i++) {
            di_json *nn = js_wrap1(c, "not", &m->items[i]);
            if (!nn) return 0;
            PUSH(c, q.m, q.n, (mem)nn);
        }
        PUSH(c, g->alts, g->n, q);
        return c->st == DEEPINFER_OK;
    }
    if (key_is(m, "allOf")) {
        if (m->type != DI_JSON_ARRAY) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "allOf must be an array%s", "");
        for (uint32_t i = 0; i < m->count; i++)
            if (!js_negate(c, &m->items[i], g, depth + 1)) return 0;
        return 1;
    }
    if (key_is(m, "not")) return js_add_alt1(c, g, m, NULL);
    if (key_is(m, "$ref")) {
        const di_json *t = js_resolve_ref(c, m);
        return t ? js_negate(c, t, g, depth + 1) : 0;
    }
    if (js_is_annotation(m) || key_is(m, "format") || key_is(m, "$defs") || key_is(m, "definitions")) {
        if (key_is(m, "format")) {
            const char *re;
            int ml;
            if (m->type == DI_JSON_STRING && so_format_regex(m->str, &re, &ml) != 0)
                return js_unsupported(c, "not with format");
        }
        return 1;
    }
    char what[96];
    snprintf(what, sizeof what, "'not' of keyword '%.40s'", m->key);
    return js_unsupported(c, what);
}

int js_negate(ctx *c, const di_json *n, group *g, int depth) {
    if (depth > 32) return js_failf(c, DEEPINFER_ERR_LIMIT, "negation nested too deeply%s", "");
    if (n->type == DI_JSON_TRUE) return 1;
    if (n->type == DI_JSON_FALSE) return js_add_alt1(c, g, js_mk(c, DI_JSON_TRUE), NULL);
    if (n->type != DI_JSON_OBJECT) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "a schema must be an object or boolean%s", "");
    if (get(n, "$ref") && c->draft <= 7) {
        const di_json *t = js_resolve_ref(c, get(n, "$ref"));
        return t ? js_negate(c, t, g, depth + 1) : 0;
    }
    for (uint32_t i = 0; i < n->count; i++)
        if (!js_negate_kw(c, n, &n->items[i], g, depth)) return 0;
    return 1;
}

/* ---- flatten ------------------------------------------------------------- */

