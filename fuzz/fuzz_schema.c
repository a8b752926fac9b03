/* libFuzzer target: JSON Schema → grammar, then a short constrained walk. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_so_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_drive(SO_SCHEMA_JSON, data, size);
    return 0;
}
