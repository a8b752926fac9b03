/*
 * oai_response.h — OpenAI response bodies and SSE chunks from engine
 * outputs: chat.completion / text_completion objects, streamed
 * chat.completion.chunk / text_completion chunks ("data: {...}\n\n", the
 * caller ends a stream with OAI_SSE_DONE), usage, logprobs and errors in
 * OpenAI's shape. Pure functions of their inputs (no network, no engine
 * state), so they are unit-tested directly.
 */
#ifndef DI_SERVE_OAI_RESPONSE_H
#define DI_SERVE_OAI_RESPONSE_H

#include "deepinfer.h"
#include "serve/oai_request.h"
#include "serve/oai_split.h"
#include "tokenizer/sbuf.h"
#include "tokenizer/tokenizer.h"

#define OAI_SSE_DONE "data: [DONE]\n\n"

typedef struct oai_resp_ctx {
    const char *id;           /* "chatcmpl-..." / "cmpl-..." */
    long long created;        /* unix seconds */
    const char *model;        /* the served model name */
    const oai_request *req;
    const di_tokenizer *tok;  /* token strings of logprobs; NULL: "token_id:N" */
} oai_resp_ctx;

/* OpenAI's finish_reason for an engine reason ("stop", "length", "abort", "error"). */
const char *oai_finish_reason(deepinfer_finish_reason r, int tool_calls);

/* The whole non-streamed response for a finished request. */
void oai_build_response(di_sbuf *b, const oai_resp_ctx *c, const deepinfer_request_output *o);

/* One streamed chunk for choice `ch`: the new reasoning/content spans of its
 * text (oai_split_step), tool calls when parsed, logprobs of tokens
 * [tok_from, ch->n_tokens), the role on the first chunk, finish_reason
 * when `finish` is non-NULL. Nothing is written when the chunk would be
 * empty (no role, text, tool calls, logprobs or finish). */
void oai_build_chunk(di_sbuf *b, const oai_resp_ctx *c, const deepinfer_completion *ch, int first, oai_span reasoning,
                     oai_span content, const dsml_call *calls, int n_calls, size_t tok_from, const char *finish);

/* The final usage chunk (stream_options.include_usage): choices [] and usage. */
void oai_build_usage_chunk(di_sbuf *b, const oai_resp_ctx *c, long long prompt_tokens, long long completion_tokens);

/* {"error": {"message", "type", "param", "code"}}; param "" is written as null. */
void oai_build_error(di_sbuf *b, const char *message, const char *type, const char *param, const char *code);

/* JSON string of s[0..n) with invalid UTF-8 bytes replaced by U+FFFD. */
void oai_json_string(di_sbuf *b, const char *s, size_t n);

#endif
