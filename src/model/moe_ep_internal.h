/* moe_ep_internal.h — helpers shared by moe_ep.c (dp = 1) and moe_ep_dp.c (attention DP). */
#ifndef DI_MODEL_MOE_EP_INTERNAL_H
#define DI_MODEL_MOE_EP_INTERNAL_H

#include "model/moe_ep.h"

/* The step scratch for n entries of width d (1 when it is there). */
int di_ep_grow(di_ep_model *ep, int n, int d);
/* Record the step's first failure. */
void di_ep_fail(di_ep_model *ep, deepinfer_status st, const di_error *e, const char *what);
/* Rows src[list[j]] -> dst[j] for j < count (bf16 rows of width d), through ops. */
void di_ep_gather_list(di_exec *x, di_ep_model *ep, int count, const int *list, int *d_list, int *d_off1,
                       const uint16_t *src, int d, uint16_t *dst);
/* The DP layout's MoE sub-layer (moe_ep.h "attention data parallelism"); M may be 0. */
void di_ep_routed_dp(di_fwd *f, di_ep_layer *L, const di_moe_opts *o, const int *sel, const float *rw,
                     const uint16_t *xn, const uint16_t *shared, uint16_t *out);
void di_ep_dp_free(di_ep_model *ep);

#endif
