/*
 * The parallel flags on the commands (tools/args/cli_parallel.c):
 * `deepinfer score --ep M --dp N` (tools/score_ranks.c) writes logits bitwise
 * those of one rank (V4 and V4.1 golden checkpoints, chunked prefill beside
 * other requests), `deepinfer generate --ep 2 --dp 2` prints the completions
 * of one rank, and a bad layout is refused by name with a failing status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test.h"

/* The command's combined output and exit status. */
static int run(const char *args, char *out, size_t n) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/deepinfer %s 2>&1", DI_BUILD_DIR, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t at = fread(out, 1, n - 1, p);
    out[at] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = len > 0 ? malloc((size_t)len) : NULL;
    *n = b && fread(b, 1, (size_t)len, f) == (size_t)len ? (size_t)len : 0;
    fclose(f);
    return b;
}

static void check_score(const char *dir, const char *extra) {
    static char out[8192];
    char args[2048], ref[256], got[256];
    snprintf(ref, sizeof ref, "%s/test_cli_ranks_ref.bin", DI_BUILD_DIR);
    snprintf(got, sizeof got, "%s/test_cli_ranks_got.bin", DI_BUILD_DIR);
    const char *common = "--prompt-ids 5,6,7,8,9,10,11,12,13,14,15 --steps 4 --all-positions --chunk 4 --batch-with 3";
    snprintf(args, sizeof args, "score --model %s %s %s --logits-out %s", di_test_data(dir), extra, common, ref);
    int rc = run(args, out, sizeof out);
    CHECK_MSG(rc == 0, "one rank: exit %d: %s", rc, out);
    const char *layouts[] = {"--ep 2", "--ep 2 --dp 2", "--ep 4"};
    for (int k = 0; k < 3; k++) {
        if (strstr(dir, "v4-tiny") && k == 2) continue; /* 6 experts */
        snprintf(args, sizeof args, "score --model %s %s %s %s --logits-out %s", di_test_data(dir), extra, common,
                 layouts[k], got);
        rc = run(args, out, sizeof out);
        CHECK_MSG(rc == 0, "%s: exit %d: %s", layouts[k], rc, out);
        size_t na = 0, nb = 0;
        char *a = slurp(ref, &na), *b = slurp(got, &nb);
        CHECK_MSG(a && b && na == nb && na > 0 && !memcmp(a, b, na), "%s %s: logits differ from one rank's", dir,
                  layouts[k]);
        free(a), free(b);
    }
    remove(ref), remove(got);
}

TEST(cli_score_ep_dp_bitwise_equal_one_rank) {
    char hash[1024];
    check_score("golden/v4-tiny-a", "");
    snprintf(hash, sizeof hash, "--engram-hash %s/expected/manifest.json", di_test_data("golden/v41-tiny-a"));
    check_score("golden/v41-tiny-a", hash);
}

TEST(cli_generate_ep_dp_and_refusals) {
    static char one[65536], par[65536];
    char args[2048];
    const char *gen = "generate --prompt-ids 5,6,7,8,9 --prompt-ids 11,12,13 --max-tokens 6 --temperature 0.8 --seed 7 "
                      "--logprobs 1 --output /dev/stdout";
    snprintf(args, sizeof args, "%s --model %s", gen, di_test_data("golden/v4-tiny-a"));
    int rc = run(args, one, sizeof one);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, one);
    snprintf(args, sizeof args, "%s --model %s --ep 2 --dp 2", gen, di_test_data("golden/v4-tiny-a"));
    rc = run(args, par, sizeof par);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, par);
    /* each line's completions ("outputs": [...] up to its "metrics", which hold timings) */
    int lines = 0;
    for (char *a = one, *b = par; (a = strstr(a, "\"outputs\"")) && (b = strstr(b, "\"outputs\""));) {
        char *ea = strstr(a, "\"metrics\""), *eb = strstr(b, "\"metrics\"");
        CHECK(ea && eb);
        if (!ea || !eb) break;
        CHECK_MSG(ea - a == eb - b && !memcmp(a, b, (size_t)(ea - a)), "completions differ:\n%.*s\n%.*s", (int)(ea - a),
                  a, (int)(eb - b), b);
        a = ea, b = eb, lines++;
    }
    CHECK_MSG(lines == 2, "%d completions compared", lines);
    snprintf(args, sizeof args, "generate --model %s --prompt-ids 5,6 --ep 3 --dp 2", di_test_data("golden/v4-tiny-a"));
    rc = run(args, one, sizeof one);
    CHECK_MSG(rc != 0 && strstr(one, "--ep must equal --dp"), "exit %d: %s", rc, one);
    snprintf(args, sizeof args, "generate --model %s --prompt-ids 5,6 --ep 0", di_test_data("golden/v4-tiny-a"));
    rc = run(args, one, sizeof one);
    CHECK_MSG(rc == 2 && strstr(one, "--ep: must be in [1, 4096], got 0"), "exit %d: %s", rc, one);
}
