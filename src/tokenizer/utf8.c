/*
 * utf8.c — strict UTF-8 decoding and lossy repair.
 *
 * Invalid input is repaired by "substitution of maximal subparts" (Unicode
 * §3.9, WHATWG Encoding): each maximal prefix of a valid sequence that
 * cannot be completed, and each byte that can start no sequence, becomes one
 * U+FFFD. This is what JavaScript's TextDecoder and Rust's
 * String::from_utf8_lossy produce, so our encode of raw bytes equals HF's
 * encode of the lossy-decoded string.
 */
#include <stdlib.h>

#include "tokenizer/tok_internal.h"

size_t di_utf8_next(const uint8_t *s, size_t n, uint32_t *cp, size_t *bad) {
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t need;
    uint32_t v;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *bad = 1;
        return 0;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n) break;
        uint8_t b = s[i];
        uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) break;
        v = (v << 6) | (b & 0x3F);
    }
    if (i <= need) {
        *bad = i; /* the maximal subpart: the lead byte plus valid continuations */
        return 0;
    }
    *cp = v;
    return need + 1;
}

int di_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t bad;
        size_t k = di_utf8_next(s + i, n - i, &cp, &bad);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

size_t di_utf8_put(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

uint8_t *di_utf8_repair(const uint8_t *s, size_t n, size_t *out_len) {
    /* Worst case: every byte becomes U+FFFD (3 bytes). */
    if (n > ((size_t)-1 - 1) / 3) return NULL;
    uint8_t *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t i = 0, o = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            out[o++] = s[i++];
            continue;
        }
        uint32_t cp;
        size_t bad;
        size_t k = di_utf8_next(s + i, n - i, &cp, &bad);
        if (k) {
            for (size_t j = 0; j < k; j++) out[o++] = s[i + j];
            i += k;
        } else {
            o += di_utf8_put(0xFFFD, out + o);
            i += bad;
        }
    }
    out[o] = 0;
    *out_len = o;
    return out;
}
