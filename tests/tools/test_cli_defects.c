/*
 * The CLI defects of issue #29 ("a CLI that never loses output"), each run
 * through the real `deepinfer` binary:
 *  - generate writes (and flushes) each request the moment it finishes, and
 *    SIGTERM / SIGINT stop it cleanly: what finished is in the file, what was
 *    in flight is aborted and counted on stderr, exit 143 / 130;
 *  - a bad --output path fails before the model loads; write errors
 *    (/dev/full) name the destination and the reason and exit 1;
 *  - numeric flags of every command and JSONL numbers are strict;
 *  - NUL in a text prompt is refused (naming line and field), never cut
 *    short; other control characters are kept, and so are NULs in messages;
 *  - `inspect` and `generate` find the model by the same rule.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine_util.h"
#include "io/json.h"
#include "util/file.h"

static int sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path) {
    char *t = NULL;
    size_t n = 0;
    if (di_read_file(path, 0, &t, &n, NULL) != DEEPINFER_OK) return NULL;
    return t;
}

static size_t count_lines(const char *t) {
    size_t n = 0;
    for (; t && *t; t++) n += *t == '\n';
    return n;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
}

/* The record of input `index` in a JSONL output (parsed; NULL if absent). */
static di_json_doc *record(const char *text, int64_t index) {
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        di_json_doc *doc = NULL;
        int64_t idx = -1;
        if (di_json_parse(p, (size_t)(nl - p), NULL, &doc, NULL) == DEEPINFER_OK &&
            di_json_as_i64(di_json_get(doc->root, "index"), &idx) && idx == index)
            return doc;
        di_json_free(doc);
        p = nl + 1;
    }
    return NULL;
}

static const char *str_of(const di_json_doc *d, const char *key) {
    const di_json *v = d ? di_json_get(d->root, key) : NULL;
    return v && di_json_is_string(v) ? v->str : "";
}

static int64_t int_of(const di_json_doc *d, const char *key) {
    int64_t x = -1;
    if (d) di_json_as_i64(di_json_get(d->root, key), &x);
    return x;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Three short requests around one long one (index 1, EOS ignored, ~25 s of decode on its own). */
static const char *SIGNAL_JSONL =
    "{\"prompt_token_ids\": [5, 6], \"sampling_params\": {\"max_tokens\": 2}}\n"
    "{\"prompt_token_ids\": [7, 8], \"sampling_params\": {\"max_tokens\": 60000, \"ignore_eos\": true}}\n"
    "{\"prompt_token_ids\": [9, 10], \"sampling_params\": {\"max_tokens\": 3}}\n"
    "{\"prompt_token_ids\": [11, 12], \"sampling_params\": {\"max_tokens\": 2}}\n";

TEST(cli_generate_writes_as_requests_finish_and_keeps_them_on_sigterm_sigint) {
    char exe[PATH_MAX + 64];
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    char dir[] = "/tmp/di_sig_XXXXXX";
    CHECK(mkdtemp(dir));
    char in[256], out[256], err[256];
    snprintf(in, sizeof in, "%s/in.jsonl", dir);
    snprintf(out, sizeof out, "%s/out.jsonl", dir);
    snprintf(err, sizeof err, "%s/err.txt", dir);
    write_text(in, SIGNAL_JSONL);
    const char *model = di_test_data(ENGINE_GOLDEN);
    const int sigs[2] = {SIGTERM, SIGINT};
    for (int s = 0; s < 2; s++) {
        unlink(out);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) dup2(fd, 2);
            execl(exe, exe, "generate", "--model", model, "--max-model-len", "65536", "--prompts", in, "--output", out,
                  "--quiet", (char *)NULL);
            _exit(127);
        }
        /* the three short requests' lines appear while the long one still runs */
        char *text = NULL;
        double t0 = now_s();
        int running = 1;
        while (now_s() - t0 < 15) {
            free(text);
            text = slurp(out);
            if (count_lines(text) >= 3) break;
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid) {
                running = 0;
                break;
            }
            usleep(20000);
        }
        size_t early = count_lines(text);
        if (!running || early < 3) {
            if (running) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
            free(text);
            CHECK_MSG(0, "%s: after %.1f s the output holds %zu lines (want the 3 finished requests while the long one "
                      "runs; the process %s)", s ? "SIGINT" : "SIGTERM", now_s() - t0, early, running ? "still ran" : "had exited");
        }
        free(text);
        CHECK(kill(pid, sigs[s]) == 0);
        int st = 0;
        double tk = now_s();
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK_MSG(now_s() - tk < 5, "stopping took %.1f s", now_s() - tk);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 128 + sigs[s], "exit status %d (signalled: %d)",
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        text = slurp(out);
        char *log = slurp(err);
        CHECK(text && log);
        CHECK_MSG(count_lines(text) == 3, "%zu lines:\n%s", count_lines(text), text);
        for (int64_t i = 0; i < 4; i++) {
            di_json_doc *d = record(text, i);
            if (i == 1) CHECK_MSG(!d, "the aborted request was written");
            else CHECK_MSG(d && !strcmp(str_of(d, "status"), "ok"), "request %lld missing or failed", (long long)i);
            di_json_free(d);
        }
        CHECK_MSG(strstr(log, "1 left unfinished") && strstr(log, s ? "SIGINT" : "SIGTERM"), "stderr:\n%s", log);
        free(text);
        free(log);
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

TEST(cli_generate_checks_the_output_path_first_and_reports_write_errors) {
    char exe[PATH_MAX + 64], cmd[8192], err[256];
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    char dir[] = "/tmp/di_out_XXXXXX";
    CHECK(mkdtemp(dir));
    snprintf(err, sizeof err, "%s/err.txt", dir);
    const char *model = di_test_data(ENGINE_GOLDEN);
    /* a directory that does not exist: refused before the model loads (no plan printed) */
    snprintf(cmd, sizeof cmd, "'%s' generate --model %s --prompt-ids 1,2 --max-tokens 2 --output %s/no/such/dir/o.jsonl 2>%s",
             exe, model, dir, err);
    CHECK_EQ_INT(sh(cmd), 1);
    char *log = slurp(err);
    CHECK(log);
    CHECK_MSG(strstr(log, "cannot open --output") && strstr(log, "/no/such/dir/o.jsonl") &&
                  strstr(log, strerror(ENOENT)),
              "stderr:\n%s", log);
    CHECK_MSG(!strstr(log, "pages") && !strstr(log, "TTFT"), "the model was loaded and run first:\n%s", log);
    free(log);
    if (access("/dev/full", W_OK) != 0) SKIP("no writable /dev/full here");
    /* JSONL into a full device, and text on a full standard output */
    const char *forms[2] = {"--output /dev/full 2>%s", ">/dev/full 2>%s"};
    const char *names[2] = {"/dev/full", "standard output"};
    for (int k = 0; k < 2; k++) {
        char redir[512];
        snprintf(redir, sizeof redir, forms[k], err);
        snprintf(cmd, sizeof cmd, "'%s' generate --model %s --prompt-ids 1,2 --max-tokens 2 --quiet %s", exe, model, redir);
        int rc = sh(cmd);
        log = slurp(err);
        CHECK(log);
        CHECK_MSG(rc == 1 && strstr(log, names[k]) && strstr(log, strerror(ENOSPC)), "%s: rc %d, stderr:\n%s", names[k],
                  rc, log);
        free(log);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* A command line and what its refusal must say (exit 2, nothing run). */
typedef struct bad_flag {
    const char *args, *says;
} bad_flag;

TEST(cli_numeric_flags_of_every_command_are_strict) {
    char exe[PATH_MAX + 64], cmd[8192];
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    char dir[] = "/tmp/di_num_XXXXXX";
    CHECK(mkdtemp(dir));
    char err[256], out[256], in[256];
    snprintf(err, sizeof err, "%s/err.txt", dir);
    snprintf(out, sizeof out, "%s/out.jsonl", dir);
    snprintf(in, sizeof in, "%s/in.jsonl", dir);
    const char *tok = di_test_data("engine/tokenizer.json");
    const bad_flag bad[] = {
        {"generate --prompt-ids 1 --max-tokens 12x", "--max-tokens: '12x' is not an integer"},
        {"generate --prompt-ids 1 --temperature 0.5abc", "--temperature: '0.5abc' is not a number"},
        {"generate --prompt-ids 1 --seed -1", "--seed: '-1' is negative"},
        {"generate --prompt-ids 1 --seed 18446744073709551616", "--seed: must be in [0, 18446744073709551615]"},
        {"generate --prompt-ids 1 --max-num-seqs 0", "--max-num-seqs: must be in [1, 16384], got 0"},
        {"generate --prompt-ids 1 --max-tokens 99999999999999999999", "--max-tokens: must be in [1, 2147483647]"},
        {"generate --prompt-ids 1 --top-p 1.5", "--top-p: must be in"},
        {"generate --prompt-ids 1 --temperature nan", "--temperature: 'nan' is not a number"},
        {"generate --prompt-ids 1 --max-num-batched-tokens ' 8'", "--max-num-batched-tokens: ' 8' is not an integer"},
        {"generate --prompt-ids 1,,2", "--prompt-ids: '1,,2' is not a comma-separated list"},
        {"generate --prompt-ids 1 --stop-token-ids 5x", "--stop-token-ids: item 1: '5x' is not an integer"},
        {"generate --prompt-ids 1 --memory-budget 3Q", "--memory-budget: '3Q' is not a byte count"},
        {"generate --prompt-ids 1 --page-rows 0x10", "--page-rows: '0x10' is not an integer"},
        {"bench --decode 3x", "--decode: '3x' is not an integer"},
        {"bench --batch 1,0", "--batch: item 2: must be in [1, 1024], got 0"},
        {"bench --dummy x --seed -5", "--seed: '-5' is negative"},
        {"bench-engine --reps 2.5", "--reps: '2.5' is not an integer"},
        {"bench-engine --batches 1,x", "--batches: item 2: 'x' is not an integer"},
        {"score --prompt-ids 1,2x --logits-out /dev/null", "--prompt-ids: item 2: '2x' is not an integer"},
        {"score --prompt-ids 1 --steps -1 --logits-out /dev/null", "--steps: must be in [0, 16777216], got -1"},
        {"inspect --context 5k", "--context: '5k' is not a non-negative integer"},
        {"so-check --limit 1e3", "--limit: '1e3' is not an integer"},
        {"dummy x --layers 1.5", "--layers: '1.5' is not an integer"},
        {"dummy x --layers 1 --shard-gb inf", "--shard-gb: 'inf' is not a number"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(cmd, sizeof cmd, "'%s' %s >%s 2>%s", exe, bad[k].args, out, err);
        int rc = sh(cmd);
        char *log = slurp(err);
        CHECK(log);
        CHECK_MSG(rc == 2 && strstr(log, bad[k].says), "deepinfer %s: rc %d, stderr:\n%s(want \"%s\")", bad[k].args, rc,
                  log, bad[k].says);
        free(log);
    }
    /* tokenize (its bench flags are read after the tokenizer loads) */
    snprintf(cmd, sizeof cmd, "'%s' tokenize --tokenizer %s --bench /dev/null --repeat 0 2>%s", exe, tok, err);
    CHECK_EQ_INT(sh(cmd), 2);
    char *log = slurp(err);
    CHECK_MSG(log && strstr(log, "--repeat: must be in [1, 2147483647], got 0"), "%s", log ? log : "");
    free(log);
    snprintf(cmd, sizeof cmd, "echo '1 2x 3' | '%s' tokenize --tokenizer %s --decode >/dev/null 2>%s", exe, tok, err);
    CHECK_EQ_INT(sh(cmd), 1);
    log = slurp(err);
    CHECK_MSG(log && strstr(log, "\"2x\" is not an id"), "%s", log ? log : "");
    free(log);
    /* the largest seed is a seed */
    const char *model = di_test_data(ENGINE_GOLDEN);
    snprintf(cmd, sizeof cmd, "'%s' generate --model %s --prompt-ids 1,2 --max-tokens 2 --seed 18446744073709551615 --quiet "
             "--output %s 2>%s", exe, model, out, err);
    CHECK_EQ_INT(sh(cmd), 0);
    /* JSONL numbers: a negative seed and an id beyond int32 are refused by name */
    write_text(in, "{\"prompt_token_ids\": [1], \"sampling_params\": {\"seed\": -1}}\n"
                   "{\"prompt_token_ids\": [1], \"sampling_params\": {\"stop_token_ids\": [4294967297]}}\n"
                   "{\"prompt_token_ids\": [4294967297]}\n"
                   "{\"prompt_token_ids\": 5}\n"
                   "{\"prompt_token_ids\": [1], \"sampling_params\": {\"max_tokens\": 1.5}}\n");
    snprintf(cmd, sizeof cmd, "'%s' generate --model %s --prompts %s --max-tokens 2 --quiet --output %s 2>%s", exe, model,
             in, out, err);
    CHECK_EQ_INT(sh(cmd), 1);
    char *text = slurp(out);
    CHECK(text);
    const char *want[5] = {"line 1: sampling_params.seed must be an integer in [0, ",
                           "line 2: sampling_params.stop_token_ids must hold token ids",
                           "line 3: prompt_token_ids[0] is not a token id", "line 4: \"prompt_token_ids\" must be an array",
                           "line 5: sampling_params.max_tokens must be an integer"};
    for (int i = 0; i < 5; i++) {
        di_json_doc *d = record(text, i);
        CHECK_MSG(d && strstr(str_of(d, "error"), want[i]), "line %d: %s (want \"%s\")", i + 1, str_of(d, "error"), want[i]);
        di_json_free(d);
    }
    free(text);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

TEST(cli_generate_refuses_nul_in_text_prompts_and_keeps_other_control_bytes) {
    char exe[PATH_MAX + 64], cmd[8192];
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    char dir[] = "/tmp/di_nul_XXXXXX";
    CHECK(mkdtemp(dir));
    char in[256], out[256], out2[256];
    snprintf(in, sizeof in, "%s/in.jsonl", dir);
    snprintf(out, sizeof out, "%s/out.jsonl", dir);
    snprintf(out2, sizeof out2, "%s/out2.jsonl", dir);
    write_text(in, "\"ab\\u0000cd\"\n"
                   "{\"prompt\": \"x\\u0000y\"}\n"
                   "{\"prompt\": \"ok\", \"sampling_params\": {\"stop\": [\"a\\u0000b\"]}}\n"
                   "{\"prompt\": \"a\\u0001\\u001b\\tb\"}\n"
                   "{\"prompt\": \"ab\"}\n"
                   "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\\u0000 there friend\"}]}\n"
                   "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
    const char *model = di_test_data(ENGINE_GOLDEN), *tok = di_test_data("engine/tokenizer.json");
    snprintf(cmd, sizeof cmd, "'%s' generate --model %s --tokenizer %s --prompts %s --max-tokens 2 --quiet --output %s 2>/dev/null",
             exe, model, tok, in, out);
    CHECK_EQ_INT(sh(cmd), 1);
    char *text = slurp(out);
    CHECK(text);
    const char *want[3] = {"line 1: the prompt string holds a NUL character (\\u0000) at byte 2",
                           "line 2: \"prompt\" holds a NUL character (\\u0000) at byte 1",
                           "line 3: sampling_params.stop must not hold a NUL character"};
    for (int i = 0; i < 3; i++) {
        di_json_doc *d = record(text, i);
        CHECK_MSG(d && strstr(str_of(d, "error"), want[i]), "line %d: status %s, error \"%s\" (want \"%s\")", i + 1,
                  str_of(d, "status"), str_of(d, "error"), want[i]);
        di_json_free(d);
    }
    di_json_doc *ctl = record(text, 3), *ab = record(text, 4), *mnul = record(text, 5), *mhi = record(text, 6);
    CHECK(ctl && ab && mnul && mhi);
    CHECK(!strcmp(str_of(ctl, "status"), "ok") && !strcmp(str_of(mnul, "status"), "ok"));
    int64_t n_ctl = int_of(ctl, "prompt_tokens"), n_ab = int_of(ab, "prompt_tokens");
    int64_t n_mnul = int_of(mnul, "prompt_tokens"), n_mhi = int_of(mhi, "prompt_tokens");
    di_json_free(ctl), di_json_free(ab), di_json_free(mnul), di_json_free(mhi);
    free(text);
    CHECK_MSG(n_ctl > n_ab, "control bytes dropped: %lld prompt tokens vs %lld for \"ab\"", (long long)n_ctl, (long long)n_ab);
    CHECK_MSG(n_mnul > n_mhi + 1, "a message was cut at its NUL: %lld prompt tokens vs %lld for \"hi\"", (long long)n_mnul,
              (long long)n_mhi);
    /* --prompt: the same control bytes from the command line give the same prompt */
    snprintf(cmd, sizeof cmd,
             "'%s' generate --model %s --tokenizer %s --prompt \"$(printf 'a\\001\\033\\tb')\" --max-tokens 2 --quiet "
             "--output %s 2>/dev/null",
             exe, model, tok, out2);
    CHECK_EQ_INT(sh(cmd), 0);
    text = slurp(out2);
    di_json_doc *d = record(text, 0);
    CHECK_MSG(d && int_of(d, "prompt_tokens") == n_ctl, "--prompt gives %lld prompt tokens, the JSONL line %lld",
              (long long)int_of(d, "prompt_tokens"), (long long)n_ctl);
    di_json_free(d);
    free(text);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* The model directory a command reports: inspect --json's "model_dir", generate's plan "model" line. */
static int reported_dir(const char *log, const char *key, char *out, size_t n) {
    const char *p = strstr(log, key);
    if (!p) return 0;
    p += strlen(key);
    while (*p == ' ' || *p == '"') p++;
    size_t k = strcspn(p, "\" \n");
    if (k >= n) return 0;
    memcpy(out, p, k);
    out[k] = '\0';
    return 1;
}

TEST(cli_commands_find_the_model_by_one_rule) {
    char exe[PATH_MAX + 64], cmd[4 * PATH_MAX + 1024];
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    char dir[] = "/tmp/di_rule_XXXXXX";
    CHECK(mkdtemp(dir));
    char golden[PATH_MAX];
    CHECK(realpath(di_test_data(ENGINE_GOLDEN), golden));
    /* a Hugging Face cache holding exactly one DeepSeek-V4 entry: picked only when asked for */
    snprintf(cmd, sizeof cmd,
             "set -e; r=%s/hub/models--deepseek-ai--DeepSeek-V4-Flash; mkdir -p $r/refs $r/snapshots; "
             "ln -s %s $r/snapshots/abc; printf abc > $r/refs/main",
             dir, golden);
    CHECK_EQ_INT(sh(cmd), 0);
    const char *envs[2] = {"", "DEEPINFER_HF_MODEL_DIR=%s"};
    for (int k = 0; k < 2; k++) {
        char env[PATH_MAX + 64], a[PATH_MAX], b[PATH_MAX];
        snprintf(env, sizeof env, envs[k], golden);
        char inspect_out[256], gen_err[256];
        snprintf(inspect_out, sizeof inspect_out, "%s/inspect.json", dir);
        snprintf(gen_err, sizeof gen_err, "%s/gen.txt", dir);
        snprintf(cmd, sizeof cmd,
                 "env -u DEEPINFER_HF_MODEL_DIR -u HF_HUB_CACHE HF_HOME=%s %s '%s' inspect --json --config-only >%s 2>&1",
                 dir, env, exe, inspect_out);
        CHECK_EQ_INT(sh(cmd), 0);
        snprintf(cmd, sizeof cmd,
                 "env -u DEEPINFER_HF_MODEL_DIR -u HF_HUB_CACHE HF_HOME=%s %s '%s' generate --prompt-ids 1,2 --max-tokens 1 "
                 "--max-model-len 64 >/dev/null 2>%s",
                 dir, env, exe, gen_err);
        CHECK_EQ_INT(sh(cmd), 0);
        char *ij = slurp(inspect_out), *gl = slurp(gen_err);
        CHECK(ij && gl);
        CHECK_MSG(reported_dir(ij, "\"model_dir\":", a, sizeof a) && reported_dir(gl, "model ", b, sizeof b),
                  "inspect:\n%s\ngenerate:\n%s", ij, gl);
        char ra[PATH_MAX], rb[PATH_MAX];
        CHECK(realpath(a, ra) && realpath(b, rb));
        CHECK_MSG(!strcmp(ra, rb), "%s: inspect took %s, generate %s", k ? "$DEEPINFER_HF_MODEL_DIR" : "no model given",
                  ra, rb);
        if (k == 1) CHECK_MSG(!strcmp(ra, golden), "$DEEPINFER_HF_MODEL_DIR ignored: %s", ra);
        else CHECK_MSG(strstr(ra, "models/deepinfer-demo-v41") != NULL, "no model given: %s, not the demo model", ra);
        free(ij), free(gl);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}
