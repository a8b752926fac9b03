/*
 * deepinfer.c — the command-line front end: dispatches to subcommands that
 * register themselves from tools/cli_*.c (see cli.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "deepinfer.h"

typedef struct cli_command {
    const char *name;
    const char *summary;
    di_cli_main_fn fn;
} cli_command;

static cli_command g_cmds[64];
static int g_ncmds;
static double g_start; /* CLOCK_MONOTONIC at main entry */

double di_cli_start_time(void) { return g_start; }

void di_cli_register(const char *name, const char *summary, di_cli_main_fn fn) {
    if (g_ncmds < (int)(sizeof g_cmds / sizeof g_cmds[0])) g_cmds[g_ncmds++] = (cli_command){name, summary, fn};
}

int di_cli_flag_value(int argc, char **argv, int *i, const char *flag, const char **val) {
    if (strcmp(argv[*i], flag) != 0) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "error: %s needs a value\n", flag);
        *val = NULL;
        return 1;
    }
    *val = argv[++*i];
    return 1;
}

int di_cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    return 0;
}

static int cmp_cmd(const void *a, const void *b) {
    return strcmp(((const cli_command *)a)->name, ((const cli_command *)b)->name);
}

static void usage(FILE *f) {
    fprintf(f,
            "deepinfer %s — inference engine for DeepSeek-V4-Flash and DeepSeek-V4.1-Flash\n\n"
            "usage: deepinfer <command> [options]   (deepinfer <command> --help for details)\n\n"
            "commands:\n",
            deepinfer_version());
    for (int i = 0; i < g_ncmds; i++) fprintf(f, "  %-12s %s\n", g_cmds[i].name, g_cmds[i].summary);
    fprintf(f,
            "\nmodel location, the same for every command (and the library, the Python API and serve):\n"
            "--model DIR or ORG/NAME[@REV] (ORG/NAME: looked up in the Hugging Face cache, $HF_HUB_CACHE,\n"
            "else $HF_HOME/hub, else ~/.cache/huggingface/hub); else $DEEPINFER_HF_MODEL_DIR (a model\n"
            "directory or a hub cache root); else the embedded demo model models/deepinfer-demo-v41.\n");
}

int main(int argc, char **argv) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    g_start = (double)t0.tv_sec + (double)t0.tv_nsec * 1e-9;
    qsort(g_cmds, (size_t)g_ncmds, sizeof g_cmds[0], cmp_cmd);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return argc < 2 ? 1 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("deepinfer %s\n", deepinfer_version());
        return 0;
    }
    for (int i = 0; i < g_ncmds; i++)
        if (!strcmp(argv[1], g_cmds[i].name)) return g_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "deepinfer: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
