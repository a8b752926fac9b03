/*
 * bench_dummy.h — `deepinfer bench --dummy CONFIG.json`: a random-weight model
 * at the config's real dimensions with --layers N layers (tools/dummy/dummy.h),
 * loaded through the normal chain on the chosen backend, then prefill and
 * decode figures with their floors measured in the same run; with
 * yoco_compact, each prefill length also in compact prefill (the layers after
 * the last KV source on the prompt's last yoco_keep tokens only).
 */
#ifndef DI_TOOLS_BENCH_DUMMY_H
#define DI_TOOLS_BENCH_DUMMY_H

#include <stdint.h>

#define BENCH_MAX_SWEEP 16

typedef struct bench_dummy_args {
    const char *config;  /* full HF config.json (bench/configs/) */
    const char *backend; /* "cpu" / "cuda" */
    int layers;          /* default 4 */
    int experts;         /* routed experts (--experts; 0: the config's count) */
    int prompts[BENCH_MAX_SWEEP], nprompt; /* decode contexts: each sequence holds this many tokens (default 4096) */
    int prompt;          /* the largest of prompts[] (sizes the states) */
    int decode;          /* timed decode steps per batch size (default 8) */
    int batches[BENCH_MAX_SWEEP], nb;
    int prefill[BENCH_MAX_SWEEP], np;
    int rows;            /* rows per forward sub-batch (max_rows; default 1024, at least the largest batch) */
    int plan_only;       /* print the memory plan and stop before building weights */
    int yoco_compact;    /* V4.1: each --prefill length also in compact prefill (architecture.md §6.5), same run */
    int modes;           /* CUDA: every figure in the batch-invariant and the fast mode, same model and process */
    int64_t yoco_keep;   /* compact's tail (--yoco-keep-tokens; 0 = 140) */
    uint64_t seed;
    /* --plan per rank (bench_plan.c): --ep N ranks (0: not asked), --engram-host, --device-gb G
     * (0: a visible GPU's memory, else 141 GB, an H200); layers_set: --layers was given (else the
     * config's full depth) */
    int ep, dp, engram_host, layers_set; /* dp: --dp (0: not asked; the plan per rank is the same) */
    double device_gb;
} bench_dummy_args;

int bench_dummy_run(const bench_dummy_args *a);

/* `--plan --ep N [--engram-host] [--device-gb G]`: the load plan of every rank of the layout on
 * devices of G GB (no GPU needed), whether it fits, and the smallest layout that does
 * (load_plan.h di_load_plan_layout_fit). 0 fits, 1 refused or failed. */
int bench_plan_run(const bench_dummy_args *a);

/* The CPU memory-bandwidth probe of cli_bench.c (GB/s). */
void bench_measure_bw(double *read_gbs, double *triad_gbs);

#endif
