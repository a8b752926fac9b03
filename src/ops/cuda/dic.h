/*
 * dic.h — the CUDA backend's op interface (C ABI): "deepinfer CUDA".
 *
 * Every function here computes the op of the same name in src/ops/ops.h
 * (drop the `dic_` prefix; `di_` there) with the same arguments and the
 * same per-element formula, on device pointers, enqueued on ctx->stream.
 * Nothing here synchronises the stream, allocates device memory or reads
 * device memory from the host, so every op can be captured in a CUDA graph.
 * Where ops.h fixes a summation order the CUDA kernels keep it unless the
 * op's comment here says otherwise (GEMM: tensor-core accumulation order
 * inside each K block; results then match the CPU to rounding, not bitwise).
 *
 * Each op returns cudaSuccess or the launch error (cudaGetLastError after
 * the launch). One kernel family per .cu file (DESIGN.md §5):
 *   dic_gemm*.cu       FP8 / FP4 / BF16 / F32 weight GEMMs, activation quant
 *   dic_norm_rope.cu   RMSNorm, head RMSNorm, RoPE
 *   dic_qsim.cu        QAT simulations, Hadamard
 *   dic_attention.cu   sparse attention with sink
 *   dic_indexer.cu     index scores, top-k, compressor softmax pooling
 *   dic_mhc.cu         hyper-connections
 *   dic_moe.cu         router, expert dispatch/combine, SwiGLU
 *   dic_sample.cu      logits processing and sampling
 *   dic_elem.cu        element-wise helpers, embedding gather, row copies
 */
#ifndef DI_OPS_CUDA_DIC_H
#define DI_OPS_CUDA_DIC_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Call before enqueueing a copy or memset on a stream the kernels use: the
 * next kernel then launches without programmatic dependent launch (see
 * dic_common.cuh DIC_LAUNCH). */
void dic_pdl_disarm(void);
/* Timeline builds (-DDIC_STAMPS, dic_stamps.cu): around a step graph's replay number `replay`; no-ops in
 * the default build. */
void dic_stamps_before(cudaStream_t st, int replay);
void dic_stamps_after(cudaStream_t st, int replay);
/* The arm state itself (1: the next kernel may launch with PDL): the
 * concurrent lines (cu_lines.c) keep one per line, since a kernel may take a
 * programmatic edge from the previous kernel of its own stream only. */
int dic_pdl_armed(void);
void dic_pdl_set_armed(int armed);
/* 1 while several threads' contexts share a device's stream (ranks placed on one GPU, cu_exec.c):
 * every kernel then launches without PDL, since the arm state is a thread's while the stream's last
 * operation may be another thread's copy. */
void dic_pdl_set_shared(int shared);

/* Execution context: a stream and a device scratch buffer sized by the
 * caller (dic_*_scratch functions say how much an op needs). */
typedef struct dic_ctx {
    cudaStream_t stream;
    void *scratch;      /* device, 256-byte aligned */
    size_t scratch_cap;
    int num_sms;        /* multiprocessors of the device (grid sizing) */
    int batch_invariant; /* 1: every op computes a row's result in one order for
                          * every batch size (DESIGN.md §3, $DEEPINFER_BATCH_INVARIANT):
                          * a row's bits never depend on M or on the other rows.
                          * 0: ops may pick faster kernels by M whose bits differ
                          * between launch shapes (dic_gemm: FP8 prefill, M > 64,
                          * on the wgmma kernel). Still deterministic per shape. */
    /* Concurrent lines (cu_lines.c): an op whose later launch reads a value
     * computed on a side line calls join(join_arg) right before that launch,
     * so its earlier launches overlap the side line (dic_moe_routed_dec: the
     * up kernel runs beside the shared expert; the down kernel adds `shared`).
     * NULL: nothing to join (benches, tests, eager steps). */
    void (*join)(void *join_arg);
    void *join_arg;
} dic_ctx;

/* A weight matrix W [N, K] on the device in its released format (ops.h
 * di_wmat for the formats): `w` = bf16 / f32 / e4m3 row-major [N][K], or
 * packed e2m1 [N][K/2] (low nibble = even k); `scale` = e8m0 bytes,
 * [ceil(N/B)][K/B] for FP8 and FP8B (B = wblock), [N][K/32] for FP4, NULL
 * else. FP8B (DIC_WFMT_FP8B): FP8 storage, BF16 math — the bytes and scales
 * of FP8, but the weight is the BF16 matrix bf16(e4m3 * 2^(s-127)) (exact;
 * ops.h di_wmat raw_fp8_block): every BF16 kernel reads the e4m3 bytes and
 * dequantises in registers, its outputs bitwise those of the BF16 matrix
 * (wblock a multiple of 16 dividing K); except fast-mode dic_gemm_blockdiag,
 * whose FP8B kernels of their own (dic_gemm_int.h: the GEMV at M <= 4, the
 * tensor-core kernel above) keep the GEMM tolerance, not those bits. */
#define DIC_WFMT_FP8B 4
typedef struct dic_wmat {
    int fmt;            /* di_wfmt: 0 BF16, 1 F32, 2 FP8, 3 FP4; 4 FP8B */
    int n, k;
    int wblock;
    const void *w;
    const uint8_t *scale;
} dic_wmat;

/* ---------------------------------------------------------------------------
 * GEMM (ops.h di_gemm): C = A W^T with the reference's per-row activation
 * quantisation for FP8/FP4 weights. A bf16 [M][lda]; exactly one of C32
 * (fp32) and C16 (bf16) non-NULL. Scratch: dic_gemm_scratch(M, W->n, W->k)
 * (grouped: dic_gemm_scratch(max_rows, N, K)).
 * FP8 / FP4 with c->batch_invariant: a row's result does not depend on M or
 * on the other rows: the f16 HMMA kernels (dic_gemm_f16.cu k_gemm_dec at
 * M <= 8, k_gemm_f16 above) with the split-K of dic_gemm_dec_splits (N, K,
 * SM count) at every M, plain and grouped (docs/determinism.md §7); within
 * the GEMM tolerance of di_gemm, not its bits. Without it the same kernels
 * and bits for FP8 M <= 64 and FP4 at every M; FP8 with M > 64 on a 9.x
 * device runs on wgmma (still independent of the other rows, other bits:
 * wgmma keeps fewer bits of the e4m3 block sums, ~1e-4 norm-wise), and
 * dic_gemm_grouped sizes its split by the launch (bits that depend on the
 * experts' row counts). */
size_t dic_gemm_scratch(int M, int N, int K);
cudaError_t dic_gemm(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int act_block,
                     float *C32, uint16_t *C16, size_t ldc);

/* Block-diagonal GEMM (ops.h di_gemm_blockdiag): group g's columns
 * [g*W[g].n, (g+1)*W[g].n) of C from A's columns [g*gk, g*gk + gk) times
 * W[g]^T (W: host array of G device weights). One launch for BF16/F32
 * groups in fast mode; else one dic_gemm per group (mode 1: the CPU's bits). */
cudaError_t dic_gemm_blockdiag(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int G, const dic_wmat *W, int gk,
                               int act_block, float *C32, uint16_t *C16, size_t ldc);

/* Grouped GEMM for routed experts (FP4 or FP8 weights, all of one shape):
 * for every expert e < E, rows A[rows[off[e] .. off[e+1])] times W[e]^T into
 * C at the same rows. `off` [E+1] and `rows` live on the device (written by
 * dic_moe_dispatch), so the launch shape never depends on the routing:
 * max_rows bounds off[E]. With c->batch_invariant each row equals dic_gemm's
 * on that row alone, whatever E, max_rows and the other experts' rows. */
cudaError_t dic_gemm_grouped(const dic_ctx *c, int E, const dic_wmat *W /* [E], host array of device pointers */,
                             const int *off, const int *rows, int max_rows, const uint16_t *A, size_t lda,
                             int act_block, uint16_t *C16, size_t ldc);


/* ---------------------------------------------------------------------------
 * Norms and RoPE (ops.h). cs, sn: the RoPE table [M][rd/2] on the device. */
cudaError_t dic_rmsnorm(const dic_ctx *c, int M, const uint16_t *in, size_t ldx, const float *w, int D, float eps,
                        uint16_t *out, size_t ldy);
cudaError_t dic_head_rmsnorm_bf16(const dic_ctx *c, int M, uint16_t *q, size_t ld, int nheads, int hd, float eps);
cudaError_t dic_rope_table(const dic_ctx *c, int M, const int64_t *pos, const float *inv_freq, int rd, float *cs,
                           float *sn);
cudaError_t dic_rope_tab(const dic_ctx *c, int M, uint16_t *v, size_t ld, int nheads, int hd, int rd, const float *cs,
                         const float *sn, int inverse);

/* ---------------------------------------------------------------------------
 * Quantisation simulations and Hadamard (ops.h). */
cudaError_t dic_qat_fp8(const dic_ctx *c, int M, uint16_t *v, size_t ld, int n, int blk);
cudaError_t dic_qat_fp4(const dic_ctx *c, int M, uint16_t *v, size_t ld, int n, int blk);
cudaError_t dic_qat_fp4_e4m3(const dic_ctx *c, int M, uint16_t *v, size_t ld, int n, int blk);
cudaError_t dic_hadamard128(const dic_ctx *c, int M, uint16_t *v, size_t ld, int nvec);

/* ---------------------------------------------------------------------------
 * Sparse attention with sink (ops.h di_sparse_attn). kv is a device array
 * of device pointers, kv[m * kv_stride + i]; n_idx on the device.
 * With c->scratch_cap >= dic_sparse_attn_scratch(M, nheads, kv_stride) it
 * runs as three launches (logits, softmax bookkeeping, P.V) spread over
 * the whole GPU; n_idx[m] <= kv_stride is then required (entries past
 * kv_stride are ignored; kv_stride up to ~50K). With less scratch, one fused kernel (slower at
 * small batches). Both return di_sparse_attn's bits. */
size_t dic_sparse_attn_scratch(int M, int nheads, int max_entries);
cudaError_t dic_sparse_attn(const dic_ctx *c, int M, const uint16_t *q, size_t ldq, int nheads, int hd,
                            const uint16_t *const *kv, size_t kv_stride, const int *n_idx, const float *sink,
                            float scale, uint16_t *out, size_t ldo);

/* ---------------------------------------------------------------------------
 * Indexer and compressor pooling, batched over rows (ops.h di_index_scores,
 * di_topk_desc, di_softmax_pool applied per row). */

/* score[m][j] for rows m < M and keys j < n_keys[m] (row m's keys start at
 * k + key0[m] * ldk); q [M][nh*128] stride ldq; w [M][nh] fp32. Scores for
 * j >= n_keys[m] up to max_keys are written as -inf. */
cudaError_t dic_index_scores(const dic_ctx *c, int M, const uint16_t *q, size_t ldq, int nh, const float *w,
                             const uint16_t *k, size_t ldk, const int64_t *key0, const int *n_keys, int max_keys,
                             float *score, size_t lds);
/* Per row: the k largest of score[m][0..n[m]) in decreasing order, ties to
 * the lower index; idx [M][k]; count[m] = min(k, n[m]). */
cudaError_t dic_topk_desc(const dic_ctx *c, int M, const float *score, size_t lds, const int *n, int k, int *idx,
                          int *count);
/* G pools: out[g][d] = di_softmax_pool over kv[g] / score[g] (S slots,
 * stride ld within a pool, pool stride gstride). */
cudaError_t dic_softmax_pool(const dic_ctx *c, int G, const float *kv, const float *score, size_t ld, size_t gstride,
                             int S, int D, float *out, size_t ldo);

/* ---------------------------------------------------------------------------
 * Hyper-connections (ops.h), M rows. */
cudaError_t dic_hc_scale_mixes(const dic_ctx *c, int M, const uint16_t *R, size_t ldr, int hcd, float eps,
                               const float *mixes_in, int nmix, float *mixes_out);
cudaError_t dic_hc_sinkhorn_rows(const dic_ctx *c, int M, const float *mixes, const float *scale3, const float *base,
                                 int iters, float eps, float *pre, float *post, float *comb);
cudaError_t dic_hc_collapse(const dic_ctx *c, int M, const float *pre, const uint16_t *R, size_t ldr, int d,
                            uint16_t *y, size_t ldy);
cudaError_t dic_hc_expand(const dic_ctx *c, int M, const float *post, const float *comb, const uint16_t *f,
                          size_t ldf, const uint16_t *R, uint16_t *Rout, size_t ldr, int d);

/* ---------------------------------------------------------------------------
 * MoE (ops.h di_route, di_swiglu). */

/* Route M tokens: logits [M][E] fp32; fixed [M][k] or NULL; sel, w [M][k]. */
cudaError_t dic_route(const dic_ctx *c, int M, const float *logits, int E, const float *bias, const int *fixed, int k,
                      float route_scale, float norm_eps, int *sel, float *w);
/* Expert dispatch: from sel [M][k], off [E+1] (exclusive prefix of counts)
 * and rows [M*k] = for each expert, the (token*k + slot) entries routed to
 * it in increasing token order; deterministic. */
cudaError_t dic_moe_dispatch(const dic_ctx *c, int M, int k, const int *sel, int E, int *off, int *rows);
cudaError_t dic_swiglu(const dic_ctx *c, int M, const uint16_t *gate, const uint16_t *up, size_t ld, int I,
                       float limit, const float *rw, uint16_t *out, size_t ldo);
/* Expert combine (moe.c di_moe_block's sum): out[m] = bf16(fp32 sum of
 * eo[m*k + s] over the slots s with 0 <= sel[m][s] < E, added in increasing
 * (expert id, slot) order starting from +0.0f, then + shared[m] if shared is
 * non-NULL). eo: the expert outputs (bf16, stride lde) at the entry rows
 * that dic_moe_dispatch lists (token * k + slot), the routing weight already
 * applied by dic_swiglu's rw; shared: the shared expert's bf16 output [M][lds]. */
cudaError_t dic_moe_combine(const dic_ctx *c, int M, int k, const int *sel, int E, const uint16_t *eo, size_t lde,
                            const uint16_t *shared, size_t lds, int d, uint16_t *out, size_t ldo);

/* ---------------------------------------------------------------------------
 * Element-wise helpers (ops.h) and data movement. */
cudaError_t dic_add_bf16_f32(const dic_ctx *c, float *y, const uint16_t *v, size_t n);
cudaError_t dic_add_f32(const dic_ctx *c, float *out, const float *a, const float *b, size_t n);
cudaError_t dic_f32_to_bf16_n(const dic_ctx *c, const float *x, uint16_t *y, size_t n);
/* out[m] = table[ids[m]] (rows of `width` bf16 values). */
/* dic_embed_rep: the row `copies` times side by side (ops.h di_embed_rep). */
cudaError_t dic_embed_rep(const dic_ctx *c, int M, const int32_t *ids, const uint16_t *table, int width, int copies,
                          uint16_t *out, size_t ldo);
cudaError_t dic_embed(const dic_ctx *c, int M, const int32_t *ids, const uint16_t *table, int width, uint16_t *out,
                      size_t ldo);

/* ---------------------------------------------------------------------------
 * Sampling: greedy argmax per row (ties to the lowest id), logits fp32
 * [M][V] stride ld. */
cudaError_t dic_argmax(const dic_ctx *c, int M, const float *logits, size_t ld, int V, int32_t *ids);
/* The next step's input tokens (the engine's device queue): out[r] = prev[src[r]] (0 where that id is
 * negative: no token was sampled) when src[r] >= 0, else tokens[r]; `tok_src` holds tokens[0..n) then
 * src[0..n) (device). */
cudaError_t dic_feed_tokens(const dic_ctx *c, int n, const int32_t *tok_src, const int32_t *prev, int32_t *out);

/* Full sampling on the device: ids[m] = the token src/engine/sampler.c
 * di_sample_row picks for row m (same penalties, masks, temperature, min_p,
 * top_k, top_p and Philox Gumbel noise). One struct per row, in device
 * memory; its pointers are device pointers. ids[m] = -1 where the CPU
 * reports "no token can be sampled". Scratch: dic_sample_rows_scratch(M, V).
 * top_p: the candidates' total mass is summed in a fixed tree order (the CPU
 * sums by ascending id), so the kept set can differ from the CPU's only when
 * a cumulative mass falls within ~1e-12 relative of top_p * total. */
typedef struct dic_sample_params {
    float temperature;        /* 0 = greedy */
    int32_t top_k;            /* <= 0: off */
    float top_p;              /* 1: off */
    float min_p;              /* 0: off */
    double log_min_p;         /* host-computed log((double)min_p) with the CPU's libm (bit parity) */
    float repetition_penalty; /* 1: off */
    float presence_penalty, frequency_penalty;
    int32_t min_tokens;       /* eos_id and stop_ids masked while n_output < min_tokens */
    int32_t eos_id;           /* -1: none */
    int32_t n_stop_ids;
    const int32_t *stop_ids;  /* [n_stop_ids] */
    const int32_t *prompt_ids; /* [n_prompt], repetition penalty */
    int32_t n_prompt;
    int32_t n_output;
    const int32_t *output_ids; /* [n_output] */
    const uint32_t *allow_mask; /* bit v = id v allowed, or NULL */
    uint64_t seed;
    uint64_t position;
    uint32_t stream;          /* choice index */
    uint32_t purpose;         /* DI_NOISE_* */
} dic_sample_params;
size_t dic_sample_rows_scratch(int M, int V);
cudaError_t dic_sample_rows(const dic_ctx *c, int M, const float *logits, size_t ld, int V,
                            const dic_sample_params *params, int32_t *ids);
/* dic_sample_rows for a launch whose rows all have temperature 0, repetition_penalty 1 and
 * presence / frequency penalties 0 (the caller checks its host copy of the params): the same ids
 * by a small kernel (the greedy pass alone); no scratch. Other rows: not supported. */
cudaError_t dic_sample_rows_greedy(const dic_ctx *c, int M, const float *logits, size_t ld, int V,
                                   const dic_sample_params *params, int32_t *ids);

#ifdef __cplusplus
}
#endif
#endif
