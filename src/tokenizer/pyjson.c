/* pyjson.c — Python-compatible JSON serialization (see pyjson.h). */
#include "tokenizer/pyjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void di_pyjson_string(di_sbuf *b, const char *s, size_t n) {
    di_sbuf_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", c);
            esc = u;
        }
        if (esc) {
            di_sbuf_put(b, s + run, i - run);
            di_sbuf_puts(b, esc);
            run = i + 1;
        }
    }
    di_sbuf_put(b, s + run, n - run);
    di_sbuf_put(b, "\"", 1);
}

void di_pyjson_float(di_sbuf *b, double x) {
    if (isnan(x)) {
        di_sbuf_puts(b, "NaN");
        return;
    }
    if (isinf(x)) {
        di_sbuf_puts(b, x < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (x == 0) {
        di_sbuf_puts(b, signbit(x) ? "-0.0" : "0.0");
        return;
    }
    /* Shortest digits that round-trip (what Python's repr picks). */
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    /* e = [-]d[.ddd]e[+-]XX */
    const char *s = e;
    int neg = 0;
    if (*s == '-') {
        neg = 1;
        s++;
    }
    char digits[24];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    int exp10 = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--; /* %.*e never pads here, but be safe */
    int decpt = exp10 + 1;                         /* value = 0.DIGITS × 10^decpt */
    if (neg) di_sbuf_put(b, "-", 1);
    if (decpt <= -4 || decpt > 16) {
        di_sbuf_put(b, digits, 1);
        if (nd > 1) {
            di_sbuf_put(b, ".", 1);
            di_sbuf_put(b, digits + 1, (size_t)nd - 1);
        }
        di_sbuf_printf(b, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        di_sbuf_puts(b, "0.");
        for (int i = 0; i < -decpt; i++) di_sbuf_put(b, "0", 1);
        di_sbuf_put(b, digits, (size_t)nd);
    } else if (decpt < nd) {
        di_sbuf_put(b, digits, (size_t)decpt);
        di_sbuf_put(b, ".", 1);
        di_sbuf_put(b, digits + decpt, (size_t)(nd - decpt));
    } else {
        di_sbuf_put(b, digits, (size_t)nd);
        for (int i = nd; i < decpt; i++) di_sbuf_put(b, "0", 1);
        di_sbuf_puts(b, ".0");
    }
}

static void dump_number(di_sbuf *b, const di_json *v) {
    const char *t = v->str;
    int is_float = strpbrk(t, ".eE") != NULL;
    if (!is_float) {
        if (!strcmp(t, "-0")) di_sbuf_put(b, "0", 1);
        else di_sbuf_puts(b, t);
        return;
    }
    di_pyjson_float(b, v->num);
}

void di_pyjson_members(const di_json *obj, di_pyjson_member_fn fn, void *ctx) {
    for (uint32_t i = 0; i < obj->count; i++) {
        const di_json *m = &obj->items[i];
        int seen = 0;
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = obj->items[j].key_len == m->key_len && !memcmp(obj->items[j].key, m->key, m->key_len);
        if (seen) continue;
        const di_json *last = m;
        for (uint32_t j = i + 1; j < obj->count; j++)
            if (obj->items[j].key_len == m->key_len && !memcmp(obj->items[j].key, m->key, m->key_len))
                last = &obj->items[j];
        fn(ctx, m, last);
    }
}

typedef struct dump_ctx {
    di_sbuf *b;
    int first;
} dump_ctx;

static void dump_member(void *vctx, const di_json *key, const di_json *value) {
    dump_ctx *c = vctx;
    if (!c->first) di_sbuf_put(c->b, ", ", 2);
    c->first = 0;
    di_pyjson_string(c->b, key->key, key->key_len);
    di_sbuf_put(c->b, ": ", 2);
    di_pyjson_dump(c->b, value);
}

void di_pyjson_dump(di_sbuf *b, const di_json *v) {
    switch (v->type) {
    case DI_JSON_NULL: di_sbuf_puts(b, "null"); break;
    case DI_JSON_TRUE: di_sbuf_puts(b, "true"); break;
    case DI_JSON_FALSE: di_sbuf_puts(b, "false"); break;
    case DI_JSON_NUMBER: dump_number(b, v); break;
    case DI_JSON_STRING: di_pyjson_string(b, v->str, v->str_len); break;
    case DI_JSON_ARRAY:
        di_sbuf_put(b, "[", 1);
        for (uint32_t i = 0; i < v->count; i++) {
            if (i) di_sbuf_put(b, ", ", 2);
            di_pyjson_dump(b, &v->items[i]);
        }
        di_sbuf_put(b, "]", 1);
        break;
    case DI_JSON_OBJECT: {
        di_sbuf_put(b, "{", 1);
        dump_ctx c = {b, 1};
        di_pyjson_members(v, dump_member, &c);
        di_sbuf_put(b, "}", 1);
        break;
    }
    }
}
