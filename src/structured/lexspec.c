/*
 * lexspec.c — compile a lexeme spec (lexspec.h) to a DFA.
 */
#include "structured/lexspec.h"

#include <stdlib.h>
#include <string.h>

#define SPEC_MAX_DEPTH 64

static deepinfer_status parse(const char *s, size_t len, size_t *i, int depth, so_dfa **out, di_error *err) {
    if (depth > SPEC_MAX_DEPTH) return di_error_set(err, DEEPINFER_ERR_LIMIT, "lexeme spec nested too deeply");
    if (*i >= len) return di_error_set(err, DEEPINFER_ERR_INTERNAL, "lexeme spec truncated");
    char k = s[(*i)++];
    if (k == '&' || k == '-' || k == '|' || k == '~') {
        so_dfa *a = NULL, *b = NULL;
        deepinfer_status st = parse(s, len, i, depth + 1, &a, err);
        if (st == DEEPINFER_OK) st = parse(s, len, i, depth + 1, &b, err);
        if (st == DEEPINFER_OK) st = so_dfa_product(a, b, k == '&' ? 0 : k == '|' ? 2 : 1, NULL, out, err);
        so_dfa_free(a), so_dfa_free(b);
        return st;
    }
    if (k == 'M') {
        uint32_t m = 0;
        while (*i < len && s[*i] >= '0' && s[*i] <= '9' && m < 1000000) m = m * 10 + (uint32_t)(s[(*i)++] - '0');
        if (*i >= len || s[*i] != ':') return di_error_set(err, DEEPINFER_ERR_INTERNAL, "bad lexeme spec M");
        (*i)++;
        return so_dfa_multiple(m, out, err);
    }
    if (k != 'R' && k != 'J' && k != 'S') return di_error_set(err, DEEPINFER_ERR_INTERNAL, "bad lexeme spec kind");
    size_t n = 0;
    while (*i < len && s[*i] >= '0' && s[*i] <= '9') n = n * 10 + (size_t)(s[(*i)++] - '0');
    if (*i >= len || s[*i] != ':' || *i + 1 + n > len)
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "bad lexeme spec length");
    (*i)++;
    di_arena a;
    di_arena_init(&a, 0);
    so_rx *rx = NULL;
    deepinfer_status st = so_rx_parse(&a, s + *i, n, k == 'S' ? SO_RX_SEARCH : SO_RX_FULL, &rx, err);
    if (st == DEEPINFER_OK) st = so_dfa_from_rx(rx, k != 'R', NULL, out, err);
    di_arena_free(&a);
    *i += n;
    return st;
}

deepinfer_status so_lexspec_compile(const char *spec, size_t len, int depth, so_dfa **out, di_error *err) {
    size_t i = 0;
    so_dfa *d = NULL;
    deepinfer_status st = parse(spec, len, &i, 0, &d, err);
    if (st == DEEPINFER_OK && i != len) st = di_error_set(err, DEEPINFER_ERR_INTERNAL, "trailing bytes in lexeme spec");
    if (st == DEEPINFER_OK) st = so_dfa_classes(d, depth, (size_t)32 << 20, err);
    if (st != DEEPINFER_OK) {
        so_dfa_free(d);
        return st;
    }
    *out = d;
    return DEEPINFER_OK;
}

size_t so_lexspec_operand_len(const char *s, size_t len) {
    size_t i = 0;
    int need = 1;
    while (need > 0 && i < len) {
        char k = s[i++];
        if (k == '&' || k == '-' || k == '|' || k == '~') {
            need += 1;
            continue;
        }
        if (k == 'M') {
            while (i < len && s[i] != ':') i++;
            i++;
            need--;
            continue;
        }
        size_t n = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') n = n * 10 + (size_t)(s[i++] - '0');
        i += 1 + n;
        need--;
    }
    return i <= len ? i : len;
}
