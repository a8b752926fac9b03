/*
 * norm_kern.h — AVX-512 kernels of the row normalisations (norm_avx512.c),
 * bit-identical to the scalar loops of norm.c and mhc.c. Internal to
 * src/ops/cpu; callers check di_cpu_isa() == DI_ISA_AVX512 and that the
 * sizes are multiples of 16. Row lists of 16 may repeat a row (padding).
 */
#ifndef DI_OPS_CPU_NORM_KERN_H
#define DI_OPS_CPU_NORM_KERN_H

#include <stdint.h>

/* ss[l] = sum_i (double)x_l[i]^2 in index order (x_l = rows[l], D values). */
void di_sumsq16_avx512(const uint16_t *const rows[16], int D, double ss[16]);

/* y[i] = bf16(w[i] * (x[i] * r)), or bf16(x[i] * r) without w. In place allowed. */
void di_rmsnorm_out_avx512(const uint16_t *x, const float *w, int D, float r, uint16_t *y);

/* di_head_rmsnorm_bf16 of the first n (<= 16) of 16 head vectors of hd values,
 * in place; entries n..15 are padding (read, never written). */
void di_head_rmsnorm16_avx512(uint16_t *const seqs[16], int n, int hd, float eps);

#endif
