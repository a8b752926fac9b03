/*
 * serve_proc.h — start `deepinfer serve` (the CLI next to the test runner)
 * on a free loopback port for an end-to-end test, and stop it with SIGTERM.
 * Header-only: shared by the tests in this directory.
 */
#ifndef DI_TESTS_SERVE_PROC_H
#define DI_TESTS_SERVE_PROC_H

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

typedef struct serve_proc {
    pid_t pid;
    int port;
    char log[256];
    char exe[PATH_MAX + 64];
} serve_proc;

/* The first 64 KiB of a text file (static buffer; "" if unreadable). */
static const char *file_text(const char *path) {
    static char buf[65536];
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* The server's log so far. */
static const char *serve_log(const serve_proc *p) { return file_text(p->log); }

/* Start the server with `extra` arguments (NULL-terminated, may be NULL); wait
 * until it listens (at most 20 s). 0 on success. */
static int serve_start(serve_proc *p, const char *const *extra) {
    memset(p, 0, sizeof *p);
    if (!di_test_sibling("deepinfer", p->exe, sizeof p->exe)) return -1;
    snprintf(p->log, sizeof p->log, "/tmp/di_serve_%d_%ld.log", (int)getpid(), (long)time(NULL));
    const char *argv[32] = {p->exe, "serve", "--model", "models/deepinfer-demo-v41", "--port", "0"};
    int argc = 6;
    for (int i = 0; extra && extra[i] && argc < 30; i++) argv[argc++] = extra[i];
    argv[argc] = NULL;
    p->pid = fork();
    if (p->pid < 0) return -1;
    if (p->pid == 0) {
        int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        execv(p->exe, (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 400; i++) {
        const char *l = strstr(serve_log(p), "listening on http://127.0.0.1:");
        if (l) {
            p->port = atoi(l + strlen("listening on http://127.0.0.1:"));
            return p->port > 0 ? 0 : -1;
        }
        int st;
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            p->pid = 0;
            return -1;
        }
        usleep(50000);
    }
    return -1;
}

/* SIGTERM and wait (at most 30 s, then SIGKILL). Returns the exit status, or -1. */
static int serve_stop(serve_proc *p) {
    if (p->pid <= 0) return -1;
    kill(p->pid, SIGTERM);
    int st = 0;
    for (int i = 0; i < 600; i++) {
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            p->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        usleep(50000);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &st, 0);
    p->pid = 0;
    return -1;
}

static int serve_sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
