/* cli_engine_flags.c — the engine-configuration flags (cli_engine_flags.h). */
#include "args/cli_engine_flags.h"

#include <stdio.h>
#include <string.h>

#include "args/cli_args.h"

/* The value after argv[*i] (NULL, with the message, when there is none). */
static const char *value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "error: %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int di_cli_engine_flag(deepinfer_engine_config *c, int argc, char **argv, int *i) {
    const char *name = argv[*i], *v;
    int par = di_cli_parallel_flag(argc, argv, i, c); /* --ep / --dp / EPLB (cli_parallel.h) */
    if (par) return par;
    if (!strcmp(name, "--yoco-compact")) {
        c->yoco_compact = 1;
        return 1;
    }
    static const char *const with_value[] = {"--accelerator", "--memory-budget", "--max-num-seqs",
                                             "--max-num-batched-tokens", "--chunk-size", "--yoco-keep-tokens",
                                             "--mtp-varlen", "--nextn-decode", "--max-model-len", "--page-rows",
                                             "--num-pages", "--engram-hash", "--async-scheduling",
                                             "--batch-invariant"};
    size_t k = 0, n = sizeof with_value / sizeof with_value[0];
    while (k < n && strcmp(name, with_value[k])) k++;
    if (k == n) return 0;
    if (!(v = value(argc, argv, i))) return -1;
#define IS(f) !strcmp(name, f)
#define INT(dst, lo, hi) return di_cli_parse_int(name, v, lo, hi, &(dst)) ? -1 : 1
#define I64(dst, lo, hi) return di_cli_parse_i64(name, v, lo, hi, &(dst)) ? -1 : 1
    if (IS("--accelerator")) c->accelerator = v;
    else if (IS("--engram-hash")) c->engram_hash = v;
    else if (IS("--memory-budget")) return di_cli_parse_bytes(name, v, &c->memory_budget) ? -1 : 1;
    else if (IS("--max-num-seqs")) INT(c->max_num_seqs, 1, 16384);
    else if (IS("--max-num-batched-tokens")) INT(c->max_num_batched_tokens, 1, 1 << 20);
    else if (IS("--chunk-size")) INT(c->chunk_size, 1, 1 << 20);
    else if (IS("--yoco-keep-tokens")) I64(c->yoco_keep_tokens, 1, INT64_MAX);
    else if (IS("--mtp-varlen")) INT(c->mtp_varlen, 0, 1);
    else if (IS("--nextn-decode")) INT(c->nextn_decode, 0, DEEPINFER_MAX_DRAFT);
    else if (IS("--max-model-len")) I64(c->max_model_len, 1, INT64_MAX);
    else if (IS("--page-rows")) INT(c->page_rows, 1, 65536);
    else if (IS("--num-pages")) I64(c->num_pages, 1, INT64_MAX);
    else if (IS("--async-scheduling")) INT(c->async_scheduling, 0, 1);
    else if (IS("--batch-invariant")) INT(c->batch_invariant, 0, 1);
    return 1;
#undef IS
#undef INT
#undef I64
}
