/* libFuzzer target: the JSON parser (config.json, safetensors headers,
 * tokenizer.json, schemas and request bodies all go through it). */
#include <stddef.h>
#include <stdint.h>

#include "io/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    di_json_doc *doc = NULL;
    di_error err;
    di_json_options opt = {.max_depth = 64, .max_bytes = 64u << 20};
    if (di_json_parse((const char *)data, size, &opt, &doc, &err) == DEEPINFER_OK) {
        /* Walk the tree so every node is touched. */
        const di_json *stack[80];
        int sp = 0;
        stack[sp++] = doc->root;
        while (sp) {
            const di_json *v = stack[--sp];
            if ((v->type == DI_JSON_ARRAY || v->type == DI_JSON_OBJECT) && sp < 79)
                for (uint32_t i = 0; i < v->count && sp < 79; i++) stack[sp++] = &v->items[i];
        }
        di_json_free(doc);
    }
    return 0;
}
