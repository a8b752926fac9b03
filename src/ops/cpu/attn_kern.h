/*
 * attn_kern.h — the AVX-512 BF16 row kernel of di_sparse_attn (internal to
 * src/ops/cpu; attention_avx512.c), bit-identical to attention.c's scalar
 * path. hd % 16 == 0 (the model guarantees % 32).
 */
#ifndef DI_OPS_CPU_ATTN_KERN_H
#define DI_OPS_CPU_ATTN_KERN_H

#include <stdint.h>

#define DI_ATTN_HGROUP 8 /* heads per work item */

/* One query row, heads [0, nh) (nh <= DI_ATTN_HGROUP) of q/out (hd values
 * each, contiguous), over its n entries kv[0..n) (NULL = absent). o is
 * scratch for nh * hd floats. */
void di_attend_avx512(const uint16_t *q, int nh, int hd, const uint16_t *const *kv, int n, const float *sink,
                      float scale, uint16_t *out, float *o);

#endif
