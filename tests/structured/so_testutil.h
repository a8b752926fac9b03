/* Helpers shared by the structured-output tests: a synthetic vocabulary and
 * a mask oracle (every token tried one by one against a fresh copy of the
 * parser state) to diff the fast mask against. */
#ifndef DI_TESTS_SO_TESTUTIL_H
#define DI_TESTS_SO_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "structured/matcher.h"
#include "structured/so_args.h"

/* All printable ASCII bytes, \n \t, a UTF-8 letter, and merged tokens; EOS
 * last; padded to a multiple of 32 plus 5 unused ids. */
static const char *so_test_extra[] = {
    "{\"", "\":", "\": ", "\", \"", ", \"", " \"", "\"}", "\"]", "},", "}]", "true", "false", "null", "12",
    "123", "0.5", "-1", "\"a", "a\"", "ab", "abc", "name", "\"name\": ", "\": \"", "\"\n", "\n ", "  ", "\xc3\xa9",
    "\xc3", "\xa9", "e+", "1e", "[\"", "\",", "\\n", "\\\"", "\\u00", "{}", "[]", ", ", ": ", "x\"", "\"x\"",
    "<sp>", NULL};

static inline so_vocab *so_test_vocab(int32_t *eos_out) {
    const uint8_t *toks[512];
    uint32_t lens[512];
    uint8_t special[512] = {0};
    static uint8_t bytes[256];
    int n = 0;
    for (int c = 0; c < 256; c++) bytes[c] = (uint8_t)c;
    for (int c = 0x20; c < 0x7f; c++) toks[n] = &bytes[c], lens[n++] = 1;
    toks[n] = &bytes['\n'], lens[n++] = 1;
    toks[n] = &bytes['\t'], lens[n++] = 1;
    for (int k = 0; so_test_extra[k]; k++) {
        toks[n] = (const uint8_t *)so_test_extra[k], lens[n] = (uint32_t)strlen(so_test_extra[k]);
        if (!strcmp(so_test_extra[k], "<sp>")) special[n] = 1;
        n++;
    }
    toks[n] = (const uint8_t *)"</s>", lens[n] = 4;
    int32_t eos = n++;
    so_vocab *v = NULL;
    di_error e = {0};
    if (so_vocab_new(n + 5, n, toks, lens, special, &eos, 1, &v, &e) != DEEPINFER_OK) {
        fprintf(stderr, "    vocab: %s\n", e.msg);
        return NULL;
    }
    if (eos_out) *eos_out = eos;
    return v;
}

static inline so_grammar *so_test_compile(so_vocab *v, so_schema_type t, const char *schema, di_error *e) {
    so_args a = {.type = t, .schema = schema, .schema_len = strlen(schema), .whitespace_max = -1};
    so_grammar *g = NULL;
    if (so_compile(v, &a, &g, e) != DEEPINFER_OK) return NULL;
    return g;
}

/* Compare the fast mask with the oracle; returns the first differing token or -1. */
static inline int32_t so_test_mask_diff(so_matcher *m) {
    const so_vocab *v = m->g->vocab;
    uint32_t *mask = calloc(v->n_words, 4);
    di_error e = {0};
    int32_t bad = -2;
    if (mask && so_matcher_fill_mask(m, mask, &e) == DEEPINFER_OK) {
        bad = -1;
        for (int32_t t = 0; t < v->n_vocab && bad < 0; t++) {
            int fast = (mask[t >> 5] >> (t & 31)) & 1;
            if (fast != so_matcher_try_token(m, t)) bad = t;
        }
    }
    free(mask);
    return bad;
}

/* Feed `text` byte-token by byte-token (single-byte tokens), checking the
 * mask against the oracle at every step. Returns 1 if all bytes were
 * accepted and the final state is accepting (or 0 with *where set). */
static inline int so_test_feed(so_vocab *v, so_grammar *g, const char *text, int check_masks, int *where) {
    so_matcher *m = NULL;
    di_error e = {0};
    if (so_matcher_new(g, NULL, &m, &e) != DEEPINFER_OK) return 0;
    int ok = 1;
    size_t n = strlen(text);
    *where = -1;
    for (size_t i = 0; i < n && ok; i++) {
        if (check_masks) {
            int32_t d = so_test_mask_diff(m);
            if (d != -1) {
                fprintf(stderr, "    mask differs from oracle at byte %zu, token %d\n", i, d);
                ok = 0, *where = (int)i;
                break;
            }
        }
        int32_t tok = -1;
        for (int32_t t = 0; t < v->n_vocab; t++) {
            uint32_t l;
            const uint8_t *b = so_vocab_token(v, t, &l);
            if (l == 1 && b[0] == (uint8_t)text[i] && v->in_trie[t]) tok = t;
        }
        if (tok < 0 || so_matcher_accept_token(m, tok, &e) != DEEPINFER_OK) ok = 0, *where = (int)i;
    }
    if (ok && check_masks && so_test_mask_diff(m) != -1) ok = 0, *where = (int)n;
    if (ok && !so_matcher_is_accepting(m)) ok = 0, *where = (int)n;
    so_matcher_free(m);
    return ok;
}

#endif
