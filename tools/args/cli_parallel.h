/*
 * cli_parallel.h — the parallel-layout flags every engine command takes
 * (generate, bench-engine, and score / bench where they reach the engine's
 * layout rules): --ep M, --dp N, --eplb-replicas R, --eplb-interval S, --cp-min-tokens T, the
 * engine config's ep / dp / eplb_replicas / eplb_interval (deepinfer.h;
 * docs/DESIGN.md "Parallel"). Values are strict (cli_args.h); the layout
 * rules themselves (ep dividing the experts, dp 1 or == ep, GPUs per rank)
 * are the engine's, checked at open with a message naming the fix.
 */
#ifndef DI_TOOLS_ARGS_CLI_PARALLEL_H
#define DI_TOOLS_ARGS_CLI_PARALLEL_H

#include "deepinfer.h"

/* The flags' lines for a usage text (a string literal). */
#define DI_CLI_PARALLEL_USAGE                                                                                    \
    "  --ep M  expert parallelism over M ranks (the routed experts sharded; M divides them)\n"                 \
    "  --dp N  attention data parallelism: N ranks with their own requests (N = 1 or = --ep); ranks are\n"     \
    "          threads of this process on the CPU (CUDA runs one rank); outputs are bitwise one rank's\n"     \
    "  --eplb-replicas R  EPLB: R replica slots per rank for hot experts (--ep >= 2)  --eplb-interval S (32)\n" \
    "  --cp-min-tokens T  context-parallel prefill (--dp >= 2): a prompt chunk of >= T tokens over every rank\n"

/* argv[*i] one of the flags: its value (argv[*i + 1]) into cfg, *i on the
 * value; returns 1. Not one of them: 0. A missing or bad value: the message
 * ("error: --ep: ...") on stderr, -1. */
int di_cli_parallel_flag(int argc, char **argv, int *i, deepinfer_engine_config *cfg);

#endif
