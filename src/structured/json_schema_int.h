/*
 * json_schema_int.h — internals shared by the JSON Schema front end:
 *   json_schema.c          driver: one nonterminal per conjunction of schema nodes
 *   json_schema_refs.c     $ref / $anchor resolution, JSON value helpers
 *   json_schema_flatten.c  merging a conjunction's keywords into one node
 *   json_schema_negate.c   not / if-then-else as unions of alternatives
 *   json_schema_emit.c     grammar for one flattened node (lexeme specs,
 *                          numbers, strings, arrays, objects, oneOf checks)
 */
#ifndef DI_STRUCTURED_JSON_SCHEMA_INT_H
#define DI_STRUCTURED_JSON_SCHEMA_INT_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "io/json.h"
#include "structured/grammar.h"
#include "structured/json_numbers.h"
#include "structured/json_write.h"

#define T_NULL 1u
#define T_BOOL 2u
#define T_INT 4u
#define T_NUM 8u /* any number (implies integers) */
#define T_STR 16u
#define T_ARR 32u
#define T_OBJ 64u
#define T_ALL 127u

#define MAX_ALTS 256
#define MAX_EXPAND 512
#define MAX_DEPTH 200

typedef uintptr_t mem; /* di_json pointer | 1 when "stripped" */
#define M_NODE(m) ((const di_json *)((m) & ~(uintptr_t)1))
#define M_STRIPPED(m) ((int)((m)&1))
#define js_M_NODE_CONST(m) M_NODE(m)

typedef struct conj {
    mem *m;
    uint32_t n;
} conj;

typedef struct facet {
    const di_json *props, *pprops, *addl;
} facet;

typedef struct afacet {
    const di_json *prefix; /* array or NULL */
    const di_json *rest;   /* schema for positions past prefix, or NULL */
} afacet;

typedef struct group {
    conj *alts;
    uint32_t n;
    int oneof;
} group;

typedef struct sn {
    uint32_t types;
    int unsat;
    int has_enum;
    const di_json **enums;
    uint32_t nenum;
    const di_json **excl;
    uint32_t nexcl;
    int64_t minlen, maxlen;
    const di_json **pats, **npats, **fmts;
    uint32_t npat, nnpat, nfmt;
    int has_lo, has_hi, lo_excl, hi_excl;
    so_dec lo, hi;
    const di_json **mult;
    uint32_t nmult;
    int nonint;
    const di_json **notmult; /* must not be a multiple of these integers */
    uint32_t nnotmult;
    afacet *af;
    uint32_t naf;
    int64_t minitems, maxitems;
    int unique;
    const di_json *contains; /* at most one (from one member) */
    int64_t minc, maxc;
    facet *of;
    uint32_t nof;
    const di_json **req;
    uint32_t nreq;
    int64_t minprops, maxprops;
    conj propnames;
    group *groups;
    uint32_t ngroups;
    conj members; /* expanded members */
} sn;

typedef struct memo {
    mem *key;
    uint32_t n;
    uint64_t h;
    int32_t nt;
} memo;

typedef struct ctx {
    so_gb *b;
    so_vocab *v;
    di_error *err;
    deepinfer_status st;
    const di_json *root;
    int draft; /* 4, 6, 7, 2019, 2020 */
    int lenient;
    int ws;
    di_arena a;
    memo *memo;
    uint32_t nmemo, memocap;
    clock_t deadline;
    int depth;
    /* shared symbols */
    int32_t s_lbrace, s_rbrace, s_lbrack, s_rbrack, s_comma, s_colon, s_str, s_num, s_true, s_false, s_null;
    int32_t nt_any;
    char wsre[40];
} ctx;

/* ---- small helpers ------------------------------------------------------- */


#define PUSH(c, arr, n, val)                                                   \
    do {                                                                       \
        void *np_ = js_grow(c, (void *)(arr), (n), sizeof *(arr));                \
        if (!np_) break;                                                       \
        (arr) = np_;                                                           \
        (arr)[(n)++] = (val);                                                  \
    } while (0)

static inline int key_is(const di_json *m, const char *k) { return m->key_len == strlen(k) && !memcmp(m->key, k, m->key_len); }

static inline const di_json *get(const di_json *o, const char *k) {
    if (!o || o->type != DI_JSON_OBJECT) return NULL;
    const di_json *r = NULL;
    for (uint32_t i = 0; i < o->count; i++)
        if (key_is(&o->items[i], k)) r = &o->items[i];
    return r;
}

/* shared functions */
int js_failf(ctx *c, deepinfer_status code, const char *fmt, const char *arg);
int js_unsupported(ctx *c, const char *what);
int js_oom(ctx *c);
void *js_grow(ctx *c, void *p, uint32_t n, size_t elem);
int js_time_up(ctx *c);
di_json *js_mk(ctx *c, di_json_type t);
di_json *js_mk_obj(ctx *c, uint32_t n);
void js_set_member(di_json *o, uint32_t i, const char *key, size_t klen, const di_json *val);
di_json *js_mk_str(ctx *c, const char *s, size_t n);
di_json *js_mk_types(ctx *c, uint32_t types);
int js_hexd(int h);
int js_pct_decode(const char *s, size_t n, char *out, size_t *on);
int js_count_anchor(const di_json *n, const char *key, const char *val, size_t vlen, int depth);
const di_json *js_find_anchor(const di_json *n, const char *key, const char *val, size_t vlen, int depth);
const di_json *js_resolve_ref(ctx *c, const di_json *ref);
int js_json_equal(const di_json *a, const di_json *b, int depth);
uint32_t js_value_type(const di_json *v);
uint32_t js_parse_types(ctx *c, const di_json *t);
int js_conj_has(const conj *q, mem m);
int js_is_annotation(const di_json *m);
int js_expand(ctx *c, const conj *in, conj *out);
di_json *js_wrap1(ctx *c, const char *k, const di_json *v);
int js_add_alt1(ctx *c, group *g, const di_json *a, const di_json *b);
int js_negate_kw(ctx *c, const di_json *node, const di_json *m, group *g, int depth);
int js_negate(ctx *c, const di_json *n, group *g, int depth);
void js_tighten_min(int64_t *cur, int64_t v);
void js_tighten_max(int64_t *cur, int64_t v);
int js_num_bound(ctx *c, sn *s, const di_json *v, int lower, int excl);
int js_get_count(ctx *c, const di_json *m, int64_t *out);
int js_add_group_from_array(ctx *c, sn *s, const di_json *arr, int oneof);
int js_apply_member(ctx *c, sn *s, const di_json *n, int stripped);
int js_flatten(ctx *c, const conj *q, sn *s);
int js_spec_leaf(so_buf *b, char kind, const char *re, size_t n);
int32_t js_lex_spec(ctx *c, const so_buf *b, int32_t cmin, int32_t cmax);
int32_t js_lex_regex(ctx *c, const char *re);
int js_regex_lit(so_buf *b, const char *s, size_t n);
int js_string_spec(ctx *c, const sn *s, so_buf *out, int32_t *cmin, int32_t *cmax, int *plain);
int js_str_len_chars(const char *s, size_t n);
int js_value_ok(ctx *c, const sn *s, const di_json *v);
int32_t js_literal_sym(ctx *c, const di_json *v, int depth);
int js_cmp_mem(const void *a, const void *b);
int32_t js_sym_for_node(ctx *c, const di_json *n);
int32_t js_number_sym(ctx *c, const sn *s);
int32_t js_string_sym(ctx *c, const sn *s);
int32_t js_array_sym(ctx *c, const sn *s);
int32_t js_key_sym(ctx *c, const char *k, size_t n);
int js_pattern_matches(ctx *c, const char *pat, size_t plen, const char *k, size_t kn);
int32_t js_object_sym(ctx *c, const sn *s);
int js_disjoint_conj(ctx *c, const conj *x, const conj *y, int depth);
int js_prop_conj(ctx *c, const sn *s, const char *name, size_t len, conj *q, int *forbidden);
int js_has_req(const sn *s, const char *name, size_t len);
int js_disjoint(ctx *c, const sn *a, const sn *b, int depth);
int32_t js_build_plain(ctx *c, int32_t nt, const sn *s);
int32_t js_sym_for(ctx *c, const conj *q0);
void js_any_value(ctx *c);
int js_detect_draft(const di_json *root);
int js_value_check(ctx *c, const conj *q, const di_json *v, int depth);
extern const char *JS_GENERIC_STR;

#endif
