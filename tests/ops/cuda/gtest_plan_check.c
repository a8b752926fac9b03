/* gtest_plan_check.c — a recorded step whose replay fails its shape check
 * (cu_step.h di_cuda_step_end: the step's launches or table layout differ
 * from its graph's): step_end names the error, nothing of the step is
 * issued, the exec stays sound, later eager work runs and lands, and a later
 * step of the same shape that matches its graph replays it. The step is a
 * device buffer written by planned host-to-device copies (ops.h
 * di_copy_h2d: in a plan step the source joins the plan and a device copy
 * out of it is recorded). */
#include <stdint.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/ops.h"
#include "test.h"

enum { KEY = 0x5eed };

/* A planned step of shape KEY writing v to d[0] (and, with twice, w to d[1]: another launch
 * sequence than the graph's). */
static deepinfer_status step(di_exec *x, int32_t *d, const int32_t *v, const int32_t *w, di_error *err) {
    deepinfer_status st = di_backend_step_begin(x, KEY, err);
    if (st) return st;
    di_copy_h2d(x, d, v, sizeof *v);
    if (w) di_copy_h2d(x, d + 1, w, sizeof *w);
    return di_backend_step_end(x, err);
}

static int32_t read0(di_exec *x, const int32_t *d, int i) {
    int32_t h = -1;
    di_copy_d2h(x, &h, d + i, sizeof h);
    return di_exec_sync(x, NULL) ? -2 : h;
}

TEST(gpu_plan_failed_check_leaves_eager_work) {
    di_error err = {0};
    if (di_backend_use(DI_BACKEND_CUDA, &err)) {
        di_test_fail(__FILE__, __LINE__, "backend cuda: %s", err.msg);
        return;
    }
    di_exec x;
    int32_t *d = NULL;
    if (di_exec_init(&x, 0, &err) || di_backend_plan_enable(&x, 1024, 0, &err) || !(d = di_dev_alloc(64))) {
        di_test_fail(__FILE__, __LINE__, "setup: %s", err.msg[0] ? err.msg : "device buffer");
        di_backend_use(DI_BACKEND_CPU, NULL);
        return;
    }
    int32_t a = 11, b = 22, c = 33, e = 44, f = 55;
    CHECK(step(&x, d, &a, NULL, &err) == DEEPINFER_OK); /* captured */
    CHECK(read0(&x, d, 0) == 11);
    CHECK(step(&x, d, &b, NULL, &err) == DEEPINFER_OK); /* replayed with the new table */
    CHECK(read0(&x, d, 0) == 22);
    di_backend_plan_stats s0 = {0}, s1 = {0};
    CHECK(di_backend_plan_stats_get(&x, &s0) == 0 && s0.graphs == 1 && s0.replayed == 1);

    memset(&err, 0, sizeof err);
    CHECK_MSG(step(&x, d, &c, &f, &err) != DEEPINFER_OK, "a replay with more launches than its graph passed the check");
    CHECK_MSG(strstr(err.msg, "differ") != NULL, "the failed check's message: %s", err.msg);
    CHECK_MSG(di_exec_sync(&x, NULL) == DEEPINFER_OK, "the failed check left the exec failed");
    CHECK_MSG(read0(&x, d, 0) == 22 && read0(&x, d, 1) != 55, "the failed step was issued");

    di_copy_h2d(&x, d, &e, sizeof e); /* eager work after the failed check */
    CHECK_MSG(read0(&x, d, 0) == 44, "eager work after a failed shape check did not run");

    CHECK(step(&x, d, &f, NULL, &err) == DEEPINFER_OK); /* the shape's graph still replays */
    CHECK(read0(&x, d, 0) == 55);
    CHECK(di_backend_plan_stats_get(&x, &s1) == 0 && s1.graphs == 1 && s1.replayed == 2);

    di_dev_free(d);
    di_backend_plan_disable(&x);
    di_exec_free(&x);
    di_backend_use(DI_BACKEND_CPU, NULL);
}
