/*
 * dic_attention.cu — sparse attention with a per-head sink (ops.h
 * di_sparse_attn; docs/architecture.md §3.6, §4.4 step 5), bit-identical to
 * src/ops/cpu/attention.c (and its AVX-512 twin).
 *
 * One CTA handles one query row and a group of HG heads (1, 2, 4 or 8;
 * fewer heads per CTA when rows are few, so that small batches still fill
 * the GPU). The row's entries are consumed in blocks of 64 in the given
 * order, exactly as the CPU does:
 *   1. the block's KV rows are copied once into shared memory (K = V: the
 *      same copy serves the logits and P.V of every head of the group);
 *   2. logits: a group of 16 threads computes dot products with thread l
 *      as the CPU's lane l (pairs 32s + 2l + 1, then 32s + 2l, in s order;
 *      fmaf equals acc + q*k since bf16 products are exact in fp32), then
 *      the lane tree l += l+8, +4, +2, +1 by shuffles; times scale;
 *   3. per head (one warp): block max, p = exp(l - M'), a = exp(M - M'),
 *      the sequential fp32 sum of p (lane 0, entries in order),
 *      den = den * a + sum;
 *   4. P.V: each thread owns one column pair of every head of the group in
 *      registers: o *= a, then o = fmaf(bf16(p_j), v_j, o) for j in order
 *      (exact product: the CPU's o += p * v), skipping absent entries and
 *      p == 0 as the CPU does.
 * Finally out = bf16(o / (den + exp(sink - M))).
 *
 * Cost of exactness: the CPU's per-lane fp32 order rules out the tensor
 * cores (their fp32 accumulation inside an MMA is not a sequence of
 * rounded adds), so this runs on the FMA pipes. The decode work is
 * 2 * nheads * hd FMAs per entry for 2 * hd bytes of KV (64 heads, 512 dims:
 * 64 FMAs per byte), compute-bound on H200 at ~1/10 of a wgmma BF16
 * version; a tensor-core kernel would change logits and outputs by fp32
 * rounding (relative ~1e-6 on logits) and lose bitwise parity.
 */
#include "ops/cuda/dic_common.cuh"

#define AT_THREADS 256
#define AT_BLOCK 64
#define AT_MAXHD 512
#define AT_HG 8

/* Shared layout (dynamic): kvs [64][hd + 8] bf16 (16-byte row pad against
 * bank conflicts), qs [HG][hd] fp32, lg [HG][64] logits, pr [64][8] bf16
 * probabilities as fp32, ptrs [64], a / mx / den [8]. */
static size_t at_smem(int hd) {
    return (size_t)AT_BLOCK * (hd + 8) * 2 + (size_t)AT_HG * hd * 4 + AT_HG * AT_BLOCK * 4 + AT_BLOCK * AT_HG * 4 +
           AT_BLOCK * 8 + 3 * AT_HG * 4;
}

static __global__ void __launch_bounds__(AT_THREADS) k_sparse_attn(const uint16_t *q, size_t ldq, int nheads, int hd,
                                                                   int HG, const uint16_t *const *kv,
                                                                   size_t kv_stride, const int *n_idx,
                                                                   const float *sink, float scale, uint16_t *out,
                                                                   size_t ldo) {
    DIC_PDL_ENTER();
    extern __shared__ __align__(16) unsigned char at_sm[];
    const int kst = hd + 8;
    uint16_t *kvs = (uint16_t *)at_sm;
    float *qs = (float *)(at_sm + (size_t)AT_BLOCK * kst * 2);
    float *lg = qs + AT_HG * hd;
    float *pr = lg + AT_HG * AT_BLOCK;
    const uint16_t **ptrs = (const uint16_t **)(pr + AT_BLOCK * AT_HG);
    float *as = (float *)(ptrs + AT_BLOCK), *mxs = as + AT_HG, *dens = mxs + AT_HG;

    const int tid = threadIdx.x, m = blockIdx.y, h0 = blockIdx.x * HG;
    const int nh = nheads - h0 < HG ? nheads - h0 : HG;
    const int n = n_idx[m];
    const uint16_t *const *kvm = kv + (size_t)m * kv_stride;
    const uint16_t *qm = q + (size_t)m * ldq + (size_t)h0 * hd;
    for (int i = tid; i < nh * hd; i += AT_THREADS) qs[i] = dic_bf16_to_f32(qm[i]);
    if (tid < AT_HG) {
        mxs[tid] = -INFINITY;
        dens[tid] = 0.0f;
    }
    const int cp = hd / 2, dp = tid; /* P.V: this thread's column pair */
    float o0[AT_HG], o1[AT_HG];
#pragma unroll
    for (int h = 0; h < AT_HG; h++) o0[h] = o1[h] = 0.0f;

    const int g = tid >> 4, l = tid & 15; /* logits: 16 groups of 16 lanes */
    const unsigned gmask = 0xFFFFu << (tid & 16); /* the groups of a warp may run different tile counts */
    const int HT = HG < 4 ? HG : 4;       /* heads per logits tile */
    for (int b0 = 0; b0 < n; b0 += AT_BLOCK) {
        const int bn = n - b0 < AT_BLOCK ? n - b0 : AT_BLOCK;
        __syncthreads(); /* previous block's readers are done */
        if (tid < AT_BLOCK) ptrs[tid] = tid < bn ? kvm[b0 + tid] : NULL;
        __syncthreads();
        /* 1. copy the block's rows (absent ones as zeros) */
        const int c8 = hd / 8;
        for (int c = tid; c < AT_BLOCK * c8; c += AT_THREADS) {
            int j = c / c8, off = (c % c8) * 8;
            const uint16_t *p = ptrs[j];
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (p) {
                if (((uintptr_t)p & 15) == 0) {
                    v = *(const uint4 *)(p + off);
                } else {
                    uint16_t t[8];
                    for (int e = 0; e < 8; e++) t[e] = p[off + e];
                    v.x = t[0] | ((uint32_t)t[1] << 16);
                    v.y = t[2] | ((uint32_t)t[3] << 16);
                    v.z = t[4] | ((uint32_t)t[5] << 16);
                    v.w = t[6] | ((uint32_t)t[7] << 16);
                }
            }
            *(uint4 *)(kvs + (size_t)j * kst + off) = v;
        }
        __syncthreads();
        /* 2. logits, tiles of HT heads x 4 entries per 16-lane group */
        const int nhq = (nh + HT - 1) / HT, neq = (bn + 3) / 4;
        for (int tile = g; tile < nhq * neq; tile += AT_THREADS / 16) {
            const int hq = (tile / neq) * HT, e0 = (tile % neq) * 4;
            float acc[4][4];
#pragma unroll
            for (int a = 0; a < 4; a++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[a][e] = 0.0f;
            for (int s = 0; s < hd; s += 32) {
                float kx[4], ky[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    uint32_t u = *(const uint32_t *)(kvs + (size_t)(e0 + e) * kst + s + 2 * l);
                    kx[e] = __uint_as_float(u << 16);
                    ky[e] = __uint_as_float(u & 0xFFFF0000u);
                }
#pragma unroll
                for (int a = 0; a < 4; a++) {
                    if (a >= HT) break;
                    int h = hq + a < nh ? hq + a : nh - 1;
                    float2 qq = *(const float2 *)(qs + (size_t)h * hd + s + 2 * l);
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        acc[a][e] = fmaf(qq.y, ky[e], acc[a][e]); /* odd element first */
                        acc[a][e] = fmaf(qq.x, kx[e], acc[a][e]);
                    }
                }
            }
#pragma unroll
            for (int a = 0; a < 4; a++) {
                if (a >= HT) break; /* uniform over the CTA */
#pragma unroll
                for (int e = 0; e < 4; e++)
#pragma unroll
                    for (int wd = 8; wd >= 1; wd >>= 1)
                        acc[a][e] = __fadd_rn(acc[a][e], __shfl_down_sync(gmask, acc[a][e], wd, 16));
            }
            if (l == 0) {
#pragma unroll
                for (int a = 0; a < 4; a++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int h = hq + a, j = e0 + e;
                        if (a < HT && h < nh && j < bn)
                            lg[h * AT_BLOCK + j] = ptrs[j] ? __fmul_rn(acc[a][e], scale) : -INFINITY;
                    }
            }
        }
        __syncthreads();
        /* 3. online softmax bookkeeping, warp w = head w */
        const int w = tid >> 5, ln = tid & 31;
        if (w < nh) {
            float la = ln < bn ? lg[w * AT_BLOCK + ln] : -INFINITY;
            float lb = ln + 32 < bn ? lg[w * AT_BLOCK + ln + 32] : -INFINITY;
            float bmax = fmaxf(la, lb); /* NaN logits ignored, as `l > bmax` */
            for (int o = 16; o > 0; o >>= 1) bmax = fmaxf(bmax, __shfl_xor_sync(0xFFFFFFFFu, bmax, o));
            float mx = mxs[w];
            float nmax = bmax > mx ? bmax : mx;
            float a = 1.0f;
            if (nmax == -INFINITY) {
                la = lb = 0.0f;
            } else {
                la = dic_expf(__fsub_rn(la, nmax));
                lb = dic_expf(__fsub_rn(lb, nmax));
                a = dic_expf(__fsub_rn(mx, nmax));
            }
            if (ln < bn) lg[w * AT_BLOCK + ln] = la;
            if (ln + 32 < bn) lg[w * AT_BLOCK + ln + 32] = lb;
            pr[ln * AT_HG + w] = dic_round_bf16(la);
            pr[(ln + 32) * AT_HG + w] = dic_round_bf16(lb);
            __syncwarp();
            if (ln == 0) {
                float sum = 0.0f;
                if (nmax != -INFINITY)
                    for (int j = 0; j < bn; j++) sum = __fadd_rn(sum, lg[w * AT_BLOCK + j]);
                dens[w] = __fadd_rn(__fmul_rn(dens[w], a), sum);
                mxs[w] = nmax;
                as[w] = a;
            }
        }
        __syncthreads();
        /* 4. P.V, entries in order */
        if (dp < cp) {
#pragma unroll
            for (int h = 0; h < AT_HG; h++) {
                float a = h < nh ? as[h] : 1.0f;
                o0[h] = __fmul_rn(o0[h], a);
                o1[h] = __fmul_rn(o1[h], a);
            }
            for (int j = 0; j < bn; j++) {
                if (!ptrs[j]) continue; /* a zero row adds nothing */
                uint32_t u = *(const uint32_t *)(kvs + (size_t)j * kst + 2 * dp);
                float v0 = __uint_as_float(u << 16), v1 = __uint_as_float(u & 0xFFFF0000u);
                float4 pa = *(const float4 *)(pr + j * AT_HG), pb = *(const float4 *)(pr + j * AT_HG + 4);
                float p[AT_HG] = {pa.x, pa.y, pa.z, pa.w, pb.x, pb.y, pb.z, pb.w};
#pragma unroll
                for (int h = 0; h < AT_HG; h++) {
                    if (h < nh && p[h] != 0.0f) {
                        o0[h] = fmaf(p[h], v0, o0[h]);
                        o1[h] = fmaf(p[h], v1, o1[h]);
                    }
                }
            }
        }
    }
    __syncthreads();
    if (dp < cp) {
#pragma unroll
        for (int h = 0; h < AT_HG; h++) {
            if (h >= nh) break;
            float d = __fadd_rn(dens[h], dic_expf(__fsub_rn(sink[h0 + h], mxs[h])));
            uint16_t *y = out + (size_t)m * ldo + (size_t)(h0 + h) * hd + 2 * dp;
            y[0] = dic_f32_to_bf16(__fdiv_rn(o0[h], d));
            y[1] = dic_f32_to_bf16(__fdiv_rn(o1[h], d));
        }
    }
}


/* the fused kernel (no scratch) */
static cudaError_t at_fused(const dic_ctx *c, int M, const uint16_t *q, size_t ldq, int nheads, int hd,
                            const uint16_t *const *kv, size_t kv_stride, const int *n_idx,
                            const float *sink, float scale, uint16_t *out, size_t ldo) {
    if (M <= 0 || nheads <= 0) return cudaSuccess;
    if (hd <= 0 || hd % 32 != 0 || hd > AT_MAXHD) return cudaErrorInvalidValue;
    /* heads per CTA: 8, unless that leaves SMs idle */
    int HG = AT_HG, sms = c->num_sms > 0 ? c->num_sms : 132;
    while (HG > 1 && (long long)M * ((nheads + HG - 1) / HG) < 2LL * sms) HG >>= 1;
    size_t smem = at_smem(hd);
    cudaError_t e = cudaFuncSetAttribute(k_sparse_attn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    dim3 grid((unsigned)((nheads + HG - 1) / HG), (unsigned)M);
    DIC_LAUNCH(k_sparse_attn, grid, AT_THREADS, smem, c->stream, q, ldq, nheads, hd, HG, kv, kv_stride, n_idx, sink, scale,
                                                         out, ldo);
    DIC_LAUNCH_CHECK();
}

/* ===========================================================================
 * Three-phase version (the caller gives scratch: dic_sparse_attn_scratch).
 *
 * Bitwise parity pins each value's rounding sequence, not the schedule, so
 * the work is split where the CPU's recurrences allow it:
 *   A. logits (k_ax_logits_*): every l[m][j][h] = fp32(q_h . k_j) * scale is
 *      independent: CTA = (row, entry block, head group), each 16-lane group
 *      owns a register tile of TH heads x TE entries and computes the CPU's
 *      16 lane chains (lane l: pairs 32s + 2l + 1, then 32s + 2l) and the
 *      lane tree, as the fused kernel above. Written to scratch [m][j][h].
 *   B. softmax bookkeeping (k_ax_softmax): per (row, head) the 64-entry
 *      block maxima, their prefix max M_b (the CPU's running max), the block
 *      factors a_b = exp(M_{b-1} - M_b), p = exp(l - M_b) with the
 *      sequential in-block fp32 sum, den = den * a_b + sum_b over blocks,
 *      and the final divisor den + exp(sink - M). Writes bf16(p) as fp32
 *      [m][j][h], a_b [m][b][h] and the divisor [m][h].
 *   C. P.V (k_ax_pv_*): each (head, column) chain o = o * a_b, then
 *      o = fmaf(bf16(p_j), v_j, o) for j in entry order (skipping p == 0,
 *      which covers absent rows), is independent of the others: CTA = (row,
 *      head group, column slice), each thread a register tile of TH heads x
 *      NCOL columns; KV column slices and p stream through a cp.async ring.
 *      Finally out = bf16(o / divisor).
 * Each row's result depends only on that row (batch invariance).
 * ======================================================================== */

#define AX_BLK 64  /* the CPU's softmax block */
#define AX_SHG 8   /* heads per softmax CTA */
#define AX_MT 8    /* largest register tile side */

static __device__ __forceinline__ void ax_cp4(void *dst, const void *src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
}
static __device__ __forceinline__ void ax_cp8(void *dst, const void *src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(src));
}
static __device__ __forceinline__ void ax_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* wait until at most n groups are pending (n a constant after inlining) */
static __device__ __forceinline__ void ax_wait(const int n) {
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;\n" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    }
}

/* 4 bf16 from src (NULL: zeros; any 2-byte alignment) to 8-byte aligned dst. */
static __device__ __forceinline__ void ax_copy4(uint16_t *dst, const uint16_t *src) {
    if (!src) {
        *(uint2 *)dst = make_uint2(0u, 0u);
    } else if (((uintptr_t)src & 7) == 0) {
        ax_cp8(dst, src);
    } else {
        uint32_t a = src[0] | ((uint32_t)src[1] << 16), b = src[2] | ((uint32_t)src[3] << 16);
        *(uint2 *)dst = make_uint2(a, b);
    }
}

/* ---- A. logits ---- */

static size_t ax_logits_smem(int hd, int TH, int TE, int CH, int CE) {
    return (size_t)CE * (hd + 32 / TE) * 2 + (size_t)CH * (hd + 32 / TH) * 2 + (size_t)CE * sizeof(void *);
}

static __device__ __forceinline__ void ax_logits_body(const uint16_t *q, size_t ldq, int H, int hd,
                                                      const uint16_t *const *kv, size_t NE, const int *n_idx,
                                                      float scale, float *lg, const int TH, const int TE, const int CH,
                                                      const int CE) {
    extern __shared__ __align__(16) unsigned char ax_sm[];
    /* row pads: the two 16-lane groups of a warp read rows TE (keys) or TH
     * (queries) apart; a pad of 32/T elements puts them 16 banks apart */
    const int kst = hd + 32 / TE, qst = hd + 32 / TH;
    const uint16_t **ptrs = (const uint16_t **)ax_sm;
    uint16_t *ks = (uint16_t *)(ax_sm + (size_t)CE * sizeof(void *));
    uint16_t *qs = ks + (size_t)CE * kst;
    const int T = 16 * (CH / TH) * (CE / TE);
    const int tid = threadIdx.x, m = blockIdx.z, e0 = blockIdx.x * CE, h0 = blockIdx.y * CH;
    int n = n_idx[m];
    if ((size_t)n > NE) n = (int)NE;
    if (e0 >= n) return; /* uniform over the CTA */
    const int bn = n - e0 < CE ? n - e0 : CE;
    const uint16_t *const *kvm = kv + (size_t)m * NE + e0;
    for (int j = tid; j < CE; j += T) ptrs[j] = j < bn ? kvm[j] : NULL;
    __syncthreads();
    /* a warp per row, its lanes along the row (no divisions) */
    const int nw = T / 32, wp = tid >> 5, ln4 = (tid & 31) * 4;
    for (int j = wp; j < CE; j += nw) {
        const uint16_t *p = ptrs[j];
        for (int o = ln4; o < hd; o += 128) ax_copy4(ks + (size_t)j * kst + o, p ? p + o : NULL);
    }
    const uint16_t *qm = q + (size_t)m * ldq;
    for (int h = wp; h < CH; h += nw) {
        int hh = h0 + h < H ? h0 + h : H - 1; /* padding heads: any valid row, never stored */
        for (int o = ln4; o < hd; o += 128) ax_copy4(qs + (size_t)h * qst + o, qm + (size_t)hh * hd + o);
    }
    ax_commit();
    ax_wait(0);
    __syncthreads();

    const int l = tid & 15, t = tid >> 4, nth = CH / TH, th = t % nth, te = t / nth;
    const uint16_t *kb = ks + (size_t)te * TE * kst + 2 * l, *qb = qs + (size_t)th * TH * qst + 2 * l;
    float acc[AX_MT][AX_MT]; /* TH x TE used (constants after inlining) */
#pragma unroll
    for (int a = 0; a < TH; a++)
#pragma unroll
        for (int e = 0; e < TE; e++) acc[a][e] = 0.0f;
    for (int s = 0; s < hd; s += 32) {
        float kx[AX_MT], ky[AX_MT];
#pragma unroll
        for (int e = 0; e < TE; e++) {
            uint32_t u = *(const uint32_t *)(kb + (size_t)e * kst + s);
            kx[e] = __uint_as_float(u << 16);
            ky[e] = __uint_as_float(u & 0xFFFF0000u);
        }
#pragma unroll
        for (int a = 0; a < TH; a++) {
            uint32_t u = *(const uint32_t *)(qb + (size_t)a * qst + s);
            float qx = __uint_as_float(u << 16), qy = __uint_as_float(u & 0xFFFF0000u);
#pragma unroll
            for (int e = 0; e < TE; e++) {
                acc[a][e] = fmaf(qy, ky[e], acc[a][e]); /* odd element first */
                acc[a][e] = fmaf(qx, kx[e], acc[a][e]);
            }
        }
    }
    /* the lane tree l += l+8, +4, +2, +1 (a + b = b + a exactly) */
#pragma unroll
    for (int a = 0; a < TH; a++)
#pragma unroll
        for (int e = 0; e < TE; e++)
#pragma unroll
            for (int wd = 8; wd >= 1; wd >>= 1)
                acc[a][e] = __fadd_rn(acc[a][e], __shfl_down_sync(0xFFFFFFFFu, acc[a][e], wd, 16));
    if (l == 0) {
        float *lgm = lg + ((size_t)m * NE + e0) * H;
#pragma unroll
        for (int a = 0; a < TH; a++)
#pragma unroll
            for (int e = 0; e < TE; e++) {
                int h = h0 + th * TH + a, j = te * TE + e;
                if (h < H && j < bn) lgm[(size_t)j * H + h] = ptrs[j] ? __fmul_rn(acc[a][e], scale) : -INFINITY;
            }
    }
}

/* large batches: 8 x 8 tiles, 16 heads x 64 entries per CTA (256 threads) */
#define AXL_TH 8
#define AXL_TE 8
#define AXL_CH 16
#define AXL_CE 64
/* small batches: 4 x 4 tiles, 16 heads x 16 entries per CTA (256 threads) */
#define AXS_TH 4
#define AXS_TE 4
#define AXS_CH 16
#define AXS_CE 16

static __global__ void __launch_bounds__(256) k_ax_logits_l(const uint16_t *q, size_t ldq, int H, int hd,
                                                            const uint16_t *const *kv, size_t NE, const int *n_idx,
                                                            float scale, float *lg) {
    DIC_PDL_ENTER();
    ax_logits_body(q, ldq, H, hd, kv, NE, n_idx, scale, lg, AXL_TH, AXL_TE, AXL_CH, AXL_CE);
}
static __global__ void __launch_bounds__(256) k_ax_logits_s(const uint16_t *q, size_t ldq, int H, int hd,
                                                            const uint16_t *const *kv, size_t NE, const int *n_idx,
                                                            float scale, float *lg) {
    DIC_PDL_ENTER();
    ax_logits_body(q, ldq, H, hd, kv, NE, n_idx, scale, lg, AXS_TH, AXS_TE, AXS_CH, AXS_CE);
}

/* ---- B. softmax bookkeeping: CTA = (row, hs heads); the row's logits of
 * those heads staged in shared memory, items (head, block) or (head, entry) ---- */

static size_t ax_softmax_smem(int hs, size_t NE) {
    size_t nb = (NE + AX_BLK - 1) / AX_BLK;
    return ((size_t)hs * (NE + 1) + 3 * (size_t)hs * nb) * 4;
}

static __global__ void __launch_bounds__(256) k_ax_softmax(int H, int hs, size_t NE, const int *n_idx,
                                                           const float *sink, const float *lg, float *pr, float *ab,
                                                           float *dd) {
    DIC_PDL_ENTER();
    extern __shared__ float ax_sf[];
    const int NB = (int)((NE + AX_BLK - 1) / AX_BLK), lst = (int)NE + 1;
    float *lt = ax_sf, *bm = lt + (size_t)hs * lst, *as = bm + hs * NB, *sb = as + hs * NB;
    const int m = blockIdx.y, h0 = blockIdx.x * hs, tid = threadIdx.x, T = blockDim.x;
    const int nh = H - h0 < hs ? H - h0 : hs;
    int n = n_idx[m];
    if ((size_t)n > NE) n = (int)NE;
    const int nb = (n + AX_BLK - 1) / AX_BLK;
    const float *lgm = lg + (size_t)m * NE * H + h0;
    float *prm = pr + (size_t)m * NE * H + h0;
    for (int i = tid; i < n * nh; i += T) {
        int j = i / nh, h = i - j * nh;
        lt[h * lst + j] = lgm[(size_t)j * H + h];
    }
    __syncthreads();
    /* 1. block maxima (NaN ignored, as `l > bmax`) */
    for (int it = tid; it < nh * nb; it += T) {
        int h = it / nb, b = it - h * nb, j1 = (b + 1) * AX_BLK < n ? (b + 1) * AX_BLK : n;
        float mx = -INFINITY;
        for (int j = b * AX_BLK; j < j1; j++) {
            float l = lt[h * lst + j];
            if (l > mx) mx = l;
        }
        bm[h * NB + b] = mx;
    }
    __syncthreads();
    /* 2. running max and block factors */
    if (tid < nh) {
        float mx = -INFINITY;
        for (int b = 0; b < nb; b++) {
            float bmax = bm[tid * NB + b], nmax = bmax > mx ? bmax : mx;
            float a = nmax == -INFINITY ? 1.0f : dic_expf(__fsub_rn(mx, nmax));
            bm[tid * NB + b] = nmax;
            as[tid * NB + b] = a;
            ab[((size_t)m * NB + b) * H + h0 + tid] = a;
            mx = nmax;
        }
    }
    __syncthreads();
    /* 3. p = exp(l - M_b) (0 where M_b = -inf), bf16(p) out */
    for (int i = tid; i < n * nh; i += T) {
        int j = i / nh, h = i - j * nh;
        float nmax = bm[h * NB + j / AX_BLK], p = 0.0f;
        if (nmax != -INFINITY) p = dic_expf(__fsub_rn(lt[h * lst + j], nmax));
        lt[h * lst + j] = p;
        prm[(size_t)j * H + h] = dic_round_bf16(p);
    }
    __syncthreads();
    /* 4. sequential block sums */
    for (int it = tid; it < nh * nb; it += T) {
        int h = it / nb, b = it - h * nb, j1 = (b + 1) * AX_BLK < n ? (b + 1) * AX_BLK : n;
        float sum = 0.0f;
        if (bm[h * NB + b] != -INFINITY)
            for (int j = b * AX_BLK; j < j1; j++) sum = __fadd_rn(sum, lt[h * lst + j]);
        sb[h * NB + b] = sum;
    }
    __syncthreads();
    /* 5. denominator recurrence and the divisor */
    if (tid < nh) {
        float den = 0.0f, mx = -INFINITY;
        for (int b = 0; b < nb; b++) {
            den = __fadd_rn(__fmul_rn(den, as[tid * NB + b]), sb[tid * NB + b]);
            mx = bm[tid * NB + b];
        }
        dd[(size_t)m * H + h0 + tid] = __fadd_rn(den, dic_expf(__fsub_rn(sink[h0 + tid], mx)));
    }
}

/* ---- C. P.V ---- */

static __host__ __device__ __forceinline__ size_t ax_pv_stage(int HG, int CW) { return ((size_t)AX_BLK * CW * 2 + (size_t)AX_BLK * HG * 4 + (size_t)HG * 4 + 15) & ~(size_t)15; }

static __device__ __forceinline__ void ax_pv_issue(unsigned char *st, int c, int nc, int n, int m, int h0, int c0,
                                                   int H, int hd, const uint16_t *const *kvm, size_t NE, int NB,
                                                   const float *pr, const float *ab, int T, const int HG,
                                                   const int CW) {
    if (c < nc) {
        uint16_t *vs = (uint16_t *)st;
        float *ps = (float *)(st + (size_t)AX_BLK * CW * 2), *as = ps + AX_BLK * HG;
        const int b0 = c * AX_BLK, bn = n - b0 < AX_BLK ? n - b0 : AX_BLK, tid = threadIdx.x;
        const int q4 = CW / 4;
#pragma unroll 4
        for (int i = tid; i < bn * q4; i += T) {
            int j = i / q4, cc = (i - j * q4) * 4, col = c0 + cc;
            const uint16_t *p = (const uint16_t *)__ldg((const unsigned long long *)(kvm + b0 + j));
            ax_copy4(vs + (size_t)j * CW + cc, p && col < hd ? p + col : NULL);
        }
        const float *prm = pr + ((size_t)m * NE + b0) * H + h0;
        for (int i = tid; i < bn * HG; i += T) {
            int j = i / HG, h = i - j * HG;
            if (h0 + h < H) ax_cp4(ps + i, prm + (size_t)j * H + h);
            else ps[i] = 0.0f;
        }
        for (int h = tid; h < HG; h += T) {
            if (h0 + h < H) ax_cp4(as + h, ab + ((size_t)m * NB + c) * H + h0 + h);
            else as[h] = 1.0f;
        }
    }
    ax_commit(); /* an empty group past the end keeps the wait counts uniform */
}

static __device__ __forceinline__ void ax_pv_body(int H, int hd, const uint16_t *const *kv, size_t NE,
                                                  const int *n_idx, const float *pr, const float *ab,
                                                  const float *dd, uint16_t *out, size_t ldo, const int TH,
                                                  const int NCOL, const int HG, const int CW, const int NS) {
    extern __shared__ __align__(16) unsigned char ax_sm[];
    const int T = (HG / TH) * (CW / NCOL);
    const size_t stb = ax_pv_stage(HG, CW);
    const int NB = (int)((NE + AX_BLK - 1) / AX_BLK);
    const int tid = threadIdx.x, m = blockIdx.z, h0 = blockIdx.y * HG, c0 = blockIdx.x * CW;
    int n = n_idx[m];
    if ((size_t)n > NE) n = (int)NE;
    const int nc = (n + AX_BLK - 1) / AX_BLK;
    const uint16_t *const *kvm = kv + (size_t)m * NE;
    const int ntc = CW / NCOL, tc = tid % ntc, th = tid / ntc;

    float o[AX_MT][AX_MT]; /* TH x NCOL used */
#pragma unroll
    for (int h = 0; h < TH; h++)
#pragma unroll
        for (int k = 0; k < NCOL; k++) o[h][k] = 0.0f;

    for (int s = 0; s < NS - 1; s++)
        ax_pv_issue(ax_sm + (size_t)s * stb, s, nc, n, m, h0, c0, H, hd, kvm, NE, NB, pr, ab, T, HG, CW);
    for (int c = 0; c < nc; c++) {
        ax_wait(NS - 2);
        __syncthreads(); /* chunk c landed; chunk c - 1's stage is free */
        ax_pv_issue(ax_sm + (size_t)((c + NS - 1) % NS) * stb, c + NS - 1, nc, n, m, h0, c0, H, hd, kvm, NE, NB, pr,
                    ab, T, HG, CW);
        const unsigned char *st = ax_sm + (size_t)(c % NS) * stb;
        const uint16_t *vs = (const uint16_t *)st;
        const float *ps = (const float *)(st + (size_t)AX_BLK * CW * 2), *as = ps + AX_BLK * HG;
        const int bn = n - c * AX_BLK < AX_BLK ? n - c * AX_BLK : AX_BLK;
#pragma unroll
        for (int h = 0; h < TH; h++) {
            float a = as[th * TH + h];
#pragma unroll
            for (int k = 0; k < NCOL; k++) o[h][k] = __fmul_rn(o[h][k], a);
        }
        const float *pj = ps + th * TH;
        const uint16_t *vj = vs + (NCOL == 8 ? 4 * tc : 2 * tc);
#pragma unroll 4
        for (int j = 0; j < bn; j++, pj += HG, vj += CW) {
            float p[AX_MT], v[AX_MT];
            if (TH % 4 == 0) {
#pragma unroll
                for (int h = 0; h < TH; h += 4) {
                    float4 t4 = *(const float4 *)(pj + h);
                    p[h] = t4.x;
                    p[h + 1] = t4.y;
                    p[h + 2] = t4.z;
                    p[h + 3] = t4.w;
                }
            } else {
#pragma unroll
                for (int h = 0; h < TH; h++) p[h] = pj[h];
            }
            if (NCOL == 8) {
                uint2 u = *(const uint2 *)vj, w = *(const uint2 *)(vj + CW / 2);
                v[0] = __uint_as_float(u.x << 16);
                v[1] = __uint_as_float(u.x & 0xFFFF0000u);
                v[2] = __uint_as_float(u.y << 16);
                v[3] = __uint_as_float(u.y & 0xFFFF0000u);
                v[4] = __uint_as_float(w.x << 16);
                v[5] = __uint_as_float(w.x & 0xFFFF0000u);
                v[6] = __uint_as_float(w.y << 16);
                v[7] = __uint_as_float(w.y & 0xFFFF0000u);
            } else {
                uint32_t u = *(const uint32_t *)vj;
                v[0] = __uint_as_float(u << 16);
                v[1] = __uint_as_float(u & 0xFFFF0000u);
            }
            /* the CPU skips p == 0 (and absent rows, whose p is 0) */
            if (TH == 1) {
#pragma unroll
                for (int k = 0; k < NCOL; k++) {
                    float r = fmaf(p[0], v[k], o[0][k]);
                    o[0][k] = p[0] != 0.0f ? r : o[0][k];
                }
            } else {
                /* p is +0, positive or NaN (never -0): all nonzero iff the
                 * smallest bit pattern is; warp-uniform (one th per warp) */
                uint32_t mn = __float_as_uint(p[0]);
#pragma unroll
                for (int h = 1; h < TH; h++) mn = min(mn, __float_as_uint(p[h]));
                if (mn != 0u) {
#pragma unroll
                    for (int h = 0; h < TH; h++)
#pragma unroll
                        for (int k = 0; k < NCOL; k++) o[h][k] = fmaf(p[h], v[k], o[h][k]);
                } else {
#pragma unroll
                    for (int h = 0; h < TH; h++) {
                        if (p[h] != 0.0f) {
#pragma unroll
                            for (int k = 0; k < NCOL; k++) o[h][k] = fmaf(p[h], v[k], o[h][k]);
                        }
                    }
                }
            }
        }
    }
    ax_wait(0);
#pragma unroll
    for (int h = 0; h < TH; h++) {
        int hh = h0 + th * TH + h;
        if (hh >= H) break;
        float d = dd[(size_t)m * H + hh];
        uint16_t *y = out + (size_t)m * ldo + (size_t)hh * hd;
#pragma unroll
        for (int k = 0; k < NCOL; k++) {
            int col = c0 + (NCOL == 8 ? (k < 4 ? 4 * tc + k : CW / 2 + 4 * tc + k - 4) : 2 * tc + k);
            if (col < hd) y[col] = dic_f32_to_bf16(__fdiv_rn(o[h][k], d));
        }
    }
}

/* large batches: 8 heads x 8 columns per thread, 32 heads x 256 columns per CTA */
#define AVL_TH 8
#define AVL_NC 8
#define AVL_HG 32
#define AVL_CW 256
#define AVL_NS 2
/* small batches: 1 head x 2 columns per thread, 4 heads x 64 columns, deep ring */
#define AVS_TH 1
#define AVS_NC 2
#define AVS_HG 4
#define AVS_CW 64
#define AVS_NS 6

static __global__ void __launch_bounds__(128) k_ax_pv_l(int H, int hd, const uint16_t *const *kv, size_t NE,
                                                        const int *n_idx, const float *pr, const float *ab,
                                                        const float *dd, uint16_t *out, size_t ldo) {
    DIC_PDL_ENTER();
    ax_pv_body(H, hd, kv, NE, n_idx, pr, ab, dd, out, ldo, AVL_TH, AVL_NC, AVL_HG, AVL_CW, AVL_NS);
}
static __global__ void __launch_bounds__(128) k_ax_pv_s(int H, int hd, const uint16_t *const *kv, size_t NE,
                                                        const int *n_idx, const float *pr, const float *ab,
                                                        const float *dd, uint16_t *out, size_t ldo) {
    DIC_PDL_ENTER();
    ax_pv_body(H, hd, kv, NE, n_idx, pr, ab, dd, out, ldo, AVS_TH, AVS_NC, AVS_HG, AVS_CW, AVS_NS);
}

/* scratch layout: logits, probabilities [M][NE][H]; a [M][NB][H]; divisors [M][H] */
static size_t ax_al(size_t b) { return (b + 255) & ~(size_t)255; }

extern "C" size_t dic_sparse_attn_scratch(int M, int nheads, int max_entries) {
    if (M <= 0 || nheads <= 0 || max_entries <= 0) return 0;
    size_t ne = (size_t)max_entries, nb = (ne + AX_BLK - 1) / AX_BLK, mh = (size_t)M * nheads;
    return 2 * ax_al(mh * ne * 4) + ax_al(mh * nb * 4) + ax_al(mh * 4);
}

extern "C" cudaError_t dic_sparse_attn(const dic_ctx *c, int M, const uint16_t *q, size_t ldq, int nheads, int hd,
                                       const uint16_t *const *kv, size_t kv_stride, const int *n_idx,
                                       const float *sink, float scale, uint16_t *out, size_t ldo) {
    if (M <= 0 || nheads <= 0) return cudaSuccess;
    if (hd <= 0 || hd % 32 != 0 || hd > AT_MAXHD) return cudaErrorInvalidValue;
    size_t need = kv_stride > 0 && kv_stride <= (1u << 24) ? dic_sparse_attn_scratch(M, nheads, (int)kv_stride) : 0;
    if (!need || !c->scratch || c->scratch_cap < need || ax_softmax_smem(1, kv_stride) > 200 * 1024)
        return at_fused(c, M, q, ldq, nheads, hd, kv, kv_stride, n_idx, sink, scale, out, ldo);
    const size_t NE = kv_stride, NB = (NE + AX_BLK - 1) / AX_BLK, mh = (size_t)M * nheads;
    float *lg = (float *)c->scratch;
    float *pr = (float *)((char *)lg + ax_al(mh * NE * 4));
    float *ab = (float *)((char *)pr + ax_al(mh * NE * 4));
    float *dd = (float *)((char *)ab + ax_al(mh * NB * 4));
    const int sms = c->num_sms > 0 ? c->num_sms : 132;
    cudaError_t e;

    /* A */
    int big = (long long)M * ((NE + AXL_CE - 1) / AXL_CE) * ((nheads + AXL_CH - 1) / AXL_CH) >= 4LL * sms;
    if (big) {
        size_t sm = ax_logits_smem(hd, AXL_TH, AXL_TE, AXL_CH, AXL_CE);
        if ((e = cudaFuncSetAttribute(k_ax_logits_l, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm))) return e;
        dim3 g((unsigned)((NE + AXL_CE - 1) / AXL_CE), (unsigned)((nheads + AXL_CH - 1) / AXL_CH), (unsigned)M);
        DIC_LAUNCH(k_ax_logits_l, g, 16 * (AXL_CH / AXL_TH) * (AXL_CE / AXL_TE), sm, c->stream, q, ldq, nheads, hd, kv, NE,
                                                                                         n_idx, scale, lg);
    } else {
        size_t sm = ax_logits_smem(hd, AXS_TH, AXS_TE, AXS_CH, AXS_CE);
        if ((e = cudaFuncSetAttribute(k_ax_logits_s, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm))) return e;
        dim3 g((unsigned)((NE + AXS_CE - 1) / AXS_CE), (unsigned)((nheads + AXS_CH - 1) / AXS_CH), (unsigned)M);
        DIC_LAUNCH(k_ax_logits_s, g, 16 * (AXS_CH / AXS_TH) * (AXS_CE / AXS_TE), sm, c->stream, q, ldq, nheads, hd, kv, NE,
                                                                                         n_idx, scale, lg);
    }
    if ((e = cudaGetLastError())) return e;

    /* B: fewer heads per CTA when rows are few */
    int hs = AX_SHG;
    while (hs > 1 && ((long long)M * ((nheads + hs - 1) / hs) < 2LL * sms || ax_softmax_smem(hs, NE) > 200 * 1024))
        hs >>= 1;
    size_t smb = ax_softmax_smem(hs, NE);
    if ((e = cudaFuncSetAttribute(k_ax_softmax, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smb))) return e;
    DIC_LAUNCH(k_ax_softmax, dim3((unsigned)((nheads + hs - 1) / hs), (unsigned)M), 256, smb, c->stream, 
        nheads, hs, NE, n_idx, sink, lg, pr, ab, dd);
    if ((e = cudaGetLastError())) return e;

    /* C */
    big = (long long)M * ((nheads + AVL_HG - 1) / AVL_HG) * ((hd + AVL_CW - 1) / AVL_CW) >= sms;
    if (big) {
        size_t sm = AVL_NS * ax_pv_stage(AVL_HG, AVL_CW);
        if ((e = cudaFuncSetAttribute(k_ax_pv_l, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm))) return e;
        dim3 g((unsigned)((hd + AVL_CW - 1) / AVL_CW), (unsigned)((nheads + AVL_HG - 1) / AVL_HG), (unsigned)M);
        DIC_LAUNCH(k_ax_pv_l, g, (AVL_HG / AVL_TH) * (AVL_CW / AVL_NC), sm, c->stream, nheads, hd, kv, NE, n_idx, pr, ab, dd,
                                                                               out, ldo);
    } else {
        size_t sm = AVS_NS * ax_pv_stage(AVS_HG, AVS_CW);
        if ((e = cudaFuncSetAttribute(k_ax_pv_s, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm))) return e;
        dim3 g((unsigned)((hd + AVS_CW - 1) / AVS_CW), (unsigned)((nheads + AVS_HG - 1) / AVS_HG), (unsigned)M);
        DIC_LAUNCH(k_ax_pv_s, g, (AVS_HG / AVS_TH) * (AVS_CW / AVS_NC), sm, c->stream, nheads, hd, kv, NE, n_idx, pr, ab, dd,
                                                                               out, ldo);
    }
    DIC_LAUNCH_CHECK();
}
