/* Regex front end + DFA: full-match and search semantics, errors, products. */
#include <stdlib.h>

#include "structured/dfa.h"
#include "structured/regex.h"
#include "test.h"

static so_dfa *rx_dfa(const char *re, so_rx_mode mode, int json) {
    di_arena a;
    di_arena_init(&a, 0);
    so_rx *rx = NULL;
    di_error e = {0};
    so_dfa *d = NULL;
    if (so_rx_parse(&a, re, strlen(re), mode, &rx, &e) == DEEPINFER_OK) so_dfa_from_rx(rx, json, NULL, &d, &e);
    if (!d) fprintf(stderr, "    %s: %s\n", re, e.msg);
    di_arena_free(&a);
    return d;
}

static int m(const so_dfa *d, const char *s) { return so_dfa_matches(d, (const uint8_t *)s, strlen(s)); }

static int rx_err(const char *re, const char *needle) {
    di_arena a;
    di_arena_init(&a, 0);
    so_rx *rx = NULL;
    di_error e = {0};
    deepinfer_status st = so_rx_parse(&a, re, strlen(re), SO_RX_FULL, &rx, &e);
    di_arena_free(&a);
    if (st == DEEPINFER_OK) return 0;
    if (!strstr(e.msg, needle)) fprintf(stderr, "    message: %s\n", e.msg);
    return strstr(e.msg, needle) != NULL;
}

TEST(so_regex_full_match) {
    so_dfa *d = rx_dfa("a(b|cd)*e?", SO_RX_FULL, 0);
    CHECK(d);
    CHECK(m(d, "a") && m(d, "abcdb") && m(d, "abe") && !m(d, "ab c") && !m(d, "") && !m(d, "ae e"));
    so_dfa_free(d);
    d = rx_dfa("^\\d{3}-[A-Fa-f]{2,4}$", SO_RX_FULL, 0);
    CHECK(d);
    CHECK(m(d, "123-ab") && m(d, "000-ABCD") && !m(d, "12-ab") && !m(d, "123-abcde") && !m(d, "123-g1"));
    so_dfa_free(d);
    d = rx_dfa("[^a-z]+|x{2,}", SO_RX_FULL, 0);
    CHECK(d);
    CHECK(m(d, "AB\xc3\xa9") && m(d, "xxx") && !m(d, "x") && !m(d, "Ab"));
    so_dfa_free(d);
    d = rx_dfa("\\u00e9.\\s\\w\\S", SO_RX_FULL, 0);
    CHECK(d);
    CHECK(m(d, "\xc3\xa9\xe4\xb8\xad _!") && !m(d, "\xc3\xa9\n _!") && !m(d, "\xc3\xa9z\xc3\xa9_!"));
    so_dfa_free(d);
}

TEST(so_regex_search_semantics) {
    so_dfa *d = rx_dfa("ab", SO_RX_SEARCH, 0);
    CHECK(d && m(d, "xxabyy") && m(d, "ab") && !m(d, "a b"));
    so_dfa_free(d);
    d = rx_dfa("^ab|cd$", SO_RX_SEARCH, 0);
    CHECK(d && m(d, "abzz") && m(d, "zzcd") && !m(d, "zabz") && !m(d, "cdz"));
    so_dfa_free(d);
    d = rx_dfa("^(a|b)+$", SO_RX_SEARCH, 0);
    CHECK(d && m(d, "abba") && !m(d, "abc"));
    so_dfa_free(d);
}

TEST(so_regex_json_string_encoding) {
    so_dfa *d = rx_dfa("[a\"\\n\\\\\\u0001]*", SO_RX_FULL, 1);
    CHECK(d);
    CHECK(m(d, "\"a\\\"\\n\\\\\\u0001\""));
    CHECK(!m(d, "\"a\"\"") && !m(d, "\"\n\"") && !m(d, "\"\\u000a\""));
    so_dfa_free(d);
}

TEST(so_regex_errors_have_positions) {
    CHECK(rx_err("a(?=b)", "lookahead is not supported (at offset 1)"));
    CHECK(rx_err("(?<!x)y", "lookbehind"));
    CHECK(rx_err("(a)\\1", "backreferences"));
    CHECK(rx_err("a\\bc", "word boundary"));
    CHECK(rx_err("(ab", "unbalanced parenthesis (at offset 0)"));
    CHECK(rx_err("[a-", "unterminated character class"));
    CHECK(rx_err("a{3,2}", "m > n"));
    CHECK(rx_err("*a", "quantifier without"));
    CHECK(rx_err("a{5000}", "above 1000"));
    CHECK(rx_err("a^b", "anchor ^ in the middle"));
    CHECK(rx_err("\\p{L}", "property"));
}

TEST(so_regex_limits_not_hang) {
    di_arena a;
    di_arena_init(&a, 0);
    so_rx *rx = NULL;
    di_error e = {0};
    const char *re = "((a{1,1000}){1,1000}){1,1000}";
    CHECK(so_rx_parse(&a, re, strlen(re), SO_RX_FULL, &rx, &e) == DEEPINFER_OK);
    so_dfa *d = NULL;
    CHECK(so_dfa_from_rx(rx, 0, NULL, &d, &e) == DEEPINFER_ERR_LIMIT);
    CHECK(strstr(e.msg, "too large"));
    const char *re2 = "(a|b)*a(a|b){18}";
    CHECK(so_rx_parse(&a, re2, strlen(re2), SO_RX_FULL, &rx, &e) == DEEPINFER_OK);
    so_dfa_limits lim = {.max_dfa_states = 5000};
    CHECK(so_dfa_from_rx(rx, 0, &lim, &d, &e) == DEEPINFER_ERR_LIMIT);
    di_arena_free(&a);
}

TEST(so_regex_product_and_classes) {
    so_dfa *a = rx_dfa("[a-z]*", SO_RX_FULL, 0), *b = rx_dfa(".{2,3}", SO_RX_FULL, 0), *c = NULL, *x = NULL;
    di_error e = {0};
    CHECK(a && b);
    CHECK(so_dfa_product(a, b, 0, NULL, &c, &e) == DEEPINFER_OK);
    CHECK(m(c, "ab") && m(c, "abc") && !m(c, "a") && !m(c, "abcd") && !m(c, "A1"));
    CHECK(so_dfa_product(a, b, 1, NULL, &x, &e) == DEEPINFER_OK);
    CHECK(m(x, "a") && m(x, "abcd") && m(x, "") && !m(x, "ab"));
    so_dfa *cnt = rx_dfa("a{0,100}", SO_RX_FULL, 0);
    CHECK(cnt);
    CHECK(so_dfa_classes(cnt, 8, 1u << 30, &e) == DEEPINFER_OK);
    /* states with >= 8 a's left are equivalent up to depth 8 */
    CHECK(cnt->neqc < 20);
    so_dfa_free(a), so_dfa_free(b), so_dfa_free(c), so_dfa_free(x), so_dfa_free(cnt);
}
