/* libFuzzer target: tokenizer.json loading on malformed input. Any input
 * must either load (then encode/decode a fixed string without trouble) or
 * fail with a message; never crash, leak or hang. Seed it with the files
 * of tests/data/tokenizer/tiny/. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    di_tokenizer *tok = NULL;
    di_error err = {0};
    if (di_tokenizer_load_json((const char *)data, size, &tok, &err) != DEEPINFER_OK) {
        if (!err.msg[0]) abort(); /* every failure explains itself */
        return 0;
    }
    static const char text[] = "Hello <mask> wörld 123 \xe4\xb8\xad\xf0\x9f\x98\x80 \xff!";
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    if (di_tokenizer_encode(tok, text, sizeof text - 1, &ids, &n, &cap, &err) == DEEPINFER_OK) {
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= di_tokenizer_vocab_size(tok)) abort();
        char *s = NULL;
        size_t sl = 0;
        if (di_tokenizer_decode(tok, ids, n, 1, &s, &sl, &err) == DEEPINFER_OK) free(s);
    }
    free(ids);
    di_tokenizer_free(tok);
    return 0;
}
