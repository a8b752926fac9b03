/*
 * cli_engine_flags.h — the engine-configuration flags (deepinfer_engine_config,
 * include/deepinfer.h) shared by the commands that open an engine
 * (`deepinfer generate`, `deepinfer eval`), so every command spells and
 * range-checks them the same way. A new engine setting (e.g. a parallel
 * layout) gets its flag here, and with it every such command.
 */
#ifndef DI_TOOLS_ARGS_CLI_ENGINE_FLAGS_H
#define DI_TOOLS_ARGS_CLI_ENGINE_FLAGS_H

#include "args/cli_parallel.h"
#include "deepinfer.h"

/* The flags' lines for --help texts. */
#define DI_CLI_ENGINE_FLAGS_HELP                                                                           \
    "  --accelerator auto|cpu|cuda  --memory-budget BYTES[K|M|G]\n"                                        \
    "  --max-num-seqs N (64)  --max-num-batched-tokens N (2048)  --chunk-size N (512)\n"                   \
    "  --yoco-compact  V4.1: the layers after the last KV source prefill only each prompt's tail\n"        \
    "  --yoco-keep-tokens N (140)  that tail (>= sliding window + longest draft)\n"                        \
    "  --mtp-varlen 0|1  speculative decoding with confidence-scheduled draft lengths (the drafter:\n"     \
    "                    V4.1 DSpark, V4 MTP; outputs are identical with it on or off)\n"                  \
    "  --nextn-decode N  the longest draft (default: the DSpark block with --mtp-varlen 1; 0 = off;\n"     \
    "                    N alone: fixed-length drafts of N)\n"                                             \
    "  --max-model-len N  --page-rows N (64)  --num-pages N  --async-scheduling 0|1\n"                     \
    "  --batch-invariant 0|1 (1; 0: the fastest CUDA kernels, a row's bits then depend on the batch)\n"    \
    "  --engram-hash FILE  V4.1 Engram hash constants (engram_hash.json or a golden manifest)\n"    \
    DI_CLI_PARALLEL_USAGE

/* argv[*i] as an engine flag into *c: 1 = consumed (*i moved past its value), 0 = not an engine
 * flag, -1 = a missing or bad value (the message, naming the flag, is on stderr). Numeric values
 * are strict (args/cli_args.h); ranges are the engine's where it has one, and settings whose 0
 * means "the default" start at 1 (leave the flag out for the default). */
int di_cli_engine_flag(deepinfer_engine_config *c, int argc, char **argv, int *i);

#endif
