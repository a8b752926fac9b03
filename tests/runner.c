/*
 * runner.c — runs every registered test and prints "N passed, N failed, N skipped".
 *
 * A test ends PASS, FAIL or SKIP (it called SKIP(reason): what it checks is not
 * available here); a skip is printed with its reason and never counted as a pass.
 * A forked test reports its skip by exit status SKIP_STATUS and sends the reason
 * through a pipe.
 *
 * usage: test_runner [--list] [--no-fork] [--timeout SEC] [--jobs N] [FILTER...]
 *   FILTER   run only tests whose "file:name" contains one of the substrings
 *   --no-fork run in-process (for debuggers); a crash then ends the run
 *   --timeout per-test limit in seconds (default 600)
 *   --jobs    run up to N tests at once (default 1); each test's output is
 *             held and printed, with its result line, when it ends
 */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

typedef struct test_case {
    const char *file;
    const char *name;
    di_test_fn fn;
} test_case;

static test_case *g_tests;
static int g_ntests, g_cap;
static int g_failed_current;
static int g_skipped_current;
static char g_skip_reason[512];

enum { OUT_PASS, OUT_FAIL, OUT_SKIP };
#define SKIP_STATUS 77 /* the automake convention for "skipped" */

void di_test_register(const char *file, const char *name, di_test_fn fn) {
    if (g_ntests == g_cap) {
        g_cap = g_cap ? g_cap * 2 : 256;
        g_tests = realloc(g_tests, (size_t)g_cap * sizeof *g_tests);
        if (!g_tests) {
            fprintf(stderr, "out of memory registering tests\n");
            _exit(2);
        }
    }
    const char *base = strrchr(file, '/');
    g_tests[g_ntests++] = (test_case){base ? base + 1 : file, name, fn};
}

void di_test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    const char *base = strrchr(file, '/');
    fprintf(stderr, "    %s:%d: ", base ? base + 1 : file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    g_failed_current = 1;
}

void di_test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_skip_reason, sizeof g_skip_reason, fmt, ap);
    va_end(ap);
    g_skipped_current = 1;
}

int di_test_skipped(void) { return g_skipped_current; }

int di_test_sibling(const char *rel, char *out, size_t n) {
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return 0;
    exe[k] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return 0;
    *slash = '\0';
    snprintf(out, n, "%s/%s", exe, rel);
    FILE *f = fopen(out, "rb");
    if (!f) return 0;
    fclose(f);
    return 1;
}

int di_test_failed(void) { return g_failed_current; }

const char *di_test_data(const char *rel) {
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ & 7];
    const char *root = getenv("DEEPINFER_TEST_DATA");
    snprintf(b, sizeof bufs[0], "%s/%s", root ? root : "tests/data", rel);
    return b;
}

const char *di_test_gen_data(const char *rel) {
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ & 7];
#ifndef DI_BUILD_DIR
#define DI_BUILD_DIR "build"
#endif
    snprintf(b, sizeof bufs[0], "%s/data/%s", DI_BUILD_DIR, rel);
    return b;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_tests(const void *a, const void *b) {
    const test_case *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : strcmp(x->name, y->name);
}

static int matches(const test_case *t, int nfilters, char **filters) {
    if (!nfilters) return 1;
    char full[512];
    snprintf(full, sizeof full, "%s:%s", t->file, t->name);
    for (int i = 0; i < nfilters; i++)
        if (strstr(full, filters[i])) return 1;
    return 0;
}

static int outcome_in_process(void) {
    if (g_failed_current) return OUT_FAIL;
    return g_skipped_current ? OUT_SKIP : OUT_PASS;
}

/* A test running in a child process. */
typedef struct running {
    const test_case *t;
    pid_t pid;
    int reason_fd; /* read end of the pipe that carries the skip reason */
    FILE *log;     /* the child's stdout and stderr (--jobs > 1), else NULL */
    double t0;
} running;

/* Forks t; with capture, its output goes to a temporary file printed when it ends. */
static int start_forked(const test_case *t, int timeout_s, int capture, running *r) {
    int fds[2];
    r->t = t, r->pid = -1, r->log = NULL, r->t0 = now_s();
    if (pipe2(fds, O_CLOEXEC) < 0) { /* not inherited by programs a test runs */
        perror("pipe");
        return -1;
    }
    if (capture && !(r->log = tmpfile())) {
        perror("tmpfile");
        close(fds[0]), close(fds[1]);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        close(fds[0]), close(fds[1]);
        if (r->log) fclose(r->log), r->log = NULL;
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        if (r->log) dup2(fileno(r->log), 1), dup2(fileno(r->log), 2);
        alarm((unsigned)timeout_s);
        g_failed_current = g_skipped_current = 0;
        t->fn();
        fflush(stdout);
        fflush(stderr);
        int out = outcome_in_process();
        if (out == OUT_SKIP) {
            size_t len = strlen(g_skip_reason);
            if (write(fds[1], g_skip_reason, len) != (ssize_t)len) _exit(1);
        }
        _exit(out == OUT_FAIL ? 1 : out == OUT_SKIP ? SKIP_STATUS : 0);
    }
    close(fds[1]);
    r->pid = pid, r->reason_fd = fds[0];
    return 0;
}

/* The outcome of a child that exited with `status`; its skip reason into reason, its captured output
 * to stderr. */
static int finish_forked(running *r, int status, char *reason, size_t rn) {
    size_t got = 0;
    for (;;) {
        ssize_t k = read(r->reason_fd, reason + got, rn - 1 - got);
        if (k <= 0 || (got += (size_t)k) >= rn - 1) break;
    }
    reason[got] = '\0';
    close(r->reason_fd);
    if (r->log) {
        char buf[4096];
        size_t k;
        rewind(r->log);
        while ((k = fread(buf, 1, sizeof buf, r->log)) > 0) fwrite(buf, 1, k, stderr);
        fclose(r->log);
        r->log = NULL;
    }
    if (WIFEXITED(status)) {
        int code = WEXITSTATUS(status);
        return code == 0 ? OUT_PASS : code == SKIP_STATUS ? OUT_SKIP : OUT_FAIL;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        fprintf(stderr, "    crashed with signal %d (%s)%s\n", sig, strsignal(sig),
                sig == SIGALRM ? " — timed out" : "");
    }
    return OUT_FAIL;
}

typedef struct tally {
    int passed, failed, skipped;
} tally;

static void report(tally *n, const test_case *t, int out, double dt, const char *reason) {
    static const char *const out_name[] = {"PASS", "FAIL", "SKIP"};
    if (out == OUT_SKIP)
        printf("SKIP %s:%s (%.2fs): %s\n", t->file, t->name, dt, reason[0] ? reason : "(no reason given)");
    else printf("%s %s:%s (%.2fs)\n", out_name[out], t->file, t->name, dt);
    fflush(stdout);
    if (out == OUT_PASS) n->passed++;
    else if (out == OUT_FAIL) n->failed++;
    else n->skipped++;
}

int main(int argc, char **argv) {
    int list = 0, fork_tests = 1, timeout_s = 600, jobs = 1;
    char **filters = calloc((size_t)argc + 1, sizeof *filters);
    int nfilters = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) list = 1;
        else if (!strcmp(argv[i], "--no-fork")) fork_tests = 0;
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout_s = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc) jobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: %s [--list] [--no-fork] [--timeout SEC] [--jobs N] [FILTER...]\n", argv[0]);
            return 0;
        } else filters[nfilters++] = argv[i];
    }
    if (jobs < 1) jobs = 1;
    if (jobs > 64) jobs = 64;
    qsort(g_tests, (size_t)g_ntests, sizeof *g_tests, cmp_tests);
    tally n = {0, 0, 0};
    running run[64];
    int nrun = 0;
    double t_all = now_s();
    char reason[sizeof g_skip_reason];
    for (int i = 0; i <= g_ntests; i++) {
        const test_case *t = i < g_ntests ? &g_tests[i] : NULL;
        if (t && !matches(t, nfilters, filters)) continue;
        if (t && list) {
            printf("%s:%s\n", t->file, t->name);
            continue;
        }
        if (t && !fork_tests) {
            double t0 = now_s();
            g_failed_current = g_skipped_current = 0;
            t->fn();
            snprintf(reason, sizeof reason, "%s", g_skip_reason);
            report(&n, t, outcome_in_process(), now_s() - t0, reason);
            continue;
        }
        /* wait for a slot (for the last ones: for every test) */
        while (nrun > 0 && (nrun >= jobs || !t)) {
            int status = 0;
            pid_t pid = waitpid(-1, &status, 0);
            if (pid < 0) continue;
            for (int k = 0; k < nrun; k++)
                if (run[k].pid == pid) {
                    int out = finish_forked(&run[k], status, reason, sizeof reason);
                    report(&n, run[k].t, out, now_s() - run[k].t0, reason);
                    run[k] = run[--nrun];
                    break;
                }
        }
        if (!t) break;
        if (start_forked(t, timeout_s, jobs > 1, &run[nrun]) == 0) nrun++;
        else report(&n, t, OUT_FAIL, 0.0, "");
    }
    free(filters);
    if (list) return 0;
    printf("total time %.1fs\n", now_s() - t_all);
    printf("%d passed, %d failed, %d skipped\n", n.passed, n.failed, n.skipped);
    return n.failed ? 1 : 0;
}
