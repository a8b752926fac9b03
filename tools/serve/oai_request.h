/*
 * oai_request.h — an OpenAI request body (POST /v1/chat/completions or
 * /v1/completions) mapped onto one engine request: the prompt (chat
 * messages JSON with tools, or completion text / token ids) and the
 * sampling parameters. No network and no engine here, so the mapping is
 * unit-tested and fuzzed on its own (fuzz/fuzz_oai_request.c).
 *
 * Fields (OpenAI's names, vLLM's extras):
 *   model, messages (chat), prompt (completions: a string, [string] or
 *   [ids]), tools, tool_choice ("none" drops the tools), temperature, top_p,
 *   top_k, min_p, repetition_penalty, max_tokens / max_completion_tokens,
 *   min_tokens, stop (string or array), seed (-> seq_seed), n, logprobs
 *   (chat: bool with top_logprobs 0..20; completions: 0..20), presence_penalty,
 *   frequency_penalty, ignore_eos, response_format ({"type": "text" |
 *   "json_object" | "json_schema", "json_schema": {"schema": {...}}} ->
 *   structured outputs, applied after </think> in thinking mode),
 *   structured_outputs (vLLM's: {"json" | "regex" | "grammar": ...}), stream,
 *   stream_options.include_usage, thinking (bool), chat_template_kwargs
 *   {"thinking" | "enable_thinking": bool, "reasoning_effort"},
 *   reasoning_effort, user. Any other field is refused (400, naming it): a
 *   misspelt constraint must not be dropped silently.
 */
#ifndef DI_SERVE_OAI_REQUEST_H
#define DI_SERVE_OAI_REQUEST_H

#include <stddef.h>

#include "deepinfer.h"

enum { OAI_MAX_OWNED = DEEPINFER_MAX_STOP_STRINGS + 8 };

typedef struct oai_request {
    int chat;                 /* 1: /v1/chat/completions, 0: /v1/completions */
    int stream, include_usage;
    int has_tools;            /* tools given (and tool_choice != "none"): parse DSML tool calls */
    int thinking;             /* chat in thinking mode: the output starts inside <think> */
    int logprobs;             /* 1 when logprobs were asked for (params.logprobs = the top count) */
    const char *model;        /* the requested model name, or NULL */
    deepinfer_prompt prompt;
    deepinfer_sampling_params params;
    int32_t *ids;             /* owned storage behind prompt.token_ids */
    char *owned[OAI_MAX_OWNED]; /* owned strings behind the pointers above */
    int n_owned;
} oai_request;

/* Parse `len` bytes of body for the endpoint (`chat` 1 or 0). Returns 0, or
 * -1 with a message in err and the offending field's name in param ("" when
 * the body as a whole is bad). *r is always safe to oai_request_free. */
int oai_request_parse(const char *body, size_t len, int chat, oai_request *r, char *err, size_t errlen, char *param,
                      size_t paramlen);

void oai_request_free(oai_request *r);

#endif
