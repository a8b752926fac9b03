/*
 * lab/gemm/gemm_lab.h — the lab's GEMM variants (gemm_dec_variants.cu, gemm_wgmma_v1.cu,
 * gemm_wgmma3_variants.cu): the product's launchers (src/ops/cuda/dic_gemm_int.h) under lab_ names, with
 * the switches the product no longer has (docs/kernels/gemm-decode.md, gemm-prefill.md).
 */
#ifndef LAB_GEMM_LAB_H
#define LAB_GEMM_LAB_H

#include "ops/cuda/dic_gemm_int.h"

#ifdef __cplusplus
extern "C" {
#endif

/* decode-kernel flags beyond dic_gemm_int.h's: FULL (the full instantiation where a lean one applies,
 * same bits); SAFE: the result-preserving ones */
#define DIC_DEC_FULL 512
#define DIC_DEC_SAFE (DIC_DEC_QV2 | DIC_DEC_ET | DIC_DEC_WPOST | DIC_DEC_PERS | DIC_DEC_L2PF | DIC_DEC_FULL)

cudaError_t lab_gemm_f16_launch(cudaStream_t st, int num_sms, int E, const dic_gemm_wtab *wt, int fmt, int N, int K,
                                int wblock, int act_block, int M, const int *off, const int *rows, const uint8_t *q,
                                const float *sa, float *part, int *cnt, int ncnt, float *C32, uint16_t *C16,
                                size_t ldc);
cudaError_t lab_gemm_dec_launch(cudaStream_t st, int num_sms, int nw, const dic_wmat *W, int act_block, int M,
                                const uint16_t *A, size_t lda, const uint8_t *q, const float *sa,
                                float *const *C32, uint16_t *const *C16, const size_t *ldc);
/* mode 0 = quantise in the kernel where lab_gemm_dec_fused says so, 1 = after the quantisation launch,
 * 2 = off, 3 = always in the kernel; stmax: ring stages (0 auto); splits: split-K (0: the product's rule;
 * others give other bits) */
void lab_gemm_dec_config(int mode, int stmax, int splits);
int lab_gemm_dec_fused(int M, int N, int K, int act_block, int num_sms);
int lab_gemm_dec_fits(int N, int K, int num_sms);
int lab_gemm_dec_status(void);
/* 0: the product's rule (M * (k per CTA) / act_block <= 16 act blocks); 1: M * (k per CTA) <= 2048 values.
 * rule < 0: back to 0. Returns the rule in force. */
int lab_gemm_dec_qrule(int rule);
/* flags (DIC_DEC_*) < 0: back to the product's (DIC_DEC_QV2); cps > 0 caps the CTAs per SM */
void lab_gemm_dec_tune(int flags, int cps);
int lab_gemm_dec_flags(void);
int lab_gemm_dec_cps(void);

/* the wgmma prefill kernel: ver 0 = v3 where it applies, else v2 (the product's); 1 = v1; 2 = v2 */
int lab_gemm_wgmma_usable(int N, int K);
int lab_gemm_wgmma_maps(const void *q, size_t ldq, int M, const void *w, int N, int K);
cudaError_t lab_gemm_q_wgmma_launch(cudaStream_t st, const void *w, const uint8_t *ws, int N, int K, int wblock,
                                    int act_block, int kb, int M, const uint8_t *q, size_t ldq, const float *sa,
                                    float *C32, uint16_t *C16, size_t ldc, int ver);
/* v3 with cl = 1 or 2 CTAs per cluster and sets = 1 or 2 accumulator sets (the product: 1, 1) */
int lab_gemm_wgmma3_ok(int N, int K, int wblock, int act_block);
cudaError_t lab_gemm_q_wgmma3_launch(cudaStream_t st, const void *w, const uint8_t *ws, int N, int K, int wblock,
                                     int act_block, int M, const uint8_t *q, size_t ldq, const float *sa, float *C32,
                                     uint16_t *C16, size_t ldc, int cl, int sets);

/* gemm_float_fast_variants.cu: the fast BF16 / F32 / FP8B GEMMs with the GEMV tuning (wpc warps per CTA,
 * cy CTAs per cluster: other bits; flags with DIC_GV_FORCE replace the automatic variant flags: the
 * same bits; 0, 0, 0 = the product's choices) */
#define DIC_GV_FORCE 8
void lab_gemm_float_fast_tune(int wpc, int cy, int flags);
cudaError_t lab_gemv_plan(int f32, int M, int N, int K, int *wpc, int *cy, int *flags, int *mr);
cudaError_t lab_gemm_float_fast_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                       float *C32, uint16_t *C16, size_t ldc, int path);
cudaError_t lab_gemm_blockdiag(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int G, const dic_wmat *W, int gk,
                               int act_block, float *C32, uint16_t *C16, size_t ldc);
int lab_gemm_argmax_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, size_t ldc);
cudaError_t lab_gemm_argmax(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, float *C32,
                            size_t ldc, int32_t *ids);
/* 1: fused at every M, 0: never, -1: the product's rule */
void lab_gemm_argmax_enable(int on);
void lab_gemm_fp8w_via_bf16_enable(int on);
int lab_gemm_fp8w_via_bf16_enabled(void);

/* skinny_f8_variants.cu: the mode-1 FP8B skinny product (dic_gemm_float_skinny.cu, the wo_a launch at M <= 8)
 * with the B fragments dequantised in registers and longer stages (docs/kernels/gemm-float.md "lab: FP8B
 * skinny variants"): k_mma mode 1's bits (dic_gemm_blockdiag in mode 1); v = 0 .. lab_skinny_f8_variants() - 1 */
int lab_skinny_f8_variants(void);
const char *lab_skinny_f8_name(int v);
/* 1: a probe (the variant's memory stream with no arithmetic, zeros out; not bitwise) */
int lab_skinny_f8_probe(int v);
cudaError_t lab_skinny_f8_launch(int v, cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                 int G, int gk, float *C32, uint16_t *C16, size_t ldc);

#ifdef __cplusplus
}
#endif
#endif
