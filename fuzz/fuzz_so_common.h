/* Shared by the structured-output fuzz targets: a small vocabulary built
 * once, and a driver that compiles a grammar and walks a few steps of
 * masks and tokens (exercising the parser, the mask cache and rollback). */
#ifndef DI_FUZZ_SO_COMMON_H
#define DI_FUZZ_SO_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "structured/matcher.h"
#include "structured/so_args.h"

static so_vocab *fuzz_vocab(void) {
    static so_vocab *v;
    if (v) return v;
    static const char *extra[] = {"{\"", "\":", "\": ", "\", \"", "true", "false", "null", "12", "\"a", "ab", "\xc3\xa9",
                                  "  ", "},", "[\"", "\\n", "0.5", NULL};
    const uint8_t *toks[256];
    uint32_t lens[256];
    static uint8_t bytes[256];
    int n = 0;
    for (int c = 0; c < 256; c++) bytes[c] = (uint8_t)c;
    for (int c = 0x09; c < 0x7f; c++) toks[n] = &bytes[c], lens[n++] = 1;
    for (int k = 0; extra[k]; k++) toks[n] = (const uint8_t *)extra[k], lens[n] = (uint32_t)strlen(extra[k]), n++;
    toks[n] = (const uint8_t *)"</s>", lens[n] = 4;
    int32_t eos = n++;
    di_error e;
    so_vocab_new(n + 3, n, toks, lens, NULL, &eos, 1, &v, &e);
    so_vocab_set_limits(v, (size_t)64 << 20, (size_t)64 << 20);
    return v;
}

/* Compile, then follow the first allowed token of each mask for a few steps
 * (taking the token selected by the input's bytes), with a rollback. */
static void fuzz_drive(so_schema_type t, const uint8_t *data, size_t size) {
    so_vocab *v = fuzz_vocab();
    if (!v || size > 4096) return;
    char *text = malloc(size + 1);
    if (!text) return;
    memcpy(text, data, size);
    text[size] = 0;
    so_args a = {.type = t, .schema = text, .schema_len = size, .whitespace_max = 2};
    so_grammar *g = NULL;
    di_error e;
    if (so_compile(v, &a, &g, &e) == DEEPINFER_OK) {
        so_matcher *m = NULL;
        if (so_matcher_new(g, NULL, &m, &e) == DEEPINFER_OK) {
            uint32_t *mask = calloc(v->n_words, 4);
            for (int step = 0; mask && step < 12; step++) {
                if (so_matcher_fill_mask(m, mask, &e) != DEEPINFER_OK) break;
                int32_t pick = -1, seen = 0, want = size ? data[(size_t)step % size] % 7 : 0;
                for (int32_t tk = 0; tk < v->n_vocab; tk++)
                    if ((mask[tk >> 5] >> (tk & 31)) & 1) {
                        if (!so_matcher_try_token(m, tk)) abort(); /* mask and parser disagree */
                        if (seen++ <= want) pick = tk;
                    }
                if (pick < 0) break;
                if (so_matcher_accept_token(m, pick, &e) != DEEPINFER_OK) abort();
                if (step == 6) so_matcher_rollback(m, 2, &e);
            }
            free(mask);
            so_matcher_free(m);
        }
        so_grammar_free(g);
    }
    free(text);
}

#endif
