/*
 * lab/moe_decode/moe_decode_lab.h — the lab's routed-expert variants (moe_decode_variants.cu): the
 * product's dic_moe_routed_dec (src/ops/cuda/dic_model.h) under lab_ names, with the switches the
 * product no longer has (docs/kernels/moe-decode.md).
 */
#ifndef LAB_MOE_DECODE_LAB_H
#define LAB_MOE_DECODE_LAB_H

#include "ops/cuda/dic_model.h"

#ifdef __cplusplus
extern "C" {
#endif

int lab_moe_routed_dec_ok(int M, int k, int E, const dic_wmat *W1, const dic_wmat *W3, const dic_wmat *W2, int d,
                          int act_block);
/* up 0 = k_md_up, 1 = ring per warp, 2 = ring + cluster of 4 K-chains; down 0 = k_md_down, 1 = one CTA
 * per (token, slot), cluster over the slots, 2 = k_mv_down2 (down 1 where its shared memory exceeds
 * 200 KB); nst = ring stages of up 1 / 2 (2, 3, 4, 8); negative = the product's choice. FP8 experts
 * always take 0. Every variant gives the same bits. */
void lab_moe_dec_config(int up, int down, int nst);
/* Option / diagnostic flags of the FP4 variants; negative = the default (QHW | CVT | XPRE | DLITE).
 * QHW .. DLITE give the same bits; the others are TIMING-ONLY (wrong results). */
#define DIC_MD_QHW 0x1     /* activation quantisation by cvt.rn.satfinite.e4m3x2 (same bits) */
#define DIC_MD_CVT 0x2     /* FP4 -> f16 by byte permutes + weight scales by exponent add (same bits) */
#define DIC_MD_XPRE 0x4    /* up: quantise xn BEFORE the PDL wait (same bits) */
#define DIC_MD_DLITE 0x8   /* down: sel and the (expert, slot) order read before the wait (same bits) */
#define DIC_MD_UPONLY 0x10 /* diag: launch the up kernel alone */
#define DIC_MD_DNONLY 0x20 /* diag: launch the down kernel alone */
#define DIC_MD_NOW 0x40    /* diag: no weight loads (the ring is not filled) */
#define DIC_MD_NOQ 0x80    /* diag: no activation quantisation */
#define DIC_MD_NOMMA 0x100 /* diag: no FP4 convert / MMA / scale math (the weights still stream in) */
#define DIC_MD_EXIT 0x200  /* diag: return right after the PDL wait */
#define DIC_MD_EMPTY 0x400 /* diag: return at entry */
#define DIC_MD_LIN 0x800   /* diag: the same bytes read as one contiguous 1 KB run per warp chunk */
void lab_moe_dec_flags(int fl);
/* timing probe: DIC_MD_NOQ / NOMMA bits of the up kernel, << 16 of the down kernel (results WRONG) */
void lab_moe_dec_probe(int bits);
/* ring stages of the lean k_mv_down2 (4, 6 or 10; -1: 4 at M <= 2) */
void lab_moe_dec_down2_nst(int nst);
/* the tail kernel after a join: 1 on (the product), 0 off, -1 default */
void lab_moe_dec_tail(int on);
/* the one-launch k_mo up to M = maxm (0 off: the default; negative: back to it) */
void lab_moe_dec_one(int maxm);
int lab_moe_dec_one_count(void);
int lab_moe_dec_down2_count(void);
int lab_moe_dec_broken(void);
/* the lean instantiations on (default) or the full ones (same bits) */
void lab_moe_dec_lean(int on);
cudaError_t lab_moe_routed_dec(const dic_ctx *c, int M, int k, const int *sel, const float *rw, int E,
                               const dic_wmat *W1, const dic_wmat *W3, const dic_wmat *W2, const uint16_t *xn,
                               size_t ldx, int d, int act_block, float limit, uint16_t *h, size_t ldh,
                               const uint16_t *shared, size_t lds, float *y, uint16_t *out, size_t ldo);

#ifdef __cplusplus
}
#endif
#endif
