/*
 * bench_table.h — the tables of `deepinfer bench --dummy` (bench_dummy.c): the figures of one
 * measurement pass, printed per pass, and with --modes the invariant / fast ratio of every figure.
 */
#ifndef DI_TOOLS_BENCH_TABLE_H
#define DI_TOOLS_BENCH_TABLE_H

#include "bench_dummy.h"
#include "bench_floor.h"
#include "model/config.h"
#include "util/error.h"

/* The figures of one measurement pass (one mode with --modes), seconds per prefill / per step. */
typedef struct bench_figs {
    double pf_s[BENCH_MAX_SWEEP], pfc_s[BENCH_MAX_SWEEP], dec_s[BENCH_MAX_SWEEP][BENCH_MAX_SWEEP];
    /* recorded steps (CUDA), per context and batch; gr_why: why a case was not measured ("" = it was) */
    double gr_s[BENCH_MAX_SWEEP][BENCH_MAX_SWEEP], gr_busy[BENCH_MAX_SWEEP][BENCH_MAX_SWEEP],
        gr_idle[BENCH_MAX_SWEEP][BENCH_MAX_SWEEP];
    char gr_why[BENCH_MAX_SWEEP][BENCH_MAX_SWEEP][DI_ERROR_MSG_MAX];
} bench_figs;

/* The table of one pass: figures against their floors (copy bandwidth bw GB/s, FP8 rate TFLOP/s);
 * mode: NULL, or the pass's mode named in a header line (--modes). */
void bench_print_table(const bench_dummy_args *a, const di_model_config *c, const bench_costs *k, double bw,
                       double rate, double rate_fast, int64_t keep, int cuda, int gr_host_ids, const bench_figs *f,
                       const char *mode);

/* --modes: every figure of pass 0 (batch-invariant) and pass 1 (fast), and invariant / fast as a time
 * ratio (> 1: the invariant mode is slower). */
void bench_print_modes(const bench_dummy_args *a, int64_t keep, int cuda, const bench_figs f[2]);

#endif
