/*
 * cli_bench_load.h — `deepinfer bench --load DIR`: how fast a model
 * directory's checkpoint loads through the normal product path, against
 * the storage read rate of the same files measured in the same run, with
 * the peak host RSS, the device memory the load took and the time to the
 * first token after the process started.
 */
#ifndef DI_TOOLS_CLI_BENCH_LOAD_H
#define DI_TOOLS_CLI_BENCH_LOAD_H

typedef struct bench_load_args {
    const char *dir;     /* the model directory (config.json + safetensors) */
    const char *backend; /* "cpu" / "cuda" */
    int prompt;          /* first-token prompt length (1..64, default 8) */
} bench_load_args;

int bench_load_run(const bench_load_args *a);

#endif
