/*
 * json_write.c — JSON serialisation (json_write.h).
 */
#include "structured/json_write.h"

#include <stdlib.h>
#include <string.h>

int so_buf_put(so_buf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) return 0;
        b->p = np, b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 1;
}

int so_buf_puts(so_buf *b, const char *s) { return so_buf_put(b, s, strlen(s)); }

int so_json_write_string(so_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    if (!so_buf_put(b, "\"", 1)) return 0;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[7];
        size_t el = 0;
        if (c == '"') memcpy(esc, "\\\"", 2), el = 2;
        else if (c == '\\') memcpy(esc, "\\\\", 2), el = 2;
        else if (c == '\n') memcpy(esc, "\\n", 2), el = 2;
        else if (c == '\r') memcpy(esc, "\\r", 2), el = 2;
        else if (c == '\t') memcpy(esc, "\\t", 2), el = 2;
        else if (c == '\b') memcpy(esc, "\\b", 2), el = 2;
        else if (c == '\f') memcpy(esc, "\\f", 2), el = 2;
        else if (c < 0x20) memcpy(esc, "\\u00", 4), esc[4] = hex[c >> 4], esc[5] = hex[c & 15], el = 6;
        if (!el) {
            run++;
            continue;
        }
        if (!so_buf_put(b, s + i - run, run) || !so_buf_put(b, esc, el)) return 0;
        run = 0;
    }
    if (!so_buf_put(b, s + n - run, run)) return 0;
    return so_buf_put(b, "\"", 1);
}

static int write_rec(so_buf *b, const di_json *v, so_json_style st, int depth) {
    if (depth > 512) return 0;
    switch (v->type) {
    case DI_JSON_NULL: return so_buf_puts(b, "null");
    case DI_JSON_TRUE: return so_buf_puts(b, "true");
    case DI_JSON_FALSE: return so_buf_puts(b, "false");
    case DI_JSON_NUMBER: return so_buf_put(b, v->str, v->str_len);
    case DI_JSON_STRING: return so_json_write_string(b, v->str, v->str_len);
    case DI_JSON_ARRAY:
        if (!so_buf_put(b, "[", 1)) return 0;
        for (uint32_t i = 0; i < v->count; i++) {
            if (i && !so_buf_puts(b, st == SO_JSON_PYTHON ? ", " : ",")) return 0;
            if (!write_rec(b, &v->items[i], st, depth + 1)) return 0;
        }
        return so_buf_put(b, "]", 1);
    case DI_JSON_OBJECT:
        if (!so_buf_put(b, "{", 1)) return 0;
        for (uint32_t i = 0; i < v->count; i++) {
            if (i && !so_buf_puts(b, st == SO_JSON_PYTHON ? ", " : ",")) return 0;
            if (!so_json_write_string(b, v->items[i].key, v->items[i].key_len)) return 0;
            if (!so_buf_puts(b, st == SO_JSON_PYTHON ? ": " : ":")) return 0;
            if (!write_rec(b, &v->items[i], st, depth + 1)) return 0;
        }
        return so_buf_put(b, "}", 1);
    }
    return 0;
}

int so_json_write(so_buf *b, const di_json *v, so_json_style style) { return write_rec(b, v, style, 0); }
