/*
 * eval_report.h — how `deepinfer eval` writes its results: a growable text
 * buffer with JSON helpers (the report is one JSON object), the engine
 * configuration block every report carries, and the output file rule.
 */
#ifndef DI_TOOLS_EVAL_REPORT_H
#define DI_TOOLS_EVAL_REPORT_H

#include <stddef.h>

typedef struct ev_buf {
    char *p;
    size_t n, cap;
    int oom;
} ev_buf;

void ev_printf(ev_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal of s[0..n) (control bytes, quotes, backslashes escaped). */
void ev_json_str(ev_buf *b, const char *s, size_t n);
/* A JSON number (finite doubles with 17 significant digits; others as null). */
void ev_json_num(ev_buf *b, double v);
void ev_buf_free(ev_buf *b);

/* The "config" member: "config": {"accelerator", "batch_invariant", "model", "commit", "path", ...}.
 * path: "model-forward" (scoring) or "engine" (generation). */
typedef struct ev_config {
    const char *accelerator;
    int batch_invariant;
    const char *model_dir;
    const char *path;
    const char *extra;        /* more members, already JSON ("\"window\": 512"), or NULL */
} ev_config;
void ev_json_config(ev_buf *b, const ev_config *c);

/* Write the JSON (plus a newline) to `path`, or to stdout when path is NULL. 0 on success. */
int ev_write_json(const ev_buf *b, const char *path);

#endif
