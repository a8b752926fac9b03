/* eval_tasks.c — read JSONL task files into items (eval_tasks.h). */
#include "eval/eval_tasks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "structured/json_write.h"
#include "util/file.h"

const char *ev_kind_name(ev_kind k) {
    static const char *n[] = {"error", "loglikelihood", "multiple_choice", "loglikelihood_rolling", "exact_match",
                              "json_schema"};
    return k <= EV_GEN_SCHEMA ? n[k] : "?";
}

void ev_item_fail(ev_item *it, const char *name, const char *fmt, ...) {
    it->kind = EV_ERROR;
    it->error = name;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->message, sizeof it->message, fmt, ap);
    va_end(ap);
}

static int dup_str(ev_str *d, const char *s, size_t n) {
    d->p = malloc(n + 1);
    if (!d->p) return -1;
    memcpy(d->p, s, n);
    d->p[n] = 0;
    d->n = n;
    return 0;
}

/* A string member into *d: 1 if present and a string, 0 if absent, -1 (item failed) if of another type. */
static int get_str(ev_item *it, const di_json *o, const char *key, ev_str *d) {
    const di_json *v = di_json_get(o, key);
    if (!v) return 0;
    if (v->type != DI_JSON_STRING) {
        ev_item_fail(it, "bad_item", "\"%s\" must be a string, got %s", key, di_json_type_name(v->type));
        return -1;
    }
    if (dup_str(d, v->str, v->str_len)) {
        ev_item_fail(it, "out_of_memory", "out of memory");
        return -1;
    }
    return 1;
}

static void parse_item(ev_item *it, const di_json *o) {
    if (o->type != DI_JSON_OBJECT) {
        ev_item_fail(it, "bad_item", "a task line must be a JSON object, got %s", di_json_type_name(o->type));
        return;
    }
    it->constrained = -1;
    if (di_json_get(o, "choices")) {
        const di_json *c = di_json_get(o, "choices"), *a = di_json_get(o, "answer");
        int64_t ai;
        int has = get_str(it, o, "context", &it->context);
        if (has <= 0) {
            if (!has) ev_item_fail(it, "bad_item", "a multiple-choice item needs \"context\" (it may be \"\")");
            return;
        }
        if (c->type != DI_JSON_ARRAY || c->count < 1) {
            ev_item_fail(it, "bad_item", "\"choices\" must be a non-empty array of strings");
            return;
        }
        if (!a || !di_json_as_i64(a, &ai) || ai < 0 || ai >= c->count) {
            ev_item_fail(it, "bad_item", "\"answer\" must be an integer index into \"choices\" (0..%u)", c->count - 1);
            return;
        }
        it->choices = calloc(c->count, sizeof *it->choices);
        if (!it->choices) {
            ev_item_fail(it, "out_of_memory", "out of memory");
            return;
        }
        it->n_choices = (int)c->count;
        for (uint32_t i = 0; i < c->count; i++) {
            const di_json *s = &c->items[i];
            if (s->type != DI_JSON_STRING) {
                ev_item_fail(it, "bad_item", "choice %u must be a string, got %s", i, di_json_type_name(s->type));
                return;
            }
            if (!s->str_len) {
                ev_item_fail(it, "empty_continuation", "choice %u is empty: there is nothing to score", i);
                return;
            }
            if (dup_str(&it->choices[i], s->str, s->str_len)) {
                ev_item_fail(it, "out_of_memory", "out of memory");
                return;
            }
        }
        it->answer_index = (int)ai;
        it->kind = EV_MC;
    } else if (di_json_get(o, "continuation")) {
        int a = get_str(it, o, "context", &it->context);
        if (a < 0) return;
        if (!a) {
            ev_item_fail(it, "bad_item", "a loglikelihood item needs \"context\" (it may be \"\")");
            return;
        }
        if (get_str(it, o, "continuation", &it->continuation) < 0) return;
        if (!it->continuation.n) {
            ev_item_fail(it, "empty_continuation", "\"continuation\" is empty: there is nothing to score");
            return;
        }
        it->kind = EV_LL;
    } else if (di_json_get(o, "text")) {
        if (get_str(it, o, "text", &it->text) < 0) return;
        if (!it->text.n) {
            ev_item_fail(it, "empty_continuation", "\"text\" is empty: there is nothing to score");
            return;
        }
        it->kind = EV_ROLLING;
    } else if (di_json_get(o, "prompt")) {
        if (get_str(it, o, "prompt", &it->prompt) < 0) return;
        const di_json *sc = di_json_get(o, "schema"), *con = di_json_get(o, "constrained"), *stop = di_json_get(o, "stop");
        if (con && !di_json_as_bool(con, &it->constrained)) {
            ev_item_fail(it, "bad_item", "\"constrained\" must be true or false");
            return;
        }
        if (stop) {
            if (stop->type != DI_JSON_ARRAY || stop->count > EV_MAX_STOP) {
                ev_item_fail(it, "bad_item", "\"stop\" must be an array of at most %d strings", EV_MAX_STOP);
                return;
            }
            for (uint32_t i = 0; i < stop->count; i++) {
                const di_json *s = &stop->items[i];
                if (s->type != DI_JSON_STRING || !s->str_len || dup_str(&it->stop[it->n_stop++], s->str, s->str_len)) {
                    ev_item_fail(it, "bad_item", "stop string %u must be a non-empty string", i);
                    return;
                }
            }
        }
        if (sc) {
            if (sc->type == DI_JSON_STRING) {
                if (dup_str(&it->schema, sc->str, sc->str_len)) { ev_item_fail(it, "out_of_memory", "out of memory"); return; }
            } else if (sc->type == DI_JSON_OBJECT || sc->type == DI_JSON_TRUE) {
                so_buf b = {0};
                so_json_write(&b, sc, SO_JSON_COMPACT);
                int bad = !b.p || dup_str(&it->schema, b.p, b.n);
                free(b.p);
                if (bad) { ev_item_fail(it, "out_of_memory", "out of memory"); return; }
            } else {
                { ev_item_fail(it, "bad_item", "\"schema\" must be a JSON schema object or its text"); return; }
            }
            it->kind = EV_GEN_SCHEMA;
        } else {
            int a = get_str(it, o, "answer", &it->answer);
            if (a < 0) return;
            if (!a) { ev_item_fail(it, "bad_item", "a generation item needs \"answer\" or \"schema\""); return; }
            if (get_str(it, o, "regex", &it->regex) < 0) return;
            it->kind = EV_GEN_MATCH;
        }
    } else {
        ev_item_fail(it, "bad_item",
                     "unknown item: give context+continuation, context+choices+answer, text, prompt+answer or "
                     "prompt+schema");
    }
}

deepinfer_status ev_tasks_parse(const char *text, size_t len, ev_tasks *out, di_error *err) {
    memset(out, 0, sizeof *out);
    int cap = 0;
    size_t p = 0;
    for (int line = 1; p < len; line++) {
        const char *nl = memchr(text + p, '\n', len - p);
        size_t e = nl ? (size_t)(nl - text) : len, q = e;
        while (q > p && (text[q - 1] == '\r' || text[q - 1] == ' ' || text[q - 1] == '\t')) q--;
        size_t s = p;
        while (s < q && (text[s] == ' ' || text[s] == '\t')) s++;
        p = e + 1;
        if (s == q) continue;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 64;
            ev_item *ni = realloc(out->items, sizeof *ni * (size_t)cap);
            if (!ni) {
                ev_tasks_free(out);
                return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory reading the tasks");
            }
            out->items = ni;
        }
        ev_item *it = &out->items[out->n++];
        memset(it, 0, sizeof *it);
        it->line = line;
        di_json_doc *d = NULL;
        di_error je = {0};
        if (di_json_parse(text + s, q - s, NULL, &d, &je)) {
            ev_item_fail(it, "malformed_json", "%s", je.msg);
            continue;
        }
        parse_item(it, d->root);
        di_json_free(d);
    }
    return DEEPINFER_OK;
}

deepinfer_status ev_tasks_read(const char *path, ev_tasks *out, di_error *err) {
    char *t = NULL;
    size_t n = 0;
    deepinfer_status st = di_read_file(path, (size_t)1 << 30, &t, &n, err);
    if (st) return st;
    st = ev_tasks_parse(t, n, out, err);
    free(t);
    return st;
}

static void free_str(ev_str *s) { free(s->p); }

void ev_tasks_free(ev_tasks *t) {
    for (int i = 0; t->items && i < t->n; i++) {
        ev_item *it = &t->items[i];
        free_str(&it->context), free_str(&it->continuation), free_str(&it->text), free_str(&it->prompt);
        free_str(&it->answer), free_str(&it->regex), free_str(&it->schema);
        for (int c = 0; it->choices && c < it->n_choices; c++) free_str(&it->choices[c]);
        free(it->choices);
        for (int c = 0; c < it->n_stop; c++) free_str(&it->stop[c]);
    }
    free(t->items);
    memset(t, 0, sizeof *t);
}
