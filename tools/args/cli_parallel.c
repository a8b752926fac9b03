/* cli_parallel.c — --ep / --dp / --eplb-replicas / --eplb-interval / --cp-min-tokens (cli_parallel.h). */
#include "cli_parallel.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli_args.h"

int di_cli_parallel_flag(int argc, char **argv, int *i, deepinfer_engine_config *cfg) {
    static const struct {
        const char *name;
        int lo, hi;
        size_t off;
    } flags[] = {{"--ep", 1, 4096, offsetof(deepinfer_engine_config, ep)},
                 {"--dp", 1, 4096, offsetof(deepinfer_engine_config, dp)},
                 {"--eplb-replicas", 0, 4096, offsetof(deepinfer_engine_config, eplb_replicas)},
                 {"--eplb-interval", 1, 4096, offsetof(deepinfer_engine_config, eplb_interval)},
                 {"--cp-min-tokens", 0, 1 << 30, offsetof(deepinfer_engine_config, cp_min_tokens)}};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        if (strcmp(argv[*i], flags[k].name)) continue;
        if (*i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value\n", flags[k].name);
            return -1;
        }
        int *dst = (int *)((char *)cfg + flags[k].off);
        return di_cli_parse_int(flags[k].name, argv[++*i], flags[k].lo, flags[k].hi, dst) ? -1 : 1;
    }
    return 0;
}
