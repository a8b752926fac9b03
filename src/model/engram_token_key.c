/*
 * engram_token_key.c — per-token keys of the Engram compressed token map
 * (architecture.md §5.8), reproducing HF `tokenizers`' decode and normalizer
 * semantics with ICU (see engram_token_key.h for the rules). ICU is loaded
 * at run time (util/icu_loader.h); the UTF-8/UTF-16 walking that ICU does with
 * header macros (U8_NEXT, U16_NEXT, ...) is done by the helpers below.
 */
#include "model/engram_token_key.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/icu_loader.h"

#define SENTINEL 0xE000 /* private-use char the reference uses to protect a lone space */

struct di_engram_keyer {
    const di_icu *icu;       /* the run-time loaded ICU functions */
    di_uset *age9;           /* characters assigned in Unicode <= 9.0 */
    di_unorm2 *nfkc9;        /* NFKC / NFD restricted to them: what unicode-normalization 0.1.12 does */
    di_unorm2 *nfd9;
    di_uchar *a, *b;         /* UTF-16 work buffers */
    int32_t cap;             /* of a and b, in UChars */
    char *out;               /* UTF-8 result */
    size_t out_cap;
    uint8_t *bytes;          /* decoded token bytes */
    size_t bytes_cap;
};

/* ---- UTF-8 / UTF-16 steps (ICU's utf8.h / utf16.h macros, as functions) ---- */

/* Next code point of UTF-16 s[*i..n), advancing *i; a lone surrogate is
 * returned as itself (U16_NEXT). */
static di_uchar32 u16_next(const di_uchar *s, int32_t *i, int32_t n) {
    di_uchar32 c = s[(*i)++];
    if ((c & 0xFC00) == 0xD800 && *i < n && (s[*i] & 0xFC00) == 0xDC00)
        c = (c << 10) + s[(*i)++] - ((0xD800 << 10) + 0xDC00 - 0x10000);
    return c;
}

/* Code point before s[*i] (not before s[start]), moving *i back (U16_PREV). */
static di_uchar32 u16_prev(const di_uchar *s, int32_t start, int32_t *i) {
    di_uchar32 c = s[--(*i)];
    if ((c & 0xFC00) == 0xDC00 && *i > start && (s[*i - 1] & 0xFC00) == 0xD800)
        c = ((di_uchar32)s[--(*i)] << 10) + c - ((0xD800 << 10) + 0xDC00 - 0x10000);
    return c;
}

/* Write c as UTF-16 at s; returns the number of units, 1 or 2 (U16_APPEND_UNSAFE). */
static int32_t u16_put(di_uchar *s, di_uchar32 c) {
    if (c <= 0xFFFF) {
        s[0] = (di_uchar)c;
        return 1;
    }
    s[0] = (di_uchar)((c >> 10) + 0xD7C0);
    s[1] = (di_uchar)((c & 0x3FF) | 0xDC00);
    return 2;
}

/* Next code point of UTF-8 s[*i..n), advancing *i; -1 for an ill-formed
 * sequence (overlong, surrogate, > U+10FFFF, truncated), as U8_NEXT. */
static di_uchar32 u8_next(const uint8_t *s, int32_t *i, int32_t n) {
    di_uchar32 c = s[(*i)++];
    if (c < 0x80) return c;
    int need;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        c &= 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        c &= 0x0F;
        if (c == 0x0) lo = 0xA0;
        if (c == 0xD) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        c &= 0x07;
        if (c == 0x0) lo = 0x90;
        if (c == 0x4) hi = 0x8F;
    } else {
        return -1;
    }
    for (int k = 0; k < need; k++, lo = 0x80, hi = 0xBF) {
        if (*i >= n || s[*i] < lo || s[*i] > hi) return -1;
        c = (c << 6) | (s[(*i)++] & 0x3F);
    }
    return c;
}

/* General_Category changes since Unicode 9.0 across the Mark boundary, for
 * characters ICU 72 (Unicode 15.0) knows: U+1CF2/U+1CF3 were Mc (now Lo),
 * U+111C9 was Po (now Mn). Found by comparing ICU with the 9.0 Mark table of
 * unicode-normalization-alignments 0.1.12. */
static int is_mark_u9(const di_engram_keyer *k, di_uchar32 c) {
    if (c == 0x1CF2 || c == 0x1CF3) return 1;
    if (c == 0x111C9) return 0;
    if (!k->icu->set_contains(k->age9, c)) return 0;
    int t = k->icu->charType(c);
    return t == DI_U_NON_SPACING_MARK || t == DI_U_COMBINING_SPACING_MARK || t == DI_U_ENCLOSING_MARK;
}

static deepinfer_status icu_fail(const di_icu *icu, di_error *err, const char *what, di_uerror st) {
    return di_error_set(err, DEEPINFER_ERR_INTERNAL, "engram token map: ICU %s failed: %s", what,
                        icu->errorName(st));
}

deepinfer_status di_engram_keyer_new(di_engram_keyer **out, di_error *err) {
    *out = NULL;
    const di_icu *icu;
    deepinfer_status s = di_icu_get(&icu, err);
    if (s) return s;
    di_engram_keyer *k = calloc(1, sizeof *k);
    if (!k) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
    k->icu = icu;
    di_uerror st = DI_U_ZERO_ERROR;
    static const char pattern[] = "[:age=9.0:]";
    di_uchar pat[sizeof pattern];
    for (size_t i = 0; i < sizeof pattern; i++) pat[i] = (di_uchar)pattern[i];
    k->age9 = icu->set_openPattern(pat, -1, &st);
    if (DI_U_SUCCESS(st)) icu->set_freeze(k->age9);
    const di_unorm2 *nfkc = DI_U_SUCCESS(st) ? icu->norm_getNFKCInstance(&st) : NULL;
    const di_unorm2 *nfd = DI_U_SUCCESS(st) ? icu->norm_getNFDInstance(&st) : NULL;
    if (DI_U_SUCCESS(st)) k->nfkc9 = icu->norm_openFiltered(nfkc, k->age9, &st);
    if (DI_U_SUCCESS(st)) k->nfd9 = icu->norm_openFiltered(nfd, k->age9, &st);
    if (DI_U_FAILURE(st)) {
        di_engram_keyer_free(k);
        return icu_fail(icu, err, "normalizer setup", st);
    }
    *out = k;
    return DEEPINFER_OK;
}

void di_engram_keyer_free(di_engram_keyer *k) {
    if (!k) return;
    if (k->nfkc9) k->icu->norm_close(k->nfkc9);
    if (k->nfd9) k->icu->norm_close(k->nfd9);
    if (k->age9) k->icu->set_close(k->age9);
    free(k->a);
    free(k->b);
    free(k->out);
    free(k->bytes);
    free(k);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Make both UTF-16 buffers hold at least `need` UChars. */
static deepinfer_status reserve16(di_engram_keyer *k, int64_t need, di_error *err) {
    if (need > INT32_MAX / 4) return di_error_set(err, DEEPINFER_ERR_LIMIT, "engram token map: token too long");
    if (need <= k->cap) return DEEPINFER_OK;
    int32_t n = k->cap ? k->cap : 64;
    while (n < need) n *= 2;
    di_uchar *a = realloc(k->a, (size_t)n * sizeof(di_uchar));
    if (a) k->a = a;
    di_uchar *b = a ? realloc(k->b, (size_t)n * sizeof(di_uchar)) : NULL;
    if (b) k->b = b;
    if (!a || !b) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
    k->cap = n;
    return DEEPINFER_OK;
}

/* b <- normalize(a[0..len)) with buffer growth; returns the length or -1. */
static int32_t normalize16(di_engram_keyer *k, const di_unorm2 *n2, int32_t len, di_error *err) {
    for (;;) {
        di_uerror st = DI_U_ZERO_ERROR;
        int32_t r = k->icu->norm_normalize(n2, k->a, len, k->b, k->cap, &st);
        if (st == DI_U_BUFFER_OVERFLOW_ERROR) {
            if (reserve16(k, (int64_t)r + 1, err)) return -1;
            continue;
        }
        if (DI_U_FAILURE(st)) {
            icu_fail(k->icu, err, "normalize", st);
            return -1;
        }
        return r;
    }
}

static int is_collapsible(di_uchar c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* ASCII text: NFKC, NFD and StripAccents are the identity, so the sequence is
 * lowercase, collapse, sentinel, strip (ASCII White_Space = 0x09..0x0D, ' '). */
static deepinfer_status normalize_ascii(di_engram_keyer *k, const char *text, size_t len, const char **out,
                                        size_t *out_len, di_error *err) {
    if (grow((void **)&k->out, &k->out_cap, len + 1, 1))
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
    size_t n = 0;
    for (size_t i = 0, in_run = 0; i < len; i++) {
        char c = text[i];
        int ws = c == ' ' || c == '\t' || c == '\r' || c == '\n';
        if (!ws) k->out[n++] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
        else if (!in_run) k->out[n++] = ' ';
        in_run = (size_t)ws;
    }
    if (n == 1 && k->out[0] == ' ') { /* a lone space survives Strip */
        *out = k->out;
        *out_len = 1;
        return DEEPINFER_OK;
    }
    size_t lo = 0, hi = n;
    while (lo < hi && (k->out[lo] == ' ' || (k->out[lo] >= 0x09 && k->out[lo] <= 0x0D))) lo++;
    while (hi > lo && (k->out[hi - 1] == ' ' || (k->out[hi - 1] >= 0x09 && k->out[hi - 1] <= 0x0D))) hi--;
    *out = k->out + lo;
    *out_len = hi - lo;
    return DEEPINFER_OK;
}

deepinfer_status di_engram_normalize(di_engram_keyer *k, const char *text, size_t len, const char **out,
                                     size_t *out_len, di_error *err) {
    size_t ascii = 0;
    while (ascii < len && (unsigned char)text[ascii] < 0x80) ascii++;
    if (ascii == len) return normalize_ascii(k, text, len, out, out_len, err);
    deepinfer_status st;
    if ((st = reserve16(k, (int64_t)len + 1, err))) return st;
    const di_icu *icu = k->icu;
    di_uerror ust = DI_U_ZERO_ERROR;
    int32_t n;
    icu->strFromUTF8(k->a, k->cap, &n, text, (int32_t)len, &ust);
    if (DI_U_FAILURE(ust)) return icu_fail(icu, err, "UTF-8 conversion", ust);

    /* NFKC, then NFD (both Unicode 9.0); results land in b, swap back into a. */
    for (int pass = 0; pass < 2; pass++) {
        int32_t m = normalize16(k, pass ? k->nfd9 : k->nfkc9, n, err);
        if (m < 0) return err ? err->code : DEEPINFER_ERR_INTERNAL;
        di_uchar *t = k->a;
        k->a = k->b;
        k->b = t;
        n = m;
        if ((st = reserve16(k, (int64_t)n * 3 + 8, err))) return st; /* room for lowercase growth */
    }

    /* StripAccents + Lowercase, code point by code point: a -> b. */
    int32_t m = 0;
    for (int32_t i = 0; i < n;) {
        di_uchar32 c = u16_next(k->a, &i, n);
        if (is_mark_u9(k, c)) continue;
        di_uchar one[2];
        int32_t ol = u16_put(one, c);
        ust = DI_U_ZERO_ERROR;
        m += icu->strToLower(k->b + m, k->cap - m, one, ol, "", &ust);
        if (DI_U_FAILURE(ust)) return icu_fail(icu, err, "lowercase", ust);
    }

    /* Collapse [ \t\r\n]+ to one space: b -> a. */
    n = 0;
    for (int32_t i = 0, in_run = 0; i < m; i++) {
        int ws = is_collapsible(k->b[i]);
        if (!ws) k->a[n++] = k->b[i];
        else if (!in_run) k->a[n++] = ' ';
        in_run = ws;
    }
    /* A string that is exactly one space survives Strip as the sentinel. */
    if (n == 1 && k->a[0] == ' ') k->a[0] = SENTINEL;
    /* Strip White_Space on both ends. */
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t j = lo;
        if (!icu->isUWhiteSpace(u16_next(k->a, &j, hi))) break;
        lo = j;
    }
    while (hi > lo) {
        int32_t j = hi;
        if (!icu->isUWhiteSpace(u16_prev(k->a, lo, &j))) break;
        hi = j;
    }
    for (int32_t i = lo; i < hi; i++)
        if (k->a[i] == SENTINEL) k->a[i] = ' ';

    size_t need = (size_t)(hi - lo) * 3 + 1;
    if (grow((void **)&k->out, &k->out_cap, need, 1))
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
    int32_t ul;
    ust = DI_U_ZERO_ERROR;
    icu->strToUTF8(k->out, (int32_t)k->out_cap, &ul, k->a + lo, hi - lo, &ust);
    if (DI_U_FAILURE(ust)) return icu_fail(icu, err, "UTF-8 conversion", ust);
    *out = k->out;
    *out_len = (size_t)ul;
    return DEEPINFER_OK;
}

/* ---- decode one token like HF's ByteLevel decoder ----------------------------------------- */

/* Byte of a ByteLevel alphabet char, or -1. Bytes '!'..'~', 0xA1..0xAC and
 * 0xAE..0xFF are themselves; the other 68 bytes map in order to U+0100... */
static int bytelevel_byte(di_uchar32 c) {
    if ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) return (int)c;
    if (c < 0x100 || c >= 0x100 + 68) return -1;
    int n = (int)(c - 0x100); /* n-th byte outside the self-mapped ranges */
    if (n <= 0x20) return n;                 /* 0x00..0x20 */
    if (n <= 0x20 + 34) return 0x7F + (n - 0x21); /* 0x7F..0xA0 */
    return 0xAD;
}

/* 1 if `s` is valid UTF-8 (Rust's rules) without U+FFFD. */
static int clean_utf8(const uint8_t *s, size_t n) {
    for (int32_t i = 0; (size_t)i < n;) {
        di_uchar32 c = u8_next(s, &i, (int32_t)n);
        if (c < 0 || c == 0xFFFD) return 0;
    }
    return 1;
}

deepinfer_status di_engram_token_key(di_engram_keyer *k, const char *token, size_t len, const char **key,
                                     size_t *key_len, di_error *err) {
    if (len > INT32_MAX / 4) return di_error_set(err, DEEPINFER_ERR_LIMIT, "engram token map: token too long");
    if (grow((void **)&k->bytes, &k->bytes_cap, len + 1, 1))
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
    const uint8_t *s = (const uint8_t *)token;
    size_t nb = 0;
    int all = 1;
    for (int32_t i = 0; (size_t)i < len && all;) {
        di_uchar32 c = u8_next(s, &i, (int32_t)len);
        int b = c < 0 ? -1 : bytelevel_byte(c);
        if (b < 0) all = 0;
        else k->bytes[nb++] = (uint8_t)b;
    }
    if (!all) { /* a char outside the alphabet: the decoder keeps the token's own bytes */
        memcpy(k->bytes, token, len);
        nb = len;
    }
    if (!clean_utf8(k->bytes, nb)) { /* lossy decode shows U+FFFD: key by the raw token */
        *key = token;
        *key_len = len;
        return DEEPINFER_OK;
    }
    deepinfer_status st = di_engram_normalize(k, (const char *)k->bytes, nb, key, key_len, err);
    if (st) return st;
    if (*key_len == 0) { /* nothing left: key by the decoded text */
        *key = (const char *)k->bytes;
        *key_len = nb;
    }
    return DEEPINFER_OK;
}
