/*
 * lab/router/router_lab.h — the lab's router variants (router_variants.cu): the product's
 * dic_route_gate (src/ops/cuda/dic_model.h) under lab_ names, with the variant switch the product no
 * longer has (docs/kernels/router.md).
 */
#ifndef LAB_ROUTER_LAB_H
#define LAB_ROUTER_LAB_H

#include "ops/cuda/dic_model.h"

#ifdef __cplusplus
extern "C" {
#endif

int lab_route_gate_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int E, int k,
                      const int32_t *tid2eid, const int32_t *tokens);
cudaError_t lab_route_gate(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, float *logits,
                           int E, float temp, const float *bias, const int32_t *tid2eid, const int32_t *tokens, int k,
                           float route_scale, float norm_eps, int normalize, int *sel, float *w);
/* 0 = k_route_gate, 1 = k_route_gate2 (last-arriver handoff; the product's), 2 = k_route_gate2 with
 * tagged slots polled by CTA 0; -1: back to 1. */
void lab_route_gate_tune(int variant);
/* on (default): k_route_gate2l where it applies; off: k_route_gate2 there (the same bits) */
void lab_route_gate_lean(int on);

#ifdef __cplusplus
}
#endif
#endif
