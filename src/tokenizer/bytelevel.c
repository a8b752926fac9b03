/*
 * bytelevel.c — GPT-2's ByteLevel alphabet: every byte maps to one
 * printable codepoint. Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to
 * themselves; the other 68 bytes map, in increasing order, to U+0100.. .
 */
#include <pthread.h>

#include "tokenizer/tok_internal.h"

static uint16_t g_byte_char[256];
static int16_t g_char_byte[0x100 + 68];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int is_self(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

static void build(void) {
    unsigned n = 0;
    for (unsigned i = 0; i < 0x100 + 68; i++) g_char_byte[i] = -1;
    for (unsigned b = 0; b < 256; b++) {
        g_byte_char[b] = (uint16_t)(is_self(b) ? b : 0x100 + n++);
        g_char_byte[g_byte_char[b]] = (int16_t)b;
    }
}

uint32_t di_bytelevel_char(uint8_t b) {
    pthread_once(&g_once, build);
    return g_byte_char[b];
}

int di_bytelevel_byte(uint32_t cp) {
    pthread_once(&g_once, build);
    return cp < 0x100 + 68 ? g_char_byte[cp] : -1;
}

size_t di_bytelevel_decode_token(const uint8_t *s, size_t n, uint8_t *out) {
    size_t o = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t bad;
        size_t k = di_utf8_next(s + i, n - i, &cp, &bad);
        int b = k ? di_bytelevel_byte(cp) : -1;
        if (b < 0) { /* a char outside the alphabet: HF keeps the token's raw bytes */
            for (size_t j = 0; j < n; j++) out[j] = s[j];
            return n;
        }
        out[o++] = (uint8_t)b;
        i += k;
    }
    return o;
}
