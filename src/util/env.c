/* env.c — the one reader of the process environment (env.h). */
#include "util/env.h"

#include <stdlib.h>
#include <string.h>

static const char *const k_names[DI_ENV_COUNT] = {
    [DI_ENV_ACCELERATOR] = "DEEPINFER_ACCELERATOR",
    [DI_ENV_HF_MODEL_DIR] = "DEEPINFER_HF_MODEL_DIR",
    [DI_ENV_BATCH_INVARIANT] = "DEEPINFER_BATCH_INVARIANT",
    [DI_ENV_THREADS] = "DEEPINFER_THREADS",
    [DI_ENV_CPU_ISA] = "DEEPINFER_CPU_ISA",
    [DI_ENV_ICU_LIB] = "DEEPINFER_ICU_LIB",
    [DI_ENV_CUDA_GRAPHS] = "DEEPINFER_CUDA_GRAPHS",
    [DI_ENV_YOCO_MODE] = "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE",
    [DI_ENV_YOCO_KEEP] = "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS",
    [DI_ENV_MTP_VARLEN] = "DEEPINFER_ENABLE_MTP_VARLEN",
    [DI_ENV_NEXTN_DECODE] = "DEEPINFER_USE_NEXTN_DECODE",
    [DI_ENV_HF_HUB_CACHE] = "HF_HUB_CACHE",
    [DI_ENV_HF_HOME] = "HF_HOME",
    [DI_ENV_HOME] = "HOME",
    [DI_ENV_LAB] = "DEEPINFER_LAB",
    [DI_ENV_NCCL_LIB] = "DEEPINFER_NCCL_LIB",
    [DI_ENV_NCCL_NVLS] = "NCCL_NVLS_ENABLE",
};

const char *di_env_name(di_env_id id) { return id >= 0 && id < DI_ENV_COUNT ? k_names[id] : "?"; }

const char *di_env(di_env_id id) {
    if (id < 0 || id >= DI_ENV_COUNT) return NULL;
    const char *v = getenv(k_names[id]);
    return v && *v ? v : NULL;
}

deepinfer_status di_env_flag(di_env_id id, int *out, di_error *err) {
    const char *v = di_env(id);
    if (!v) return DEEPINFER_OK;
    if (!strcmp(v, "1") || !strcmp(v, "true")) *out = 1;
    else if (!strcmp(v, "0") || !strcmp(v, "false")) *out = 0;
    else
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "$%s must be 0 or 1, got \"%s\"", di_env_name(id), v);
    return DEEPINFER_OK;
}
