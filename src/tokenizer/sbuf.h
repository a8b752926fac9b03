/*
 * sbuf.h — a growable byte string for building prompts and JSON text.
 * Always NUL-terminated; `oom` is sticky so callers can append freely and
 * check once at the end.
 */
#ifndef DI_TOKENIZER_SBUF_H
#define DI_TOKENIZER_SBUF_H

#include <stddef.h>

typedef struct di_sbuf {
    char *p;
    size_t n, cap;
    int oom;
} di_sbuf;

void di_sbuf_put(di_sbuf *b, const char *s, size_t n);
void di_sbuf_puts(di_sbuf *b, const char *s);
void di_sbuf_printf(di_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the buffer to the caller (free() it); the sbuf is reset. */
char *di_sbuf_take(di_sbuf *b, size_t *len);
void di_sbuf_free(di_sbuf *b);

#endif
