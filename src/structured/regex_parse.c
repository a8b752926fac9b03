/*
 * regex_parse.c — regex text → code-point AST (see regex.h for the syntax).
 *
 * Recursive descent with a depth limit; every error carries the byte offset.
 * Character classes are kept as sorted, merged code-point range lists.
 */
#include "structured/regex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RX_MAX_DEPTH 200
#define CP_MAX 0x10FFFFu

int32_t so_utf8_decode(const uint8_t *s, size_t len, size_t *i) {
    size_t p = *i;
    if (p >= len) return -1;
    uint32_t c = s[p];
    int n;
    uint32_t min;
    if (c < 0x80) {
        *i = p + 1;
        return (int32_t)c;
    } else if ((c & 0xE0) == 0xC0) {
        n = 1, c &= 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 2, c &= 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 3, c &= 0x07, min = 0x10000;
    } else {
        return -1;
    }
    for (int k = 1; k <= n; k++) {
        if (p + (size_t)k >= len) return -1;
        uint8_t b = s[p + (size_t)k];
        if ((b & 0xC0) != 0x80) return -1;
        c = (c << 6) | (b & 0x3F);
    }
    if (c < min || c > CP_MAX || (c >= 0xD800 && c <= 0xDFFF)) return -1;
    *i = p + 1 + (size_t)n;
    return (int32_t)c;
}

int so_utf8_encode(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- range sets ---------------------------------------------------------- */

typedef struct rset {
    uint32_t *r; /* lo,hi pairs */
    uint32_t n, cap;
    int oom;
} rset;

static void rs_add(rset *s, uint32_t lo, uint32_t hi) {
    if (s->oom || lo > hi) return;
    if (s->n + 1 > s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 8;
        uint32_t *nr = realloc(s->r, (size_t)nc * 2 * sizeof(uint32_t));
        if (!nr) {
            s->oom = 1;
            return;
        }
        s->r = nr, s->cap = nc;
    }
    s->r[2 * s->n] = lo, s->r[2 * s->n + 1] = hi;
    s->n++;
}

static int cmp_pair(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void rs_norm(rset *s) {
    if (s->n < 2) return;
    qsort(s->r, s->n, 2 * sizeof(uint32_t), cmp_pair);
    uint32_t w = 0;
    for (uint32_t i = 1; i < s->n; i++) {
        if (s->r[2 * i] <= s->r[2 * w + 1] + 1) {
            if (s->r[2 * i + 1] > s->r[2 * w + 1]) s->r[2 * w + 1] = s->r[2 * i + 1];
        } else {
            w++;
            s->r[2 * w] = s->r[2 * i], s->r[2 * w + 1] = s->r[2 * i + 1];
        }
    }
    s->n = w + 1;
}

static void rs_negate(rset *s) {
    rs_norm(s);
    rset o = {0};
    uint32_t next = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->r[2 * i] > next) rs_add(&o, next, s->r[2 * i] - 1);
        next = s->r[2 * i + 1] + 1;
    }
    if (next <= CP_MAX) rs_add(&o, next, CP_MAX);
    free(s->r);
    *s = o;
}

/* ---- AST constructors ---------------------------------------------------- */

static so_rx *node(di_arena *a, so_rx_kind k) {
    so_rx *n = di_arena_calloc(a, 1, sizeof *n);
    if (n) n->kind = k;
    return n;
}

so_rx *so_rx_new_class(di_arena *a, const uint32_t *ranges, uint32_t nranges) {
    so_rx *n = node(a, SO_RX_CLASS);
    if (!n) return NULL;
    n->ranges = di_arena_alloc(a, (size_t)nranges * 2 * sizeof(uint32_t) + 1);
    if (!n->ranges) return NULL;
    if (nranges) memcpy(n->ranges, ranges, (size_t)nranges * 2 * sizeof(uint32_t));
    n->nranges = nranges;
    return n;
}

static so_rx *new_multi(di_arena *a, so_rx_kind k, so_rx **kids, uint32_t cnt) {
    so_rx *n = node(a, k);
    if (!n) return NULL;
    n->kids = di_arena_alloc(a, (size_t)cnt * sizeof(so_rx *) + 1);
    if (!n->kids) return NULL;
    for (uint32_t i = 0; i < cnt; i++) {
        if (!kids[i]) return NULL;
        n->kids[i] = kids[i];
    }
    n->nkids = cnt;
    return n;
}

so_rx *so_rx_new_cat(di_arena *a, so_rx **kids, uint32_t n) { return new_multi(a, SO_RX_CAT, kids, n); }
so_rx *so_rx_new_alt(di_arena *a, so_rx **kids, uint32_t n) { return new_multi(a, SO_RX_ALT, kids, n); }

so_rx *so_rx_new_rep(di_arena *a, so_rx *kid, int min, int max) {
    if (!kid) return NULL;
    so_rx *n = new_multi(a, SO_RX_REP, &kid, 1);
    if (n) n->min = min, n->max = max;
    return n;
}

static so_rx *single(di_arena *a, uint32_t cp) {
    uint32_t r[2] = {cp, cp};
    return so_rx_new_class(a, r, 1);
}

so_rx *so_rx_new_literal(di_arena *a, const char *s, size_t len) {
    so_rx **kids = di_arena_alloc(a, (len + 1) * sizeof(so_rx *));
    if (!kids) return NULL;
    uint32_t n = 0;
    size_t i = 0;
    while (i < len) {
        int32_t c = so_utf8_decode((const uint8_t *)s, len, &i);
        if (c < 0) c = 0xFFFD, i++;
        kids[n] = single(a, (uint32_t)c);
        if (!kids[n++]) return NULL;
    }
    return so_rx_new_cat(a, kids, n);
}

long so_rx_escape(const char *src, size_t len, char *dst, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        char buf[8];
        int n;
        if (strchr("\\^$.|?*+()[]{}/-", c) && c) {
            buf[0] = '\\', buf[1] = (char)c, n = 2;
        } else if (c < 0x20 || c == 0x7F) {
            n = snprintf(buf, sizeof buf, "\\x%02X", c);
        } else {
            buf[0] = (char)c, n = 1;
        }
        if (o + (size_t)n >= cap) return -1;
        memcpy(dst + o, buf, (size_t)n);
        o += (size_t)n;
    }
    if (o < cap) dst[o] = '\0';
    return (long)o;
}

/* ---- parser -------------------------------------------------------------- */

typedef struct rxp {
    di_arena *a;
    const uint8_t *s;
    size_t len, i;
    int depth;
    di_error *err;
    deepinfer_status st;
} rxp;

static so_rx *fail(rxp *p, size_t at, const char *what) {
    if (p->st == DEEPINFER_OK)
        p->st = di_error_set(p->err, DEEPINFER_ERR_INVALID_ARGUMENT, "regex: %s (at offset %zu)", what, at);
    return NULL;
}

static so_rx *oom(rxp *p) {
    if (p->st == DEEPINFER_OK) p->st = di_error_set(p->err, DEEPINFER_ERR_OUT_OF_MEMORY, "regex: out of memory");
    return NULL;
}

static int peek(rxp *p) { return p->i < p->len ? p->s[p->i] : -1; }

static so_rx *from_rset(rxp *p, rset *rs) {
    if (rs->oom) {
        free(rs->r);
        return oom(p);
    }
    rs_norm(rs);
    so_rx *n = so_rx_new_class(p->a, rs->r, rs->n);
    free(rs->r);
    return n ? n : oom(p);
}

static void add_digit(rset *s) { rs_add(s, '0', '9'); }
static void add_word(rset *s) {
    rs_add(s, '0', '9'), rs_add(s, 'A', 'Z'), rs_add(s, 'a', 'z'), rs_add(s, '_', '_');
}
static void add_space(rset *s) {
    rs_add(s, 0x09, 0x0D), rs_add(s, 0x20, 0x20), rs_add(s, 0xA0, 0xA0), rs_add(s, 0x1680, 0x1680);
    rs_add(s, 0x2000, 0x200A), rs_add(s, 0x2028, 0x2029), rs_add(s, 0x202F, 0x202F);
    rs_add(s, 0x205F, 0x205F), rs_add(s, 0x3000, 0x3000), rs_add(s, 0xFEFF, 0xFEFF);
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex(rxp *p, int n, uint32_t *out) {
    uint32_t v = 0;
    for (int k = 0; k < n; k++) {
        int h = p->i < p->len ? hexval(p->s[p->i]) : -1;
        if (h < 0) return 0;
        v = v * 16 + (uint32_t)h;
        p->i++;
    }
    *out = v;
    return 1;
}

/* Parse an escape after the backslash (p->i points past '\').
 * Returns 1 with a single code point in *cp, 2 with a class added to *cls,
 * 3 for an anchor in *cp ('^' or '$'), 0 on error (already reported). */
static int parse_escape(rxp *p, int in_class, uint32_t *cp, rset *cls) {
    size_t at = p->i - 1;
    int c = peek(p);
    if (c < 0) return fail(p, at, "trailing backslash"), 0;
    p->i++;
    switch (c) {
    case 'd': add_digit(cls); return 2;
    case 'w': add_word(cls); return 2;
    case 's': add_space(cls); return 2;
    case 'D': case 'W': case 'S': {
        rset t = {0};
        if (c == 'D') add_digit(&t);
        else if (c == 'W') add_word(&t);
        else add_space(&t);
        rs_negate(&t);
        for (uint32_t k = 0; k < t.n; k++) rs_add(cls, t.r[2 * k], t.r[2 * k + 1]);
        if (t.oom) cls->oom = 1;
        free(t.r);
        return 2;
    }
    case 'n': *cp = '\n'; return 1;
    case 'r': *cp = '\r'; return 1;
    case 't': *cp = '\t'; return 1;
    case 'f': *cp = '\f'; return 1;
    case 'v': *cp = '\v'; return 1;
    case 'a': *cp = 0x07; return 1;
    case 'e': *cp = 0x1B; return 1;
    case '0':
        if (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            return fail(p, at, "octal escapes are not supported"), 0;
        *cp = 0;
        return 1;
    case 'b':
        if (in_class) {
            *cp = 0x08;
            return 1;
        }
        return fail(p, at, "word boundary \\b is not supported"), 0;
    case 'B': return fail(p, at, "\\B is not supported"), 0;
    case 'A': if (!in_class) { *cp = '^'; return 3; } break;
    case 'z': case 'Z': if (!in_class) { *cp = '$'; return 3; } break;
    case 'c': {
        int l = peek(p);
        if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
            p->i++;
            *cp = (uint32_t)(l % 32);
            return 1;
        }
        return fail(p, at, "bad \\c escape"), 0;
    }
    case 'x': {
        if (peek(p) == '{') {
            p->i++;
            uint32_t v = 0;
            int nd = 0;
            while (p->i < p->len && hexval(p->s[p->i]) >= 0 && nd < 8) v = v * 16 + (uint32_t)hexval(p->s[p->i++]), nd++;
            if (!nd || peek(p) != '}' || v > CP_MAX) return fail(p, at, "bad \\x{...} escape"), 0;
            p->i++;
            *cp = v;
            return 1;
        }
        if (!read_hex(p, 2, cp)) return fail(p, at, "bad \\x escape (need two hex digits)"), 0;
        return 1;
    }
    case 'u': {
        if (peek(p) == '{') {
            p->i++;
            uint32_t v = 0;
            int nd = 0;
            while (p->i < p->len && hexval(p->s[p->i]) >= 0 && nd < 8) v = v * 16 + (uint32_t)hexval(p->s[p->i++]), nd++;
            if (!nd || peek(p) != '}' || v > CP_MAX) return fail(p, at, "bad \\u{...} escape"), 0;
            p->i++;
            *cp = v;
            return 1;
        }
        uint32_t v;
        if (!read_hex(p, 4, &v)) return fail(p, at, "bad \\u escape (need four hex digits)"), 0;
        if (v >= 0xD800 && v <= 0xDBFF && p->i + 6 <= p->len && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
            size_t save = p->i;
            p->i += 2;
            uint32_t lo;
            if (read_hex(p, 4, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                *cp = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                return 1;
            }
            p->i = save;
        }
        *cp = v;
        return 1;
    }
    case 'p': case 'P':
        return fail(p, at, "Unicode property classes \\p{...} are not supported"), 0;
    case 'k': return fail(p, at, "backreferences are not supported"), 0;
    default: break;
    }
    if (c >= '1' && c <= '9') return fail(p, at, "backreferences are not supported"), 0;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return fail(p, at, "unknown escape"), 0;
    if (c >= 0x80) { /* escaped non-ASCII: the character itself */
        p->i--;
        int32_t u = so_utf8_decode(p->s, p->len, &p->i);
        if (u < 0) return fail(p, at, "invalid UTF-8"), 0;
        *cp = (uint32_t)u;
        return 1;
    }
    *cp = (uint32_t)c;
    return 1;
}

static so_rx *parse_class(rxp *p) {
    size_t at = p->i; /* at '[' */
    p->i++;
    int neg = 0;
    if (peek(p) == '^') neg = 1, p->i++;
    rset rs = {0};
    int first = 1;
    for (;;) {
        int c = peek(p);
        if (c < 0) {
            free(rs.r);
            return fail(p, at, "unterminated character class");
        }
        if (c == ']' && !first) {
            p->i++;
            break;
        }
        if (c == ']' && first) { /* "[]" is the empty class in JS, "[]]" a literal in POSIX: use JS */
            p->i++;
            break;
        }
        first = 0;
        if (c == '[' && p->i + 1 < p->len && p->s[p->i + 1] == ':') {
            free(rs.r);
            return fail(p, p->i, "POSIX classes [:name:] are not supported");
        }
        uint32_t lo;
        size_t cat = p->i;
        int kind;
        if (c == '\\') {
            p->i++;
            kind = parse_escape(p, 1, &lo, &rs);
            if (!kind) {
                free(rs.r);
                return NULL;
            }
        } else {
            int32_t u = so_utf8_decode(p->s, p->len, &p->i);
            if (u < 0) {
                free(rs.r);
                return fail(p, cat, "invalid UTF-8");
            }
            lo = (uint32_t)u, kind = 1;
        }
        if (kind == 2) continue;
        /* range? */
        if (peek(p) == '-' && p->i + 1 < p->len && p->s[p->i + 1] != ']') {
            p->i++;
            uint32_t hi;
            int c2 = peek(p);
            size_t hat = p->i;
            int k2;
            rset tmp = {0};
            if (c2 == '\\') {
                p->i++;
                k2 = parse_escape(p, 1, &hi, &tmp);
                if (!k2) {
                    free(rs.r);
                    free(tmp.r);
                    return NULL;
                }
            } else {
                int32_t u = so_utf8_decode(p->s, p->len, &p->i);
                if (u < 0) {
                    free(rs.r);
                    return fail(p, hat, "invalid UTF-8");
                }
                hi = (uint32_t)u, k2 = 1;
            }
            if (k2 == 2) { /* [a-\d]: '-' is literal */
                rs_add(&rs, lo, lo), rs_add(&rs, '-', '-');
                for (uint32_t k = 0; k < tmp.n; k++) rs_add(&rs, tmp.r[2 * k], tmp.r[2 * k + 1]);
                free(tmp.r);
                continue;
            }
            free(tmp.r);
            if (hi < lo) {
                free(rs.r);
                return fail(p, cat, "character class range out of order");
            }
            rs_add(&rs, lo, hi);
        } else {
            rs_add(&rs, lo, lo);
        }
    }
    if (neg) rs_negate(&rs);
    so_rx *n = from_rset(p, &rs);
    if (n) n->pos = (uint32_t)at;
    return n;
}

static so_rx *parse_alt(rxp *p);

static int read_int(rxp *p, int *out) {
    size_t st = p->i;
    long v = 0;
    while (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        v = v * 10 + (p->s[p->i] - '0');
        if (v > 100000000) v = 100000000;
        p->i++;
    }
    *out = (int)v;
    return p->i > st;
}

static so_rx *parse_atom(rxp *p) {
    size_t at = p->i;
    int c = peek(p);
    if (c == '(') {
        p->i++;
        if (peek(p) == '?') {
            p->i++;
            int d = peek(p);
            if (d == ':') {
                p->i++;
            } else if (d == '=' || d == '!') {
                return fail(p, at, "lookahead is not supported");
            } else if (d == '<' && p->i + 1 < p->len && (p->s[p->i + 1] == '=' || p->s[p->i + 1] == '!')) {
                return fail(p, at, "lookbehind is not supported");
            } else if (d == '<' || d == '\'' || (d == 'P' && p->i + 1 < p->len && p->s[p->i + 1] == '<')) {
                if (d == 'P') p->i++;
                int close = d == '\'' ? '\'' : '>';
                p->i++;
                while (p->i < p->len && p->s[p->i] != close) p->i++;
                if (p->i >= p->len) return fail(p, at, "unterminated group name");
                p->i++;
            } else if (d == 'P' && p->i + 1 < p->len && p->s[p->i + 1] == '=') {
                return fail(p, at, "backreferences are not supported");
            } else {
                return fail(p, at, "inline flags and other (? groups are not supported");
            }
        }
        if (++p->depth > RX_MAX_DEPTH) return fail(p, at, "nesting too deep");
        so_rx *inner = parse_alt(p);
        p->depth--;
        if (!inner) return NULL;
        if (peek(p) != ')') return fail(p, at, "unbalanced parenthesis");
        p->i++;
        return inner;
    }
    if (c == '[') return parse_class(p);
    if (c == '.') {
        p->i++;
        uint32_t r[] = {0, 0x09, 0x0B, 0x0C, 0x0E, 0x2027, 0x202A, CP_MAX};
        so_rx *n = so_rx_new_class(p->a, r, 4);
        return n ? n : oom(p);
    }
    if (c == '^' || c == '$') {
        p->i++;
        so_rx *n = node(p->a, c == '^' ? SO_RX_BOL : SO_RX_EOL);
        if (!n) return oom(p);
        n->pos = (uint32_t)at;
        return n;
    }
    if (c == '\\') {
        p->i++;
        uint32_t cp = 0;
        rset rs = {0};
        int k = parse_escape(p, 0, &cp, &rs);
        if (!k) {
            free(rs.r);
            return NULL;
        }
        if (k == 2) return from_rset(p, &rs);
        free(rs.r);
        if (k == 3) {
            so_rx *n = node(p->a, cp == '^' ? SO_RX_BOL : SO_RX_EOL);
            if (!n) return oom(p);
            n->pos = (uint32_t)at;
            return n;
        }
        so_rx *n = single(p->a, cp);
        return n ? n : oom(p);
    }
    if (c == '*' || c == '+' || c == '?') return fail(p, at, "quantifier without anything to repeat");
    if (c == ')') return fail(p, at, "unbalanced parenthesis");
    int32_t u = so_utf8_decode(p->s, p->len, &p->i);
    if (u < 0) return fail(p, at, "invalid UTF-8");
    so_rx *n = single(p->a, (uint32_t)u);
    return n ? n : oom(p);
}

/* Try to read a {m}, {m,}, {m,n}, {,n} quantifier at p->i ('{'). Returns 1 and
 * sets min/max, or 0 (p->i unchanged) when it is a literal brace. */
static int read_brace(rxp *p, int *min, int *max) {
    size_t save = p->i;
    p->i++;
    int m = 0, n = -1;
    int have_m = read_int(p, &m);
    if (peek(p) == '}') {
        if (!have_m) goto literal;
        p->i++;
        *min = *max = m;
        return 1;
    }
    if (peek(p) != ',') goto literal;
    p->i++;
    if (read_int(p, &n)) {
    } else {
        n = -1;
    }
    if (peek(p) != '}' || (!have_m && n < 0)) goto literal;
    p->i++;
    *min = have_m ? m : 0;
    *max = n;
    return 1;
literal:
    p->i = save;
    return 0;
}

static so_rx *parse_cat(rxp *p) {
    so_rx **kids = NULL;
    uint32_t n = 0, cap = 0;
    for (;;) {
        int c = peek(p);
        if (c < 0 || c == '|' || c == ')') break;
        so_rx *atom;
        size_t at = p->i;
        if (c == '{') {
            int mn, mx;
            size_t save = p->i;
            if (read_brace(p, &mn, &mx)) {
                p->i = save;
                free(kids);
                return fail(p, at, "quantifier without anything to repeat");
            }
            p->i++;
            atom = single(p->a, '{');
            if (!atom) {
                free(kids);
                return oom(p);
            }
        } else {
            atom = parse_atom(p);
            if (!atom) {
                free(kids);
                return NULL;
            }
        }
        /* quantifiers (several may stack: a{2}{3}) */
        for (;;) {
            int q = peek(p);
            int mn, mx;
            size_t qat = p->i;
            if (q == '*') mn = 0, mx = -1, p->i++;
            else if (q == '+') mn = 1, mx = -1, p->i++;
            else if (q == '?') mn = 0, mx = 1, p->i++;
            else if (q == '{' && read_brace(p, &mn, &mx)) {
            } else break;
            if (mx >= 0 && mn > mx) {
                free(kids);
                return fail(p, qat, "repetition {m,n} with m > n");
            }
            if (mn > SO_RX_MAX_REPEAT || mx > SO_RX_MAX_REPEAT) {
                free(kids);
                return fail(p, qat, "repetition count above 1000");
            }
            if (atom->kind == SO_RX_BOL || atom->kind == SO_RX_EOL) {
                free(kids);
                return fail(p, qat, "quantifier on an anchor");
            }
            if (peek(p) == '?') p->i++; /* lazy: same language */
            else if (peek(p) == '+') {
                free(kids);
                return fail(p, p->i, "possessive quantifiers are not supported");
            }
            atom = so_rx_new_rep(p->a, atom, mn, mx);
            if (!atom) {
                free(kids);
                return oom(p);
            }
            atom->pos = (uint32_t)qat;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            so_rx **nk = realloc(kids, cap * sizeof *nk);
            if (!nk) {
                free(kids);
                return oom(p);
            }
            kids = nk;
        }
        kids[n++] = atom;
    }
    so_rx *r = n == 1 ? kids[0] : so_rx_new_cat(p->a, kids, n);
    free(kids);
    return r ? r : oom(p);
}

static so_rx *parse_alt(rxp *p) {
    so_rx *first = parse_cat(p);
    if (!first) return NULL;
    if (peek(p) != '|') return first;
    so_rx **kids = NULL;
    uint32_t n = 0, cap = 0;
    so_rx *cur = first;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            so_rx **nk = realloc(kids, cap * sizeof *nk);
            if (!nk) {
                free(kids);
                return oom(p);
            }
            kids = nk;
        }
        kids[n++] = cur;
        if (peek(p) != '|') break;
        p->i++;
        cur = parse_cat(p);
        if (!cur) {
            free(kids);
            return NULL;
        }
    }
    so_rx *r = so_rx_new_alt(p->a, kids, n);
    free(kids);
    return r ? r : oom(p);
}

/* ---- anchors ------------------------------------------------------------- */

/* Remove a leading (want = BOL) or trailing (EOL) anchor from `*np`.
 * Returns 1 if removed, 0 if none, -1 for a mix that cannot be expressed. */
static int strip_anchor(di_arena *a, so_rx **np, so_rx_kind want) {
    so_rx *n = *np;
    if (n->kind == want) {
        so_rx *e = so_rx_new_cat(a, NULL, 0);
        if (!e) return -2;
        *np = e;
        return 1;
    }
    if (n->kind == SO_RX_CAT && n->nkids) {
        uint32_t k = want == SO_RX_BOL ? 0 : n->nkids - 1;
        return strip_anchor(a, &n->kids[k], want);
    }
    if (n->kind == SO_RX_ALT) {
        int yes = 0, no = 0;
        for (uint32_t k = 0; k < n->nkids; k++) {
            int r = strip_anchor(a, &n->kids[k], want);
            if (r < 0) return r;
            if (r) yes++;
            else no++;
        }
        if (yes && no) return -1;
        return yes > 0;
    }
    return 0;
}

static so_rx *find_anchor(so_rx *n) {
    if (n->kind == SO_RX_BOL || n->kind == SO_RX_EOL) return n;
    for (uint32_t k = 0; k < n->nkids; k++) {
        so_rx *f = find_anchor(n->kids[k]);
        if (f) return f;
    }
    return NULL;
}

static deepinfer_status resolve_anchors(di_arena *a, so_rx **root, so_rx_mode mode, di_error *err) {
    so_rx *r = *root;
    so_rx **alts = r->kind == SO_RX_ALT ? r->kids : root;
    uint32_t nalts = r->kind == SO_RX_ALT ? r->nkids : 1;
    uint32_t anyr[] = {0, CP_MAX};
    for (uint32_t k = 0; k < nalts; k++) {
        int lead = strip_anchor(a, &alts[k], SO_RX_BOL);
        int trail = lead < 0 ? 0 : strip_anchor(a, &alts[k], SO_RX_EOL);
        if (lead == -2 || trail == -2) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "regex: out of memory");
        if (lead < 0 || trail < 0)
            return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                                "regex: anchors on only some branches of a group are not supported");
        if (mode == SO_RX_SEARCH && (!lead || !trail)) {
            so_rx *parts[3];
            uint32_t np = 0;
            if (!lead) parts[np++] = so_rx_new_rep(a, so_rx_new_class(a, anyr, 1), 0, -1);
            parts[np++] = alts[k];
            if (!trail) parts[np++] = so_rx_new_rep(a, so_rx_new_class(a, anyr, 1), 0, -1);
            so_rx *c = so_rx_new_cat(a, parts, np);
            if (!c) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "regex: out of memory");
            alts[k] = c;
        }
    }
    so_rx *f = find_anchor(*root);
    if (f)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "regex: anchor %s in the middle of a pattern is not supported (at offset %u)",
                            f->kind == SO_RX_BOL ? "^" : "$", f->pos);
    return DEEPINFER_OK;
}

deepinfer_status so_rx_parse(di_arena *a, const char *src, size_t len, so_rx_mode mode, so_rx **out,
                             di_error *err) {
    rxp p = {.a = a, .s = (const uint8_t *)src, .len = len, .err = err, .st = DEEPINFER_OK};
    so_rx *r = parse_alt(&p);
    if (!r) return p.st != DEEPINFER_OK ? p.st : di_error_set(err, DEEPINFER_ERR_INTERNAL, "regex: parse failed");
    if (p.i < p.len) return fail(&p, p.i, "unbalanced parenthesis"), p.st;
    deepinfer_status st = resolve_anchors(a, &r, mode, err);
    if (st != DEEPINFER_OK) return st;
    *out = r;
    return DEEPINFER_OK;
}
