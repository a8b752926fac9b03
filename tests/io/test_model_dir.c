/* Tests for src/io/model_dir: --model DIR, repo ids in a fake HF cache,
 * refs/main and its fallbacks, the environment variables, clear errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/model_dir.h"
#include "test.h"

static char g_root[256];

static int mk(const char *rel) {
    char p[512], *s;
    snprintf(p, sizeof p, "%s/%s", g_root, rel);
    for (s = p + strlen(g_root) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(p, 0755);
        *s = '/';
    }
    return mkdir(p, 0755) == 0 ? 0 : -1;
}

static int put(const char *rel, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_root, rel);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static const char *path(const char *rel) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", g_root, rel);
    return p;
}

#define REPO "hub/models--deepseek-ai--DeepSeek-V4.1-Flash"

/* A fake cache: one repo with two snapshots, refs/main → aaa. */
static int setup(void) {
    snprintf(g_root, sizeof g_root, "/tmp/di_md_XXXXXX");
    if (!mkdtemp(g_root)) return -1;
    if (mk(REPO "/refs") || mk(REPO "/snapshots/aaa") || mk(REPO "/snapshots/bbb") || mk("plain")) return -1;
    if (put(REPO "/refs/main", "aaa\n") || put(REPO "/snapshots/aaa/config.json", "{}") ||
        put(REPO "/snapshots/bbb/config.json", "{}") || put("plain/config.json", "{}"))
        return -1;
    unsetenv("HF_HUB_CACHE");
    unsetenv("DEEPINFER_HF_MODEL_DIR");
    setenv("HF_HOME", g_root, 1);
    return 0;
}

static void teardown(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0) fprintf(stderr, "    (could not remove %s)\n", g_root);
}

static deepinfer_status locate(const char *arg, di_model_location *loc, char *msg) {
    di_error e = {0};
    deepinfer_status rc = di_model_locate(arg, loc, &e);
    snprintf(msg, DI_ERROR_MSG_MAX, "%s", e.msg);
    return rc;
}

TEST(md_repo_ids) {
    CHECK(di_is_repo_id("deepseek-ai/DeepSeek-V4.1-Flash"));
    CHECK(di_is_repo_id("deepseek-ai/DeepSeek-V4-Flash@abc123"));
    CHECK(!di_is_repo_id("deepseek-ai"));
    CHECK(!di_is_repo_id("/abs/path"));
    CHECK(!di_is_repo_id("a/b/c"));
    CHECK(!di_is_repo_id("../x"));
    CHECK(!di_is_repo_id("a/.."));
    CHECK(!di_is_repo_id("a/b@"));
}

TEST(md_dir_and_repo_resolution) {
    CHECK(setup() == 0);
    di_model_location loc;
    char m[DI_ERROR_MSG_MAX];
    CHECK_MSG(locate(path("plain"), &loc, m) == DEEPINFER_OK, "%s", m);
    CHECK_STR_EQ(loc.dir, path("plain"));
    CHECK(strstr(loc.how, "--model"));
    CHECK_MSG(locate("deepseek-ai/DeepSeek-V4.1-Flash", &loc, m) == DEEPINFER_OK, "%s", m);
    CHECK_STR_EQ(loc.dir, path(REPO "/snapshots/aaa"));
    CHECK_STR_EQ(loc.repo_id, "deepseek-ai/DeepSeek-V4.1-Flash");
    CHECK_STR_EQ(loc.revision, "aaa");
    CHECK(strstr(loc.how, "$HF_HOME/hub") && strstr(loc.how, "main"));
    CHECK_MSG(locate("deepseek-ai/DeepSeek-V4.1-Flash@bbb", &loc, m) == DEEPINFER_OK, "%s", m);
    CHECK_STR_EQ(loc.revision, "bbb");
    /* The cache repo folder itself. */
    CHECK_MSG(locate(path(REPO), &loc, m) == DEEPINFER_OK, "%s", m);
    CHECK_STR_EQ(loc.revision, "aaa");
    /* No --model: the only DeepSeek-V4 entry of the cache. */
    CHECK_MSG(locate(NULL, &loc, m) == DEEPINFER_OK, "%s", m);
    CHECK_STR_EQ(loc.repo_id, "deepseek-ai/DeepSeek-V4.1-Flash");
    /* HF_HUB_CACHE wins over HF_HOME. */
    setenv("HF_HUB_CACHE", path("nowhere"), 1);
    CHECK(locate("deepseek-ai/DeepSeek-V4.1-Flash", &loc, m) == DEEPINFER_ERR_NOT_FOUND);
    CHECK_MSG(strstr(m, "nowhere/models--deepseek-ai--DeepSeek-V4.1-Flash does not exist"), "%s", m);
    unsetenv("HF_HUB_CACHE");
    teardown();
}

TEST(md_snapshot_fallbacks) {
    CHECK(setup() == 0);
    di_model_location loc;
    char m[DI_ERROR_MSG_MAX];
    CHECK(put(REPO "/refs/main", "zzz") == 0); /* names no snapshot */
    CHECK_MSG(locate("deepseek-ai/DeepSeek-V4.1-Flash", &loc, m) == DEEPINFER_OK, "%s", m);
    CHECK_STR_EQ(loc.revision, "bbb");
    CHECK(strstr(loc.how, "refs/main names no snapshot") && strstr(loc.how, "lexicographically last"));
    char p[512];
    snprintf(p, sizeof p, "%s", path(REPO "/refs/main"));
    CHECK(remove(p) == 0);
    snprintf(p, sizeof p, "%s", path(REPO "/snapshots/bbb/config.json"));
    CHECK(remove(p) == 0);
    CHECK_MSG(locate("deepseek-ai/DeepSeek-V4.1-Flash", &loc, m) == DEEPINFER_OK, "%s", m);
    CHECK_STR_EQ(loc.revision, "aaa");
    CHECK(strstr(loc.how, "no refs/main"));
    CHECK(locate("deepseek-ai/DeepSeek-V4.1-Flash@ccc", &loc, m) == DEEPINFER_ERR_NOT_FOUND && strstr(m, "'ccc'"));
    snprintf(p, sizeof p, "%s", path(REPO "/snapshots/aaa/config.json"));
    CHECK(remove(p) == 0);
    CHECK(locate("deepseek-ai/DeepSeek-V4.1-Flash", &loc, m) == DEEPINFER_ERR_NOT_FOUND);
    CHECK_MSG(strstr(m, "no usable snapshot") && strstr(m, "refs/main (missing)"), "%s", m);
    teardown();
}

TEST(md_environment_and_errors) {
    CHECK(setup() == 0);
    di_model_location loc;
    char m[DI_ERROR_MSG_MAX];
    setenv("DEEPINFER_HF_MODEL_DIR", path("plain"), 1);
    CHECK_MSG(locate(NULL, &loc, m) == DEEPINFER_OK, "%s", m);
    CHECK_STR_EQ(loc.dir, path("plain"));
    CHECK(strstr(loc.how, "DEEPINFER_HF_MODEL_DIR"));
    /* --model wins over the variable. */
    CHECK(locate("deepseek-ai/DeepSeek-V4.1-Flash", &loc, m) == DEEPINFER_OK && !strcmp(loc.revision, "aaa"));
    /* The variable as a cache root. */
    setenv("DEEPINFER_HF_MODEL_DIR", path("hub"), 1);
    CHECK_MSG(locate(NULL, &loc, m) == DEEPINFER_OK, "%s", m);
    CHECK_STR_EQ(loc.revision, "aaa");
    setenv("DEEPINFER_HF_MODEL_DIR", path("missing"), 1);
    CHECK(locate(NULL, &loc, m) == DEEPINFER_ERR_NOT_FOUND && strstr(m, "DEEPINFER_HF_MODEL_DIR="));
    unsetenv("DEEPINFER_HF_MODEL_DIR");
    CHECK(locate(path("hub"), &loc, m) == DEEPINFER_ERR_NOT_FOUND && strstr(m, "no config.json"));
    CHECK(locate(path("plain/config.json"), &loc, m) == DEEPINFER_ERR_INVALID_ARGUMENT && strstr(m, "is a file"));
    CHECK(locate("not a model", &loc, m) == DEEPINFER_ERR_NOT_FOUND && strstr(m, "not a repo id"));
    CHECK(locate("deepseek-ai/Nope", &loc, m) == DEEPINFER_ERR_NOT_FOUND && strstr(m, "huggingface-cli download"));
    /* Two candidates without --model. */
    CHECK(mk("hub/models--deepseek-ai--DeepSeek-V4-Flash/snapshots") == 0);
    CHECK(locate(NULL, &loc, m) == DEEPINFER_ERR_INVALID_ARGUMENT && strstr(m, "several models"));
    CHECK(strstr(m, "deepseek-ai--DeepSeek-V4-Flash") && strstr(m, "--model ORG/NAME"));
    /* An empty cache. */
    setenv("HF_HUB_CACHE", path("plain"), 1);
    CHECK(locate(NULL, &loc, m) == DEEPINFER_ERR_NOT_FOUND && strstr(m, "pass --model DIR") && strstr(m, "$HF_HUB_CACHE"));
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_HOME");
    const char *home = getenv("HOME");
    char root[512];
    const char *src;
    if (home && di_hf_cache_root(root, sizeof root, &src) == 0) CHECK(strstr(root, "/.cache/huggingface/hub"));
    teardown();
}
