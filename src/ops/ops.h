/*
 * ops.h — the compute-op interface the model is written against, with the
 * exact semantics of every op (architecture.md §3). The CPU implementations
 * live in src/ops/cpu/; a CUDA backend implements the same contracts.
 *
 * Conventions
 *  - "bf16" buffers are uint16_t bit patterns. Activations flow between ops
 *    as bf16 wherever the reference keeps BF16 tensors (§3.1).
 *  - Every op works row by row: a row's result never depends on which other
 *    rows share the call, on the thread count or on tiling (batch invariance
 *    by construction; docs/determinism.md). Reductions run in an order fixed
 *    by the shapes below, stated per op.
 *  - Ops never allocate; scratch comes from the di_exec (reserved once).
 *  - Shapes are checked by the caller (the model binds weights against the
 *    expected-tensor table); ops assume valid arguments.
 */
#ifndef DI_OPS_OPS_H
#define DI_OPS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cpu/threadpool.h"
#include "util/error.h"

/* ---------------------------------------------------------------------------
 * Execution context: thread pool + scratch arena (reserved up front). */
typedef struct di_exec {
    di_threadpool *tp;       /* may be NULL: run serially */
    unsigned char *scratch;  /* 64-byte aligned */
    size_t scratch_cap;
} di_exec;

/* Create an execution context on the global pool with `scratch_bytes` of
 * scratch (0 picks 16 MiB). Ops that need more process rows in pieces. */
deepinfer_status di_exec_init(di_exec *x, size_t scratch_bytes, di_error *err);
void di_exec_free(di_exec *x);

/* ---------------------------------------------------------------------------
 * Weight matrices W [N, K] (N outputs, K inputs), packed once for the CPU
 * kernels (src/ops/cpu/gemm_layout.h). Formats:
 *   BF16  bf16 weights.
 *   F32   fp32 weights.
 *   FP8   e4m3 weights with e8m0 scales per B x B block (B = wblock):
 *         w[n][k] = e4m3(W[n][k]) * 2^(S[n/B][k/B] - 127). K % B == 0.
 *   FP4   e2m1 packed two per byte along K (low nibble = even k) with e8m0
 *         scales per row and 32 inputs: w[n][k] = e2m1 * 2^(S[n][k/32]-127).
 *         K % 32 == 0.
 */
typedef enum di_wfmt { DI_WFMT_BF16 = 0, DI_WFMT_F32 = 1, DI_WFMT_FP8 = 2, DI_WFMT_FP4 = 3 } di_wfmt;

typedef struct di_wmat {
    di_wfmt fmt;
    int n, k;
    int wblock;     /* FP8: square block B; FP4: 32; else 0 */
    int npanels;    /* ceil(n / 16) */
    void *data;     /* packed panels (owned) */
    float *scale;   /* decoded scales (owned), layout per format */
    size_t bytes;   /* data + scale bytes */
} di_wmat;

/* Pack W. `w` points at the checkpoint bytes (bf16 / f32 / e4m3 / packed
 * e2m1), `scale` at the e8m0 scale bytes (FP8, FP4; else NULL). Rows are
 * copied, so the source may be unmapped afterwards. */
deepinfer_status di_wmat_pack(di_wmat *out, di_wfmt fmt, const void *w, const uint8_t *scale, int n, int k,
                              int wblock, di_error *err);

/* Pack rows [row0, row0 + n) of a larger FP8/BF16/F32 matrix with `k` columns
 * (for grouped projections). For FP8, row0 must be a multiple of wblock. */
deepinfer_status di_wmat_pack_rows(di_wmat *out, di_wfmt fmt, const void *w, const uint8_t *scale, int row0, int n,
                                   int k, int wblock, di_error *err);

void di_wmat_free(di_wmat *w);

/* Exact dequantised value of W[n][k] as fp32 (tests, tools). */
float di_wmat_get(const di_wmat *w, int n, int k);

/* ---------------------------------------------------------------------------
 * GEMM: C[m][n] = sum_k A[m][k] * W[n][k], for m < M, n < N.
 *
 * A is bf16 [M, K] with row stride lda (elements). Output is fp32 (C32) or
 * bf16 RNE (C16), row stride ldc; exactly one of C32, C16 is non-NULL.
 *
 * FP8 / FP4 weights (architecture.md §3.2): each A row is quantised first,
 * in blocks of `act_block` along K: amax = max(max|x|, 1e-4),
 * s = 2^ceil(log2(amax * fp32(1/448))) from the fp32 bits, q = e4m3_RNE(
 * clamp(x / s, ±448)). Partial sums run over K-blocks of
 * kb = min(act_block, B) (FP8) or kb = 32 (FP4; act_block % 32 == 0):
 * P = sum_{k in block} q[k] * w_e[k] in fp32 (w_e = e4m3 or e2m1 value), then
 * C += P * (s_act * s_w), blocks in increasing k.
 * BF16 / F32 weights: no quantisation, one fp32 sum over all K.
 *
 * Summation order (fixed, identical on every ISA path): within a sum the
 * k-pairs (2p, 2p+1) are visited in increasing p and each pair adds the odd
 * element's product first, then the even one's (the operand order of
 * AVX512_BF16 VDPBF16PS); F32 weights visit k in order with fused
 * multiply-adds. Products of e4m3/e2m1/bf16 values are exact in fp32.
 * Denormal products (|product| < 2^-126, only possible for BF16 weights
 * with tiny activations) may be flushed on the AVX-512 path.
 */
void di_gemm(di_exec *x, int M, const uint16_t *A, size_t lda, const di_wmat *W, int act_block, float *C32,
             uint16_t *C16, size_t ldc);

/* Bytes of scratch di_gemm uses per row (quantised row + scales). */
size_t di_gemm_scratch_per_row(int K);

#endif
