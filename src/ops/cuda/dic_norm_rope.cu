/*
 * dic_norm_rope.cu — RMSNorm, the V4 per-head BF16 query norm and RoPE
 * (ops.h di_rmsnorm, di_head_rmsnorm_bf16, di_rope_table, di_rope_tab),
 * bit-identical to src/ops/cpu/{norm,rope}.c (docs/architecture.md §3.4, §4.3).
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_head_norm.cuh"
#include "ops/cuda/dic_model.h"

/* ---------------------------------------------------------------------------
 * RMSNorm. The CPU sums x_i^2 in double in index order (norm.c). Each bf16
 * square is exact in double (16 significant bits), so a sum of n squares
 * is exact whenever every partial sum fits 53 bits: then any order gives
 * the CPU's double. When magnitudes span too widely it is not, and the two
 * orders may differ by a few ulps of the double; both are within
 * n * 2^-53 * S of the exact S (all terms >= 0). var = fp32(S / D) can then
 * only differ if fp64(S / D) lies within that distance of an fp32 rounding
 * boundary. The kernel therefore reduces in parallel (double tree) and
 * checks that the whole interval S_par (1 +- 2n 2^-53 + 2^-51) rounds to one
 * fp32 value; if not (rare: ~n 2^-29 of rows, and NaN/inf rows), one thread
 * redoes the CPU's sequential sum. Either way var has the CPU's bits. */
#define RMS_THREADS 256

#define RMS_VMAX 4 /* 16-byte vectors per thread kept in registers: D <= 8 * 4 * 256 */

static __global__ void __launch_bounds__(RMS_THREADS) k_rmsnorm(const uint16_t *in, size_t ldx, const float *w, int D,
                                                                 float eps, uint16_t *out, size_t ldy, int vec) {
    DIC_PDL_ENTER();
    __shared__ double red[RMS_THREADS / 32];
    __shared__ float r_sh;
    const uint16_t *x = in + (size_t)blockIdx.x * ldx;
    uint16_t *y = out + (size_t)blockIdx.x * ldy;
    double ss = 0.0;
    /* vec: the row read once, 16 bytes per load, all loads in flight before the sums; the
     * values stay in registers for the output (any summation order: see above) */
    uint4 xv[RMS_VMAX];
    if (vec) {
        const uint4 *x4 = (const uint4 *)x;
#pragma unroll
        for (int j = 0; j < RMS_VMAX; j++) {
            int i = threadIdx.x + j * RMS_THREADS;
            xv[j] = i < D / 8 ? x4[i] : make_uint4(0, 0, 0, 0);
        }
        /* one vector per rolled step (code size); the vectors past D / 8 added only +0 */
#pragma unroll 1
        for (int j = 0; j < RMS_VMAX; j++) {
            if (threadIdx.x + j * RMS_THREADS >= D / 8) break;
            uint4 q4;
#pragma unroll
            for (int x = 0; x < RMS_VMAX; x++)
                if (x == j) q4 = xv[x]; /* a register array: selected, not indexed */
            uint32_t q[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
            for (int h = 0; h < 4; h++) {
                double a = (double)dic_bf16_to_f32((uint16_t)(q[h] & 0xFFFFu));
                double b = (double)dic_bf16_to_f32((uint16_t)(q[h] >> 16));
                ss = __dadd_rn(ss, __dmul_rn(a, a));
                ss = __dadd_rn(ss, __dmul_rn(b, b));
            }
        }
    } else {
#pragma unroll 1
        for (int i = threadIdx.x; i < D; i += RMS_THREADS) {
            double v = (double)dic_bf16_to_f32(x[i]);
            ss = __dadd_rn(ss, __dmul_rn(v, v));
        }
    }
    float wn[8]; /* vec: the weights of the thread's first vector, loaded before the reduction */
    if (vec && w && (int)threadIdx.x < D / 8) {
#pragma unroll
        for (int q = 0; q < 8; q++) wn[q] = w[8 * threadIdx.x + q];
    }
    for (int o = 16; o > 0; o >>= 1) ss = __dadd_rn(ss, __shfl_down_sync(0xFFFFFFFFu, ss, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = red[0];
        for (int i = 1; i < RMS_THREADS / 32; i++) s = __dadd_rn(s, red[i]);
        r_sh = dic_rms_scale(s, x, D, eps);
    }
    __syncthreads();
    float r = r_sh;
    /* y may alias x: every read of x above precedes this barrier */
    if (vec) {
        /* one vector per rolled step; the next vector's weights loaded one step ahead */
#pragma unroll 1
        for (int j = 0; j < RMS_VMAX; j++) {
            int i = threadIdx.x + j * RMS_THREADS;
            if (i >= D / 8) break;
            float wv[8];
            if (w) {
#pragma unroll
                for (int q = 0; q < 8; q++) wv[q] = wn[q];
                if (i + RMS_THREADS < D / 8) {
#pragma unroll
                    for (int q = 0; q < 8; q++) wn[q] = w[8 * (i + RMS_THREADS) + q];
                }
            }
            uint4 q4;
#pragma unroll
            for (int x = 0; x < RMS_VMAX; x++)
                if (x == j) q4 = xv[x];
            uint32_t q[4] = {q4.x, q4.y, q4.z, q4.w}, o[4];
#pragma unroll
            for (int h = 0; h < 4; h++) {
                float a = __fmul_rn(dic_bf16_to_f32((uint16_t)(q[h] & 0xFFFFu)), r);
                float b = __fmul_rn(dic_bf16_to_f32((uint16_t)(q[h] >> 16)), r);
                if (w) a = __fmul_rn(wv[2 * h], a), b = __fmul_rn(wv[2 * h + 1], b);
                o[h] = (uint32_t)dic_f32_to_bf16(a) | ((uint32_t)dic_f32_to_bf16(b) << 16);
            }
            ((uint4 *)y)[i] = make_uint4(o[0], o[1], o[2], o[3]);
        }
        return;
    }
#pragma unroll 1
    for (int i = threadIdx.x; i < D; i += RMS_THREADS) {
        float v = __fmul_rn(dic_bf16_to_f32(x[i]), r);
        if (w) v = __fmul_rn(w[i], v);
        y[i] = dic_f32_to_bf16(v);
    }
}

/* The lean copy for the decode shapes (code size: docs/kernels/small-kernels.md): k_rmsnorm's vec path when the row is at most one
 * 16-byte vector per thread (D <= 8 * RMS_THREADS): the same loads, the same sums in the same order (thread i adds
 * the 8 squares of vector i, threads past D / 8 add nothing), the same tree and scale (the divisions and the
 * square root out of line, one copy), the same products; the same bits. */
static __global__ void __launch_bounds__(RMS_THREADS) k_rmsnorm1(const uint16_t *in, size_t ldx, const float *w, int D,
                                                                  float eps, uint16_t *out, size_t ldy) {
    DIC_PDL_ENTER();
    __shared__ double red[RMS_THREADS / 32];
    __shared__ float r_sh;
    const uint16_t *x = in + (size_t)blockIdx.x * ldx;
    uint16_t *y = out + (size_t)blockIdx.x * ldy;
    const int i = threadIdx.x, on = i < D / 8;
    double ss = 0.0;
    const uint4 q4 = on ? ((const uint4 *)x)[i] : make_uint4(0, 0, 0, 0);
    const uint32_t q[4] = {q4.x, q4.y, q4.z, q4.w};
    if (on) {
#pragma unroll
        for (int h = 0; h < 4; h++) {
            double a = (double)dic_bf16_to_f32((uint16_t)(q[h] & 0xFFFFu));
            double b = (double)dic_bf16_to_f32((uint16_t)(q[h] >> 16));
            ss = __dadd_rn(ss, __dmul_rn(a, a));
            ss = __dadd_rn(ss, __dmul_rn(b, b));
        }
    }
    float wv[8];
    if (on && w) {
#pragma unroll
        for (int k = 0; k < 8; k++) wv[k] = w[8 * i + k];
    }
    for (int o = 16; o > 0; o >>= 1) ss = __dadd_rn(ss, __shfl_down_sync(0xFFFFFFFFu, ss, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = red[0];
#pragma unroll 1
        for (int k = 1; k < RMS_THREADS / 32; k++) s = __dadd_rn(s, red[k]);
        r_sh = dic_rms_scale<1>(s, x, D, eps);
    }
    __syncthreads();
    const float r = r_sh;
    /* y may alias x: every read of x above precedes this barrier */
    if (!on) return;
    uint32_t o[4];
#pragma unroll
    for (int h = 0; h < 4; h++) {
        float a = __fmul_rn(dic_bf16_to_f32((uint16_t)(q[h] & 0xFFFFu)), r);
        float b = __fmul_rn(dic_bf16_to_f32((uint16_t)(q[h] >> 16)), r);
        if (w) a = __fmul_rn(wv[2 * h], a), b = __fmul_rn(wv[2 * h + 1], b);
        o[h] = (uint32_t)dic_f32_to_bf16(a) | ((uint32_t)dic_f32_to_bf16(b) << 16);
    }
    ((uint4 *)y)[i] = make_uint4(o[0], o[1], o[2], o[3]);
}

extern "C" cudaError_t dic_rmsnorm(const dic_ctx *c, int M, const uint16_t *in, size_t ldx, const float *w, int D,
                                   float eps, uint16_t *out, size_t ldy) {
    if (M <= 0) return cudaSuccess;
    int vec = D % 8 == 0 && D <= 8 * RMS_VMAX * RMS_THREADS && ldx % 8 == 0 && ldy % 8 == 0 &&
              (((uintptr_t)in | (uintptr_t)out) & 15) == 0;
    if (vec && D <= 8 * RMS_THREADS)
        DIC_LAUNCH(k_rmsnorm1, M, RMS_THREADS, 0, c->stream, in, ldx, w, D, eps, out, ldy);
    else
        DIC_LAUNCH(k_rmsnorm, M, RMS_THREADS, 0, c->stream, in, ldx, w, D, eps, out, ldy, vec);
    DIC_LAUNCH_CHECK();
}

/* Head RMSNorm in BF16 (§4.4 step 2): the fp32 sum of bf16(q_i^2) is
 * sequential in index order (norm.c). One warp per (row, head): the lanes
 * load the head's values coalesced into shared memory and square them
 * (bf16(q_i^2), lane-parallel), lane 0 runs the sequential fp32 sum over the
 * squares (a chain of adds on shared memory, the CPU's order and bits), and
 * the lanes scale the values. hd <= HRN_MAXHD (else one thread per head). */
#define HRN_WARPS 4
#define HRN_MAXHD 1024

static __global__ void __launch_bounds__(32 * HRN_WARPS)
    k_head_rmsnorm_warp(int M, uint16_t *q, size_t ld, int nheads, int hd, float eps) {
    DIC_PDL_ENTER();
    __shared__ float sq[HRN_WARPS][HRN_MAXHD];
    __shared__ float r_sh[HRN_WARPS];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long t = (long long)blockIdx.x * HRN_WARPS + w;
    if (t >= (long long)M * nheads) return; /* whole warps leave together */
    const int m = (int)(t / nheads), h = (int)(t % nheads);
    uint16_t *v = q + (size_t)m * ld + (size_t)h * hd;
    for (int i = lane; i < hd; i += 32) {
        float a = dic_bf16_to_f32(v[i]);
        sq[w][i] = dic_round_bf16(__fmul_rn(a, a));
    }
    __syncwarp();
    if (lane == 0) {
        float s = 0.0f;
        for (int i = 0; i < hd; i++) s = __fadd_rn(s, sq[w][i]);
        float mean = dic_round_bf16(__fdiv_rn(s, (float)hd));
        float tt = dic_round_bf16(__fadd_rn(mean, eps));
        r_sh[w] = dic_round_bf16(__fdiv_rn(1.0f, __fsqrt_rn(tt)));
    }
    __syncwarp();
    const float r = r_sh[w];
    for (int i = lane; i < hd; i += 32) v[i] = dic_f32_to_bf16(__fmul_rn(dic_bf16_to_f32(v[i]), r));
}

static __global__ void k_head_rmsnorm(int M, uint16_t *q, size_t ld, int nheads, int hd, float eps) {
    DIC_PDL_ENTER();
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)M * nheads) return;
    int m = (int)(t / nheads), h = (int)(t % nheads);
    uint16_t *v = q + (size_t)m * ld + (size_t)h * hd;
    float s = 0.0f;
    for (int i = 0; i < hd; i++) {
        float a = dic_bf16_to_f32(v[i]);
        s = __fadd_rn(s, dic_round_bf16(__fmul_rn(a, a)));
    }
    float mean = dic_round_bf16(__fdiv_rn(s, (float)hd));
    float tt = dic_round_bf16(__fadd_rn(mean, eps));
    float r = dic_round_bf16(__fdiv_rn(1.0f, __fsqrt_rn(tt)));
    for (int i = 0; i < hd; i++) v[i] = dic_f32_to_bf16(__fmul_rn(dic_bf16_to_f32(v[i]), r));
}

extern "C" cudaError_t dic_head_rmsnorm_bf16(const dic_ctx *c, int M, uint16_t *q, size_t ld, int nheads, int hd,
                                             float eps) {
    long long n = (long long)M * nheads;
    if (n <= 0) return cudaSuccess;
    if (hd <= HRN_MAXHD)
        DIC_LAUNCH(k_head_rmsnorm_warp, (unsigned)((n + HRN_WARPS - 1) / HRN_WARPS), 32 * HRN_WARPS, 0, c->stream, M, q, ld,
                                                                                                          nheads, hd, eps);
    else
        DIC_LAUNCH(k_head_rmsnorm, (unsigned)((n + 63) / 64), 64, 0, c->stream, M, q, ld, nheads, hd, eps);
    DIC_LAUNCH_CHECK();
}

/* ---------------------------------------------------------------------------
 * RoPE table: angle = fp32(fp32(pos) * f_i); cs, sn = fp32(cos, sin of the
 * angle in double) as rope.c (glibc cos/sin, < 1 ulp of double). CUDA's
 * double sin/cos are within 2 ulp of double; both round to the same fp32
 * unless the true value lies within ~3 double ulps of an fp32 rounding
 * boundary (about 2^-27 of angles). gtest_norm_rope.c checks every angle
 * of the real models' tables (positions 0 .. 2^20) bit for bit. */
static __global__ void k_rope_table(int M, const int64_t *pos, const float *inv_freq, int half, float *cs, float *sn) {
    DIC_PDL_ENTER();
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)M * half) return;
    int m = (int)(t / half), i = (int)(t % half);
    float ang = __fmul_rn(__ll2float_rn((long long)pos[m]), inv_freq[i]);
    double s, co;
    sincos((double)ang, &s, &co);
    cs[t] = __double2float_rn(co);
    sn[t] = __double2float_rn(s);
}

extern "C" cudaError_t dic_rope_table(const dic_ctx *c, int M, const int64_t *pos, const float *inv_freq, int rd,
                                      float *cs, float *sn) {
    long long n = (long long)M * (rd / 2);
    if (n <= 0) return cudaSuccess;
    DIC_LAUNCH(k_rope_table, (unsigned)((n + 255) / 256), 256, 0, c->stream, M, pos, inv_freq, rd / 2, cs, sn);
    DIC_LAUNCH_CHECK();
}

/* The rotation (rope.c): re = fma(a, c, -(b*s)), im = fma(a, s, b*c), the
 * reference's complex product with CUDA's contraction. One thread per pair. */
static __global__ void k_rope_tab(int M, uint16_t *v, size_t ld, int nheads, int hd, int rd, const float *cs,
                                  const float *sn, int inverse) {
    DIC_PDL_ENTER();
    int half = rd / 2;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long per_row = (long long)nheads * half;
    if (t >= (long long)M * per_row) return;
    int m = (int)(t / per_row);
    int r = (int)(t % per_row), h = r / half, i = r % half;
    uint16_t *x = v + (size_t)m * ld + (size_t)h * hd + (hd - rd) + 2 * i;
    float a = dic_bf16_to_f32(x[0]), b = dic_bf16_to_f32(x[1]);
    float cc = cs[(size_t)m * half + i], ss = sn[(size_t)m * half + i];
    if (inverse) ss = -ss;
    float re = fmaf(a, cc, -__fmul_rn(b, ss));
    float im = fmaf(a, ss, __fmul_rn(b, cc));
    x[0] = dic_f32_to_bf16(re);
    x[1] = dic_f32_to_bf16(im);
}

extern "C" cudaError_t dic_rope_tab(const dic_ctx *c, int M, uint16_t *v, size_t ld, int nheads, int hd, int rd,
                                    const float *cs, const float *sn, int inverse) {
    long long n = (long long)M * nheads * (rd / 2);
    if (n <= 0) return cudaSuccess;
    DIC_LAUNCH(k_rope_tab, (unsigned)((n + 255) / 256), 256, 0, c->stream, M, v, ld, nheads, hd, rd, cs, sn, inverse);
    DIC_LAUNCH_CHECK();
}

/* ---------------------------------------------------------------------------
 * Fused post-processing (ops.h di_q_post, di_attn_kv_post), both modes. */


/* q_post: one warp per (row, head); lane L holds the 8-value chunks L and
 * L + 32 (hd <= 512, hd % 8 == 0). The V4 norm: bf16(q_i^2) summed in fp32
 * per lane in index order, then a butterfly over the lanes (the CPU sums
 * in index order: the bits of the sum may differ, the bf16 mean rarely);
 * mean, eps and the reciprocal root rounded as k_head_rmsnorm_warp; then
 * the rotation of the last rd values. Every (row, head) is one warp's on its
 * own, the same code at every M: a row's bits depend on the row, hd, rd and
 * eps only (row-invariant, docs/determinism.md §7), so both modes take it at
 * every M. Grid (head groups, row slots): a CTA walks the rows
 * blockIdx.y, blockIdx.y + gridDim.y, ... (gridDim.y <= 65535, any M). */
#define QP_WARPS 4
#define QP_MAXGY 65535 /* the grid's y limit: more rows are walked by the CTAs */
/* One (row, head): the warp's lanes hold the head's chunks lane and lane + 32 (v: the head's first value;
 * csm, snm: the row's rotation factors). Code size (docs/kernels/small-kernels.md): the two chunks are kept
 * as raw bf16 words (selected, not indexed) and walked by rolled loops of one bf16 pair each, the pair taken
 * from the front of a word queue (constant register indices: no local memory); grid (head groups, row
 * slots): no index division. Same operations in the same order as the unrolled version. */
static __device__ __forceinline__ void q_post_head(uint16_t *v, int lane, int nc, int hd, int norm, float eps, int rd,
                                                   const float *csm, const float *snm) {
    const uint4 z4 = make_uint4(0u, 0u, 0u, 0u);
    const uint4 raw0 = lane < nc ? *(const uint4 *)(v + 8 * lane) : z4;
    const uint4 raw1 = lane + 32 < nc ? *(const uint4 *)(v + 8 * (lane + 32)) : z4;
    float r = 0.0f;
    if (norm) { /* dic_head_rrms: the same sum in the same order (chunk 0's 8 values, then chunk 1's) */
        float s = 0.0f;
        uint4 u = raw0;
#pragma unroll 1
        for (int j = 0; j < 8; j++) {
            if (j == 4) u = raw1;
            const uint32_t wd = u.x;
            u.x = u.y, u.y = u.z, u.z = u.w;
            const float lo = dic_bf16_to_f32((uint16_t)(wd & 0xFFFFu)), hi = dic_bf16_to_f32((uint16_t)(wd >> 16));
            s = __fadd_rn(s, dic_round_bf16(__fmul_rn(lo, lo)));
            s = __fadd_rn(s, dic_round_bf16(__fmul_rn(hi, hi)));
        }
        r = dic_head_rrms_fin(s, hd, eps);
    }
    const int r0 = hd - rd;
#pragma unroll 1
    for (int k = 0; k < 2; k++) {
        const int ch = lane + 32 * k;
        if (ch >= nc) break;
        float4 c4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), s4 = c4; /* the chunk's rotation factors */
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int col = 8 * ch + 2 * e;
            if (col >= r0) {
                const int i = (col - r0) / 2;
                const float cc = csm[i], ss = snm[i];
                if (e == 0) c4.x = cc, s4.x = ss;
                if (e == 1) c4.y = cc, s4.y = ss;
                if (e == 2) c4.z = cc, s4.z = ss;
                if (e == 3) c4.w = cc, s4.w = ss;
            }
        }
        uint4 u = k ? raw1 : raw0; /* pair e leaves the front of the queue, its result enters at the back */
#pragma unroll 1
        for (int e = 0; e < 4; e++) {
            const uint32_t wd = u.x;
            const float cc = c4.x, ss = s4.x;
            u.x = u.y, u.y = u.z, u.z = u.w;
            c4.x = c4.y, c4.y = c4.z, c4.z = c4.w, s4.x = s4.y, s4.y = s4.z, s4.z = s4.w;
            float lo = dic_bf16_to_f32((uint16_t)(wd & 0xFFFFu)), hi = dic_bf16_to_f32((uint16_t)(wd >> 16));
            if (norm) lo = dic_round_bf16(__fmul_rn(lo, r)), hi = dic_round_bf16(__fmul_rn(hi, r));
            if (8 * ch + 2 * e >= r0) dic_rot_bf16(&lo, &hi, cc, ss);
            u.w = (uint32_t)dic_f32_to_bf16(lo) | ((uint32_t)dic_f32_to_bf16(hi) << 16);
        }
        *(uint4 *)(v + 8 * ch) = u;
    }
}

static __global__ void __launch_bounds__(32 * QP_WARPS) k_q_post(int M, uint16_t *q, size_t ld, int nheads, int hd,
                                                                 int norm, float eps, int rd, const float *cs,
                                                                 const float *sn) {
    DIC_PDL_ENTER();
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int h = (int)blockIdx.x * QP_WARPS + w, half = rd / 2;
    if (h >= nheads) return;
#pragma unroll 1
    for (int m = (int)blockIdx.y; m < M; m += (int)gridDim.y)
        q_post_head(q + (size_t)m * ld + (size_t)h * hd, lane, hd / 8, hd, norm, eps, rd, cs + (size_t)m * half,
                    sn + (size_t)m * half);
}

extern "C" int dic_q_post_ok(const dic_ctx *c, int M, const uint16_t *q, size_t ld, int hd, int rd) {
    (void)c; /* both modes, every M: the kernel is row-invariant (docs/determinism.md §7) */
    return M >= 1 && hd % 8 == 0 && hd <= 512 && ld % 8 == 0 &&
           ((uintptr_t)q & 15) == 0 && rd >= 0 && rd <= hd && rd % 2 == 0 && (hd - rd) % 2 == 0;
}

extern "C" cudaError_t dic_q_post(const dic_ctx *c, int M, uint16_t *q, size_t ld, int nheads, int hd, int norm,
                                  float eps, int rd, const float *cs, const float *sn) {
    long long n = (long long)M * nheads;
    if (n <= 0) return cudaSuccess;
    if (!dic_q_post_ok(c, M, q, ld, hd, rd)) return cudaErrorInvalidValue;
    const unsigned gy = (unsigned)(M < QP_MAXGY ? M : QP_MAXGY);
    DIC_LAUNCH(k_q_post, dim3((unsigned)((nheads + QP_WARPS - 1) / QP_WARPS), gy), 32 * QP_WARPS, 0, c->stream, M, q,
               ld, nheads, hd, norm, eps, rd, cs, sn);
    DIC_LAUNCH_CHECK();
}

/* kv_post: one CTA per row, D / 8 threads (a multiple of 32, <= 1024), each
 * 8 consecutive values in registers. RMSNorm as k_rmsnorm (double squares,
 * parallel sum with the exactness check and the sequential fallback: the
 * CPU's bits), the rotation of the last rd values, the FP8 round trip in
 * blocks of qblk over the first qn values (k_qat's formula; a block is
 * qblk / 8 consecutive lanes of one warp), then the row is stored in place
 * and to its scatter destination, if any. Same bits as the sequence. */
static __global__ void __launch_bounds__(1024) k_kv_post(uint16_t *kv, size_t ld, const float *w, int D, float eps,
                                                         int rd, const float *cs, const float *sn, int qn, int qblk,
                                                         int n, const int *src_row, uint16_t *const *dst) {
    DIC_PDL_ENTER();
    __shared__ double red[32];
    __shared__ float r_sh;
    const int m = blockIdx.x, tid = threadIdx.x, nw = blockDim.x >> 5;
    uint16_t *x = kv + (size_t)m * ld;
    uint4 u = ((const uint4 *)x)[tid];
    uint32_t p[4] = {u.x, u.y, u.z, u.w};
    float y[8];
    double ss = 0.0;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        y[2 * e] = dic_bf16_to_f32((uint16_t)(p[e] & 0xFFFFu));
        y[2 * e + 1] = dic_bf16_to_f32((uint16_t)(p[e] >> 16));
        double a = (double)y[2 * e], b = (double)y[2 * e + 1];
        ss = __dadd_rn(ss, __dmul_rn(a, a));
        ss = __dadd_rn(ss, __dmul_rn(b, b));
    }
    for (int o = 16; o > 0; o >>= 1) ss = __dadd_rn(ss, __shfl_down_sync(0xFFFFFFFFu, ss, o));
    if ((tid & 31) == 0) red[tid >> 5] = ss;
    __syncthreads();
    if (tid == 0) {
        double s = red[0];
#pragma unroll 1
        for (int i = 1; i < nw; i++) s = __dadd_rn(s, red[i]);
        r_sh = dic_rms_scale(s, x, D, eps);
    }
    __syncthreads();
    const float r = r_sh;
    const int c0 = 8 * tid, half = rd / 2, r0 = D - rd;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        float a = __fmul_rn(y[e], r);
        if (w) a = __fmul_rn(w[c0 + e], a);
        y[e] = dic_round_bf16(a);
    }
    /* pair e: index (c0 + e - r0) / 2 = (c0 - r0) / 2 + e / 2 (c0, r0, e even; >= 0 where used): one base,
     * immediate offsets (code size) */
    const long long ib = (long long)m * half + (c0 - r0) / 2;
#pragma unroll
    for (int e = 0; e < 8; e += 2)
        if (c0 + e >= r0) dic_rot_bf16(&y[e], &y[e + 1], cs[ib + e / 2], sn[ib + e / 2]);
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; e++) amax = fmaxf(amax, fabsf(y[e]));
    for (int o = 1; o < qblk / 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    if (c0 < qn) {
        amax = fmaxf(amax, 1e-4f);
        float s = dic_pow2_ceil(__fmul_rn(amax, (float)(1.0 / 448.0)));
        /* one value per rolled step (code size); y is a register array: selected, not indexed */
#pragma unroll 1
        for (int e = 0; e < 8; e++) {
            float ye = 0.0f;
#pragma unroll
            for (int x = 0; x < 8; x++)
                if (x == e) ye = y[x];
            float qv = __fdiv_rn(ye, s);
            qv = fminf(fmaxf(qv, -448.0f), 448.0f);
            ye = dic_round_bf16(__fmul_rn(dic_e4m3_to_f32(dic_f32_to_e4m3(qv)), s));
#pragma unroll
            for (int x = 0; x < 8; x++)
                if (x == e) y[x] = ye;
        }
    }
#pragma unroll
    for (int e = 0; e < 4; e++)
        p[e] = (uint32_t)dic_f32_to_bf16(y[2 * e]) | ((uint32_t)dic_f32_to_bf16(y[2 * e + 1]) << 16);
    const uint4 o4 = make_uint4(p[0], p[1], p[2], p[3]);
    __syncthreads(); /* the fallback's reads of x are done */
    ((uint4 *)x)[tid] = o4;
    /* the scatter table read 32 entries at a time (one load per lane, all in flight), then walked by shuffles
     * (compact code; whole warps: blockDim is a multiple of 32) */
    for (int i0 = 0; i0 < n; i0 += 32) {
        const int il = i0 + (tid & 31), nl = n - i0 < 32 ? n - i0 : 32;
        int srl = -1;
        unsigned long long dl = 0;
        if (il < n) srl = src_row ? src_row[il] : il, dl = (unsigned long long)(uintptr_t)dst[il];
#pragma unroll 1
        for (int l = 0; l < nl; l++) {
            const int sr = __shfl_sync(0xFFFFFFFFu, srl, l);
            const unsigned long long dp = __shfl_sync(0xFFFFFFFFu, dl, l);
            if (sr == m) ((uint4 *)(uintptr_t)dp)[tid] = o4;
        }
    }
}

extern "C" int dic_attn_kv_post_ok(const dic_ctx *c, int M, const uint16_t *kv, size_t ld, int D, int rd, int qn,
                                   int qblk) {
    int lanes = qblk / 8;
    (void)c; /* both modes: the op sequence's bits (ops.h di_attn_kv_post) */
    return M >= 1 && M <= 64 && D % 256 == 0 && D <= 8192 && ld % 8 == 0 &&
           ((uintptr_t)kv & 15) == 0 && rd >= 0 && rd <= D && rd % 2 == 0 && qblk % 8 == 0 && lanes >= 1 &&
           lanes <= 32 && (lanes & (lanes - 1)) == 0 && qn >= 0 && qn <= D && qn % qblk == 0;
}

extern "C" cudaError_t dic_attn_kv_post(const dic_ctx *c, int M, uint16_t *kv, size_t ld, const float *w, int D,
                                        float eps, int rd, const float *cs, const float *sn, int qn, int qblk, int n,
                                        const int *src_row, uint16_t *const *dst) {
    if (M <= 0) return cudaSuccess;
    if (!dic_attn_kv_post_ok(c, M, kv, ld, D, rd, qn, qblk)) return cudaErrorInvalidValue;
    DIC_LAUNCH(k_kv_post, M, D / 8, 0, c->stream, kv, ld, w, D, eps, rd, cs, sn, qn, qblk, n, src_row, dst);
    DIC_LAUNCH_CHECK();
}
