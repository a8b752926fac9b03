/*
 * dic_indexer.cu — lightning-indexer scores and top-k, compressor softmax
 * pooling (ops.h di_index_scores, di_topk_desc, di_softmax_pool, batched;
 * architecture.md §4.5, §4.6, §3.7), bit-identical to src/ops/cpu/select.c.
 */
#include "ops/cuda/dic_common.cuh"

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
    const uint16_t *kj = k + (size_t)(key0[m] + j) * ldk;
    float kv[128];
    if (((uintptr_t)kj & 15) == 0) { /* 16-byte loads */
#pragma unroll
        for (int i = 0; i < 128; i += 8) {
            uint4 u = *(const uint4 *)(kj + i);
            uint32_t w4[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                kv[i + 2 * e] = __uint_as_float(w4[e] << 16);
                kv[i + 2 * e + 1] = __uint_as_float(w4[e] & 0xFFFF0000u);
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < 128; i += 2) {
            uint32_t u = (uint32_t)kj[i] | ((uint32_t)kj[i + 1] << 16);
            kv[i] = __uint_as_float(u << 16);
            kv[i + 1] = __uint_as_float(u & 0xFFFF0000u);
        }
    }
    float s = 0.0f;
    for (int h = 0; h < nh; h++) {
        const float4 *qh = qs4 + h * 32;
        float lane[16];
#pragma unroll
        for (int l = 0; l < 16; l++) lane[l] = 0.0f;
#pragma unroll
        for (int st = 0; st < 4; st++) {
#pragma unroll
            for (int c4 = 0; c4 < 8; c4++) { /* values 32st + 4c4 .. +3: pairs of lanes 2c4, 2c4+1 */
                float4 qq = qh[st * 8 + c4];
                int b = 32 * st + 4 * c4;
                lane[2 * c4] = fmaf(qq.y, kv[b + 1], lane[2 * c4]);
                lane[2 * c4] = fmaf(qq.x, kv[b], lane[2 * c4]);
                lane[2 * c4 + 1] = fmaf(qq.w, kv[b + 3], lane[2 * c4 + 1]);
                lane[2 * c4 + 1] = fmaf(qq.z, kv[b + 2], lane[2 * c4 + 1]);
            }
        }
#pragma unroll
        for (int wd = 8; wd >= 1; wd /= 2)
#pragma unroll
            for (int l = 0; l < wd; l++) lane[l] = __fadd_rn(lane[l], lane[l + wd]);
        float d = dic_round_bf16(lane[0]);
        if (d < 0.0f) d = 0.0f;
        s = __fadd_rn(s, dic_round_bf16(__fmul_rn(d, w[(size_t)m * nh + h])));
    }
    out[j] = dic_round_bf16(s);
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
    k_index_scores<<<grid, IDX_THREADS, smem, c->stream>>>(q, ldq, nh, w, k, ldk, key0, n_keys, max_keys, score, lds);
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
#define TOPK_THREADS 1024
#define TOPK_MAX 4096

static __device__ __forceinline__ uint32_t topk_key(float f) {
    if (f != f) return 0u;
    uint32_t u = __float_as_uint(f);
    if (u == 0x80000000u) u = 0u;
    return (u >> 31) ? ~u : (u | 0x80000000u);
}

static __global__ void __launch_bounds__(TOPK_THREADS) k_topk(const float *score, size_t lds, const int *nrow, int k,
                                                              int *idx, int *count) {
    __shared__ unsigned long long buf[TOPK_MAX];
    __shared__ int hist[256];
    __shared__ uint32_t prefix_sh;
    __shared__ int kk_sh;
    __shared__ int wsum[TOPK_THREADS / 32][2];
    __shared__ int base_sh[2];
    int m = blockIdx.x, tid = threadIdx.x;
    const float *s = score + (size_t)m * lds;
    int n = nrow[m];
    if (n < 0) n = 0;
    int cnt = k < n ? k : n;
    int *out = idx + (size_t)m * k;
    if (cnt <= 0) {
        for (int i = tid; i < k; i += TOPK_THREADS) out[i] = -1;
        if (tid == 0) count[m] = 0;
        return;
    }
    if (tid == 0) {
        prefix_sh = 0u;
        kk_sh = cnt;
    }
    /* radix select: after pass p the top 8(p+1) bits of T are known */
    for (int p = 0; p < 4; p++) {
        int shift = 24 - 8 * p;
        for (int i = tid; i < 256; i += TOPK_THREADS) hist[i] = 0;
        __syncthreads();
        uint32_t prefix = prefix_sh;
        uint32_t hmask = p == 0 ? 0u : (0xFFFFFFFFu << (shift + 8));
        for (int i = tid; i < n; i += TOPK_THREADS) {
            uint32_t key = topk_key(s[i]);
            if ((key & hmask) == prefix) atomicAdd(&hist[(key >> shift) & 255], 1);
        }
        __syncthreads();
        if (tid == 0) {
            int kk = kk_sh, above = 0, d = 255;
            for (; d > 0; d--) {
                if (above + hist[d] >= kk) break;
                above += hist[d];
            }
            kk_sh = kk - above;
            prefix_sh = prefix | ((uint32_t)d << shift);
        }
        __syncthreads();
    }
    uint32_t T = prefix_sh;
    int need_eq = kk_sh, n_gt = cnt - need_eq;
    /* ordered compaction of the elements > T and the first need_eq == T */
    if (tid == 0) {
        base_sh[0] = 0;
        base_sh[1] = 0;
    }
    __syncthreads();
    int lane = tid & 31, wid = tid >> 5;
    for (int i0 = 0; i0 < n; i0 += TOPK_THREADS) {
        int i = i0 + tid;
        uint32_t key = i < n ? topk_key(s[i]) : 0u;
        int gt = i < n && key > T, eq = i < n && key == T;
        unsigned bg = __ballot_sync(0xFFFFFFFFu, gt), be = __ballot_sync(0xFFFFFFFFu, eq);
        if (lane == 0) {
            wsum[wid][0] = __popc(bg);
            wsum[wid][1] = __popc(be);
        }
        __syncthreads();
        int pg = base_sh[0], pe = base_sh[1];
        for (int w2 = 0; w2 < wid; w2++) {
            pg += wsum[w2][0];
            pe += wsum[w2][1];
        }
        unsigned lt = (1u << lane) - 1u;
        pg += __popc(bg & lt);
        pe += __popc(be & lt);
        unsigned long long v = ((unsigned long long)key << 32) | (unsigned long long)(0xFFFFFFFFu - (uint32_t)i);
        if (gt) buf[pg] = v;
        if (eq && pe < need_eq) buf[n_gt + pe] = v;
        __syncthreads();
        if (tid == 0) {
            int tg = 0, te = 0;
            for (int w2 = 0; w2 < TOPK_THREADS / 32; w2++) {
                tg += wsum[w2][0];
                te += wsum[w2][1];
            }
            base_sh[0] += tg;
            base_sh[1] += te;
        }
        __syncthreads();
        if (base_sh[1] >= need_eq && i0 + TOPK_THREADS < n) {
            /* all ties taken; the elements > T may still follow: keep going
             * only while some are missing */
            if (base_sh[0] >= n_gt) break;
        }
    }
    int P = 1;
    while (P < cnt) P <<= 1;
    for (int i = cnt + tid; i < P; i += TOPK_THREADS) buf[i] = 0ull; /* below every real value */
    __syncthreads();
    /* bitonic sort, descending */
    for (int size = 2; size <= P; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = tid; i < P / 2; i += TOPK_THREADS) {
                int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
                int desc = (lo & size) == 0;
                unsigned long long a = buf[lo], b = buf[hi];
                if ((a < b) == desc) {
                    buf[lo] = b;
                    buf[hi] = a;
                }
            }
            __syncthreads();
        }
    for (int i = tid; i < k; i += TOPK_THREADS)
        out[i] = i < cnt ? (int)(0xFFFFFFFFu - (uint32_t)(buf[i] & 0xFFFFFFFFull)) : -1;
    if (tid == 0) count[m] = cnt;
}

extern "C" cudaError_t dic_topk_desc(const dic_ctx *c, int M, const float *score, size_t lds, const int *n, int k,
                                     int *idx, int *count) {
    if (M <= 0) return cudaSuccess;
    if (k <= 0 || k > TOPK_MAX) return cudaErrorInvalidValue;
    k_topk<<<M, TOPK_THREADS, 0, c->stream>>>(score, lds, n, k, idx, count);
    DIC_LAUNCH_CHECK();
}

/* ---------------------------------------------------------------------------
 * Softmax pooling: one thread per (pool, channel) runs select.c's loops
 * (max, exp and sequential sum, then sum of kv * (e / sum) in slot order);
 * the exponentials are recomputed in the last loop (same bits). */
static __global__ void k_softmax_pool(int G, const float *kv, const float *score, size_t ld, size_t gstride, int S,
                                      int D, float *out, size_t ldo) {
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
    k_softmax_pool<<<(unsigned)((n + 127) / 128), 128, 0, c->stream>>>(G, kv, score, ld, gstride, S, D, out, ldo);
    DIC_LAUNCH_CHECK();
}
