/* libFuzzer target: encode arbitrary bytes with DeepSeek's tokenizer, decode
 * back through the streaming decoder, and check the invariants:
 *   - decode(encode(s)) == s for valid UTF-8 s, and == the lossy repair of s
 *     otherwise (each maximal invalid subpart → U+FFFD);
 *   - every chunk the streaming decoder emits is whole UTF-8 characters;
 *   - skip_special decoding never emits more than plain decoding.
 * The tokenizer is loaded once from $DEEPINFER_TOKENIZER (default
 * tests/data/tokenizer/tokenizer.json, run from the repository root). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

static di_tokenizer *g_tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *path = getenv("DEEPINFER_TOKENIZER");
    di_error err = {0};
    if (di_tokenizer_load(path ? path : "tests/data/tokenizer/tokenizer.json", &g_tok, &err) != DEEPINFER_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s (set DEEPINFER_TOKENIZER or run from the repository root)\n", err.msg);
        abort();
    }
    return 0;
}

/* The expected decoding: maximal subparts → U+FFFD. */
static size_t repair(const uint8_t *s, size_t n, uint8_t *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t need = 0;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            out[o++] = s[i++];
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        }
        size_t k = 1;
        if (need) {
            for (; k <= need && i + k < n; k++) {
                uint8_t b = s[i + k];
                if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) break;
            }
        }
        if (need && k == need + 1) {
            memcpy(out + o, s + i, k);
            o += k;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
        }
        i += k;
    }
    return o;
}

static size_t stream(const int32_t *ids, size_t n, int skip, uint8_t *out) {
    di_detok d;
    di_detok_init(&d, g_tok, skip);
    size_t o = 0;
    char chunk[1024];
    for (size_t i = 0; i <= n; i++) {
        long k = i < n ? di_detok_push(&d, ids[i], chunk, sizeof chunk) : di_detok_flush(&d, chunk, sizeof chunk);
        if (k < 0) abort(); /* every token fits 1 KiB */
        for (long j = 0; j < k;) {
            unsigned char c = (unsigned char)chunk[j];
            long w = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            if (j + w > k) abort(); /* a character split across chunks */
            j += w;
        }
        memcpy(out + o, chunk, (size_t)k);
        o += (size_t)k;
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    di_error err;
    if (di_tokenizer_encode(g_tok, (const char *)data, size, &ids, &n, &cap, &err) != DEEPINFER_OK) abort();
    uint8_t *want = malloc(size * 3 + 1), *got = malloc(size * 3 + 64), *got_skip = malloc(size * 3 + 64);
    size_t wl = repair(data, size, want);
    size_t gl = stream(ids, n, 0, got);
    if (gl != wl || memcmp(got, want, wl)) abort();
    size_t sl = stream(ids, n, 1, got_skip);
    if (sl > gl) abort();
    free(want);
    free(got);
    free(got_skip);
    free(ids);
    return 0;
}
