/*
 * dic_gemm_int.h — internal interface between the GEMM files (dic_gemm*.cu):
 * the activation-quantisation scratch layout, the weight-pointer table the
 * grouped launches pass by value, and the per-format launchers.
 */
#ifndef DI_OPS_CUDA_DIC_GEMM_INT_H
#define DI_OPS_CUDA_DIC_GEMM_INT_H

#include <string.h>

#include "ops/cuda/dic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most experts one grouped launch takes (V4.1-Flash has 384). */
#define DIC_GEMM_MAXE 512

/* Weight pointers per expert (a kernel parameter, ~8 KB: no device copy, so
 * the launch stays graph-capturable). */
typedef struct dic_gemm_wtab {
    const void *w[DIC_GEMM_MAXE];
    const uint8_t *s[DIC_GEMM_MAXE];
} dic_gemm_wtab;

/* Quantisation scratch: e4m3 rows of ldq = round_up(K, 16) bytes, then
 * (256-aligned) fp32 scales [rows][K / act_block]. */
static inline size_t dic_gemm_ldq(int K) { return ((size_t)K + 15) & ~(size_t)15; }
static inline size_t dic_gemm_qbytes(int M, int K) { return ((size_t)M * dic_gemm_ldq(K) + 255) & ~(size_t)255; }
static inline size_t dic_gemm_sbytes(int M, int K) { return (((size_t)M * (size_t)(K / 16 + 1) * 4) + 255) & ~(size_t)255; }

/* K groups of DIC_GEMM_KG k: the summation order of the mma.sync kernels (dic_gemm_mma.cu
 * k_gemm_q_small / k_gemm_q_tile, now bench and test paths only: DIC_GEMM_PATH_TILES and the
 * fast mode's fallback where wgmma does not apply), and the bound of the split-K scratch of
 * every FP8 / FP4 launch (at most ngroups(K) partials). The product's batch-invariant order is
 * dic_gemm_f16.cu's (dic_gemm_f16_launch mfree; docs/determinism.md §7). */
#define DIC_GEMM_KG 512
static inline int dic_gemm_ngroups(int K) { return (K + DIC_GEMM_KG - 1) / DIC_GEMM_KG; }
/* Launches of at most this many rows split the K groups over CTAs (fp32
 * group partials in the scratch, the last-arriving CTA adds them in order). */
#define DIC_GEMM_SPLIT_MAXM 64
#define DIC_GEMM_SBN 32 /* output columns per small-M CTA */
static inline size_t dic_gemm_ncnt(int M, int N) {
    return (size_t)((N + DIC_GEMM_SBN - 1) / DIC_GEMM_SBN) * (size_t)((M + 15) / 16 + M);
}
static inline size_t dic_gemm_partbytes(int M, int N, int K) {
    if (M > DIC_GEMM_SPLIT_MAXM || dic_gemm_ngroups(K) < 2) return 0;
    return (((size_t)dic_gemm_ngroups(K) * (size_t)M * (size_t)N * 4 + 255) & ~(size_t)255) +
           ((dic_gemm_ncnt(M, N) * 4 + 255) & ~(size_t)255);
}

/* Quantise rows i < M (i < *count when count != NULL) of A: source row
 * rows[i] (or i), into q + i*ldq and s + i*(K/blk); and zero cnt[0..ncnt)
 * (the split-K arrival counters of the launch that follows). */
cudaError_t dic_gemm_quant(cudaStream_t st, int M, const uint16_t *A, size_t lda, int K, int blk, const int *rows,
                           const int *count, uint8_t *q, float *s, int *cnt, int ncnt);

/* FP8 / FP4 weights over quantised activations (dic_gemm_mma.cu). E = 1 and
 * off = rows = NULL: plain rows 0..M-1. Else grouped (dic.h). `path` picks
 * the kernels:
 *   DIC_GEMM_PATH_INVARIANT  small-M kernel (M <= 64, grouped <= 4E) or the
 *                            mma.sync tiles: one per-row summation order
 *                            (the K groups above) for every M (lab/gemm; no
 *                            longer the product's batch-invariant path);
 *   DIC_GEMM_PATH_FAST       the same, except FP8 plain rows with M > 64 on
 *                            a 9.x device take the wgmma kernel (faster
 *                            prefill, other bits: wgmma's e4m3 sums);
 *   DIC_GEMM_PATH_TILES      the mma.sync tiles for any M (tests, bench);
 *   DIC_GEMM_PATH_WGMMA      the wgmma kernel for any M (cudaErrorInvalidValue
 *                            where it does not apply). */
enum { DIC_GEMM_PATH_INVARIANT = 0, DIC_GEMM_PATH_FAST = 1, DIC_GEMM_PATH_TILES = 2, DIC_GEMM_PATH_WGMMA = 3 };
cudaError_t dic_gemm_q_launch(cudaStream_t st, int E, const dic_gemm_wtab *wt, int fmt, int N, int K, int wblock,
                              int act_block, int M, const int *off, const int *rows, const uint8_t *q,
                              const float *sa, float *part, int *cnt, float *C32, uint16_t *C16, size_t ldc,
                              int path);

/* The f16-HMMA FP8 / FP4 kernels (dic_gemm_f16.cu k_gemm_f16): the weights as the 16-row
 * operand; same arguments as dic_gemm_q_launch plus the SM count (grid sizing), the number of
 * split-K counters the quantisation launch zeroed (ncnt) and mfree. mfree = 1 (the batch-invariant
 * family, docs/determinism.md §7): the split-K that fixes the bits is dic_gemm_dec_splits(N, K, SMs)
 * for every M, plain and grouped, run as CTAs of their own or one after another in a CTA (same
 * bits), so an output row depends on its own row, N, K, the formats and the SM count only, and
 * equals k_gemm_dec's at M <= 8. mfree = 0 (fast-mode grouped launches): the split grows as the
 * grid shrinks, estimated from the experts in the launch, and plain launches above M = 64 do not
 * split: bits that depend on E and max_rows. */
cudaError_t dic_gemm_f16_launch(cudaStream_t st, int num_sms, int E, const dic_gemm_wtab *wt, int fmt, int N, int K,
                                int wblock, int act_block, int M, const int *off, const int *rows, const uint8_t *q,
                                const float *sa, float *part, int *cnt, int ncnt, float *C32, uint16_t *C16,
                                size_t ldc, int mfree);

/* Several products of the same activations (ops.h di_gemm_multi): for w < nw (<= 4),
 * C16[w] = bf16(A W[w]^T), row stride ldc[w]. Exactly nw dic_gemm calls (same bits); in fast
 * mode FP8 / FP4 weights of one format and K at M <= 8 share one launch and one quantisation.
 * Scratch: dic_gemm_scratch(M, max n, K). */
cudaError_t dic_gemm_multi(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int nw, const dic_wmat *W,
                           int act_block, uint16_t *const *C16, const size_t *ldc);

/* The decode kernel (dic_gemm_f16.cu k_gemm_dec): plain M <= 8, fast mode, FP8 / FP4, nw <= 4
 * weights of one format and K sharing the launch (their columns numbered weight after weight).
 * q == NULL: the kernel quantises A itself (no dic_gemm_quant launch); else q / sa are
 * dic_gemm_quant's output. Every output bitwise equal to dic_gemm_f16_launch's. Returns
 * cudaErrorNotSupported (nothing launched) where it does not apply: the caller then takes the
 * two-launch path. */
cudaError_t dic_gemm_dec_launch(cudaStream_t st, int num_sms, int nw, const dic_wmat *W, int act_block, int M,
                                const uint16_t *A, size_t lda, const uint8_t *q, const float *sa,
                                float *const *C32, uint16_t *const *C16, const size_t *ldc);
/* Test hook (the same bits in every mode): 0 = the decode kernel, quantising its own rows where
 * dic_gemm_dec_fused says so (the product), 1 = the decode kernel after the quantisation launch,
 * 2 = off (the two-launch k_gemm_f16 path), 3 = the decode kernel always quantising its own rows.
 * Status: the mode, or -1 when a launch was refused and this process fell back for good. (Other ring
 * stages and split counts: lab/gemm's lab_gemm_dec_config.) */
void dic_gemm_dec_mode(int mode);
/* Mode 0's choice: 1 when the kernel should quantise its own rows, 0 when the quantisation launch
 * first is faster (many act blocks per CTA: M * (k per CTA) / act_block > 16; docs/kernels/gemm-decode.md). */
int dic_gemm_dec_fused(int M, int N, int K, int act_block, int num_sms);
/* 0 when the decode kernel refuses the shape for its k range (dic_gemm_dec_launch: splits > 8 or k per CTA
 * > 2048): the caller skips the quantisation launch it would make for it. */
int dic_gemm_dec_fits(int N, int K, int num_sms);
int dic_gemm_dec_status(void);
/* k_gemm_f16 / k_gemm_dec's split-K rule for a plain launch: the number of splits and the k per split
 * (*kper, a multiple of the 128-k chunk) from (N, K, SMs) only, never from M. */
int dic_gemm_dec_splits(int N, int K, int num_sms, int *kper);
/* The decode kernel's variant bits (its a.fl): the product sets QV2 only (dic_gemm_f16.cu DEC_FLAGS: the
 * kernel's own quantisation with 8 values per thread, all loads of a round in flight, x * (1 / s)), cleared
 * where A allows no uint4 loads. The other bits are the variants and diagnostics that lost (lab/gemm,
 * docs/kernels/gemm-decode.md "Tried"); the kernel's full instantiation still tests them, always 0 here. */
#define DIC_DEC_QV2 1
#define DIC_DEC_ET 2
#define DIC_DEC_WPOST 4
#define DIC_DEC_NOQ 8
#define DIC_DEC_NOCL 16
#define DIC_DEC_BARE 32
#define DIC_DEC_NOW 64
#define DIC_DEC_PERS 128
#define DIC_DEC_L2PF 256

/* FP8 prefill on wgmma + TMA (dic_gemm_wgmma.cu): usable on this device for
 * these shapes; the launch over quantised activations q (row stride ldq);
 * ver 0: v3 where it applies, else v2; other ver: v2 (tests). */
int dic_gemm_wgmma_usable(int N, int K);
int dic_gemm_wgmma_maps(const void *q, size_t ldq, int M, const void *w, int N, int K); /* test diagnostics */
cudaError_t dic_gemm_q_wgmma_launch(cudaStream_t st, const void *w, const uint8_t *ws, int N, int K, int wblock,
                                    int act_block, int kb, int M, const uint8_t *q, size_t ldq, const float *sa,
                                    float *C32, uint16_t *C16, size_t ldc, int ver);
/* v3 of the wgmma kernel (dic_gemm_wgmma3.cu; ver 0 above takes it where
 * dic_gemm_wgmma3_ok): persistent grid, one CTA per cluster, one accumulator
 * set per consumer: v2's bits (docs/kernels/gemm-prefill.md). */
int dic_gemm_wgmma3_ok(int N, int K, int wblock, int act_block);
cudaError_t dic_gemm_q_wgmma3_launch(cudaStream_t st, const void *w, const uint8_t *ws, int N, int K, int wblock,
                                     int act_block, int M, const uint8_t *q, size_t ldq, const float *sa, float *C32,
                                     uint16_t *C16, size_t ldc);

/* FP8 weights on wgmma f16 with the bits of k_gemm_dec / k_gemm_f16 at every M (dic_gemm_f16_wg.cu):
 * usable for W and act_block on this device (FP8, K % 128 == 0, weight blocks >= 128, K-blocks of 32 or
 * 128, sm_90a); its scratch (f16 activations in k_gemm_f16's slot order, then their scales); the op from
 * bf16 rows A (quantisation, then the GEMM; tn: token tile 64 or 128, 0 = 128: no bits change).
 * cudaErrorNotSupported (nothing launched) where it does not apply or the scratch is short. */
int dic_gemm_f16_wg_ok(const dic_wmat *W, int act_block);
size_t dic_gemm_f16_wg_scratch(int M, int K);
cudaError_t dic_gemm_f16_wg(cudaStream_t st, int num_sms, const dic_wmat *W, int act_block, int M, const uint16_t *A,
                            size_t lda, void *scratch, size_t scratch_cap, float *C32, uint16_t *C16, size_t ldc,
                            int tn);

/* BF16 / F32 weights (dic_gemm_float.cu): the CPU's summation order, bitwise. */
cudaError_t dic_gemm_float_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                  float *C32, uint16_t *C16, size_t ldc);
/* Mode-1 F32 weights with N <= DIC_F32_CHAIN_MAXN (dic_gemm_f32_chain.cu; the mHC mixes and
 * head): one thread's fmaf chain in k order per output, operands streamed through shared
 * memory by cp.async: di_gemm's bits at every M. dic_gemm_float_launch takes it first for
 * fmt 1; cudaErrorNotSupported (nothing launched): not applicable or switched off
 * (dic_gemm_f32_chain_enable(0): bench A/B, the old k_gemm_float). */
#define DIC_F32_CHAIN_MAXN 64
cudaError_t dic_gemm_f32_chain_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                      float *C32, uint16_t *C16, size_t ldc);
void dic_gemm_f32_chain_enable(int on);
int dic_gemm_f32_chain_enabled(void);
/* BF16 / FP8B weights for batch_invariant == 1 (dic_gemm_float_fast.cu, docs/determinism.md sec. 7): the
 * tensor-core kernel k_mma at every M with a K split chosen from N and K only, so each output row's bits
 * depend on that row alone (not on M or the other rows); within rounding of di_gemm. F32 weights and
 * shapes outside k_mma's alignment rules: dic_gemm_float_launch (the CPU's per-row order). */
cudaError_t dic_gemm_float_inv_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                      float *C32, uint16_t *C16, size_t ldc);
/* The skinny form of that product (dic_gemm_float_skinny.cu, docs/kernels/gemm-float.md): M <=
 * DIC_SKINNY_MAXM rows of BF16 (fmt 0) or FP8B weights, G >= 1 groups of the same R x K (block-diagonal
 * when G > 1: group g reads activation columns g gk .., writes output columns g R ..), with k_mma's K
 * split S (mma_split_inv of the launch's columns and K) given by the caller: bit for bit k_mma's mode-1
 * outputs, every row its own. ids != NULL (S == 1, fp32 out, M <= DIC_AM_MAXM): also each row's greedy
 * argmax of those logits (dic_argmax's: NaN = -inf, ties to the lowest column; launches with ids must not
 * overlap). fits: the shape, alignment (K % 8, lda % 8, 16-byte A and W; FP8B K % 16, wblock % 16,
 * K % wblock) and shared memory allow it and it is enabled. launch: cudaErrorNotSupported (nothing
 * launched) where it does not fit. dic_gemm_skinny_enable(0): bench / tests, k_mma at every M;
 * dic_gemm_skinny_tune: lab, forced warps per CTA / n8 tiles per warp / units per warp (0 = auto, no
 * bits change); dic_gemm_skinny_launches: how many launches it made (tests: the dispatch). */
#define DIC_SKINNY_MAXM 16
/* the block-diagonal wo_a (dic_gemm_blockdiag) takes it to 8 rows only: at 16 it runs slower than k_mma
 * (docs/kernels/gemm-float.md) */
#define DIC_SKINNY_BLOCKDIAG_MAXM 8
int dic_gemm_skinny_fits(int M, const uint16_t *A, size_t lda, const dic_wmat *W, int G, int gk, int S);
cudaError_t dic_gemm_skinny_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int G,
                                   int gk, int S, float *C32, uint16_t *C16, size_t ldc, int32_t *ids);
void dic_gemm_skinny_enable(int on);
int dic_gemm_skinny_enabled(void);
void dic_gemm_skinny_tune(int warps, int nt, int units_per_warp);
unsigned long long dic_gemm_skinny_launches(void);
/* BF16 / F32 weights for batch_invariant == 0 (dic_gemm_float_fast.cu): GEMV family at
 * small M (and F32 at every M), mma.sync tensor cores for BF16 at M > 16; within
 * rounding of di_gemm, deterministic. `path`: AUTO, or one kernel for tests / bench. */
/* Weight pointers of a block-diagonal GEMV launch (kernel parameter). */
#define DIC_GV_MAXG 16
typedef struct dic_gv_tab {
    const void *w[DIC_GV_MAXG];
    const uint8_t *s[DIC_GV_MAXG]; /* FP8B: the scale bytes (dic.h DIC_WFMT_FP8B) */
    int wb;                        /* FP8B: the scale block */
} dic_gv_tab;

/* The FP8B groups' pointers into a launch table (host side): cudaErrorInvalidValue unless every
 * group is FP8B with W[0]'s n, k and wblock, has its scales and 16-byte aligned bytes. */
static inline cudaError_t dic_fp8b_tab(const dic_wmat *W, int G, dic_gv_tab *tab) {
    memset(tab, 0, sizeof *tab);
    if (G > DIC_GV_MAXG) return cudaErrorInvalidValue;
    for (int g = 0; g < G; g++) {
        if (W[g].fmt != DIC_WFMT_FP8B || W[g].n != W[0].n || W[g].k != W[0].k || W[g].wblock != W[0].wblock ||
            !W[g].scale || ((uintptr_t)W[g].w & 15))
            return cudaErrorInvalidValue;
        tab->w[g] = W[g].w, tab->s[g] = W[g].scale;
    }
    tab->wb = W[0].wblock;
    return cudaSuccess;
}

enum { DIC_GEMMF_PATH_AUTO = 0, DIC_GEMMF_PATH_GEMV = 1, DIC_GEMMF_PATH_MMA = 2, DIC_GEMMF_PATH_MMA64 = 3,
       DIC_GEMMF_PATH_MMA128 = 4, DIC_GEMMF_PATH_OLD = 5, DIC_GEMMF_PATH_INV = 6 /* dic_gemm_float_inv_launch */ };
cudaError_t dic_gemm_float_fast_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                       float *C32, uint16_t *C16, size_t ldc, int path);
/* The GEMV's variant flags (dic_gemv_plan, gemv_tile): LATE = weights loaded after the PDL wait (default:
 * the first batch before it), NOPRE = M = 1 BF16 activations loaded right before their FMAs, PIPE = M = 1:
 * the next batch's weights in flight while this one is summed. The product's plan sets PIPE only; the
 * others are lab/gemm's forced variants (docs/kernels/gemm-float.md). */
enum { DIC_GV_LATE = 1, DIC_GV_NOPRE = 2, DIC_GV_PIPE = 4 };
/* The GEMV launch's choices for M rows of an N x K matrix (f32: F32 weights, else BF16 / FP8B):
 * the K split (wpc warps per CTA, cy CTAs per cluster, from N and K only), the variant flags
 * (DIC_GV_*) and the rows per tile mr (1, 2, 4, 8, 16). Another kernel
 * that calls dic_gemv.cuh gemv_tile with these gives k_gemv's bits. */
cudaError_t dic_gemv_plan(int f32, int M, int N, int K, int *wpc, int *cy, int *flags, int *mr);

/* The decode lm_head with its greedy argmax (dic_gemm_float_fast.cu): C32 = the (mode 0) AUTO
 * dispatch's fp32 product of dic_gemm_float_fast_launch (the same kernel family, split and
 * bits), and ids[m] = the argmax of row m over its N columns, exactly dic_argmax's (NaN counts as
 * -inf, ties to the lowest column), in one launch. Applies to BF16 weights (fmt 0), 1 <= M <=
 * DIC_AM_MAXM, ldc >= N, the fast kernels' alignment, where the AUTO dispatch takes the GEMV with
 * CY == 1, the tensor-core tiles without a K split, or the bulk-copy stream (dic_gemv_stream_auto:
 * the lm_head shapes at M <= 8; fused at every M by default, its argmax costs one ticket per SM); else
 * cudaErrorNotSupported and nothing is launched (dic_gemm_argmax_ok says which, launching
 * nothing). In mode 1 (batch_invariant) the tensor-core tiles of dic_gemm_float_inv_launch where its
 * M-free split is 1 (the lm_head shapes), at every M <= DIC_AM_MAXM; in mode 0 at M < DIC_AM_MINM_DEF only
 * where the stream kernel runs.
 * Launches must not overlap each other (one set of per-row keys and one counter per device). */
#define DIC_AM_MAXM 8
/* The GEMV's fused argmax from this M on: at M = 1 its thousands of CTAs each pay the fence and ticket in
 * their tail, slower than the separate argmax launch (docs/kernels/gemv-lm-head.md). */
#define DIC_AM_MINM_DEF 2
int dic_gemm_argmax_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, size_t ldc);
cudaError_t dic_gemm_argmax(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, float *C32,
                            size_t ldc, int32_t *ids);

/* The streamed BF16 GEMV (dic_gemv_stream.cu, fast mode): fp32 C32 = A W^T for M <= DIC_GS_MAXM rows,
 * one CTA per SM, each walking its own contiguous rows of W through shared memory with TMA bulk copies
 * (docs/kernels/gemv-lm-head.md);
 * ids != NULL: also ids[m] = row m's greedy argmax (dic_argmax's: NaN = -inf, ties to the lowest
 * column; launches with ids must not overlap). A row's bits depend on K only (not on M or N); they are
 * not k_gemv's (another summation order, within the GEMM tolerance). fits: BF16 weights (fmt 0), K % 8
 * == 0 split evenly over a stage geometry's warps (e.g. K = 4096, 5120, 16384), lda % 8 == 0, A and W
 * 16-byte aligned, ldc >= N. auto: fits, N * K >= 2^26 (the lm_head) and stages of >= 32 KB (K = 4096: yes;
 * V4.1's K = 5120 takes 20 KB stages: no): then dic_gemm_float_fast_launch's AUTO dispatch (fp32 out) and
 * dic_gemm_argmax take it. num_sms <= 0: the current device's count. */
#define DIC_GS_MAXM 2
int dic_gemv_stream_fits(int M, const uint16_t *A, size_t lda, const dic_wmat *W, size_t ldc);
int dic_gemv_stream_auto(int M, const uint16_t *A, size_t lda, const dic_wmat *W, size_t ldc);
cudaError_t dic_gemv_stream_launch(cudaStream_t st, int num_sms, int M, const uint16_t *A, size_t lda,
                                   const dic_wmat *W, float *C32, size_t ldc, int32_t *ids);

/* Fast-mode block-diagonal GEMV over FP8B weights (dic_gemm_fp8w_gemv.cu; wo_a at decode):
 * M <= 4, G <= DIC_GV_MAXG groups of the same R x K (R even, wblock % 16 == 0, K % wblock
 * == 0), activations 16-byte aligned with lda % 8 == 0 and gk % 8 == 0 (else
 * cudaErrorInvalidValue, nothing launched). Within the GEMM tolerance of the BF16 matrix's
 * product (another fp32 order); deterministic; a row's bits do not depend on M.
 * dic_gemm_blockdiag takes it in fast mode for FP8B at M <= 4 unless switched off here
 * (bench / tests: off = the bitwise FP8B path of k_gemv). */
cudaError_t dic_gemm_fp8w_gemv_g(cudaStream_t st, int num_sms, int M, const uint16_t *A, size_t lda,
                                 const dic_wmat *W, int G, int gk, float *C32, uint16_t *C16, size_t ldc);
void dic_gemm_fp8w_gemv_enable(int on);
int dic_gemm_fp8w_gemv_enabled(void);

/* Fast-mode block-diagonal product over FP8B weights on the tensor cores (dic_gemm_fp8w_mma.cu;
 * wo_a at decode batches above 4 and prefill): weights as the mma A operand, converted from the
 * e4m3 bytes in registers. G <= DIC_GV_MAXG groups of the same R x K (R % 16 == 0, K % 64 == 0,
 * wblock % 16 == 0, K % wblock == 0), activations 16-byte aligned, lda % 8 == 0, gk % 8 == 0
 * (else cudaErrorInvalidValue, nothing launched). Any M works; dic_gemm_blockdiag takes it in
 * fast mode for FP8B at GV_BF16_MAXM < M <= dic_gemm_fp8w_mma_maxm_get() (default DIC_W8M_MAXM;
 * dic_gemm_fp8w_mma_maxm(x): bench / tests, 0 = default). Within the GEMM tolerance of the BF16
 * matrix's product; deterministic; a row's bits may depend on M (its n8 tile width). */
#define DIC_W8M_MAXM 32 /* faster than BF16 storage up to M = 32, slower above (docs/kernels/gemm-float.md) */
cudaError_t dic_gemm_fp8w_mma_g(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int G,
                                int gk, float *C32, uint16_t *C16, size_t ldc);
void dic_gemm_fp8w_mma_maxm(int maxm);
int dic_gemm_fp8w_mma_maxm_get(void);
/* Fast mode, FP8B at M >= DIC_W8_VIA_BF16_MINM: the groups' BF16 matrices into the top of the op's scratch (exact,
 * dic_fp8w.cuh), then the BF16 tensor-core kernel (k_mma) on them: the BF16 storage's bits plus one
 * conversion pass. Falls back to k_mma F8 when the scratch is smaller than the groups' BF16 bytes.
 * dic_gemm_fp8w_via_bf16_enable(0): bench / tests, always k_mma F8. */
#define DIC_W8_VIA_BF16_MINM 129 /* k_mma F8 faster below, the BF16 conversion pass above (docs/kernels/gemm-float.md) */
void dic_gemm_fp8w_via_bf16_enable(int on);
int dic_gemm_fp8w_via_bf16_enabled(void);

/* Mode-1 (bitwise) block-diagonal product over FP8B weights (dic_gemm_float.cu): one launch over
 * G <= DIC_GV_MAXG groups of the same N x K (wblock % 16 == 0, K % wblock == 0, weights 16-byte
 * aligned), the per-column chains of k_gemm_bf16_dec (M <= 8) / k_gemm_float (M > 8): each
 * group's outputs are dic_gemm_float_launch's on the host-dequantised BF16 matrix, bit for bit.
 * Group g reads activation columns g * gk .. and writes output columns g * N ... */
cudaError_t dic_gemm_fp8w_bd_g(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int G,
                               int gk, float *C32, uint16_t *C16, size_t ldc);

#ifdef __cplusplus
}
#endif
#endif
