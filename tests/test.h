/*
 * test.h — deepinfer's test harness.
 *
 * A test is a function declared with TEST(name) in any file under tests/;
 * it registers itself at load time, so adding a test file needs no edit
 * anywhere else. The runner (tests/runner.c) runs every test in its own
 * forked process (a crash fails one test, not the run) and ends with the
 * line "N passed, N failed, N skipped".
 *
 * Checks: CHECK(cond), CHECK_MSG(cond, fmt, ...), CHECK_EQ_INT(a, b),
 * CHECK_NEAR(a, b, tol), CHECK_STR_EQ(a, b). A failed check reports and
 * returns from the test function.
 *
 * SKIP(fmt, ...) ends a test that cannot check what its name says here
 * (missing hardware, data or tool): it is counted as skipped, never as
 * passed, and its reason is printed on the SKIP line. A failed check before
 * or after wins over a skip.
 */
#ifndef DI_TEST_H
#define DI_TEST_H

#include <stdio.h>
#include <string.h>

/* The sanitizer build (./build.sh asan: ASan + UBSan) runs the whole suite again to find memory and
 * undefined-behaviour defects, at several times the cost. DI_TEST_SIZE(full, sanitized) lets a heavy
 * end-to-end test take a smaller workload there; the plain run checks the full size. */
#if defined(__SANITIZE_ADDRESS__)
#define DI_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DI_TEST_SANITIZED 1
#endif
#endif
#ifndef DI_TEST_SANITIZED
#define DI_TEST_SANITIZED 0
#endif
#define DI_TEST_SIZE(full, sanitized) (DI_TEST_SANITIZED ? (sanitized) : (full))

typedef void (*di_test_fn)(void);

void di_test_register(const char *file, const char *name, di_test_fn fn);
void di_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void di_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Path of a test data file: $DEEPINFER_TEST_DATA (default "tests/data") + "/" + rel.
 * Returns a pointer to a static buffer (one of 8 rotating buffers). */
const char *di_test_data(const char *rel);

/* Path of generated test data: <build dir>/data/rel (made by `make test`,
 * e.g. the tiny random checkpoint of tools/gen_tiny_checkpoint.py).
 * Static rotating buffers as di_test_data. */
const char *di_test_gen_data(const char *rel);

/* The path of a binary next to the test runner (rel: "deepinfer", "examples/x") into out;
 * 1 when that file exists. */
int di_test_sibling(const char *rel, char *out, size_t n);

/* 1 if the current test has failed a check. */
int di_test_failed(void);

/* 1 if the current test has called SKIP. */
int di_test_skipped(void);

#define TEST(name)                                                                          \
    static void di_test_##name(void);                                                       \
    __attribute__((constructor)) static void di_test_reg_##name(void) {                     \
        di_test_register(__FILE__, #name, di_test_##name);                                  \
    }                                                                                       \
    static void di_test_##name(void)

#define SKIP(...)                                                                           \
    do {                                                                                    \
        di_test_skip(__VA_ARGS__);                                                          \
        return;                                                                             \
    } while (0)

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            di_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                           \
            return;                                                                         \
        }                                                                                   \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            di_test_fail(__FILE__, __LINE__, __VA_ARGS__);                                  \
            return;                                                                         \
        }                                                                                   \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                  \
    do {                                                                                    \
        long long di_a_ = (long long)(a), di_b_ = (long long)(b);                           \
        if (di_a_ != di_b_) {                                                               \
            di_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, di_a_, di_b_); \
            return;                                                                         \
        }                                                                                   \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                               \
    do {                                                                                    \
        double di_a_ = (double)(a), di_b_ = (double)(b), di_t_ = (double)(tol);             \
        if (!(di_a_ - di_b_ <= di_t_ && di_b_ - di_a_ <= di_t_)) {                          \
            di_test_fail(__FILE__, __LINE__, "%s ~ %s: %.9g vs %.9g (tol %.3g)", #a, #b,     \
                         di_a_, di_b_, di_t_);                                              \
            return;                                                                         \
        }                                                                                   \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                                  \
    do {                                                                                    \
        const char *di_a_ = (a), *di_b_ = (b);                                              \
        if (!di_a_ || !di_b_ || strcmp(di_a_, di_b_) != 0) {                                \
            di_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,          \
                         di_a_ ? di_a_ : "(null)", di_b_ ? di_b_ : "(null)");               \
            return;                                                                         \
        }                                                                                   \
    } while (0)

#endif
