/*
 * json_write.h — serialise a parsed JSON value: compact, or exactly as
 * Python's json.dumps(v, ensure_ascii=False) writes it (separators ", " and
 * ": "; MaskBench feeds instances in that form). Numbers keep their source
 * text.
 */
#ifndef DI_STRUCTURED_JSON_WRITE_H
#define DI_STRUCTURED_JSON_WRITE_H

#include <stddef.h>

#include "io/json.h"

typedef struct so_buf {
    char *p;
    size_t n, cap;
} so_buf;

typedef enum so_json_style { SO_JSON_COMPACT = 0, SO_JSON_PYTHON = 1 } so_json_style;

/* Append bytes; 0 on out-of-memory. */
int so_buf_put(so_buf *b, const void *s, size_t n);
int so_buf_puts(so_buf *b, const char *s);

/* Append the canonical JSON string literal for bytes s[0..n) (quotes included). */
int so_json_write_string(so_buf *b, const char *s, size_t n);

/* Append value v; 0 on out-of-memory (or nesting deeper than 512). */
int so_json_write(so_buf *b, const di_json *v, so_json_style style);

#endif
