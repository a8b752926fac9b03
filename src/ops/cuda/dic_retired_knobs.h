/*
 * dic_retired_knobs.h — variant switches the GEMM, lm_head and mHC kernels no longer have: each kernel
 * family runs one variant (docs/kernels/ pages; the others live in lab/). cu_skip.c's timing knobs still
 * call these names until that knob function is removed; they change nothing (dic_retired_knobs.cu) and
 * report the product's fixed choice. No new caller: delete this header with the knob function.
 */
#ifndef DI_OPS_CUDA_DIC_RETIRED_KNOBS_H
#define DI_OPS_CUDA_DIC_RETIRED_KNOBS_H

#ifdef __cplusplus
extern "C" {
#endif

void dic_gemm_dec_tune(int flags, int cps); /* no effect */
int dic_gemm_dec_flags(void);               /* DIC_DEC_QV2 */
int dic_gemm_dec_cps(void);                 /* 0 */
int dic_gemm_dec_qrule(int rule);           /* no effect; 0 */
int dic_hc_transition_variant(int v);       /* no effect; 7 (k_transition2, 32 columns per CTA) */
int dic_hc_head_cw(int cw);                 /* no effect; 64 */
void dic_gemm_argmax_enable(int on);        /* no effect */
void dic_gemv_stream_enable(int on);        /* no effect */

#ifdef __cplusplus
}
#endif
#endif
