/* ICU loaded at run time (util/icu_loader.h): it resolves on this machine,
 * $DEEPINFER_ICU_LIB is honoured, and without ICU the Engram token map fails
 * with a clear message while the rest (the tokenizer) still works. The
 * normalizer's results are those of the linked ICU it replaced:
 * test_engram_token_map.c checks hand-picked cases and the whole DeepSeek
 * tokenizer against the Python oracle. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/engram_token_key.h"
#include "model/engram_token_map.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "util/icu_loader.h"

#define NEED_ICU_MSG                                                                                     \
    "DeepSeek-V4.1 Engram token keys need ICU (libicuuc): install libicu72 or set "                    \
    "DEEPINFER_ICU_LIB=/path/to/libicuuc.so.N"

/* The hand-declared ICU ABI against ICU's own headers, where installed. */
#if defined(__has_include)
#if __has_include(<unicode/uchar.h>) && __has_include(<unicode/utypes.h>)
#include <unicode/uchar.h>
#include <unicode/utypes.h>
#define HAVE_ICU_HEADERS 1
_Static_assert(sizeof(di_uchar) == sizeof(UChar), "UChar");
_Static_assert(sizeof(di_uchar32) == sizeof(UChar32), "UChar32");
_Static_assert(sizeof(di_ubool) == sizeof(UBool), "UBool");
_Static_assert(sizeof(di_uerror) == sizeof(UErrorCode), "UErrorCode");
_Static_assert(DI_U_ZERO_ERROR == U_ZERO_ERROR, "U_ZERO_ERROR");
_Static_assert(DI_U_BUFFER_OVERFLOW_ERROR == U_BUFFER_OVERFLOW_ERROR, "U_BUFFER_OVERFLOW_ERROR");
_Static_assert(DI_U_NON_SPACING_MARK == U_NON_SPACING_MARK, "U_NON_SPACING_MARK");
_Static_assert(DI_U_ENCLOSING_MARK == U_ENCLOSING_MARK, "U_ENCLOSING_MARK");
_Static_assert(DI_U_COMBINING_SPACING_MARK == U_COMBINING_SPACING_MARK, "U_COMBINING_SPACING_MARK");
#endif
#endif

TEST(icu_loader_resolves) {
    const di_icu *icu;
    di_error err;
    CHECK_MSG(di_icu_get(&icu, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(icu->handle != NULL);
    CHECK_MSG(icu->version == 0 || (icu->version >= DI_ICU_VERSION_MIN && icu->version <= DI_ICU_VERSION_MAX),
              "version %d from %s", icu->version, icu->lib);
#ifdef HAVE_ICU_HEADERS
    /* Loaded through the unversioned name (the -dev symlink that comes with
     * the headers): it is the library of the installed headers. A binary
     * carried to another machine (the GPU host) loads that machine's ICU. */
    if (!strcmp(icu->lib, "libicuuc.so")) CHECK_EQ_INT(icu->version, U_ICU_VERSION_MAJOR_NUM);
#endif
    void *const fns[] = {
        (void *)icu->errorName,         (void *)icu->charType,
        (void *)icu->isUWhiteSpace,     (void *)icu->strFromUTF8,
        (void *)icu->strToUTF8,         (void *)icu->strToLower,
        (void *)icu->set_openPattern,   (void *)icu->set_freeze,
        (void *)icu->set_contains,      (void *)icu->set_close,
        (void *)icu->norm_getNFKCInstance, (void *)icu->norm_getNFDInstance,
        (void *)icu->norm_openFiltered, (void *)icu->norm_close,
        (void *)icu->norm_normalize,
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) CHECK_MSG(fns[i] != NULL, "function %zu", i);
    CHECK_STR_EQ(icu->errorName(DI_U_ZERO_ERROR), "U_ZERO_ERROR");
    CHECK_STR_EQ(icu->errorName(DI_U_BUFFER_OVERFLOW_ERROR), "U_BUFFER_OVERFLOW_ERROR");
    CHECK_EQ_INT(icu->charType(0x0301), DI_U_NON_SPACING_MARK);
    CHECK_EQ_INT(icu->charType(0x093E), DI_U_COMBINING_SPACING_MARK);
    CHECK_EQ_INT(icu->charType(0x20DD), DI_U_ENCLOSING_MARK);
    CHECK(icu->isUWhiteSpace(0x2028) && !icu->isUWhiteSpace(0x1C));
    /* Round trip through UTF-16 with a supplementary character and lowercase. */
    di_uchar u[16];
    char back[32];
    int32_t n = 0, m = 0;
    di_uerror st = DI_U_ZERO_ERROR;
    icu->strFromUTF8(u, 16, &n, "A\xf0\x9f\x98\x80\xc3\x89", -1, &st);
    CHECK_MSG(DI_U_SUCCESS(st) && n == 4, "st %d n %d", st, n);
    di_uchar low[16];
    int32_t nl = icu->strToLower(low, 16, u, n, "", &st);
    icu->strToUTF8(back, sizeof back, &m, low, nl, &st);
    CHECK(DI_U_SUCCESS(st));
    back[m] = 0;
    CHECK_STR_EQ(back, "a\xf0\x9f\x98\x80\xc3\xa9");
    /* The same table on every call. */
    const di_icu *again;
    CHECK(di_icu_get(&again, &err) == DEEPINFER_OK && again == icu);
}

TEST(icu_loader_env_override) {
    const di_icu *icu;
    di_error err;
    CHECK_MSG(di_icu_get(&icu, &err) == DEEPINFER_OK, "%s", err.msg);
    setenv("DEEPINFER_ICU_LIB", icu->lib, 1);
    di_icu api;
    deepinfer_status st = di_icu_load(&api, &err);
    unsetenv("DEEPINFER_ICU_LIB");
    CHECK_MSG(st == DEEPINFER_OK, "%s", err.msg);
    int v = api.version;
    CHECK_STR_EQ(api.errorName(DI_U_BUFFER_OVERFLOW_ERROR), "U_BUFFER_OVERFLOW_ERROR");
    di_icu_unload(&api);
    CHECK_EQ_INT(v, icu->version);
    CHECK(api.handle == NULL);
}

TEST(icu_loader_env_missing_file) {
    setenv("DEEPINFER_ICU_LIB", "/nonexistent/libicuuc.so.99", 1);
    di_icu api;
    di_error err;
    deepinfer_status st = di_icu_load(&api, &err);
    unsetenv("DEEPINFER_ICU_LIB");
    CHECK_EQ_INT(st, DEEPINFER_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, NEED_ICU_MSG) != NULL, "%s", err.msg);
    CHECK_MSG(strstr(err.msg, "DEEPINFER_ICU_LIB=/nonexistent/libicuuc.so.99: ") == err.msg, "%s", err.msg);
    CHECK(api.handle == NULL);
}

TEST(icu_loader_env_not_icu) {
    setenv("DEEPINFER_ICU_LIB", "libz.so.1", 1); /* opens, but is not ICU */
    di_icu api;
    di_error err;
    deepinfer_status st = di_icu_load(&api, &err);
    unsetenv("DEEPINFER_ICU_LIB");
    CHECK_EQ_INT(st, DEEPINFER_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, NEED_ICU_MSG) && strstr(err.msg, "libz.so.1 is not libicuuc"), "%s", err.msg);
}

/* Runs only in the fresh process that engram_without_icu starts, with
 * DEEPINFER_ICU_LIB naming a missing file: the process-wide one-time load
 * fails, Engram keys report it, and the tokenizer works regardless. */
TEST(icu_missing_child) {
    if (!getenv("DI_TEST_ICU_CHILD")) SKIP("runs only in the child process engram_without_icu starts");
    di_error err;
    di_engram_keyer *k = (di_engram_keyer *)1;
    CHECK_EQ_INT(di_engram_keyer_new(&k, &err), DEEPINFER_ERR_UNSUPPORTED);
    CHECK(k == NULL);
    CHECK_MSG(strstr(err.msg, NEED_ICU_MSG) != NULL, "%s", err.msg);
    /* The failure is remembered: the same answer again. */
    CHECK_EQ_INT(di_engram_keyer_new(&k, &err), DEEPINFER_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "DEEPINFER_ICU_LIB=/nonexistent/libicuuc.so.99: " NEED_ICU_MSG) == err.msg, "%s",
              err.msg);
    di_tokenizer *tok = NULL;
    CHECK_MSG(di_tokenizer_load(di_test_data("tokenizer/tokenizer.json"), &tok, &err) == DEEPINFER_OK, "%s",
              err.msg);
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    deepinfer_status est = di_tokenizer_encode(tok, "Hello world", 11, &ids, &n, &cap, &err);
    free(ids);
    CHECK_MSG(est == DEEPINFER_OK && n > 0, "encode: %s", err.msg);
    di_engram_token_map map;
    deepinfer_status st = di_engram_token_map_from_tokenizer(tok, &map, &err);
    di_tokenizer_free(tok);
    CHECK_EQ_INT(st, DEEPINFER_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, NEED_ICU_MSG) != NULL, "%s", err.msg);
}

TEST(engram_without_icu) {
    if (getenv("DI_TEST_ICU_CHILD")) SKIP("the parent half of engram_without_icu: not in its own child");
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* a fresh runner: its ICU one-time init has not run */
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        setenv("DI_TEST_ICU_CHILD", "1", 1);
        setenv("DEEPINFER_ICU_LIB", "/nonexistent/libicuuc.so.99", 1);
        execl("/proc/self/exe", "test_runner", "--no-fork", "test_icu_loader.c:icu_missing_child", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char out[4096];
    size_t len = 0;
    ssize_t r;
    while ((r = read(fds[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)r;
    close(fds[0]);
    out[len] = 0;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed:\n%s", out);
    CHECK_MSG(strstr(out, "1 passed, 0 failed, 0 skipped") != NULL, "child ran no test:\n%s", out);
}
