/*
 * gemm_kern.h — the job description shared by the GEMM driver (gemm.c) and
 * its per-ISA panel kernels (gemm_avx512.c, gemm_avx2.c). Internal.
 */
#ifndef DI_OPS_CPU_GEMM_KERN_H
#define DI_OPS_CPU_GEMM_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

typedef struct di_gemm_job {
    int M;
    const uint16_t *A;   /* bf16 rows: quantised e4m3 values for FP8/FP4, raw otherwise */
    size_t lda;
    const float *sA;     /* FP8/FP4: per-row activation scales [M][K/act_block] */
    int nsa;             /* scales per row */
    int act_block;
    int kb;              /* K-block of the partial sums (FP8: min(act_block, B); FP4: 32) */
    const di_wmat *W;
    float *C32;
    uint16_t *C16;
    size_t ldc;
} di_gemm_job;

/* Compute output panels [p0, p1) for every row. Each kernel follows the
 * summation order documented in ops.h, so all three agree bit for bit. */
void di_gemm_panels_scalar(const di_gemm_job *j, int p0, int p1);
void di_gemm_panels_avx2(const di_gemm_job *j, int p0, int p1);
void di_gemm_panels_avx512(const di_gemm_job *j, int p0, int p1);

/* Activation quantisation (gemm.c act_quant_row) of M rows, AVX-512 (quant_avx512.c);
 * blk % 16 == 0. Row m: x = A + m lda -> q + m qstride, scales s + m sstride. */
void di_act_quant_rows_avx512(const uint16_t *A, size_t lda, int M, int K, int blk, uint16_t *q, size_t qstride,
                              float *s, size_t sstride);

/* Write one 16-lane result for row m, panel P (only n < N). */
void di_gemm_store(const di_gemm_job *j, int m, int P, const float *v16);

#endif
