/* gen_sink.c — write each finished request at once, report every write error (gen_sink.h). */
#include "gen_sink.h"

#include <errno.h>
#include <string.h>

#include "gen_io.h"

int gen_sink_open(gen_sink *s, const char *path, size_t n_total) {
    memset(s, 0, sizeof *s);
    s->n_total = n_total;
    s->jsonl = path != NULL;
    if (!path || !strcmp(path, "-")) {
        s->f = stdout;
        snprintf(s->name, sizeof s->name, "standard output");
        return 0;
    }
    snprintf(s->name, sizeof s->name, "%s", path);
    if (!(s->f = fopen(path, "w"))) {
        fprintf(stderr, "deepinfer generate: cannot open --output %s: %s\n", path, strerror(errno));
        return -1;
    }
    s->own = 1;
    return 0;
}

static int fail(gen_sink *s, int err) {
    if (!s->failed)
        fprintf(stderr, "deepinfer generate: writing %s failed: %s\n", s->name, strerror(err ? err : EIO));
    s->failed = 1;
    return -1;
}

static void print_text(FILE *f, size_t i, size_t n, const deepinfer_request_output *o) {
    for (size_t j = 0; j < o->n_choices; j++) {
        const deepinfer_completion *c = &o->choices[j];
        if (n > 1 || o->n_choices > 1)
            fprintf(f, "--- request %zu, choice %zu (%s) ---\n", i, j, deepinfer_finish_reason_name(c->finish_reason));
        if (c->text_len || c->n_tokens == 0) fwrite(c->text, 1, c->text_len, f);
        else /* no tokenizer: the ids */
            for (size_t t = 0; t < c->n_tokens; t++) fprintf(f, "%s%d", t ? " " : "", c->token_ids[t]);
        fputc('\n', f);
    }
}

int gen_sink_write(gen_sink *s, size_t index, const deepinfer_request_output *o) {
    if (s->failed) return -1;
    errno = 0;
    if (s->jsonl) gen_write_output(s->f, index, o);
    else if (!o->status) print_text(s->f, index, s->n_total, o);
    if (ferror(s->f)) return fail(s, errno);
    if (fflush(s->f)) return fail(s, errno);
    return 0;
}

int gen_sink_close(gen_sink *s) {
    if (!s->f) return s->failed ? -1 : 0;
    int rc = s->failed ? -1 : 0;
    errno = 0;
    if (fflush(s->f) || ferror(s->f)) rc = fail(s, errno);
    if (s->own && fclose(s->f) && !s->failed) rc = fail(s, errno);
    s->f = NULL;
    return rc;
}
