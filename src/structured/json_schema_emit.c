/*
 * json_schema_emit.c — the grammar for one flattened schema node: lexeme specs
 * for strings (patterns, formats, lengths) and numbers (exact decimal bounds,
 * multipleOf), enums, arrays, objects (named keys in order, then pattern and
 * additional keys, min/maxProperties), and the oneOf exclusivity check.
 */
#include "structured/json_schema_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "structured/json_formats.h"
#include "structured/lexspec.h"

int js_spec_leaf(so_buf *b, char kind, const char *re, size_t n) {
    char h[32];
    snprintf(h, sizeof h, "%c%zu:", kind, n);
    return so_buf_puts(b, h) && so_buf_put(b, re, n);
}

int32_t js_lex_spec(ctx *c, const so_buf *b, int32_t cmin, int32_t cmax) {
    return so_gb_lex(c->b, b->p, b->n, cmin, cmax);
}

int32_t js_lex_regex(ctx *c, const char *re) {
    so_buf b = {0};
    js_spec_leaf(&b, 'R', re, strlen(re));
    int32_t r = js_lex_spec(c, &b, 0, -1);
    free(b.p);
    return r;
}

/* regex text matching exactly the bytes s (escaped) */
int js_regex_lit(so_buf *b, const char *s, size_t n) {
    char *tmp = malloc(n * 4 + 8);
    if (!tmp) return 0;
    long l = so_rx_escape(s, n, tmp, n * 4 + 8);
    int ok = l >= 0 && so_buf_put(b, tmp, (size_t)l);
    free(tmp);
    return ok;
}

/* ---- string constraints -------------------------------------------------- */

const char *JS_GENERIC_STR = "\"([^\"\\\\\\x00-\\x1F]|\\\\([\"\\\\/bfnrt]|u[0-9a-fA-F]{4}))*\"";

/* Build the spec for strings under s's constraints. *plain = 1 when it is the
 * generic string (any escapes). */
int js_string_spec(ctx *c, const sn *s, so_buf *out, int32_t *cmin, int32_t *cmax, int *plain) {
    *cmin = s->minlen > 0 ? (int32_t)(s->minlen > INT32_MAX ? INT32_MAX : s->minlen) : 0;
    *cmax = s->maxlen >= 0 ? (int32_t)(s->maxlen > INT32_MAX ? INT32_MAX : s->maxlen) : -1;
    int nparts = (int)(s->npat + s->nfmt);
    *plain = 0;
    if (!nparts && !s->nnpat && !*cmin && *cmax < 0) {
        *plain = 1;
        return js_spec_leaf(out, 'R', JS_GENERIC_STR, strlen(JS_GENERIC_STR));
    }
    /* excluded literal strings are subtracted by the caller (enum path) */
    for (uint32_t k = 0; k < s->nnpat; k++) so_buf_puts(out, "-");
    for (int k = 1; k < (nparts ? nparts : 1); k++) so_buf_puts(out, "&");
    if (!nparts) js_spec_leaf(out, 'J', "[\\s\\S]*", 7);
    for (uint32_t k = 0; k < s->npat; k++) {
        const di_json *p = s->pats[k];
        /* validate early so the error names the pattern */
        di_arena a;
        di_arena_init(&a, 0);
        so_rx *rx;
        di_error e = {0};
        deepinfer_status st = so_rx_parse(&a, p->str, p->str_len, SO_RX_SEARCH, &rx, &e);
        di_arena_free(&a);
        if (st != DEEPINFER_OK) {
            if (c->st == DEEPINFER_OK) c->st = di_error_set(c->err, st, "json schema: pattern \"%.100s\": %s", p->str, e.msg);
            return 0;
        }
        js_spec_leaf(out, 'S', p->str, p->str_len);
    }
    for (uint32_t k = 0; k < s->nfmt; k++) {
        const char *re;
        int ml;
        const char *ex = NULL;
        so_format_regex(s->fmts[k]->str, &re, &ml);
        so_format_exclude(s->fmts[k]->str, &ex);
        if (ex) so_buf_puts(out, "-");
        js_spec_leaf(out, 'J', re, strlen(re));
        if (ex) js_spec_leaf(out, 'S', ex, strlen(ex));
        if (ml >= 0 && (*cmax < 0 || ml < *cmax)) *cmax = ml;
    }
    for (uint32_t k = 0; k < s->nnpat; k++) {
        const di_json *p = s->npats[k];
        if (p->type != DI_JSON_STRING) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "pattern must be a string%s", "");
        js_spec_leaf(out, 'S', p->str, p->str_len);
    }
    if (*cmax >= 0 && *cmin > *cmax) return 0;
    return 1;
}

/* ---- enum values --------------------------------------------------------- */

int js_str_len_chars(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* Does scalar value v satisfy s (ignoring enum)? -1 = cannot tell. */
int js_value_ok(ctx *c, const sn *s, const di_json *v) {
    uint32_t vt = js_value_type(v);
    if (!(vt & s->types)) return 0;
    if (vt == T_NUM && !(s->types & T_NUM)) return 0;
    for (uint32_t k = 0; k < s->nexcl; k++)
        if (js_json_equal(s->excl[k], v, 0)) return 0;
    if (vt & T_STR) {
        int L = js_str_len_chars(v->str, v->str_len);
        if (L < s->minlen || (s->maxlen >= 0 && L > s->maxlen)) return 0;
        if (s->npat || s->nfmt || s->nnpat) {
            so_buf spec = {0}, enc = {0};
            int32_t cmin, cmax;
            int plain;
            int ok = js_string_spec(c, s, &spec, &cmin, &cmax, &plain);
            if (ok) ok = so_json_write_string(&enc, v->str, v->str_len);
            int r = -1;
            if (ok) {
                uint32_t gid;
                so_dfa *d;
                int owned;
                if (so_vocab_lexeme(c->v, spec.p, spec.n, &gid, &d, &owned, c->err) == DEEPINFER_OK) {
                    r = so_dfa_matches(d, (const uint8_t *)enc.p, enc.n);
                    if (owned) so_dfa_free(d);
                } else {
                    c->st = c->err ? c->err->code : DEEPINFER_ERR_INVALID_ARGUMENT;
                }
            }
            free(spec.p), free(enc.p);
            if (r <= 0) return r < 0 ? -1 : 0;
        }
    }
    if (vt & (T_NUM | T_INT)) {
        so_dec d;
        if (!so_dec_parse(v->str, v->str_len, &d)) return -1;
        if (s->has_lo) {
            int cmp = so_dec_cmp(&d, &s->lo);
            if (cmp < 0 || (cmp == 0 && s->lo_excl)) return 0;
        }
        if (s->has_hi) {
            int cmp = so_dec_cmp(&d, &s->hi);
            if (cmp > 0 || (cmp == 0 && s->hi_excl)) return 0;
        }
        for (uint32_t k = 0; k < s->nnotmult; k++) {
            double x = v->num, y = s->notmult[k]->num;
            if (!so_dec_is_int(&d)) continue; /* a non-integer is never a multiple of an integer */
            if (y == 0 || fabs(x) > 9e15 || fabs(y) > 9e15) return -1;
            if ((long long)x % (long long)y == 0) return 0;
        }
        for (uint32_t k = 0; k < s->nmult; k++) {
            so_dec m;
            if (!so_dec_parse(s->mult[k]->str, s->mult[k]->str_len, &m)) return -1;
            /* exact check only for integers */
            if (!so_dec_is_int(&d) || !so_dec_is_int(&m)) return -1;
            double x = v->num, y = s->mult[k]->num;
            if (y == 0 || fabs(x) > 9e15 || fabs(y) > 9e15 || x != (double)(long long)x) return -1;
            if ((long long)x % (long long)y) return 0;
        }
    }
    if (vt & T_ARR) {
        if ((int64_t)v->count < s->minitems || (s->maxitems >= 0 && (int64_t)v->count > s->maxitems)) return 0;
        if (s->unique)
            for (uint32_t i = 0; i < v->count; i++)
                for (uint32_t j = i + 1; j < v->count; j++)
                    if (js_json_equal(&v->items[i], &v->items[j], 0)) return 0;
        for (uint32_t i = 0; i < v->count; i++) {
            conj q = {0};
            for (uint32_t k = 0; k < s->naf; k++) {
                const afacet *f = &s->af[k];
                if (f->prefix && i < f->prefix->count) PUSH(c, q.m, q.n, (mem)&f->prefix->items[i]);
                else if (f->rest) PUSH(c, q.m, q.n, (mem)f->rest);
            }
            int r = q.n ? js_value_check(c, &q, &v->items[i], 1) : 1;
            if (r <= 0) return r;
        }
    }
    if (vt & T_OBJ) {
        if ((int64_t)v->count < s->minprops || (s->maxprops >= 0 && (int64_t)v->count > s->maxprops)) return 0;
        for (uint32_t r = 0; r < s->nreq; r++) {
            int found = 0;
            for (uint32_t i = 0; i < v->count && !found; i++)
                found = v->items[i].key_len == s->req[r]->str_len && !memcmp(v->items[i].key, s->req[r]->str, v->items[i].key_len);
            if (!found) return 0;
        }
        if (s->propnames.n) return -1;
        for (uint32_t i = 0; i < v->count; i++) {
            conj q = {0};
            int forbidden = 0;
            if (!js_prop_conj(c, s, v->items[i].key, v->items[i].key_len, &q, &forbidden)) return -1;
            int r = q.n ? js_value_check(c, &q, &v->items[i], 1) : 1;
            if (r <= 0) return r;
        }
    }
    return 1;
}

/* Does value v satisfy the conjunction q (all keywords, disjunctions
 * included)? -1 when it cannot be decided here. Used to filter enum values
 * and in the oneOf checks; depth-limited. */
int js_value_check(ctx *c, const conj *q, const di_json *v, int depth) {
    if (depth > 16) return -1;
    sn s;
    if (!js_flatten(c, q, &s)) return -1;
    if (s.unsat) return 0;
    if (s.has_enum) {
        int in = 0;
        for (uint32_t k = 0; k < s.nenum && !in; k++) in = js_json_equal(s.enums[k], v, 0);
        if (!in) return 0;
    }
    int r = js_value_ok(c, &s, v);
    if (r <= 0) return r;
    for (uint32_t g = 0; g < s.ngroups; g++) {
        int hits = 0, unknown = 0;
        for (uint32_t a = 0; a < s.groups[g].n; a++) {
            conj alt = {0};
            for (uint32_t k = 0; k < s.members.n; k++) PUSH(c, alt.m, alt.n, s.members.m[k] | 1);
            for (uint32_t k = 0; k < s.groups[g].alts[a].n; k++) PUSH(c, alt.m, alt.n, s.groups[g].alts[a].m[k]);
            int ra = js_value_check(c, &alt, v, depth + 1);
            if (ra < 0) unknown = 1;
            else hits += ra;
        }
        if (unknown) return -1;
        if (s.groups[g].oneof ? hits != 1 : hits == 0) return 0;
    }
    return 1;
}

int32_t js_literal_sym(ctx *c, const di_json *v, int depth);

int32_t js_literal_sym(ctx *c, const di_json *v, int depth) {
    if (depth > MAX_DEPTH) return js_failf(c, DEEPINFER_ERR_LIMIT, "enum value nested too deeply%s", ""), 0;
    if (v->type == DI_JSON_ARRAY || v->type == DI_JSON_OBJECT) {
        int32_t nt = so_gb_nt(c->b);
        int obj = v->type == DI_JSON_OBJECT;
        uint32_t n = v->count;
        int32_t *syms = malloc((4 * (size_t)n + 4) * sizeof *syms);
        if (!syms) return js_oom(c), 0;
        uint32_t k = 0;
        syms[k++] = obj ? c->s_lbrace : c->s_lbrack;
        for (uint32_t i = 0; i < n && c->st == DEEPINFER_OK; i++) {
            if (i) syms[k++] = c->s_comma;
            if (obj) {
                so_buf re = {0}, enc = {0};
                so_json_write_string(&enc, v->items[i].key, v->items[i].key_len);
                js_regex_lit(&re, enc.p, enc.n);
                so_buf_puts(&re, c->wsre), so_buf_puts(&re, ":"), so_buf_puts(&re, c->wsre);
                syms[k++] = js_lex_regex(c, re.p);
                free(re.p), free(enc.p);
            }
            syms[k++] = js_literal_sym(c, &v->items[i], depth + 1);
        }
        syms[k++] = obj ? c->s_rbrace : c->s_rbrack;
        so_gb_prod(c->b, nt, syms, k);
        free(syms);
        return nt;
    }
    so_buf re = {0};
    if (v->type == DI_JSON_NUMBER) {
        so_dec d;
        if (so_dec_parse(v->str, v->str_len, &d)) so_number_eq_regex(&re, &d);
        else js_regex_lit(&re, v->str, v->str_len);
    } else {
        so_buf enc = {0};
        so_json_write(&enc, v, SO_JSON_COMPACT);
        js_regex_lit(&re, enc.p, enc.n);
        free(enc.p);
    }
    int32_t r = js_lex_regex(c, re.p ? re.p : "");
    free(re.p);
    return r;
}

/* ---- conjunction → nonterminal ------------------------------------------- */

int32_t js_number_sym(ctx *c, const sn *s) {
    int integer = !(s->types & T_NUM);
    if (s->nonint && integer) return INT32_MIN;
    /* draft-04 counts 1.0 as a number, not an integer */
    const char *intre = c->draft <= 4 ? "-?(0|[1-9][0-9]*)" : "-?(0|[1-9][0-9]*)(\\.0)?";
    if (!s->has_lo && !s->has_hi && !s->nmult && !s->nexcl && !s->nonint && !s->nnotmult) return integer ? js_lex_regex(c, intre) : c->s_num;
    so_buf spec = {0}, parts = {0};
    int nparts = 0;
    if (integer && c->draft <= 4) {
        js_spec_leaf(&parts, 'R', intre, strlen(intre));
        nparts++;
    }
    if (s->has_lo || s->has_hi) {
        if (!so_number_range_spec(&parts, s->has_lo ? &s->lo : NULL, s->lo_excl, s->has_hi ? &s->hi : NULL, s->hi_excl, integer)) {
            free(parts.p);
            return INT32_MIN; /* empty */
        }
        nparts++;
    } else {
        const char *re = integer ? "-?(0|[1-9][0-9]*)(\\.0)?" : "-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?";
        if (s->nmult) re = integer ? "-?(0|[1-9][0-9]*)(\\.0)?" : "-?(0|[1-9][0-9]*)(\\.[0-9]+)?";
        js_spec_leaf(&parts, 'R', re, strlen(re));
        nparts++;
    }
    for (uint32_t k = 0; k < s->nnotmult; k++) {
        /* plain decimals (no exponent) minus the multiples of m */
        so_dec m;
        so_dec_parse(s->notmult[k]->str, s->notmult[k]->str_len, &m);
        long mv = 0;
        for (int i = 0; i < m.e; i++) mv = mv * 10 + (i < m.nd ? m.d[i] - '0' : 0);
        const char *re = integer ? intre : "-?(0|[1-9][0-9]*)(\\.[0-9]+)?";
        char t[48];
        snprintf(t, sizeof t, "M%ld:", mv);
        so_buf_puts(&parts, "-");
        js_spec_leaf(&parts, 'R', re, strlen(re));
        so_buf_puts(&parts, t);
        nparts++;
    }
    if (s->nonint) {
        const char *re = "-?(0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*";
        js_spec_leaf(&parts, 'R', re, strlen(re));
        nparts++;
    }
    for (uint32_t k = 0; k < s->nmult; k++) {
        so_dec m;
        const di_json *mv = s->mult[k];
        if (!so_dec_parse(mv->str, mv->str_len, &m) || !m.nd || m.neg) {
            free(parts.p);
            return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "multipleOf must be positive%s", ""), 0;
        }
        char t[64];
        if (so_dec_is_int(&m)) {
            if (m.e > 6) {
                free(parts.p);
                return js_unsupported(c, "multipleOf above 1000000"), 0;
            }
            long mv_i = 0;
            for (int i = 0; i < m.e; i++) mv_i = mv_i * 10 + (i < m.nd ? m.d[i] - '0' : 0);
            if (mv_i == 1) snprintf(t, sizeof t, "M1:");
            else snprintf(t, sizeof t, "M%ld:", mv_i);
            so_buf_puts(&parts, t);
        } else if (m.nd == 1 && m.d[0] == '1') {
            /* 10^-k: at most k fraction digits (then zeros) */
            int kdig = -m.e + 1;
            char re[96];
            snprintf(re, sizeof re, "-?(0|[1-9][0-9]*)(\\.[0-9]{1,%d}0*)?", kdig);
            js_spec_leaf(&parts, 'R', re, strlen(re));
        } else if (m.nd == 1 && m.d[0] == '5' && m.e == 0) {
            js_spec_leaf(&parts, 'R', "-?(0|[1-9][0-9]*)(\\.(0+|50*))?", 30);
        } else {
            free(parts.p);
            char w[96];
            snprintf(w, sizeof w, "multipleOf %.40s", mv->str);
            return js_unsupported(c, w), 0;
        }
        nparts++;
    }
    for (uint32_t k = 0; k < s->nexcl; k++)
        if (s->excl[k]->type == DI_JSON_NUMBER) so_buf_puts(&spec, "-");
    for (int k = 1; k < nparts; k++) so_buf_puts(&spec, "&");
    so_buf_put(&spec, parts.p, parts.n);
    for (uint32_t k = 0; k < s->nexcl; k++)
        if (s->excl[k]->type == DI_JSON_NUMBER) {
            so_dec d;
            so_buf re = {0};
            if (so_dec_parse(s->excl[k]->str, s->excl[k]->str_len, &d)) so_number_eq_regex(&re, &d);
            js_spec_leaf(&spec, 'R', re.p ? re.p : "", re.n);
            free(re.p);
        }
    int32_t r = js_lex_spec(c, &spec, 0, -1);
    free(spec.p), free(parts.p);
    return r;
}

int32_t js_string_sym(ctx *c, const sn *s) {
    so_buf spec = {0}, full = {0};
    int32_t cmin, cmax;
    int plain;
    if (!js_string_spec(c, s, &spec, &cmin, &cmax, &plain)) {
        free(spec.p);
        return INT32_MIN;
    }
    uint32_t nex = 0;
    for (uint32_t k = 0; k < s->nexcl; k++) nex += s->excl[k]->type == DI_JSON_STRING;
    if (nex) {
        for (uint32_t k = 0; k < nex; k++) so_buf_puts(&full, plain && cmax < 0 ? "~" : "-");
        if (plain) { /* canonical encoding so that excluded values cannot be spelled differently */
            free(spec.p);
            spec = (so_buf){0};
            js_spec_leaf(&spec, 'J', "[\\s\\S]*", 7);
        }
        so_buf_put(&full, spec.p, spec.n);
        for (uint32_t k = 0; k < s->nexcl; k++)
            if (s->excl[k]->type == DI_JSON_STRING) {
                so_buf enc = {0}, re = {0};
                so_json_write_string(&enc, s->excl[k]->str, s->excl[k]->str_len);
                js_regex_lit(&re, enc.p, enc.n);
                js_spec_leaf(&full, 'R', re.p, re.n);
                free(enc.p), free(re.p);
            }
        free(spec.p);
        spec = full;
    }
    int32_t r = js_lex_spec(c, &spec, cmin, cmax);
    free(spec.p);
    return r;
}

/* array: positions 0..; per-position conj */
/* Arrays with `contains`: states (items so far, matching items so far);
 * each element is either the item schema and the contains schema, or the
 * item schema and its negation. */
static int32_t array_contains_sym(ctx *c, const sn *s) {
    uint32_t np = 0;
    for (uint32_t k = 0; k < s->naf; k++)
        if (s->af[k].prefix && s->af[k].prefix->count > np) np = s->af[k].prefix->count;
    int64_t minI = s->minitems, maxI = s->maxitems, minC = s->minc, maxC = s->maxc;
    if (maxI >= 0 && (int64_t)np > maxI) np = (uint32_t)maxI;
    int64_t satur = (int64_t)np > minI ? (int64_t)np : minI;
    if (satur < 1) satur = 1;
    int64_t B = maxI >= 0 ? maxI : satur;
    int64_t K = maxC >= 0 ? maxC : minC;
    if ((B + 1) * (K + 1) > 20000) return js_failf(c, DEEPINFER_ERR_LIMIT, "array too large for contains counting%s", ""), 0;
    di_json *neg = js_wrap1(c, "not", s->contains);
    if (!neg) return 0;
    /* element symbols: per prefix position, then the rest (index np) */
    int32_t *em = malloc(((size_t)np + 1) * sizeof *em), *en = malloc(((size_t)np + 1) * sizeof *en);
    if (!em || !en) {
        free(em), free(en);
        return js_oom(c), 0;
    }
    for (uint32_t i = 0; i <= np && c->st == DEEPINFER_OK; i++) {
        conj q = {0};
        int dead = 0;
        for (uint32_t k = 0; k < s->naf; k++) {
            const afacet *f = &s->af[k];
            const di_json *sch = f->prefix && i < f->prefix->count && i < np ? &f->prefix->items[i] : f->rest;
            if (sch) {
                if (sch->type == DI_JSON_FALSE) dead = 1;
                PUSH(c, q.m, q.n, (mem)sch);
            }
        }
        em[i] = en[i] = -1;
        if (dead) continue;
        conj qm = {0}, qn = {0};
        for (uint32_t k = 0; k < q.n; k++) {
            PUSH(c, qm.m, qm.n, q.m[k]);
            PUSH(c, qn.m, qn.n, q.m[k]);
        }
        PUSH(c, qm.m, qm.n, (mem)s->contains);
        PUSH(c, qn.m, qn.n, (mem)neg);
        em[i] = js_sym_for(c, &qm);
        en[i] = js_sym_for(c, &qn);
    }
    int32_t *st = malloc((size_t)(B + 1) * (size_t)(K + 1) * sizeof *st);
    if (!st || c->st != DEEPINFER_OK) {
        free(em), free(en), free(st);
        return c->st == DEEPINFER_OK ? (js_oom(c), 0) : 0;
    }
    for (int64_t i = 0; i <= B; i++)
        for (int64_t k = 0; k <= K; k++) st[i * (K + 1) + k] = so_gb_nt(c->b);
    for (int64_t i = 0; i <= B; i++)
        for (int64_t k = 0; k <= K; k++) {
            int32_t me = st[i * (K + 1) + k];
            if (i >= minI && k >= minC) so_gb_prod(c->b, me, NULL, 0);
            if (maxI >= 0 && i >= maxI) continue;
            uint32_t pos = i < (int64_t)np ? (uint32_t)i : np;
            int64_t i2 = maxI < 0 && i + 1 > satur ? satur : i + 1;
            for (int match = 0; match < 2; match++) {
                int32_t el = match ? em[pos] : en[pos];
                if (el < 0) continue;
                int64_t k2 = k + match;
                if (maxC >= 0 && k2 > maxC) continue;
                if (maxC < 0 && k2 > K) k2 = K;
                int32_t seq[3];
                uint32_t L = 0;
                if (i > 0) seq[L++] = c->s_comma;
                seq[L++] = el;
                seq[L++] = st[i2 * (K + 1) + k2];
                so_gb_prod(c->b, me, seq, L);
            }
        }
    int32_t nt = so_gb_nt(c->b);
    int32_t s3[3] = {c->s_lbrack, st[0], c->s_rbrack};
    so_gb_prod(c->b, nt, s3, 3);
    free(em), free(en), free(st);
    return nt;
}

int32_t js_array_sym(ctx *c, const sn *s) {
    if (s->unique && s->maxitems != 0 && s->maxitems != 1 && !c->lenient) return js_unsupported(c, "uniqueItems"), 0;
    if (s->contains) return array_contains_sym(c, s);
    uint32_t np = 0;
    for (uint32_t k = 0; k < s->naf; k++)
        if (s->af[k].prefix && s->af[k].prefix->count > np) np = s->af[k].prefix->count;
    int64_t minI = s->minitems, maxI = s->maxitems;
    if (maxI >= 0 && (int64_t)np > maxI) np = (uint32_t)maxI;
    /* symbol for the items past the prefix */
    conj rest = {0};
    int rest_false = 0;
    for (uint32_t k = 0; k < s->naf; k++)
        if (s->af[k].rest) {
            if (s->af[k].rest->type == DI_JSON_FALSE) rest_false = 1;
            PUSH(c, rest.m, rest.n, (mem)s->af[k].rest);
        }
    int32_t *pos = malloc((np + 1) * sizeof *pos);
    if (!pos) return js_oom(c), 0;
    for (uint32_t i = 0; i < np && c->st == DEEPINFER_OK; i++) {
        conj q = {0};
        for (uint32_t k = 0; k < s->naf; k++) {
            const afacet *f = &s->af[k];
            if (f->prefix && i < f->prefix->count) PUSH(c, q.m, q.n, (mem)&f->prefix->items[i]);
            else if (f->rest) PUSH(c, q.m, q.n, (mem)f->rest);
        }
        pos[i] = q.n ? js_sym_for(c, &q) : c->nt_any;
    }
    int32_t item = rest_false ? -1 : rest.n ? js_sym_for(c, &rest) : c->nt_any;
    if (c->st != DEEPINFER_OK) {
        free(pos);
        return 0;
    }
    /* tail(i): after i items */
    int32_t next = -1; /* tail(np) */
    {
        int32_t t = so_gb_nt(c->b);
        if ((int64_t)np >= minI) so_gb_prod(c->b, t, NULL, 0);
        if (item >= 0 && (maxI < 0 || maxI > (int64_t)np)) {
            int64_t lo = minI - (int64_t)np;
            if (lo < 1) lo = 1;
            int64_t hi = maxI < 0 ? -1 : maxI - (int64_t)np;
            if (lo > 100000 || hi > 100000) {
                free(pos);
                return js_failf(c, DEEPINFER_ERR_LIMIT, "minItems/maxItems too large%s", ""), 0;
            }
            int32_t rep = so_gb_repeat(c->b, item, (int32_t)lo, (int32_t)hi, c->s_comma);
            if (np > 0) {
                int32_t s2[2] = {c->s_comma, rep};
                so_gb_prod(c->b, t, s2, 2);
            } else {
                so_gb_prod(c->b, t, &rep, 1);
            }
        }
        next = t;
    }
    for (uint32_t i = np; i-- > 0;) {
        int32_t t = so_gb_nt(c->b);
        if ((int64_t)i >= minI) so_gb_prod(c->b, t, NULL, 0);
        int32_t s3[3];
        uint32_t k = 0;
        if (i > 0) s3[k++] = c->s_comma;
        s3[k++] = pos[i];
        s3[k++] = next;
        so_gb_prod(c->b, t, s3, k);
        next = t;
    }
    free(pos);
    int32_t nt = so_gb_nt(c->b);
    int32_t s3[3] = {c->s_lbrack, next, c->s_rbrack};
    so_gb_prod(c->b, nt, s3, 3);
    return nt;
}

/* key lexeme for a named property (with the colon) */
int32_t js_key_sym(ctx *c, const char *k, size_t n) {
    so_buf enc = {0}, re = {0};
    so_json_write_string(&enc, k, n);
    js_regex_lit(&re, enc.p, enc.n);
    so_buf_puts(&re, c->wsre), so_buf_puts(&re, ":"), so_buf_puts(&re, c->wsre);
    int32_t r = js_lex_regex(c, re.p);
    free(enc.p), free(re.p);
    return r;
}

int js_pattern_matches(ctx *c, const char *pat, size_t plen, const char *k, size_t kn) {
    so_buf spec = {0}, enc = {0};
    js_spec_leaf(&spec, 'S', pat, plen);
    so_json_write_string(&enc, k, kn);
    uint32_t gid;
    so_dfa *d;
    int owned, r = -1;
    if (so_vocab_lexeme(c->v, spec.p, spec.n, &gid, &d, &owned, c->err) == DEEPINFER_OK) {
        r = so_dfa_matches(d, (const uint8_t *)enc.p, enc.n);
        if (owned) so_dfa_free(d);
    } else {
        c->st = c->err ? c->err->code : DEEPINFER_ERR_INVALID_ARGUMENT;
    }
    free(spec.p), free(enc.p);
    return r;
}

typedef struct nprop {
    const char *name;
    size_t len;
    int required;
    conj q;
} nprop;

int32_t js_object_sym(ctx *c, const sn *s) {
    /* named properties in first-seen order */
    nprop *props = NULL;
    uint32_t np = 0;
    const facet *pf = NULL;
    for (uint32_t k = 0; k < s->nof; k++) {
        if (s->of[k].pprops && s->of[k].pprops->count) {
            if (pf && !c->lenient) return js_unsupported(c, "patternProperties in several allOf branches"), 0;
            pf = &s->of[k];
        }
        const di_json *p = s->of[k].props;
        for (uint32_t i = 0; p && i < p->count; i++) {
            int dup = 0;
            for (uint32_t j = 0; j < np && !dup; j++) dup = props[j].len == p->items[i].key_len && !memcmp(props[j].name, p->items[i].key, props[j].len);
            if (!dup) PUSH(c, props, np, ((nprop){p->items[i].key, p->items[i].key_len, 0, {0}}));
        }
    }
    for (uint32_t r = 0; r < s->nreq; r++) {
        int found = 0;
        for (uint32_t j = 0; j < np && !found; j++)
            if (props[j].len == s->req[r]->str_len && !memcmp(props[j].name, s->req[r]->str, props[j].len)) props[j].required = 1, found = 1;
        if (!found) PUSH(c, props, np, ((nprop){s->req[r]->str, s->req[r]->str_len, 1, {0}}));
    }
    if (c->st != DEEPINFER_OK) return 0;
    /* order: by where each property is first defined in the schema text
     * (allOf branches are merged in document order), required-only last */
    {
        size_t *off = malloc((np + 1) * sizeof *off);
        if (!off) return js_oom(c), 0;
        for (uint32_t j = 0; j < np; j++) {
            off[j] = SIZE_MAX;
            for (uint32_t k = 0; k < s->nof; k++)
                for (uint32_t i = 0; s->of[k].props && i < s->of[k].props->count; i++) {
                    const di_json *d = &s->of[k].props->items[i];
                    if (d->key_len == props[j].len && !memcmp(d->key, props[j].name, d->key_len) && d->offset &&
                        d->offset < off[j])
                        off[j] = d->offset;
                }
        }
        for (uint32_t j = 1; j < np; j++) { /* stable insertion sort */
            nprop pj = props[j];
            size_t oj = off[j];
            uint32_t i = j;
            while (i > 0 && off[i - 1] > oj) props[i] = props[i - 1], off[i] = off[i - 1], i--;
            props[i] = pj, off[i] = oj;
        }
        free(off);
    }
    /* pattern disjointness */
    if (pf && pf->pprops->count > 1) {
        for (uint32_t i = 0; i < pf->pprops->count; i++)
            for (uint32_t j = i + 1; j < pf->pprops->count; j++) {
                so_buf sp = {0};
                so_buf_puts(&sp, "&");
                js_spec_leaf(&sp, 'S', pf->pprops->items[i].key, pf->pprops->items[i].key_len);
                js_spec_leaf(&sp, 'S', pf->pprops->items[j].key, pf->pprops->items[j].key_len);
                uint32_t gid;
                so_dfa *d;
                int owned;
                deepinfer_status st = so_vocab_lexeme(c->v, sp.p, sp.n, &gid, &d, &owned, c->err);
                free(sp.p);
                if (st != DEEPINFER_OK) return c->st = st, 0;
                int empty = so_dfa_empty(d);
                if (owned) so_dfa_free(d);
                if (!empty) return js_unsupported(c, "overlapping patternProperties"), 0;
            }
    }
    /* property names constraint */
    sn pn;
    int has_pn = 0;
    so_buf pnspec = {0};
    int32_t pncmin = 0, pncmax = -1;
    if (s->propnames.n) {
        conj q = {0};
        for (uint32_t k = 0; k < s->propnames.n; k++) PUSH(c, q.m, q.n, (mem)M_NODE(s->propnames.m[k]));
        if (!js_flatten(c, &q, &pn)) return 0;
        if (pn.ngroups || pn.naf || pn.nof) return js_unsupported(c, "propertyNames with non-string keywords"), 0;
        if (pn.unsat || !(pn.types & T_STR)) {
            /* no key is allowed */
            pn.unsat = 1;
        }
        has_pn = 1;
        int plain;
        if (!pn.unsat && !pn.has_enum && !js_string_spec(c, &pn, &pnspec, &pncmin, &pncmax, &plain)) pn.unsat = 1;
    }
    /* value conj per named property */
    for (uint32_t j = 0; j < np; j++) {
        nprop *p = &props[j];
        if (has_pn) {
            di_json ks = {.type = DI_JSON_STRING, .str = p->name, .str_len = p->len, .key = ""};
            int ok;
            if (pn.unsat) ok = 0;
            else if (pn.has_enum) {
                ok = 0;
                for (uint32_t e = 0; e < pn.nenum && !ok; e++) ok = js_json_equal(pn.enums[e], &ks, 0);
            } else ok = js_value_ok(c, &pn, &ks);
            if (ok < 0) return js_unsupported(c, "propertyNames check"), 0;
            if (!ok) {
                di_json *f = js_mk(c, DI_JSON_FALSE);
                if (!f) return 0;
                PUSH(c, p->q.m, p->q.n, (mem)f);
                continue;
            }
        }
        for (uint32_t k = 0; k < s->nof; k++) {
            const facet *f = &s->of[k];
            const di_json *ps = NULL;
            for (uint32_t i = 0; f->props && i < f->props->count; i++)
                if (f->props->items[i].key_len == p->len && !memcmp(f->props->items[i].key, p->name, p->len)) ps = &f->props->items[i];
            if (ps) PUSH(c, p->q.m, p->q.n, (mem)ps);
            int matched = ps != NULL; /* properties and matching patternProperties both apply */
            for (uint32_t i = 0; f->pprops && i < f->pprops->count; i++) {
                int r = js_pattern_matches(c, f->pprops->items[i].key, f->pprops->items[i].key_len, p->name, p->len);
                if (r < 0) return 0;
                if (r) {
                    PUSH(c, p->q.m, p->q.n, (mem)&f->pprops->items[i]);
                    matched = 1;
                }
            }
            if (!matched && f->addl) PUSH(c, p->q.m, p->q.n, (mem)f->addl);
        }
    }
    if (c->st != DEEPINFER_OK) return 0;
    /* additional keys: per pattern, and the rest */
    int addl_false = 0;
    conj addl = {0};
    for (uint32_t k = 0; k < s->nof; k++)
        if (s->of[k].addl) {
            if (s->of[k].addl->type == DI_JSON_FALSE) addl_false = 1;
            PUSH(c, addl.m, addl.n, (mem)s->of[k].addl);
        }
    if (has_pn && pn.has_enum) addl_false = 1; /* keys limited to the enum: all named */
    /* named keys, as a regex alternation of their encodings */
    so_buf named = {0};
    for (uint32_t j = 0; j < np; j++) {
        so_buf enc = {0};
        so_json_write_string(&enc, props[j].name, props[j].len);
        if (j) so_buf_puts(&named, "|");
        js_regex_lit(&named, enc.p, enc.n);
        free(enc.p);
    }
    int32_t key_kinds[2 * 64 + 2], val_kinds[2 * 64 + 2];
    uint32_t nk = 0;
    uint32_t npp = pf ? pf->pprops->count : 0;
    if (npp > 64) return js_unsupported(c, "more than 64 patternProperties"), 0;
    for (uint32_t i = 0; i < npp; i++) {
        const di_json *pp = &pf->pprops->items[i];
        so_buf spec = {0};
        if (np) so_buf_puts(&spec, "-");
        if (has_pn && !pn.unsat) so_buf_puts(&spec, "&");
        js_spec_leaf(&spec, 'S', pp->key, pp->key_len);
        if (has_pn && !pn.unsat) so_buf_put(&spec, pnspec.p, pnspec.n);
        if (np) js_spec_leaf(&spec, 'R', named.p, named.n);
        if (has_pn && pn.unsat) {
            free(spec.p);
            continue;
        }
        conj q = {0};
        PUSH(c, q.m, q.n, (mem)pp);
        for (uint32_t k = 0; k < s->nof; k++)
            if (&s->of[k] != pf && s->of[k].addl) PUSH(c, q.m, q.n, (mem)s->of[k].addl);
        key_kinds[nk] = js_lex_spec(c, &spec, has_pn ? pncmin : 0, has_pn ? pncmax : -1);
        val_kinds[nk++] = js_sym_for(c, &q);
        free(spec.p);
    }
    if (!addl_false && !(has_pn && pn.unsat)) {
        so_buf spec = {0};
        int sub = np || npp;
        /* named keys only: '~' lets the mask cache use the generic string's states */
        if (sub) so_buf_puts(&spec, npp || has_pn ? "-" : "~");
        if (has_pn) so_buf_puts(&spec, "&");
        if (sub || has_pn) js_spec_leaf(&spec, 'J', "[\\s\\S]*", 7);
        else js_spec_leaf(&spec, 'R', JS_GENERIC_STR, strlen(JS_GENERIC_STR));
        if (has_pn) so_buf_put(&spec, pnspec.p, pnspec.n);
        if (sub) {
            so_buf alt = {0};
            if (np) so_buf_put(&alt, named.p, named.n);
            uint32_t u = (np ? 1 : 0) + npp;
            for (uint32_t i = 1; i < u; i++) so_buf_puts(&spec, "|");
            if (np) js_spec_leaf(&spec, 'R', alt.p, alt.n);
            for (uint32_t i = 0; i < npp; i++) js_spec_leaf(&spec, 'S', pf->pprops->items[i].key, pf->pprops->items[i].key_len);
            free(alt.p);
        }
        key_kinds[nk] = js_lex_spec(c, &spec, has_pn ? pncmin : 0, has_pn ? pncmax : -1);
        val_kinds[nk++] = addl.n ? js_sym_for(c, &addl) : c->nt_any;
        free(spec.p);
    }
    free(named.p), free(pnspec.p);
    if (c->st != DEEPINFER_OK) return 0;
    /* key symbols and value symbols of named properties */
    int32_t *ksym = malloc((np + 1) * sizeof *ksym), *vsym = malloc((np + 1) * sizeof *vsym);
    if (!ksym || !vsym) {
        free(ksym), free(vsym);
        return js_oom(c), 0;
    }
    for (uint32_t j = 0; j < np && c->st == DEEPINFER_OK; j++) {
        ksym[j] = js_key_sym(c, props[j].name, props[j].len);
        vsym[j] = props[j].q.n ? js_sym_for(c, &props[j].q) : c->nt_any;
    }
    /* counts: k in [0, cap]; cap = max(1, maxProperties or minProperties) */
    int64_t minP = s->minprops, maxP = s->maxprops;
    int64_t cap = maxP >= 0 ? maxP : minP;
    if (cap < 1) cap = 1;
    if (maxP >= 0 && cap > maxP) cap = maxP;
    if ((int64_t)(np + 1) * (cap + 1) > 50000) {
        free(ksym), free(vsym);
        return js_failf(c, DEEPINFER_ERR_LIMIT, "object too large (properties x min/maxProperties)%s", ""), 0;
    }
    uint32_t K = (uint32_t)cap + 1;
    int32_t *rest = malloc((size_t)(np + 1) * K * sizeof *rest);
    if (!rest) {
        free(ksym), free(vsym);
        return js_oom(c), 0;
    }
    /* additional(k) for k in [0, cap] */
    for (uint32_t k = 0; k < K; k++) rest[(size_t)np * K + k] = so_gb_nt(c->b);
    for (uint32_t k = 0; k < K && c->st == DEEPINFER_OK; k++) {
        int32_t a = rest[(size_t)np * K + k];
        if ((int64_t)k >= minP) so_gb_prod(c->b, a, NULL, 0);
        if (maxP >= 0 && (int64_t)k >= maxP) continue;
        int sat = (int64_t)k == cap && maxP < 0; /* count no longer matters: loop */
        for (uint32_t j = 0; j < nk; j++) {
            int32_t seq[5];
            uint32_t L = 0;
            if (k > 0) seq[L++] = c->s_comma;
            seq[L++] = key_kinds[j];
            seq[L++] = c->s_colon;
            seq[L++] = val_kinds[j];
            seq[L++] = rest[(size_t)np * K + (sat ? k : k + 1)];
            so_gb_prod(c->b, a, seq, L);
        }
    }
    for (uint32_t jj = np; jj-- > 0 && c->st == DEEPINFER_OK;) {
        for (uint32_t k = 0; k < K; k++) {
            int32_t r = so_gb_nt(c->b);
            rest[(size_t)jj * K + k] = r;
            if (!props[jj].required) so_gb_prod(c->b, r, &rest[(size_t)(jj + 1) * K + k], 1);
            if (maxP >= 0 && (int64_t)k >= maxP) continue;
            uint32_t k2 = k + 1 < K ? k + 1 : k;
            int32_t seq[4];
            uint32_t L = 0;
            if (k > 0) seq[L++] = c->s_comma;
            seq[L++] = ksym[jj];
            seq[L++] = vsym[jj];
            seq[L++] = rest[(size_t)(jj + 1) * K + k2];
            so_gb_prod(c->b, r, seq, L);
        }
    }
    int32_t nt = so_gb_nt(c->b);
    int32_t s3[3] = {c->s_lbrace, rest[0], c->s_rbrace};
    so_gb_prod(c->b, nt, s3, 3);
    free(ksym), free(vsym), free(rest);
    return nt;
}

/* conservative: 1 only if no value satisfies both */
int js_disjoint(ctx *c, const sn *a, const sn *b, int depth);

int js_disjoint_conj(ctx *c, const conj *x, const conj *y, int depth) {
    sn a, b;
    if (depth > 4) return 0;
    if (!js_flatten(c, x, &a) || !js_flatten(c, y, &b)) return 0;
    return js_disjoint(c, &a, &b, depth + 1);
}

int js_prop_conj(ctx *c, const sn *s, const char *name, size_t len, conj *q, int *forbidden) {
    *forbidden = 0;
    for (uint32_t k = 0; k < s->nof; k++) {
        const facet *f = &s->of[k];
        const di_json *ps = NULL;
        for (uint32_t i = 0; f->props && i < f->props->count; i++)
            if (f->props->items[i].key_len == len && !memcmp(f->props->items[i].key, name, len)) ps = &f->props->items[i];
        if (ps) PUSH(c, q->m, q->n, (mem)ps);
        int matched = ps != NULL;
        for (uint32_t i = 0; f->pprops && i < f->pprops->count; i++) {
            int r = js_pattern_matches(c, f->pprops->items[i].key, f->pprops->items[i].key_len, name, len);
            if (r < 0) return 0;
            if (r) {
                PUSH(c, q->m, q->n, (mem)&f->pprops->items[i]);
                matched = 1;
            }
        }
        if (!matched && f->addl) {
            if (f->addl->type == DI_JSON_FALSE) *forbidden = 1;
            PUSH(c, q->m, q->n, (mem)f->addl);
        }
    }
    return 1;
}

int js_has_req(const sn *s, const char *name, size_t len) {
    for (uint32_t r = 0; r < s->nreq; r++)
        if (s->req[r]->str_len == len && !memcmp(s->req[r]->str, name, len)) return 1;
    return 0;
}

int js_disjoint(ctx *c, const sn *a, const sn *b, int depth) {
    if (a->unsat || b->unsat) return 1;
    if (a->ngroups || b->ngroups) {
        /* disjoint only through type/enum checks below */
    }
    uint32_t common = a->types & b->types;
    if ((a->types & T_INT) && (b->types & T_NUM) && !(a->types & T_NUM)) common |= T_INT;
    if ((b->types & T_INT) && (a->types & T_NUM) && !(b->types & T_NUM)) common |= T_INT;
    if (!common) return 1;
    if (a->has_enum && b->has_enum) {
        for (uint32_t i = 0; i < a->nenum; i++)
            for (uint32_t j = 0; j < b->nenum; j++)
                if (js_json_equal(a->enums[i], b->enums[j], 0)) return 0;
        return 1;
    }
    const sn *e = a->has_enum ? a : b->has_enum ? b : NULL;
    if (e) {
        const sn *o = e == a ? b : a;
        for (uint32_t i = 0; i < e->nenum; i++) {
            if (!(js_value_type(e->enums[i]) & o->types)) continue;
            int r = js_value_ok(c, o, e->enums[i]);
            if (r != 0 || o->ngroups) return 0;
        }
        return 1;
    }
    /* every common type must be disjoint */
    for (uint32_t t = 1; t <= T_OBJ; t <<= 1) {
        if (!(common & t)) continue;
        if (t == T_OBJ) {
            int dj = 0;
            const sn *pairs[2][2] = {{a, b}, {b, a}};
            for (int w = 0; w < 2 && !dj; w++) {
                const sn *x = pairs[w][0], *y = pairs[w][1];
                for (uint32_t r = 0; r < x->nreq && !dj; r++) {
                    conj qx = {0}, qy = {0};
                    int fx, fy;
                    if (!js_prop_conj(c, y, x->req[r]->str, x->req[r]->str_len, &qy, &fy)) continue;
                    if (fy) dj = 1;
                    if (dj) break;
                    if (!js_has_req(y, x->req[r]->str, x->req[r]->str_len)) continue;
                    if (!js_prop_conj(c, x, x->req[r]->str, x->req[r]->str_len, &qx, &fx)) continue;
                    if (qx.n && qy.n && js_disjoint_conj(c, &qx, &qy, depth + 1)) dj = 1;
                }
            }
            if (!dj) return 0;
        } else if (t == T_NUM || t == T_INT) {
            /* ranges */
            int dj = 0;
            if (a->has_hi && b->has_lo) {
                int cmp = so_dec_cmp(&a->hi, &b->lo);
                if (cmp < 0 || (cmp == 0 && (a->hi_excl || b->lo_excl))) dj = 1;
            }
            if (b->has_hi && a->has_lo) {
                int cmp = so_dec_cmp(&b->hi, &a->lo);
                if (cmp < 0 || (cmp == 0 && (b->hi_excl || a->lo_excl))) dj = 1;
            }
            if (!dj) return 0;
        } else if (t == T_ARR) {
            int dj = (a->maxitems >= 0 && a->maxitems < b->minitems) || (b->maxitems >= 0 && b->maxitems < a->minitems);
            if (!dj) return 0;
        } else if (t == T_STR) {
            int dj = (a->maxlen >= 0 && a->maxlen < b->minlen) || (b->maxlen >= 0 && b->maxlen < a->minlen);
            if (!dj) return 0;
        } else {
            return 0;
        }
    }
    return 1;
}

/* The nonterminal for a flattened node without groups. */
int32_t js_build_plain(ctx *c, int32_t nt, const sn *s) {
    if (s->unsat) return nt; /* no productions: matches nothing */
    if (s->has_enum) {
        /* scalar literals in one lexeme; objects/arrays as small grammars */
        so_buf re = {0};
        int any = 0;
        for (uint32_t k = 0; k < s->nenum && c->st == DEEPINFER_OK; k++) {
            const di_json *v = s->enums[k];
            int ok = js_value_ok(c, s, v);
            if (c->st != DEEPINFER_OK) break;
            if (ok < 0) {
                free(re.p);
                return js_unsupported(c, "enum values combined with keywords that cannot be checked on them"), nt;
            }
            if (!ok) continue;
            if (v->type == DI_JSON_ARRAY || v->type == DI_JSON_OBJECT) {
                int32_t ls = js_literal_sym(c, v, 0);
                so_gb_prod(c->b, nt, &ls, 1);
                continue;
            }
            if (any) so_buf_puts(&re, "|");
            if (v->type == DI_JSON_NUMBER) {
                so_dec d;
                if (so_dec_parse(v->str, v->str_len, &d)) so_number_eq_regex(&re, &d);
                else js_regex_lit(&re, v->str, v->str_len);
            } else {
                so_buf enc = {0};
                so_json_write(&enc, v, SO_JSON_COMPACT);
                so_buf_puts(&re, "(");
                js_regex_lit(&re, enc.p, enc.n);
                so_buf_puts(&re, ")");
                free(enc.p);
            }
            any = 1;
        }
        if (any) {
            int32_t l = js_lex_regex(c, re.p);
            so_gb_prod(c->b, nt, &l, 1);
        }
        free(re.p);
        return nt;
    }
    uint32_t t = s->types;
    if (t & T_NULL) {
        int ex = 0;
        for (uint32_t k = 0; k < s->nexcl; k++) ex |= s->excl[k]->type == DI_JSON_NULL;
        if (!ex) so_gb_prod(c->b, nt, &c->s_null, 1);
    }
    if (t & T_BOOL) {
        int ext = 0, exf = 0;
        for (uint32_t k = 0; k < s->nexcl; k++) ext |= s->excl[k]->type == DI_JSON_TRUE, exf |= s->excl[k]->type == DI_JSON_FALSE;
        if (!ext) so_gb_prod(c->b, nt, &c->s_true, 1);
        if (!exf) so_gb_prod(c->b, nt, &c->s_false, 1);
    }
    if (t & (T_INT | T_NUM)) {
        int32_t ns = js_number_sym(c, s);
        if (ns != INT32_MIN && c->st == DEEPINFER_OK) so_gb_prod(c->b, nt, &ns, 1);
    }
    if (t & T_STR) {
        int32_t ss = js_string_sym(c, s);
        if (ss != INT32_MIN && c->st == DEEPINFER_OK) so_gb_prod(c->b, nt, &ss, 1);
    }
    for (uint32_t k = 0; k < s->nexcl; k++)
        if ((s->excl[k]->type == DI_JSON_ARRAY && (t & T_ARR)) || (s->excl[k]->type == DI_JSON_OBJECT && (t & T_OBJ)))
            return js_unsupported(c, "'not' of an object or array value"), nt;
    if (t & T_ARR) {
        int32_t as = js_array_sym(c, s);
        if (c->st == DEEPINFER_OK) so_gb_prod(c->b, nt, &as, 1);
    }
    if (t & T_OBJ) {
        int32_t os = js_object_sym(c, s);
        if (c->st == DEEPINFER_OK) so_gb_prod(c->b, nt, &os, 1);
    }
    return nt;
}

