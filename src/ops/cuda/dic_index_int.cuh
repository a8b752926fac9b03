/*
 * dic_index_int.cuh — device internals shared by dic_indexer.cu
 * (dic_index_scores, dic_topk_desc) and dic_index_select.cu: the score of one
 * key against a row's query held in shared memory, and one CTA's top-k of a
 * score row. Moved here unchanged from dic_indexer.cu (same bits).
 */
#ifndef DI_OPS_CUDA_DIC_INDEX_INT_CUH
#define DI_OPS_CUDA_DIC_INDEX_INT_CUH

#include "ops/cuda/dic_common.cuh"

/* Index score of the key kj (128 bf16) against the row's query: qs4 = the
 * row's nh x 128 query values as fp32 in shared memory, w = the row's nh
 * weights. score = bf16(sum_h bf16(relu(bf16(q_h . k)) * w_h)), heads in
 * order; the dot product in di_vdot_bf16's lane order (dic_indexer.cu). */
/* The key's 128 bf16 values as fp32 (kv[128]). */
/* The same for a 16-byte aligned key (global or shared memory): 16-byte loads. */
static __device__ __forceinline__ void dic_idx_key_a16(const uint16_t *kj, float kv[128]) {
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
}
static __device__ __forceinline__ void dic_idx_key(const uint16_t *kj, float kv[128]) {
    if (((uintptr_t)kj & 15) == 0) { /* 16-byte loads */
        dic_idx_key_a16(kj, kv);
    } else {
#pragma unroll
        for (int i = 0; i < 128; i += 2) {
            uint32_t u = (uint32_t)kj[i] | ((uint32_t)kj[i + 1] << 16);
            kv[i] = __uint_as_float(u << 16);
            kv[i + 1] = __uint_as_float(u & 0xFFFF0000u);
        }
    }
}

/* Head h's term of the score: bf16(relu(bf16(q_h . k)) * w_h), the dot in
 * di_vdot_bf16's lane order (qh: the head's 128 query values, fp32). */
static __device__ __forceinline__ float dic_idx_head(const float4 *qh, const float kv[128], float wh) {
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
    return dic_round_bf16(__fmul_rn(d, wh));
}

/* Index score of the key kj (128 bf16) against the row's query: qs4 = the
 * row's nh x 128 query values as fp32 in shared memory, w = the row's nh
 * weights. score = bf16(sum_h bf16(relu(bf16(q_h . k)) * w_h)), heads in
 * order; the dot product in di_vdot_bf16's lane order (dic_indexer.cu). */
static __device__ __forceinline__ float dic_idx_score(const float4 *qs4, int nh, const float *w, const uint16_t *kj) {
    float kv[128];
    dic_idx_key(kj, kv);
    float s = 0.0f;
    for (int h = 0; h < nh; h++) s = __fadd_rn(s, dic_idx_head(qs4 + h * 32, kv, w[h]));
    return dic_round_bf16(s);
}

/* Top-k of one score row by the whole CTA (blockDim.x == TOPK_THREADS):
 * out[0..k) = the cnt = min(k, n) best indices in decreasing order (ties to
 * the lower index, NaN last; dic_indexer.cu), or with sort_idx the same set
 * in increasing index; out[cnt..k) = -1; *count = cnt (count may be NULL).
 * Returns cnt (uniform). Uses ~45 KB of static shared memory. */
#define TOPK_THREADS 1024
#define TOPK_MAX 4096

static __device__ __forceinline__ uint32_t topk_key(float f) {
    if (f != f) return 0u;
    uint32_t u = __float_as_uint(f);
    if (u == 0x80000000u) u = 0u;
    return (u >> 31) ? ~u : (u | 0x80000000u);
}

static __device__ int dic_topk_row(const float *s, int n, int k, int *out, int *count, int sort_idx) {
    __shared__ unsigned long long buf[TOPK_MAX];
    __shared__ int hist[256];
    __shared__ uint32_t prefix_sh;
    __shared__ int kk_sh;
    __shared__ int wsum[TOPK_THREADS / 32][2];
    __shared__ int base_sh[2];
    const int tid = threadIdx.x;
    if (n < 0) n = 0;
    const int cnt = k < n ? k : n;
    __syncthreads(); /* a previous call's readers of the shared state are done */
    if (cnt <= 0) {
        for (int i = tid; i < k; i += TOPK_THREADS) out[i] = -1;
        if (tid == 0 && count) *count = 0;
        return 0;
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
    if (sort_idx) { /* the selection in increasing index instead */
        for (int i = tid; i < P; i += TOPK_THREADS)
            buf[i] = i < cnt ? (unsigned long long)(0xFFFFFFFFu - (uint32_t)(buf[i] & 0xFFFFFFFFull)) : ~0ull;
        __syncthreads();
        for (int size = 2; size <= P; size <<= 1)
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                for (int i = tid; i < P / 2; i += TOPK_THREADS) {
                    int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
                    int asc = (lo & size) == 0;
                    unsigned long long a = buf[lo], b = buf[hi];
                    if ((a > b) == asc) {
                        buf[lo] = b;
                        buf[hi] = a;
                    }
                }
                __syncthreads();
            }
        for (int i = tid; i < k; i += TOPK_THREADS) out[i] = i < cnt ? (int)buf[i] : -1;
    } else {
        for (int i = tid; i < k; i += TOPK_THREADS)
            out[i] = i < cnt ? (int)(0xFFFFFFFFu - (uint32_t)(buf[i] & 0xFFFFFFFFull)) : -1;
    }
    if (tid == 0 && count) *count = cnt;
    return cnt;
}


#endif
