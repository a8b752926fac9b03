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
 *  - "exp" in the fp32 formulas below is the CPU backend's own expf
 *    (src/ops/cpu/mathf.h: correctly rounded but for 4 inputs), not libm's,
 *    so results do not depend on the C library.
 *  - Shapes are checked by the caller (the model binds weights against the
 *    expected-tensor table); ops assume valid arguments.
 */
#ifndef DI_OPS_OPS_H
#define DI_OPS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* The CPU backend's worker pool (ops/cpu/threadpool.h), carried by every exec. */
typedef struct di_threadpool di_threadpool;

/* ---------------------------------------------------------------------------
 * Execution context: thread pool + scratch arena (reserved up front). */
struct di_dev_ops;
typedef struct di_exec {
    di_threadpool *tp;       /* may be NULL: run serially */
    unsigned char *scratch;  /* 64-byte aligned */
    size_t scratch_cap;
    /* Backend (src/ops/dev_ops.h): NULL runs the CPU ops; else every op
     * runs its device twin on dev_ctx's stream, on device pointers. */
    const struct di_dev_ops *dev;
    void *dev_ctx;
} di_exec;

/* Create an execution context on the global pool with `scratch_bytes` of
 * scratch (0 picks 16 MiB). Ops that need more process rows in pieces. */
deepinfer_status di_exec_init(di_exec *x, size_t scratch_bytes, di_error *err);
void di_exec_free(di_exec *x);

/* Wait for the exec's queued work (device backends) and report the first
 * failed op; DEEPINFER_OK at once on the CPU. */
deepinfer_status di_exec_sync(di_exec *x, di_error *err);

/* The exec that owns state-memory ops outside a step (sequence reset and
 * fork): NULL on the CPU, the device backend's state exec otherwise. */
di_exec *di_dev_exec(void);

/* 1 when ops on x run on a device backend. */
static inline int di_exec_on_device(const di_exec *x) { return x && x->dev; }

/* 1 when the backend records the step for replay (a CUDA graph): every
 * launch shape must then be fixed by the step's shape (rows, segments), so
 * the model pads position-dependent counts (compressor emissions) to their
 * bound. 0 on the CPU: the CPU path never pads. */
int di_exec_fixed_shapes(const di_exec *x);

/* Concurrent lines of a recorded step (a CUDA graph; docs/cuda-backend.md
 * §9). After di_exec_branch(x, b), b in 1..DI_EXEC_BRANCHES, the ops run on
 * side line b, which starts where the main line stands at that call (the
 * first one for b since the last join); di_exec_branch(x, 0) returns to the
 * main line, which continues from its own last op; di_exec_join(x) makes the
 * main line wait for every side line. Ops on different lines must not touch
 * memory that another line writes. Nothing happens on the CPU and in steps
 * that are not recorded (every op then runs in call order), so the results
 * never depend on the lines. */
#define DI_EXEC_BRANCHES 4
void di_exec_branch(di_exec *x, int b);
void di_exec_join(di_exec *x);

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
    /* The checkpoint bytes (di_wmat_raw): borrowed from the mapped
     * checkpoint, or copies in backend memory when `raw_owned`. */
    const void *raw_w;
    const uint8_t *raw_scale;
    int raw_owned;
    /* BF16 weights only: > 0 when the checkpoint bytes are e4m3 with e8m0
     * scales per raw_fp8_block square block (di_wmat_set_raw_fp8): the
     * weight is bf16(e4m3 * 2^(s-127)), exact, so a device backend keeps the
     * FP8 bytes and computes with those BF16 values (FP8 storage, BF16 math:
     * the grouped wo_a, released FP8, used in BF16 by the reference). */
    int raw_fp8_block;
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

/* Two products of the same activations, C1 = A W1^T and C2 = A W2^T (each
 * output as in di_gemm: exactly one of C*_32, C*_16 per product; one ldc):
 * the results of two di_gemm calls, with A quantised once and both weights'
 * panels in one parallel region when W1, W2 share format, K and block. */
void di_gemm2(di_exec *x, int M, const uint16_t *A, size_t lda, const di_wmat *W1, const di_wmat *W2, int act_block,
              float *C1_32, uint16_t *C1_16, float *C2_32, uint16_t *C2_16, size_t ldc);

/* Several products of the same activations: for w < nw (1..4),
 * C16[w] = A W[w]^T as bf16 (di_gemm with C32 = NULL), row stride ldc[w].
 * Exactly the nw di_gemm calls (same bits). A device backend may quantise A
 * once and run all products in one launch when the W[w] share format (FP8 /
 * FP4) and K (its fast mode: each output computed as its single call). */
void di_gemm_multi(di_exec *x, int M, const uint16_t *A, size_t lda, int nw, const di_wmat *W, int act_block,
                   uint16_t *const *C16, const size_t *ldc);

/* Block-diagonal product (the grouped output projection wo_a): for each
 * group g < G, C[:, g*W[g].n ..] = A[:, g*gk .. g*gk + gk) W[g]^T; every
 * W[g] has the same format and shape (n, k = gk). Exactly the G di_gemm
 * calls (same bits); a device backend may run them as one launch. */
void di_gemm_blockdiag(di_exec *x, int M, const uint16_t *A, size_t lda, int G, const di_wmat *W, int gk, int act_block,
                       float *C32, uint16_t *C16, size_t ldc);

/* Bytes of scratch di_gemm uses per row (quantised row + scales). The
 * di_exec must hold at least one row of the largest K; more rows let a call
 * quantise more rows at once (results do not depend on it). */
size_t di_gemm_scratch_per_row(int K);

/* ---------------------------------------------------------------------------
 * Normalisation (§3.4). */

/* RMSNorm of M rows of D bf16 values (row strides ldx, ldy; in place allowed):
 * r = 1 / sqrtf(fp32(sum x^2 / D) + eps) with the sum of squares taken in
 * double in index order; y = bf16(w * (x * r)) (weight multiplied in fp32
 * before the cast; w == NULL means no weight). */
void di_rmsnorm(di_exec *x, int M, const uint16_t *in, size_t ldx, const float *w, int D, float eps, uint16_t *out,
                size_t ldy);

/* The V4 per-head query normalisation, computed in BF16 as the reference's
 * `q *= rsqrt(q.square().mean(-1) + eps)` on a bf16 tensor (§4.4 step 2):
 * s_i = bf16(q_i^2); m = bf16(sum_fp32(s) / hd); t = bf16(m + eps);
 * r = bf16(1/sqrt(t)); q_i = bf16(q_i * r). Applied to `nheads` heads of
 * `hd` values in each of M rows (row stride ld), in place. */
void di_head_rmsnorm_bf16(di_exec *x, int M, uint16_t *q, size_t ld, int nheads, int hd, float eps);

/* The query's post-processing (§4.4 step 2): with `norm`, di_head_rmsnorm_bf16
 * (q, ld, nheads, hd, eps); then di_rope_tab(q, ld, nheads, hd, rd, cs, sn, 0).
 * CPU and batch-invariant CUDA: that sequence. Fast-mode CUDA: one kernel;
 * the fp32 sum of the squares in a fixed tree order instead of index order
 * (the bf16-rounded mean makes a different bit rare). */
void di_q_post(di_exec *x, int M, uint16_t *q, size_t ld, int nheads, int hd, int norm, float eps, int rd,
               const float *cs, const float *sn);

/* The query projection (§4.4 steps 1-2 after wq_a): qrn = di_rmsnorm(qr, q_norm, D = W->k, eps)
 * (qrn may be qr: in place), q = di_gemm(qrn, W, act_block) as bf16 (row stride ldq), then
 * di_q_post(q, ldq, nheads, hd, norm, eps, rd, cs, sn). Every backend and mode runs that sequence
 * (docs/kernels/attention-decode.md §5: a fused CUDA kernel was tried). */
void di_q_proj(di_exec *x, int M, const uint16_t *qr, size_t ldqr, const float *q_norm, float eps, uint16_t *qrn,
               size_t ldqrn, const di_wmat *W, int act_block, uint16_t *q, size_t ldq, int nheads, int hd, int norm,
               int rd, const float *cs, const float *sn);

/* The kv row's post-processing (§4.4 step 3): di_rmsnorm(kv, ld, w, D, eps)
 * in place, di_rope_tab(kv, ld, 1, D, rd, cs, sn, 0), di_qat_fp8(kv, ld,
 * qn, qblk), then di_scatter_rows(n, src_row, kv, ld, dst, D) (n = 0: no
 * scatter; dst a host table as there). CPU: that sequence; CUDA, both modes:
 * one kernel at M <= 64 (the same bits: the RMSNorm keeps dic_rmsnorm's
 * exactness check; docs/determinism.md §7), the sequence above that. */
void di_attn_kv_post(di_exec *x, int M, uint16_t *kv, size_t ld, const float *w, int D, float eps, int rd,
                     const float *cs, const float *sn, int qn, int qblk, int n, const int *src_row,
                     uint16_t *const *dst);

/* ---------------------------------------------------------------------------
 * Rotary embedding (§4.3): interleaved pairs (2i, 2i+1) of the last `rd`
 * dims of each head. */

/* The reference's inverse frequencies, in fp32 (precompute_freqs_cis):
 * f_i = 1 / base^(2i/rd); with YaRN (orig_len > 0) the ramp between
 * beta_fast and beta_slow divides the high-index frequencies by `factor`. */
void di_rope_inv_freq(int rd, double base, int orig_len, double factor, double beta_fast, double beta_slow,
                      float *inv_freq /* [rd/2] */);

/* Rotate, for M rows at positions pos[m], the tail `rd` dims of each of
 * `nheads` heads of `hd` values (row stride ld), in place:
 * angle = fp32(pos * f_i); c, s = fp32 cos, sin of it (s -> -s for
 * `inverse`); (a, b) -> bf16(fma(a, c, -(b*s))), bf16(fma(a, s, b*c)) — the
 * reference's complex product with CUDA's FMA contraction (rope.c). */
void di_rope(di_exec *x, int M, uint16_t *v, size_t ld, int nheads, int hd, int rd, const int64_t *pos,
             const float *inv_freq, int inverse);

/* The cos/sin of di_rope for M positions: cs, sn [M][rd/2]. */
void di_rope_table(int M, const int64_t *pos, const float *inv_freq, int rd, float *cs, float *sn);

/* di_rope with a precomputed table (identical results). */
void di_rope_tab(di_exec *x, int M, uint16_t *v, size_t ld, int nheads, int hd, int rd, const float *cs, const float *sn,
                 int inverse);

/* ---------------------------------------------------------------------------
 * Quantisation simulations (§3.5), in place on bf16 values. */

/* FP8 round trip in blocks of `blk` of each of M rows' first n values:
 * amax = max(max|x|, 1e-4); s = 2^ceil(log2(amax * fp32(1/448)));
 * x = bf16(e4m3_RNE(clamp(x/s, ±448)) * s). */
void di_qat_fp8(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk);

/* FP4 round trip in blocks of `blk`: amax = max(max|x|, 6 * 2^-126);
 * s = 2^ceil(log2(amax * fp32(1/6))); x = bf16(e2m1_RNE(clamp(x/s, ±6)) * s)
 * (ties to the even code). */
void di_qat_fp4(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk);

/* FP4 round trip with E4M3 block scales (V4.1 compressed KV, §3.5), blocks
 * of `blk`: amax = max(max|x|, 6 * 2^-9); s = e4m3_RNE(amax / 6) (a true
 * division; s is not a power of two); x = bf16(e2m1_RNE(clamp(x / s, ±6)) * s)
 * (ties to the even code). */
void di_qat_fp4_e4m3(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk);

/* Orthonormal Walsh-Hadamard transform (natural / Sylvester order) of
 * `nvec` consecutive vectors of 128 bf16 values in each of M rows: fp32
 * butterflies with strides 1, 2, ..., 64 (a+b, a-b), then * fp32(128^-1/2),
 * cast to bf16. */
void di_hadamard128(di_exec *x, int M, uint16_t *v, size_t ld, int nvec);

/* ---------------------------------------------------------------------------
 * Sparse attention with sink (§3.6, §4.4 step 5), one query row at a time.
 *
 * For row m: q[m] is nheads x hd bf16; the row attends to n_idx[m] entries
 * kv[m][0..n_idx[m]) (pointers to hd bf16 values; NULL = an invalid index
 * that scores -inf and contributes a zero row). Entries are consumed in
 * blocks of 64 in the given order with the reference's online softmax:
 * logits l = fp32(q.k) * scale; per block M' = max(M, max l);
 * a = exp(M - M'); p = exp(l - M'); den = den * a + sum p (fp32);
 * o = o * a + sum bf16(p) * v (fp32, entries in order); finally
 * den += exp(sink_h - M); out = bf16(o / den). Dot products over hd use the
 * GEMM pair order (16 lanes of k-pairs, then a fixed lane tree).
 * kv is indexed kv[m * kv_stride + i]; out rows have stride ldo. */
void di_sparse_attn(di_exec *x, int M, const uint16_t *q, size_t ldq, int nheads, int hd,
                    const uint16_t *const *kv, size_t kv_stride, const int *n_idx, const float *sink, float scale,
                    uint16_t *out, size_t ldo);

/* ---------------------------------------------------------------------------
 * Manifold-constrained hyper-connections (§4.2), fp32. hc = 4 copies. */

/* From the 24 raw mixes of one token (already multiplied by the flatten
 * rsqrt) compute pre[4], post[4], comb[4][4] exactly as the reference
 * kernel: pre = sigmoid(m*s0 + b) + eps; post = 2 sigmoid(m*s1 + b);
 * comb = row softmax(m*s2 + b) + eps, column-normalise, then iters-1 times
 * (row-normalise, column-normalise), each with + eps in the denominator.
 * sigmoid(z) = 1 / (1 + exp(-z)). */
void di_hc_sinkhorn(const float *mixes, const float *scale3, const float *base, int iters, float eps, float *pre,
                    float *post, float *comb);

/* di_hc_sinkhorn for M tokens: mixes [M][24] -> pre, post [M][4], comb
 * [M][16]; each token's results are those of di_hc_sinkhorn on its row. */
void di_hc_sinkhorn_rows(di_exec *x, int M, const float *mixes, const float *scale3, const float *base, int iters,
                         float eps, float *pre, float *post, float *comb);

/* For M rows: mixes_out[m][j] = mixes_in[m][j] * rsqrt_m with
 * rsqrt_m = 1/sqrtf(fp32(sum_i r_i^2 / (hc*d)) + eps) over the flattened
 * bf16 residual R[m] (hc*d values, stride ldr; sum in double). nmix values
 * per row (in/out stride nmix). */
void di_hc_scale_mixes(di_exec *x, int M, const uint16_t *R, size_t ldr, int hcd, float eps, const float *mixes_in,
                       int nmix, float *mixes_out);

/* Collapse: y[m] = bf16(((p0*R0 + p1*R1) + p2*R2) + p3*R3) with every product
 * rounded to fp32 (pre: [M][4]; R: [M][4][d], stride ldr; y stride ldy). */
void di_hc_collapse(di_exec *x, int M, const float *pre, const uint16_t *R, size_t ldr, int d, uint16_t *y,
                    size_t ldy);

/* Expand: Rout[m][k] = bf16(post_k * f + (((c0k*R0 + c1k*R1) + c2k*R2) + c3k*R3))
 * with c_jk = comb[j][k] (the transpose, §11.4), products rounded to fp32
 * (f: [M][d] bf16 stride ldf; R, Rout: [M][4][d] stride ldr; may alias). */
void di_hc_expand(di_exec *x, int M, const float *post, const float *comb, const uint16_t *f, size_t ldf,
                  const uint16_t *R, uint16_t *Rout, size_t ldr, int d);

/* One hyper-connection transition (§4.2, §5.1) for M rows: the post of the
 * previous site, then the pre of the next site and its sub-layer RMSNorm.
 * Exactly the op sequence (di_hc_transition_seq):
 *   sub != NULL: R = expand(post, comb, sub, R) in place (the previous
 *                site's post/comb; sub [M][d] stride ldsub);
 *   mixes = scale_mixes(R, rms_eps, gemm(R, fn))     (fn: F32 [24][4d]);
 *   pre, post, comb = sinkhorn_rows(mixes, scale3, base, iters, hc_eps);
 *   xo = collapse(pre_in ? pre_in : pre, R); pre_in != NULL: pre_in = pre;
 *   xn = rmsnorm(xo, norm_w, norm_eps)               (xo, xn stride ldx).
 * R: [M][4][d] bf16, stride ldr; mixes [M][24]; pre, post, pre_in [M][4];
 * comb [M][16]. A backend may fuse the sequence (CUDA, both modes: the
 * mixes' fp32 sums in another fixed order that depends on d only, never on M). */
void di_hc_transition(di_exec *x, int M, const uint16_t *sub, size_t ldsub, uint16_t *R, size_t ldr, int d,
                      const di_wmat *fn, const float *scale3, const float *base, int iters, float hc_eps,
                      float rms_eps, float *mixes, float *pre, float *post, float *comb, float *pre_in,
                      const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx);

/* The model's output head (§4.8) for M rows: the post of the last block's
 * last site, the head collapse and the final RMSNorm. Exactly the op sequence
 * (di_hc_head_final_seq):
 *   sub != NULL: R = expand(post, comb, sub, R) in place (sub [M][d] stride
 *                ldsub; post [M][4], comb [M][16]);
 *   fn != NULL (V4: the head's F32 [hc][4d] weight, hc = 4):
 *                mixes = scale_mixes(R, rms_eps, gemm(R, fn))   ([M][4]),
 *                pre = head_pre(mixes, hc, scale0, base, hc_eps) ([M][4]);
 *   fn == NULL (V4.1): pre is an input (the carried pre, §5.1), not written;
 *   xo = collapse(pre, R); xn = rmsnorm(xo, norm_w, norm_eps) (stride ldx).
 * R: [M][4][d] bf16, stride ldr. A backend may fuse the sequence (CUDA, both
 * modes: the mixes' fp32 sums in another fixed order that depends on d only). */
void di_hc_head_final(di_exec *x, int M, const uint16_t *sub, size_t ldsub, const float *post, const float *comb,
                      uint16_t *R, size_t ldr, int d, const di_wmat *fn, float scale0, const float *base, float hc_eps,
                      float rms_eps, float *mixes, float *pre, const float *norm_w, float norm_eps, uint16_t *xo,
                      uint16_t *xn, size_t ldx);

/* The unfused sequence of di_hc_head_final (backends call it for the shapes
 * and modes they do not fuse). */
void di_hc_head_final_seq(di_exec *x, int M, const uint16_t *sub, size_t ldsub, const float *post, const float *comb,
                          uint16_t *R, size_t ldr, int d, const di_wmat *fn, float scale0, const float *base,
                          float hc_eps, float rms_eps, float *mixes, float *pre, const float *norm_w, float norm_eps,
                          uint16_t *xo, uint16_t *xn, size_t ldx);

/* The unfused sequence of di_hc_transition, each op dispatched on its own
 * (backends call it for the shapes and modes they do not fuse). */
void di_hc_transition_seq(di_exec *x, int M, const uint16_t *sub, size_t ldsub, uint16_t *R, size_t ldr, int d,
                          const di_wmat *fn, const float *scale3, const float *base, int iters, float hc_eps,
                          float rms_eps, float *mixes, float *pre, float *post, float *comb, float *pre_in,
                          const float *norm_w, float norm_eps, uint16_t *xo, uint16_t *xn, size_t ldx);

/* ---------------------------------------------------------------------------
 * Compressor pooling (§4.5): for each channel d < D, softmax over S slots of
 * score[s][d] (fp32: e = exp(x - max), w = e / sum e, slots summed in
 * order) and out[d] = sum_s fp32(kv[s][d] * w[s][d]) in slot order.
 * Slots with score -inf contribute 0. kv/score rows have stride ld. S <= 256. */
void di_softmax_pool(const float *kv, const float *score, size_t ld, int S, int D, float *out);

/* ---------------------------------------------------------------------------
 * Lightning indexer (§4.6, §3.7), BF16 scores. For one query with nh heads
 * of 128 bf16 values q and head weights w (bf16 values as fp32), and n key
 * rows k + j*ldk (128 bf16 values each):
 * score_j = bf16(sum_h bf16(bf16(relu(bf16(q_h . k_j))) * w_h)) with the
 * heads summed in order in fp32. Dot products as in attention. */
void di_index_scores(const uint16_t *q, int nh, const float *w, const uint16_t *k, size_t ldk, int n, float *score);

/* Indices of the `k` largest of n scores, in decreasing score order (ties:
 * lower index first). Writes min(k, n) indices to idx; returns that count. */
int di_topk_desc(const float *score, int n, int k, int *idx);

/* ---------------------------------------------------------------------------
 * MoE (§4.7). */

/* Router for one token from fp32 logits [E]: s = sqrt(softplus(l)) with
 * PyTorch's threshold 20 (softplus(l) = l for l > 20, else log1p(exp(l)));
 * selection = `fixed` (hash routing, k ids) or top-k of s + bias (bias may be
 * NULL; ties to the lower expert id); weights w_i = s[sel_i] / sum (sum in
 * selection order; + `norm_eps` in the denominator, 0 for V4) * route_scale.
 * E <= 1024. */
void di_route(const float *logits, int E, const float *bias, const int *fixed, int k, float route_scale, float norm_eps,
              int *sel, float *w);

/* SwiGLU of M rows of I values: g = fp32(gate), u = fp32(up); if limit > 0:
 * u = clamp(u, ±limit), g = min(g, limit); h = g / (1 + exp(-g)) * u;
 * if rw != NULL: h = rw[m] * h; out = bf16(h). gate/up/out stride ld. */
void di_swiglu(di_exec *x, int M, const uint16_t *gate, const uint16_t *up, size_t ld, int I, float limit,
               const float *rw, uint16_t *out, size_t ldo);

/* ---------------------------------------------------------------------------
 * Element-wise helpers for the model's per-row loops (one IEEE operation per
 * element, so every ISA path gives the same bits). */

/* y[i] += fp32(v[i]) for n bf16 values. */
void di_add_bf16_f32(float *y, const uint16_t *v, size_t n);

/* out[i] = a[i] + b[i] (fp32; out may alias a or b). */
void di_add_f32(float *out, const float *a, const float *b, size_t n);

/* y[i] = bf16_RNE(x[i]). */
void di_f32_to_bf16_n(const float *x, uint16_t *y, size_t n);

/* The three helpers above on an exec (the model's calls: device memory on
 * a device backend). Same results. */
void di_add_bf16_f32_x(di_exec *x, float *y, const uint16_t *v, size_t n);
void di_add_f32_x(di_exec *x, float *out, const float *a, const float *b, size_t n);
void di_f32_to_bf16_x(di_exec *x, const float *in, uint16_t *y, size_t n);

/* ===========================================================================
 * Device-shaped model ops (docs/cuda-backend.md §1-§2). With these the model
 * touches activation, state and weight memory only through ops: a backend
 * that keeps those buffers in device memory runs the whole forward step
 * without reading device data on the host. Arguments marked "host table"
 * are small arrays the host computes before the step from what it knows
 * (positions, segment tables, page tables, state addresses); an
 * asynchronous device queue copies them when the step is submitted.
 * Everything else (activations, router selections, top-k indices, counts)
 * may be device memory and is only ever read inside ops.
 * ======================================================================== */

/* ---------------------------------------------------------------------------
 * Memory: the backend allocator. Workspace, step buffers, sequence-state
 * row stores and the device copies of weights are allocated through it, so
 * a CUDA build can place them in device memory. The default (the CPU) is
 * 64-byte aligned host memory. di_dev_alloc returns NULL on failure;
 * di_dev_free(NULL) is a no-op. Set the allocator before loading a model. */
typedef struct di_allocator {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    void (*zero)(void *ctx, void *p, size_t bytes); /* clear (outside steps) */
    void (*upload)(void *ctx, void *dst, const void *src, size_t bytes); /* host -> backend memory (load time) */
    void *ctx;
    /* Streaming upload (load time; all NULL for host memory): a ring of host
     * staging buffers the backend copies from asynchronously.
     *   stage_get    a free buffer and its capacity (waits for the copy that
     *                last used it); NULL when none can be made;
     *   stage_put    start copying `bytes` of that buffer to `dst`;
     *   stage_finish wait for every copy and give the ring back. */
    void *(*stage_get)(void *ctx, size_t *cap);
    void (*stage_put)(void *ctx, void *buf, void *dst, size_t bytes);
    void (*stage_finish)(void *ctx);
} di_allocator;

void di_set_allocator(const di_allocator *a); /* NULL restores the host default */
void *di_dev_alloc(size_t bytes);
void di_dev_free(void *p);
void di_dev_zero(void *p, size_t bytes);
void di_dev_upload(void *dst, const void *src, size_t bytes);
/* A copy of `bytes` host bytes in backend memory (load time); NULL on failure. */
void *di_dev_dup(const void *src, size_t bytes);

/* Write `bytes` of backend memory at `dst` from a producer (load time):
 * fill(ctx, off, buf, n) writes bytes [off, off + n) into buf. Host memory:
 * one call straight into dst. A device backend: chunk by chunk through its
 * staging ring, each chunk's copy overlapping the next chunk's fill, so the
 * host holds the ring and nothing the size of the data. The copies may
 * still run on return; di_dev_fill_finish waits for them and gives the
 * ring back (before the producer's sources go, and at the end of a load).
 * Returns fill's first error. */
typedef deepinfer_status (*di_fill_fn)(void *ctx, uint64_t off, void *buf, size_t n, di_error *err);
deepinfer_status di_dev_fill(void *dst, size_t bytes, di_fill_fn fill, void *ctx, di_error *err);
void di_dev_fill_finish(void);

/* The checkpoint bytes of a packed weight (what a device backend uploads:
 * dic.h dic_wmat): `w` row-major bf16 / f32 / e4m3 [n][k] or packed e2m1
 * [n][k/2]; `scale` e8m0 [ceil(n/B)][k/B] (FP8) or [n][k/32] (FP4), NULL
 * else. Returns 0 when the weight was converted at load (no raw form kept;
 * the packed panels are then the only copy: di_wmat_get reads them).
 * With the host allocator the bytes are borrowed from the checkpoint
 * mapping (models keep it open); with a backend allocator installed
 * (di_allocator_is_host() == 0) di_wmat_set_raw copies them into backend
 * memory at load. */
int di_wmat_raw(const di_wmat *w, const void **wbytes, const uint8_t **scale);
int di_allocator_is_host(void);
/* Record w's checkpoint bytes (wbytes bytes of weights, sbytes of scales). */
deepinfer_status di_wmat_set_raw(di_wmat *w, const void *wsrc, size_t wbytes, const uint8_t *ssrc, size_t sbytes,
                                 di_error *err);
/* A weight held only in its checkpoint form in backend memory (device
 * backends: no packed panels; data and scale stay NULL): sets the shape and
 * format, allocates raw_w (wbytes) and raw_scale (sbytes, none when 0),
 * owned, for the caller to fill (di_dev_fill); bytes = wbytes + sbytes. */
deepinfer_status di_wmat_alloc_raw(di_wmat *w, di_wfmt fmt, int n, int k, int wblock, size_t wbytes, size_t sbytes,
                                   di_error *err);
/* Record a BF16 weight's checkpoint bytes as FP8 (its values are exactly
 * bf16(e4m3 * 2^(s-127))): `wsrc` e4m3 [n][k], `ssrc` e8m0 [ceil(n/B)][k/B]
 * for B = wblock (a multiple of 16 dividing k); sets raw_fp8_block. */
deepinfer_status di_wmat_set_raw_fp8(di_wmat *w, const uint8_t *wsrc, const uint8_t *ssrc, int wblock, di_error *err);

/* ---------------------------------------------------------------------------
 * Data movement (src/ops/cpu/rows.c). */

/* out[m][0..width) = table[ids[m]][0..width) for m < M (bf16 rows; ids on
 * the device: a decode row's token may be a sample of the previous step). */
void di_embed(di_exec *x, int M, const int32_t *ids, const uint16_t *table, int width, uint16_t *out, size_t ldo);
/* The same row `copies` times side by side: out[m][k*width ..] = table[ids[m]]
 * for k < copies (the hyper-connection streams of the first block; one launch). */
void di_embed_rep(di_exec *x, int M, const int32_t *ids, const uint16_t *table, int width, int copies, uint16_t *out,
                  size_t ldo);

/* Strided copy of M rows of row_bytes bytes (cudaMemcpy2DAsync). */
void di_copy_2d(di_exec *x, int M, const void *src, size_t lds_bytes, void *dst, size_t ldd_bytes, size_t row_bytes);

/* Host -> exec memory and exec memory -> host copies of `bytes` bytes (host
 * tables the op interface does not describe: step tokens, RoPE tables;
 * logits back to the caller). memcpy on the CPU. di_copy_d2h returns when
 * the bytes are on the host. */
void di_copy_h2d(di_exec *x, void *dst, const void *src, size_t bytes);
void di_copy_d2h(di_exec *x, void *dst, const void *src, size_t bytes);

/* p[i] = v for i < n fp32 values (state resets; all-zero bits also clear
 * bf16 buffers of 2n values). */
void di_fill_f32(di_exec *x, float *p, size_t n, float v);

/* Row scatter: for i < n, dst[i][0..width) = src[src_row ? src_row[i] : i]
 * (bf16 rows of stride lds). dst (host table) holds destination row
 * addresses: ring slots, row-store rows. Destination rows must not overlap
 * (the CUDA op writes them in parallel). */
void di_scatter_rows(di_exec *x, int n, const int *src_row, const uint16_t *src, size_t lds, uint16_t *const *dst,
                     int width);

/* ---------------------------------------------------------------------------
 * Attention entry lists (src/ops/cpu/attn_list.c): ops.h di_sparse_attn's kv
 * pointers for every row of a step, built from host tables and the
 * indexer's device-side selection.
 *
 * Host tables: pos[m]; row_seg[m] = the row's segment; per segment s:
 * seg_row0[s] (its first row in the step), seg_pos0[s] (that row's
 * position), ring[s] (the layer's SWA ring of the sequence, [win][hd]),
 * ckv[s] (the page table of its compressed-KV store: row j at
 * ckv[s][j / page_rows[s]] + (j % page_rows[s]) * hd; NULL without one).
 *
 * Row m at position p: first the window t = max(0, p-win+1) .. p, each
 * entry the step's own kv row (kv + (seg_row0 + t - seg_pos0) * hd) when
 * t >= seg_pos0, else ring slot t mod win; NULL up to `win` entries. Then,
 * for ratio > 0: with topk != NULL the rows topk[m*K + i], i < ntopk[m],
 * else every visible row j < (p+1) / ratio. n_idx[m] = the count.
 * list[m * stride + i]. */
void di_attn_list(di_exec *x, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                  const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                  uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K,
                  const int *ntopk, const uint16_t **list, size_t stride, int *n_idx);

/* Decode attention in one op (architecture.md §4.4 step 5): di_attn_list
 * (arguments pos .. n_idx as there), then di_sparse_attn(q, ldq, nheads, hd,
 * list, stride, n_idx, sink, scale, out, ldo), then the inverse RoPE of the
 * output, di_rope_tab(out, ldo, nheads, hd, rd, cs, sn, inverse = 1). The
 * CPU op runs exactly that sequence. The CUDA op (both modes, every M, the
 * floor included) builds each row's entries inside a fused split-entry
 * kernel (tensor-core logits and P.V, per-64-entry-block softmax,
 * fixed-order combine): equal to the sequence to fp32/bf16 rounding, not
 * bitwise, deterministic, a row's bits independent of M and of the other
 * rows (docs/determinism.md §7); `list` and `n_idx` are then scratch (list
 * not written); shapes the kernel does not take run the sequence.
 * seg_lo (host table, NULL = none): per segment the lowest position its
 * rows' windows may see (V4.1 compact prefill's floor, architecture.md
 * §6.5, model/batch.h late_from): after di_attn_list the window entries of
 * positions t < seg_lo[row_seg[m]] are NULL (absent). */
void di_attn_dec(di_exec *x, int M, const int64_t *pos, const int *row_seg, const int *seg_row0,
                 const int64_t *seg_pos0, uint16_t *const *ring, int win, const uint16_t *kv, int hd,
                 uint16_t **const *ckv, const int *page_rows, int ratio, const int *topk, int K, const int *ntopk,
                 const uint16_t **list, size_t stride, int *n_idx, const int64_t *seg_lo, const uint16_t *q, size_t ldq,
                 int nheads,
                 const float *sink, float scale, int rd, const float *cs, const float *sn, uint16_t *out, size_t ldo);

/* DSpark block attention lists: row m of segment s attends to ring slots
 * 0 .. nctx[s]-1 of ring[s] (slot order) then to the segment's own kv rows
 * seg_row0[s] .. seg_row0[s] + seg_nrows[s] - 1 (bidirectional). */
void di_attn_list_block(di_exec *x, int nseg, const int *seg_row0, const int *seg_nrows, const int *nctx,
                        uint16_t *const *ring, const uint16_t *kv, int hd, const uint16_t **list, size_t stride,
                        int *n_idx);

/* ---------------------------------------------------------------------------
 * Gated compressor state (src/ops/cpu/cmp_state.c), §4.5. For every segment
 * s (independent; rows of a segment in position order), with its state
 * buffers skv[s], ssc[s] ([groups * r][width] fp32, width = (overlap ? 2 :
 * 1) * hd: `groups` blocks of r slots, model/seq_state.h) and the step's
 * fp32 projections pk, ps ([M][width]): row m at position t, group
 * g = t / r, o = t mod r, slot = (g mod groups) * r + o:
 * skv[slot] = pk[m]; ssc[slot] = ps[m] + ape[o] (fp32 add; ape NULL: copy).
 * If emit[m] >= 0 (host table: exactly the rows with (t+1) mod r == 0, in
 * row order) group g is pooled into out[emit[m]][0..hd): without overlap
 * di_softmax_pool over the r slots of block g mod groups; with overlap over
 * 2r slots: the previous group's, block (g - 1) mod groups, their first
 * half [:hd], then the own group's, block g mod groups, their second half
 * [hd:]. Pooling writes no state. r <= 128, 2r <= 16 with overlap;
 * groups >= 1 (>= 2 with overlap). */
void di_cmp_gated_rows(di_exec *x, int M, const int *row_seg, const int *emit, const int64_t *pos,
                       float *const *skv, float *const *ssc, const float *pk, const float *ps, const float *ape,
                       int ratio, int overlap, int groups, int hd, float *out);

/* ---------------------------------------------------------------------------
 * Lightning-indexer selection for a whole step (src/ops/cpu/index_select.c),
 * §4.6 and V4.1 §5.5.
 *
 * Per row m: q + m*nh*128 (bf16 heads), w + m*nh (fp32 head weights), the
 * key store kpages[m] (host table: row j at kpages[m][j / page_rows[m]] +
 * (j % page_rows[m]) * 128), nvis[m] visible keys of which the first kcap[m]
 * exist (the rest score 0) — host tables. score_j = di_index_scores of key
 * j for j < nvis[m]; with cand_in (restricted layer) only the keys of the
 * kept blocks cand_in[m*KB + i], i < ncand_in[m], are scored, the others
 * are -inf.
 * Candidate source (cand_out != NULL): with nb = ceil(nvis/bs) blocks of bs
 * keys, if nb <= KB the kept blocks are 0..nb-1; else block scores = max of
 * the block's scores, the newest visible key's block +inf, kept = the KB
 * best (di_topk_desc) sorted ascending; into cand_out[m*KB..], ncand_out[m].
 * Then topk[m*K..] = di_topk_desc(scores, nvis, K), count in ntopk[m],
 * sorted ascending when `sort_sel` (V4.1 keeps row order).
 * Scratch: iscore [nscratch][iscore_stride], bscore [nscratch][bscore_stride]
 * with nscratch >= the pool's thread count. */
typedef struct di_index_select_args {
    int M, nh;
    const uint16_t *q;
    const float *w;
    uint16_t **const *kpages;
    const int *page_rows;          /* [M] rows per page of kpages[m] */
    const int64_t *nvis, *kcap;
    const int *cand_in, *ncand_in; /* NULL: every key */
    int *cand_out, *ncand_out;     /* NULL: not a candidate source */
    int bs, KB;                    /* candidate block size, blocks kept */
    int K, sort_sel;
    int *topk, *ntopk;
    float *iscore;
    size_t iscore_stride;
    float *bscore;
    size_t bscore_stride;
    int nscratch;
} di_index_select_args;
void di_index_select(di_exec *x, const di_index_select_args *a);

/* ---------------------------------------------------------------------------
 * Batched MoE (src/ops/cpu/moe_route.c, src/ops/cpu/gemm_grouped.c), §4.7. */

/* Route M tokens: logits [M][E] fp32 (divided in place by temp when
 * temp != 1); fixed ids (hash layers) = tid2eid[tokens[m] * k ..] when
 * tid2eid != NULL; sel, w [M][k] = di_route. normalize == 0: w_i =
 * sqrt(softplus(l[sel_i])) * route_scale (libm expf/log1pf, as the V4.1
 * reference's unnormalised scores). */
void di_route_rows(di_exec *x, int M, float *logits, int E, float temp, const float *bias, const int32_t *tid2eid,
                   const int32_t *tokens, int k, float route_scale, float norm_eps, int normalize, int *sel, float *w);

/* The MoE router of M rows xn (bf16, stride ldx): exactly the op sequence
 * (di_route_gate_seq)
 *   di_gemm(x, M, xn, ldx, gate, 0, logits, NULL, E)   (fp32 logits [M][E], gate->n == E),
 *   di_route_rows(x, M, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps,
 *                 normalize, sel, w).
 * logits are written (divided by temp when temp != 1), as by the sequence. A
 * backend may fuse it (CUDA with batch_invariant == 0 at M <= 8: one launch;
 * the logits are the fast GEMV's fp32 sums, sel and w di_route_rows' on them). */
void di_route_gate(di_exec *x, int M, const uint16_t *xn, size_t ldx, const di_wmat *gate, float *logits, int E,
                   float temp, const float *bias, const int32_t *tid2eid, const int32_t *tokens, int k,
                   float route_scale, float norm_eps, int normalize, int *sel, float *w);
/* The unfused sequence of di_route_gate (backends call it for the shapes and
 * modes they do not fuse). */
void di_route_gate_seq(di_exec *x, int M, const uint16_t *xn, size_t ldx, const di_wmat *gate, float *logits, int E,
                       float temp, const float *bias, const int32_t *tid2eid, const int32_t *tokens, int k,
                       float route_scale, float norm_eps, int normalize, int *sel, float *w);

/* Counting sort of the M*k routing entries by expert: off[E+1] (exclusive
 * prefix of counts), rows[off[e] ..] = the entries m*k + slot routed to e in
 * increasing (m, slot); inv[m*k + slot] = the entry's index in rows. */
void di_moe_dispatch(di_exec *x, int M, int k, const int *sel, int E, int *off, int *rows, int *inv);

/* Gather the dispatched entries: xe[i] = xn[rows[i] / k] (bf16 rows of
 * width d), erw[i] = rw[rows[i]], for i < n = off[E]. n_max bounds n (the
 * launch shape: M*k). */
void di_moe_gather(di_exec *x, int n_max, const int *off, int E, const int *rows, int k, const uint16_t *xn,
                   size_t ldx, int d, const float *rw, uint16_t *xe, size_t lde, float *erw);

/* Grouped GEMMs over a dispatched list: for every expert e with rows
 * [off[e], off[e+1]) of A: C rows = di_gemm of them with W[e] (gemm2: with
 * W1[e] and W2[e], A quantised once per expert). W arrays: host arrays of
 * weights of one shape. */
void di_gemm_grouped(di_exec *x, int E, const di_wmat *W, const int *off, const uint16_t *A, size_t lda,
                     int act_block, uint16_t *C16, size_t ldc);
void di_gemm2_grouped(di_exec *x, int E, const di_wmat *W1, const di_wmat *W2, const int *off, const uint16_t *A,
                      size_t lda, int act_block, uint16_t *C1, uint16_t *C2, size_t ldc);

/* SwiGLU over the first off[E] rows (di_swiglu with per-row weights rw;
 * the row count is read on the device). */
void di_swiglu_n(di_exec *x, const int *off, int E, const uint16_t *gate, const uint16_t *up, size_t ld, int I,
                 float limit, const float *rw, uint16_t *out, size_t ldo);

/* Combine in the order of the CPU's expert loop: y[m] = 0, then for row m's
 * entries in increasing inv (increasing expert id, then slot),
 * y[m][j] += fp32(eo[inv][j]). y fp32 [M][d]. */
void di_moe_combine(di_exec *x, int M, int k, const int *inv, const uint16_t *eo, size_t ldo, int d, float *y);

/* The exchange plan of an expert-parallel MoE sub-layer in the replicated-router
 * layout (src/ops/cpu/ep_plan.c; model/moe_ep.h, dp = 1): every rank routes every
 * row, so every rank computes the same table from the device selections without a
 * host read, and the combine exchange moves byte counts fixed by M alone.
 * Entry i = m*k + s in increasing (row, slot), e = sel[i] (0 <= e < E <= 1024, k <= 64);
 *   j(i) = #{i' < i : sel[i'] == e}  (the entry's rank among e's entries),
 *   q(i) = #{t < k : (sel[m*k + t], t) < (e, s)}  (its place in the single-rank
 *          combine order of row m: increasing expert id, then slot; di_moe_combine).
 * Inputs: ncopies[e] in 1..maxc copies of expert e, copies[e*maxc + c] the rank of
 * copy c (c = 0: the owner); local[e] = e's slot among this rank's nloc resident
 * experts, -1 when not resident; rank / size: this rank of the group.
 * Writes (backend memory):
 *   exec[i]    = copies[e*maxc + j(i) % ncopies[e]]  (the executing rank);
 *   sel_loc[i] = local[e] when exec[i] == rank, else nloc ("not here");
 *   off [nloc+2], rows, inv [M*k] = di_moe_dispatch(M, k, sel_loc, nloc + 1, ...):
 *                this rank's grouped GEMMs run groups 0..nloc-1;
 *   pack[m*k + q(i)] = inv[i] when exec[i] == rank, else -1 (the combine send rows:
 *                the buffer to rank r is rows [a_r*k, b_r*k) of that layout);
 *   with this rank's slice of rows [a, b), a = floor(M*rank/size), b = floor(M*(rank+1)/size),
 *   Ms = b - a, and p(i) = (m - a)*k + q(i) for its entries:
 *   cinv[(m - a)*k + s] = p(i)   (di_moe_combine's positions of the slice),
 *   unpack[p(i)] = exec[i]*Ms*k + p(i)  (the received row of entry i: rank exec[i]'s
 *                buffer of Ms*k rows, at the entry's combine position);
 *   load[e] += #{i : sel[i] == e}  (int64 EPLB counters, accumulated),
 *   replica[0] += #{i : exec[i] == rank and j(i) % ncopies[e] != 0}.
 * Launch shapes depend on M, k, E and nloc only (a recorded step may hold it). */
typedef struct di_ep_plan_args {
    int M, k, E;
    const int *sel;                    /* [M*k] */
    const int *ncopies, *copies;       /* [E], [E][maxc] */
    int maxc;
    const int *local;                  /* [E] */
    int nloc, rank, size;
    int *exec, *sel_loc, *off, *rows, *inv, *pack; /* [M*k] (off [nloc+2]) */
    int *cinv, *unpack;                /* [Ms*k] */
    int64_t *load, *replica;           /* [E], [1] */
} di_ep_plan_args;
void di_ep_plan(di_exec *x, const di_ep_plan_args *a);

/* Row gather with holes: dst row j = src row idx[j] (bf16 rows of width d,
 * strides lds / ldd) for j < n with idx[j] >= 0; rows with idx[j] < 0 are left
 * untouched. src and dst must not overlap. */
void di_gather_rows_bf16(di_exec *x, int n, const int *idx, const uint16_t *src, size_t lds, int d, uint16_t *dst,
                         size_t ldd);

/* The routed experts and the tail of the MoE sub-layer in one op
 * (src/ops/cpu/moe_route.c): exactly
 *   di_moe_dispatch(M, k, sel, E, b->off, b->rows, b->inv);
 *   di_moe_gather(M * k, ..., xn, ldx, d, rw, b->xe, d, b->erw);
 *   di_gemm2_grouped(E, W1, W3, b->off, b->xe, d, act_block, b->g, b->u, I);
 *   di_swiglu_n(b->off, E, b->g, b->u, I, I, limit, b->erw, b->h, I);
 *   di_gemm_grouped(E, W2, b->off, b->h, I, act_block, b->eo, d);
 *   di_moe_combine(M, k, b->inv, b->eo, d, d, y);
 *   y[m] += fp32(shared[m]) when shared != NULL; out[m] = bf16(y[m]);
 * with I = W1[0].n, y fp32 [M][d], shared / out bf16 row stride ldo
 * (shared may alias out; neither may alias xn). b: scratch of the sequence
 * (M * k rows). A device backend may compute the same values another way
 * (CUDA fast mode, small M * k: no dispatch; h rows in b->h by (token,
 * slot), within the GEMM tolerance).
 * Concurrent lines (di_exec_branch): the op joins every line (di_exec_join)
 * before it reads `shared`, so `shared` may still be in flight on a side
 * line when it is called; the CUDA fast path runs its first launch (the
 * experts' w1 / w3) beside that line and joins before the second. */
typedef struct di_moe_bufs {
    int *off, *rows, *inv;             /* [E+1], [M*k], [M*k] */
    uint16_t *xe, *g, *u, *h, *eo;     /* [M*k][d], [M*k][I] x3, [M*k][d] */
    float *erw;                        /* [M*k] */
} di_moe_bufs;
void di_moe_routed(di_exec *x, int M, int k, const int *sel, const float *rw, int E, const di_wmat *W1,
                   const di_wmat *W3, const di_wmat *W2, const uint16_t *xn, size_t ldx, int d, int act_block,
                   float limit, const di_moe_bufs *b, const uint16_t *shared, float *y, uint16_t *out, size_t ldo);

/* ---------------------------------------------------------------------------
 * Small per-row helpers (src/ops/cpu/elem_model.c). */

/* v[i] = bf16(bf16(v[i]) * scale) (fp32 values; the indexer head weights). */
void di_scale_bf16_f32(di_exec *x, float *v, size_t n, float scale);

/* pre[m][0] = 1, pre[m][1..3] = 0 (the one-hot start of a V4.1 mHC chain). */
void di_hc_pre_onehot(di_exec *x, int M, float *pre);

/* Head mHC pre: pre[m][k] = sigmoid(mixes[m][k] * scale0 + base[k]) + eps
 * for k < hc (mixes [M][hc], pre [M][4]; sigmoid(z) = 1 / (1 + expf(-z))). */
void di_hc_head_pre(di_exec *x, int M, const float *mixes, int hc, float scale0, const float *base, float eps,
                    float *pre);

/* out[m][j] = bf16((sum_k fp32(R[m][k][j])) / hc), copies summed in order
 * (R [M][hc][d] bf16; out stride ldo). */
void di_hc_mean(di_exec *x, int M, const uint16_t *R, int hc, int d, uint16_t *out, size_t ldo);

/* R[m][k][j] = bf16(fp32(e[m][j]) + fp32(R[m][k][j])) for k < hc. */
void di_add_bcast_bf16(di_exec *x, int M, const uint16_t *e, int hc, int d, uint16_t *R);

/* Dequantising gather of Engram table rows: out[m][c*hd + j] =
 * bf16(e4m3(table[id][j]) * 2^(scale[id][j/32] - 127)) with id =
 * ids[m*ids_stride + c], for c < ncols (table [rows][hd] e4m3, scale
 * [rows][hd/32] e8m0). Ids were checked against the table by the host. */
void di_engram_gather_rows(di_exec *x, int M, const int64_t *ids, int64_t ids_stride, int ncols, const uint8_t *table,
                           const uint8_t *scale, int hd, uint16_t *out);

/* Engram hash ids of a step's M token rows on the ops (src/ops/cpu/engram_hash.c,
 * architecture.md §5.8), bitwise those of the host's di_engram_hash_ids
 * (src/model/engram_hash.c). Row m is token tokens[m] (backend memory) of
 * segment row_seg[m] at absolute position pos[m]; a segment's rows are
 * consecutive rows at consecutive positions from seg_pos0[s], seg_nrows[s]
 * of them (the step layout of src/model/forward.h). Per row:
 *   class(t)  = map[t] (backend memory, n_ids entries; a token outside
 *               [0, n_ids) gives DEAD, the host refuses such tokens before a step)
 *   src_s     = the class of position max(p - s, 0), s = 0..max_ngram-1: a row
 *               of the same segment when that position is >= seg_pos0, else
 *               ring[seg][position mod ring_len] (backend memory, int32; DEAD = -1)
 *   blocked  |= p < s || src_s == DEAD;  tok_s = blocked ? pad_class : src_s
 *   h = tok_0 * mult[0] (wrapping int64); for g >= 1: h ^= tok_g * mult[g];
 *   ids[(m * n_layers + l) * n_cols + (g-1) * n_heads + k] = (h mod prime) + offset
 *   (mod with the divisor's sign), n_cols = (max_ngram - 1) * n_heads.
 * consts (backend memory) holds per layer l, at l * (max_ngram + 2 * n_cols):
 * mult[max_ngram], prime[n_cols], offset[n_cols]. ids: backend memory.
 * After every row is hashed, each segment's ring receives the classes of its
 * last min(nrows, ring_len) rows at slot position mod ring_len (earlier rows
 * of a long prefill chunk would only be overwritten). Host tables: pos,
 * row_seg [M]; seg_pos0, seg_nrows, ring [segments]. */
void di_engram_hash_rows(di_exec *x, int M, const int32_t *tokens, const int32_t *map, int32_t n_ids,
                         const int64_t *consts, int n_layers, int max_ngram, int n_heads, int32_t pad_class,
                         const int64_t *pos, const int *row_seg, const int64_t *seg_pos0, const int *seg_nrows,
                         int32_t *const *ring, int ring_len, int64_t *ids);

/* Engram gating (src/ops/cpu/engram_gate.c, §5.8) of M tokens: token i's
 * wkv output kv + i*ldkv ((hc+1)*dim bf16: hc keys, then the value) gates
 * residual row t = rmap ? rmap[i] : i of R ([rows][hc][dim] bf16): per copy
 * k, h = fp32(R[t][k]); ms_h, ms_k = mean squares of h and key_k; rstd =
 * (1/sqrtf(ms_h + eps)) * (1/sqrtf(ms_k + eps)); dot = sum(h * qk[k] *
 * key_k) * rstd * dim^-1/2; g = sigmoid(sign(dot) sqrt(max(|dot|, 1e-6)));
 * R[t][k] = bf16(h + g * value). Sums: 8 interleaved fp32 partial sums in
 * index order, then ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)). gates (NULL or
 * [rows][hc]) receive g. Scratch kvf [(hc+1)*dim], h [dim] fp32. */
void di_engram_gate_rows(di_exec *x, int M, const int64_t *rmap, const uint16_t *kv, size_t ldkv, uint16_t *R,
                         const float *qk, int dim, int hc, float eps, float *kvf, float *h, float *gates);

#endif
