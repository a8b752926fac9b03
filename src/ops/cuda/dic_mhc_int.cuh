/*
 * dic_mhc_int.cuh — device helpers shared by the mHC kernels (dic_mhc.cu: scale_mixes, Sinkhorn, collapse,
 * expand, the fused transition and head; lab/mhc: the variants). Every helper keeps
 * the CPU's fp32 operations in the CPU's order (src/ops/cpu/mhc.c, docs/architecture.md §4.2); moving them here
 * changed no instruction.
 */
#ifndef DIC_MHC_INT_CUH
#define DIC_MHC_INT_CUH

#include "ops/cuda/dic_common.cuh"

#define HC 4

/* mhc.c's mixes scale from the fp64 sum of squares of a row's hc * d stream
 * values: rs = 1 / sqrtf((float)(ss / hcd) + eps). */
/* OOL = 1: the division, square root and reciprocal through dic_common.cuh's out-of-line copies (the lean
 * transition: one copy each, shared with its RMSNorm scale); the same operations. */
template <int OOL = 0> static __device__ __forceinline__ float hc_mix_rs(double ss, int hcd, float eps) {
    const float ms = __double2float_rn(OOL ? dic_ddiv_ool(ss, (double)hcd) : __ddiv_rn(ss, (double)hcd));
    if (OOL) return dic_fdiv_ool(1.0f, dic_fsqrt_ool(__fadd_rn(ms, eps)));
    return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms, eps)));
}

/* Out-of-line copies of the long fp32 / fp64 sequences (code size, docs/kernels/mhc.md: the transition kernels'
 * .text; each call site of an inline IEEE division or of dic_expf carries its own copy and slow path). The
 * same operations: a call only moves where the instructions live. */
#ifndef H2_OOL
#define H2_OOL 15
#endif
static __device__ __noinline__ float h2_expf_ool(float x) { return dic_expf(x); }
#if H2_OOL & 1
#define H2_FDIV(x, y) dic_fdiv_ool((x), (y))
#else
#define H2_FDIV(x, y) __fdiv_rn((x), (y))
#endif
#if H2_OOL & 2
#define H2_EXPF(x) h2_expf_ool(x)
#else
#define H2_EXPF(x) dic_expf(x)
#endif

/* ---- Sinkhorn: 16 lanes per row (mhc.c di_hc_sinkhorn, same order) ------
 * Lane l = 4j + k of a row's 16-lane group holds comb element (j, k). A row
 * or column sum gathers its four values by shuffles and adds them in the
 * CPU's order (k = 0..3, or j = 0..3) on every lane, so each lane computes
 * the same fp32 sum the sequential loop does; each lane then divides its own
 * element. Rows run in parallel instead of one thread walking 20 iterations
 * of 16 dependent divisions. */

static __device__ __forceinline__ float sk_sum4(float v, unsigned mask, int base, int stride) {
    float a0 = __shfl_sync(mask, v, base, 16), a1 = __shfl_sync(mask, v, base + stride, 16);
    float a2 = __shfl_sync(mask, v, base + 2 * stride, 16), a3 = __shfl_sync(mask, v, base + 3 * stride, 16);
    float s = 0.0f;
    s += a0;
    s += a1;
    s += a2;
    s += a3;
    return s;
}

/* The same sum without the leading 0.0f + a0: equal bits whenever a0 is not -0 (0 + -0 = +0). The Sinkhorn's
 * values are exp(.) / s + eps and their quotients by positive sums: never -0 (NaN stays NaN), so sk_group(nz = 1)
 * gives k_sinkhorn's bits one dependent add shorter per sum (41 sums on the chain). */
static __device__ __forceinline__ float sk_sum4n(float v, unsigned mask, int base, int stride) {
    float a0 = __shfl_sync(mask, v, base, 16), a1 = __shfl_sync(mask, v, base + stride, 16);
    float a2 = __shfl_sync(mask, v, base + 2 * stride, 16), a3 = __shfl_sync(mask, v, base + 3 * stride, 16);
    float s = a0;
    s += a1;
    s += a2;
    s += a3;
    return s;
}

/* pre_k = sigmoid(mix_k * s0 + base_k) + eps (mhc.c), k < 4. */
static __device__ __forceinline__ float sk_pre1(const float *mx, int k, float s0, const float *base, float eps) {
    float e0 = H2_EXPF(-(mx[k] * s0 + base[k]));
    return H2_FDIV(1.0f, 1.0f + e0) + eps;
}

/* One row's Sinkhorn split on a 16-lane group (lane = 4j + k); mx: the row's
 * 24 mixes (global or shared); write: this group's row is real (else it
 * redoes a row only to keep the whole warp in the shuffles); pre may be NULL
 * (not written). */
static __device__ __forceinline__ void sk_group(int lane, const float *mx, const float *scale3, const float *base,
                                                int iters, float eps, int write, float *pre, float *post,
                                                float *comb, int nz = 0) {
    const int j = lane >> 2, k = lane & 3;
    const unsigned mask = 0xFFFFFFFFu; /* whole warps run every shuffle */
    const float s0 = scale3[0], s1 = scale3[1], s2 = scale3[2];
    if (write && lane < HC) {
        if (pre) pre[lane] = sk_pre1(mx, lane, s0, base, eps);
        float e1 = H2_EXPF(-(mx[lane + HC] * s1 + base[lane + HC]));
        post[lane] = 2.0f * H2_FDIV(1.0f, 1.0f + e1);
    }
    float c = mx[lane + 2 * HC] * s2 + base[lane + 2 * HC];
    /* row softmax + eps: max and sum over k in order */
    {
        float a0 = __shfl_sync(mask, c, 4 * j, 16), a1 = __shfl_sync(mask, c, 4 * j + 1, 16);
        float a2 = __shfl_sync(mask, c, 4 * j + 2, 16), a3 = __shfl_sync(mask, c, 4 * j + 3, 16);
        float mxv = fmaxf(fmaxf(fmaxf(a0, a1), a2), a3);
        c = H2_EXPF(c - mxv);
        float s = nz ? sk_sum4n(c, mask, 4 * j, 1) : sk_sum4(c, mask, 4 * j, 1);
        c = H2_FDIV(c, s) + eps;
    }
#pragma unroll 1
    for (int it = 0; it < iters; it++) {
        if (it > 0) c = H2_FDIV(c, (nz ? sk_sum4n(c, mask, 4 * j, 1) : sk_sum4(c, mask, 4 * j, 1)) + eps); /* rows */
        c = H2_FDIV(c, (nz ? sk_sum4n(c, mask, k, 4) : sk_sum4(c, mask, k, 4)) + eps);                  /* columns */
    }
    if (write) comb[lane] = c;
}

/* Unpack 8 bf16 from a 16-byte word. */
static __device__ __forceinline__ void unpack8(uint4 q, float v[8]) {
    uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        v[2 * j] = dic_bf16_to_f32((uint16_t)(w[j] & 0xFFFFu));
        v[2 * j + 1] = dic_bf16_to_f32((uint16_t)(w[j] >> 16));
    }
}
static __device__ __forceinline__ uint4 pack8(const float v[8]) {
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++) w[j] = (uint32_t)dic_f32_to_bf16(v[2 * j]) | ((uint32_t)dic_f32_to_bf16(v[2 * j + 1]) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* y = ((p0 r0 + p1 r1) + p2 r2) + p3 r3, rounded to bf16 (mhc.c coll_rows). */
static __device__ __forceinline__ float collapse1(const float p[HC], float r0, float r1, float r2, float r3) {
    float s = p[0] * r0;
    s += p[1] * r1;
    s += p[2] * r2;
    s += p[3] * r3;
    return s;
}

/* out_k = post_k f + (((c0k r0 + c1k r1) + c2k r2) + c3k r3) (mhc.c exp_rows). */
static __device__ __forceinline__ void expand1(const float po[HC], const float cb[HC * HC], float fv, const float rv[HC],
                                               float out[HC]) {
#pragma unroll
    for (int k = 0; k < HC; k++) {
        float s = cb[k] * rv[0];
#pragma unroll
        for (int j = 1; j < HC; j++) s += cb[j * HC + k] * rv[j];
        out[k] = po[k] * fv + s;
    }
}

#define HT_CW 32   /* columns per CTA */
#define HT_MT 4    /* rows per tile */
#define HT_T 256   /* threads */
#define HT_MAXT 16 /* tiles per launch (counters); more rows: more launches */
#define HT_VMAX 4  /* E: 16-byte vectors per thread and row: d <= 8 * 4 * 256 */
#define HT_NMIX 24

typedef struct ht_args {
    int M, d;
    const uint16_t *sub;
    size_t ldsub;
    uint16_t *R;
    size_t ldr;
    const float *fn;
    const float *scale3, *base;
    int iters;
    float hc_eps, rms_eps;
    float *mixes, *pre, *post, *comb, *pre_in;
    const float *norm_w;
    float norm_eps;
    uint16_t *xo, *xn;
    size_t ldx;
    float *part;  /* [HT_MAXT][HT_MT][24][S] */
    double *ssp;  /* [HT_MAXT][HT_MT][S] */
    int mtr;      /* k_transition2: rows per tile (1, 2 or 4) */
    int ovl;      /* k_transition2: Sinkhorn beside the collapse + RMSNorm */
    float scale0; /* the head (NMIX = HC): dic_hc_head_pre's scale0 */
} ht_args;

/* Column i of row m's streams (r = R row m, stride d between streams) into
 * rv; with a sub-layer output, the expand first (R = post*sub + comb.R,
 * rounded to bf16, written back): the transition kernels' first step. */
static __device__ __forceinline__ void ht_expand_col(const ht_args &a, int m, int i, int d, uint16_t *r, float rv[HC]) {
#pragma unroll
    for (int j = 0; j < HC; j++) rv[j] = dic_bf16_to_f32(r[(size_t)j * d + i]);
    if (a.sub) {
        float po[HC], cb[HC * HC], out[HC];
#pragma unroll
        for (int k = 0; k < HC; k++) po[k] = a.post[(size_t)m * HC + k];
#pragma unroll
        for (int k = 0; k < HC * HC; k++) cb[k] = a.comb[(size_t)m * HC * HC + k];
        expand1(po, cb, dic_bf16_to_f32(a.sub[(size_t)m * a.ldsub + i]), rv, out);
#pragma unroll
        for (int k = 0; k < HC; k++) {
            const uint16_t b = dic_f32_to_bf16(out[k]);
            r[(size_t)k * d + i] = b;
            rv[k] = dic_bf16_to_f32(b);
        }
    }
}

/* named barrier 1 over the first n threads of the CTA (n a multiple of 32) */
static __device__ __forceinline__ void h2_bar(int n) { asm volatile("bar.sync 1, %0;" ::"r"(n) : "memory"); }

#endif
