/* libFuzzer target: the regex parser and DFA compiler (search and
 * full-match modes), then a short constrained walk over the result. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_so_common.h"
#include "structured/dfa.h"
#include "structured/regex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 2048) return 0;
    di_arena a;
    di_arena_init(&a, 0);
    a.limit = (size_t)16 << 20;
    so_rx *rx = NULL;
    di_error e;
    so_dfa_limits lim = {.max_nfa_states = 20000, .max_dfa_states = 2000};
    if (so_rx_parse(&a, (const char *)data, size, SO_RX_SEARCH, &rx, &e) == DEEPINFER_OK) {
        so_dfa *d = NULL;
        if (so_dfa_from_rx(rx, size & 1, &lim, &d, &e) == DEEPINFER_OK) {
            so_dfa_classes(d, 16, (size_t)1 << 22, &e);
            so_dfa_matches(d, data, size);
            so_dfa_free(d);
        }
    }
    di_arena_free(&a);
    fuzz_drive(SO_SCHEMA_REGEX, data, size);
    return 0;
}
