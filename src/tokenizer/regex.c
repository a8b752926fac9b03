/*
 * regex.c — tokenizer.json regexes on PCRE2 (UTF + UCP + JIT).
 *
 * HF `tokenizers` runs these patterns with Oniguruma (Ruby syntax). PCRE2
 * agrees with it except for a few classes, which are rewritten here before
 * compiling so that both engines accept the same strings:
 *   \s \S   Oniguruma: Unicode White_Space. PCRE2's \s also takes U+180E.
 *           → \p{White_Space} / \P{White_Space}
 *   \w \W   Oniguruma: Letter | Mark | Number | Connector_Punctuation.
 *           → [\p{L}\p{M}\p{N}\p{Pc}] (and its complement)
 *   \b \B   word boundaries over that \w, spelled with lookarounds
 *   \h \H   Oniguruma: a hex digit (PCRE2: horizontal space) → [0-9A-Fa-f]
 *   ^ $     Ruby syntax anchors at line boundaries → PCRE2_MULTILINE
 * Constructs PCRE2 cannot express the same way (a negated \W or \H inside a
 * bracket class, Oniguruma's nested classes and && intersections) are
 * refused with an error instead of being matched differently.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/error.h"

#define WORD_CLASS "\\p{L}\\p{M}\\p{N}\\p{Pc}"

typedef struct rbuf {
    char *p;
    size_t n, cap;
} rbuf;

static int put(rbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = (b->cap ? b->cap * 2 : 256);
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) return -1;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}
#define PUTS(b, s) put((b), (s), strlen(s))

/* Rewrite an Oniguruma pattern to PCRE2. Returns 0, -1 on OOM, or 1 with
 * *why set for an unsupported construct. */
static int rewrite(const char *pat, size_t len, rbuf *out, const char **why) {
    int in_class = 0;
    size_t i = 0;
    while (i < len) {
        char c = pat[i];
        if (c == '\\') {
            if (i + 1 >= len) {
                *why = "the pattern ends with a lone backslash";
                return 1;
            }
            char e = pat[i + 1];
            const char *rep = NULL;
            switch (e) {
            case 's': rep = "\\p{White_Space}"; break;
            case 'S': rep = "\\P{White_Space}"; break;
            case 'w': rep = in_class ? WORD_CLASS : "[" WORD_CLASS "]"; break;
            case 'W':
                if (in_class) {
                    *why = "\\W inside a bracket class cannot be matched like Oniguruma; write the class out";
                    return 1;
                }
                rep = "[^" WORD_CLASS "]";
                break;
            case 'h': rep = in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]"; break;
            case 'H':
                if (in_class) {
                    *why = "\\H inside a bracket class cannot be matched like Oniguruma; write the class out";
                    return 1;
                }
                rep = "[^0-9A-Fa-f]";
                break;
            case 'b':
                if (!in_class)
                    rep = "(?:(?<=[" WORD_CLASS "])(?![" WORD_CLASS "])|(?<![" WORD_CLASS "])(?=[" WORD_CLASS "]))";
                break;
            case 'B':
                if (!in_class)
                    rep = "(?:(?<=[" WORD_CLASS "])(?=[" WORD_CLASS "])|(?<![" WORD_CLASS "])(?![" WORD_CLASS "]))";
                break;
            default: break;
            }
            if (rep) {
                if (PUTS(out, rep)) return -1;
            } else if (put(out, pat + i, 2)) {
                return -1;
            }
            i += 2;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            if (put(out, pat + i, 1)) return -1;
            i++;
            if (i < len && pat[i] == '^') {
                if (put(out, pat + i, 1)) return -1;
                i++;
            }
            if (i < len && pat[i] == ']') { /* a leading ']' is literal */
                if (PUTS(out, "\\]")) return -1;
                i++;
            }
            continue;
        }
        if (in_class) {
            if (c == ']') {
                in_class = 0;
            } else if (c == '[') {
                if (i + 1 < len && pat[i + 1] == ':') { /* POSIX class [:alpha:] */
                    const char *end = memchr(pat + i + 2, ']', len - i - 2);
                    if (!end) {
                        *why = "an unterminated POSIX class";
                        return 1;
                    }
                    size_t n = (size_t)(end - (pat + i)) + 1;
                    if (put(out, pat + i, n)) return -1;
                    i += n;
                    continue;
                }
                *why = "nested bracket classes (Oniguruma syntax) are not supported";
                return 1;
            } else if (c == '&' && i + 1 < len && pat[i + 1] == '&') {
                *why = "class intersection '&&' (Oniguruma syntax) is not supported";
                return 1;
            }
        }
        if (put(out, pat + i, 1)) return -1;
        i++;
    }
    if (in_class) {
        *why = "an unterminated bracket class";
        return 1;
    }
    return 0;
}

deepinfer_status di_regex_compile(di_regex *re, const char *pattern, size_t len, int literal, di_error *err) {
    memset(re, 0, sizeof *re);
    rbuf b = {0};
    uint32_t flags = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
    if (literal) {
        flags = PCRE2_UTF | PCRE2_LITERAL; /* LITERAL admits no UCP/MULTILINE */
        if (put(&b, pattern, len)) goto oom;
    } else {
        const char *why = NULL;
        int r = rewrite(pattern, len, &b, &why);
        if (r < 0) goto oom;
        if (r > 0) {
            free(b.p);
            return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "regex \"%.*s\": %s", (int)(len > 200 ? 200 : len),
                                pattern, why);
        }
    }
    int ec;
    PCRE2_SIZE off;
    re->code = pcre2_compile((PCRE2_SPTR)(b.p ? b.p : ""), b.n, flags, &ec, &off, NULL);
    if (!re->code) {
        char msg[256];
        pcre2_get_error_message(ec, (PCRE2_UCHAR *)msg, sizeof msg);
        di_error_set(err, DEEPINFER_ERR_FORMAT, "invalid regex \"%.*s\": %s (at offset %zu of the rewritten pattern \"%.*s\")",
                     (int)(len > 200 ? 200 : len), pattern, msg, (size_t)off, (int)(b.n > 300 ? 300 : b.n), b.p);
        free(b.p);
        return DEEPINFER_ERR_FORMAT;
    }
    free(b.p);
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
    return DEEPINFER_OK;
oom:
    free(b.p);
    return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory compiling a regex");
}

void di_regex_free(di_regex *re) {
    if (re->code) pcre2_code_free(re->code);
    re->code = NULL;
}
