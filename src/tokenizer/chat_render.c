/*
 * chat_render.c — render one message of a prepared conversation, for both
 * DeepSeek dialects (the Python: render_message()). The dialect struct
 * carries the DSML tag names; `v41` switches on V4.1's <｜System｜> token,
 * numeric reasoning effort, mid-conversation system turns and generation
 * prompt options.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat_internal.h"
#include "tokenizer/pyjson.h"

#define BOS "<｜begin▁of▁sentence｜>"
#define EOS "<｜end▁of▁sentence｜>"
#define USER "<｜User｜>"
#define ASSISTANT "<｜Assistant｜>"
#define SYSTEM "<｜System｜>"
#define LATEST "<｜latest_reminder｜>"
#define THINK "<think>"
#define END_THINK "</think>"
#define DSML "｜DSML｜"

static const char REASONING_EFFORT_MAX[] =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

/* @C@ @I@ @P@: the DSML tag names; @S@: the tool schemas. */
static const char TOOLS_TEMPLATE[] =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<" DSML "@C@>\" block like the following:\n\n"
    "<" DSML "@C@>\n"
    "<" DSML "@I@ name=\"$TOOL_NAME\">\n"
    "<" DSML "@P@ name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" DSML "@P@>\n"
    "...\n"
    "</" DSML "@I@>\n"
    "<" DSML "@I@ name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</" DSML "@I@>\n"
    "</" DSML "@C@>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, "
    "arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by " THINK "), you MUST output your complete reasoning inside " THINK
    "..." END_THINK " BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after " END_THINK " with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n"
    "@S@\n\n"
    "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

static const char RESPONSE_FORMAT[] = "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

#define BAD(...) return di_error_set(c->err, DEEPINFER_ERR_INVALID_ARGUMENT, __VA_ARGS__)

static void put_cstr(di_sbuf *b, cstr s) {
    if (s.s) di_sbuf_put(b, s.s, s.n);
}

static deepinfer_status render_tools(chat_ctx *c, const di_json *tools, di_sbuf *b) {
    for (const char *p = TOOLS_TEMPLATE; *p; p++) {
        if (p[0] == '@' && p[1] && p[2] == '@') {
            switch (p[1]) {
            case 'C': di_sbuf_puts(b, c->d->calls_tag); break;
            case 'I': di_sbuf_puts(b, c->d->invoke_tag); break;
            case 'P': di_sbuf_puts(b, c->d->param_tag); break;
            case 'S':
                for (uint32_t i = 0; i < tools->count; i++) {
                    const di_json *f = di_json_get(&tools->items[i], "function");
                    if (!f) BAD("tools[%u]: expected {\"type\": \"function\", \"function\": {...}}", i);
                    if (i) di_sbuf_put(b, "\n", 1);
                    di_pyjson_dump(b, f);
                }
                break;
            }
            p += 2;
            continue;
        }
        di_sbuf_put(b, p, 1);
    }
    return DEEPINFER_OK;
}

static void render_response_format(const di_json *rf, di_sbuf *b) {
    di_sbuf_puts(b, "\n\n");
    di_sbuf_puts(b, RESPONSE_FORMAT);
    di_pyjson_dump(b, rf);
}

typedef struct param_ctx {
    chat_ctx *c;
    di_sbuf *b;
    int first;
} param_ctx;

static void render_param(void *vctx, const di_json *key, const di_json *v) {
    param_ctx *p = vctx;
    if (!p->first) di_sbuf_put(p->b, "\n", 1);
    p->first = 0;
    int is_str = v->type == DI_JSON_STRING;
    di_sbuf_printf(p->b, "<" DSML "%s name=\"", p->c->d->param_tag);
    di_sbuf_put(p->b, key->key, key->key_len);
    di_sbuf_printf(p->b, "\" string=\"%s\">", is_str ? "true" : "false");
    if (is_str) di_sbuf_put(p->b, v->str, v->str_len);
    else di_pyjson_dump(p->b, v);
    di_sbuf_printf(p->b, "</" DSML "%s>", p->c->d->param_tag);
}

/* The Python: encode_arguments_to_dsml(). */
static deepinfer_status render_arguments(chat_ctx *c, const di_json *args, di_sbuf *b) {
    param_ctx p = {c, b, 1};
    if (args && args->type == DI_JSON_OBJECT) {
        di_pyjson_members(args, render_param, &p);
        return DEEPINFER_OK;
    }
    di_json_doc *docs[2] = {NULL, NULL};
    const di_json *v = args;
    for (int round = 0; round < (c->d->v41 ? 2 : 1); round++) {
        if (!v || v->type != DI_JSON_STRING) break;
        di_error e;
        if (di_json_parse(v->str, v->str_len, NULL, &docs[round], &e) != DEEPINFER_OK) break;
        v = docs[round]->root;
    }
    if (v && v->type == DI_JSON_OBJECT) {
        di_pyjson_members(v, render_param, &p);
    } else { /* not an object: one "arguments" parameter with the original value */
        static const di_json key = {.key = "arguments", .key_len = 9};
        static const di_json null_v = {.type = DI_JSON_NULL};
        render_param(&p, &key, args ? args : &null_v);
    }
    di_json_free(docs[0]);
    di_json_free(docs[1]);
    return DEEPINFER_OK;
}

static deepinfer_status render_tool_calls(chat_ctx *c, int idx, const di_json *tcs, di_sbuf *b) {
    di_sbuf_printf(b, "\n\n<" DSML "%s>\n", c->d->calls_tag);
    for (uint32_t i = 0; i < tcs->count; i++) {
        const di_json *f = di_json_get(&tcs->items[i], "function");
        const di_json *name = di_json_get(f, "name");
        if (!f || !name || name->type != DI_JSON_STRING)
            BAD("messages[%d].tool_calls[%u]: expected {\"function\": {\"name\": \"...\", \"arguments\": ...}}", idx, i);
        if (i) di_sbuf_put(b, "\n", 1);
        di_sbuf_printf(b, "<" DSML "%s name=\"", c->d->invoke_tag);
        di_sbuf_put(b, name->str, name->str_len);
        di_sbuf_puts(b, "\">\n");
        deepinfer_status s = render_arguments(c, di_json_get(f, "arguments"), b);
        if (s) return s;
        di_sbuf_printf(b, "\n</" DSML "%s>", c->d->invoke_tag);
    }
    di_sbuf_printf(b, "\n</" DSML "%s>", c->d->calls_tag);
    return DEEPINFER_OK;
}

static deepinfer_status render_tool_result(chat_ctx *c, int idx, const chat_block *bl, di_sbuf *b) {
    di_sbuf_puts(b, "<tool_result>");
    if (bl->content_none) {
        di_sbuf_puts(b, "None"); /* Python formats a null content as None */
    } else if (!bl->content) {
        put_cstr(b, bl->text);
    } else if (bl->content->type == DI_JSON_STRING) {
        di_sbuf_put(b, bl->content->str, bl->content->str_len);
    } else if (bl->content->type == DI_JSON_NULL) {
        di_sbuf_puts(b, "None");
    } else if (bl->content->type == DI_JSON_ARRAY) {
        for (uint32_t i = 0; i < bl->content->count; i++) {
            const di_json *p = &bl->content->items[i];
            const di_json *t = di_json_get(p, "type");
            if (i) di_sbuf_puts(b, "\n\n");
            if (t && t->type == DI_JSON_STRING && !strcmp(t->str, "text")) {
                const di_json *tx = di_json_get(p, "text");
                if (tx && tx->type == DI_JSON_STRING) di_sbuf_put(b, tx->str, tx->str_len);
            } else {
                di_sbuf_printf(b, "[Unsupported %s]", t && t->type == DI_JSON_STRING ? t->str : "None");
            }
        }
    } else {
        BAD("messages[%d]: a tool_result content must be a string or a list of parts", idx);
    }
    di_sbuf_puts(b, "</tool_result>");
    return DEEPINFER_OK;
}

static deepinfer_status render_message(chat_ctx *c, int i, int drop, int last_user, di_sbuf *b) {
    const chat_msg *m = &c->msgs[i];
    int n = c->n, v41 = c->d->v41, is_last = i == n - 1;
    int add_gen = !(c->opt->no_generation_prompt || c->opt->continue_final_message);
    deepinfer_status s;

    if (v41) {
        int effort = i == 0 && c->thinking;
        if (i == 0 && (effort || di_cstr_eq(m->role, "system"))) di_sbuf_puts(b, SYSTEM);
        if (effort)
            di_sbuf_printf(b, "Reasoning Effort: %d (range 1-100, the higher the value, the more thorough the reasoning)\n\n",
                           c->effort_budget);
    } else if (i == 0 && c->thinking && c->effort_max) {
        di_sbuf_puts(b, REASONING_EFFORT_MAX);
    }

    if (di_cstr_eq(m->role, "system")) {
        if (v41 && i > 0) di_sbuf_puts(b, SYSTEM);
        put_cstr(b, m->content);
        if (di_chat_truthy(m->tools) && (s = (di_sbuf_puts(b, "\n\n"), render_tools(c, m->tools, b)))) return s;
        if (di_chat_truthy(m->response_format)) render_response_format(m->response_format, b);
    } else if (di_cstr_eq(m->role, "developer")) {
        if (!m->content.n) BAD("a developer message needs non-empty content");
        di_sbuf_puts(b, USER);
        put_cstr(b, m->content);
        if (di_chat_truthy(m->tools) && (s = (di_sbuf_puts(b, "\n\n"), render_tools(c, m->tools, b)))) return s;
        if (di_chat_truthy(m->response_format)) render_response_format(m->response_format, b);
    } else if (di_cstr_eq(m->role, "user")) {
        di_sbuf_puts(b, USER);
        if (m->nblocks) {
            for (int k = 0; k < m->nblocks; k++) {
                const chat_block *bl = &m->blocks[k];
                if (k) di_sbuf_puts(b, "\n\n");
                if (bl->type == BLOCK_TEXT) put_cstr(b, bl->text);
                else if (bl->type == BLOCK_TOOL_RESULT) {
                    if ((s = render_tool_result(c, i, bl, b))) return s;
                } else {
                    di_sbuf_puts(b, "[Unsupported ");
                    if (bl->type_name.s) put_cstr(b, bl->type_name);
                    else di_sbuf_puts(b, "None");
                    di_sbuf_puts(b, "]");
                }
            }
        } else {
            put_cstr(b, m->content);
        }
    } else if (di_cstr_eq(m->role, "latest_reminder")) {
        di_sbuf_puts(b, LATEST);
        if (m->content.s) put_cstr(b, m->content);
        else di_sbuf_puts(b, "None"); /* Python formats a missing content as None */
    } else if (di_cstr_eq(m->role, "assistant")) {
        di_sbuf tc = {0};
        if (di_chat_truthy(m->tool_calls) && (s = render_tool_calls(c, i, m->tool_calls, &tc))) {
            di_sbuf_free(&tc);
            return s;
        }
        int prev_has_task = i > 0 && c->msgs[i - 1].task.s;
        if (c->thinking && !prev_has_task && (!drop || i > last_user)) {
            int open_end = v41 && is_last && c->opt->continue_final_message && m->reasoning.n && !m->content.n && !tc.n;
            put_cstr(b, m->reasoning);
            if (!open_end) di_sbuf_puts(b, END_THINK);
        }
        put_cstr(b, m->content);
        if (tc.n) di_sbuf_put(b, tc.p, tc.n);
        di_sbuf_free(&tc);
        int wo_eos = m->wo_eos || (v41 && is_last && c->opt->continue_final_message);
        if (!wo_eos) di_sbuf_puts(b, EOS);
    } else {
        BAD("messages[%d]: role \"%.*s\" cannot be rendered", i, (int)m->role.n, m->role.s);
    }

    /* Transition to what follows. */
    if (v41 && is_last && !add_gen) return DEEPINFER_OK;
    if (i + 1 < n && !di_cstr_eq(c->msgs[i + 1].role, "assistant") && !di_cstr_eq(c->msgs[i + 1].role, "latest_reminder"))
        return DEEPINFER_OK;
    if (m->task.s) {
        if (!di_cstr_eq(m->task, "action")) {
            di_sbuf_puts(b, "<｜");
            put_cstr(b, m->task);
            di_sbuf_puts(b, "｜>");
        } else {
            di_sbuf_puts(b, ASSISTANT);
            di_sbuf_puts(b, c->thinking ? THINK : END_THINK);
            di_sbuf_puts(b, "<｜action｜>");
        }
    } else if (di_cstr_eq(m->role, "user") || di_cstr_eq(m->role, "developer") ||
               (v41 && ((di_cstr_eq(m->role, "system") && i > 0) ||
                        (is_last && (di_cstr_eq(m->role, "system") || di_cstr_eq(m->role, "assistant")))))) {
        di_sbuf_puts(b, ASSISTANT);
        int think = (!drop && c->thinking) || (drop && c->thinking && i >= last_user);
        di_sbuf_puts(b, think ? THINK : END_THINK);
    }
    return DEEPINFER_OK;
}

deepinfer_status di_chat_render(chat_ctx *c, int drop, di_sbuf *out) {
    if (!c->opt->no_bos) di_sbuf_puts(out, BOS);
    int last_user = di_chat_last_user(c, c->msgs, c->n);
    for (int i = 0; i < c->n; i++) {
        deepinfer_status s = render_message(c, i, drop, last_user, out);
        if (s) return s;
    }
    if (out->oom) return di_error_set(c->err, DEEPINFER_ERR_OUT_OF_MEMORY, "chat encoding: out of memory");
    return DEEPINFER_OK;
}
