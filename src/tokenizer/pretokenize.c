/*
 * pretokenize.c — the pre-tokenizer pipeline of a tokenizer.json:
 * a Sequence of Split(regex, behavior, invert) steps, then ByteLevel
 * (optional prefix space, optional GPT-2 regex split).
 *
 * Each step re-splits every piece the previous step produced, on that piece
 * alone (a lookahead never sees past the piece's end), exactly as HF's
 * PreTokenizedString::split does; empty pieces are dropped. The pipeline is
 * run depth-first so no piece list is ever materialised for the common
 * Isolated behavior.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

deepinfer_status di_match_scratch_init(di_match_scratch *s) {
    memset(s, 0, sizeof *s);
    s->md = pcre2_match_data_create(1, NULL);
    s->mctx = pcre2_match_context_create(NULL);
    s->jit_stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
    if (!s->md || !s->mctx || !s->jit_stack) {
        di_match_scratch_free(s);
        return DEEPINFER_ERR_OUT_OF_MEMORY;
    }
    pcre2_jit_stack_assign(s->mctx, NULL, s->jit_stack);
    return DEEPINFER_OK;
}

void di_match_scratch_free(di_match_scratch *s) {
    if (s->md) pcre2_match_data_free(s->md);
    if (s->mctx) pcre2_match_context_free(s->mctx);
    if (s->jit_stack) pcre2_jit_stack_free(s->jit_stack);
    for (int i = 0; i <= DI_MAX_SPLITS; i++) free(s->spans[i]);
    free(s->prefix_buf);
    memset(s, 0, sizeof *s);
}

/* Next match of re in s[0..len) at or after `from`. 1 found, 0 none, -1 error. */
static int find(const di_regex *re, di_match_scratch *ms, const uint8_t *s, size_t len, size_t from, size_t *ms_,
                size_t *me_) {
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK, ms->md, ms->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) return -1;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(ms->md);
    *ms_ = ov[0];
    *me_ = ov[1];
    return 1;
}

static size_t char_len(const uint8_t *s, size_t len, size_t at) {
    size_t k = 1;
    while (at + k < len && (s[at + k] & 0xC0) == 0x80) k++;
    return k;
}

static int run_level(const di_pretok *p, di_match_scratch *ms, int level, const uint8_t *s, size_t len, di_piece_fn fn,
                     void *ctx);

static int descend(const di_pretok *p, di_match_scratch *ms, int level, const uint8_t *s, size_t len, di_piece_fn fn,
                   void *ctx) {
    if (len == 0) return 0;
    return run_level(p, ms, level + 1, s, len, fn, ctx);
}

static int push_span(di_match_scratch *ms, int level, size_t *n, size_t a, size_t b, int m) {
    if (*n == ms->span_cap[level]) {
        size_t nc = ms->span_cap[level] ? ms->span_cap[level] * 2 : 64;
        di_span *np = realloc(ms->spans[level], nc * sizeof *np);
        if (!np) return -1;
        ms->spans[level] = np;
        ms->span_cap[level] = nc;
    }
    ms->spans[level][(*n)++] = (di_span){a, b, m};
    return 0;
}

static int run_level(const di_pretok *p, di_match_scratch *ms, int level, const uint8_t *s, size_t len, di_piece_fn fn,
                     void *ctx) {
    if (level == p->nsplits && p->add_prefix_space && s[0] != ' ') {
        /* ByteLevel's add_prefix_space: this piece gets a leading ' '. */
        if (len + 1 > ms->prefix_cap) {
            size_t nc = len + 64;
            uint8_t *nb = realloc(ms->prefix_buf, nc);
            if (!nb) return -1;
            ms->prefix_buf = nb;
            ms->prefix_cap = nc;
        }
        /* The buffer is only used at this level; deeper levels slice it. */
        uint8_t *b = ms->prefix_buf;
        b[0] = ' ';
        memcpy(b + 1, s, len);
        di_pretok q = *p;
        q.add_prefix_space = 0; /* do not prepend again below */
        return run_level(&q, ms, level, b, len + 1, fn, ctx);
    }
    if (level >= p->nsteps) return fn(ctx, s, len);

    const di_split_step *st = &p->steps[level];
    int r;
    if (st->behavior == DI_SPLIT_ISOLATED) {
        /* Matches and gaps both become pieces, in order (invert changes nothing). */
        size_t pos = 0, from = 0;
        for (;;) {
            size_t a, b;
            int f = from <= len ? find(&st->re, ms, s, len, from, &a, &b) : 0;
            if (f < 0) return -1;
            if (!f) break;
            if (a == b) { /* empty match: not a piece; move on one character */
                from = b < len ? b + char_len(s, len, b) : len + 1;
                continue;
            }
            if (a > pos && (r = descend(p, ms, level, s + pos, a - pos, fn, ctx))) return r;
            if ((r = descend(p, ms, level, s + a, b - a, fn, ctx))) return r;
            pos = from = b;
        }
        if (pos < len && (r = descend(p, ms, level, s + pos, len - pos, fn, ctx))) return r;
        return 0;
    }

    /* Other behaviors: build the (offsets, is_match) list as HF does, then
     * merge or drop according to the behavior. */
    size_t n = 0, pos = 0, from = 0;
    for (;;) {
        size_t a, b;
        int f = from <= len ? find(&st->re, ms, s, len, from, &a, &b) : 0;
        if (f < 0) return -1;
        if (!f) break;
        if (a > pos && push_span(ms, level, &n, pos, a, 0)) return -1;
        if (push_span(ms, level, &n, a, b, 1)) return -1;
        pos = b;
        from = a == b ? (b < len ? b + char_len(s, len, b) : len + 1) : b;
    }
    if (pos < len && push_span(ms, level, &n, pos, len, 0)) return -1;
    di_span *sp = ms->spans[level];
    if (st->invert)
        for (size_t i = 0; i < n; i++) sp[i].is_match = !sp[i].is_match;

    /* Merge in place; `out` marks kept spans with is_match = 2 for "remove". */
    size_t k = 0;
    int prev = 0;
    switch (st->behavior) {
    case DI_SPLIT_REMOVED:
        for (size_t i = 0; i < n; i++) sp[k++] = (di_span){sp[i].start, sp[i].end, sp[i].is_match ? 2 : 0};
        break;
    case DI_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            int m = sp[i].is_match;
            if (k && m == prev) sp[k - 1].end = sp[i].end;
            else sp[k++] = (di_span){sp[i].start, sp[i].end, 0};
            prev = m;
        }
        break;
    case DI_SPLIT_MERGED_WITH_PREVIOUS:
        for (size_t i = 0; i < n; i++) {
            int m = sp[i].is_match;
            if (k && m && !prev) sp[k - 1].end = sp[i].end;
            else sp[k++] = (di_span){sp[i].start, sp[i].end, 0};
            prev = m;
        }
        break;
    case DI_SPLIT_MERGED_WITH_NEXT: {
        /* Walk backwards, merging a match into the span after it. */
        size_t w = n;
        for (size_t i = n; i-- > 0;) {
            int m = sp[i].is_match;
            if (w < n && m && !prev) sp[w].start = sp[i].start;
            else sp[--w] = (di_span){sp[i].start, sp[i].end, 0};
            prev = m;
        }
        memmove(sp, sp + w, (n - w) * sizeof *sp);
        k = n - w;
        break;
    }
    default: return -1;
    }
    /* Descending may reuse deeper levels' lists but never this one. */
    for (size_t i = 0; i < k; i++) {
        di_span x = ms->spans[level][i];
        if (x.is_match == 2) continue;
        if ((r = descend(p, ms, level, s + x.start, x.end - x.start, fn, ctx))) return r;
    }
    return 0;
}

int di_pretok_run(const di_pretok *p, di_match_scratch *ms, const uint8_t *text, size_t len, di_piece_fn fn,
                  void *ctx) {
    if (len == 0) return 0;
    return run_level(p, ms, 0, text, len, fn, ctx);
}
