#include "ops/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/env.h"

/* Defined in src/ops/cuda/cuda_probe.cu when CUDA is linked in. */
extern int di_cuda_probe(int *count, char *name, size_t name_len, int *cc_major, int *cc_minor,
                         size_t *total_mem, char *why, size_t why_len) __attribute__((weak));

/* Defined in src/ops/cuda/cu_exec.c when CUDA is linked in. */
extern int di_cuda_backend_install(char *why, size_t why_len) __attribute__((weak));
extern void di_cuda_backend_uninstall(void) __attribute__((weak));
extern void di_cuda_set_batch_invariant(int on) __attribute__((weak));

/* Defined in src/ops/cuda/cu_plan.c when CUDA is linked in (cu_step.h). */
extern deepinfer_status di_cuda_plan_enable(struct di_exec *x, int64_t pos_bound, int max_steps, di_error *err)
    __attribute__((weak));
extern void di_cuda_plan_disable(struct di_exec *x) __attribute__((weak));
extern deepinfer_status di_cuda_step_begin(struct di_exec *x, uint64_t key, di_error *err) __attribute__((weak));
extern deepinfer_status di_cuda_step_end(struct di_exec *x, di_error *err) __attribute__((weak));
extern void di_cuda_step_abort(struct di_exec *x) __attribute__((weak));
extern int di_cuda_plan_stats(const struct di_exec *x, int *graphs, int64_t *recorded, int64_t *replayed,
                              size_t *last_bytes, size_t *cap_bytes) __attribute__((weak));

static di_backend_kind g_active = DI_BACKEND_CPU;

di_backend_kind di_backend_active(void) { return g_active; }

void di_backend_set_batch_invariant(int on) {
    if (di_cuda_set_batch_invariant) di_cuda_set_batch_invariant(on);
}

/* ---- recorded steps (backend.h): the CUDA plan, or "not supported" ---- */

static deepinfer_status no_plan(di_error *err) {
    return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "recorded steps need the CUDA backend");
}

deepinfer_status di_backend_plan_enable(struct di_exec *x, int64_t pos_bound, di_error *err) {
    if (g_active != DI_BACKEND_CUDA || !di_cuda_plan_enable) return no_plan(err);
    return di_cuda_plan_enable(x, pos_bound, 0, err); /* refuses an exec that is not on the device */
}

void di_backend_plan_disable(struct di_exec *x) {
    if (di_cuda_plan_disable) di_cuda_plan_disable(x);
}

deepinfer_status di_backend_step_begin(struct di_exec *x, uint64_t key, di_error *err) {
    return di_cuda_step_begin ? di_cuda_step_begin(x, key, err) : no_plan(err);
}

deepinfer_status di_backend_step_end(struct di_exec *x, di_error *err) {
    return di_cuda_step_end ? di_cuda_step_end(x, err) : no_plan(err);
}

void di_backend_step_abort(struct di_exec *x) {
    if (di_cuda_step_abort) di_cuda_step_abort(x);
}

int di_backend_plan_stats_get(const struct di_exec *x, di_backend_plan_stats *out) {
    *out = (di_backend_plan_stats){0};
    if (!di_cuda_plan_stats) return -1;
    return di_cuda_plan_stats(x, &out->graphs, &out->recorded, &out->replayed, &out->last_bytes, &out->cap_bytes);
}

deepinfer_status di_backend_use(di_backend_kind k, di_error *err) {
    if (k == DI_BACKEND_CPU) {
        if (di_cuda_backend_uninstall) di_cuda_backend_uninstall();
        g_active = DI_BACKEND_CPU;
        return DEEPINFER_OK;
    }
    if (!di_cuda_backend_install)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "this binary was built without CUDA (build with `make cuda`)");
    char why[256] = "";
    if (di_cuda_backend_install(why, sizeof why))
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "cannot start the CUDA backend: %s", why);
    g_active = DI_BACKEND_CUDA;
    return DEEPINFER_OK;
}

void di_backend_cuda_info(di_cuda_info *info) {
    memset(info, 0, sizeof *info);
    if (!di_cuda_probe) {
        info->compiled = 0;
        snprintf(info->why, sizeof info->why, "this binary was built without CUDA (build with `make cuda`)");
        return;
    }
    info->compiled = 1;
    int count = 0;
    di_cuda_probe(&count, info->name, sizeof info->name, &info->cc_major, &info->cc_minor, &info->total_mem,
                  info->why, sizeof info->why);
    info->device_count = count;
}

deepinfer_status di_backend_select(const char *want, di_backend_kind *out, di_error *err) {
    if (!want) want = di_env(DI_ENV_ACCELERATOR);
    if (!want || !*want) want = "auto";
    if (!strcmp(want, "cpu")) {
        *out = DI_BACKEND_CPU;
        return DEEPINFER_OK;
    }
    if (strcmp(want, "auto") != 0 && strcmp(want, "cuda") != 0 && strcmp(want, "gpu") != 0)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "unknown accelerator '%s' (use auto, cpu or cuda)", want);
    di_cuda_info info;
    di_backend_cuda_info(&info);
    if (info.device_count > 0) {
        *out = DI_BACKEND_CUDA;
        return DEEPINFER_OK;
    }
    if (!strcmp(want, "auto")) {
        *out = DI_BACKEND_CPU;
        return DEEPINFER_OK;
    }
    return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "CUDA was requested but is not usable: %s", info.why);
}

const char *di_backend_name(di_backend_kind k) { return k == DI_BACKEND_CUDA ? "cuda" : "cpu"; }

/* Defined in src/ops/cuda/cu_probe.c when CUDA is linked in. */
extern double di_cuda_copy_gbs(size_t bytes) __attribute__((weak));
extern double di_cuda_fp8_tflops(int n, int batch_invariant) __attribute__((weak));
extern int di_cuda_mem_info(size_t *free_b, size_t *total_b) __attribute__((weak));

double di_backend_copy_gbs(size_t bytes) { return di_cuda_copy_gbs ? di_cuda_copy_gbs(bytes) : -1; }
double di_backend_fp8_tflops(int n, int batch_invariant) {
    return di_cuda_fp8_tflops ? di_cuda_fp8_tflops(n, batch_invariant) : -1;
}
int di_backend_mem_info(size_t *free_b, size_t *total_b) {
    return di_cuda_mem_info ? di_cuda_mem_info(free_b, total_b) : -1;
}

/* ---- the device side of the engine's queue (backend.h): src/ops/cuda/cu_queue.c, or none ---- */

extern deepinfer_status di_cuda_dq_new(struct di_exec *x, int max_rows, int vocab, di_backend_dq **out, di_error *err)
    __attribute__((weak));
extern void di_cuda_dq_free(di_backend_dq *q) __attribute__((weak));
extern void di_cuda_dq_begin(di_backend_dq *q, uint64_t seq) __attribute__((weak));
extern deepinfer_status di_cuda_dq_feed(di_backend_dq *q, uint64_t seq, int n, const int32_t *tokens,
                                        const int32_t *src, int32_t *dtok, di_error *err) __attribute__((weak));
extern deepinfer_status di_cuda_dq_sample(di_backend_dq *q, uint64_t seq, const float *dlogits, int M,
                                          const di_backend_sample_row *rows, di_error *err) __attribute__((weak));
extern void di_cuda_dq_end(di_backend_dq *q, uint64_t seq) __attribute__((weak));
extern deepinfer_status di_cuda_dq_finish(di_backend_dq *q, uint64_t seq, int M, int32_t *ids, double *busy_s,
                                          double *idle_s, di_error *err) __attribute__((weak));

deepinfer_status di_backend_dq_new(struct di_exec *x, int max_rows, int vocab, di_backend_dq **out, di_error *err) {
    *out = NULL;
    if (g_active != DI_BACKEND_CUDA || !di_cuda_dq_new)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "device sampling needs the CUDA backend");
    return di_cuda_dq_new(x, max_rows, vocab, out, err); /* refuses an exec that is not on the device */
}
void di_backend_dq_free(di_backend_dq *q) {
    if (q && di_cuda_dq_free) di_cuda_dq_free(q);
}
/* The rest is only reached with a queue di_backend_dq_new made, so CUDA is linked in. */
void di_backend_dq_begin(di_backend_dq *q, uint64_t seq) { di_cuda_dq_begin(q, seq); }
deepinfer_status di_backend_dq_feed(di_backend_dq *q, uint64_t seq, int n, const int32_t *tokens, const int32_t *src,
                                    int32_t *dtok, di_error *err) {
    return di_cuda_dq_feed(q, seq, n, tokens, src, dtok, err);
}
deepinfer_status di_backend_dq_sample(di_backend_dq *q, uint64_t seq, const float *dlogits, int M,
                                      const di_backend_sample_row *rows, di_error *err) {
    return di_cuda_dq_sample(q, seq, dlogits, M, rows, err);
}
void di_backend_dq_end(di_backend_dq *q, uint64_t seq) { di_cuda_dq_end(q, seq); }
deepinfer_status di_backend_dq_finish(di_backend_dq *q, uint64_t seq, int M, int32_t *ids, double *busy_s,
                                      double *idle_s, di_error *err) {
    return di_cuda_dq_finish(q, seq, M, ids, busy_s, idle_s, err);
}
