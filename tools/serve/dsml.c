/* dsml.c — DSML tool-call blocks -> {name, arguments JSON} (dsml.h). */
#include "serve/dsml.h"

#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tokenizer/pyjson.h"

static const char *const CALLS_TAGS[] = {"tool_calls", " calls"};
static const char *const INVOKE_TAGS[] = {"invoke", " invoke"};
static const char *const PARAM_TAGS[] = {"parameter", " parameter"};

typedef struct cur {
    const char *p, *end;
} cur;

static int lit(cur *c, const char *s) {
    size_t n = strlen(s);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n)) return 0;
    c->p += n;
    return 1;
}

static void ws(cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
}

/* "<｜DSML｜" (or "</｜DSML｜" for end_tag) + one of the tag names, + ">" when gt. */
static int tag(cur *c, int end_tag, const char *const names[2], int gt) {
    cur t = *c;
    if (end_tag && !lit(&t, "</")) return 0;
    if (!end_tag && !lit(&t, "<")) return 0;
    if (!lit(&t, &DSML_MARK[1])) return 0; /* the mark without its "<" */
    int ok = 0;
    for (int i = 0; i < 2 && !ok; i++) ok = lit(&t, names[i]); /* either dialect */
    if (!ok || (gt && !lit(&t, ">"))) return 0;
    *c = t;
    return 1;
}

/* name="VALUE": VALUE is up to the next quote (the encoder writes names verbatim). */
static int attr(cur *c, const char *name, const char **v, size_t *n) {
    ws(c);
    if (!lit(c, name) || !lit(c, "=\"")) return 0;
    const char *q = memchr(c->p, '"', (size_t)(c->end - c->p));
    if (!q) return 0;
    *v = c->p, *n = (size_t)(q - c->p);
    c->p = q + 1;
    return 1;
}

static const char *find(const char *p, const char *end, const char *needle) {
    size_t n = strlen(needle);
    for (; (size_t)(end - p) >= n; p++)
        if (*p == needle[0] && !memcmp(p, needle, n)) return p;
    return NULL;
}

long dsml_find(const char *s, size_t n) {
    const char *end = s + n;
    for (const char *p = s; (p = find(p, end, DSML_MARK)); p++) {
        cur c = {p, end};
        if (tag(&c, 0, CALLS_TAGS, 1)) return (long)(p - s);
    }
    return -1;
}

/* One parameter's value into the arguments object. */
static void put_value(di_sbuf *b, const char *v, size_t n, int is_string) {
    if (!is_string) {
        di_json_doc *doc = NULL;
        if (di_json_parse(v, n, NULL, &doc, NULL) == DEEPINFER_OK) {
            di_pyjson_dump(b, doc->root);
            di_json_free(doc);
            return;
        }
    }
    di_pyjson_string(b, v, n);
}

static int parse_invoke(cur *c, dsml_call *call) {
    const char *name;
    size_t name_n;
    if (!tag(c, 0, INVOKE_TAGS, 0) || !attr(c, "name", &name, &name_n) || !lit(c, ">")) return -1;
    di_sbuf args = {0};
    di_sbuf_puts(&args, "{");
    int first = 1;
    for (;;) {
        ws(c);
        if (tag(c, 1, INVOKE_TAGS, 1)) break;
        const char *k, *sv;
        size_t kn, svn;
        if (!tag(c, 0, PARAM_TAGS, 0) || !attr(c, "name", &k, &kn) || !attr(c, "string", &sv, &svn) || !lit(c, ">"))
            goto bad;
        /* the value runs to the closing parameter tag */
        const char *v = c->p, *close = NULL;
        for (const char *p = v; (p = find(p, c->end, "</" "\xef\xbd\x9c" "DSML\xef\xbd\x9c")); p++) {
            cur t = {p, c->end};
            if (tag(&t, 1, PARAM_TAGS, 1)) {
                close = p;
                c->p = t.p;
                break;
            }
        }
        if (!close) goto bad;
        if (!first) di_sbuf_puts(&args, ", ");
        first = 0;
        di_pyjson_string(&args, k, kn);
        di_sbuf_puts(&args, ": ");
        put_value(&args, v, (size_t)(close - v), svn == 4 && !memcmp(sv, "true", 4));
    }
    di_sbuf_puts(&args, "}");
    if (args.oom || !(call->name = malloc(name_n + 1))) goto bad;
    memcpy(call->name, name, name_n);
    call->name[name_n] = 0;
    call->arguments = di_sbuf_take(&args, NULL);
    return call->arguments ? 0 : -1;
bad:
    di_sbuf_free(&args);
    return -1;
}

int dsml_parse(const char *s, size_t n, dsml_call **calls) {
    *calls = NULL;
    cur c = {s, s + n};
    if (!tag(&c, 0, CALLS_TAGS, 1)) return -1;
    dsml_call *v = NULL;
    int nc = 0;
    for (;;) {
        ws(&c);
        if (tag(&c, 1, CALLS_TAGS, 1)) break;
        dsml_call *grown = realloc(v, sizeof *v * (size_t)(nc + 1));
        if (!grown) goto bad;
        v = grown;
        memset(&v[nc], 0, sizeof v[nc]);
        nc++;
        if (parse_invoke(&c, &v[nc - 1])) goto bad;
    }
    ws(&c);
    if (nc == 0 || c.p != c.end) goto bad;
    *calls = v;
    return nc;
bad:
    dsml_free(v, nc);
    return -1;
}

void dsml_free(dsml_call *calls, int n) {
    for (int i = 0; calls && i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
    }
    free(calls);
}
