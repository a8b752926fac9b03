/*
 * `deepinfer bench-engine --dummy` and the engine entry under it
 * (engine_internal.h di_engine_open_weights): an engine opened on a dummy
 * checkpoint held in memory decodes exactly what an engine opened on the
 * same bytes written to a directory decodes; and the CLI, on the CPU, runs
 * a couple of steps per batch size on the golden tiny configs (as dummy
 * configs) and prints one row per batch size with the GPU idle column "n/a".
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine_internal.h"
#include "engine/engine_util.h"
#include "dummy/dummy.h"
#include "util/file.h"

/* Greedy tokens of 3 requests (ids only), max_tokens 5 each, into out[3][6]; 0 on success. */
static int greedy3(deepinfer_engine *e, int32_t out[3][6]) {
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.temperature = 0, sp.max_tokens = 5, sp.ignore_eos = 1;
    uint64_t ids[3];
    for (int r = 0; r < 3; r++) {
        int32_t p[7];
        for (int i = 0; i < 7; i++) p[i] = 5 + (i * 37 + r * 101) % 600;
        deepinfer_prompt pr = {.token_ids = p, .n_token_ids = 7};
        if (deepinfer_add_request(e, &pr, &sp, &ids[r])) return -1;
    }
    while (deepinfer_has_unfinished(e))
        if (deepinfer_step(e, NULL)) return -1;
    for (int r = 0; r < 3; r++) {
        deepinfer_request_output *o = NULL;
        if (deepinfer_take_output(e, ids[r], &o) || o->choices[0].n_tokens != 5) return deepinfer_output_free(o), -1;
        memcpy(out[r], o->choices[0].token_ids, 5 * sizeof(int32_t));
        deepinfer_output_free(o);
    }
    return 0;
}

TEST(engine_open_weights_matches_the_same_checkpoint_from_files) {
    char dir[] = "/tmp/di-bench-engine-test-XXXXXX";
    CHECK(mkdtemp(dir));
    char cfgp[512], st_path[600];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", di_test_data(ENGINE_GOLDEN));
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    di_error err = {0};
    CHECK_MSG(di_dummy_write_dir(cfgp, 3, dir, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
    di_model_config cfg;
    CHECK_MSG(di_config_load(dir, &cfg, &err) == DEEPINFER_OK, "%s", err.msg);
    di_safetensors *st = NULL;
    CHECK_MSG(di_dummy_weights(&cfg, 3, &st, &err) == DEEPINFER_OK, "%s", err.msg);
    /* the same bytes as files: one shard and its index */
    CHECK_MSG(di_dummy_write_checkpoint(&cfg, 3, dir, UINT64_MAX, &err) == DEEPINFER_OK, "%s", err.msg);

    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = dir;
    c.accelerator = "cpu";
    c.max_model_len = 64;
    c.max_num_seqs = 4;
    deepinfer_engine *a = NULL, *b = NULL;
    CHECK_MSG(di_engine_open_weights(&c, st, &a, &err) == DEEPINFER_OK, "%s", err.msg); /* owns st */
    char msg[1024];
    CHECK_MSG(deepinfer_engine_open(&c, &b, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    int32_t ta[3][6] = {{0}}, tb[3][6] = {{0}};
    CHECK(a && b && greedy3(a, ta) == 0 && greedy3(b, tb) == 0);
    CHECK(!memcmp(ta, tb, sizeof ta));
    deepinfer_engine_close(a);
    deepinfer_engine_close(b);

    /* no weights: refused; a bad directory: refused, the weights still closed (ASan: no leak) */
    deepinfer_engine *z = NULL;
    CHECK(di_engine_open_weights(&c, NULL, &z, &err) != DEEPINFER_OK && !z);
    di_safetensors *st2 = NULL;
    CHECK(di_dummy_weights(&cfg, 3, &st2, &err) == DEEPINFER_OK);
    c.model = "/nonexistent/di-bench-engine";
    CHECK(di_engine_open_weights(&c, st2, &z, &err) != DEEPINFER_OK && !z);

    const char *files[] = {"config.json", "engram_token_map.json", "engram_hash.json", "model.safetensors.index.json",
                           "model-00001-of-00001.safetensors"};
    for (int i = 0; i < 5; i++) snprintf(st_path, sizeof st_path, "%s/%s", dir, files[i]), unlink(st_path);
    CHECK(rmdir(dir) == 0);
}

static char g_out[1 << 16];

/* Run `deepinfer bench-engine ARGS` (stdout into g_out, stderr to g_err); the exit status. */
static char g_err[1 << 14];
static int run_bench(const char *args) {
    char exe[PATH_MAX], cmd[2 * PATH_MAX], errf[] = "/tmp/di-bench-engine-err-XXXXXX";
    if (!di_test_sibling("deepinfer", exe, sizeof exe)) return snprintf(g_out, sizeof g_out, "CLI not built: %s", exe), -1;
    int fd = mkstemp(errf);
    if (fd < 0) return -1;
    close(fd);
    snprintf(cmd, sizeof cmd, "DEEPINFER_THREADS=2 '%s' bench-engine %s 2>%s", exe, args, errf);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t got = fread(g_out, 1, sizeof g_out - 1, p);
    g_out[got] = '\0';
    int st = pclose(p);
    FILE *ef = fopen(errf, "r");
    got = ef ? fread(g_err, 1, sizeof g_err - 1, ef) : 0;
    g_err[got] = '\0';
    if (ef) fclose(ef);
    unlink(errf);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The table row of batch size B: tokens/s, ms/step, floor ms and of-floor positive, GPU idle
 * n/a (CPU), graph and dev-sampled "0/T" with T = the timed steps (decode - 1). */
static void check_row(int B, int timed) {
    char key[16];
    snprintf(key, sizeof key, "\n%6d ", B);
    const char *row = strstr(g_out, key);
    CHECK_MSG(row, "no row for batch %d in:\n%s", B, g_out);
    if (!row) return;
    int b = 0;
    double tps = 0, ms = 0, vs = 0, fms = 0, ftps = 0, of = 0;
    char idle[16] = "", graph[16] = "", dev[16] = "";
    int got = sscanf(row + 1, "%d %lf %lf %lf %lf %lf %lf %15s %15s %15s", &b, &tps, &ms, &vs, &fms, &ftps, &of, idle,
                     graph, dev);
    CHECK_EQ_INT(got, 10);
    CHECK_EQ_INT(b, B);
    CHECK(tps > 0 && ms > 0 && vs > 0 && fms > 0 && ftps > 0 && of > 0);
    CHECK_MSG(!strcmp(idle, "n/a"), "GPU idle '%s'", idle);
    char want[16];
    snprintf(want, sizeof want, "0/%d", timed);
    CHECK_MSG(!strcmp(graph, want) && !strcmp(dev, want), "graph '%s' dev-sampled '%s', want %s", graph, dev, want);
}

static void run_dummy(const char *golden, const char *arch) {
    char args[1024];
    snprintf(args, sizeof args,
             "--dummy %s/config.json --layers 4 --batches 1,3 --prompt 8 --decode 3 --reps 1 --seed 5 "
             "--accelerator cpu", di_test_data(golden));
    int rc = run_bench(args);
    CHECK_MSG(rc == 0, "rc %d\nstdout:\n%s\nstderr:\n%s", rc, g_out, g_err);
    CHECK(strstr(g_out, "model        dummy ") && strstr(g_out, arch) && strstr(g_out, "seed 5"));
    CHECK(strstr(g_out, "accelerator  cpu"));
    CHECK(strstr(g_out, "GPU idle") && strstr(g_out, "dev-sampled") && strstr(g_out, "floor ms"));
    check_row(1, 2);
    check_row(3, 2);
    CHECK(strstr(g_out, "\nsteps        ") && strstr(g_out, "0 ran as CUDA graphs"));
    CHECK(strstr(g_err, "4 layers kept"));
}

TEST(cli_bench_engine_dummy_v4_on_the_cpu) { run_dummy("golden/v4-tiny-a", "deepseek_v4,"); }

TEST(cli_bench_engine_dummy_v41_on_the_cpu) { run_dummy("golden/v41-tiny-a", "deepseek_v41,"); }

TEST(cli_bench_engine_dummy_bad_arguments) {
    CHECK_EQ_INT(run_bench("--dummy x.json --model y"), 2);
    CHECK(strstr(g_err, "not both"));
    CHECK_EQ_INT(run_bench("--dummy x.json --engram-hash y"), 2);
    CHECK_EQ_INT(run_bench("--dummy x.json --layers 0"), 2);
    CHECK_EQ_INT(run_bench("--dummy /nonexistent/di-config.json --accelerator cpu"), 1);
    CHECK(strstr(g_err, "/nonexistent/di-config.json"));
}
