/* eval_report.c — JSON text building and output for `deepinfer eval` (eval_report.h). */
#include "eval/eval_report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DI_GIT_COMMIT
#define DI_GIT_COMMIT "unknown" /* a build without the Makefile's define */
#endif

static int grow(ev_buf *b, size_t need) {
    if (b->oom) return -1;
    if (b->n + need + 1 <= b->cap) return 0;
    size_t nc = (b->cap ? b->cap * 2 : 1024);
    while (nc < b->n + need + 1) nc *= 2;
    char *np = realloc(b->p, nc);
    if (!np) {
        b->oom = 1;
        return -1;
    }
    b->p = np, b->cap = nc;
    return 0;
}

void ev_printf(ev_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0 || grow(b, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

void ev_json_str(ev_buf *b, const char *s, size_t n) {
    ev_printf(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') ev_printf(b, "\\\"");
        else if (c == '\\') ev_printf(b, "\\\\");
        else if (c == '\n') ev_printf(b, "\\n");
        else if (c == '\t') ev_printf(b, "\\t");
        else if (c < 0x20 || c == 0x7f) ev_printf(b, "\\u%04x", c);
        else if (!grow(b, 1)) b->p[b->n++] = (char)c, b->p[b->n] = 0;
    }
    ev_printf(b, "\"");
}

void ev_json_num(ev_buf *b, double v) {
    if (isfinite(v)) ev_printf(b, "%.17g", v);
    else ev_printf(b, "null");
}

void ev_buf_free(ev_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

void ev_json_config(ev_buf *b, const ev_config *c) {
    ev_printf(b, "\"config\": {\"accelerator\": ");
    ev_json_str(b, c->accelerator, strlen(c->accelerator));
    ev_printf(b, ", \"batch_invariant\": %s, \"model\": ", c->batch_invariant ? "true" : "false");
    ev_json_str(b, c->model_dir, strlen(c->model_dir));
    /* The commit the build recorded (Makefile: git describe --always --dirty; "unknown" without git). */
    ev_printf(b, ", \"commit\": ");
    ev_json_str(b, DI_GIT_COMMIT, strlen(DI_GIT_COMMIT));
    ev_printf(b, ", \"path\": ");
    ev_json_str(b, c->path, strlen(c->path));
    if (c->extra) ev_printf(b, ", %s", c->extra);
    ev_printf(b, "}");
}

int ev_write_json(const ev_buf *b, const char *path) {
    if (b->oom) {
        fprintf(stderr, "deepinfer eval: out of memory writing the report\n");
        return -1;
    }
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "deepinfer eval: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    int ok = fwrite(b->p, 1, b->n, f) == b->n && fputc('\n', f) != EOF;
    ok = (path ? fclose(f) == 0 : fflush(f) == 0) && ok;
    if (!ok) fprintf(stderr, "deepinfer eval: cannot write %s: %s\n", path ? path : "stdout", strerror(errno));
    return ok ? 0 : -1;
}
