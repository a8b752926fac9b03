/* eval_schema.c — JSON-schema validity of a generated text (eval_schema.h). */
#include "eval/eval_schema.h"

#include "io/json.h"
#include "structured/matcher.h"
#include "structured/so_args.h"

static int blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

deepinfer_status ev_schema_check(so_vocab *v, const char *schema, size_t schema_len, const char *text, size_t n,
                                 int *valid, int *parses, di_error *err) {
    *valid = *parses = 0;
    so_args a = {.type = SO_SCHEMA_JSON, .schema = schema, .schema_len = schema_len, .whitespace_max = 1000};
    so_grammar *g = NULL;
    deepinfer_status st = so_compile(v, &a, &g, err);
    if (st) return st;
    size_t s = 0;
    while (s < n && blank(text[s])) s++;
    while (n > s && blank(text[n - 1])) n--;
    di_json_doc *d = NULL;
    di_error je = {0};
    if (n > s && di_json_parse(text + s, n - s, NULL, &d, &je) == DEEPINFER_OK) {
        *parses = 1;
        di_json_free(d);
    }
    so_matcher *m = NULL;
    if (*parses && (st = so_matcher_new(g, NULL, &m, err)) == DEEPINFER_OK) {
        di_error me = {0};
        *valid = so_matcher_accept_bytes(m, (const uint8_t *)text + s, n - s, &me) == DEEPINFER_OK && so_matcher_is_accepting(m);
        so_matcher_free(m);
    }
    so_grammar_free(g);
    return st;
}
