/*
 * json_numbers.c — decimal comparison and bounded-number regexes.
 *
 * A non-negative decimal y is written I(.F)? with I without leading zeros.
 * For a bound a = A.Fa (A integer digits, Fa fraction digits, no trailing
 * zeros):  y > a  iff  I > A, or I = A and 0.F > 0.Fa.  Each comparison is
 * a digit-by-digit alternation ("same prefix, then a larger digit, then
 * anything"), so the regexes stay linear in the number of digits. Bounds
 * on both sides are an intersection of two lexeme specs.
 */
#include "structured/json_numbers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXDIG 400

int so_dec_parse(const char *s, size_t n, so_dec *o) {
    memset(o, 0, sizeof *o);
    size_t i = 0;
    if (i < n && s[i] == '-') o->neg = 1, i++;
    char digs[2 * MAXDIG + 8];
    int nd = 0, point = -1;
    long exp = 0;
    int seen = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') {
            seen = 1;
            if (nd >= 2 * MAXDIG) return 0;
            digs[nd++] = c;
        } else if (c == '.' && point < 0) {
            point = nd;
        } else if (c == 'e' || c == 'E') {
            i++;
            int eneg = 0;
            if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i] == '-', i++;
            if (i >= n) return 0;
            for (; i < n; i++) {
                if (s[i] < '0' || s[i] > '9') return 0;
                exp = exp * 10 + (s[i] - '0');
                if (exp > 100000) return 0;
            }
            if (eneg) exp = -exp;
            break;
        } else {
            return 0;
        }
    }
    if (!seen) return 0;
    if (point < 0) point = nd;
    /* value = 0.digs * 10^point * 10^exp ; strip leading zeros */
    int lead = 0;
    while (lead < nd && digs[lead] == '0') lead++;
    int end = nd;
    while (end > lead && digs[end - 1] == '0') end--;
    if (lead == end) {
        o->nd = 0, o->e = 0, o->neg = 0;
        return 1;
    }
    long e = (long)point - lead + exp;
    if (e > MAXDIG || e < -MAXDIG || end - lead > MAXDIG) return 0;
    o->nd = end - lead;
    memcpy(o->d, digs + lead, (size_t)o->nd);
    o->e = (int)e;
    return 1;
}

static int cmp_abs(const so_dec *a, const so_dec *b) {
    if (!a->nd || !b->nd) return (a->nd > 0) - (b->nd > 0);
    if (a->e != b->e) return a->e < b->e ? -1 : 1;
    int n = a->nd > b->nd ? a->nd : b->nd;
    for (int i = 0; i < n; i++) {
        char x = i < a->nd ? a->d[i] : '0', y = i < b->nd ? b->d[i] : '0';
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

int so_dec_cmp(const so_dec *a, const so_dec *b) {
    int sa = a->nd ? (a->neg ? -1 : 1) : 0, sb = b->nd ? (b->neg ? -1 : 1) : 0;
    if (sa != sb) return sa < sb ? -1 : 1;
    if (!sa) return 0;
    int c = cmp_abs(a, b);
    return sa < 0 ? -c : c;
}

int so_dec_is_int(const so_dec *a) { return !a->nd || a->e >= a->nd; }

/* integer and fraction digit strings of |a| */
static void split(const so_dec *a, char *I, char *F) {
    if (!a->nd) {
        strcpy(I, "0"), F[0] = 0;
        return;
    }
    if (a->e <= 0) {
        strcpy(I, "0");
        int z = -a->e;
        memset(F, '0', (size_t)z);
        memcpy(F + z, a->d, (size_t)a->nd);
        F[z + a->nd] = 0;
    } else if (a->e >= a->nd) {
        memcpy(I, a->d, (size_t)a->nd);
        memset(I + a->nd, '0', (size_t)(a->e - a->nd));
        I[a->e] = 0, F[0] = 0;
    } else {
        memcpy(I, a->d, (size_t)a->e);
        I[a->e] = 0;
        memcpy(F, a->d + a->e, (size_t)(a->nd - a->e));
        F[a->nd - a->e] = 0;
    }
}

static int put(so_buf *b, const char *s) { return so_buf_puts(b, s); }
static int putn(so_buf *b, const char *s, size_t n) { return so_buf_put(b, s, n); }

static int alt(so_buf *b, int *first) {
    int ok = *first ? 1 : put(b, "|");
    *first = 0;
    return ok;
}

static int digit_range(so_buf *b, char lo, char hi) {
    char t[8];
    if (lo == hi) snprintf(t, sizeof t, "%c", lo);
    else snprintf(t, sizeof t, "[%c-%c]", lo, hi);
    return put(b, t);
}

/* integers (no leading zeros) > A; appends alternatives; returns count */
static int igt(so_buf *b, const char *A, int *first) {
    int n = (int)strlen(A), cnt = 0;
    char t[64];
    if (!alt(b, first)) return -1;
    snprintf(t, sizeof t, "[1-9][0-9]{%d,}", n);
    put(b, t), cnt++;
    for (int i = 0; i < n; i++) {
        if (A[i] == '9') continue;
        if (!alt(b, first)) return -1;
        putn(b, A, (size_t)i);
        digit_range(b, (char)(A[i] + 1), '9');
        if (n - i - 1) snprintf(t, sizeof t, "[0-9]{%d}", n - i - 1), put(b, t);
        cnt++;
    }
    return cnt;
}

/* integers < B */
static int ilt(so_buf *b, const char *B, int *first) {
    int n = (int)strlen(B), cnt = 0;
    char t[64];
    if (!strcmp(B, "0")) return 0;
    if (!alt(b, first)) return -1;
    put(b, "0"), cnt++;
    if (n >= 2) {
        if (!alt(b, first)) return -1;
        snprintf(t, sizeof t, "[1-9][0-9]{0,%d}", n - 2);
        put(b, t), cnt++;
    }
    for (int i = 0; i < n; i++) {
        char lo = i == 0 ? '1' : '0';
        if (B[i] - 1 < lo) continue;
        if (!alt(b, first)) return -1;
        putn(b, B, (size_t)i);
        digit_range(b, lo, (char)(B[i] - 1));
        if (n - i - 1) snprintf(t, sizeof t, "[0-9]{%d}", n - i - 1), put(b, t);
        cnt++;
    }
    return cnt;
}

/* fraction digit strings (>= 1 digit) with 0.x > 0.F */
static void fgt(so_buf *b, const char *F, int *first) {
    int n = (int)strlen(F);
    for (int i = 0; i < n; i++) {
        if (F[i] == '9') continue;
        alt(b, first);
        putn(b, F, (size_t)i);
        digit_range(b, (char)(F[i] + 1), '9');
        put(b, "[0-9]*");
    }
    alt(b, first);
    putn(b, F, (size_t)n);
    put(b, "0*[1-9][0-9]*");
}

/* fraction digit strings (>= 1 digit) with 0.x < 0.G (G nonzero) */
static void flt(so_buf *b, const char *G, int *first) {
    int n = (int)strlen(G);
    for (int i = 0; i < n; i++) {
        if (G[i] > '0') {
            alt(b, first);
            putn(b, G, (size_t)i);
            digit_range(b, '0', (char)(G[i] - 1));
            put(b, "[0-9]*");
        }
        if (i >= 1) { /* proper prefix of G padded with zeros */
            alt(b, first);
            putn(b, G, (size_t)i);
            put(b, "0*");
        }
    }
}

/* Regexes over non-negative plain decimals. kind: 0 '>' , 1 '>=', 2 '<', 3 '<=' */
static int bound_regex(so_buf *b, const so_dec *a, int kind) {
    char I[MAXDIG + 2], F[2 * MAXDIG + 2];
    split(a, I, F);
    int first = 1;
    put(b, "(");
    if (kind <= 1) {
        put(b, "(");
        igt(b, I, &first);
        put(b, ")(\\.[0-9]+)?|");
        put(b, I);
        put(b, "\\.(");
        first = 1;
        fgt(b, F, &first);
        put(b, ")");
    } else {
        int any = 0;
        put(b, "(");
        if (ilt(b, I, &first) > 0) any = 1;
        put(b, ")");
        if (any) put(b, "(\\.[0-9]+)?");
        else {
            /* ilt empty: replace the empty group by an impossible match */
            b->n -= 2;
            b->p[b->n] = 0;
            put(b, "[^\\s\\S]");
        }
        if (F[0]) {
            put(b, "|");
            put(b, I);
            put(b, "(\\.(");
            first = 1;
            put(b, "0+|");
            flt(b, F, &first);
            put(b, "))?");
        }
    }
    if (kind == 1 || kind == 3) {
        put(b, "|");
        put(b, I);
        if (F[0]) put(b, "\\."), put(b, F), put(b, "0*");
        else put(b, "(\\.0+)?");
    }
    return put(b, ")");
}

int so_number_eq_regex(so_buf *b, const so_dec *a) {
    char I[MAXDIG + 2], F[2 * MAXDIG + 2];
    split(a, I, F);
    if (a->neg && a->nd) put(b, "-");
    put(b, I);
    if (F[0]) put(b, "\\."), put(b, F), put(b, "0*");
    else put(b, "(\\.0+)?");
    return 1;
}

static void spec_leaf(so_buf *out, so_buf *re) {
    char h[32];
    snprintf(h, sizeof h, "R%zu:", re->n);
    put(out, h);
    putn(out, re->p, re->n);
}

/* spec for "sign + y" with y > 0 / y >= 0 bounded by (l, lk) and (u, uk) (either may be NULL) */
static int half_spec(so_buf *out, const char *sign, int positive_strict, const so_dec *l, int lk, const so_dec *u,
                     int uk, int integer) {
    so_buf base = {0}, r1 = {0}, r2 = {0};
    put(&base, sign);
    if (positive_strict)
        put(&base, integer ? "[1-9][0-9]*(\\.0)?" : "([1-9][0-9]*(\\.[0-9]+)?|0\\.[0-9]*[1-9][0-9]*)");
    else put(&base, integer ? "(0|[1-9][0-9]*)(\\.0)?" : "(0|[1-9][0-9]*)(\\.[0-9]+)?");
    int n = 0;
    if (l) put(&r1, sign), bound_regex(&r1, l, lk), n++;
    if (u) put(&r2, sign), bound_regex(&r2, u, uk), n++;
    for (int k = 0; k < n; k++) put(out, "&");
    spec_leaf(out, &base);
    if (l) spec_leaf(out, &r1);
    if (u) spec_leaf(out, &r2);
    free(base.p), free(r1.p), free(r2.p);
    return 1;
}

int so_number_range_spec(so_buf *out, const so_dec *lo, int lo_excl, const so_dec *hi, int hi_excl, int integer) {
    so_dec zero = {0};
    if (lo && hi) {
        int c = so_dec_cmp(lo, hi);
        if (c > 0 || (c == 0 && (lo_excl || hi_excl))) return 0;
    }
    /* non-negative part: 0 <= x */
    int want_pos = !hi || so_dec_cmp(hi, &zero) > 0 || (so_dec_cmp(hi, &zero) == 0 && !hi_excl);
    /* negative part: x < 0 */
    int want_neg = !lo || so_dec_cmp(lo, &zero) < 0;
    so_buf pos = {0}, neg = {0};
    if (want_pos) {
        const so_dec *l = NULL;
        int lk = 1;
        if (lo && so_dec_cmp(lo, &zero) >= 0) {
            l = lo, lk = lo_excl ? 0 : 1;
            if (so_dec_cmp(lo, &zero) == 0 && !lo_excl) l = NULL;
        }
        const so_dec *u = NULL;
        int uk = 3;
        if (hi) u = hi, uk = hi_excl ? 2 : 3;
        half_spec(&pos, "", 0, l, lk, u, uk, integer);
    }
    if (want_neg) {
        /* x = -y, y > 0: lo <= x  <=> y <= -lo ; x <= hi <=> y >= -hi */
        so_dec nl, nh;
        const so_dec *u = NULL, *l = NULL;
        int uk = 3, lk = 1;
        if (lo) nl = *lo, nl.neg = 0, u = &nl, uk = lo_excl ? 2 : 3;
        if (hi && so_dec_cmp(hi, &zero) < 0) nh = *hi, nh.neg = 0, l = &nh, lk = hi_excl ? 0 : 1;
        half_spec(&neg, "-", 1, l, lk, u, uk, integer);
    }
    if (pos.n && neg.n) put(out, "|");
    if (pos.n) putn(out, pos.p, pos.n);
    if (neg.n) putn(out, neg.p, neg.n);
    free(pos.p), free(neg.p);
    return out->n > 0;
}
