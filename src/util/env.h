/*
 * env.h — every environment variable deepinfer reads, in one place.
 *
 * The library reads the process environment only through di_env(); the table in
 * env.c is the complete list, and README.md "Environment" documents each entry.
 * A user-facing variable is added there only with a reason in the README;
 * kernel A/B switches never are: they exist in lab builds alone (lab/README.md,
 * read through DI_ENV_LAB).
 */
#ifndef DI_UTIL_ENV_H
#define DI_UTIL_ENV_H

#include "util/error.h"

typedef enum di_env_id {
    DI_ENV_ACCELERATOR,      /* DEEPINFER_ACCELERATOR: auto | cpu | cuda */
    DI_ENV_HF_MODEL_DIR,     /* DEEPINFER_HF_MODEL_DIR: the model when none is named */
    DI_ENV_BATCH_INVARIANT,  /* DEEPINFER_BATCH_INVARIANT: 1 (default) | 0 */
    DI_ENV_THREADS,          /* DEEPINFER_THREADS: CPU worker threads */
    DI_ENV_CPU_ISA,          /* DEEPINFER_CPU_ISA: scalar | avx2 | avx512 (lowers the choice) */
    DI_ENV_ICU_LIB,          /* DEEPINFER_ICU_LIB: path of libicuuc.so.N */
    DI_ENV_CUDA_GRAPHS,      /* DEEPINFER_CUDA_GRAPHS: 1 (default) | 0 */
    DI_ENV_YOCO_MODE,        /* DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE: exact (default) | compact */
    DI_ENV_YOCO_KEEP,        /* DEEPINFER_YOCO_PREFILL_KEEP_TOKENS: compact prefill's tail length */
    DI_ENV_MTP_VARLEN,       /* DEEPINFER_ENABLE_MTP_VARLEN: 1 = speculative decoding, confidence-scheduled */
    DI_ENV_NEXTN_DECODE,     /* DEEPINFER_USE_NEXTN_DECODE: the longest draft (0 = no speculation) */
    DI_ENV_HF_HUB_CACHE,     /* HF_HUB_CACHE: Hugging Face's cache folder */
    DI_ENV_HF_HOME,          /* HF_HOME: Hugging Face's home (cache under hub/) */
    DI_ENV_HOME,             /* HOME: ~/.cache/huggingface/hub otherwise */
    DI_ENV_LAB,              /* DEEPINFER_LAB: lab builds only (lab/README.md) */
    DI_ENV_NCCL_LIB,         /* DEEPINFER_NCCL_LIB: path of libnccl.so.2 (src/parallel/nccl.c) */
    DI_ENV_NCCL_NVLS,        /* NCCL_NVLS_ENABLE: NCCL's own switch, set to 0 unless the user set it */
    DI_ENV_COUNT
} di_env_id;

/* The variable's value, or NULL when it is unset or empty. */
const char *di_env(di_env_id id);

/* The variable's name ("DEEPINFER_THREADS"), for messages. */
const char *di_env_name(di_env_id id);

/* A 0/1 switch: leaves *out alone when unset; "1"/"true" -> 1, "0"/"false" -> 0;
 * anything else is an error that names the variable and the value. */
deepinfer_status di_env_flag(di_env_id id, int *out, di_error *err);

#endif
