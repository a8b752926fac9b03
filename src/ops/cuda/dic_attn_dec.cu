/*
 * dic_attn_dec.cu — decode attention in two launches (ops.h di_attn_dec, both
 * modes, every M: rows in chunks that fit the scratch, one launch pair per
 * chunk; docs/kernels/attention-decode.md): the entry list with the window
 * floor (seg_lo), sparse attention with the sink and the inverse RoPE of the
 * output. The product path is k_ad_p2 + k_ad_c2 (below); k_ad_part +
 * k_ad_comb, the same values in the same order, take the shapes it does not
 * (hd % 32 != 0, more than AD2_SMAX blocks per row).
 *
 * k_ad_part: CTA = (entry block s of 64 entries, group of 16 heads, row m).
 *   1. the block's entry pointers (di_attn_list's rule, entry for entry),
 *      its 64 KV rows and the 16 query heads into shared memory (cp.async;
 *      absent rows as zeros);
 *   2. logits = q . k on the tensor cores (mma m16n8k16 bf16, fp32
 *      accumulation), times scale; absent entries -inf;
 *   3. per head the block max mx, p = exp(l - mx) (dic_expf, as the CPU),
 *      bf16(p) for P.V and the fp32 sum of p (fixed tree);
 *   4. P.V on the tensor cores (bf16(p) x bf16 v, fp32 accumulation),
 *      written as fp32 partials with mx and the sum.
 * k_ad_comb: CTA = (head, row): M = max of the block maxima, weights
 *   w_s = exp(mx_s - M), o = sum_s w_s o_s, den = sum_s w_s sum_s in block
 *   order, out = bf16(o / (den + exp(sink - M))), then the inverse RoPE
 *   of the last rd columns (rope.c's formula on the bf16 values).
 *
 * Numerics vs the CPU sequence (attn_list, sparse_attn, rope_tab): the CPU
 * rounds p against the running max over all earlier blocks and sums each
 * dot product in its 16-lane order; here p is rounded against the block's
 * own max and rescaled in fp32 at the combine, and the tensor cores sum in
 * their order. Same rounding points otherwise (bf16 p in P.V, fp32
 * denominator, bf16 o before the rotation). Deterministic (no atomics); a
 * row's bits depend only on that row: blocks of 64 entries from entry 0,
 * combined over the row's own ceil(n / 64) blocks in block order, whatever
 * the grid's block count S (a bound on every row's n), the row chunk, M or
 * the other rows (docs/determinism.md §7). An absent (NULL, past the row or
 * below its window floor) or p == 0 entry adds 0 * v (the CPU skips it):
 * equal unless v holds inf / NaN.
 *
 * k_ad_floor (dic_attn_floor): the window floor of di_attn_dec's seg_lo on a
 * built list (compact prefill, architecture.md §6.5): CTA = row, window
 * entries below the row's segment floor set to NULL.
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"

#define AD_E 64   /* entries per block (the CPU's softmax block) */
#define AD_HG 16  /* heads per CTA: one mma M tile */
#define AD_T 128  /* 4 warps */
#define AD_MAXHD 512
#define AD_PST (AD_E + 8) /* bf16 p row stride (conflict-free fragment loads) */

typedef struct ad_list {
    const int64_t *pos;
    const int *row_seg, *seg_row0;
    const int64_t *seg_pos0;
    uint16_t *const *ring;
    int win;
    const uint16_t *kv;
    int hd;
    uint16_t **const *ckv;
    const int *page_rows;
    int ratio;
    const int *topk;
    int K;
    const int *ntopk;
    const int64_t *seg_lo; /* [nseg] window floor (ops.h di_attn_dec seg_lo), NULL = none */
} ad_list;

static __device__ __forceinline__ void ad_mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ void ad_cp16(void *dst, const void *src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

/* 8 bf16 from src (any 2-byte alignment; NULL: zeros) into 16-byte aligned shared dst */
static __device__ __forceinline__ void ad_copy8(uint16_t *dst, const uint16_t *src) {
    if (!src) {
        *(uint4 *)dst = make_uint4(0u, 0u, 0u, 0u);
    } else if (((uintptr_t)src & 15) == 0) {
        ad_cp16(dst, src);
    } else {
        uint32_t t[4];
#pragma unroll
        for (int e = 0; e < 4; e++) t[e] = src[2 * e] | ((uint32_t)src[2 * e + 1] << 16);
        *(uint4 *)dst = make_uint4(t[0], t[1], t[2], t[3]);
    }
}

/* Row m's entry count and entry i (di_attn_list / k_attn_list: window, then compressed rows). */
static __device__ __forceinline__ int ad_count(const ad_list &L, int m) {
    int n = L.win;
    if (L.ratio > 0) n += L.topk ? L.ntopk[m] : (int)((L.pos[m] + 1) / L.ratio);
    return n;
}
static __device__ __forceinline__ const uint16_t *ad_entry(const ad_list &L, int m, int i) {
    const int s = L.row_seg[m];
    const int64_t p = L.pos[m];
    if (i < L.win) {
        const int64_t t0 = p - L.win + 1 > 0 ? p - L.win + 1 : 0, t = t0 + i, pos0 = L.seg_pos0[s];
        if (t > p || (L.seg_lo && t < L.seg_lo[s])) return NULL; /* past the row, or below its floor */
        return t >= pos0 ? L.kv + (size_t)(L.seg_row0[s] + (t - pos0)) * (size_t)L.hd
                         : L.ring[s] + (size_t)(t % L.win) * (size_t)L.hd;
    }
    int64_t j = i - L.win;
    if (L.topk) j = L.topk[(size_t)m * L.K + j];
    const int pr = L.page_rows[s];
    return L.ckv[s][j / pr] + (size_t)(j % pr) * (size_t)L.hd;
}

static size_t ad_smem(int hd) {
    return (size_t)AD_E * (hd + 8) * 2 + (size_t)AD_HG * (hd + 8) * 2 + (size_t)AD_HG * AD_E * 4 +
           (size_t)AD_HG * AD_PST * 2 + (size_t)AD_E * sizeof(void *);
}

static __global__ void __launch_bounds__(AD_T) k_ad_part(ad_list L, const uint16_t *q, size_t ldq, int H, int S,
                                                         float scale, float *part, float *pmx, float *psum,
                                                         int *n_idx) {
    DIC_PDL_ENTER();
    extern __shared__ __align__(16) unsigned char ad_sm[];
    const int hd = L.hd, kst = hd + 8;
    uint16_t *ks = (uint16_t *)ad_sm;
    uint16_t *qs = ks + (size_t)AD_E * kst;
    float *lg = (float *)(qs + (size_t)AD_HG * kst);
    uint16_t *ps = (uint16_t *)(lg + AD_HG * AD_E);
    const uint16_t **ptrs = (const uint16_t **)(ps + AD_HG * AD_PST);

    const int tid = threadIdx.x, s = blockIdx.x, h0 = blockIdx.y * AD_HG, m = blockIdx.z;
    const int n = ad_count(L, m), b0 = s * AD_E;
    if (s == 0 && blockIdx.y == 0 && tid == 0) n_idx[m] = n;
    if (b0 >= n) return; /* past the row's entries: the combine reads blocks < ceil(n / 64) only */
    const int c8 = hd / 8;
    const uint16_t *qm = q + (size_t)m * ldq + (size_t)h0 * hd;
    for (int i = tid; i < AD_HG * c8; i += AD_T) { /* in flight while the entry pointers resolve */
        int h = i / c8, off = (i - h * c8) * 8;
        ad_copy8(qs + (size_t)h * kst + off, qm + (size_t)h * hd + off);
    }
    if (tid < AD_E) ptrs[tid] = b0 + tid < n ? ad_entry(L, m, b0 + tid) : NULL;
    __syncthreads();
    DIC_STAMP_PHASE(101);
    for (int i = tid; i < AD_E * c8; i += AD_T) {
        int j = i / c8, off = (i - j * c8) * 8;
        const uint16_t *p = ptrs[j];
        ad_copy8(ks + (size_t)j * kst + off, p ? p + off : NULL);
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    DIC_STAMP_PHASE(102);

    const int w = tid >> 5, ln = tid & 31, g = ln >> 2, t = ln & 3;
    /* logits: warp w owns entries 16w .. 16w + 15 (two n tiles) */
    {
        float c[2][4];
#pragma unroll
        for (int a = 0; a < 2; a++)
#pragma unroll
            for (int e = 0; e < 4; e++) c[a][e] = 0.0f;
        const uint16_t *qa = qs + (size_t)g * kst + 2 * t;
        const uint16_t *kb0 = ks + (size_t)(16 * w + g) * kst + 2 * t, *kb1 = kb0 + (size_t)8 * kst;
#pragma unroll 4
        for (int k0 = 0; k0 < hd; k0 += 16) {
            uint32_t a0 = *(const uint32_t *)(qa + k0), a1 = *(const uint32_t *)(qa + (size_t)8 * kst + k0);
            uint32_t a2 = *(const uint32_t *)(qa + k0 + 8), a3 = *(const uint32_t *)(qa + (size_t)8 * kst + k0 + 8);
            ad_mma(c[0], a0, a1, a2, a3, *(const uint32_t *)(kb0 + k0), *(const uint32_t *)(kb0 + k0 + 8));
            ad_mma(c[1], a0, a1, a2, a3, *(const uint32_t *)(kb1 + k0), *(const uint32_t *)(kb1 + k0 + 8));
        }
#pragma unroll
        for (int a = 0; a < 2; a++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int h = g + (e >> 1) * 8, j = 16 * w + 8 * a + 2 * t + (e & 1);
                lg[h * AD_E + j] = ptrs[j] ? __fmul_rn(c[a][e], scale) : -INFINITY;
            }
    }
    __syncthreads();
    DIC_STAMP_PHASE(103);
    /* softmax of the block: 8 threads per head, 8 entries each */
    {
        const int h = tid >> 3, sub = tid & 7;
        float l[8], mx = -INFINITY;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            l[e] = lg[h * AD_E + sub * 8 + e];
            mx = fmaxf(mx, l[e]); /* NaN ignored, as the CPU's `l > max` */
        }
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
        float sum = 0.0f;
        uint32_t pk[4];
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
            float pa = mx == -INFINITY ? 0.0f : dic_expf(__fsub_rn(l[e], mx));
            float pb = mx == -INFINITY ? 0.0f : dic_expf(__fsub_rn(l[e + 1], mx));
            sum = __fadd_rn(__fadd_rn(sum, pa), pb);
            pk[e / 2] = (uint32_t)dic_f32_to_bf16(pa) | ((uint32_t)dic_f32_to_bf16(pb) << 16);
        }
        *(uint4 *)(ps + h * AD_PST + sub * 8) = make_uint4(pk[0], pk[1], pk[2], pk[3]);
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xFFFFFFFFu, sum, o)); /* a+b = b+a: every lane the same bits */
        if (sub == 0) {
            size_t i = ((size_t)m * S + s) * H + h0 + h;
            pmx[i] = mx;
            psum[i] = sum;
        }
    }
    __syncthreads();
    DIC_STAMP_PHASE(104);
    /* P.V: warp w owns the column tiles w, w + 4, ... (8 columns each) */
    {
        float o[AD_MAXHD / 32][4];
#pragma unroll
        for (int i = 0; i < AD_MAXHD / 32; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) o[i][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < AD_E; kk += 16) {
            const uint16_t *pa = ps + g * AD_PST + kk + 2 * t;
            uint32_t a0 = *(const uint32_t *)pa, a1 = *(const uint32_t *)(pa + 8 * AD_PST);
            uint32_t a2 = *(const uint32_t *)(pa + 8), a3 = *(const uint32_t *)(pa + 8 * AD_PST + 8);
            const uint16_t *v0 = ks + (size_t)(kk + 2 * t) * kst + g;
#pragma unroll
            for (int i = 0; i < AD_MAXHD / 32; i++) {
                int cb = 8 * (w + 4 * i);
                if (cb >= hd) break; /* warp-uniform */
                const uint16_t *v = v0 + cb;
                uint32_t b0 = v[0] | ((uint32_t)v[kst] << 16), b1 = v[8 * kst] | ((uint32_t)v[9 * kst] << 16);
                ad_mma(o[i], a0, a1, a2, a3, b0, b1);
            }
        }
        float *pm = part + (((size_t)m * S + s) * H + h0) * hd;
#pragma unroll
        for (int i = 0; i < AD_MAXHD / 32; i++) {
            int cb = 8 * (w + 4 * i);
            if (cb >= hd) break;
            *(float2 *)(pm + (size_t)g * hd + cb + 2 * t) = make_float2(o[i][0], o[i][1]);
            *(float2 *)(pm + (size_t)(g + 8) * hd + cb + 2 * t) = make_float2(o[i][2], o[i][3]);
        }
    }
    DIC_STAMP_PHASE(105);
}

#define AD_CT 256    /* combine threads: one column pair each at hd = 512 */
#define AD_SMAX 1024 /* blocks per row the combine stages (stride <= 64K entries) */

static __global__ void __launch_bounds__(AD_CT) k_ad_comb(int H, int hd, int S, const float *part, const float *pmx,
                                                          const float *psum, const int *n_idx, const float *sink,
                                                          int rd, const float *cs, const float *sn, uint16_t *out,
                                                          size_t ldo) {
    DIC_PDL_ENTER();
    __shared__ float wsh[AD_SMAX], ssh[AD_SMAX], red[AD_CT / 32];
    __shared__ float gm_sh, d_sh;
    const int h = blockIdx.x, m = blockIdx.y, tid = threadIdx.x;
    int nb = (n_idx[m] + AD_E - 1) / AD_E;
    if (nb > S) nb = S;
    const float *mx = pmx + (size_t)m * S * H + h, *sm = psum + (size_t)m * S * H + h;
    /* the blocks' maxima and sums staged once (loads in parallel), M = their max (order-free) */
    float lm = -INFINITY;
    for (int s = tid; s < nb; s += AD_CT) {
        float v = mx[(size_t)s * H];
        wsh[s] = v;
        ssh[s] = sm[(size_t)s * H];
        lm = fmaxf(lm, v);
    }
    for (int o = 16; o > 0; o >>= 1) lm = fmaxf(lm, __shfl_xor_sync(0xFFFFFFFFu, lm, o));
    if ((tid & 31) == 0) red[tid >> 5] = lm;
    __syncthreads();
    if (tid == 0) {
        float g = red[0];
        for (int i = 1; i < AD_CT / 32; i++) g = fmaxf(g, red[i]);
        gm_sh = g;
    }
    __syncthreads();
    DIC_STAMP_PHASE(201);
    const float gm = gm_sh;
    for (int s = tid; s < nb; s += AD_CT) { /* block weights exp(mx_s - M) */
        float v = wsh[s];
        wsh[s] = v == -INFINITY ? 0.0f : dic_expf(__fsub_rn(v, gm));
    }
    __syncthreads();
    if (tid == 0) { /* the denominator in block order */
        float den = 0.0f;
        for (int s = 0; s < nb; s++) den = __fadd_rn(den, __fmul_rn(ssh[s], wsh[s]));
        d_sh = __fadd_rn(den, dic_expf(__fsub_rn(sink[h], gm)));
    }
    __syncthreads();
    DIC_STAMP_PHASE(202);
    const float d = d_sh;
    const int half = rd / 2, r0 = hd - rd;
    uint16_t *y = out + (size_t)m * ldo + (size_t)h * hd;
    for (int c = tid; c < hd / 2; c += AD_CT) {
        float o0 = 0.0f, o1 = 0.0f;
        const float *pp = part + ((size_t)m * S * H + h) * hd + 2 * c;
#pragma unroll 8
        for (int s = 0; s < nb; s++) { /* block order; the loads are independent of the sums */
            float wt = wsh[s];
            float2 v = *(const float2 *)(pp + (size_t)s * H * hd);
            o0 = __fadd_rn(o0, __fmul_rn(v.x, wt));
            o1 = __fadd_rn(o1, __fmul_rn(v.y, wt));
        }
        float a = dic_round_bf16(__fdiv_rn(o0, d)), b = dic_round_bf16(__fdiv_rn(o1, d));
        if (2 * c >= r0 && rd > 0) { /* inverse rotation (k_rope_tab, inverse = 1) */
            int i = (2 * c - r0) / 2;
            float cc = cs[(size_t)m * half + i], ss = -sn[(size_t)m * half + i];
            float re = fmaf(a, cc, -__fmul_rn(b, ss));
            float im = fmaf(a, ss, __fmul_rn(b, cc));
            a = re, b = im;
        }
        *(uint32_t *)(y + 2 * c) = (uint32_t)dic_f32_to_bf16(a) | ((uint32_t)dic_f32_to_bf16(b) << 16);
    }
    DIC_STAMP_PHASE(203);
}

static size_t ad_al(size_t b) { return (b + 255) & ~(size_t)255; }

/* ---------------------------------------------------------------------------
 * k_ad_p2 + k_ad_c2 (docs/kernels/attention-decode.md §1): the two-launch design with a short
 * dependent chain. CTA = (64-entry block s, 16 heads, column slice cs of
 * CS, row m), 256 threads:
 *   before the PDL wait (host-staged tables only: pos, segments, ring and
 *   page-table pointers): the window entries' pointers (and the compressed
 *   ones of a non-indexed layer), an L2 prefetch of those KV rows (a cache
 *   hint only: the data are read after the wait), the row's page table
 *   into shared memory for the top-k entries;
 *   after the wait: q (cp.async) at once, then top-k indices and ntopk in
 *   one round trip, the KV rows (one warp per row, no division), logits
 *   (ldmatrix + mma, each warp one 8-entry tile over the full head dim in
 *   k0 order: k_ad_part's accumulation order), the block softmax (k_ad_part's
 *   code), P.V of the slice's columns (ldmatrix.trans B fragments, kk order
 *   as k_ad_part), fp32 partials as k_ad_part.
 * k_ad_c2, CTA = (16 heads, column slice of CC, row): k_ad_comb's formula
 *   with every load issued up front.
 * Same values and order per output as k_ad_part + k_ad_comb (block split 64, logits /
 * P.V / softmax / combine in the same order): bitwise equal to them,
 * hence deterministic, and a row's bits do not depend on M, CS or CC.
 * Needs hd % 32 == 0 and at most AD2_SMAX blocks per row (else k_ad_part + k_ad_comb).
 * Timeline builds mark block 0's phases: 111 pointers, 112 KV landed,
 * 113 logits, 114 softmax, 115 partials written; k_ad_c2: 211 weights, 212 output.
 * --------------------------------------------------------------------------- */
#define AD2_T 256
#define AD2_PT 256   /* page-table entries cached in shared memory */
#define AD2_SMAX 256 /* 64-entry blocks per row at most */
#define AD2_PF 2 /* column pairs per thread whose first 8 blocks ad2_combine loads up front: all of them in
                     * k_ad_c2 at hd 512 (CC 8: 512 pairs, 256 threads); each more costs ~1.5-2 KB of SASS */

typedef struct ad2_args {
    const uint16_t *q;
    size_t ldq;
    int H, S, CS, CC;
    float scale;
    float *part, *pmx, *psum;
    int *n_idx;
    const float *sink;
    int rd;
    const float *cs, *sn;
    uint16_t *out;
    size_t ldo;
    int kreg; /* bytes of the K region (also the fold's combine tables) */
} ad2_args;

static __device__ __forceinline__ void ad_ldsm4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, const void *p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}
static __device__ __forceinline__ void ad_ldsm4t(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, const void *p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}

/* a / b of int64 (C's truncating quotient) out of line: code size (each inline 64-bit division site is
 * ~1.4 KB of SASS; k_ad_p2 has three). The same value; a % b as a - (a / b) * b (C's identity). */
static __device__ __noinline__ int64_t ad_div64(int64_t a, int64_t b) { return a / b; }

/* window entry i < win of row m (ad_entry's rule; host-staged tables only) */
static __device__ __forceinline__ const uint16_t *ad_win_entry(const ad_list &L, int sg, int64_t p, int i) {
    const int64_t t0 = p - L.win + 1 > 0 ? p - L.win + 1 : 0, t = t0 + i, pos0 = L.seg_pos0[sg];
    if (t > p || (L.seg_lo && t < L.seg_lo[sg])) return NULL; /* past the row, or below its floor */
    return t >= pos0 ? L.kv + (size_t)(L.seg_row0[sg] + (t - pos0)) * (size_t)L.hd
                     : L.ring[sg] + (size_t)(t - ad_div64(t, L.win) * L.win) * (size_t)L.hd; /* t % win */
}

/* dic_expf out of line (code size: ad2_combine's two call sites share one copy; the same operations) */
static __device__ __noinline__ float ad_expf_ool(float x) { return dic_expf(x); }

/* out columns 2c, 2c+1 of head h (k_ad_comb's rounding and inverse rotation); cc, ss: the rotation (ss = -sn) */
static __device__ __forceinline__ void ad2_store(const ad2_args &a, int hd, int m, int h, int c, float o0, float o1,
                                                 float d, float cc, float ss) {
    float x = dic_round_bf16(__fdiv_rn(o0, d)), y = dic_round_bf16(__fdiv_rn(o1, d));
    if (2 * c >= hd - a.rd && a.rd > 0) {
        float re = fmaf(x, cc, -__fmul_rn(y, ss));
        float im = fmaf(x, ss, __fmul_rn(y, cc));
        x = re, y = im;
    }
    *(uint32_t *)(a.out + (size_t)m * a.ldo + (size_t)h * hd + 2 * c) =
        (uint32_t)dic_f32_to_bf16(x) | ((uint32_t)dic_f32_to_bf16(y) << 16);
}

/* Combine of (row m, heads h0 .. h0+15, column slice cs of CC) over blocks 0 .. nb-1 (nb >= 1), AD2_T
 * threads; wsh / ssh: shared [16][nb] floats each. k_ad_comb's arithmetic in its order. The partial
 * loads of the first 4 column pairs per thread are issued with the maxima / sums; rcs: shared [AD_MAXHD]
 * (the row's cos, then -sin). */
static __device__ __forceinline__ void ad2_combine(const ad2_args &a, int hd, int m, int h0, int cs, int CC, int nb,
                                                   float *wsh, float *ssh, float *gsh, float *dsh, float *rcs, int tg) {
    (void)tg;
    const int tid = threadIdx.x, H = a.H, S = a.S;
    const int npc = hd / (2 * CC), npairs = AD_HG * npc, cp0 = cs * npc, r0 = hd - a.rd, half = a.rd / 2;
    const size_t bst = (size_t)H * hd; /* block stride of the partials */
    float2 pre[AD2_PF][8]; /* read only where s < nb (no zero fill: code size); addresses stepped by bst */
    { /* f = tid + AD2_T k = hl npc + cl: one division, then (hl, cl) stepped (code size; the same values) */
        const int hst = AD2_T / npc, cst = AD2_T - hst * npc;
        int hl = tid / npc, cl = tid - hl * npc;
#pragma unroll
        for (int k = 0; k < AD2_PF; k++) {
            const int f = tid + AD2_T * k;
            if (f < npairs) {
                const float *pp = a.part + ((size_t)m * S * H + h0 + hl) * hd + 2 * (cp0 + cl);
#pragma unroll
                for (int s = 0; s < 8; s++, pp += bst)
                    if (s < nb) pre[k][s] = __ldcg((const float2 *)pp);
            }
            hl += hst, cl += cst;
            if (cl >= npc) cl -= npc, hl++;
        }
    }
    #pragma unroll 1
    for (int i = tid; i < half; i += AD2_T) { /* the row's rotation (ss = -sn) */
        rcs[i] = __ldcg(a.cs + (size_t)m * half + i);
        rcs[AD_MAXHD / 2 + i] = -__ldcg(a.sn + (size_t)m * half + i);
    }
    #pragma unroll 1
    for (int i = tid; i < AD_HG * nb; i += AD2_T) {
        const int hl = i & (AD_HG - 1), s = i >> 4;
        const size_t ix = ((size_t)m * S + s) * H + h0 + hl;
        wsh[hl * nb + s] = __ldcg(a.pmx + ix);
        ssh[hl * nb + s] = __ldcg(a.psum + ix);
    }
    float sk = 0.0f;
    if (tid < AD_HG) sk = a.sink[h0 + tid];
    __syncthreads();
    { /* M per head: warp w heads w, w + 8 (max: order-free) */
        const int w = tid >> 5, ln = tid & 31;
        #pragma unroll 1
        for (int hl = w; hl < AD_HG; hl += AD2_T / 32) {
            float lm = -INFINITY;
            #pragma unroll 1
            for (int s = ln; s < nb; s += 32) lm = fmaxf(lm, wsh[hl * nb + s]);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) lm = fmaxf(lm, __shfl_xor_sync(0xFFFFFFFFu, lm, o));
            if (ln == 0) gsh[hl] = lm;
        }
    }
    __syncthreads();
    #pragma unroll 1
    for (int i = tid; i < AD_HG * nb; i += AD2_T) { /* block weights exp(mx_s - M) */
        const int hl = i / nb;
        const float v = wsh[i];
        wsh[i] = v == -INFINITY ? 0.0f : ad_expf_ool(__fsub_rn(v, gsh[hl]));
    }
    __syncthreads();
    if (tid < AD_HG) { /* the denominator in block order */
        float den = 0.0f;
        #pragma unroll 1
        for (int s = 0; s < nb; s++) den = __fadd_rn(den, __fmul_rn(ssh[tid * nb + s], wsh[tid * nb + s]));
        dsh[tid] = __fadd_rn(den, ad_expf_ool(__fsub_rn(sk, gsh[tid])));
    }
    __syncthreads();
    DIC_STAMP_PHASE(tg);
    /* Code size (cold instruction cache in the decode step): the k loop is rolled; the first chunk's
     * values come from pre[k] (selected), later chunks' from loads; one accumulation body, the same
     * __fadd_rn / __fmul_rn sequence per output as k_ad_comb. */
    #pragma unroll 1
    for (int k0 = 0; k0 * AD2_T < npairs; k0 += AD2_PF) {
#pragma unroll 1
        for (int k = 0; k < AD2_PF; k++) {
            const int f = tid + AD2_T * (k0 + k);
            if (f >= npairs) break;
            const int hl = f / npc, c = cp0 + f - hl * npc;
            const float *pp = a.part + ((size_t)m * S * H + h0 + hl) * hd + 2 * c;
            const float *wt = wsh + hl * nb;
            float o0 = 0.0f, o1 = 0.0f;
            /* blocks s0 .. s0 + 7 per round (nb >= 1: at least one), 8 loads in flight at a time; the first
             * round of the first chunk from pre[k] (code size: one load and one accumulation body) */
            #pragma unroll 1
            for (int s0 = 0; s0 < nb; s0 += 8) {
                float2 v[8];
                if (s0 == 0 && k0 == 0) {
#pragma unroll
                    for (int s = 0; s < 8; s++) v[s] = pre[0][s];
#pragma unroll
                    for (int kk = 1; kk < AD2_PF; kk++)
                        if (k == kk) {
#pragma unroll
                            for (int s = 0; s < 8; s++) v[s] = pre[kk][s];
                        }
                } else {
                    const float *ps = pp + (size_t)s0 * bst;
#pragma unroll
                    for (int s = 0; s < 8; s++, ps += bst)
                        if (s0 + s < nb) v[s] = __ldcg((const float2 *)ps);
                }
#pragma unroll
                for (int s = 0; s < 8; s++)
                    if (s0 + s < nb) {
                        o0 = __fadd_rn(o0, __fmul_rn(v[s].x, wt[s0 + s]));
                        o1 = __fadd_rn(o1, __fmul_rn(v[s].y, wt[s0 + s]));
                    }
            }
            float cc = 1.0f, ss = 0.0f;
            if (2 * c >= r0 && a.rd > 0) cc = rcs[(2 * c - r0) / 2], ss = rcs[AD_MAXHD / 2 + (2 * c - r0) / 2];
            ad2_store(a, hd, m, h0 + hl, c, o0, o1, dsh[hl], cc, ss);
        }
    }
    DIC_STAMP_PHASE(tg + 1);
}

static __global__ void __launch_bounds__(AD2_T, 2) k_ad_p2(ad_list L, ad2_args a) {
    extern __shared__ __align__(16) unsigned char ad_sm[];
    const int hd = L.hd, kst = hd + 8, CS = a.CS, S = a.S;
    uint16_t *ks = (uint16_t *)ad_sm;
    uint16_t *qs = (uint16_t *)(ad_sm + a.kreg);
    float *lg = (float *)(qs + (size_t)AD_HG * kst);
    uint16_t *ps = (uint16_t *)(lg + AD_HG * AD_E);
    const uint16_t **ptrs = (const uint16_t **)(ps + AD_HG * AD_PST);
    uint16_t **ptab = (uint16_t **)(ptrs + AD_E);

    const int tid = threadIdx.x, s = blockIdx.x, hg = blockIdx.y / CS, cs = blockIdx.y - hg * CS, h0 = hg * AD_HG;
    const int m = blockIdx.z, b0 = s * AD_E, w = tid >> 5, ln = tid & 31, g = ln >> 2, t = ln & 3;
    const int sg = L.row_seg[m];
    const int64_t p = L.pos[m];
    const bool idx = L.ratio > 0 && L.topk;
    const int64_t vis = L.ratio > 0 ? ad_div64(p + 1, L.ratio) : 0; /* compressed entries visible (one division site) */

    /* before the wait: host-staged tables only (the step's table copy precedes every kernel) */
    if (tid < AD_E) {
        const int i = b0 + tid;
        const uint16_t *ptr = NULL;
        if (i < L.win) {
            ptr = ad_win_entry(L, sg, p, i);
        } else if (L.ratio > 0 && !L.topk && i < L.win + (int)vis) {
            const int j = i - L.win; /* int: 0 <= i - win < i (32-bit division, the same quotient) */
            const int pr = L.page_rows[sg];
            ptr = L.ckv[sg][j / pr] + (size_t)(j % pr) * (size_t)hd;
        }
        ptrs[tid] = ptr;
        if (ptr && ((uintptr_t)ptr & 15) == 0) /* a cache hint: the rows are read after the wait */
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(ptr), "r"((unsigned)hd * 2u) : "memory");
    }
    int npt = 0, pr = 1;
    if (idx && b0 + AD_E > L.win) { /* the row's page table (pointers) for the top-k entries */
        pr = L.page_rows[sg];
        const int64_t np = ad_div64(vis + pr - 1, pr);
        npt = np < AD2_PT ? (int)np : AD2_PT;
        uint16_t *const *pt = L.ckv[sg];
#pragma unroll 1
        for (int k = tid; k < npt; k += AD2_T) ptab[k] = pt[k];
    }
    DIC_PDL_ENTER();

    int n;
    int jv = 0;
    const int ie = b0 + tid; /* this thread's entry (tid < AD_E) */
    if (idx) {
        if (tid < AD_E && ie >= L.win && ie - L.win < L.K) jv = L.topk[(size_t)m * L.K + (ie - L.win)];
        n = L.win + L.ntopk[m];
    } else {
        n = L.win + (int)vis; /* ad_count's value (vis = 0 without compressed rows; code size: no second division) */
    }
    if (s == 0 && blockIdx.y == 0 && tid == 0) a.n_idx[m] = n;
    int nb = (n + AD_E - 1) / AD_E;
    if (nb > S) nb = S;
    if (nb < 1) nb = 1; /* no entries: block 0 still runs (zeros), the combine gives k_ad_comb's result */
    if (s >= nb) return;
    const int c8 = hd / 8;
    { /* q: in flight while the top-k pointers resolve */
        const uint16_t *qm = a.q + (size_t)m * a.ldq + (size_t)h0 * hd;
#pragma unroll 1
        for (int i = tid; i < AD_HG * c8; i += AD2_T) {
            int h = i / c8, off = (i - h * c8) * 8;
            ad_copy8(qs + (size_t)h * kst + off, qm + (size_t)h * hd + off);
        }
    }
    __syncthreads(); /* ptab */
    if (idx && tid < AD_E && ie >= L.win) {
        const uint16_t *ptr = NULL;
        if (ie < n) {
            const int pg = jv / pr;
            const uint16_t *base = pg < npt ? ptab[pg] : L.ckv[sg][pg];
            ptr = base + (size_t)(jv - pg * pr) * (size_t)hd;
        }
        ptrs[tid] = ptr;
    }
    __syncthreads();
    DIC_STAMP_PHASE(111);
#pragma unroll 1
    for (int j = w; j < AD_E; j += AD2_T / 32) { /* KV rows: a warp per row */
        const uint16_t *pj = ptrs[j];
        uint16_t *dst = ks + (size_t)j * kst;
        for (int off = ln * 8; off < hd; off += 256) ad_copy8(dst + off, pj ? pj + off : NULL);
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    DIC_STAMP_PHASE(112);

    { /* logits: warp w owns entries 8w .. 8w + 7 over the whole head dim, k0 in order (as k_ad_part) */
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const int lr = ln & 7, lq = ln >> 3;
        const uint16_t *qa = qs + (size_t)(lr + 8 * (lq & 1)) * kst + 8 * (lq >> 1);
        const uint16_t *kb = ks + (size_t)(8 * w + lr) * kst + 8 * lq;
#pragma unroll 2
        for (int k0 = 0; k0 < hd; k0 += 32) {
            uint32_t a0, a1, a2, a3, e0, e1, e2, e3, b0r, b1r, b2r, b3r;
            ad_ldsm4(b0r, b1r, b2r, b3r, kb + k0);
            ad_ldsm4(a0, a1, a2, a3, qa + k0);
            ad_ldsm4(e0, e1, e2, e3, qa + k0 + 16);
            ad_mma(c, a0, a1, a2, a3, b0r, b1r);
            ad_mma(c, e0, e1, e2, e3, b2r, b3r);
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int h = g + (e >> 1) * 8, j = 8 * w + 2 * t + (e & 1);
            lg[h * AD_E + j] = ptrs[j] ? __fmul_rn(c[e], a.scale) : -INFINITY;
        }
    }
    __syncthreads();
    DIC_STAMP_PHASE(113);
    if (tid < AD_HG * 8) { /* softmax of the block: k_ad_part's code (8 threads per head) */
        const int h = tid >> 3, sub = tid & 7;
        const float *l = lg + h * AD_E + sub * 8; /* read again below (code size: a rolled exp loop) */
        float mx = -INFINITY;
#pragma unroll
        for (int e = 0; e < 8; e++) mx = fmaxf(mx, l[e]);
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
        float sum = 0.0f;
        uint32_t *pk = (uint32_t *)(ps + h * AD_PST + sub * 8), lo = 0;
#pragma unroll 1
        for (int e = 0; e < 8; e++) { /* sum: ((sum + p0) + p1) + ... in e order, as the pair form */
            const float pe = mx == -INFINITY ? 0.0f : dic_expf(__fsub_rn(l[e], mx));
            sum = __fadd_rn(sum, pe);
            const uint32_t b = (uint32_t)dic_f32_to_bf16(pe);
            if (e & 1) pk[e >> 1] = lo | (b << 16); /* the pair's word: low half entry e - 1 */
            else lo = b;
        }
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xFFFFFFFFu, sum, o));
        if (sub == 0) { /* every column slice writes the same values */
            size_t i = ((size_t)m * S + s) * a.H + h0 + h;
            a.pmx[i] = mx;
            a.psum[i] = sum;
        }
    }
    __syncthreads();
    DIC_STAMP_PHASE(114);
    { /* P.V of the slice: warp w owns the 16-column pairs w, w + 8, ...; kk in order (as k_ad_part) */
        const int sw = hd / CS, npr = sw / 16, cb0 = cs * sw;
        uint32_t pa[AD_E / 16][4];
#pragma unroll
        for (int kq = 0; kq < AD_E / 16; kq++) {
            const uint16_t *pp = ps + g * AD_PST + 16 * kq + 2 * t;
            pa[kq][0] = *(const uint32_t *)pp, pa[kq][1] = *(const uint32_t *)(pp + 8 * AD_PST);
            pa[kq][2] = *(const uint32_t *)(pp + 8), pa[kq][3] = *(const uint32_t *)(pp + 8 * AD_PST + 8);
        }
        float *pm = a.part + (((size_t)m * S + s) * a.H + h0) * hd;
#pragma unroll 1
        for (int i = 0; i < AD_MAXHD / 128; i++) {
            const int pr2 = w + 8 * i;
            if (pr2 >= npr) break; /* warp-uniform */
            const int cb = cb0 + 16 * pr2;
            float o[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
            const uint16_t *vb = ks + (size_t)((ln & 7) + 8 * ((ln >> 3) & 1)) * kst + cb + 8 * (ln >> 4);
#pragma unroll
            for (int kq = 0; kq < AD_E / 16; kq++) {
                uint32_t b0r, b1r, b2r, b3r;
                ad_ldsm4t(b0r, b1r, b2r, b3r, vb + (size_t)(16 * kq) * kst);
                ad_mma(o[0], pa[kq][0], pa[kq][1], pa[kq][2], pa[kq][3], b0r, b1r);
                ad_mma(o[1], pa[kq][0], pa[kq][1], pa[kq][2], pa[kq][3], b2r, b3r);
            }
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int col = cb + 8 * u + 2 * t;
                *(float2 *)(pm + (size_t)g * hd + col) = make_float2(o[u][0], o[u][1]);
                *(float2 *)(pm + (size_t)(g + 8) * hd + col) = make_float2(o[u][2], o[u][3]);
            }
        }
    }
    DIC_STAMP_PHASE(115);
}

/* k_ad_p2's combine: CTA = (16 heads x column slice of CC, row). n from the list inputs (ntopk was written
 * before k_ad_p2 waited: complete and visible once k_ad_p2's CTAs let this grid start; read through L2). */
static __global__ void __launch_bounds__(AD2_T) k_ad_c2(ad_list L, ad2_args a) {
    extern __shared__ __align__(16) unsigned char ad_sm[];
    __shared__ float gsh[AD_HG], dsh[AD_HG], rcs[AD_MAXHD];
    const int CC = a.CC, hg = blockIdx.x / CC, cs = blockIdx.x - hg * CC, m = blockIdx.y;
    int n = L.win;
    if (L.ratio > 0) n += L.topk ? __ldcg(L.ntopk + m) : (int)((L.pos[m] + 1) / L.ratio);
    int nb = (n + AD_E - 1) / AD_E;
    if (nb > a.S) nb = a.S;
    if (nb < 1) nb = 1;
    DIC_PDL_ENTER();
    float *wsh = (float *)ad_sm;
    ad2_combine(a, L.hd, m, hg * AD_HG, cs, CC, nb, wsh, wsh + AD_HG * nb, gsh, dsh, rcs, 211);
}

extern "C" size_t dic_attn_dec_scratch(int M, int nheads, int hd, size_t stride) {
    size_t S = (stride + AD_E - 1) / AD_E, msh = (size_t)M * S * nheads;
    return ad_al(msh * hd * 4) + 2 * ad_al(msh * 4);
}

/* Rows per launch pair: the most whose partials fit the scratch (grid y / z at most 65535), the chunks
 * of M balanced. Only the launch split depends on it: every CTA works on one row. */
static int ad_chunk_rows(const dic_ctx *c, int M, int nheads, int hd, size_t stride) {
    const size_t row = dic_attn_dec_scratch(1, nheads, hd, stride);
    size_t mc = c->scratch_cap / row;
    if (mc > 65535) mc = 65535;
    if (mc > (size_t)M) mc = (size_t)M;
    while (mc > 1 && dic_attn_dec_scratch((int)mc, nheads, hd, stride) > c->scratch_cap) mc--;
    const size_t nch = ((size_t)M + mc - 1) / mc;
    return (int)(((size_t)M + nch - 1) / nch);
}

extern "C" int dic_attn_dec_ok(const dic_ctx *c, int M, int nheads, int hd, int rd, size_t stride, size_t ldo) {
    return M >= 1 && nheads % AD_HG == 0 && hd % 16 == 0 && hd <= AD_MAXHD && rd % 2 == 0 && rd >= 0 && rd <= hd &&
           (hd - rd) % 2 == 0 && ldo % 2 == 0 && stride >= 1 && stride <= (size_t)AD_SMAX * AD_E && c->scratch &&
           dic_attn_dec_scratch(1, nheads, hd, stride) <= c->scratch_cap;
}

/* One launch pair over rows 0 .. M-1 of L / q / out (the caller offsets the per-row tables). */
static cudaError_t ad_launch(const dic_ctx *c, int M, const ad_list &L, int S, const uint16_t *q, size_t ldq,
                             int nheads, const float *sink, float scale, int rd, const float *cs, const float *sn,
                             int *n_idx, uint16_t *out, size_t ldo) {
    const int hd = L.hd;
    const size_t msh = (size_t)M * S * nheads;
    float *part = (float *)c->scratch;
    float *pmx = (float *)((char *)part + ad_al(msh * hd * 4));
    float *psum = (float *)((char *)pmx + ad_al(msh * 4));
    cudaError_t e;
    /* k_ad_p2 + k_ad_c2, one column slice of P.V, the combine in up to 8 column slices
     * (docs/kernels/attention-decode.md §1) */
    if (hd % 32 == 0 && S <= AD2_SMAX) {
        int CS = 1; /* column slices of P.V */
        int CC = 8; /* column slices of the combine */
        while (CC > 1 && hd % (2 * CC)) CC /= 2;
        const int HG = nheads / AD_HG;
        const int kst = hd + 8;
        size_t kreg = (size_t)AD_E * kst * 2, creg = (size_t)2 * AD_HG * S * 4;
        kreg = (kreg + 15) & ~(size_t)15;
        const size_t sm2 = kreg + (size_t)AD_HG * kst * 2 + (size_t)AD_HG * AD_E * 4 + (size_t)AD_HG * AD_PST * 2 +
                           (size_t)AD_E * sizeof(void *) + (size_t)AD2_PT * sizeof(void *);
        ad2_args a2 = {q, ldq, nheads, S, CS, CC, scale, part, pmx, psum, n_idx, sink, rd, cs, sn, out, ldo, (int)kreg};
        if ((e = cudaFuncSetAttribute(k_ad_p2, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm2)) != cudaSuccess)
            return e;
        DIC_LAUNCH(k_ad_p2, dim3((unsigned)S, (unsigned)(HG * CS), (unsigned)M), AD2_T, sm2, c->stream, L, a2);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
        const size_t smc = creg;
        if (smc > 48 * 1024 &&
            (e = cudaFuncSetAttribute(k_ad_c2, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smc)) != cudaSuccess)
            return e;
        DIC_LAUNCH(k_ad_c2, dim3((unsigned)(HG * CC), (unsigned)M), AD2_T, smc, c->stream, L, a2);
        return cudaGetLastError();
    }
    const size_t sm = ad_smem(hd);
    if ((e = cudaFuncSetAttribute(k_ad_part, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm)) != cudaSuccess)
        return e;
    DIC_LAUNCH(k_ad_part, dim3((unsigned)S, (unsigned)(nheads / AD_HG), (unsigned)M), AD_T, sm, c->stream, L, q, ldq,
               nheads, S, scale, part, pmx, psum, n_idx);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    DIC_LAUNCH(k_ad_comb, dim3((unsigned)nheads, (unsigned)M), AD_CT, 0, c->stream, nheads, hd, S, part, pmx, psum, n_idx,
               sink, rd, cs, sn, out, ldo);
    return cudaGetLastError();
}

/* The rows in chunks that fit the scratch, one launch pair each, in row order; the chunk's per-row tables
 * offset to its first row (segment tables are shared). A row's bits depend on the row only: the 64-entry
 * block split and the combine over the row's own ceil(n / 64) blocks do not depend on S (the grid's block
 * count: a bound on every row's n), on the chunk or on M (docs/kernels/attention-decode.md §2). */
extern "C" cudaError_t dic_attn_dec_floored(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg,
                                            const int *seg_row0, const int64_t *seg_pos0, uint16_t *const *ring,
                                            int win, const uint16_t *kv, int hd, uint16_t **const *ckv,
                                            const int *page_rows, int ratio, const int *topk, int K, const int *ntopk,
                                            size_t stride, int *n_idx, const int64_t *seg_lo, const uint16_t *q,
                                            size_t ldq, int nheads, const float *sink, float scale, int rd,
                                            const float *cs, const float *sn, uint16_t *out, size_t ldo) {
    if (M <= 0) return cudaSuccess;
    if (!dic_attn_dec_ok(c, M, nheads, hd, rd, stride, ldo) || (((uintptr_t)out) & 3)) return cudaErrorInvalidValue;
    const int S = (int)((stride + AD_E - 1) / AD_E), mc = ad_chunk_rows(c, M, nheads, hd, stride);
    const size_t half = (size_t)(rd / 2);
    for (int m0 = 0; m0 < M; m0 += mc) {
        const int n = M - m0 < mc ? M - m0 : mc;
        const size_t r = (size_t)m0;
        ad_list L = {pos + r, row_seg + r, seg_row0, seg_pos0, ring, win, kv, hd, ckv, page_rows, ratio,
                     topk ? topk + r * (size_t)K : NULL, K, ntopk ? ntopk + r : NULL, seg_lo};
        cudaError_t e = ad_launch(c, n, L, S, q + r * ldq, ldq, nheads, sink, scale, rd, cs ? cs + r * half : NULL,
                                  sn ? sn + r * half : NULL, n_idx + r, out + r * ldo, ldo);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

extern "C" cudaError_t dic_attn_dec(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg,
                                    const int *seg_row0, const int64_t *seg_pos0, uint16_t *const *ring, int win,
                                    const uint16_t *kv, int hd, uint16_t **const *ckv, const int *page_rows,
                                    int ratio, const int *topk, int K, const int *ntopk, size_t stride, int *n_idx,
                                    const uint16_t *q, size_t ldq, int nheads, const float *sink, float scale, int rd,
                                    const float *cs, const float *sn, uint16_t *out, size_t ldo) {
    return dic_attn_dec_floored(c, M, pos, row_seg, seg_row0, seg_pos0, ring, win, kv, hd, ckv, page_rows, ratio, topk,
                                K, ntopk, stride, n_idx, NULL, q, ldq, nheads, sink, scale, rd, cs, sn, out, ldo);
}

static __global__ void k_ad_floor(const int64_t *pos, const int *row_seg, const int64_t *seg_lo, int win,
                                  const uint16_t **list, size_t stride) {
    DIC_PDL_ENTER();
    const int m = blockIdx.x;
    const int64_t p = pos[m], t0 = p - win + 1 > 0 ? p - win + 1 : 0, lo = seg_lo[row_seg[m]];
    for (int i = threadIdx.x; i < win; i += blockDim.x) {
        const int64_t t = t0 + i;
        if (t < lo && t <= p) list[(size_t)m * stride + i] = NULL;
    }
}

extern "C" cudaError_t dic_attn_floor(const dic_ctx *c, int M, const int64_t *pos, const int *row_seg,
                                      const int64_t *seg_lo, int win, const uint16_t **list, size_t stride) {
    if (M <= 0) return cudaSuccess;
    if (win < 1 || stride < (size_t)win) return cudaErrorInvalidValue;
    DIC_LAUNCH(k_ad_floor, dim3((unsigned)M), 128, 0, c->stream, pos, row_seg, seg_lo, win, list, stride);
    DIC_LAUNCH_CHECK();
}
