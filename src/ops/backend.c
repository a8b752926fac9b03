/* backend.c — backend choice and the device backend's table (backend.h):
 * every device function goes through the table a device backend
 * registered (src/ops/cuda/cu_backend.c), or answers as a CPU-only binary
 * does when none did. */
#include "ops/backend.h"

#include <stdio.h>
#include <string.h>

#include "util/env.h"

static const di_device_backend *g_dev; /* the registered device backend, NULL: CPU only */
static di_backend_kind g_active = DI_BACKEND_CPU;

static const char NO_CUDA[] = "this binary was built without CUDA (build with `make cuda`)";

void di_backend_register(const di_device_backend *b) { g_dev = b; }

di_backend_kind di_backend_active(void) { return g_active; }

void di_backend_set_batch_invariant(int on) {
    if (g_dev) g_dev->set_batch_invariant(on);
}

int di_backend_set_batch_invariant_live(int on) { return g_dev ? g_dev->set_batch_invariant_live(on) : -1; }

/* ---- recorded steps (backend.h): the device plan, or "not supported" ---- */

static deepinfer_status no_plan(di_error *err) {
    return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "recorded steps need the CUDA backend");
}

deepinfer_status di_backend_plan_enable(struct di_exec *x, int64_t pos_bound, int timed_steps, di_error *err) {
    if (g_active != DI_BACKEND_CUDA || !g_dev) return no_plan(err);
    return g_dev->plan_enable(x, pos_bound, timed_steps, err); /* refuses an exec that is not on the device */
}

void di_backend_plan_disable(struct di_exec *x) {
    if (g_dev) g_dev->plan_disable(x);
}

deepinfer_status di_backend_step_begin(struct di_exec *x, uint64_t key, di_error *err) {
    return g_dev ? g_dev->step_begin(x, key, err) : no_plan(err);
}

deepinfer_status di_backend_step_end(struct di_exec *x, di_error *err) {
    return g_dev ? g_dev->step_end(x, err) : no_plan(err);
}

void di_backend_step_abort(struct di_exec *x) {
    if (g_dev) g_dev->step_abort(x);
}

int di_backend_plan_stats_get(const struct di_exec *x, di_backend_plan_stats *out) {
    *out = (di_backend_plan_stats){0};
    return g_dev ? g_dev->plan_stats(x, out) : -1;
}

void di_backend_step_mark(struct di_exec *x, int end) {
    if (g_dev) g_dev->step_mark(x, end);
}

int di_backend_step_times(struct di_exec *x, float *busy_ms, float *start_ms, int n) {
    return g_dev ? g_dev->step_times(x, busy_ms, start_ms, n) : 0;
}

void di_backend_argmax_fuse(struct di_exec *x, int M, const float *logits, int V, int32_t *ids) {
    if (g_dev) g_dev->argmax_fuse(x, M, logits, V, ids);
}

void di_backend_argmax_rest(struct di_exec *x, int M, const float *logits, int V, int32_t *ids) {
    if (g_dev) g_dev->argmax_rest(x, M, logits, V, ids);
}

/* ---- backend choice ---- */

deepinfer_status di_backend_use(di_backend_kind k, di_error *err) {
    if (k == DI_BACKEND_CPU) {
        if (g_dev) g_dev->uninstall();
        g_active = DI_BACKEND_CPU;
        return DEEPINFER_OK;
    }
    if (!g_dev) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "%s", NO_CUDA);
    char why[256] = "";
    if (g_dev->install(why, sizeof why))
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "cannot start the CUDA backend: %s", why);
    g_active = DI_BACKEND_CUDA;
    return DEEPINFER_OK;
}

void di_backend_cuda_info(di_cuda_info *info) {
    memset(info, 0, sizeof *info);
    if (!g_dev) {
        info->compiled = 0;
        snprintf(info->why, sizeof info->why, "%s", NO_CUDA);
        return;
    }
    info->compiled = 1;
    int count = 0;
    g_dev->probe(&count, info->name, sizeof info->name, &info->cc_major, &info->cc_minor, &info->total_mem, info->why,
                 sizeof info->why);
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

/* ---- device measurements (backend.h) ---- */

double di_backend_copy_gbs(size_t bytes) { return g_dev ? g_dev->copy_gbs(bytes) : -1; }
double di_backend_fp8_tflops(int n, int batch_invariant) { return g_dev ? g_dev->fp8_tflops(n, batch_invariant) : -1; }
int di_backend_mem_info(size_t *free_b, size_t *total_b) { return g_dev ? g_dev->mem_info(free_b, total_b) : -1; }

deepinfer_status di_backend_comm_one(struct di_comm **out, di_error *err) {
    *out = NULL;
    if (g_active != DI_BACKEND_CUDA || !g_dev)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "an NCCL communicator needs the CUDA backend");
    return g_dev->comm_one(out, err);
}

deepinfer_status di_backend_rank_bind(int device, di_error *err) {
    if (g_active != DI_BACKEND_CUDA || !g_dev)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "a rank's device needs the CUDA backend");
    char why[256] = "";
    if (g_dev->rank_bind(device, why, sizeof why))
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "cannot drive CUDA device %d: %s", device, why);
    return DEEPINFER_OK;
}

void di_backend_rank_unbind(void) {
    if (g_dev) g_dev->rank_unbind();
}

deepinfer_status di_backend_comm_rank(const struct di_nccl_id *id, int rank, int size, struct di_comm **out,
                                      di_error *err) {
    *out = NULL;
    if (g_active != DI_BACKEND_CUDA || !g_dev)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "an NCCL communicator needs the CUDA backend");
    return g_dev->comm_rank(id, rank, size, out, err);
}

deepinfer_status di_backend_comm_loopback_dev(int size, struct di_comm **out, di_error *err) {
    if (g_active != DI_BACKEND_CUDA || !g_dev)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "a device loopback communicator needs the CUDA backend");
    return g_dev->comm_loopback_dev(size, out, err);
}

/* ---- the device side of the engine's queue (backend.h) ---- */

deepinfer_status di_backend_dq_new(struct di_exec *x, int max_rows, int vocab, di_backend_dq **out, di_error *err) {
    *out = NULL;
    if (g_active != DI_BACKEND_CUDA || !g_dev)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "device sampling needs the CUDA backend");
    return g_dev->dq_new(x, max_rows, vocab, out, err); /* refuses an exec that is not on the device */
}
void di_backend_dq_free(di_backend_dq *q) {
    if (q && g_dev) g_dev->dq_free(q);
}
/* The rest is only reached with a queue di_backend_dq_new made, so a backend is registered. */
void di_backend_dq_begin(di_backend_dq *q, uint64_t seq) { g_dev->dq_begin(q, seq); }
deepinfer_status di_backend_dq_feed(di_backend_dq *q, uint64_t seq, int n, const int32_t *tokens, const int32_t *src,
                                    const int32_t *from, int32_t *dtok, di_error *err) {
    return g_dev->dq_feed(q, seq, n, tokens, src, from, dtok, err);
}
deepinfer_status di_backend_dq_sample(di_backend_dq *q, uint64_t seq, const float *dlogits, int M,
                                      const di_backend_sample_row *rows, di_error *err) {
    return g_dev->dq_sample(q, seq, dlogits, M, rows, err);
}
void di_backend_dq_end(di_backend_dq *q, uint64_t seq) { g_dev->dq_end(q, seq); }
deepinfer_status di_backend_dq_finish(di_backend_dq *q, uint64_t seq, int M, int32_t *ids, double *busy_s,
                                      double *idle_s, di_error *err) {
    return g_dev->dq_finish(q, seq, M, ids, busy_s, idle_s, err);
}
