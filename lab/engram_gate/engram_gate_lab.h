/*
 * lab/engram_gate/engram_gate_lab.h — the lab's Engram gate variants (engram_gate_variants.cu): the
 * product's dic_engram_gate_rows (src/ops/cuda/dic_model.h) under a lab_ name, with the variant switch
 * (docs/kernels/engram-gate.md).
 */
#ifndef LAB_ENGRAM_GATE_LAB_H
#define LAB_ENGRAM_GATE_LAB_H

#include "ops/cuda/dic_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 = one CTA per (token, copy) (the product's), 0 = one warp per (token, copy); v < 0: back to 1.
 * Returns the variant in force. */
int lab_engram_gate_variant(int v);
cudaError_t lab_engram_gate_rows(const dic_ctx *c, int M, const int64_t *rmap, const uint16_t *kv, size_t ldkv,
                                 uint16_t *R, const float *qk, int dim, int hc, float eps, float *gates);

#ifdef __cplusplus
}
#endif
#endif
