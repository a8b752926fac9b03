/*
 * `make install` into a temporary prefix, then a program outside the tree
 * built with pkg-config against the shared library and against the static
 * archive (tools/check_install.sh says what it checks). Skipped in sanitizer
 * builds: the installed library is instrumented there, a plain `cc` program
 * cannot link it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "test.h"

TEST(install_prefix_pkg_config_program_outside_the_tree) {
#if DI_TEST_SANITIZED /* test.h */
    SKIP("sanitizer build: the installed library and program are the plain build's");
#else
    int st = system("sh tools/check_install.sh " DI_BUILD_DIR " >&2");
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tools/check_install.sh %s failed (status %d)", DI_BUILD_DIR, st);
#endif
}
