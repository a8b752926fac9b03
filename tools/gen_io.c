/* gen_io.c — JSONL prompts in, JSONL outputs out (gen_io.h). */
#include "gen_io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "structured/so_args.h"
#include "util/file.h"

void gen_write_json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void write_float(FILE *f, float v) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs(v < 0 ? "-1e999" : "null", f); /* -inf logprob: a JSON number that parses back to -inf */
}

void gen_write_output(FILE *f, size_t index, const deepinfer_request_output *o) {
    fprintf(f, "{\"index\": %zu, \"request_id\": ", index);
    if (o->request_id == UINT64_MAX) fputs("null", f); /* never queued */
    else fprintf(f, "%llu", (unsigned long long)o->request_id);
    fputs(", \"status\": ", f);
    const char *st = o->status ? deepinfer_status_name(o->status) : "ok";
    gen_write_json_string(f, st, strlen(st));
    fputs(", \"error\": ", f);
    gen_write_json_string(f, o->error, strlen(o->error));
    fprintf(f, ", \"prompt_tokens\": %zu, \"outputs\": [", o->n_prompt);
    for (size_t j = 0; j < o->n_choices; j++) {
        const deepinfer_completion *c = &o->choices[j];
        fprintf(f, "%s{\"index\": %d, \"text\": ", j ? ", " : "", c->index);
        gen_write_json_string(f, c->text, c->text_len);
        fputs(", \"token_ids\": [", f);
        for (size_t t = 0; t < c->n_tokens; t++) fprintf(f, "%s%d", t ? ", " : "", c->token_ids[t]);
        const char *fr = deepinfer_finish_reason_name(c->finish_reason);
        fputs("], \"finish_reason\": ", f);
        gen_write_json_string(f, fr, strlen(fr));
        fputs(", \"stop_reason\": ", f);
        if (c->stop_str) gen_write_json_string(f, c->stop_str, strlen(c->stop_str));
        else if (c->stop_token >= 0) fprintf(f, "%d", c->stop_token);
        else fputs("null", f);
        if (c->logprobs) {
            fputs(", \"logprobs\": [", f);
            for (size_t t = 0; t < c->n_tokens; t++) {
                if (t) fputs(", ", f);
                write_float(f, c->logprobs[t]);
            }
            fputc(']', f);
        }
        if (c->n_top) {
            fputs(", \"top_logprobs\": [", f);
            for (size_t t = 0; t < c->n_tokens; t++) {
                fputs(t ? ", [" : "[", f);
                for (int k = 0; k < c->n_top; k++) {
                    fprintf(f, "%s[%d, ", k ? ", " : "", c->top_ids[t * (size_t)c->n_top + (size_t)k]);
                    write_float(f, c->top_logprobs[t * (size_t)c->n_top + (size_t)k]);
                    fputc(']', f);
                }
                fputc(']', f);
            }
            fputc(']', f);
        }
        fprintf(f, ", \"preemptions\": %d}", c->num_preemptions);
    }
    const deepinfer_request_metrics *m = &o->metrics;
    fprintf(f,
            "], \"metrics\": {\"ttft_s\": %.6f, \"tpot_s\": %.6f, \"e2e_s\": %.6f, \"prompt_tokens\": %lld, "
            "\"output_tokens\": %lld, \"computed_tokens\": %lld, \"preemptions\": %d, \"spec_drafted\": %lld, "
            "\"spec_accepted\": %lld}}\n",
            m->ttft_s, m->tpot_s, m->e2e_s, (long long)m->prompt_tokens, (long long)m->output_tokens,
            (long long)m->computed_tokens, m->num_preemptions, (long long)m->spec_drafted, (long long)m->spec_accepted);
}

/* ---- reading ------------------------------------------------------------------ */

static int fail(char *err, size_t n, const char *msg, const char *key) {
    snprintf(err, n, "%s%s%s", key ? "sampling_params." : "", key ? key : "", msg);
    return -1;
}

static int num(const di_json *v, double *d) { return di_json_as_f64(v, d); }

/* Append a NUL-terminated copy of s to the growing block *store; returns the
 * offset or -1. Pointers into the block are fixed up by the caller at the end. */
static long stash(char **store, size_t *len, const char *s, size_t n) {
    char *b = realloc(*store, *len + n + 1);
    if (!b) return -1;
    memcpy(b + *len, s, n);
    b[*len + n] = '\0';
    *store = b;
    long at = (long)*len;
    *len += n + 1;
    return at;
}

int gen_parse_params(const di_json *obj, deepinfer_sampling_params *p, char **store, char *err, size_t errlen) {
    if (obj->type != DI_JSON_OBJECT) return fail(err, errlen, "sampling_params must be an object", NULL);
    size_t len = 0;
    long stop_at[DEEPINFER_MAX_STOP_STRINGS], type_at = -1, schema_at = -1;
    int n_stop = -1;
    *store = NULL;
    for (uint32_t i = 0; i < obj->count; i++) {
        const di_json *v = &obj->items[i];
        const char *k = v->key;
        double d = 0;
        int b = 0;
        if (!strcmp(k, "temperature") || !strcmp(k, "top_p") || !strcmp(k, "min_p") || !strcmp(k, "repetition_penalty") ||
            !strcmp(k, "presence_penalty") || !strcmp(k, "frequency_penalty")) {
            if (!num(v, &d) || !isfinite(d)) return fail(err, errlen, " must be a finite number", k);
            float *dst = !strcmp(k, "temperature") ? &p->temperature
                         : !strcmp(k, "top_p")     ? &p->top_p
                         : !strcmp(k, "min_p")     ? &p->min_p
                         : !strcmp(k, "repetition_penalty") ? &p->repetition_penalty
                         : !strcmp(k, "presence_penalty")   ? &p->presence_penalty
                                                            : &p->frequency_penalty;
            *dst = (float)d;
        } else if (!strcmp(k, "top_k") || !strcmp(k, "max_tokens") || !strcmp(k, "min_tokens") || !strcmp(k, "n") ||
                   !strcmp(k, "logprobs")) {
            int64_t x;
            if (!di_json_as_i64(v, &x) || x < -2147483647 || x > 2147483647)
                return fail(err, errlen, " must be an integer in [-2147483647, 2147483647]", k);
            int32_t *dst = !strcmp(k, "top_k") ? &p->top_k
                           : !strcmp(k, "max_tokens") ? &p->max_tokens
                           : !strcmp(k, "min_tokens") ? &p->min_tokens
                           : !strcmp(k, "n")          ? &p->n
                                                      : &p->logprobs;
            *dst = (int32_t)x;
        } else if (!strcmp(k, "seed")) {
            int64_t x;
            if (v->type == DI_JSON_NULL) continue;
            if (!di_json_as_i64(v, &x) || x < 0) /* a negative seed is refused, not wrapped to 2^64 - x */
                return fail(err, errlen, " must be an integer in [0, 9223372036854775807]", k);
            p->has_seed = 1;
            p->seed = (uint64_t)x;
        } else if (!strcmp(k, "ignore_eos") || !strcmp(k, "skip_special_tokens")) {
            if (!di_json_as_bool(v, &b)) return fail(err, errlen, " must be true or false", k);
            if (!strcmp(k, "ignore_eos")) p->ignore_eos = b;
            else p->skip_special_tokens = b;
        } else if (!strcmp(k, "stop")) {
            const di_json *arr = v;
            uint32_t cnt = v->type == DI_JSON_ARRAY ? v->count : 1;
            if (v->type != DI_JSON_ARRAY && !di_json_is_string(v))
                return fail(err, errlen, " must be a string or an array of strings", k);
            if (cnt > DEEPINFER_MAX_STOP_STRINGS) return fail(err, errlen, ": too many stop strings", k);
            n_stop = (int)cnt;
            for (uint32_t j = 0; j < cnt; j++) {
                const di_json *s = v->type == DI_JSON_ARRAY ? di_json_at(arr, j) : v;
                if (!di_json_is_string(s)) return fail(err, errlen, " must hold strings", k);
                if (memchr(s->str, '\0', s->str_len)) /* stop strings are NUL-terminated: never cut one short */
                    return fail(err, errlen, " must not hold a NUL character (\\u0000)", k);
                if ((stop_at[j] = stash(store, &len, s->str, s->str_len)) < 0) return fail(err, errlen, ": out of memory", k);
            }
        } else if (!strcmp(k, "stop_token_ids")) {
            if (v->type != DI_JSON_ARRAY || v->count > DEEPINFER_MAX_STOP_IDS)
                return fail(err, errlen, " must be an array of at most 64 ids", k);
            for (uint32_t j = 0; j < v->count; j++) {
                int64_t x;
                if (!di_json_as_i64(di_json_at(v, j), &x) || x < 0 || x > INT32_MAX)
                    return fail(err, errlen, " must hold token ids (integers in [0, 2147483647])", k);
                p->stop_ids[j] = (int32_t)x;
            }
            p->n_stop_ids = (int32_t)v->count;
        } else if (!strcmp(k, "so_args")) { /* {"schema_type", "schema" (text, or an object for json), ...} */
            di_arena arena;
            di_arena_init(&arena, 0);
            so_args a;
            di_error e = {0};
            if (so_args_from_json(v, &arena, &a, &e)) {
                di_arena_free(&arena);
                snprintf(err, errlen, "sampling_params.so_args: %s", e.msg);
                return -1;
            }
            if (memchr(a.schema, '\0', a.schema_len)) { /* the schema is passed NUL-terminated */
                di_arena_free(&arena);
                return fail(err, errlen, ": the schema must not hold a NUL character (\\u0000)", k);
            }
            static const char *const names[] = {"regex", "json", "ebnf"};
            type_at = stash(store, &len, names[a.type], strlen(names[a.type]));
            schema_at = stash(store, &len, a.schema, a.schema_len);
            di_arena_free(&arena);
            if (type_at < 0 || schema_at < 0) return fail(err, errlen, ": out of memory", k);
            p->so_whitespace_max = a.whitespace_max;
            p->so_lenient = a.lenient;
            p->so_after_think = a.start_after_think;
        } else {
            return fail(err, errlen, " is not a sampling parameter", k);
        }
    }
    if (n_stop >= 0) {
        p->n_stop = n_stop;
        for (int j = 0; j < n_stop; j++) p->stop[j] = *store + stop_at[j];
    }
    if (type_at >= 0) p->so_schema_type = *store + type_at, p->so_schema = *store + schema_at;
    return 0;
}

/* A text prompt reaches the engine as a NUL-terminated string
 * (deepinfer_prompt.text), so a NUL inside it would silently cut it short:
 * such a line is refused instead, naming the line, the field and the byte.
 * Other control characters are kept as they are. ("messages" keep NULs: the
 * chat encoder reads the JSON text itself.) */
static int has_nul(gen_request *r, const di_json *s, size_t lineno, const char *what) {
    const char *z = memchr(s->str, '\0', s->str_len);
    if (!z) return 0;
    snprintf(r->error, sizeof r->error,
             "line %zu: %s holds a NUL character (\\u0000) at byte %zu; a text prompt cannot hold NUL (give "
             "\"prompt_token_ids\" instead)",
             lineno, what, (size_t)(z - s->str));
    return 1;
}

static void read_line(gen_request *r, const char *line, size_t len, size_t lineno) {
    di_json_doc *doc = NULL;
    di_error e = {0};
    if (di_json_parse(line, len, NULL, &doc, &e)) {
        snprintf(r->error, sizeof r->error, "line %zu: %s", lineno, e.msg);
        return;
    }
    const di_json *root = doc->root;
    if (di_json_is_string(root)) {
        if (has_nul(r, root, lineno, "the prompt string")) {
        } else if ((r->text = malloc(root->str_len + 1))) {
            memcpy(r->text, root->str, root->str_len + 1);
            r->prompt.text = r->text;
        }
    } else if (root->type == DI_JSON_OBJECT) {
        const di_json *t = di_json_get(root, "prompt"), *ids = di_json_get(root, "prompt_token_ids"),
                      *msgs = di_json_get(root, "messages"), *sp = di_json_get(root, "sampling_params");
        if ((t != NULL) + (ids != NULL) + (msgs != NULL) != 1) {
            snprintf(r->error, sizeof r->error, "line %zu: give exactly one of \"prompt\", \"prompt_token_ids\", \"messages\"",
                     lineno);
        } else if (t) {
            if (!di_json_is_string(t)) snprintf(r->error, sizeof r->error, "line %zu: \"prompt\" must be a string", lineno);
            else if (has_nul(r, t, lineno, "\"prompt\"")) {
            } else if ((r->text = malloc(t->str_len + 1))) memcpy(r->text, t->str, t->str_len + 1), r->prompt.text = r->text;
        } else if (ids && ids->type != DI_JSON_ARRAY) {
            snprintf(r->error, sizeof r->error, "line %zu: \"prompt_token_ids\" must be an array of integers", lineno);
        } else if (ids) {
            r->ids = malloc(sizeof(int32_t) * (ids->count ? ids->count : 1));
            for (uint32_t i = 0; r->ids && i < ids->count && !r->error[0]; i++) {
                int64_t x;
                if (!di_json_as_i64(di_json_at(ids, i), &x) || x < 0 || x > INT32_MAX)
                    snprintf(r->error, sizeof r->error,
                             "line %zu: prompt_token_ids[%u] is not a token id (an integer in [0, 2147483647])", lineno, i);
                r->ids[i] = (int32_t)x;
            }
            r->prompt.token_ids = r->ids;
            r->prompt.n_token_ids = ids->count;
        } else { /* the chat encoder reads "messages" (and "tools") from the whole line */
            if ((r->text = malloc(len + 1))) memcpy(r->text, line, len), r->text[len] = '\0';
            r->prompt.messages = r->text;
        }
        char msg[400];
        if (!r->error[0] && sp && gen_parse_params(sp, &r->params, &r->strings, msg, sizeof msg))
            snprintf(r->error, sizeof r->error, "line %zu: %s", lineno, msg);
    } else {
        snprintf(r->error, sizeof r->error, "line %zu: expected a JSON string or object", lineno);
    }
    di_json_free(doc);
}

int gen_read_jsonl(const char *path, const deepinfer_sampling_params *defaults, gen_request **out, size_t *n, char *err,
                   size_t errlen) {
    char *buf = NULL;
    size_t len = 0;
    di_error e = {0};
    *out = NULL;
    *n = 0;
    if (di_read_file(path, 0, &buf, &len, &e)) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
    gen_request *r = calloc(lines, sizeof *r);
    if (!r) {
        free(buf);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t k = 0, lineno = 0;
    for (size_t a = 0; a < len;) {
        size_t b = a;
        while (b < len && buf[b] != '\n') b++;
        lineno++;
        size_t s = a, t = b;
        while (s < t && (buf[s] == ' ' || buf[s] == '\t' || buf[s] == '\r')) s++;
        while (t > s && (buf[t - 1] == ' ' || buf[t - 1] == '\t' || buf[t - 1] == '\r')) t--;
        if (t > s) {
            r[k].params = *defaults;
            read_line(&r[k], buf + s, t - s, lineno);
            k++;
        }
        a = b + 1;
    }
    free(buf);
    *out = r;
    *n = k;
    return 0;
}

void gen_requests_free(gen_request *r, size_t n) {
    for (size_t i = 0; r && i < n; i++) {
        free(r[i].ids);
        free(r[i].text);
        free(r[i].strings);
    }
    free(r);
}
