/*
 * so_args.c — parse so_args and dispatch compilation to the front ends.
 */
#include "structured/so_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/json_write.h"

deepinfer_status so_args_from_json(const di_json *obj, di_arena *a, so_args *out, di_error *err) {
    memset(out, 0, sizeof *out);
    out->whitespace_max = -1;
    if (!obj || obj->type != DI_JSON_OBJECT) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "so_args must be a JSON object");
    int have_type = 0, have_schema = 0;
    const di_json *schema = NULL;
    for (uint32_t i = 0; i < obj->count; i++) {
        const di_json *m = &obj->items[i];
        if (!strcmp(m->key, "schema_type")) {
            if (m->type != DI_JSON_STRING) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "so_args.schema_type must be a string");
            if (!strcmp(m->str, "regex")) out->type = SO_SCHEMA_REGEX;
            else if (!strcmp(m->str, "json")) out->type = SO_SCHEMA_JSON;
            else if (!strcmp(m->str, "ebnf")) out->type = SO_SCHEMA_EBNF;
            else return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "so_args.schema_type '%s' is not one of regex, json, ebnf", m->str);
            have_type = 1;
        } else if (!strcmp(m->key, "schema")) {
            schema = m, have_schema = 1;
        } else if (!strcmp(m->key, "whitespace_max")) {
            int64_t w;
            if (!di_json_as_i64(m, &w) || w < 0 || w > 1000)
                return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "so_args.whitespace_max must be an integer in [0, 1000]");
            out->whitespace_max = (int)w;
        } else if (!strcmp(m->key, "lenient") || !strcmp(m->key, "start_after_think")) {
            int b;
            if (!di_json_as_bool(m, &b)) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "so_args.%s must be a boolean", m->key);
            if (m->key[0] == 'l') out->lenient = b;
            else out->start_after_think = b;
        } else {
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "so_args: unknown member '%s'", m->key);
        }
    }
    if (!have_type) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "so_args.schema_type is missing");
    if (!have_schema) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "so_args.schema is missing");
    if (schema->type == DI_JSON_STRING) {
        out->schema = schema->str, out->schema_len = schema->str_len;
    } else if (out->type == SO_SCHEMA_JSON && (schema->type == DI_JSON_OBJECT || schema->type == DI_JSON_TRUE ||
                                               schema->type == DI_JSON_FALSE)) {
        so_buf b = {0};
        if (!so_json_write(&b, schema, SO_JSON_COMPACT)) {
            free(b.p);
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        }
        char *s = di_arena_strndup(a, b.p, b.n);
        free(b.p);
        if (!s) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        out->schema = s, out->schema_len = b.n;
    } else {
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "so_args.schema must be a string%s",
                            out->type == SO_SCHEMA_JSON ? " or a JSON schema object" : "");
    }
    return DEEPINFER_OK;
}

deepinfer_status so_compile(so_vocab *v, const so_args *args, so_grammar **out, di_error *err) {
    so_limits lim = {0};
    lim.whitespace_max = args->whitespace_max;
    lim.lenient = args->lenient;
    so_gb b;
    so_gb_init(&b, &lim);
    int32_t root = 0;
    deepinfer_status st = DEEPINFER_OK;
    switch (args->type) {
    case SO_SCHEMA_REGEX: {
        /* validate here so the error names the regex, then one lexeme */
        di_arena a;
        di_arena_init(&a, 0);
        so_rx *rx = NULL;
        st = so_rx_parse(&a, args->schema, args->schema_len, SO_RX_FULL, &rx, err);
        di_arena_free(&a);
        if (st != DEEPINFER_OK) break;
        char *spec = malloc(args->schema_len + 24);
        if (!spec) {
            st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        int h = snprintf(spec, 24, "R%zu:", args->schema_len);
        memcpy(spec + h, args->schema, args->schema_len);
        root = so_gb_nt(&b);
        int32_t t = so_gb_lex(&b, spec, (size_t)h + args->schema_len, 0, -1);
        free(spec);
        so_gb_prod(&b, root, &t, 1);
        break;
    }
    case SO_SCHEMA_EBNF:
        st = so_gbnf_build(args->schema, args->schema_len, &b, &root, err);
        break;
    case SO_SCHEMA_JSON:
        st = so_json_schema_build(args->schema, args->schema_len, &lim, v, &b, &root, err);
        break;
    default:
        st = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "unknown schema type %d", (int)args->type);
    }
    if (st == DEEPINFER_OK) st = so_grammar_compile(&b, root, v, &lim, out, err);
    so_gb_free(&b);
    return st;
}
