/*
 * dic_indexer.cu — lightning-indexer scores and top-k, compressor softmax
 * pooling (ops.h di_index_scores, di_topk_desc, di_softmax_pool, batched;
 * docs/architecture.md §4.5, §4.6, §3.7), bit-identical to src/ops/cpu/select.c.
 */
#include "ops/cuda/dic_index_int.cuh"

/* ---------------------------------------------------------------------------
 * Index scores. score_j = bf16(sum_h bf16(relu(bf16(q_h . k_j)) * w_h)),
 * heads in order. The dot products follow vec.h di_vdot_bf16: lane l of 16
 * accumulates the pairs (32s + 2l + 1, 32s + 2l), odd element first, then
 * l += l+8, +4, +2, +1. A bf16 x bf16 product is exact in fp32, so
 * fmaf(q, k, acc) rounds exactly as acc + q*k (the CPU's VDPBF16PS step).
 * One thread per key keeps its 128 values in registers (as fp32); the
 * row's q sits in shared memory as fp32 and every thread reads the same
 * address (broadcast). */
#define IDX_THREADS 64

static __global__ void __launch_bounds__(IDX_THREADS) k_index_scores(const uint16_t *q, size_t ldq, int nh,
                                                                      const float *w, const uint16_t *k, size_t ldk,
                                                                      const int64_t *key0, const int *n_keys,
                                                                      int max_keys, float *score, size_t lds) {
    DIC_PDL_ENTER();
    extern __shared__ float4 qs4[]; /* [nh][32] float4 = [nh][128] fp32 */
    float *qs = (float *)qs4;
    int m = blockIdx.y;
    int j = blockIdx.x * IDX_THREADS + threadIdx.x;
    int nk = n_keys[m];
    float *out = score + (size_t)m * lds;
    if ((int)(blockIdx.x * IDX_THREADS) >= nk) { /* whole tile past the row's keys */
        if (j < max_keys) out[j] = -INFINITY;
        return;
    }
    const uint16_t *qm = q + (size_t)m * ldq;
    for (int i = threadIdx.x; i < nh * 128; i += IDX_THREADS) qs[i] = dic_bf16_to_f32(qm[i]);
    __syncthreads();
    if (j >= max_keys) return;
    if (j >= nk) {
        out[j] = -INFINITY;
        return;
    }
    out[j] = dic_idx_score(qs4, nh, w + (size_t)m * nh, k + (size_t)(key0[m] + j) * ldk);
}

extern "C" cudaError_t dic_index_scores(const dic_ctx *c, int M, const uint16_t *q, size_t ldq, int nh, const float *w,
                                        const uint16_t *k, size_t ldk, const int64_t *key0, const int *n_keys,
                                        int max_keys, float *score, size_t lds) {
    if (M <= 0 || max_keys <= 0) return cudaSuccess;
    size_t smem = (size_t)nh * 128 * sizeof(float);
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(k_index_scores, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    dim3 grid((unsigned)((max_keys + IDX_THREADS - 1) / IDX_THREADS), (unsigned)M);
    DIC_LAUNCH(k_index_scores, grid, IDX_THREADS, smem, c->stream, q, ldq, nh, w, k, ldk, key0, n_keys, max_keys, score, lds);
    DIC_LAUNCH_CHECK();
}

/* ---------------------------------------------------------------------------
 * Top-k. select.c ranks by a total order: higher score first, ties to the
 * lower index, NaN last (-0 == +0), so the selection and its order are
 * unique and any algorithm that respects the order returns the CPU's
 * indices. Per row (one CTA): scores map to 32-bit keys monotone in that
 * order (NaN -> 0, -0 -> +0); an MSB-first radix select (4 passes of 8
 * bits) finds the key T of the cnt-th element; the elements above T and the
 * first (lowest-index) ones equal to T are compacted, then bitonic-sorted
 * as 64-bit (key, ~index) values, descending. */
static __global__ void __launch_bounds__(TOPK_THREADS) k_topk(const float *score, size_t lds, const int *nrow, int k,
                                                              int *idx, int *count) {
    DIC_PDL_ENTER();
    const int m = blockIdx.x;
    dic_topk_row(score + (size_t)m * lds, nrow[m], k, idx + (size_t)m * k, count + m, 0);
}

extern "C" cudaError_t dic_topk_desc(const dic_ctx *c, int M, const float *score, size_t lds, const int *n, int k,
                                     int *idx, int *count) {
    if (M <= 0) return cudaSuccess;
    if (k <= 0 || k > TOPK_MAX) return cudaErrorInvalidValue;
    DIC_LAUNCH(k_topk, M, TOPK_THREADS, 0, c->stream, score, lds, n, k, idx, count);
    DIC_LAUNCH_CHECK();
}

/* ---------------------------------------------------------------------------
 * Softmax pooling: one thread per (pool, channel) runs select.c's loops
 * (max, exp and sequential sum, then sum of kv * (e / sum) in slot order);
 * the exponentials are recomputed in the last loop (same bits). */
static __global__ void k_softmax_pool(int G, const float *kv, const float *score, size_t ld, size_t gstride, int S,
                                      int D, float *out, size_t ldo) {
    DIC_PDL_ENTER();
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)G * D) return;
    int g = (int)(t / D), d = (int)(t % D);
    const float *sc = score + (size_t)g * gstride + d, *kc = kv + (size_t)g * gstride + d;
    float mx = -INFINITY;
    for (int s = 0; s < S; s++) mx = fmaxf(mx, sc[(size_t)s * ld]);
    float sum = 0.0f;
    for (int s = 0; s < S; s++) sum = __fadd_rn(sum, dic_expf(__fsub_rn(sc[(size_t)s * ld], mx)));
    float acc = 0.0f;
    for (int s = 0; s < S; s++) {
        float e = dic_expf(__fsub_rn(sc[(size_t)s * ld], mx));
        acc = __fadd_rn(acc, __fmul_rn(kc[(size_t)s * ld], __fdiv_rn(e, sum)));
    }
    out[(size_t)g * ldo + d] = acc;
}

extern "C" cudaError_t dic_softmax_pool(const dic_ctx *c, int G, const float *kv, const float *score, size_t ld,
                                        size_t gstride, int S, int D, float *out, size_t ldo) {
    long long n = (long long)G * D;
    if (n <= 0) return cudaSuccess;
    DIC_LAUNCH(k_softmax_pool, (unsigned)((n + 127) / 128), 128, 0, c->stream, G, kv, score, ld, gstride, S, D, out, ldo);
    DIC_LAUNCH_CHECK();
}
