/*
 * dic_attention.cu — sparse attention with a per-head sink (ops.h
 * di_sparse_attn; architecture.md §3.6, §4.4 step 5), bit-identical to
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

extern "C" cudaError_t dic_sparse_attn(const dic_ctx *c, int M, const uint16_t *q, size_t ldq, int nheads, int hd,
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
    k_sparse_attn<<<grid, AT_THREADS, smem, c->stream>>>(q, ldq, nheads, hd, HG, kv, kv_stride, n_idx, sink, scale,
                                                         out, ldo);
    DIC_LAUNCH_CHECK();
}
