/*
 * `deepinfer bench --dummy --modes` (tools/bench_dummy.c, bench_table.h): the flag parses, belongs to
 * --dummy (refused with --plan and --load), and on the CPU backend, which has one mode (every kernel
 * batch-invariant, docs/determinism.md §0), it is refused with a message that says so and what to run
 * instead, before anything is generated. The two-mode run itself needs the CUDA backend (the GPU
 * script lab/device/inv.sh runs it).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "util/file.h"

static int run(const char *exe, const char *args, const char *errf) {
    char cmd[PATH_MAX * 3];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>'%s'", exe, args, errf);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int says(const char *errf, const char *what) {
    char *t = NULL;
    size_t n = 0;
    if (di_read_file(errf, 0, &t, &n, NULL) != DEEPINFER_OK) return 0;
    int ok = strstr(t, what) != NULL;
    if (!ok) fprintf(stderr, "stderr was:\n%s(want \"%s\")\n", t, what);
    free(t);
    return ok;
}

TEST(bench_modes_flag_parses_and_the_cpu_backend_says_it_has_one_mode) {
    char exe[PATH_MAX + 64], args[PATH_MAX + 256], errf[] = "/tmp/di_bench_modes_XXXXXX";
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    int fd = mkstemp(errf);
    CHECK(fd >= 0);
    const char *cfg = di_test_data("golden/v4-tiny-a/config.json");
    snprintf(args, sizeof args, "bench --dummy %s --layers 2 --prefill 16 --prompt 32 --decode 2 --modes", cfg);
    CHECK_EQ_INT(run(exe, args, errf), 2);
    CHECK(says(errf, "--modes compares the CUDA backend's batch-invariant and fast modes; the cpu backend has one mode"));
    snprintf(args, sizeof args, "bench --dummy %s --backend cpu --modes --plan", cfg);
    CHECK_EQ_INT(run(exe, args, errf), 2);
    CHECK(says(errf, "--modes is for --dummy (not --plan)"));
    CHECK_EQ_INT(run(exe, "bench --load /nonexistent --modes", errf), 2);
    CHECK(says(errf, "--modes is for --dummy"));
    /* without --modes the same command measures (the flag changed nothing else) */
    snprintf(args, sizeof args, "bench --dummy %s --layers 2 --prefill 16 --prompt 32 --decode 2", cfg);
    CHECK_EQ_INT(run(exe, args, errf), 0);
    CHECK(says(errf, "decode batch 1 at context 32"));
    close(fd);
    unlink(errf);
}
