/*
 * vec.h — small vector kernels shared by the CPU ops (internal), with one
 * fixed operation order on every ISA path (scalar, AVX2, AVX-512), so their
 * results are bit-identical wherever they run.
 *
 * di_vdot_bf16: dot product of n bf16 values (n % 32 == 0) in fp32. Lane
 *   l (0..15) accumulates the pairs (32s + 2l, 32s + 2l + 1) for s = 0, 1, ...,
 *   odd element first (the VDPBF16PS order); the 16 lane sums are then
 *   combined as l += l+8, l += l+4, l += l+2, l += l+1.
 * di_vaxpy_bf16: o[i] += p * v[i] for n bf16 values v (fp32 o; p is a bf16
 *   value so each product is exact and the add rounds once).
 * di_vscale: o[i] *= a.
 */
#ifndef DI_OPS_CPU_VEC_H
#define DI_OPS_CPU_VEC_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cpu/threadpool.h"
#include "ops/ops.h"

float di_vdot_bf16(const uint16_t *a, const uint16_t *b, int n);
void di_vaxpy_bf16(float *o, float p, const uint16_t *v, int n);
void di_vscale(float *o, float a, int n);

float di_vdot_bf16_avx512(const uint16_t *a, const uint16_t *b, int n);
void di_vaxpy_bf16_avx512(float *o, float p, const uint16_t *v, int n);
float di_vdot_bf16_avx2(const uint16_t *a, const uint16_t *b, int n);
/* di_index_scores (ops.h) with the dot products of di_vdot_bf16, AVX-512. */
void di_index_scores_avx512(const uint16_t *q, int nh, const float *w, const uint16_t *k, size_t ldk, int n, float *score);
/* 1 if the AVX-512 BF16 kernels of this file may run now. */
int di_vec_use_avx512(void);
void di_vaxpy_bf16_avx2(float *o, float p, const uint16_t *v, int n);

/* Parallel loop over rows [0, M): fn(ctx, m0, m1) on contiguous ranges.
 * `row_cost` (multiply-adds per row) decides how many threads are worth it. */
typedef void (*di_rows_fn)(void *ctx, int m0, int m1);
void di_par_rows(di_exec *x, int M, double row_cost, di_rows_fn fn, void *ctx);

#endif
