/* oai_response.c — OpenAI-shaped responses, chunks and errors (oai_response.h). */
#include "serve/oai_response.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!k || k > n || (k == 2 && c < 0xc2) || (k == 4 && c > 0xf4)) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (k == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) return 0;
    if (k == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return 0;
    return k;
}

void oai_json_string(di_sbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    di_sbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            di_sbuf_put(b, e, 2), i++;
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            if (c == '\n') di_sbuf_put(b, "\\n", 2);
            else if (c == '\t') di_sbuf_put(b, "\\t", 2);
            else if (c == '\r') di_sbuf_put(b, "\\r", 2);
            else di_sbuf_put(b, e, 6);
            i++;
        } else {
            size_t k = utf8_len((const unsigned char *)s + i, n - i);
            if (k) di_sbuf_put(b, s + i, k), i += k;
            else di_sbuf_puts(b, "\xef\xbf\xbd"), i++;
        }
    }
    di_sbuf_put(b, "\"", 1);
}

static void put_float(di_sbuf *b, double x) {
    if (!isfinite(x)) x = x > 0 ? 3.4e38 : -9999.0; /* JSON has no infinities; OpenAI uses -9999 for "never" */
    di_sbuf_printf(b, "%.9g", x);
}

const char *oai_finish_reason(deepinfer_finish_reason r, int tool_calls) {
    switch (r) {
    case DEEPINFER_FINISH_STOP:
    case DEEPINFER_FINISH_EOS: return tool_calls ? "tool_calls" : "stop";
    case DEEPINFER_FINISH_LENGTH: return "length";
    case DEEPINFER_FINISH_ABORT: return "abort";
    case DEEPINFER_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

static void token_text(di_sbuf *b, const oai_resp_ctx *c, int32_t id, int with_bytes) {
    size_t n = 0;
    const uint8_t *t = c->tok ? di_tokenizer_token_bytes(c->tok, id, &n) : NULL;
    if (!t) {
        di_sbuf_printf(b, "\"token_id:%d\"", id);
        if (with_bytes) di_sbuf_puts(b, ", \"bytes\": null");
        return;
    }
    oai_json_string(b, (const char *)t, n);
    if (!with_bytes) return;
    di_sbuf_puts(b, ", \"bytes\": [");
    for (size_t i = 0; i < n; i++) di_sbuf_printf(b, "%s%u", i ? ", " : "", t[i]);
    di_sbuf_puts(b, "]");
}

/* Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}. */
static void chat_logprobs(di_sbuf *b, const oai_resp_ctx *c, const deepinfer_completion *ch, size_t from) {
    if (!c->req->logprobs || !ch->logprobs) {
        di_sbuf_puts(b, "null");
        return;
    }
    di_sbuf_puts(b, "{\"content\": [");
    for (size_t t = from; t < ch->n_tokens; t++) {
        di_sbuf_puts(b, t > from ? ", {\"token\": " : "{\"token\": ");
        token_text(b, c, ch->token_ids[t], 1);
        di_sbuf_puts(b, ", \"logprob\": ");
        put_float(b, ch->logprobs[t]);
        di_sbuf_puts(b, ", \"top_logprobs\": [");
        for (int k = 0; k < ch->n_top; k++) {
            size_t at = t * (size_t)ch->n_top + (size_t)k;
            di_sbuf_puts(b, k ? ", {\"token\": " : "{\"token\": ");
            token_text(b, c, ch->top_ids[at], 1);
            di_sbuf_puts(b, ", \"logprob\": ");
            put_float(b, ch->top_logprobs[at]);
            di_sbuf_puts(b, "}");
        }
        di_sbuf_puts(b, "]}");
    }
    di_sbuf_puts(b, "]}");
}

/* Completions logprobs: {"tokens", "token_logprobs", "top_logprobs": [{tok: lp}], "text_offset"}. */
static void completion_logprobs(di_sbuf *b, const oai_resp_ctx *c, const deepinfer_completion *ch, size_t from,
                                size_t text_base) {
    if (!c->req->logprobs || !ch->logprobs) {
        di_sbuf_puts(b, "null");
        return;
    }
    di_sbuf_puts(b, "{\"tokens\": [");
    for (size_t t = from; t < ch->n_tokens; t++) {
        if (t > from) di_sbuf_puts(b, ", ");
        token_text(b, c, ch->token_ids[t], 0);
    }
    di_sbuf_puts(b, "], \"token_logprobs\": [");
    for (size_t t = from; t < ch->n_tokens; t++) {
        if (t > from) di_sbuf_puts(b, ", ");
        put_float(b, ch->logprobs[t]);
    }
    di_sbuf_puts(b, "], \"top_logprobs\": [");
    for (size_t t = from; t < ch->n_tokens; t++) {
        di_sbuf_puts(b, t > from ? ", {" : "{");
        for (int k = 0; k < ch->n_top; k++) {
            size_t at = t * (size_t)ch->n_top + (size_t)k;
            if (k) di_sbuf_puts(b, ", ");
            token_text(b, c, ch->top_ids[at], 0);
            di_sbuf_puts(b, ": ");
            put_float(b, ch->top_logprobs[at]);
        }
        di_sbuf_puts(b, "}");
    }
    di_sbuf_puts(b, "], \"text_offset\": [");
    size_t off = text_base;
    for (size_t t = from; t < ch->n_tokens; t++) {
        size_t n = 0;
        if (c->tok) di_tokenizer_token_bytes(c->tok, ch->token_ids[t], &n);
        di_sbuf_printf(b, "%s%zu", t > from ? ", " : "", off);
        off += n;
    }
    di_sbuf_puts(b, "]}");
}

static void tool_calls_json(di_sbuf *b, const oai_resp_ctx *c, int choice, const dsml_call *calls, int n, int stream) {
    di_sbuf_puts(b, "[");
    for (int k = 0; k < n; k++) {
        if (k) di_sbuf_puts(b, ", ");
        di_sbuf_puts(b, "{");
        if (stream) di_sbuf_printf(b, "\"index\": %d, ", k);
        di_sbuf_printf(b, "\"id\": \"call_%s_%d_%d\", \"type\": \"function\", \"function\": {\"name\": ", c->id, choice, k);
        oai_json_string(b, calls[k].name, strlen(calls[k].name));
        di_sbuf_puts(b, ", \"arguments\": ");
        oai_json_string(b, calls[k].arguments, strlen(calls[k].arguments));
        di_sbuf_puts(b, "}}");
    }
    di_sbuf_puts(b, "]");
}

static void head(di_sbuf *b, const oai_resp_ctx *c, const char *object) {
    di_sbuf_puts(b, "{\"id\": ");
    oai_json_string(b, c->id, strlen(c->id));
    di_sbuf_printf(b, ", \"object\": \"%s\", \"created\": %lld, \"model\": ", object, c->created);
    oai_json_string(b, c->model, strlen(c->model));
}

static void usage(di_sbuf *b, long long prompt, long long completion) {
    di_sbuf_printf(b, "\"usage\": {\"prompt_tokens\": %lld, \"completion_tokens\": %lld, \"total_tokens\": %lld}", prompt,
                   completion, prompt + completion);
}

static void chat_choice(di_sbuf *b, const oai_resp_ctx *c, const deepinfer_completion *ch) {
    oai_split s;
    oai_split_init(&s, c->req->thinking, c->req->has_tools);
    oai_span rs, cs;
    dsml_call *calls = NULL;
    int nc = 0;
    oai_split_step(&s, ch->text, ch->text_len, 1, &rs, &cs, &calls, &nc);
    di_sbuf_printf(b, "{\"index\": %d, \"message\": {\"role\": \"assistant\", \"content\": ", ch->index);
    if (nc && cs.len == 0) di_sbuf_puts(b, "null");
    else oai_json_string(b, ch->text + cs.off, cs.len);
    if (c->req->thinking) {
        di_sbuf_puts(b, ", \"reasoning_content\": ");
        oai_json_string(b, ch->text + rs.off, rs.len);
    }
    if (nc) {
        di_sbuf_puts(b, ", \"tool_calls\": ");
        tool_calls_json(b, c, ch->index, calls, nc, 0);
    }
    di_sbuf_puts(b, "}, \"logprobs\": ");
    chat_logprobs(b, c, ch, 0);
    const char *fr = oai_finish_reason(ch->finish_reason, nc > 0);
    di_sbuf_printf(b, ", \"finish_reason\": \"%s\"}", fr ? fr : "stop");
    dsml_free(calls, nc);
}

void oai_build_response(di_sbuf *b, const oai_resp_ctx *c, const deepinfer_request_output *o) {
    head(b, c, c->req->chat ? "chat.completion" : "text_completion");
    di_sbuf_puts(b, ", \"choices\": [");
    long long out = 0;
    for (size_t j = 0; j < o->n_choices; j++) {
        const deepinfer_completion *ch = &o->choices[j];
        out += (long long)ch->n_tokens;
        if (j) di_sbuf_puts(b, ", ");
        if (c->req->chat) {
            chat_choice(b, c, ch);
            continue;
        }
        di_sbuf_printf(b, "{\"index\": %d, \"text\": ", ch->index);
        oai_json_string(b, ch->text, ch->text_len);
        di_sbuf_puts(b, ", \"logprobs\": ");
        completion_logprobs(b, c, ch, 0, 0);
        const char *fr = oai_finish_reason(ch->finish_reason, 0);
        di_sbuf_printf(b, ", \"finish_reason\": \"%s\"}", fr ? fr : "stop");
    }
    di_sbuf_puts(b, "], ");
    usage(b, (long long)o->n_prompt, out);
    di_sbuf_puts(b, "}");
}

void oai_build_chunk(di_sbuf *b, const oai_resp_ctx *c, const deepinfer_completion *ch, int first, oai_span reasoning,
                     oai_span content, const dsml_call *calls, int n_calls, size_t tok_from, const char *finish) {
    int lp = c->req->logprobs && ch->logprobs && tok_from < ch->n_tokens;
    if (!first && !reasoning.len && !content.len && !n_calls && !lp && !finish) return;
    di_sbuf_puts(b, "data: ");
    head(b, c, c->req->chat ? "chat.completion.chunk" : "text_completion");
    di_sbuf_printf(b, ", \"choices\": [{\"index\": %d, ", ch->index);
    if (c->req->chat) {
        di_sbuf_puts(b, "\"delta\": {");
        int any = 0;
        if (first) di_sbuf_puts(b, "\"role\": \"assistant\""), any = 1;
        if (reasoning.len) {
            /* reasoning_content (DeepSeek's name) and reasoning (what vLLM clients read) */
            di_sbuf_puts(b, any ? ", \"reasoning_content\": " : "\"reasoning_content\": ");
            oai_json_string(b, ch->text + reasoning.off, reasoning.len);
            di_sbuf_puts(b, ", \"reasoning\": ");
            oai_json_string(b, ch->text + reasoning.off, reasoning.len);
            any = 1;
        }
        if (content.len || (first && !reasoning.len)) {
            di_sbuf_puts(b, any ? ", \"content\": " : "\"content\": ");
            oai_json_string(b, ch->text + content.off, content.len);
            any = 1;
        }
        if (n_calls) {
            di_sbuf_puts(b, any ? ", \"tool_calls\": " : "\"tool_calls\": ");
            tool_calls_json(b, c, ch->index, calls, n_calls, 1);
        }
        di_sbuf_puts(b, "}, \"logprobs\": ");
        if (lp) chat_logprobs(b, c, ch, tok_from);
        else di_sbuf_puts(b, "null");
    } else {
        di_sbuf_puts(b, "\"text\": ");
        oai_json_string(b, ch->text + content.off, content.len);
        di_sbuf_puts(b, ", \"logprobs\": ");
        if (lp) completion_logprobs(b, c, ch, tok_from, content.off);
        else di_sbuf_puts(b, "null");
    }
    if (finish) di_sbuf_printf(b, ", \"finish_reason\": \"%s\"}]", finish);
    else di_sbuf_puts(b, ", \"finish_reason\": null}]");
    di_sbuf_puts(b, "}\n\n");
}

void oai_build_usage_chunk(di_sbuf *b, const oai_resp_ctx *c, long long prompt_tokens, long long completion_tokens) {
    di_sbuf_puts(b, "data: ");
    head(b, c, c->req->chat ? "chat.completion.chunk" : "text_completion");
    di_sbuf_puts(b, ", \"choices\": [], ");
    usage(b, prompt_tokens, completion_tokens);
    di_sbuf_puts(b, "}\n\n");
}

void oai_build_error(di_sbuf *b, const char *message, const char *type, const char *param, const char *code) {
    di_sbuf_puts(b, "{\"error\": {\"message\": ");
    oai_json_string(b, message, strlen(message));
    di_sbuf_puts(b, ", \"type\": ");
    oai_json_string(b, type, strlen(type));
    di_sbuf_puts(b, ", \"param\": ");
    if (param && param[0]) oai_json_string(b, param, strlen(param));
    else di_sbuf_puts(b, "null");
    di_sbuf_puts(b, ", \"code\": ");
    if (code && code[0]) oai_json_string(b, code, strlen(code));
    else di_sbuf_puts(b, "null");
    di_sbuf_puts(b, "}}");
}
