/* oai_request.c — OpenAI request body -> engine prompt + sampling params (oai_request.h). */
#include "serve/oai_request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tokenizer/pyjson.h"

/* Request bodies are capped by the HTTP layer; the tree may take a few times that. */
#define OAI_JSON_MAX_DEPTH 64

typedef struct pctx {
    oai_request *r;
    char *err, *param;
    size_t errlen, paramlen;
} pctx;

static int fail(pctx *c, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(pctx *c, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    snprintf(c->param, c->paramlen, "%s", param ? param : "");
    return -1;
}

/* A NUL-terminated copy of s[0..n) owned by the request; NULL when out of room or memory. */
static char *keep(oai_request *r, const char *s, size_t n) {
    if (r->n_owned >= OAI_MAX_OWNED) return NULL;
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    r->owned[r->n_owned++] = p;
    return p;
}

static char *keep_sbuf(oai_request *r, di_sbuf *b) {
    if (b->oom) {
        di_sbuf_free(b);
        return NULL;
    }
    char *p = keep(r, b->p ? b->p : "", b->n);
    di_sbuf_free(b);
    return p;
}

/* Strings inside the engine are C strings: an embedded NUL would silently cut them. */
static int string_field(pctx *c, const di_json *v, const char *name, const char **out) {
    if (v->type != DI_JSON_STRING) return fail(c, name, "%s must be a string, got %s", name, di_json_type_name(v->type));
    if (memchr(v->str, 0, v->str_len)) return fail(c, name, "%s must not contain a NUL character", name);
    if (!(*out = keep(c->r, v->str, v->str_len))) return fail(c, name, "%s: out of memory", name);
    return 0;
}

static int num_field(pctx *c, const di_json *v, const char *name, float *out) {
    double d;
    if (!di_json_as_f64(v, &d) || !isfinite(d)) return fail(c, name, "%s must be a number", name);
    *out = (float)d;
    return 0;
}

static int int_field(pctx *c, const di_json *v, const char *name, int64_t lo, int64_t hi, int32_t *out) {
    int64_t x;
    if (!di_json_as_i64(v, &x)) return fail(c, name, "%s must be an integer", name);
    if (x < lo || x > hi) return fail(c, name, "%s must be in [%lld, %lld], got %lld", name, (long long)lo, (long long)hi, (long long)x);
    *out = (int32_t)x;
    return 0;
}

static int bool_field(pctx *c, const di_json *v, const char *name, int *out) {
    if (!di_json_as_bool(v, out)) return fail(c, name, "%s must be a boolean", name);
    return 0;
}

static int parse_stop(pctx *c, const di_json *v) {
    deepinfer_sampling_params *p = &c->r->params;
    if (v->type == DI_JSON_NULL) return 0;
    if (v->type == DI_JSON_STRING) {
        p->n_stop = 1;
        return string_field(c, v, "stop", &p->stop[0]);
    }
    if (v->type != DI_JSON_ARRAY) return fail(c, "stop", "stop must be a string or an array of strings");
    if (v->count > DEEPINFER_MAX_STOP_STRINGS)
        return fail(c, "stop", "stop holds at most %d strings, got %u", DEEPINFER_MAX_STOP_STRINGS, v->count);
    for (uint32_t i = 0; i < v->count; i++) {
        if (string_field(c, &v->items[i], "stop", &p->stop[i])) return -1;
        if (!p->stop[i][0]) return fail(c, "stop", "stop[%u] is empty", i);
    }
    p->n_stop = (int32_t)v->count;
    return 0;
}

static int parse_response_format(pctx *c, const di_json *v) {
    deepinfer_sampling_params *p = &c->r->params;
    if (v->type == DI_JSON_NULL) return 0;
    const di_json *t = di_json_get(v, "type");
    if (v->type != DI_JSON_OBJECT || !t || t->type != DI_JSON_STRING)
        return fail(c, "response_format", "response_format must be an object with a \"type\"");
    if (!strcmp(t->str, "text")) return 0;
    const char *schema = NULL;
    if (!strcmp(t->str, "json_object")) {
        schema = keep(c->r, "{\"type\": \"object\"}", 18);
    } else if (!strcmp(t->str, "json_schema")) {
        const di_json *js = di_json_get(v, "json_schema");
        const di_json *s = di_json_get(js, "schema");
        if (!js || js->type != DI_JSON_OBJECT || !s || (s->type != DI_JSON_OBJECT && s->type != DI_JSON_TRUE))
            return fail(c, "response_format.json_schema.schema",
                        "response_format json_schema needs \"json_schema\": {\"name\": ..., \"schema\": {...}}");
        di_sbuf b = {0};
        di_pyjson_dump(&b, s);
        schema = keep_sbuf(c->r, &b);
    } else {
        return fail(c, "response_format.type", "response_format.type must be text, json_object or json_schema");
    }
    if (!schema) return fail(c, "response_format", "response_format: out of memory");
    p->so_schema_type = "json";
    p->so_schema = schema;
    return 0;
}

/* structured_outputs (vLLM's extra): {"json": schema | "regex": "..." | "grammar": "GBNF"}, one of them. */
static int parse_structured(pctx *c, const di_json *v) {
    deepinfer_sampling_params *p = &c->r->params;
    if (v->type == DI_JSON_NULL) return 0;
    if (v->type != DI_JSON_OBJECT || v->count != 1)
        return fail(c, "structured_outputs", "structured_outputs must be an object with one of json, regex, grammar");
    const di_json *m = &v->items[0];
    if (!strcmp(m->key, "json")) {
        di_sbuf b = {0};
        if (m->type == DI_JSON_STRING) di_sbuf_put(&b, m->str, m->str_len);
        else di_pyjson_dump(&b, m);
        if (!(p->so_schema = keep_sbuf(c->r, &b))) return fail(c, "structured_outputs", "structured_outputs: out of memory");
        p->so_schema_type = "json";
        return 0;
    }
    if (strcmp(m->key, "regex") && strcmp(m->key, "grammar"))
        return fail(c, "structured_outputs", "structured_outputs.%s is not supported (json, regex, grammar)", m->key);
    p->so_schema_type = m->key[0] == 'r' ? "regex" : "ebnf";
    return string_field(c, m, m->key[0] == 'r' ? "structured_outputs.regex" : "structured_outputs.grammar", &p->so_schema);
}

/* chat_template_kwargs: the template switches vLLM passes to DeepSeek's encoder. */
static int parse_template_kwargs(pctx *c, const di_json *v) {
    if (v->type == DI_JSON_NULL) return 0;
    if (v->type != DI_JSON_OBJECT) return fail(c, "chat_template_kwargs", "chat_template_kwargs must be an object");
    for (uint32_t i = 0; i < v->count; i++) {
        const di_json *m = &v->items[i];
        if (!strcmp(m->key, "thinking") || !strcmp(m->key, "enable_thinking")) {
            if (bool_field(c, m, "chat_template_kwargs.thinking", &c->r->prompt.thinking)) return -1;
        } else if (!strcmp(m->key, "reasoning_effort")) {
            if (string_field(c, m, "chat_template_kwargs.reasoning_effort", &c->r->prompt.reasoning_effort)) return -1;
        } else {
            return fail(c, "chat_template_kwargs", "chat_template_kwargs.%s is not supported (thinking, reasoning_effort)",
                        m->key);
        }
    }
    return 0;
}

/* The completions prompt: "text", ["text"] or [ids] (one prompt per request). */
static int parse_prompt(pctx *c, const di_json *v) {
    oai_request *r = c->r;
    if (v->type == DI_JSON_STRING) return string_field(c, v, "prompt", &r->prompt.text);
    if (v->type != DI_JSON_ARRAY || v->count == 0)
        return fail(c, "prompt", "prompt must be a string, an array of one string, or an array of token ids");
    if (v->items[0].type == DI_JSON_STRING) {
        if (v->count != 1) return fail(c, "prompt", "prompt: one prompt per request (use n for several choices)");
        return string_field(c, &v->items[0], "prompt", &r->prompt.text);
    }
    if (!(r->ids = malloc(sizeof(int32_t) * v->count))) return fail(c, "prompt", "prompt: out of memory");
    for (uint32_t i = 0; i < v->count; i++)
        if (int_field(c, &v->items[i], "prompt", 0, INT32_MAX, &r->ids[i])) return -1;
    r->prompt.token_ids = r->ids;
    r->prompt.n_token_ids = v->count;
    return 0;
}

/* messages (+ tools): {"messages": [...], "tools": [...]} as the chat encoder reads it. */
static int build_messages(pctx *c, const di_json *msgs, const di_json *tools, const di_json *tool_choice) {
    oai_request *r = c->r;
    if (!msgs) return fail(c, "messages", "messages is required");
    if (msgs->type != DI_JSON_ARRAY || msgs->count == 0) return fail(c, "messages", "messages must be a non-empty array");
    for (uint32_t i = 0; i < msgs->count; i++)
        if (msgs->items[i].type != DI_JSON_OBJECT || !di_json_is_string(di_json_get(&msgs->items[i], "role")))
            return fail(c, "messages", "messages[%u] must be an object with a string \"role\"", i);
    int use_tools = 0;
    if (tools && tools->type != DI_JSON_NULL) {
        if (tools->type != DI_JSON_ARRAY) return fail(c, "tools", "tools must be an array");
        for (uint32_t i = 0; i < tools->count; i++) {
            const di_json *f = di_json_get(&tools->items[i], "function");
            if (!f || f->type != DI_JSON_OBJECT || !di_json_is_string(di_json_get(f, "name")))
                return fail(c, "tools", "tools[%u] must be {\"type\": \"function\", \"function\": {\"name\": ...}}", i);
        }
        use_tools = tools->count > 0;
    }
    if (tool_choice && tool_choice->type != DI_JSON_NULL) {
        if (tool_choice->type == DI_JSON_STRING) {
            if (!strcmp(tool_choice->str, "none")) use_tools = 0;
            else if (strcmp(tool_choice->str, "auto") && strcmp(tool_choice->str, "required"))
                return fail(c, "tool_choice", "tool_choice must be none, auto, required or {\"type\": \"function\", ...}");
        } else if (tool_choice->type != DI_JSON_OBJECT) {
            return fail(c, "tool_choice", "tool_choice must be a string or an object");
        }
    }
    di_sbuf b = {0};
    di_sbuf_puts(&b, "{\"messages\": ");
    di_pyjson_dump(&b, msgs);
    if (use_tools) {
        di_sbuf_puts(&b, ", \"tools\": ");
        di_pyjson_dump(&b, tools);
    }
    di_sbuf_puts(&b, "}");
    if (b.p && memchr(b.p, 0, b.n)) {
        di_sbuf_free(&b);
        return fail(c, "messages", "messages must not contain a NUL character");
    }
    if (!(r->prompt.messages = keep_sbuf(r, &b))) return fail(c, "messages", "messages: out of memory");
    r->has_tools = use_tools;
    return 0;
}

static int parse_members(pctx *c, const di_json *root, int chat) {
    oai_request *r = c->r;
    deepinfer_sampling_params *p = &r->params;
    const di_json *msgs = NULL, *tools = NULL, *tool_choice = NULL, *prompt = NULL;
    int chat_logprobs = 0, top_logprobs = -1, has_max_tokens = 0;
    for (uint32_t i = 0; i < root->count; i++) {
        const di_json *v = &root->items[i];
        const char *k = v->key;
        if (memchr(k, 0, v->key_len)) return fail(c, "", "a field name contains a NUL character");
        int ok = 0;
        if (!strcmp(k, "model")) ok = v->type == DI_JSON_NULL ? 0 : string_field(c, v, k, &r->model);
        else if (chat && !strcmp(k, "messages")) msgs = v;
        else if (chat && !strcmp(k, "tools")) tools = v;
        else if (chat && !strcmp(k, "tool_choice")) tool_choice = v;
        else if (!chat && !strcmp(k, "prompt")) prompt = v;
        else if (!strcmp(k, "temperature")) ok = v->type == DI_JSON_NULL ? 0 : num_field(c, v, k, &p->temperature);
        else if (!strcmp(k, "top_p")) ok = v->type == DI_JSON_NULL ? 0 : num_field(c, v, k, &p->top_p);
        else if (!strcmp(k, "min_p")) ok = num_field(c, v, k, &p->min_p);
        else if (!strcmp(k, "repetition_penalty")) ok = num_field(c, v, k, &p->repetition_penalty);
        else if (!strcmp(k, "presence_penalty")) ok = v->type == DI_JSON_NULL ? 0 : num_field(c, v, k, &p->presence_penalty);
        else if (!strcmp(k, "frequency_penalty")) ok = v->type == DI_JSON_NULL ? 0 : num_field(c, v, k, &p->frequency_penalty);
        else if (!strcmp(k, "top_k")) ok = int_field(c, v, k, -1, INT32_MAX, &p->top_k);
        else if (!strcmp(k, "max_tokens") || !strcmp(k, "max_completion_tokens")) {
            if (v->type != DI_JSON_NULL) ok = int_field(c, v, k, 1, INT32_MAX, &p->max_tokens), has_max_tokens = 1;
        } else if (!strcmp(k, "min_tokens")) ok = int_field(c, v, k, 0, INT32_MAX, &p->min_tokens);
        else if (!strcmp(k, "n")) ok = v->type == DI_JSON_NULL ? 0 : int_field(c, v, k, 1, 128, &p->n);
        else if (!strcmp(k, "stop")) ok = parse_stop(c, v);
        else if (!strcmp(k, "seed")) {
            int64_t s;
            if (v->type == DI_JSON_NULL) continue;
            if (!di_json_as_i64(v, &s)) return fail(c, k, "seed must be an integer");
            p->has_seed = 1, p->seed = (uint64_t)s; /* two's complement: a negative seed is a seed too */
        } else if (!strcmp(k, "logprobs")) {
            if (v->type == DI_JSON_NULL) continue;
            if (chat) ok = bool_field(c, v, k, &chat_logprobs);
            else ok = int_field(c, v, k, 0, DEEPINFER_MAX_LOGPROBS, &top_logprobs);
        } else if (chat && !strcmp(k, "top_logprobs")) {
            if (v->type != DI_JSON_NULL) ok = int_field(c, v, k, 0, DEEPINFER_MAX_LOGPROBS, &top_logprobs);
        } else if (!strcmp(k, "ignore_eos")) ok = bool_field(c, v, k, &p->ignore_eos);
        else if (!strcmp(k, "response_format")) ok = parse_response_format(c, v);
        else if (!strcmp(k, "structured_outputs")) ok = parse_structured(c, v);
        else if (!strcmp(k, "stream")) ok = v->type == DI_JSON_NULL ? 0 : bool_field(c, v, k, &r->stream);
        else if (!strcmp(k, "stream_options")) {
            const di_json *u = di_json_get(v, "include_usage");
            if (v->type != DI_JSON_NULL && v->type != DI_JSON_OBJECT)
                return fail(c, k, "stream_options must be an object");
            if (u) ok = bool_field(c, u, "stream_options.include_usage", &r->include_usage);
        } else if (chat && !strcmp(k, "thinking")) ok = bool_field(c, v, k, &r->prompt.thinking);
        else if (chat && !strcmp(k, "chat_template_kwargs")) ok = parse_template_kwargs(c, v);
        else if (chat && !strcmp(k, "reasoning_effort")) {
            if (v->type != DI_JSON_NULL) ok = string_field(c, v, k, &r->prompt.reasoning_effort);
        } else if (!strcmp(k, "user") || !strcmp(k, "parallel_tool_calls")) {
            /* accepted, no effect: one engine, tool calls as the model writes them */
        } else {
            return fail(c, k, "%s is not a supported field of %s", k, chat ? "/v1/chat/completions" : "/v1/completions");
        }
        if (ok) return -1;
    }
    if (chat) {
        if (build_messages(c, msgs, tools, tool_choice)) return -1;
        if (chat_logprobs) p->logprobs = top_logprobs > 0 ? top_logprobs : 0, r->logprobs = 1;
        else if (top_logprobs > 0) return fail(c, "top_logprobs", "top_logprobs needs logprobs: true");
        /* "none" is chat mode (as in the chat encoder) */
        if (r->prompt.reasoning_effort && !strcmp(r->prompt.reasoning_effort, "none")) r->prompt.thinking = 0;
        r->thinking = r->prompt.thinking;
        if (p->so_schema && r->thinking) p->so_after_think = 1;
    } else {
        if (!prompt) return fail(c, "prompt", "prompt is required");
        if (parse_prompt(c, prompt)) return -1;
        if (top_logprobs >= 0) p->logprobs = top_logprobs, r->logprobs = 1;
    }
    if (!has_max_tokens) p->max_tokens = 16;
    if (r->include_usage && !r->stream) r->include_usage = 0;
    return 0;
}

int oai_request_parse(const char *body, size_t len, int chat, oai_request *r, char *err, size_t errlen, char *param,
                      size_t paramlen) {
    memset(r, 0, sizeof *r);
    r->chat = chat;
    deepinfer_sampling_params_init(&r->params);
    pctx c = {r, err, param, errlen, paramlen};
    if (errlen) err[0] = 0;
    if (paramlen) param[0] = 0;
    di_json_doc *doc = NULL;
    di_error e = {0};
    di_json_options o = {.max_depth = OAI_JSON_MAX_DEPTH};
    if (di_json_parse(body, len, &o, &doc, &e)) return fail(&c, "", "the body is not valid JSON: %s", e.msg);
    int rc = doc->root->type == DI_JSON_OBJECT ? parse_members(&c, doc->root, chat)
                                                : fail(&c, "", "the body must be a JSON object");
    di_json_free(doc);
    return rc;
}

void oai_request_free(oai_request *r) {
    for (int i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->ids);
    memset(r, 0, sizeof *r);
}
