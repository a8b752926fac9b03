/* libFuzzer target: the chat encoders on arbitrary JSON input (both dialects,
 * thinking on and off). Must render or fail with a message; never crash. */
#include <stdlib.h>

#include "io/json.h"
#include "tokenizer/chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    di_json_doc *doc = NULL;
    di_error err = {0};
    di_json_options jo = {.max_depth = 64, .max_bytes = 16u << 20};
    if (di_json_parse((const char *)data, size, &jo, &doc, &err) != DEEPINFER_OK) return 0;
    for (int k = 0; k < 4; k++) {
        di_chat_options opt = {.arch = k & 1 ? DI_CHAT_V41 : DI_CHAT_V4, .thinking = k >> 1, .reasoning_effort = k == 3 ? "max" : NULL};
        char *out = NULL;
        size_t n = 0;
        if (di_chat_encode(doc->root, &opt, &out, &n, &err) == DEEPINFER_OK) free(out);
        else if (!err.msg[0]) abort();
    }
    di_json_free(doc);
    return 0;
}
