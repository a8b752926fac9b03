/*
 * engram_token_key.c — per-token keys of the Engram compressed token map
 * (architecture.md §5.8), reproducing HF `tokenizers`' decode and normalizer
 * semantics with ICU (see engram_token_key.h for the rules).
 */
#include "model/engram_token_key.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/uset.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>
#include <unicode/utf8.h>

#define SENTINEL 0xE000 /* private-use char the reference uses to protect a lone space */

struct di_engram_keyer {
    USet *age9;              /* characters assigned in Unicode <= 9.0 */
    UNormalizer2 *nfkc9;     /* NFKC / NFD restricted to them: what unicode-normalization 0.1.12 does */
    UNormalizer2 *nfd9;
    UChar *a, *b;            /* UTF-16 work buffers */
    int32_t cap;             /* of a and b, in UChars */
    char *out;               /* UTF-8 result */
    size_t out_cap;
    uint8_t *bytes;          /* decoded token bytes */
    size_t bytes_cap;
};

/* General_Category changes since Unicode 9.0 across the Mark boundary, for
 * characters ICU 72 (Unicode 15.0) knows: U+1CF2/U+1CF3 were Mc (now Lo),
 * U+111C9 was Po (now Mn). Found by comparing ICU with the 9.0 Mark table of
 * unicode-normalization-alignments 0.1.12. */
static int is_mark_u9(const di_engram_keyer *k, UChar32 c) {
    if (c == 0x1CF2 || c == 0x1CF3) return 1;
    if (c == 0x111C9) return 0;
    if (!uset_contains(k->age9, c)) return 0;
    int t = u_charType(c);
    return t == U_NON_SPACING_MARK || t == U_COMBINING_SPACING_MARK || t == U_ENCLOSING_MARK;
}

static deepinfer_status icu_fail(di_error *err, const char *what, UErrorCode st) {
    return di_error_set(err, DEEPINFER_ERR_INTERNAL, "engram token map: ICU %s failed: %s", what, u_errorName(st));
}

deepinfer_status di_engram_keyer_new(di_engram_keyer **out, di_error *err) {
    *out = NULL;
    di_engram_keyer *k = calloc(1, sizeof *k);
    if (!k) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
    UErrorCode st = U_ZERO_ERROR;
    UChar pat[16];
    u_uastrcpy(pat, "[:age=9.0:]");
    k->age9 = uset_openPattern(pat, -1, &st);
    if (U_SUCCESS(st)) uset_freeze(k->age9);
    const UNormalizer2 *nfkc = U_SUCCESS(st) ? unorm2_getNFKCInstance(&st) : NULL;
    const UNormalizer2 *nfd = U_SUCCESS(st) ? unorm2_getNFDInstance(&st) : NULL;
    if (U_SUCCESS(st)) k->nfkc9 = unorm2_openFiltered(nfkc, k->age9, &st);
    if (U_SUCCESS(st)) k->nfd9 = unorm2_openFiltered(nfd, k->age9, &st);
    if (U_FAILURE(st)) {
        di_engram_keyer_free(k);
        return icu_fail(err, "normalizer setup", st);
    }
    *out = k;
    return DEEPINFER_OK;
}

void di_engram_keyer_free(di_engram_keyer *k) {
    if (!k) return;
    if (k->nfkc9) unorm2_close(k->nfkc9);
    if (k->nfd9) unorm2_close(k->nfd9);
    if (k->age9) uset_close(k->age9);
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
    UChar *a = realloc(k->a, (size_t)n * sizeof(UChar));
    if (a) k->a = a;
    UChar *b = a ? realloc(k->b, (size_t)n * sizeof(UChar)) : NULL;
    if (b) k->b = b;
    if (!a || !b) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
    k->cap = n;
    return DEEPINFER_OK;
}

/* b <- normalize(a[0..len)) with buffer growth; returns the length or -1. */
static int32_t normalize16(di_engram_keyer *k, const UNormalizer2 *n2, int32_t len, di_error *err) {
    for (;;) {
        UErrorCode st = U_ZERO_ERROR;
        int32_t r = unorm2_normalize(n2, k->a, len, k->b, k->cap, &st);
        if (st == U_BUFFER_OVERFLOW_ERROR) {
            if (reserve16(k, (int64_t)r + 1, err)) return -1;
            continue;
        }
        if (U_FAILURE(st)) {
            icu_fail(err, "normalize", st);
            return -1;
        }
        return r;
    }
}

static int is_collapsible(UChar c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

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
    UErrorCode ust = U_ZERO_ERROR;
    int32_t n;
    u_strFromUTF8(k->a, k->cap, &n, text, (int32_t)len, &ust);
    if (U_FAILURE(ust)) return icu_fail(err, "UTF-8 conversion", ust);

    /* NFKC, then NFD (both Unicode 9.0); results land in b, swap back into a. */
    for (int pass = 0; pass < 2; pass++) {
        int32_t m = normalize16(k, pass ? k->nfd9 : k->nfkc9, n, err);
        if (m < 0) return err ? err->code : DEEPINFER_ERR_INTERNAL;
        UChar *t = k->a;
        k->a = k->b;
        k->b = t;
        n = m;
        if ((st = reserve16(k, (int64_t)n * 3 + 8, err))) return st; /* room for lowercase growth */
    }

    /* StripAccents + Lowercase, code point by code point: a -> b. */
    int32_t m = 0;
    for (int32_t i = 0; i < n;) {
        UChar32 c;
        U16_NEXT(k->a, i, n, c);
        if (is_mark_u9(k, c)) continue;
        UChar one[2];
        int32_t ol = 0;
        U16_APPEND_UNSAFE(one, ol, c);
        ust = U_ZERO_ERROR;
        m += u_strToLower(k->b + m, k->cap - m, one, ol, "", &ust);
        if (U_FAILURE(ust)) return icu_fail(err, "lowercase", ust);
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
        UChar32 c;
        int32_t j = lo;
        U16_NEXT(k->a, j, hi, c);
        if (!u_isUWhiteSpace(c)) break;
        lo = j;
    }
    while (hi > lo) {
        UChar32 c;
        int32_t j = hi;
        U16_PREV(k->a, lo, j, c);
        if (!u_isUWhiteSpace(c)) break;
        hi = j;
    }
    for (int32_t i = lo; i < hi; i++)
        if (k->a[i] == SENTINEL) k->a[i] = ' ';

    size_t need = (size_t)(hi - lo) * 3 + 1;
    if (grow((void **)&k->out, &k->out_cap, need, 1))
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram token map: out of memory");
    int32_t ul;
    ust = U_ZERO_ERROR;
    u_strToUTF8(k->out, (int32_t)k->out_cap, &ul, k->a + lo, hi - lo, &ust);
    if (U_FAILURE(ust)) return icu_fail(err, "UTF-8 conversion", ust);
    *out = k->out;
    *out_len = (size_t)ul;
    return DEEPINFER_OK;
}

/* ---- decode one token like HF's ByteLevel decoder ----------------------------------------- */

/* Byte of a ByteLevel alphabet char, or -1. Bytes '!'..'~', 0xA1..0xAC and
 * 0xAE..0xFF are themselves; the other 68 bytes map in order to U+0100... */
static int bytelevel_byte(UChar32 c) {
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
        UChar32 c;
        U8_NEXT(s, i, (int32_t)n, c);
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
        UChar32 c;
        U8_NEXT(s, i, (int32_t)len, c);
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
