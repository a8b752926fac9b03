/*
 * json_schema_refs.c — $ref / $anchor resolution and JSON value helpers (equality,
 * types) for the JSON Schema front end.
 */
#include "structured/json_schema_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "structured/json_formats.h"
#include "structured/lexspec.h"

int js_hexd(int h) {
    if (h >= '0' && h <= '9') return h - '0';
    h |= 32;
    return h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
}

int js_pct_decode(const char *s, size_t n, char *out, size_t *on) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n) return 0;
            int v1 = js_hexd((unsigned char)s[i + 1]), v2 = js_hexd((unsigned char)s[i + 2]);
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

int js_count_anchor(const di_json *n, const char *key, const char *val, size_t vlen, int depth) {
    if (!n || depth > MAX_DEPTH) return 0;
    int cnt = 0;
    if (n->type == DI_JSON_OBJECT) {
        const di_json *a = get(n, key);
        if (a && a->type == DI_JSON_STRING && a->str_len == vlen && !memcmp(a->str, val, vlen)) cnt++;
    }
    if (n->type == DI_JSON_OBJECT || n->type == DI_JSON_ARRAY)
        for (uint32_t i = 0; i < n->count; i++) {
            if (n->type == DI_JSON_OBJECT && (key_is(&n->items[i], "enum") || key_is(&n->items[i], "const"))) continue;
            cnt += js_count_anchor(&n->items[i], key, val, vlen, depth + 1);
        }
    return cnt;
}

const di_json *js_find_anchor(const di_json *n, const char *key, const char *val, size_t vlen, int depth) {
    if (!n || depth > MAX_DEPTH) return NULL;
    if (n->type == DI_JSON_OBJECT) {
        const di_json *a = get(n, key);
        if (a && a->type == DI_JSON_STRING && a->str_len == vlen && !memcmp(a->str, val, vlen)) return n;
    }
    if (n->type == DI_JSON_OBJECT || n->type == DI_JSON_ARRAY) {
        for (uint32_t i = 0; i < n->count; i++) {
            if (n->type == DI_JSON_OBJECT && (key_is(&n->items[i], "enum") || key_is(&n->items[i], "const"))) continue;
            const di_json *r = js_find_anchor(&n->items[i], key, val, vlen, depth + 1);
            if (r) return r;
        }
    }
    return NULL;
}

const di_json *js_resolve_ref(ctx *c, const di_json *ref) {
    if (ref->type != DI_JSON_STRING) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "$ref must be a string%s", ""), NULL;
    const char *s = ref->str;
    size_t n = ref->str_len;
    const char *hash = memchr(s, '#', n);
    const di_json *base = c->root;
    if (hash != s) {
        /* "other.json#..." : look for a subschema whose $id is that */
        size_t idlen = hash ? (size_t)(hash - s) : n;
        base = js_find_anchor(c->root, "$id", s, idlen, 0);
        if (!base) base = js_find_anchor(c->root, "id", s, idlen, 0);
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
            return js_failf(c, DEEPINFER_ERR_UNSUPPORTED, "unsupported: $ref to a remote or unknown document '%s'", msg), NULL;
        }
        if (!hash) return base;
        n -= (size_t)(hash - s);
        s = hash;
    }
    s++, n--; /* skip '#' */
    if (n == 0) return base;
    char *buf = di_arena_alloc(&c->a, n + 1);
    size_t bn;
    if (!buf || !js_pct_decode(s, n, buf, &bn))
        return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "bad $ref '%s'", ref->str), NULL;
    if (buf[0] != '/') {
        if (js_count_anchor(c->root, "$anchor", buf, bn, 0) > 1)
            return js_failf(c, DEEPINFER_ERR_UNSUPPORTED, "unsupported: $anchor '%s' defined in several resources", ref->str), NULL;
        const di_json *a = js_find_anchor(base, "$anchor", buf, bn, 0);
        if (!a) a = js_find_anchor(base, "$id", ref->str, ref->str_len, 0);
        if (!a) {
            char tmp[210];
            snprintf(tmp, sizeof tmp, "#%.*s", (int)(bn > 200 ? 200 : bn), buf);
            a = js_find_anchor(base, "$id", tmp, strlen(tmp), 0);
            if (!a) a = js_find_anchor(base, "id", tmp, strlen(tmp), 0);
        }
        if (!a) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "$ref '%s' not found", ref->str), NULL;
        return a;
    }
    const di_json *cur = base;
    size_t i = 1;
    char tok[1024];
    while (cur) {
        size_t tl = 0;
        while (i < bn && buf[i] != '/') {
            if (tl >= sizeof tok - 1) return js_failf(c, DEEPINFER_ERR_LIMIT, "$ref path segment too long%s", ""), NULL;
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
    if (!cur) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "$ref '%s' not found", ref->str), NULL;
    return cur;
}

/* ---- values -------------------------------------------------------------- */

int js_json_equal(const di_json *a, const di_json *b, int depth) {
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
            if (!js_json_equal(&a->items[i], &b->items[i], depth + 1)) return 0;
        return 1;
    case DI_JSON_OBJECT:
        if (a->count != b->count) return 0;
        for (uint32_t i = 0; i < a->count; i++) {
            const di_json *bv = NULL;
            for (uint32_t k = 0; k < b->count; k++)
                if (b->items[k].key_len == a->items[i].key_len && !memcmp(b->items[k].key, a->items[i].key, a->items[i].key_len))
                    bv = &b->items[k];
            if (!bv || !js_json_equal(&a->items[i], bv, depth + 1)) return 0;
        }
        return 1;
    default: return 1;
    }
}

uint32_t js_value_type(const di_json *v) {
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

uint32_t js_parse_types(ctx *c, const di_json *t) {
    uint32_t r = 0;
    const di_json *one = t;
    uint32_t n = 1;
    if (t->type == DI_JSON_ARRAY) n = t->count;
    for (uint32_t i = 0; i < n; i++) {
        if (t->type == DI_JSON_ARRAY) one = &t->items[i];
        if (one->type != DI_JSON_STRING) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "type must be a string or array of strings%s", ""), 0;
        const char *s = one->str;
        if (!strcmp(s, "null")) r |= T_NULL;
        else if (!strcmp(s, "boolean")) r |= T_BOOL;
        else if (!strcmp(s, "integer")) r |= T_INT;
        else if (!strcmp(s, "number")) r |= T_NUM | T_INT;
        else if (!strcmp(s, "string")) r |= T_STR;
        else if (!strcmp(s, "array")) r |= T_ARR;
        else if (!strcmp(s, "object")) r |= T_OBJ;
        else return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "unknown type '%s'", s), 0;
    }
    return r;
}

/* ---- expansion of a conjunction ------------------------------------------ */

