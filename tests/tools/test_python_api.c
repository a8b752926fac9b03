/*
 * The Python API's pytest suite (python/tests) as one test of this runner:
 * spawns `python3 -m pytest -q python/tests` from the repository root, passes
 * when pytest exits 0, and prints pytest's summary line (its whole output on
 * a failure). The C runner stays the one entry point of `make test`, and its
 * last line keeps its format.
 *
 * The interpreter is Debian's /usr/bin/python3 when present: python3-pytest
 * (installed by `./build.sh test`) is a package of that interpreter, which a
 * python3 earlier on PATH (a venv, pyenv) does not see; else python3 on PATH.
 *
 * Skipped where the package cannot load this build's library: the package
 * loads <repo>/build/libdeepinfer.so, so a runner built elsewhere (BUILD=...)
 * would test another build, and a sanitizer build's library cannot be loaded
 * into an uninstrumented python3.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

TEST(python_api_pytest_suite) {
#if DI_TEST_SANITIZED /* test.h */
    SKIP("sanitizer build: its libdeepinfer.so cannot be loaded into python3");
#else
    if (strcmp(DI_BUILD_DIR, "build") != 0)
        SKIP("the Python package loads build/libdeepinfer.so; this runner is built in %s", DI_BUILD_DIR);
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "env PYTHONDONTWRITEBYTECODE=1 %s -m pytest -q -p no:cacheprovider python/tests 2>&1", py);
    FILE *p = popen(cmd, "r");
    CHECK_MSG(p, "cannot run %s", cmd);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    CHECK(out);
    for (size_t k; (k = fread(out + len, 1, cap - len - 1, p)) > 0;) {
        len += k;
        if (len + 1 == cap) {
            char *grown = realloc(out, cap *= 2);
            if (!grown) break;
            out = grown;
        }
    }
    out[len] = '\0';
    int st = pclose(p);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    /* pytest's summary: the last non-empty line ("85 passed in 5.1s") */
    while (len && (out[len - 1] == '\n' || out[len - 1] == '\r')) out[--len] = '\0';
    const char *last = strrchr(out, '\n');
    last = last ? last + 1 : out;
    if (rc != 0) fprintf(stderr, "%s\n", out);
    else fprintf(stderr, "    pytest: %s\n", last);
    int no_pytest = strstr(out, "No module named pytest") != NULL;
    free(out);
    CHECK_MSG(!no_pytest, "%s has no pytest module: install Debian's python3-pytest (./build.sh test does)", py);
    CHECK_MSG(rc == 0, "%s -m pytest python/tests exited %d", py, rc);
#endif
}
