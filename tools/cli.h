/*
 * cli.h — how `deepinfer` subcommands plug in.
 *
 * Each subcommand lives in its own tools/cli_<name>.c and registers itself:
 *
 *   static int cmd_inspect(int argc, char **argv) { ... return 0; }
 *   DI_CLI_COMMAND(inspect, "summarise a model: config, tensors, memory", cmd_inspect)
 *
 * argv[0] is the subcommand name. Return 0 on success, non-zero on failure
 * (after printing a message to stderr that says what to fix). Every
 * subcommand answers --help.
 */
#ifndef DI_TOOLS_CLI_H
#define DI_TOOLS_CLI_H

typedef int (*di_cli_main_fn)(int argc, char **argv);

void di_cli_register(const char *name, const char *summary, di_cli_main_fn fn);

#define DI_CLI_COMMAND(id, summary, fn)                                                   \
    __attribute__((constructor)) static void di_cli_reg_##id(void) {                     \
        di_cli_register(#id, summary, fn);                                               \
    }

/* Helpers shared by subcommands. */

/* 1 if argv[i] equals `flag` and a value follows (then *val is set and i advanced). */
int di_cli_flag_value(int argc, char **argv, int *i, const char *flag, const char **val);

/* CLOCK_MONOTONIC seconds at the entry of main (tools/deepinfer.c): the
 * process start for "time to first token" figures. */
double di_cli_start_time(void);

/* 1 if any argument is --help or -h. */
int di_cli_wants_help(int argc, char **argv);

#endif
