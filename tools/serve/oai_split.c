/* oai_split.c — reasoning / content / tool-call split of generated text (oai_split.h). */
#include "serve/oai_split.h"

#include <string.h>

static const char END_THINK[] = "</think>";

void oai_split_init(oai_split *s, int thinking, int tools) {
    memset(s, 0, sizeof *s);
    s->in_reasoning = thinking;
    s->tools = tools;
    s->dsml_at = -1;
}

static const char *find(const char *p, const char *end, const char *needle, size_t n) {
    for (; (size_t)(end - p) >= n; p++)
        if (*p == needle[0] && !memcmp(p, needle, n)) return p;
    return NULL;
}

/* Bytes at the end of s[0..n) that are a proper prefix of `mark` (could still become it). */
static size_t held(const char *s, size_t n, const char *mark) {
    size_t m = strlen(mark);
    for (size_t k = m - 1 < n ? m - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, mark, k)) return k;
    return 0;
}

void oai_split_step(oai_split *s, const char *text, size_t n, int final, oai_span *reasoning, oai_span *content,
                    dsml_call **calls, int *n_calls) {
    *reasoning = (oai_span){s->pos, 0};
    *content = (oai_span){s->pos, 0};
    *calls = NULL;
    *n_calls = 0;
    if (s->in_reasoning) {
        const char *e = find(text + s->pos, text + n, END_THINK, sizeof END_THINK - 1);
        if (!e) {
            size_t keep = final ? 0 : held(text + s->pos, n - s->pos, END_THINK);
            reasoning->len = n - keep - s->pos;
            s->pos = n - keep;
            return;
        }
        reasoning->len = (size_t)(e - text) - s->pos;
        s->pos = (size_t)(e - text) + sizeof END_THINK - 1;
        s->in_reasoning = 0;
    }
    content->off = s->pos;
    if (s->tools && s->dsml_at < 0) {
        long at = dsml_find(text + s->pos, n - s->pos);
        if (at >= 0) {
            s->dsml_at = (long)s->pos + at;
        } else {
            /* hold back what could still become the block's opening tag */
            size_t keep = 0;
            if (!final) {
                const char *lt = NULL;
                for (const char *p = text + s->pos; (p = memchr(p, '<', (size_t)(text + n - p))); p++) lt = p;
                /* from the last '<': a prefix of "<｜DSML｜tool_calls>" or "<｜DSML｜ calls>" */
                if (lt && (size_t)(text + n - lt) < 32) {
                    static const char *const opens[] = {DSML_MARK "tool_calls>", DSML_MARK " calls>"};
                    for (int i = 0; i < 2; i++) {
                        size_t k = (size_t)(text + n - lt);
                        if (k < strlen(opens[i]) && !memcmp(lt, opens[i], k)) keep = k;
                    }
                }
            }
            content->len = n - keep - s->pos;
            s->pos = n - keep;
            return;
        }
    }
    if (s->dsml_at >= 0) {
        content->len = (size_t)s->dsml_at - s->pos;
        s->pos = (size_t)s->dsml_at;
        if (!final) return;
        int nc = dsml_parse(text + s->dsml_at, n - (size_t)s->dsml_at, calls);
        if (nc > 0) {
            *n_calls = nc;
            s->pos = n;
            return;
        }
        /* not a well-formed block: it is content after all */
        if (content->len == 0) content->off = (size_t)s->dsml_at;
        content->len += n - (size_t)s->dsml_at;
        s->pos = n;
        s->dsml_at = -1;
        s->tools = 0;
        return;
    }
    content->len = n - s->pos;
    s->pos = n;
}
