/* `deepinfer dummy`: a random-weight model directory on disk (config.json,
 * sidecars, sharded safetensors + index; tools/dummy/dummy.h), loadable
 * with --model DIR like a released checkpoint — for load-rate measurement
 * on real files (`deepinfer bench --load DIR`). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "args/cli_args.h"
#include "cli.h"
#include "dummy/dummy.h"
#include "util/sysmem.h"

static const char USAGE[] =
    "usage: deepinfer dummy CONFIG.json --layers N --out DIR [--experts E] [--seed S] [--shard-gb G]\n"
    "\n"
    "Writes into DIR (created if missing) the reduced config.json of CONFIG (a full\n"
    "HF config, e.g. bench/configs/v4-flash.json) with N layers (layer roles kept)\n"
    "and, with --experts E, E routed experts (>= num_experts_per_tok; default: the\n"
    "config's count), its Engram sidecars (V4.1), and the random checkpoint (seed S,\n"
    "default 1; the same bytes as `bench --dummy --seed S`) as safetensors shards of\n"
    "about G GB (default 5) plus model.safetensors.index.json. Host memory stays\n"
    "bounded (two 32 MB write buffers); pages are dropped behind the writer and\n"
    "every shard is fsync'd. Progress on stderr.\n";

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct prog {
    double t0;
} prog;

static void progress(void *ctx, size_t shard, size_t n_shards, uint64_t done, uint64_t total) {
    const prog *p = ctx;
    double dt = now_s() - p->t0;
    fprintf(stderr, "[%7.1fs] shard %zu/%zu written: %.2f of %.2f GB (%.2f GB/s), RSS %.0f MB\n", dt, shard + 1,
            n_shards, (double)done / 1e9, (double)total / 1e9, dt > 0 ? (double)done / 1e9 / dt : 0,
            (double)di_proc_rss() / 1e6);
}

static int cmd_dummy(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    const char *config = NULL, *out = NULL, *v;
    int layers = 0, experts = 0;
    uint64_t seed = 1;
    double shard_gb = 5;
    for (int i = 1; i < argc; i++) {
        if (di_cli_flag_value(argc, argv, &i, "--layers", &v)) {
            if (!v || di_cli_parse_int("--layers", v, 1, INT_MAX, &layers)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--experts", &v)) {
            if (!v || di_cli_parse_int("--experts", v, 1, INT_MAX, &experts)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--out", &out)) {
            if (!out) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--seed", &v)) {
            if (!v || di_cli_parse_u64("--seed", v, UINT64_MAX, &seed)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--shard-gb", &v)) {
            if (!v || di_cli_parse_f64("--shard-gb", v, 1e-6, 1e6, &shard_gb)) return 2;
        } else if (argv[i][0] != '-' && !config) {
            config = argv[i];
        } else {
            fprintf(stderr, "error: unknown option '%s' (see deepinfer dummy --help)\n", argv[i]);
            return 2;
        }
    }
    if (!config || !out || !layers)
        return fprintf(stderr, "error: needs CONFIG.json, --layers N and --out DIR (see deepinfer dummy --help)\n"), 2;
    if (mkdir(out, 0755) && errno != EEXIST)
        return fprintf(stderr, "deepinfer dummy: cannot create %s: %s\n", out, strerror(errno)), 1;
    di_error err = {0};
    di_dummy_info info;
    di_model_config cfg;
    di_safetensors *st = NULL;
    prog p = {now_s()};
    if (di_dummy_write_dir_ex(config, layers, experts, out, &info, &err) || di_config_load(out, &cfg, &err) ||
        di_dummy_weights(&cfg, seed, &st, &err)) {
        fprintf(stderr, "deepinfer dummy: %s\n", err.msg);
        return 1;
    }
    uint64_t total = di_st_get_totals(st)->total_bytes;
    fprintf(stderr, "dummy %s (%s): %d layers, %lld routed experts (top-%lld), %zu tensors, %.2f GB -> %s\n", config,
            di_arch_name(cfg.arch), info.n_layers, (long long)cfg.n_routed_experts, (long long)cfg.num_experts_per_tok,
            di_st_count(st), (double)total / 1e9, out);
    deepinfer_status rc = di_dummy_save(st, out, (uint64_t)(shard_gb * 1e9), progress, &p, &err);
    di_st_close(st);
    if (rc) {
        fprintf(stderr, "deepinfer dummy: %s\n", err.msg);
        return 1;
    }
    double dt = now_s() - p.t0;
    printf("wrote %s: %.2f GB in %.1f s (%.2f GB/s incl. fsync), peak RSS %.0f MB\n", out, (double)total / 1e9, dt,
           (double)total / 1e9 / dt, (double)di_proc_peak_rss() / 1e6);
    return 0;
}

DI_CLI_COMMAND(dummy, "write a random-weight model directory (config + sharded safetensors) from a full config",
               cmd_dummy)
