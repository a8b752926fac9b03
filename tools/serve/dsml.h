/*
 * dsml.h — DeepSeek's DSML tool-call markup in model output, parsed into
 * OpenAI tool calls. The model writes the same block the chat encoding
 * renders for an assistant turn's tool_calls (src/tokenizer/chat_render.c):
 *
 *   <｜DSML｜tool_calls>                      (V4.1: "<｜DSML｜ calls>")
 *   <｜DSML｜invoke name="get_weather">        (V4.1: " invoke")
 *   <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
 *   <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
 *   </｜DSML｜invoke>
 *   </｜DSML｜tool_calls>
 *
 * Both dialects are accepted. string="true" values become JSON strings,
 * string="false" values are kept as JSON when they parse as JSON (else as
 * strings), so `arguments` is always a JSON object text.
 */
#ifndef DI_SERVE_DSML_H
#define DI_SERVE_DSML_H

#include <stddef.h>

#define DSML_MARK "<\xef\xbd\x9c" "DSML\xef\xbd\x9c" /* "<｜DSML｜" */

typedef struct dsml_call {
    char *name;       /* NUL-terminated, malloc'd */
    char *arguments;  /* a JSON object's text, malloc'd */
} dsml_call;

/* Offset of the first tool-call block's opening tag in s[0..n), or -1. */
long dsml_find(const char *s, size_t n);

/* Parse the block that starts at s[0] (an opening tag found by dsml_find)
 * and runs to s[n) (trailing whitespace allowed). Returns the number of
 * calls (>= 1) with *calls malloc'd (free with dsml_free), or -1 when the
 * block is incomplete or malformed (*calls NULL). */
int dsml_parse(const char *s, size_t n, dsml_call **calls);

void dsml_free(dsml_call *calls, int n);

#endif
