/*
 * chat_v4.c — the DeepSeek-V4 dialect (encoding/encoding_dsv4.py) and the
 * entry point di_chat_encode() for both dialects.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat_internal.h"

static const chat_dialect V4 = {.v41 = 0, .calls_tag = "tool_calls", .invoke_tag = "invoke", .param_tag = "parameter"};

/* chat_v41.c */
const chat_dialect *di_chat_v41_dialect(void);
deepinfer_status di_chat_v41_effort(const char *effort, int *budget, di_error *err);

static deepinfer_status v4_effort(const char *effort, int *is_max, di_error *err) {
    *is_max = 0;
    if (!effort || !strcmp(effort, "high")) return DEEPINFER_OK;
    if (!strcmp(effort, "max")) {
        *is_max = 1;
        return DEEPINFER_OK;
    }
    return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                        "reasoning effort \"%s\" is not valid for V4: use high (the default), max or none", effort);
}

deepinfer_status di_chat_encode(const di_json *input, const di_chat_options *opt, char **out, size_t *out_len,
                                di_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!opt || (opt->arch != DI_CHAT_V4 && opt->arch != DI_CHAT_V41))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "chat encoding: arch must be V4 or V4.1");
    chat_ctx c = {0};
    c.d = opt->arch == DI_CHAT_V41 ? di_chat_v41_dialect() : &V4;
    c.opt = opt;
    c.err = err;
    c.thinking = opt->thinking;
    const char *effort = opt->reasoning_effort;
    if (effort && !strcmp(effort, "none")) { /* as vLLM: effort "none" means chat mode */
        c.thinking = 0;
        effort = NULL;
    }
    deepinfer_status s = c.d->v41 ? di_chat_v41_effort(effort, &c.effort_budget, err) : v4_effort(effort, &c.effort_max, err);
    if (s) return s;
    if (opt->continue_final_message && opt->arch != DI_CHAT_V41)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "continue_final_message is a V4.1 option");
    di_arena_init(&c.arena, 0);
    int drop = 1;
    s = di_chat_prepare(&c, input, &drop);
    if (!s && opt->continue_final_message && (c.n == 0 || !di_cstr_eq(c.msgs[c.n - 1].role, "assistant")))
        s = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "continue_final_message requires a final assistant message");
    di_sbuf b = {0};
    if (!s) s = di_chat_render(&c, drop, &b);
    di_arena_free(&c.arena);
    if (s) {
        di_sbuf_free(&b);
        return s;
    }
    *out = di_sbuf_take(&b, out_len);
    if (!*out) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "chat encoding: out of memory");
    return DEEPINFER_OK;
}
