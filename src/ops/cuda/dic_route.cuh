/*
 * dic_route.cuh — the router's per-token code (ops.h di_route_rows), as device
 * functions: dic_moe.cu k_route and the fused gate + router of dic_route_gate.cu
 * both run exactly this code, so their scores, selections and weights are the
 * same bits for the same logits.
 */
#ifndef DI_OPS_CUDA_DIC_ROUTE_CUH
#define DI_OPS_CUDA_DIC_ROUTE_CUH

#include "ops/cuda/dic_common.cuh"

#define RT_MAXE 1024 /* most experts (scores in shared memory) */

/* sqrt(softplus(l)), PyTorch threshold 20. select.c computes
 * sqrtf(log1pf(expf(l))) with libm, whose expf / log1pf are not correctly
 * rounded in glibc 2.36 (measured over 3.7e7 inputs: expf differs from the
 * correctly rounded value for 0.05%, log1pf for 0.9%, the final sqrt for
 * 0.5%, each by 1 ulp) and differ between glibc versions. Here each step is
 * evaluated in double and rounded once to fp32 (correctly rounded except
 * ~2^-28 of inputs): scores agree with the CPU to 1 ulp, the top-k can
 * differ only between experts whose biased scores are 1 ulp apart. */
static __device__ __forceinline__ float route_score(float l) {
    float sp;
    if (l > 20.0f) sp = l;
    else {
        float e = __double2float_rn(exp((double)l));
        sp = __double2float_rn(log1p((double)e));
    }
    return __fsqrt_rn(sp);
}

/* select.c ranks_before: higher first, then lower index; NaN last. */
static __device__ __forceinline__ bool rank_before(float x, int a, float y, int b) {
    if (x > y) return true;
    if (x < y) return false;
    if (x == y) return a < b;
    return y != y && (x == x || a < b);
}

/* The scores of tokens m0 .. m0 + nt - 1 (nt = min(M - m0, W)) by the CTA's first nthr threads
 * (the double-precision exp / log1p chain is the cost: spread over all threads):
 * s[tk * ld + e] = route_score(l), b[tk * ld + e] = s + bias[e] (bias != NULL).
 * The logits are read from L2 (__ldcg: they may have been written by other CTAs of this grid).
 * lout != NULL (temperature, dic_route_rows): l = logit / temp (IEEE division, k_div_f32's),
 * written back to lout at the same index. */
static __device__ __forceinline__ void route_scores(int M, int m0, int W, const float *logits, float *lout, int E,
                                                    float temp, const float *bias, float *s, float *b, int ld,
                                                    int nthr) {
    const int nt = M - m0 < W ? M - m0 : W;
    for (int i = threadIdx.x; i < nt * E; i += nthr) {
        const int tk = i / E, e = i - tk * E;
        const size_t at = (size_t)(m0 + tk) * E + e;
        float l = __ldcg(logits + at);
        if (lout) {
            l = __fdiv_rn(l, temp);
            lout[at] = l;
        }
        float v = route_score(l);
        s[tk * ld + e] = v;
        b[tk * ld + e] = bias ? v + bias[e] : v;
    }
}

/* One warp: token m's selection and weights from its scores s and biased scores b (shared
 * memory, after a barrier). top-k: k rounds of a warp argmax under rank_before, which is a total
 * order, so the selection (best first) equals di_topk_desc's. fixed != NULL (hash layers): the
 * ids fixed[(tokens ? tokens[m] : m) * k ..]. sel_sh: 32 ints of shared memory of this warp. */
static __device__ __forceinline__ void route_token(int m, const float *s, const float *b, int E, const int *fixed,
                                                   const int32_t *tokens, int k, float route_scale, float norm_eps,
                                                   int normalize, int *sel_sh, int *sel, float *w) {
    const int lane = threadIdx.x & 31;
    if (fixed) {
        const int *fx = fixed + (size_t)(tokens ? tokens[m] : m) * k; /* hash layers: tid2eid by token */
        if (lane < k) sel_sh[lane] = fx[lane];
    } else {
        uint32_t taken = 0; /* bit j: expert lane + 32 j selected */
        for (int r = 0; r < k; r++) {
            float bv = 0.0f;
            int bi = -1;
            for (int j = 0; lane + 32 * j < E; j++) {
                int e = lane + 32 * j;
                if ((taken >> j) & 1u) continue;
                if (bi < 0 || rank_before(b[e], e, bv, bi)) {
                    bv = b[e];
                    bi = e;
                }
            }
            for (int o = 16; o > 0; o >>= 1) {
                float ov = __shfl_xor_sync(0xFFFFFFFFu, bv, o);
                int oi = __shfl_xor_sync(0xFFFFFFFFu, bi, o);
                if (oi >= 0 && (bi < 0 || rank_before(ov, oi, bv, bi))) {
                    bv = ov;
                    bi = oi;
                }
            }
            if (bi >= 0 && (bi & 31) == lane) taken |= 1u << (bi >> 5);
            if (lane == 0) sel_sh[r] = bi;
        }
    }
    __syncwarp();
    if (lane == 0) {
        /* weights in selection order (select.c) */
        float sum = 0.0f;
        for (int i = 0; i < k; i++) {
            int e = sel_sh[i];
            sum += (e >= 0 && e < E) ? s[e] : 0.0f;
        }
        sum += norm_eps;
        for (int i = 0; i < k; i++) {
            int e = sel_sh[i];
            float se = (e >= 0 && e < E) ? s[e] : 0.0f;
            sel[(size_t)m * k + i] = e;
            /* normalize == 0: the unnormalised sqrt(softplus(l)) * route_scale */
            w[(size_t)m * k + i] = normalize ? se / sum * route_scale : se * route_scale;
        }
    }
}

#endif
