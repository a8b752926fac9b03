/*
 * chat.h — DeepSeek chat prompt encoders (messages → prompt text).
 *
 * DeepSeek ships no Jinja template for V4/V4.1; the prompt is defined by
 * Python encoders. We reproduce them byte for byte:
 *   V4   encoding/encoding_dsv4.py (DeepSeek-V4-Flash; mirrored in GitHub
 *        Mockingjay1316/deepseek-v4-flash-spark @ ae059d91), tested against
 *        its official test vectors (tests/data/chat/).
 *   V4.1 vLLM's vllm/tokenizers/deepseek_v41_encoding.py @ 21f4c25c (adapted
 *        from DeepSeek's V4.1 encoder), with one correction: the named
 *        reasoning efforts use DeepSeek's own table from the checkpoint's
 *        encoding/encoding.py (revision dba1be0a): low=50, high=75 (the
 *        default), max=100. vLLM @ 21f4c25c had low=25/high=50/xhigh=75; vLLM
 *        later aligned with the checkpoint.
 *
 * Input: a JSON array of messages, or an object {"messages": [...],
 * "tools": [...]} (OpenAI format). Request-level tools are attached as the
 * serving front ends do (V4: to a leading system/developer message, else a
 * new system message first; V4.1: to the first system message, else a new
 * empty system message first). Message fields: role (system, developer,
 * user, assistant, tool, latest_reminder), content (string, null, or a list
 * of {"type": "text"} parts — V4.1 also image parts, rendered as
 * <｜deepseek_image｜>), reasoning_content (or "reasoning"), tool_calls,
 * tool_call_id, tools, response_format, task, wo_eos, content_blocks.
 *
 * Deliberate deviations, where the Python would crash or do something no
 * caller wants: tool-call arguments given as a JSON object are used as the
 * argument object (official V4 would render them as one "arguments"
 * parameter); arguments that parse to a non-object are rendered as one
 * "arguments" parameter holding the original string (V4.1 behaviour; V4
 * raises); content that is neither a string, null nor a list of parts is
 * an error (Python would render its repr). In V4, list content is joined
 * with "\n" (as vLLM's generic renderer does before the V4 encoder); in
 * V4.1 with "\n\n" (as DeepSeek's V4.1 encoder does).
 */
#ifndef DI_TOKENIZER_CHAT_H
#define DI_TOKENIZER_CHAT_H

#include <stddef.h>

#include "io/json.h"
#include "util/error.h"

typedef enum di_chat_arch { DI_CHAT_V4 = 4, DI_CHAT_V41 = 41 } di_chat_arch;

typedef struct di_chat_options {
    di_chat_arch arch;
    int thinking;                 /* 1: thinking mode ("<think>"); 0: chat mode ("</think>") */
    /* NULL for the default. V4: "high" (no prefix) or "max" (the
     * "Reasoning Effort: Absolute maximum..." paragraph in thinking mode).
     * V4.1: "low" | "high" | "max" or an integer 1..100 written as text;
     * rendered as "Reasoning Effort: N (...)" in thinking mode.
     * "none" turns thinking mode off (as vLLM does). */
    const char *reasoning_effort;
    int keep_thinking;            /* drop_thinking=False: keep reasoning of earlier turns */
    int no_bos;                   /* do not start with <｜begin▁of▁sentence｜> */
    int no_generation_prompt;     /* V4.1 add_generation_prompt=False */
    int continue_final_message;   /* V4.1: leave the final assistant message open */
} di_chat_options;

/* Render the prompt. *out is malloc'd, NUL-terminated text (caller frees). */
deepinfer_status di_chat_encode(const di_json *input, const di_chat_options *opt, char **out, size_t *out_len,
                                di_error *err);

#endif
