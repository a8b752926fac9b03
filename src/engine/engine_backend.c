/* engine_backend.c — which compute backend an engine's model runs on
 * (engine_internal.h di_engine_backend_acquire / _release).
 *
 * The backend is process-wide (ops/backend.h: one allocator, one ops table
 * that every exec created afterwards carries), so the engines of a process
 * share it: the first engine on CUDA installs it, the last one to close
 * puts the CPU back, and only if an engine installed it (a caller that
 * called di_backend_use itself keeps its backend). While CUDA is active a
 * CPU engine cannot be opened: its model would load into device memory. */
#include <pthread.h>
#include <string.h>

#include "engine/engine_internal.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_cuda_engines; /* open engines on CUDA */
static int g_installed;    /* 1 if an engine installed the CUDA backend */

deepinfer_status di_engine_backend_acquire(const char *want, int batch_invariant, di_backend_kind *out,
                                           di_error *err) {
    deepinfer_status st = DEEPINFER_OK;
    pthread_mutex_lock(&g_lock);
    di_backend_kind active = di_backend_active(), k = DI_BACKEND_CPU;
    if (!strcmp(want, "auto") && active == DI_BACKEND_CUDA) k = DI_BACKEND_CUDA; /* models here live on the device */
    else if ((st = di_backend_select(want, &k, err))) di_error_prefix(err, "accelerator \"%s\"", want);
    if (!st && k == DI_BACKEND_CPU && active == DI_BACKEND_CUDA)
        st = di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                          "accelerator \"cpu\": the CUDA backend is active in this process (an engine on \"cuda\" is "
                          "open, or di_backend_use was called), so a model would load into device memory; close the "
                          "CUDA engines first, or open this one with \"cuda\" or \"auto\"");
    if (!st && k == DI_BACKEND_CUDA) {
        /* the mode of the execs the model creates at load (cu_exec.c reads it in ctx_new);
         * di_engine_backend_loaded puts the default back */
        di_backend_set_batch_invariant(batch_invariant);
        if (active != DI_BACKEND_CUDA) {
            if ((st = di_backend_use(DI_BACKEND_CUDA, err))) di_error_prefix(err, "accelerator \"%s\"", want);
            else g_installed = 1;
        }
        if (!st) g_cuda_engines++;
    }
    pthread_mutex_unlock(&g_lock);
    if (!st) *out = k;
    return st;
}

void di_engine_backend_loaded(di_backend_kind k) {
    if (k == DI_BACKEND_CUDA) di_backend_set_batch_invariant(-1);
}

void di_engine_backend_release(di_backend_kind k) {
    if (k != DI_BACKEND_CUDA) return;
    pthread_mutex_lock(&g_lock);
    if (--g_cuda_engines == 0 && g_installed) {
        di_backend_use(DI_BACKEND_CPU, NULL); /* the device memory of every engine's model is freed by now */
        g_installed = 0;
    }
    pthread_mutex_unlock(&g_lock);
}
