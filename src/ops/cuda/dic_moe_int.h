/*
 * dic_moe_int.h — internal interface between dic_moe.cu and
 * dic_moe_route.cu: the router launch with the model's options.
 */
#ifndef DI_OPS_CUDA_DIC_MOE_INT_H
#define DI_OPS_CUDA_DIC_MOE_INT_H

#include "ops/cuda/dic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dic_route, plus: tokens != NULL: fixed ids of row m = fixed + tokens[m] * k
 * (hash layers' tid2eid); normalize == 0: w = sqrt(softplus(l)) * route_scale
 * (dic_route.cuh route_score, not normalised by the sum). */
cudaError_t dic_route_ex(const dic_ctx *c, int M, const float *logits, int E, const float *bias, const int *fixed,
                         const int32_t *tokens, int k, float route_scale, float norm_eps, int normalize, int *sel,
                         float *w);

#ifdef __cplusplus
}
#endif
#endif
