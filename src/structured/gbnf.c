/*
 * gbnf.c — GBNF (llama.cpp / XGrammar EBNF) → grammar IR.
 *
 *   root ::= "{" ws pair ("," ws pair)* "}"     entry rule `root`
 *   "literal" with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH, [a-z] [^...] classes,
 *   `.` any character, ( groups ), * + ? {m} {m,} {m,n} {,n}, # comments.
 * Token references (<[id]>, <name>) are rejected: they name tokens, not text.
 * Each literal and class becomes one lexeme; rules stay context-free.
 */
#include "structured/gbnf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "structured/regex.h"

#define GBNF_MAX_DEPTH 100

typedef struct gp {
    const char *s;
    size_t len, i;
    so_gb *b;
    di_error *err;
    deepinfer_status st;
    /* rule names */
    char **names;
    size_t *name_len;
    int32_t *name_nt;
    uint8_t *defined;
    size_t *first_use;
    uint32_t nnames, namecap;
    int depth;
} gp;

static int gfail(gp *p, size_t at, const char *msg) {
    if (p->st == DEEPINFER_OK) {
        int line = 1, col = 1;
        for (size_t k = 0; k < at && k < p->len; k++) {
            if (p->s[k] == '\n') line++, col = 1;
            else col++;
        }
        p->st = di_error_set(p->err, DEEPINFER_ERR_INVALID_ARGUMENT, "gbnf: line %d, column %d: %s", line, col, msg);
    }
    return 0;
}

static void skip_ws(gp *p) {
    while (p->i < p->len) {
        char c = p->s[p->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->i++;
        else if (c == '#') {
            while (p->i < p->len && p->s[p->i] != '\n') p->i++;
        } else break;
    }
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static int32_t rule_nt(gp *p, const char *name, size_t n, size_t at) {
    for (uint32_t k = 0; k < p->nnames; k++)
        if (p->name_len[k] == n && !memcmp(p->names[k], name, n)) return p->name_nt[k];
    if (p->nnames == p->namecap) {
        uint32_t nc = p->namecap ? p->namecap * 2 : 32;
        char **a = realloc(p->names, nc * sizeof *a);
        if (a) p->names = a;
        size_t *l = realloc(p->name_len, nc * sizeof *l);
        if (l) p->name_len = l;
        int32_t *t = realloc(p->name_nt, nc * sizeof *t);
        if (t) p->name_nt = t;
        uint8_t *d = realloc(p->defined, nc);
        if (d) p->defined = d;
        size_t *f = realloc(p->first_use, nc * sizeof *f);
        if (f) p->first_use = f;
        if (!a || !l || !t || !d || !f) return gfail(p, at, "out of memory"), -1;
        p->namecap = nc;
    }
    p->names[p->nnames] = (char *)name;
    p->name_len[p->nnames] = n;
    p->name_nt[p->nnames] = so_gb_nt(p->b);
    p->defined[p->nnames] = 0;
    p->first_use[p->nnames] = at;
    return p->name_nt[p->nnames++];
}

static int hexv(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One (possibly escaped) character of a literal or class; -1 on error. */
static int32_t read_char(gp *p) {
    size_t at = p->i;
    if (p->i >= p->len) return gfail(p, at, "unexpected end of input"), -1;
    unsigned char c = (unsigned char)p->s[p->i];
    if (c != '\\') {
        int32_t u = so_utf8_decode((const uint8_t *)p->s, p->len, &p->i);
        if (u < 0) return gfail(p, at, "invalid UTF-8"), -1;
        return u;
    }
    p->i++;
    if (p->i >= p->len) return gfail(p, at, "trailing backslash"), -1;
    char e = p->s[p->i++];
    int nhex = 0;
    switch (e) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '0': return 0;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': return e;
    case 'x': nhex = 2; break;
    case 'u': nhex = 4; break;
    case 'U': nhex = 8; break;
    default: return gfail(p, at, "unknown escape"), -1;
    }
    uint32_t v = 0;
    for (int k = 0; k < nhex; k++) {
        int h = p->i < p->len ? hexv(p->s[p->i]) : -1;
        if (h < 0) return gfail(p, at, "bad hex escape"), -1;
        v = v * 16 + (uint32_t)h, p->i++;
    }
    if (v > 0x10FFFF) return gfail(p, at, "code point out of range"), -1;
    return (int32_t)v;
}

/* The regex of an R-spec terminal, or NULL. */
static const char *term_regex(gp *p, int32_t sym, size_t *len) {
    if (!SO_IS_T(sym)) return NULL;
    const so_gb_lexdef *l = &p->b->lex[SO_T_IDX(sym)];
    if (l->spec[0] != 'R' || l->cmax >= 0 || l->cmin > 0) return NULL;
    const char *colon = memchr(l->spec, ':', l->spec_len);
    if (!colon) return NULL;
    *len = l->spec_len - (size_t)(colon + 1 - l->spec);
    return colon + 1;
}

/* Regular parts become one lexeme (fewer parser steps, cacheable masks):
 * a repeated terminal, and a sequence of terminals. Bounded in size so the
 * DFA stays small; otherwise the caller keeps the rules. */
static int32_t merge_rep(gp *p, int32_t sym, long mn, long mx) {
    size_t l;
    const char *re = term_regex(p, sym, &l);
    if (!re || l > 2000 || mn > 200 || mx > 200) return INT32_MIN;
    char *buf = malloc(l + 48);
    if (!buf) return INT32_MIN;
    int n;
    if (mx < 0) n = snprintf(buf, l + 48, "(?:%.*s){%ld,}", (int)l, re, mn);
    else n = snprintf(buf, l + 48, "(?:%.*s){%ld,%ld}", (int)l, re, mn, mx);
    int32_t r = n > 0 ? so_gb_regex(p->b, buf) : INT32_MIN;
    free(buf);
    return r;
}

static int32_t parse_alts(gp *p, int32_t lhs);

/* Parse one item; returns its symbol, or INT32_MIN for an empty literal, or
 * INT32_MIN+1 on error. */
static int32_t parse_item(gp *p) {
    size_t at = p->i;
    char c = p->s[p->i];
    if (c == '"') {
        p->i++;
        char buf[4096];
        size_t n = 0;
        char *big = NULL;
        size_t bigcap = 0;
        while (p->i < p->len && p->s[p->i] != '"') {
            int32_t u = read_char(p);
            if (u < 0) {
                free(big);
                return INT32_MIN + 1;
            }
            uint8_t enc[4];
            int l = so_utf8_encode((uint32_t)u, enc);
            if (n + 4 > sizeof buf && !big) {
                bigcap = 2 * sizeof buf;
                big = malloc(bigcap);
                if (!big) return gfail(p, at, "out of memory"), INT32_MIN + 1;
                memcpy(big, buf, n);
            }
            if (big && n + 4 > bigcap) {
                char *nb = realloc(big, bigcap * 2);
                if (!nb) {
                    free(big);
                    return gfail(p, at, "out of memory"), INT32_MIN + 1;
                }
                big = nb, bigcap *= 2;
            }
            memcpy((big ? big : buf) + n, enc, (size_t)l);
            n += (size_t)l;
        }
        if (p->i >= p->len) {
            free(big);
            return gfail(p, at, "unterminated string literal"), INT32_MIN + 1;
        }
        p->i++;
        if (!n) {
            free(big);
            return INT32_MIN;
        }
        int32_t s = so_gb_literal(p->b, big ? big : buf, n);
        free(big);
        return s;
    }
    if (c == '[') {
        p->i++;
        int neg = 0;
        if (p->i < p->len && p->s[p->i] == '^') neg = 1, p->i++;
        size_t cap = 256, n = 0;
        char *re = malloc(cap);
        if (!re) return gfail(p, at, "out of memory"), INT32_MIN + 1;
        re[n++] = '[';
        if (neg) re[n++] = '^';
        int empty = 1;
        while (p->i < p->len && p->s[p->i] != ']') {
            int32_t lo = read_char(p), hi;
            if (lo < 0) {
                free(re);
                return INT32_MIN + 1;
            }
            hi = lo;
            if (p->i + 1 < p->len && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
                p->i++;
                hi = read_char(p);
                if (hi < 0) {
                    free(re);
                    return INT32_MIN + 1;
                }
                if (hi < lo) {
                    free(re);
                    return gfail(p, at, "character range out of order"), INT32_MIN + 1;
                }
            }
            if (n + 40 > cap) {
                cap *= 2;
                char *nr = realloc(re, cap);
                if (!nr) {
                    free(re);
                    return gfail(p, at, "out of memory"), INT32_MIN + 1;
                }
                re = nr;
            }
            n += (size_t)snprintf(re + n, cap - n, "\\u{%X}-\\u{%X}", (unsigned)lo, (unsigned)hi);
            empty = 0;
        }
        if (p->i >= p->len) {
            free(re);
            return gfail(p, at, "unterminated character class"), INT32_MIN + 1;
        }
        p->i++;
        if (empty && !neg) {
            free(re);
            return gfail(p, at, "empty character class"), INT32_MIN + 1;
        }
        if (empty) n = (size_t)snprintf(re, cap, "[\\u{0}-\\u{10FFFF}]");
        else re[n++] = ']', re[n] = 0;
        int32_t s = so_gb_regex(p->b, re);
        free(re);
        return s;
    }
    if (c == '.') {
        p->i++;
        return so_gb_regex(p->b, "[\\u{0}-\\u{10FFFF}]");
    }
    if (c == '(') {
        p->i++;
        if (++p->depth > GBNF_MAX_DEPTH) return gfail(p, at, "groups nested too deeply"), INT32_MIN + 1;
        int32_t nt = so_gb_nt(p->b);
        if (parse_alts(p, nt) < 0) return INT32_MIN + 1;
        p->depth--;
        skip_ws(p);
        if (p->i >= p->len || p->s[p->i] != ')') return gfail(p, at, "unbalanced parenthesis"), INT32_MIN + 1;
        p->i++;
        return nt;
    }
    if (c == '<') return gfail(p, at, "token references <...> are not supported"), INT32_MIN + 1;
    if (is_name_char(c)) {
        size_t st = p->i;
        while (p->i < p->len && is_name_char(p->s[p->i])) p->i++;
        int32_t nt = rule_nt(p, p->s + st, p->i - st, st);
        return nt < 0 ? INT32_MIN + 1 : nt;
    }
    gfail(p, at, "expected a literal, class, rule name or group");
    return INT32_MIN + 1;
}

static int read_uint(gp *p, long *v) {
    size_t st = p->i;
    *v = 0;
    while (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        *v = *v * 10 + (p->s[p->i++] - '0');
        if (*v > 100000000) *v = 100000000;
    }
    return p->i > st;
}

/* Is the text at p->i the start of a new rule (name ::=)? */
static int at_rule_start(gp *p) {
    size_t j = p->i;
    while (j < p->len && is_name_char(p->s[j])) j++;
    if (j == p->i) return 0;
    while (j < p->len && (p->s[j] == ' ' || p->s[j] == '\t' || p->s[j] == '\n' || p->s[j] == '\r')) j++;
    return j + 3 <= p->len && !memcmp(p->s + j, "::=", 3);
}

static int32_t parse_seq(gp *p, int32_t lhs) {
    int32_t syms[256];
    uint32_t n = 0;
    int32_t *big = NULL;
    uint32_t bigcap = 0;
    for (;;) {
        skip_ws(p);
        if (p->i >= p->len) break;
        char c = p->s[p->i];
        if (c == '|' || c == ')') break;
        if (at_rule_start(p)) break;
        size_t at = p->i;
        int32_t s = parse_item(p);
        if (s == INT32_MIN + 1) {
            free(big);
            return -1;
        }
        for (;;) {
            if (p->i >= p->len) break;
            char q = p->s[p->i];
            long mn, mx;
            if (q == '*') mn = 0, mx = -1, p->i++;
            else if (q == '+') mn = 1, mx = -1, p->i++;
            else if (q == '?') mn = 0, mx = 1, p->i++;
            else if (q == '{') {
                size_t qat = p->i;
                p->i++;
                int hm = read_uint(p, &mn);
                if (!hm) mn = 0;
                if (p->i < p->len && p->s[p->i] == '}') {
                    if (!hm) return free(big), gfail(p, qat, "bad repetition"), -1;
                    mx = mn, p->i++;
                } else if (p->i < p->len && p->s[p->i] == ',') {
                    p->i++;
                    if (!read_uint(p, &mx)) mx = -1;
                    if (p->i >= p->len || p->s[p->i] != '}') return free(big), gfail(p, qat, "bad repetition"), -1;
                    p->i++;
                } else {
                    return free(big), gfail(p, qat, "bad repetition"), -1;
                }
                if (mx >= 0 && mn > mx) return free(big), gfail(p, qat, "repetition {m,n} with m > n"), -1;
                if (mn > 10000 || mx > 10000) return free(big), gfail(p, qat, "repetition count above 10000"), -1;
            } else break;
            if (s == INT32_MIN) continue; /* ""* is still empty */
            int32_t merged = merge_rep(p, s, mn, mx);
            s = merged != INT32_MIN ? merged : so_gb_repeat(p->b, s, (int32_t)mn, (int32_t)mx, SO_NOSEP);
        }
        (void)at;
        if (s == INT32_MIN) continue;
        if (n < 256 && !big) {
            syms[n++] = s;
        } else {
            if (!big) {
                bigcap = 512;
                big = malloc(bigcap * sizeof *big);
                if (!big) return gfail(p, at, "out of memory"), -1;
                memcpy(big, syms, n * sizeof *big);
            } else if (n == bigcap) {
                bigcap *= 2;
                int32_t *nb = realloc(big, bigcap * sizeof *nb);
                if (!nb) return free(big), gfail(p, at, "out of memory"), -1;
                big = nb;
            }
            big[n++] = s;
        }
    }
    int32_t *seq = big ? big : syms;
    /* merge runs of adjacent terminals into one lexeme */
    uint32_t w = 0;
    for (uint32_t i = 0; i < n;) {
        size_t l0;
        uint32_t j = i;
        size_t total = 0;
        while (j < n && term_regex(p, seq[j], &l0) && total + l0 < 4000) total += l0 + 6, j++;
        if (j - i >= 2) {
            char *buf = malloc(total + 1);
            if (buf) {
                size_t o = 0;
                for (uint32_t k = i; k < j; k++) {
                    size_t lk;
                    const char *rk = term_regex(p, seq[k], &lk);
                    memcpy(buf + o, "(?:", 3), o += 3;
                    memcpy(buf + o, rk, lk), o += lk;
                    buf[o++] = ')';
                }
                buf[o] = 0;
                seq[w++] = so_gb_regex(p->b, buf);
                free(buf);
                i = j;
                continue;
            }
        }
        seq[w++] = seq[i++];
    }
    so_gb_prod(p->b, lhs, seq, w);
    free(big);
    return 0;
}

static int32_t parse_alts(gp *p, int32_t lhs) {
    for (;;) {
        if (parse_seq(p, lhs) < 0) return -1;
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == '|') {
            p->i++;
            continue;
        }
        return 0;
    }
}

deepinfer_status so_gbnf_build(const char *text, size_t len, so_gb *b, int32_t *root, di_error *err) {
    gp p = {.s = text, .len = len, .b = b, .err = err, .st = DEEPINFER_OK};
    int32_t root_nt = -1;
    for (;;) {
        skip_ws(&p);
        if (p.i >= p.len) break;
        size_t at = p.i;
        if (!is_name_char(p.s[p.i])) {
            gfail(&p, at, "expected a rule name");
            break;
        }
        while (p.i < p.len && is_name_char(p.s[p.i])) p.i++;
        size_t nl = p.i - at;
        skip_ws(&p);
        if (p.i + 3 > p.len || memcmp(p.s + p.i, "::=", 3)) {
            gfail(&p, p.i, "expected '::='");
            break;
        }
        p.i += 3;
        int32_t nt = rule_nt(&p, p.s + at, nl, at);
        if (nt < 0) break;
        for (uint32_t k = 0; k < p.nnames; k++)
            if (p.name_nt[k] == nt) {
                if (p.defined[k]) gfail(&p, at, "rule defined twice");
                p.defined[k] = 1;
            }
        if (p.st != DEEPINFER_OK) break;
        if (nl == 4 && !memcmp(p.s + at, "root", 4)) root_nt = nt;
        if (parse_alts(&p, nt) < 0) break;
        skip_ws(&p);
        if (p.i < p.len && p.s[p.i] == ')') {
            gfail(&p, p.i, "unbalanced parenthesis");
            break;
        }
    }
    if (p.st == DEEPINFER_OK) {
        for (uint32_t k = 0; k < p.nnames; k++)
            if (!p.defined[k]) {
                char msg[160];
                snprintf(msg, sizeof msg, "undefined rule '%.*s'", (int)(p.name_len[k] > 80 ? 80 : p.name_len[k]),
                         p.names[k]);
                gfail(&p, p.first_use[k], msg);
                break;
            }
    }
    if (p.st == DEEPINFER_OK && root_nt < 0) p.st = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "gbnf: no 'root' rule");
    if (p.st == DEEPINFER_OK && b->failed) p.st = di_error_set(err, b->fail_code, "gbnf: %s", b->fail_msg);
    free(p.names), free(p.name_len), free(p.name_nt), free(p.defined), free(p.first_use);
    if (p.st == DEEPINFER_OK) *root = root_nt;
    return p.st;
}
