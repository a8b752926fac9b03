/* End-to-end tests of `deepinfer inspect`: the golden checkpoints pass, and
 * damaged model directories (built in a temp dir) fail with a clear message
 * and a non-zero exit status, never a crash. The CLI is the `deepinfer`
 * binary next to the test runner (same build directory). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "util/file.h"

static char g_out[1 << 16];

/* Run `deepinfer inspect ARGS`, capture stdout+stderr into g_out; return the exit status. */
static int run_inspect(const char *args) {
    char exe[PATH_MAX], cmd[2 * PATH_MAX];
    if (!di_test_sibling("deepinfer", exe, sizeof exe)) {
        snprintf(g_out, sizeof g_out, "CLI not built: %s", exe);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "'%s' inspect %s 2>&1", exe, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t got = fread(g_out, 1, sizeof g_out - 1, p);
    g_out[got] = '\0';
    int st = pclose(p);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char g_dir[64];

static int copy_file(const char *src, const char *dst_name, size_t limit) {
    char *data = NULL, p[256];
    size_t len = 0;
    if (di_read_file(src, 0, &data, &len, NULL) != DEEPINFER_OK) return -1;
    if (limit && limit < len) len = limit;
    snprintf(p, sizeof p, "%s/%s", g_dir, dst_name);
    FILE *f = fopen(p, "wb");
    int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    free(data);
    return ok ? 0 : -1;
}

/* A copy of a golden checkpoint; `trunc_shard2` > 0 truncates the second shard. */
static int make_copy(const char *golden, size_t trunc_shard2) {
    snprintf(g_dir, sizeof g_dir, "/tmp/di_cli_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    const char *files[] = {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                           "model-00002-of-00002.safetensors"};
    for (int i = 0; i < 4; i++) {
        char src[512];
        snprintf(src, sizeof src, "%s/%s", di_test_data(golden), files[i]);
        if (copy_file(src, files[i], i == 3 ? trunc_shard2 : 0) != 0) return -1;
    }
    return 0;
}

static void put(const char *name, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void cleanup(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "    (could not remove %s)\n", g_dir);
}

TEST(cli_inspect_golden) {
    char args[512];
    snprintf(args, sizeof args, "--model %s", di_test_data("golden/v4-tiny-a"));
    CHECK_MSG(run_inspect(args) == 0, "%s", g_out);
    CHECK(strstr(g_out, "validation OK: 432/432"));
    CHECK(strstr(g_out, "mtp.0") && strstr(g_out, "csa") && strstr(g_out, "hca"));
    snprintf(args, sizeof args, "--model %s --json", di_test_data("golden/v41-tiny-a"));
    CHECK_MSG(run_inspect(args) == 0, "%s", g_out);
    CHECK(g_out[0] == '{' && strstr(g_out, "\"validation\":{\"ok\":true"));
    CHECK(strstr(g_out, "\"role\":\"reindex\"") && strstr(g_out, "\"kind\":\"dspark\""));
    CHECK(run_inspect("--help") == 0 && strstr(g_out, "--config-only") && strstr(g_out, "exit status"));
    CHECK(run_inspect("--frobnicate") == 2);
}

TEST(cli_inspect_bad_inputs_fail_cleanly) {
    CHECK(make_copy("golden/v41-tiny-a", 0) == 0);
    char args[128];
    snprintf(args, sizeof args, "--model %s", g_dir);
    CHECK_MSG(run_inspect(args) == 0, "%s", g_out);

    /* Unknown architecture. */
    put("config.json", "{\"model_type\":\"llama\",\"architectures\":[\"LlamaForCausalLM\"]}");
    CHECK(run_inspect(args) == 1 && strstr(g_out, "model_type 'llama' is not supported"));
    /* Malformed JSON. */
    put("config.json", "{\"model_type\": \"deepseek_v41\",\n  \"text_config\": {,}}");
    CHECK(run_inspect(args) == 1 && strstr(g_out, "line 2, column"));
    cleanup();

    /* Truncated shard. */
    CHECK(make_copy("golden/v41-tiny-a", 100000) == 0);
    snprintf(args, sizeof args, "--model %s", g_dir);
    CHECK(run_inspect(args) == 1);
    CHECK_MSG(strstr(g_out, "model-00002-of-00002.safetensors") && strstr(g_out, "truncated"), "%s", g_out);
    cleanup();

    /* Header length that overflows. */
    CHECK(make_copy("golden/v4-tiny-a", 0) == 0);
    snprintf(args, sizeof args, "--model %s", g_dir);
    put("model-00002-of-00002.safetensors", "\xff\xff\xff\xff\xff\xff\xff\xff{}");
    CHECK(run_inspect(args) == 1 && strstr(g_out, "exceeds"));
    cleanup();

    /* Weights that do not match the config: every issue listed, exit 1. */
    CHECK(make_copy("golden/v4-tiny-a", 0) == 0);
    snprintf(args, sizeof args, "--model %s", g_dir);
    char *cfg = NULL;
    size_t len;
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", g_dir);
    CHECK(di_read_file(p, 0, &cfg, &len, NULL) == DEEPINFER_OK);
    char *at = strstr(cfg, "\"q_lora_rank\": 128");
    CHECK(at);
    memcpy(at, "\"q_lora_rank\": 256", 18);
    put("config.json", cfg);
    free(cfg);
    CHECK(run_inspect(args) == 1);
    CHECK_MSG(strstr(g_out, "validation FAILED: 0 missing, 34 inconsistent"), "%s", g_out);
    CHECK(strstr(g_out, "error: layers.0.attn.wq_a.weight: expected F8_E4M3 [256,128], found F8_E4M3 [128,128]"));
    CHECK(strstr(g_out, "(use --all-issues)"));
    CHECK(run_inspect(strcat(args, " --all-issues")) == 1 && !strstr(g_out, "(use --all-issues)"));
    cleanup();
}
