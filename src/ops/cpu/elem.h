/*
 * elem.h — AVX-512 row kernels for hot element-wise ops (elem_avx512.c),
 * bit-identical to the scalar code they replace. Internal to src/ops/cpu.
 * Sizes: d and blk multiples of 16.
 */
#ifndef DI_OPS_CPU_ELEM_H
#define DI_OPS_CPU_ELEM_H

#include <stddef.h>
#include <stdint.h>

void di_hc_collapse_row_avx512(const float *pre, const uint16_t *r, int d, uint16_t *y);
void di_hc_expand_row_avx512(const float *post, const float *comb, const uint16_t *f, const uint16_t *r, uint16_t *o,
                             int d);
void di_f32_to_bf16_row_avx512(const float *in, uint16_t *out, int n);
void di_qat_fp4_row_avx512(uint16_t *v, int n, int blk);
void di_qat_fp8_row_avx512(uint16_t *v, int n, int blk);
/* di_qat_fp4_e4m3 of one row, blocks of 16 (n % 16 == 0). */
void di_qat_fp4_e4m3_row_avx512(uint16_t *v, int n);
/* In-place 128-point Walsh-Hadamard of one vector, then * scale (qsim.c had_rows). */
void di_hadamard128_avx512(uint16_t *row, float scale);
/* rope.c's rotation of `half` pairs (half % 16 == 0) with cos/sin tables. */
void di_rope_row_avx512(uint16_t *x, int half, const float *cs, const float *sn, int inverse);

/* select.c: one SwiGLU row (rw: the row's weight or NULL) and the softmax
 * pooling of 16 channels per vector (any sizes). */
void di_swiglu_row_avx512(const uint16_t *g, const uint16_t *u, int I, float limit, const float *rw, uint16_t *o);
/* select.c di_topk_desc's scan for the next index that ranks before a score y. */
int di_next_better_avx512(const float *score, int j, int n, float y);
void di_softmax_pool_avx512(const float *kv, const float *score, size_t ld, int S, int D, float *out);
/* di_hc_sinkhorn of the first n (1..16) tokens of mixes [n][24] (one per
 * lane); pre/post [n][4], comb [n][16]. */
void di_hc_sinkhorn16_avx512(const float *mixes, int n, const float *scale3, const float *base, int iters, float eps,
                             float *pre, float *post, float *comb);
/* vecops.c helpers (any n). */
void di_add_bf16_f32_avx512(float *y, const uint16_t *v, size_t n);
void di_add_f32_avx512(float *out, const float *a, const float *b, size_t n);

#endif
