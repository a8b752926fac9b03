/* exec.c — execution contexts (ops.h di_exec): the scratch arena, the
 * thread pool, and the device backend's table and per-exec context that
 * every exec created while a backend is installed carries (dev_ops.h;
 * installed by backend.h di_backend_use). */
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/threadpool.h"
#include "ops/dev_ops.h"
#include "ops/ops.h"

#define DEFAULT_SCRATCH ((size_t)16 << 20)

/* The device backend's op table and state exec (dev_ops.h). */
static const di_dev_ops *g_dev_ops;
static di_exec *g_state_exec;
static _Thread_local di_exec *t_state_exec; /* a rank thread's (di_set_thread_dev_exec) */

deepinfer_status di_exec_init(di_exec *x, size_t scratch_bytes, di_error *err) {
    memset(x, 0, sizeof *x);
    if (!scratch_bytes) scratch_bytes = DEFAULT_SCRATCH;
    scratch_bytes = (scratch_bytes + 63) & ~(size_t)63;
    x->scratch = aligned_alloc(64, scratch_bytes);
    if (!x->scratch) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for %zu bytes of scratch", scratch_bytes);
    x->scratch_cap = scratch_bytes;
    x->tp = di_threadpool_global();
    const di_dev_ops *dev = di_get_dev_ops();
    if (dev) {
        x->dev_ctx = dev->ctx_new(scratch_bytes);
        if (!x->dev_ctx) {
            di_exec_free(x);
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "%s: cannot create an execution context", dev->name);
        }
        x->dev = dev;
    }
    return DEEPINFER_OK;
}

void di_exec_free(di_exec *x) {
    if (!x) return;
    if (x->dev && x->dev_ctx) x->dev->ctx_free(x->dev_ctx);
    free(x->scratch);
    memset(x, 0, sizeof *x);
}

int di_exec_fixed_shapes(const di_exec *x) {
    return x && x->dev && x->dev->fixed_shapes && x->dev->fixed_shapes(x);
}

void di_exec_branch(di_exec *x, int b) {
    if (x && x->dev && x->dev->branch && b >= 0 && b <= DI_EXEC_BRANCHES) x->dev->branch(x, b);
}

void di_exec_join(di_exec *x) {
    if (x && x->dev && x->dev->join) x->dev->join(x);
}

void di_set_dev_ops(const di_dev_ops *ops, di_exec *state_exec) {
    g_dev_ops = ops;
    g_state_exec = state_exec;
}

const di_dev_ops *di_get_dev_ops(void) { return g_dev_ops; }

void di_set_thread_dev_exec(di_exec *state_exec) { t_state_exec = state_exec; }

di_exec *di_dev_exec(void) { return t_state_exec ? t_state_exec : g_state_exec; }

deepinfer_status di_exec_sync(di_exec *x, di_error *err) {
    if (!x || !x->dev) return DEEPINFER_OK;
    return x->dev->sync(x, err);
}
