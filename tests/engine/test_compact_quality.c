/*
 * Compact prefill's quality (V4.1 bounded replay, architecture.md §6.5):
 * the full protocol of tools/score/compact_quality.h (8 prompts of 512..593
 * tokens, keep 140, 32 greedy steps) on the golden tiny checkpoint and on the
 * demo model stays within the reference's own CUDA-vs-CPU spread (the golden
 * manifest's "stability"):
 *  - the first generated position: mean |Δ logit| <= prefill_last_cuda_vs_cpu
 *    mean_abs_diff (the demo model: the same bound relative to the logit std,
 *    mean_abs_diff / (max_abs_diff / max_abs_diff_over_logit_std), times the
 *    demo rows' std), argmax agreement >= that entry's argmax_agreement;
 *  - every step: argmax agreement >= tbt_fixed_cuda_vs_cpu argmax_agreement
 *    (the reference's decode rows across its two backends).
 * Also the refusal of all-position scoring in compact mode (the score driver,
 * and `deepinfer score` with --yoco-compact or the environment).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden/golden_util.h"
#include "score/compact_quality.h"

#define GDIR "golden/v41-tiny-a"
#define DEMO "../../models/deepinfer-demo-v41"

typedef struct spread {
    double mean_abs, mean_over_std, first_agree, step_agree;
} spread;

static int reference_spread(spread *s) {
    di_json_doc *man = golden_manifest(di_test_data(GDIR));
    if (!man) return 0;
    const char *pl = "prefill_last_cuda_vs_cpu";
    s->mean_abs = golden_num(man->root, "stability", pl, "mean_abs_diff");
    double ref_std = golden_num(man->root, "stability", pl, "max_abs_diff") /
                     golden_num(man->root, "stability", pl, "max_abs_diff_over_logit_std");
    s->mean_over_std = s->mean_abs / ref_std;
    s->first_agree = golden_num(man->root, "stability", pl, "argmax_agreement");
    s->step_agree = golden_num(man->root, "stability", "tbt_fixed_cuda_vs_cpu", "argmax_agreement");
    di_json_free(man);
    return !isnan(s->mean_abs) && !isnan(s->mean_over_std) && !isnan(s->first_agree) && !isnan(s->step_agree);
}

static di_v41_model *load(const char *dir, const char *hash) {
    di_v4_options opt = {.engram_hash = hash, .max_context = 1024};
    di_v41_model *m = NULL;
    di_error err = {0};
    if (di_v41_load(dir, &opt, &m, &err)) fprintf(stderr, "load %s: %s\n", dir, err.msg);
    return m;
}

static int quality(di_v41_model *m, di_compact_quality *q) {
    di_score_model sm = di_score_model_v41(m);
    di_error err = {0};
    deepinfer_status st = di_compact_quality_run(&sm, 8, 512, 32, 140, q, &err);
    if (st) fprintf(stderr, "compact quality: %s\n", err.msg);
    return st == DEEPINFER_OK;
}

TEST(compact_quality_golden_tiny_within_reference_spread) {
    spread s;
    CHECK(reference_spread(&s));
    char hash[4096];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(GDIR));
    di_v41_model *m = load(di_test_data(GDIR), hash);
    CHECK(m);
    di_compact_quality q;
    CHECK(quality(m, &q));
    CHECK(q.prompt_len_min >= 512 && q.prompt_len_max <= 600);
    CHECK_MSG(q.first_mean_abs <= s.mean_abs, "mean |d| %g > %g", q.first_mean_abs, s.mean_abs);
    /* here the 3 late layers x (window 32 - 1) < keep 140: the tail's last rows and rings are exact, bitwise */
    CHECK_MSG(q.first_max_abs == 0, "max |d| %g", q.first_max_abs);
    CHECK_MSG(q.first_agree >= s.first_agree, "first argmax agreement %g < %g", q.first_agree, s.first_agree);
    CHECK_MSG(q.greedy_agree >= s.step_agree, "greedy agreement %g < %g", q.greedy_agree, s.step_agree);
    di_v41_free(m);
}

TEST(compact_quality_demo_within_reference_relative_spread) {
    spread s;
    CHECK(reference_spread(&s));
    di_v41_model *m = load(di_test_data(DEMO), NULL);
    CHECK(m);
    di_compact_quality q;
    CHECK(quality(m, &q));
    CHECK(q.first_logit_std > 0);
    double bound = s.mean_over_std * q.first_logit_std;
    CHECK_MSG(q.first_mean_abs <= bound, "mean |d| %g > %g (%g x std %g)", q.first_mean_abs, bound, s.mean_over_std,
              q.first_logit_std);
    /* compact really differs here (3 late layers x window 64 > keep 140): the test sees a nonzero gap */
    CHECK(q.first_mean_abs > 0);
    CHECK_MSG(q.first_agree >= s.first_agree, "first argmax agreement %g < %g", q.first_agree, s.first_agree);
    CHECK_MSG(q.greedy_agree >= s.step_agree, "greedy agreement %g < %g", q.greedy_agree, s.step_agree);
    di_v41_free(m);
}

TEST(compact_score_all_positions_refused) {
    di_v41_model *m = load(di_test_data(DEMO), NULL);
    CHECK(m);
    int32_t p[200];
    for (int i = 0; i < 200; i++) p[i] = 10 + i;
    di_score_req r = {.prompt = p, .n_prompt = 200, .all_positions = 1, .yoco_keep = 140};
    di_score_result out;
    di_error err = {0};
    CHECK(di_v41_score(m, &r, &out, &err) == DEEPINFER_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "--all-positions") && strstr(err.msg, "compact"), "%s", err.msg);
    r.all_positions = 0;
    r.yoco_keep = 60; /* below the window (64) */
    CHECK(di_v41_score(m, &r, &out, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "sliding_window"), "%s", err.msg);
    di_v41_free(m);
}

/* `deepinfer score ARGS` (the binary next to the test runner), stderr into `errf`; its exit status. */
static int run_score(const char *env, const char *args, const char *errf) {
    char exe[PATH_MAX], cmd[2 * PATH_MAX + 512];
    if (!di_test_sibling("deepinfer", exe, sizeof exe)) return -1;
    snprintf(cmd, sizeof cmd, "%s '%s' score --model '%s' %s 2>'%s' >/dev/null", env, exe, di_test_data(DEMO), args, errf);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int file_has(const char *path, const char *what) {
    char buf[2048] = "";
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strstr(buf, what) != NULL;
}

TEST(compact_cli_score_all_positions_refused) {
    char errf[] = "/tmp/deepinfer-compact-score-XXXXXX";
    int fd = mkstemp(errf);
    CHECK(fd >= 0);
    close(fd);
    const char *args = "--prompt-ids 5,6,7 --all-positions --logits-out /dev/null";
    char flag[256];
    snprintf(flag, sizeof flag, "--yoco-compact %s", args);
    CHECK(run_score("", flag, errf) == 2);
    CHECK(file_has(errf, "--all-positions is not available in compact prefill"));
    CHECK(run_score("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact", args, errf) == 2);
    CHECK(file_has(errf, "--all-positions is not available in compact prefill"));
    CHECK(run_score("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=exact", flag, errf) == 0); /* the environment wins */
    CHECK(run_score("", args, errf) == 0);                                              /* exact: allowed */
    unlink(errf);
}
