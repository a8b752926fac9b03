/*
 * lab/mhc/mhc_lab.h — the lab's mHC variants (mhc_variants.cu, mhc_gridsync.cu): the same arguments as the
 * product's dic_hc_transition / dic_hc_head (src/ops/cuda/dic_model.h), plus the variant switches that
 * the product no longer has (docs/kernels/mhc.md).
 */
#ifndef LAB_MHC_LAB_H
#define LAB_MHC_LAB_H

#include "ops/cuda/dic.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LAB_HT_NVAR 10
#define LAB_HT_DEFAULT 7 /* the product's (dic_hc_transition) */
/* The transition variant lab_hc_transition launches (mhc_variants.cu's header); v >= 0 sets it; returns it. */
int lab_hc_transition_variant(int v);
int lab_hc_transition_ok(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int d, int fn_n, int fn_k,
                         const void *fn, const uint16_t *xo, const uint16_t *xn, size_t ldx);
cudaError_t lab_hc_transition(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, uint16_t *R, size_t ldr,
                              int d, const float *fn, const float *scale3, const float *base, int iters, float hc_eps,
                              float rms_eps, float *mixes, float *pre, float *post, float *comb, float *pre_in,
                              const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx);
/* Columns per CTA of lab_hc_head: 32 or 64 (64: the product's); 0 leaves it; returns it. */
int lab_hc_head_cw(int cw);
int lab_hc_head_ok(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int d, int fn_n, int fn_k, const void *fn,
                   const uint16_t *xo, const uint16_t *xn, size_t ldx);
cudaError_t lab_hc_head(const dic_ctx *c, int M, const uint16_t *sub, size_t ldsub, const float *post,
                        const float *comb, uint16_t *R, size_t ldr, int d, const float *fn, float scale0,
                        const float *base, float hc_eps, float rms_eps, float *mixes, float *pre, const float *norm_w,
                        float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx);

#ifdef __cplusplus
}
#endif

#ifdef DIC_MHC_INT_CUH
/* mhc_gridsync.cu: variant 9's grid-synchronised transition at M <= 2; cudaErrorNotSupported when it does
 * not apply (nothing launched). ssx: scratch of S = d / 32 doubles per row. */
cudaError_t lab_hc_transition_gs(const dic_ctx *c, const ht_args *a, double *ssx);
#endif
#endif
