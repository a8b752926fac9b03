/*
 * chat_v41.c — the DeepSeek-V4.1 dialect: DSML tags with a leading space
 * ("<｜DSML｜ calls>", " invoke", " parameter") and the numeric reasoning
 * effort. The named efforts follow DeepSeek's own V4.1 encoder
 * (encoding/encoding.py in the checkpoint, revision dba1be0a): low=50,
 * high=75, max=100, default high; an integer 1..100 is used as is.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat_internal.h"

static const chat_dialect V41 = {.v41 = 1, .calls_tag = " calls", .invoke_tag = " invoke", .param_tag = " parameter"};

const chat_dialect *di_chat_v41_dialect(void);
deepinfer_status di_chat_v41_effort(const char *effort, int *budget, di_error *err);

const chat_dialect *di_chat_v41_dialect(void) { return &V41; }

deepinfer_status di_chat_v41_effort(const char *effort, int *budget, di_error *err) {
    static const struct {
        const char *name;
        int budget;
    } named[] = {{"low", 50}, {"high", 75}, {"max", 100}};
    if (!effort) effort = "high";
    for (int i = 0; i < 3; i++)
        if (!strcmp(effort, named[i].name)) {
            *budget = named[i].budget;
            return DEEPINFER_OK;
        }
    char *end;
    long v = strtol(effort, &end, 10);
    if (end != effort && *end == 0 && v >= 1 && v <= 100) {
        *budget = (int)v;
        return DEEPINFER_OK;
    }
    return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                        "reasoning effort \"%s\" is not valid for V4.1: use low (50), high (75, the default), max "
                        "(100), an integer 1-100, or none",
                        effort);
}
