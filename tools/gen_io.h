/*
 * gen_io.h — `deepinfer generate`'s file formats.
 *
 * Input, --prompts FILE.jsonl: one request per line, either a JSON string
 * (the prompt text) or an object with exactly one of
 *   "prompt": "text" | "prompt_token_ids": [ids] | "messages": [chat messages]
 * ("tools" may accompany "messages"), and optionally "sampling_params": {...}
 * with the names of deepinfer_sampling_params / vLLM's SamplingParams
 * (temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
 * frequency_penalty, max_tokens, min_tokens, n, seed, ignore_eos, logprobs,
 * stop, stop_token_ids, skip_special_tokens, so_args) overriding the command
 * line's. Blank lines are skipped. A line that cannot be read becomes a
 * failed request whose error names the line; the others still run. Numbers
 * are checked (integers in range, a seed >= 0, finite floats, token ids in
 * [0, 2^31)); a text prompt, stop string or schema holding a NUL character
 * is refused (the engine takes them NUL-terminated: it would be cut short).
 *
 * Output, --output FILE.jsonl: one line per request, written (and flushed)
 * as it finishes, so in the order of finishing; "index" is the request's
 * 0-based position in the input:
 *   {"index", "request_id", "status", "error", "prompt_tokens",
 *    "outputs": [{"index", "text", "token_ids", "finish_reason",
 *                 "stop_reason", "logprobs", "top_logprobs", "preemptions"}],
 *    "metrics": {"ttft_s", "tpot_s", "e2e_s", "prompt_tokens",
 *                "output_tokens", "computed_tokens", "preemptions"}}
 * "logprobs" and "top_logprobs" ([[id, logprob], ...] per token) appear
 * when logprobs were asked for.
 */
#ifndef DI_TOOLS_GEN_IO_H
#define DI_TOOLS_GEN_IO_H

#include <stdio.h>

#include "deepinfer.h"
#include "io/json.h"

typedef struct gen_request {
    deepinfer_prompt prompt;
    deepinfer_sampling_params params;
    char error[1200];         /* non-empty: this line could not be read */
    int32_t *ids;             /* owned storage behind prompt.token_ids */
    char *text;               /* owned storage behind prompt.text / prompt.messages */
    char *strings;            /* owned stop strings / schema */
} gen_request;

/* Read FILE.jsonl; every request starts from `defaults`. *out is malloc'd
 * (free with gen_requests_free). Returns 0, or -1 when the file cannot be
 * read at all (message in err). */
int gen_read_jsonl(const char *path, const deepinfer_sampling_params *defaults, gen_request **out, size_t *n,
                   char *err, size_t errlen);

/* Apply a "sampling_params" object onto *p; strings are copied into *store
 * (malloc'd, caller frees). Returns 0, or -1 with a message naming the key. */
int gen_parse_params(const di_json *obj, deepinfer_sampling_params *p, char **store, char *err, size_t errlen);

void gen_requests_free(gen_request *r, size_t n);

/* Write one output line (see above). */
void gen_write_output(FILE *f, size_t index, const deepinfer_request_output *o);

/* Write s[0..n) as a JSON string. */
void gen_write_json_string(FILE *f, const char *s, size_t n);

#endif
