/* sbuf.c — growable byte string (see sbuf.h). */
#include "tokenizer/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(di_sbuf *b, size_t extra) {
    if (b->oom) return -1;
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t nc = b->cap ? b->cap * 2 : 256;
    while (nc < b->n + extra + 1) nc *= 2;
    char *np = realloc(b->p, nc);
    if (!np) {
        b->oom = 1;
        return -1;
    }
    b->p = np;
    b->cap = nc;
    return 0;
}

void di_sbuf_put(di_sbuf *b, const char *s, size_t n) {
    if (reserve(b, n)) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void di_sbuf_puts(di_sbuf *b, const char *s) { di_sbuf_put(b, s, strlen(s)); }

void di_sbuf_printf(di_sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        di_sbuf_put(b, tmp, (size_t)n);
        return;
    }
    if (reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

char *di_sbuf_take(di_sbuf *b, size_t *len) {
    if (!b->p && !b->oom) reserve(b, 0);
    char *p = b->oom ? NULL : b->p;
    if (b->oom) free(b->p);
    if (len) *len = b->n;
    b->p = NULL;
    b->n = b->cap = 0;
    b->oom = 0;
    return p;
}

void di_sbuf_free(di_sbuf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    b->oom = 0;
}
