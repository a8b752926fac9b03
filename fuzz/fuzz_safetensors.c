/* libFuzzer target: the safetensors header parser and validator
 * (di_st_open_buffer) on arbitrary bytes, then every query on the result:
 * iteration, lookup by both name spellings, totals, metadata, and a read of
 * the first and last byte of every tensor (ASan checks they lie inside the
 * buffer). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    di_safetensors *st = NULL;
    di_error err;
    if (di_st_open_buffer(data, size, "fuzz", &st, &err) != DEEPINFER_OK) {
        /* Every failure must come with a message. */
        if (!err.msg[0]) __builtin_trap();
        return 0;
    }
    volatile unsigned sink = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < di_st_count(st); i++) {
        const di_tensor *t = di_st_at(st, i);
        if (di_st_find(st, t->name) != t || di_st_find(st, t->ref_name) != t) __builtin_trap();
        char prefixed[600];
        if (strlen(t->ref_name) < 500) {
            snprintf(prefixed, sizeof prefixed, "model.%s", t->ref_name);
            if (di_st_find(st, prefixed) != t) __builtin_trap();
        }
        if (t->nbytes) {
            const unsigned char *p = t->data;
            sink += p[0] + p[t->nbytes - 1];
        }
        bytes += t->nbytes;
        char shape[256];
        di_shape_format(t->shape, t->ndim, shape, sizeof shape);
    }
    if (bytes != di_st_get_totals(st)->total_bytes) __builtin_trap();
    (void)di_st_metadata(st, 0, "format");
    (void)sink;
    di_st_close(st);
    return 0;
}
