/*
 * `deepinfer bench --dummy CONFIG --plan --ep N [--engram-host]` (tools/bench_plan.c) on the real
 * configs: every rank's plan printed, whether it fits, the smallest layout; the refusals by name
 * with a failing exit status (no GPU needed: 141 GB devices assumed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test.h"

/* The CLI's combined output and exit status. */
static int cli(const char *args, char *out, size_t n) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/deepinfer bench %s 2>&1", DI_BUILD_DIR, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t at = fread(out, 1, n - 1, p);
    out[at] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(bench_plan_ep_prints_every_rank_and_the_fit) {
    static char out[65536];
    int rc = cli("--dummy bench/configs/v41-flash.json --plan --ep 4 --engram-host", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    CHECK_MSG(strstr(out, "rank 3:") && strstr(out, "rank 3 of 4: routed experts 74.00 GB") &&
                  strstr(out, "Engram tables in host memory 202.76 GB") && strstr(out, "fits: every rank needs at most") &&
                  strstr(out, "smallest layout that fits: --ep 4 --engram-host") &&
                  strstr(out, "devices of 141 GB (assumed: an H200)"),
              "%s", out);
    rc = cli("--dummy bench/configs/v4-flash.json --plan --ep 2", out, sizeof out);
    CHECK_MSG(rc == 0 && strstr(out, "rank 1 of 2: routed experts 75.30 GB") && strstr(out, "fits:"), "exit %d: %s",
              rc, out);
}

TEST(bench_plan_ep_refusals_are_named) {
    static char out[65536];
    int rc = cli("--dummy bench/configs/v41-flash.json --plan --ep 2", out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "2 x 141 GB devices (--ep 2) does not fit: rank 0 needs") &&
                  strstr(out, "needs >= 4 x 141 GB devices (--ep 4) with Engram in host memory (--engram-host)"),
              "exit %d: %s", rc, out);
    rc = cli("--dummy bench/configs/v4-flash.json --plan --ep 3", out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "256 experts are not divisible by --ep 3") && !strstr(out, "rank 0:"),
              "exit %d: %s", rc, out);
    rc = cli("--dummy bench/configs/v4-flash.json --plan --ep 64 --backend cuda", out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "--ep 64 needs 64 GPUs (one per rank) but") && !strstr(out, "rank 0:"),
              "exit %d: %s", rc, out);
    rc = cli("--dummy bench/configs/v4-flash.json --plan --ep 1 --device-gb 80", out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "needs >= 4 x 80 GB devices (--ep 4)"), "exit %d: %s", rc, out);
    rc = cli("--dummy bench/configs/v4-flash.json --ep 2", out, sizeof out);
    CHECK_MSG(rc == 2 && strstr(out, "--ep, --dp, --engram-host and --device-gb are for --plan"), "exit %d: %s", rc,
              out);
    rc = cli("--dummy bench/configs/v4-flash.json --plan --ep 4 --dp 2", out, sizeof out); /* the engine's rule */
    CHECK_MSG(rc == 1 && strstr(out, "--ep must equal --dp (or use --dp 1)") && !strstr(out, "rank 0:"), "exit %d: %s",
              rc, out);
}
