/*
 * json_schema_flatten.c — merge the keywords of a conjunction of schema nodes
 * (allOf members, $ref targets, siblings) into one flattened node, and
 * collect its disjunctions (anyOf, oneOf, not, if/then/else, dependencies).
 */
#include "structured/json_schema_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "structured/json_formats.h"
#include "structured/lexspec.h"

int js_conj_has(const conj *q, mem m) {
    for (uint32_t i = 0; i < q->n; i++)
        if (q->m[i] == m || (M_NODE(q->m[i]) == M_NODE(m) && !M_STRIPPED(q->m[i]))) return 1;
    return 0;
}

int js_is_annotation(const di_json *m) {
    static const char *ann[] = {"title", "description", "default", "examples", "$comment", "$schema", "$id", "id",
                                "$anchor", "readOnly", "writeOnly", "deprecated", "contentMediaType",
                                "contentEncoding", "contentSchema", "$vocabulary", "$defs", "definitions",
                                "$dynamicAnchor", "$recursiveAnchor", "example", "discriminator", NULL};
    for (int i = 0; ann[i]; i++)
        if (key_is(m, ann[i])) return 1;
    return 0;
}

/* Expand allOf / $ref (not for stripped members) into out. */
int js_expand(ctx *c, const conj *in, conj *out) {
    mem work[MAX_EXPAND];
    uint32_t nw = 0;
    for (uint32_t i = in->n; i-- > 0;) {
        if (nw >= MAX_EXPAND) return js_failf(c, DEEPINFER_ERR_LIMIT, "schema too large (allOf/$ref expansion)%s", "");
        work[nw++] = in->m[i];
    }
    while (nw) {
        mem m = work[--nw];
        const di_json *n = M_NODE(m);
        if (js_conj_has(out, m)) continue;
        if (out->n > MAX_EXPAND) return js_failf(c, DEEPINFER_ERR_LIMIT, "schema too large (allOf/$ref expansion)%s", "");
        PUSH(c, out->m, out->n, m);
        if (c->st != DEEPINFER_OK) return 0;
        if (n->type != DI_JSON_OBJECT || M_STRIPPED(m)) continue;
        const di_json *ref = get(n, "$ref");
        const di_json *all = get(n, "allOf");
        if (all) {
            if (all->type != DI_JSON_ARRAY) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "allOf must be an array%s", "");
            for (uint32_t k = all->count; k-- > 0;) {
                if (nw >= MAX_EXPAND) return js_failf(c, DEEPINFER_ERR_LIMIT, "schema too large (allOf/$ref expansion)%s", "");
                work[nw++] = (mem)&all->items[k];
            }
        }
        if (ref) {
            const di_json *t = js_resolve_ref(c, ref);
            if (!t) return 0;
            if (nw >= MAX_EXPAND) return js_failf(c, DEEPINFER_ERR_LIMIT, "schema too large (allOf/$ref expansion)%s", "");
            work[nw++] = (mem)t;
        }
    }
    return 1;
}

/* ---- negation ------------------------------------------------------------ */

void js_tighten_min(int64_t *cur, int64_t v) {
    if (v > *cur) *cur = v;
}
void js_tighten_max(int64_t *cur, int64_t v) {
    if (*cur < 0 || v < *cur) *cur = v;
}

int js_num_bound(ctx *c, sn *s, const di_json *v, int lower, int excl) {
    so_dec d;
    if (v->type != DI_JSON_NUMBER || !so_dec_parse(v->str, v->str_len, &d))
        return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "numeric bound must be a number%s", "");
    if (lower) {
        int cmp = s->has_lo ? so_dec_cmp(&d, &s->lo) : 1;
        if (cmp > 0 || (cmp == 0 && excl)) s->lo = d, s->lo_excl = excl, s->has_lo = 1;
    } else {
        int cmp = s->has_hi ? so_dec_cmp(&d, &s->hi) : -1;
        if (cmp < 0 || (cmp == 0 && excl)) s->hi = d, s->hi_excl = excl, s->has_hi = 1;
    }
    return 1;
}

int js_get_count(ctx *c, const di_json *m, int64_t *out) {
    if (!di_json_as_i64(m, out)) {
        double d;
        if (di_json_as_f64(m, &d) && d >= 0 && d < 9.2e18 && d == (double)(int64_t)d) {
            *out = (int64_t)d;
            return 1;
        }
        return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "'%s' must be a non-negative integer", m->key);
    }
    if (*out < 0) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "'%s' must be a non-negative integer", m->key);
    return 1;
}

int js_add_group_from_array(ctx *c, sn *s, const di_json *arr, int oneof) {
    if (arr->type != DI_JSON_ARRAY || arr->count == 0)
        return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "%s must be a non-empty array", oneof ? "oneOf" : "anyOf");
    group g = {0};
    g.oneof = oneof;
    for (uint32_t i = 0; i < arr->count; i++)
        if (!js_add_alt1(c, &g, &arr->items[i], NULL)) return 0;
    PUSH(c, s->groups, s->ngroups, g);
    return c->st == DEEPINFER_OK;
}

int js_apply_member(ctx *c, sn *s, const di_json *n, int stripped) {
    if (n->type == DI_JSON_TRUE) return 1;
    if (n->type == DI_JSON_FALSE) {
        s->unsat = 1;
        return 1;
    }
    if (n->type != DI_JSON_OBJECT) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "a schema must be an object or boolean%s", "");
    if (get(n, "$ref") && c->draft <= 7) return 1; /* draft-07: siblings of $ref are ignored */
    const di_json *exmin = get(n, "exclusiveMinimum"), *exmax = get(n, "exclusiveMaximum");
    afacet af = {0};
    facet of = {0};
    int has_af = 0, has_of = 0;
    for (uint32_t i = 0; i < n->count && c->st == DEEPINFER_OK; i++) {
        const di_json *m = &n->items[i];
        if (js_is_annotation(m) || key_is(m, "$ref") || key_is(m, "allOf")) continue;
        if (m->key_len && m->key[0] == 0) { /* internal keywords of synthetic nodes */
            if (m->key_len == 11 && !memcmp(m->key, "\0so-exclude", 11))
                for (uint32_t k = 0; k < m->count; k++) PUSH(c, s->excl, s->nexcl, &m->items[k]);
            else if (m->key_len == 14 && !memcmp(m->key, "\0so-notpattern", 14))
                PUSH(c, s->npats, s->nnpat, m);
            else if (m->key_len == 12 && !memcmp(m->key, "\0so-notmult", 12))
                PUSH(c, s->notmult, s->nnotmult, m);
            else if (m->key_len == 10 && !memcmp(m->key, "\0so-nonint", 10))
                s->nonint = 1;
            continue;
        }
        if (key_is(m, "type")) {
            uint32_t t = js_parse_types(c, m);
            if (c->st) return 0;
            if ((s->types & T_NUM) && !(t & T_NUM) && (t & T_INT)) s->types &= ~T_NUM;
            s->types &= t;
        } else if (key_is(m, "enum") || key_is(m, "const")) {
            const di_json *vals = m;
            uint32_t nv = 1;
            if (key_is(m, "enum")) {
                if (m->type != DI_JSON_ARRAY) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "enum must be an array%s", "");
                nv = m->count, vals = m->items;
            }
            if (!s->has_enum) {
                s->has_enum = 1;
                for (uint32_t k = 0; k < nv; k++) PUSH(c, s->enums, s->nenum, &vals[k]);
            } else {
                uint32_t w = 0;
                for (uint32_t k = 0; k < s->nenum; k++) {
                    int keep = 0;
                    for (uint32_t j = 0; j < nv && !keep; j++) keep = js_json_equal(s->enums[k], &vals[j], 0);
                    if (keep) s->enums[w++] = s->enums[k];
                }
                s->nenum = w;
            }
        } else if (key_is(m, "minLength")) {
            int64_t x;
            if (!js_get_count(c, m, &x)) return 0;
            js_tighten_min(&s->minlen, x);
        } else if (key_is(m, "maxLength")) {
            int64_t x;
            if (!js_get_count(c, m, &x)) return 0;
            js_tighten_max(&s->maxlen, x);
        } else if (key_is(m, "pattern")) {
            if (m->type != DI_JSON_STRING) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "pattern must be a string%s", "");
            PUSH(c, s->pats, s->npat, m);
        } else if (key_is(m, "format")) {
            const char *re;
            int ml;
            if (m->type != DI_JSON_STRING) continue;
            int r = so_format_regex(m->str, &re, &ml);
            if (r > 0) PUSH(c, s->fmts, s->nfmt, m);
            else if (r < 0 && !c->lenient) {
                char w[96];
                snprintf(w, sizeof w, "format '%.60s'", m->str);
                return js_unsupported(c, w);
            }
        } else if (key_is(m, "minimum")) {
            if (!js_num_bound(c, s, m, 1, exmin && exmin->type == DI_JSON_TRUE)) return 0;
        } else if (key_is(m, "maximum")) {
            if (!js_num_bound(c, s, m, 0, exmax && exmax->type == DI_JSON_TRUE)) return 0;
        } else if (key_is(m, "exclusiveMinimum")) {
            if (m->type == DI_JSON_NUMBER && !js_num_bound(c, s, m, 1, 1)) return 0;
        } else if (key_is(m, "exclusiveMaximum")) {
            if (m->type == DI_JSON_NUMBER && !js_num_bound(c, s, m, 0, 1)) return 0;
        } else if (key_is(m, "multipleOf")) {
            if (m->type != DI_JSON_NUMBER) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "multipleOf must be a number%s", "");
            PUSH(c, s->mult, s->nmult, m);
        } else if (key_is(m, "items")) {
            has_af = 1;
            if (m->type == DI_JSON_ARRAY) {
                af.prefix = m;
                const di_json *ai = get(n, "additionalItems");
                if (ai) af.rest = ai;
            } else {
                af.rest = m;
            }
        } else if (key_is(m, "prefixItems")) {
            if (m->type != DI_JSON_ARRAY) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "prefixItems must be an array%s", "");
            has_af = 1, af.prefix = m;
        } else if (key_is(m, "additionalItems")) {
            continue; /* with array-form items only */
        } else if (key_is(m, "minItems")) {
            int64_t x;
            if (!js_get_count(c, m, &x)) return 0;
            js_tighten_min(&s->minitems, x);
        } else if (key_is(m, "maxItems")) {
            int64_t x;
            if (!js_get_count(c, m, &x)) return 0;
            js_tighten_max(&s->maxitems, x);
        } else if (key_is(m, "uniqueItems")) {
            if (m->type == DI_JSON_TRUE) s->unique = 1;
        } else if (key_is(m, "properties")) {
            if (m->type != DI_JSON_OBJECT) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "properties must be an object%s", "");
            has_of = 1, of.props = m;
        } else if (key_is(m, "patternProperties")) {
            if (m->type != DI_JSON_OBJECT) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "patternProperties must be an object%s", "");
            has_of = 1, of.pprops = m;
        } else if (key_is(m, "additionalProperties")) {
            has_of = 1, of.addl = m;
        } else if (key_is(m, "required")) {
            if (m->type != DI_JSON_ARRAY) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "required must be an array%s", "");
            for (uint32_t k = 0; k < m->count; k++) {
                if (m->items[k].type != DI_JSON_STRING) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "required must list strings%s", "");
                int dup = 0;
                for (uint32_t j = 0; j < s->nreq && !dup; j++)
                    dup = s->req[j]->str_len == m->items[k].str_len && !memcmp(s->req[j]->str, m->items[k].str, m->items[k].str_len);
                if (!dup) PUSH(c, s->req, s->nreq, &m->items[k]);
            }
        } else if (key_is(m, "minProperties")) {
            int64_t x;
            if (!js_get_count(c, m, &x)) return 0;
            js_tighten_min(&s->minprops, x);
        } else if (key_is(m, "maxProperties")) {
            int64_t x;
            if (!js_get_count(c, m, &x)) return 0;
            js_tighten_max(&s->maxprops, x);
        } else if (key_is(m, "propertyNames")) {
            PUSH(c, s->propnames.m, s->propnames.n, (mem)m);
        } else if (key_is(m, "anyOf") || key_is(m, "oneOf")) {
            if (!stripped && !js_add_group_from_array(c, s, m, key_is(m, "oneOf"))) return 0;
        } else if (key_is(m, "not")) {
            if (stripped) continue;
            group g = {0};
            if (!js_negate(c, m, &g, 0)) return 0;
            PUSH(c, s->groups, s->ngroups, g);
        } else if (key_is(m, "if")) {
            if (stripped) continue;
            const di_json *th = get(n, "then"), *el = get(n, "else");
            group g = {0};
            if (!js_add_alt1(c, &g, m, th)) return 0;
            group ng = {0};
            if (!js_negate(c, m, &ng, 0)) return 0;
            for (uint32_t k = 0; k < ng.n; k++) {
                if (el) PUSH(c, ng.alts[k].m, ng.alts[k].n, (mem)el);
                PUSH(c, g.alts, g.n, ng.alts[k]);
            }
            PUSH(c, s->groups, s->ngroups, g);
        } else if (key_is(m, "then") || key_is(m, "else")) {
            continue;
        } else if (key_is(m, "dependentRequired") || key_is(m, "dependentSchemas") || key_is(m, "dependencies")) {
            if (stripped) continue;
            if (m->type != DI_JSON_OBJECT) return js_failf(c, DEEPINFER_ERR_INVALID_ARGUMENT, "%s must be an object", m->key);
            for (uint32_t k = 0; k < m->count; k++) {
                const di_json *d = &m->items[k];
                group g = {0};
                di_json *f = js_mk(c, DI_JSON_FALSE);
                di_json *props = js_mk_obj(c, 1);
                if (!f || !props) return 0;
                js_set_member(props, 0, d->key, d->key_len, f);
                if (!js_add_alt1(c, &g, js_wrap1(c, "properties", props), NULL)) return 0;
                di_json *ks = js_mk_str(c, d->key, d->key_len);
                di_json *req = js_mk(c, DI_JSON_ARRAY);
                if (!ks || !req) return 0;
                req->items = ks, req->count = 1;
                di_json *rq = js_wrap1(c, "required", req);
                if (d->type == DI_JSON_ARRAY) {
                    if (!js_add_alt1(c, &g, rq, js_wrap1(c, "required", d))) return 0;
                } else {
                    if (!js_add_alt1(c, &g, rq, d)) return 0;
                }
                PUSH(c, s->groups, s->ngroups, g);
            }
        } else if (key_is(m, "unevaluatedProperties") || key_is(m, "unevaluatedItems")) {
            if (m->type == DI_JSON_TRUE || (m->type == DI_JSON_OBJECT && m->count == 0)) continue;
            if (!c->lenient) return js_unsupported(c, m->key);
        } else if (key_is(m, "contains")) {
            int64_t mn = 1, mx = -1;
            const di_json *a = get(n, "minContains"), *b = get(n, "maxContains");
            if (c->draft >= 2019 && a && !js_get_count(c, a, &mn)) return 0;
            if (c->draft >= 2019 && b && !js_get_count(c, b, &mx)) return 0;
            if (mn == 0 && mx < 0) continue; /* always satisfied */
            if (s->contains) {
                if (!c->lenient) return js_unsupported(c, "contains in several allOf branches");
                continue;
            }
            s->contains = m, s->minc = mn, s->maxc = mx;
        } else if (key_is(m, "minContains") || key_is(m, "maxContains")) {
            continue; /* read with contains; alone they do nothing */
        } else if (key_is(m, "$dynamicRef") || key_is(m, "$recursiveRef")) {
            if (!c->lenient) return js_unsupported(c, m->key);
        }
        /* anything else: not a validation keyword of the supported drafts — an annotation */
    }
    if (has_af) PUSH(c, s->af, s->naf, af);
    if (has_of) PUSH(c, s->of, s->nof, of);
    return c->st == DEEPINFER_OK;
}

int js_flatten(ctx *c, const conj *q, sn *s) {
    memset(s, 0, sizeof *s);
    s->types = T_ALL;
    s->maxlen = s->maxitems = s->maxprops = -1;
    if (!js_expand(c, q, &s->members)) return 0;
    for (uint32_t i = 0; i < s->members.n && c->st == DEEPINFER_OK; i++)
        if (!js_apply_member(c, s, M_NODE(s->members.m[i]), M_STRIPPED(s->members.m[i]))) return 0;
    return c->st == DEEPINFER_OK;
}

/* ---- lexeme specs -------------------------------------------------------- */

