/*
 * lab/q_proj/q_proj_fused.cu — src/ops/cuda/dic_q_proj.cu as it was (docs/kernels/attention-decode.md §5
 * "Tried"): the fused one-launch query projection, opt-in in the product and never on by default, under
 * lab_ names (q_proj_lab.h). The product runs dic_rmsnorm + dic_gemm + dic_q_post.
 *
 * The file as it was:
 */
/*
 * lab_q_proj.cu — the attention's query projection at decode in one launch (ops.h di_q_proj, fast
 * mode, M <= 8): qrn = rmsnorm(qr, q_norm); q = bf16(qrn wq_b^T) (FP8 weights, the activation
 * quantisation of di_gemm); q_post (V4: the per-head BF16 norm; RoPE on the last rd dims of each head).
 *
 * k_q_proj is k_gemm_dec's FP8 path (dic_gemm_f16.cu: the same weight ring, scale loads before the
 * PDL wait, QV2 quantisation, HMMA steps and per-K-block fma) with one K split (each CTA owns all of
 * K, 64 output columns), plus
 *  - a prologue: every CTA reads the M raw rows of qr (16-byte pieces, thread t holds k = 8t .. 8t+7
 *    of each row: K <= 1024), takes the fp64 sum of the squares per row (warp shuffles, then the 4
 *    warps' sums in order; dic_rms_scale's exactness check and sequential fallback give k_rmsnorm's
 *    r bit for bit), y = bf16(w * (x * r)) as k_rmsnorm; CTA 0 stores y to qrn (a buffer apart from
 *    qr: the other CTAs still read the raw rows); then QV2's quantisation of y;
 *  - an epilogue per head (hd % 64 == 0, so a head is hd / 64 whole CTAs): the CTA's bf16-rounded
 *    M x 64 tile in shared memory; with the norm (V4), the CTAs of a head form a thread-block cluster
 *    and one warp per row reads the whole head through distributed shared memory in k_q_post's lane
 *    layout (lane L: 8-value chunks L and L + 32 of the head) and sums as k_q_post does (bf16 squares,
 *    per-lane sequential fp32, xor butterfly): the same r; then each CTA scales and rotates its own
 *    columns with k_q_post's formulas.
 * Bits: the rms scale is k_rmsnorm's (CPU-exact), the GEMM output is k_gemm_dec's with one split (the
 * sequence's when d_splits gives one: V4-Flash's wq_b, any K <= 512), q_post is k_q_post's: where the
 * sequence's GEMM has one split, every output (q and qrn) is bitwise the fast-mode three-launch
 * sequence's. A row's bits do not depend on M or on the other rows.
 */
#include <cuda_fp16.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_f16_widen.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_gemm_quant.cuh"
#include "ops/cuda/dic_head_norm.cuh"
#include "ops/cuda/dic_model.h"
#include "q_proj/q_proj_lab.h"

#define Q_BN 64   /* output columns per CTA */
#define Q_CK 128  /* k per ring stage */
#define Q_WRS 160 /* weight row stride in a stage (bytes) */
#define Q_MAXK 1024
#define Q_A16S(kper) (2 * (kper) + 64) /* f16 activation row stride (k_gemm_dec's D_A16S) */

typedef struct qargs {
    int M, K, nst, kper;
    int lab, lwb, nwb, spbm1;
    int hd, norm, rd, cl; /* cl: CTAs per cluster (hd / 64 with the norm, else 1) */
    float eps;
    const uint16_t *A; /* raw qr rows */
    size_t lda;
    const float *gw; /* q_norm weight (NULL: none) */
    uint16_t *An;    /* normalised rows (written by CTA 0) */
    size_t ldan;
    const uint8_t *w, *s;
    uint16_t *C;
    size_t ldc;
    const float *cs, *sn;
} qargs;

/* k_gemm_dec's helpers (dic_gemm_f16.cu), the same instructions */
static __device__ __forceinline__ void q_mma16816(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                  uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void q_cp16(void *dst, const void *src) {
    uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
static __device__ __forceinline__ void q_commit() { asm volatile("cp.async.commit_group;\n" ::); }
static __device__ __forceinline__ void q_wait_n(int n) {
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::); break;
    default: asm volatile("cp.async.wait_group 3;\n" ::); break;
    }
}
static __device__ __forceinline__ void q_cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void q_cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* 16 bytes of CTA `rank`'s shared memory at the address of p in this CTA */
static __device__ __forceinline__ uint4 q_ld_dsmem4(const void *p, int rank) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p), r;
    uint4 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(r)
                 : "memory");
    return v;
}
/* k_q_post's rotation of one pair (np_rot) */
static size_t q_smem(int nst, int kper) {
    return (size_t)nst * 64 * Q_WRS + 8 * (size_t)Q_A16S(kper) + 8 * (size_t)(kper / 32) * 4 + 64 * (size_t)(kper / 32);
}

static __global__ void __launch_bounds__(128) k_q_proj(const __grid_constant__ qargs a) {
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ double red[8][4];
    __shared__ float r_sh[8];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int K = a.K, M = a.M, nst = a.nst, kper = a.kper;
    const int nch = (K + Q_CK - 1) / Q_CK, nsb = K / 32, kps = kper / 32, a16s = Q_A16S(kper), kp8 = K >> 3;
    const int n0 = blockIdx.x * Q_BN; /* N % 64 == 0: every column of the tile exists */
    const uint8_t *W = a.w, *S = a.s;
    uint8_t *a16 = smem + (size_t)nst * 64 * Q_WRS;
    float *ssa = (float *)(a16 + 8 * a16s); /* [8][kps] activation scale per 32-k sub-block */
    uint8_t *ssw = (uint8_t *)(ssa + 8 * kps); /* [64][kps] weight scale byte per row and sub-block */

#define Q_ISSUE(c)                                                                                 \
    do {                                                                                           \
        const int kc_ = (c) * Q_CK, kl_ = min(Q_CK, K - kc_);                                      \
        uint8_t *sg_ = smem + ((c) % nst) * 64 * Q_WRS;                                            \
        _Pragma("unroll") for (int i_ = 0; i_ < 4; i_++) {                                         \
            int u_ = tid + 128 * i_, r_ = u_ >> 3, p_ = u_ & 7;                                     \
            if (p_ * 16 < kl_) q_cp16(sg_ + r_ * Q_WRS + p_ * 16, W + (size_t)(n0 + r_) * K + kc_ + p_ * 16); \
        }                                                                                          \
    } while (0)

    /* 1. before the PDL wait: weights of the first nst chunks, all weight scales, the norm weights */
    for (int c = 0; c < nst; c++) {
        Q_ISSUE(c);
        q_commit();
    }
    for (int u0 = 0; u0 < 64 * nsb; u0 += 8 * 128) {
        uint8_t b[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int u = u0 + tid + 128 * i, r = u / nsb, sb = u - r * nsb;
            b[i] = 0;
            if (u < 64 * nsb) b[i] = __ldg(S + (size_t)((n0 + r) >> a.lwb) * a.nwb + ((32 * sb) >> a.lwb));
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int u = u0 + tid + 128 * i, r = u / nsb, sb = u - r * nsb;
            if (u < 64 * nsb) ssw[r * kps + sb] = b[i];
        }
    }
    const bool act = tid < kp8; /* this thread holds k = 8 tid .. 8 tid + 7 of every row */
    float wv[8];
#pragma unroll
    for (int e = 0; e < 8; e++) wv[e] = 1.0f;
    if (act && a.gw) {
        const float4 w0 = __ldg((const float4 *)(a.gw + 8 * tid)), w1 = __ldg((const float4 *)(a.gw + 8 * tid + 4));
        wv[0] = w0.x, wv[1] = w0.y, wv[2] = w0.z, wv[3] = w0.w, wv[4] = w1.x, wv[5] = w1.y, wv[6] = w1.z, wv[7] = w1.w;
    }
    DIC_PDL_ENTER();

    /* 2. the rows: fp64 sums of squares (any order: dic_rms_scale), r per row */
    uint4 v[8];
#pragma unroll
    for (int m = 0; m < 8; m++) {
        v[m] = make_uint4(0u, 0u, 0u, 0u);
        if (m < M && act) v[m] = *(const uint4 *)(a.A + (size_t)m * a.lda + 8 * tid);
    }
#pragma unroll
    for (int m = 0; m < 8; m++) {
        if (m >= M) break; /* CTA-uniform */
        const uint32_t p[4] = {v[m].x, v[m].y, v[m].z, v[m].w};
        double ss = 0.0;
#pragma unroll
        for (int h = 0; h < 4; h++) {
            const double x0 = (double)dic_bf16_to_f32((uint16_t)(p[h] & 0xFFFFu));
            const double x1 = (double)dic_bf16_to_f32((uint16_t)(p[h] >> 16));
            ss = __dadd_rn(ss, __dmul_rn(x0, x0));
            ss = __dadd_rn(ss, __dmul_rn(x1, x1));
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) ss = __dadd_rn(ss, __shfl_xor_sync(0xFFFFFFFFu, ss, o));
        if (lane == 0) red[m][warp] = ss;
    }
    __syncthreads();
    if (tid < M) {
        double s = red[tid][0];
        for (int i = 1; i < 4; i++) s = __dadd_rn(s, red[tid][i]);
        r_sh[tid] = dic_rms_scale(s, a.A + (size_t)tid * a.lda, K, a.eps);
    }
    __syncthreads();

    /* 3. y = bf16(w * (x * r)) (k_rmsnorm), CTA 0 stores it; QV2's quantisation of y (dic_gemm_f16.cu):
     * ab / 8 consecutive lanes per act block, y * (1 / s) (s a power of two: the correctly rounded y / s) */
    {
        const int gsz = 1 << (a.lab - 3);
#pragma unroll
        for (int m = 0; m < 8; m++) {
            if (m >= M) break; /* CTA-uniform */
            const float r = r_sh[m];
            const uint32_t p[4] = {v[m].x, v[m].y, v[m].z, v[m].w};
            float y[8], amax = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                float f = __fmul_rn(dic_bf16_to_f32((uint16_t)((p[i >> 1] >> (16 * (i & 1))) & 0xFFFFu)), r);
                if (a.gw) f = __fmul_rn(wv[i], f);
                y[i] = dic_round_bf16(f);
                const float av = fabsf(y[i]);
                if (av > amax) amax = av;
            }
            if (blockIdx.x == 0 && act) {
                uint32_t o[4];
#pragma unroll
                for (int h = 0; h < 4; h++)
                    o[h] = (uint32_t)dic_f32_to_bf16(y[2 * h]) | ((uint32_t)dic_f32_to_bf16(y[2 * h + 1]) << 16);
                *(uint4 *)(a.An + (size_t)m * a.ldan + 8 * tid) = make_uint4(o[0], o[1], o[2], o[3]);
            }
            for (int o = 1; o < gsz; o <<= 1) { /* the lanes of one act block (whole warp shuffles) */
                const float tt = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
                if (tt > amax) amax = tt;
            }
            if (!act) continue;
            const float sc = dic_act_scale(amax), rc = __frcp_rn(sc);
            if ((tid & (gsz - 1)) == 0) {
                const int kq = (8 * tid) & ~((1 << a.lab) - 1);
                for (int j = 0; j < (1 << a.lab) >> 5; j++) ssa[m * kps + (kq >> 5) + j] = sc;
            }
            uint32_t h[8];
#pragma unroll
            for (int i = 0; i < 8; i++) h[i] = dic_e4m3_f16(__fmul_rn(y[i], rc));
            *(uint4 *)(a16 + m * a16s + 16 * tid) =
                make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
        }
    }

    /* 4. the k loop (k_gemm_dec's, one split): chunk c sits in cp.async group c */
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, P[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int r0 = 16 * warp + g, spbm1 = a.spbm1;
#pragma unroll 1
    for (int c = 0; c < nch; c++) {
        const uint8_t *sg = smem + (c % nst) * 64 * Q_WRS;
        const int kl_c = min(Q_CK, K - c * Q_CK);
        q_wait_n(c == 0 ? nst - 1 : max(nst - 2, 0));
        __syncthreads(); /* chunk c (and the activations) visible; chunk c - 1's readers done */
        if (c >= 1) {
            if (c + nst - 1 < nch) Q_ISSUE(c + nst - 1);
            q_commit();
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (32 * j < kl_c) {
                uint32_t pa[4], pb[4];
                const uint2 wa = *(const uint2 *)(sg + r0 * Q_WRS + 32 * j + 8 * t);
                const uint2 wb = *(const uint2 *)(sg + (r0 + 8) * Q_WRS + 32 * j + 8 * t);
                pa[0] = cvt_e4m3x2(wa.x & 0xFFFFu), pa[1] = cvt_e4m3x2(wa.x >> 16);
                pa[2] = cvt_e4m3x2(wa.y & 0xFFFFu), pa[3] = cvt_e4m3x2(wa.y >> 16);
                pb[0] = cvt_e4m3x2(wb.x & 0xFFFFu), pb[1] = cvt_e4m3x2(wb.x >> 16);
                pb[2] = cvt_e4m3x2(wb.y & 0xFFFFu), pb[3] = cvt_e4m3x2(wb.y >> 16);
                const uint4 qv = *(const uint4 *)(a16 + g * a16s + 2 * (Q_CK * c + 32 * j + 8 * t));
                q_mma16816(P, pa[0], pb[0], pa[1], pb[1], qv.x, qv.y);
                q_mma16816(P, pa[2], pb[2], pa[3], pb[3], qv.z, qv.w);
                if (((j + 1) & spbm1) == 0) { /* K-block complete: C = fma(P, s_act * s_w, C) */
                    const int sb = 4 * c + j - spbm1;
                    const float w0 = dic_e8m0_to_f32(ssw[r0 * kps + sb]), w1 = dic_e8m0_to_f32(ssw[(r0 + 8) * kps + sb]);
                    const float s0 = ssa[(2 * t) * kps + sb], s1 = ssa[(2 * t + 1) * kps + sb];
                    acc[0] = fmaf(P[0], s0 * w0, acc[0]);
                    acc[1] = fmaf(P[1], s1 * w0, acc[1]);
                    acc[2] = fmaf(P[2], s0 * w1, acc[2]);
                    acc[3] = fmaf(P[3], s1 * w1, acc[3]);
                    P[0] = P[1] = P[2] = P[3] = 0.0f;
                }
            }
        }
    }
#undef Q_ISSUE

    /* 5. the tile's bf16 outputs [8][64] into the drained ring */
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();
    uint16_t *ot = (uint16_t *)smem;
    {
        const int ia = 2 * t, ib = ia + 1;
        ot[ia * 64 + r0] = dic_f32_to_bf16(acc[0]);
        ot[ib * 64 + r0] = dic_f32_to_bf16(acc[1]);
        ot[ia * 64 + r0 + 8] = dic_f32_to_bf16(acc[2]);
        ot[ib * 64 + r0 + 8] = dic_f32_to_bf16(acc[3]);
    }
    const int hd = a.hd, hpos = (int)(blockIdx.x % (unsigned)(hd / Q_BN)); /* this tile's place in its head */
    if (a.norm) {
        /* 6. the per-head scale (k_q_post's sum): the head's tiles are the cluster's CTAs 0 .. cl - 1 */
        const int cl = a.cl, nc = hd / 8;
        if (cl > 1) {
            q_cluster_arrive();
            q_cluster_wait();
        } else {
            __syncthreads();
        }
        for (int m = warp; m < M; m += 4) { /* warp-uniform */
            float x[2][8];
#pragma unroll
            for (int k = 0; k < 2; k++) {
                const int ch = lane + 32 * k, col = 8 * ch;
                uint4 u = make_uint4(0u, 0u, 0u, 0u);
                if (ch < nc) {
                    const uint16_t *src = ot + m * 64 + (col & 63);
                    u = cl > 1 ? q_ld_dsmem4(src, col >> 6) : *(const uint4 *)src;
                }
                dic_bf16x8_to_f32(u, x[k]);
            }
            const float r = dic_head_rrms(x, hd, a.eps);
            if (lane == 0) r_sh[m] = r;
        }
        if (cl > 1) q_cluster_arrive(); /* this CTA's reads of the others' tiles are done */
        __syncthreads();
    }

    /* 7. scale, rotate the last rd columns of the head, store (k_q_post's formulas) */
    const int half = a.rd / 2, rs = hd - a.rd;
    for (int pi = tid; pi < M * 32; pi += 128) {
        const int m = pi >> 5, c2 = 2 * (pi & 31), hc = hpos * Q_BN + c2;
        float x0 = dic_bf16_to_f32(ot[m * 64 + c2]), x1 = dic_bf16_to_f32(ot[m * 64 + c2 + 1]);
        if (a.norm) {
            const float r = r_sh[m];
            x0 = dic_round_bf16(__fmul_rn(x0, r));
            x1 = dic_round_bf16(__fmul_rn(x1, r));
        }
        if (hc >= rs) {
            const int i = (hc - rs) / 2;
            dic_rot_bf16(&x0, &x1, a.cs[(size_t)m * half + i], a.sn[(size_t)m * half + i]);
        }
        *(uint32_t *)(a.C + (size_t)m * a.ldc + n0 + c2) =
            (uint32_t)dic_f32_to_bf16(x0) | ((uint32_t)dic_f32_to_bf16(x1) << 16);
    }
    if (a.norm && a.cl > 1) q_cluster_wait(); /* no CTA leaves while its tile may still be read */
}

/* ---- launcher --------------------------------------------------------------- */

static int q_pow2(int v) { return v > 0 && !(v & (v - 1)); }
static int q_ilog2(int v) { return __builtin_ctz((unsigned)v); }

static int g_qp_on = -1, g_qp_stmax = 0, g_qp_broken = 0;
/* fused only up to this M: measured 2026-11-30 (q_proj_bench, graph us, fused vs the three launches):
 * M=1 15.1 vs 20.4, M=2 17.1 vs 21.9, M=4 20.6 vs 23.6, M=8 29.0 vs 24.0 */
#define Q_FUSE_MAXM 4

static void qp_init(void) {
    if (g_qp_on >= 0) return;
    const char *e = (const char *)NULL /* lab: lab_q_proj_enable */;
    g_qp_on = e && e[0] == '1'; /* opt-in: no gain in the 4-layer b1 step (bench/RESULTS.md 2026-11-30) */
}
extern "C" void lab_q_proj_enable(int on) { /* on < 0: back to the environment's choice */
    if (on < 0) {
        g_qp_on = -1;
        qp_init();
        return;
    }
    g_qp_on = on ? 1 : 0;
}
extern "C" int lab_q_proj_enabled(void) {
    qp_init();
    return g_qp_on && !g_qp_broken;
}
extern "C" void lab_q_proj_config(int stmax) { g_qp_stmax = stmax; }

static int q_disjoint(const void *p, size_t pb, const void *q, size_t qb) {
    const char *a = (const char *)p, *b = (const char *)q;
    return a + pb <= b || b + qb <= a;
}

extern "C" int lab_q_proj_ok(const dic_ctx *c, int M, const uint16_t *qr, size_t ldqr, const uint16_t *qrn,
                             size_t ldqrn, const dic_wmat *W, int act_block, const uint16_t *q, size_t ldq, int nheads,
                             int hd, int rd) {
    if (c->batch_invariant || !lab_q_proj_enabled() || M < 1 || M > Q_FUSE_MAXM || !W || W->fmt != 2) return 0;
    const int K = W->k, wbl = W->wblock, kb = act_block < wbl ? act_block : wbl;
    if (K < 32 || K > Q_MAXK || !q_pow2(act_block) || act_block < 32 || act_block > Q_CK || !q_pow2(wbl) ||
        wbl < 32 || kb > Q_CK || K % act_block || K % 32)
        return 0;
    if (hd < Q_BN || hd % Q_BN || hd > 512 || nheads < 1 || (long long)W->n != (long long)nheads * hd || rd < 0 ||
        rd > hd || rd % 2)
        return 0;
    if (((uintptr_t)qr & 15) || ldqr % 8 || ((uintptr_t)qrn & 15) || ldqrn % 8 || ((uintptr_t)q & 15) || ldq % 8 ||
        ((uintptr_t)W->w & 15) || !W->scale)
        return 0;
    const size_t rb = ((size_t)(M - 1) * ldqr + (size_t)K) * 2, nb = ((size_t)(M - 1) * ldqrn + (size_t)K) * 2;
    const size_t ob = ((size_t)(M - 1) * ldq + (size_t)W->n) * 2;
    return q_disjoint(qr, rb, qrn, nb) && q_disjoint(q, ob, qr, rb) && q_disjoint(q, ob, qrn, nb);
}

/* the three launches (after a refused launch) */
static cudaError_t q_seq(const dic_ctx *c, int M, const uint16_t *qr, size_t ldqr, const float *q_norm, float eps,
                         uint16_t *qrn, size_t ldqrn, const dic_wmat *W, int act_block, uint16_t *q, size_t ldq,
                         int nheads, int hd, int norm, int rd, const float *cs, const float *sn) {
    cudaError_t e = dic_rmsnorm(c, M, qr, ldqr, q_norm, W->k, eps, qrn, ldqrn);
    if (e == cudaSuccess) e = dic_gemm(c, M, qrn, ldqrn, W, act_block, NULL, q, ldq);
    if (e == cudaSuccess) e = dic_q_post(c, M, q, ldq, nheads, hd, norm, eps, rd, cs, sn);
    return e;
}

extern "C" cudaError_t lab_q_proj(const dic_ctx *c, int M, const uint16_t *qr, size_t ldqr, const float *q_norm,
                                  float eps, uint16_t *qrn, size_t ldqrn, const dic_wmat *W, int act_block, uint16_t *q,
                                  size_t ldq, int nheads, int hd, int norm, int rd, const float *cs, const float *sn) {
    if (!lab_q_proj_ok(c, M, qr, ldqr, qrn, ldqrn, W, act_block, q, ldq, nheads, hd, rd)) return cudaErrorNotSupported;
    const int K = W->k, wbl = W->wblock, kb = act_block < wbl ? act_block : wbl;
    const int nch = (K + Q_CK - 1) / Q_CK, cl = norm ? hd / Q_BN : 1;
    qargs a;
    memset(&a, 0, sizeof a);
    /* ring stages: clusters of 8 take 2 (40 KB: 5 CTAs per SM, the 512-CTA grid in one wave; k_gemm_dec's
     * wo_b measurement), else k_gemm_dec's rule */
    int stmax = g_qp_stmax > 0 ? g_qp_stmax : nch <= 4 ? 4 : cl > 1 ? 2 : 3;
    if (stmax > 4) stmax = 4;
    a.M = M, a.K = K, a.kper = nch * Q_CK, a.nst = nch < stmax ? nch : stmax;
    a.lab = q_ilog2(act_block), a.lwb = q_ilog2(wbl), a.nwb = K / wbl, a.spbm1 = kb / 32 - 1;
    a.hd = hd, a.norm = norm ? 1 : 0, a.rd = rd, a.cl = cl, a.eps = eps;
    a.A = qr, a.lda = ldqr, a.gw = q_norm, a.An = qrn, a.ldan = ldqrn;
    a.w = (const uint8_t *)W->w, a.s = W->scale, a.C = q, a.ldc = ldq, a.cs = cs, a.sn = sn;
    const size_t smem = q_smem(a.nst, a.kper);
    /* the dynamic shared memory this launch needs (the static arrays count against the same 227 KB,
     * so asking for the whole opt-in size fails) */
    static size_t attr_smem;
    if (smem > 48 * 1024 && smem > attr_smem) {
        if (cudaFuncSetAttribute(k_q_proj, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess) {
            (void)cudaGetLastError();
            g_qp_broken = 1;
            return q_seq(c, M, qr, ldqr, q_norm, eps, qrn, ldqrn, W, act_block, q, ldq, nheads, hd, norm, rd, cs, sn);
        }
        attr_smem = smem;
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[2];
    int na = 0;
    if (cl > 1) {
        at[na].id = cudaLaunchAttributeClusterDimension;
        at[na].val.clusterDim.x = (unsigned)cl, at[na].val.clusterDim.y = 1, at[na].val.clusterDim.z = 1;
        na++;
    }
    if (dic_pdl_take()) {
        at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[na].val.programmaticStreamSerializationAllowed = 1;
        na++;
    }
    cfg.gridDim = dim3((unsigned)(W->n / Q_BN), 1, 1);
    cfg.blockDim = dim3(128);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = c->stream;
    cfg.attrs = at;
    cfg.numAttrs = na;
    cudaError_t e = cudaLaunchKernelEx(&cfg, k_q_proj, a);
    if (e != cudaSuccess) { /* e.g. clusters refused: the three launches, here and for good */
        (void)cudaGetLastError();
        g_qp_broken = 1;
        return q_seq(c, M, qr, ldqr, q_norm, eps, qrn, ldqrn, W, act_block, q, ldq, nheads, hd, norm, rd, cs, sn);
    }
    return cudaSuccess;
}
