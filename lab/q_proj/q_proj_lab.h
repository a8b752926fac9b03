/*
 * lab/q_proj/q_proj_lab.h — the fused query projection (q_proj_fused.cu) under lab_ names
 * (docs/kernels/attention-decode.md §5).
 */
#ifndef LAB_Q_PROJ_LAB_H
#define LAB_Q_PROJ_LAB_H

#include "ops/cuda/dic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* qrn = rmsnorm(qr, q_norm) (qrn apart from qr), q = bf16(qrn W^T) (FP8 W [nheads * hd][K]), then
 * q_post(q, nheads, hd, norm, eps, rd, cs, sn) in one launch. Fast mode (c->batch_invariant == 0) only,
 * FP8, M <= 4, K <= 1024, hd % 64 == 0, hd <= 512, 16-byte aligned rows (with the norm a cluster of
 * hd / 64 CTAs per head). lab_q_proj_ok says whether it applies; else lab_q_proj returns
 * cudaErrorNotSupported, nothing launched. Bitwise the fast-mode sequence where its GEMM has one K split,
 * else within the GEMM tolerance. lab_q_proj_enable(1) turns it on (off by default: lab_q_proj_ok 0);
 * lab_q_proj_config(stmax): ring stages (0: the default). */
int lab_q_proj_ok(const dic_ctx *c, int M, const uint16_t *qr, size_t ldqr, const uint16_t *qrn, size_t ldqrn,
                  const dic_wmat *W, int act_block, const uint16_t *q, size_t ldq, int nheads, int hd, int rd);
cudaError_t lab_q_proj(const dic_ctx *c, int M, const uint16_t *qr, size_t ldqr, const float *q_norm, float eps,
                       uint16_t *qrn, size_t ldqrn, const dic_wmat *W, int act_block, uint16_t *q, size_t ldq,
                       int nheads, int hd, int norm, int rd, const float *cs, const float *sn);
void lab_q_proj_enable(int on);
int lab_q_proj_enabled(void);
void lab_q_proj_config(int stmax);

#ifdef __cplusplus
}
#endif
#endif
