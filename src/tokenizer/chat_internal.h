/*
 * chat_internal.h — the message model shared by the chat encoders:
 *   chat_msgs.c    JSON → messages, tool-message merging, tool-result
 *                  ordering, dropping old reasoning (the Python preprocessing)
 *   chat_render.c  one message → text, for both dialects
 *   chat_v4.c      V4 dialect and entry point
 *   chat_v41.c     V4.1 dialect and effort table
 */
#ifndef DI_TOKENIZER_CHAT_INTERNAL_H
#define DI_TOKENIZER_CHAT_INTERNAL_H

#include "tokenizer/chat.h"
#include "tokenizer/sbuf.h"
#include "util/arena.h"

typedef struct cstr {
    const char *s; /* NULL = absent / null */
    size_t n;
} cstr;

enum { BLOCK_TEXT, BLOCK_TOOL_RESULT, BLOCK_IMAGE, BLOCK_OTHER };

typedef struct chat_block {
    int type;
    cstr text;               /* BLOCK_TEXT */
    const di_json *content;  /* BLOCK_TOOL_RESULT: string, list or NULL */
    cstr tool_use_id;
    cstr type_name;          /* BLOCK_OTHER: the "type" value (NULL → "None") */
    int content_none;        /* BLOCK_TOOL_RESULT from a tool message whose content was null */
} chat_block;

typedef struct chat_msg {
    cstr role;
    cstr content;            /* flattened to text; s == NULL for null/absent */
    int content_null;        /* "content": null (Python None) as opposed to absent */
    cstr reasoning;
    cstr task;
    cstr tool_call_id;
    const di_json *tools;           /* as given (truthy = non-empty) */
    const di_json *response_format;
    const di_json *tool_calls;
    int wo_eos;
    chat_block *blocks;
    int nblocks, cap_blocks;
    int has_blocks;          /* "content_blocks" present (even if empty) */
} chat_msg;

typedef struct chat_dialect {
    int v41;
    const char *calls_tag;   /* "tool_calls" | " calls" */
    const char *invoke_tag;  /* "invoke" | " invoke" */
    const char *param_tag;   /* "parameter" | " parameter" */
} chat_dialect;

typedef struct chat_ctx {
    const chat_dialect *d;
    const di_chat_options *opt;
    int thinking;
    int effort_max;          /* V4: "max" */
    int effort_budget;       /* V4.1: 1..100 */
    di_arena arena;
    chat_msg *msgs;
    int n, cap;
    di_error *err;
} chat_ctx;

int di_chat_truthy(const di_json *v);
/* Parse the input into ctx->msgs (attaching request-level tools) and run the
 * preprocessing: merge tool messages, order tool results, drop thinking.
 * Sets *drop_thinking to the effective value. */
deepinfer_status di_chat_prepare(chat_ctx *c, const di_json *input, int *drop_thinking);
deepinfer_status di_chat_render(chat_ctx *c, int drop_thinking, di_sbuf *out);
int di_chat_last_user(const chat_ctx *c, const chat_msg *m, int n);
int di_cstr_eq(cstr a, const char *b);

#endif
