/*
 * dic_gemm_float_skinny.cu — the batch-invariant (default) mode's BF16 / FP8B weight GEMMs at
 * M <= DIC_SKINNY_MAXM rows (dic_gemm_int.h dic_gemm_skinny_*; docs/kernels/gemm-float.md,
 * docs/determinism.md sec. 7): exactly the bits of k_mma's mode-1 product (dic_gemm_float_fast.cu,
 * split S = mma_split_inv(N, K)), organised for bandwidth instead of tiles of 64 rows.
 *
 * The chain of an output (m, n), as in k_mma: split rank z covers the k-steps [z per, min(nkt, z per
 * + per)) of 64 k (per = ceil(nkt / S)); in each k-step the four m16n8k16 BF16 steps in k order into
 * one fp32 accumulator from 0.0f, with the same fragments: the activation rows are the m16 operand
 * (row m of the tile = activation row m, k slot j of step kk = k 16 kk + j, loaded by the same
 * ldmatrix addressing from the same swizzled 128-byte rows), the weight rows the n8 operand (the
 * same). k past K and rows past M or N are zeros, as k_mma's zero-filled copies. An element's sum
 * depends only on its own row and column fragments, so the other (zero or real) rows of the m16 tile
 * do not enter it. S == 1: the accumulator is the output; S > 1: v = 0.0f, v += partial of rank
 * 0, 1, .., S - 1 (k_mma's cluster sum). FP8B: the e4m3 bytes dequantised by dic_fp8w.cuh into the
 * BF16 tile the ldmatrix reads (k_mma F8's values). So every output has k_mma's bits, at every M.
 *
 * Layout: the weight rows are cut into units of U = 8 NT rows (NT = 1 or 2 n8 tiles); a warp owns
 * one unit and one split rank at a time and streams the unit's k-steps of that rank through its own
 * ring of ST cp.async stages (no CTA barrier in the loop: each warp waits for its own copies, then
 * __syncwarp). A CTA is one split rank of one slice of units (one weight group's, for block-diagonal
 * launches) and holds the rank's activation slice (MX = 8 or 16 rows x per 64 k, swizzled like k_mma's
 * A tile) in shared memory, read by every warp; its warps take the slice's units in turn. The first
 * stages of weights are issued before the programmatic-dependent-launch wait (weights are constants),
 * the activations after it. S > 1: the S CTAs of a slice form a cluster (1, 1, S); each writes its
 * partial tile (M rows x the slice's columns) to its shared memory, and after a cluster barrier CTA z
 * adds the S partials in rank order for its share of the outputs through distributed shared memory.
 * AM (the fused greedy argmax, S == 1, M <= 8): each output's dic_argmax_key, the CTA's maximum per
 * row into a per-device key by integer atomicMax, a ticket, and the last CTA writes the ids and
 * clears keys and counter (the order-free scheme of dic_gemm_float_fast.cu's am_finish; launches with
 * ids must not overlap).
 * Grid, warps per CTA, NT and the slices change which thread computes an output, never its chain.
 */
#include <cooperative_groups.h>
#include <string.h>

#include "ops/cuda/dic_argmax_key.cuh"
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_fp8w.cuh"
#include "ops/cuda/dic_gemm_int.h"

namespace cg = cooperative_groups;

#define SK_MAXW 16 /* warps per CTA, at most */
#define SK_KS 64   /* k per k-step (k_mma's MM_BK) */
#define SK_MAXRS 8 /* ring stages per warp, at most */

typedef struct sk_args {
    int M, N, K;        /* N: the launch's columns (G R) */
    const uint16_t *A;
    size_t lda;
    dic_gv_tab tab;     /* weights (and FP8B scales) of the G groups */
    int R, gk, G;       /* rows per group, activation column offset per group, groups */
    int spg, ug;        /* slices per group, units per group */
    int S, per, nkt;    /* the split, k-steps per rank, k-steps */
    int rs;             /* ring stages per warp (2 .. SK_MAXRS) */
    int cmax;           /* columns of the largest slice (the partial tile's row stride) */
    float *C32;
    uint16_t *C16;
    size_t ldc;
    int32_t *ids;       /* AM: row ids */
} sk_args;

static __device__ __forceinline__ uint32_t sk_su32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

static __device__ __forceinline__ void sk_cp16(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
static __device__ __forceinline__ void sk_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
static __device__ __forceinline__ void sk_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
/* at most n (0 .. SK_MAXRS - 2, uniform over the warp) of this thread's groups still pending */
static __device__ __forceinline__ void sk_wait_n(int n) {
    switch (n) {
    case 0: sk_wait<0>(); break;
    case 1: sk_wait<1>(); break;
    case 2: sk_wait<2>(); break;
    case 3: sk_wait<3>(); break;
    case 4: sk_wait<4>(); break;
    case 5: sk_wait<5>(); break;
    default: sk_wait<6>(); break;
    }
}
static __device__ __forceinline__ void sk_ldsm4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
static __device__ __forceinline__ void sk_ldsm2(uint32_t addr, uint32_t &r0, uint32_t &r1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}
/* k_mma's instruction: mma.sync m16n8k16 bf16 x bf16 + fp32 */
static __device__ __forceinline__ void sk_mma(float *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
/* k_mma's swizzle: byte offset of (row, 16-byte chunk) in a tile of 128-byte rows */
static __device__ __forceinline__ uint32_t sk_swz(int r, int c) { return (uint32_t)(r * 128 + ((c ^ (r & 7)) << 4)); }

static __device__ unsigned long long g_sk_key[DIC_AM_MAXM];
static __device__ unsigned g_sk_cnt;

/* Shared-memory bytes of the three regions (activations, the warps' rings, the partial tile). */
static __host__ __device__ constexpr int sk_stage(int nt, int f8) { return nt * 8 * (f8 ? 64 : 128); }
static __host__ __device__ constexpr int sk_ring(int nt, int f8, int rs) {
    return rs * sk_stage(nt, f8) + (f8 ? nt * 8 * 128 : 0);
}
static __host__ __device__ inline size_t sk_al(size_t b) { return (b + 127) & ~(size_t)127; }
static __host__ __device__ inline size_t sk_abytes(int mx, int per) { return sk_al((size_t)per * mx * 128); }

template <int MX, int NT, int F8, int AM>
static __global__ void __launch_bounds__(SK_MAXW * 32) k_skinny(const __grid_constant__ sk_args a) {
    constexpr int U = NT * 8, SB = sk_stage(NT, F8);
    const int ST = a.rs, WB = sk_ring(NT, F8, ST);
    extern __shared__ __align__(128) uint8_t sm[];
    __shared__ unsigned long long skey[AM ? DIC_AM_MAXM : 1];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, nw = blockDim.x >> 5;
    const int grp = blockIdx.x / a.spg, sl = blockIdx.x - grp * a.spg;
    const int u0 = (int)((long long)a.ug * sl / a.spg), u1 = (int)((long long)a.ug * (sl + 1) / a.spg);
    const int rank = blockIdx.z; /* the cluster's block rank (cluster dims 1 x 1 x S) */
    const int kt0 = rank * a.per, nk = max(0, min(a.nkt, kt0 + a.per) - kt0);
    const int nu = u1 - u0 > warp ? (u1 - u0 - warp + nw - 1) / nw : 0; /* units u0 + warp + i nw */
    const int T = nu * nk, K = a.K, R = a.R;
    const uint8_t *__restrict__ wg = (const uint8_t *)a.tab.w[grp];
    const size_t rowb = (size_t)K * (F8 ? 1 : 2);
    const size_t abytes = sk_abytes(MX, a.per);
    const uint32_t abase = sk_su32(sm), wbase = abase + (uint32_t)abytes + (uint32_t)(warp * WB);
    float *part = (float *)(sm + abytes + (size_t)nw * WB);
    if (AM && tid < DIC_AM_MAXM) skey[tid] = 0ull;

    /* the warp's tiles in order: tile f = unit ordinal f / nk (unit u0 + warp + (f / nk) nw), local
     * k-step f % nk, ring slot f % ST; the issue side walks them with counters (lu, lk, ls) */
    int lu = 0, lk = 0, ls = 0;
    auto load = [&]() { /* the next tile to issue, then advance */
        const int r0 = (u0 + warp + lu * nw) * U, kt = kt0 + lk;
        const uint32_t dst = wbase + (uint32_t)(ls * SB);
        ls = ls + 1 == ST ? 0 : ls + 1;
        if (++lk == nk) lk = 0, lu++;
        if constexpr (F8) {
#pragma unroll
            for (int q = 0; q < NT; q++) {
                const int idx = lane + 32 * q, r = idx >> 2, c = idx & 3, k = kt * SK_KS + c * 16;
                const bool ok = r0 + r < R && k < K;
                sk_cp16(dst + (uint32_t)(r * 64 + c * 16), ok ? wg + (size_t)(r0 + r) * rowb + k : wg, ok ? 16 : 0);
            }
        } else {
#pragma unroll
            for (int q = 0; q < 2 * NT; q++) {
                const int idx = lane + 32 * q, r = idx >> 3, c = idx & 7, k = kt * SK_KS + c * 8;
                const bool ok = r0 + r < R && k < K;
                sk_cp16(dst + sk_swz(r, c), ok ? wg + (size_t)(r0 + r) * rowb + (size_t)k * 2 : wg, ok ? 16 : 0);
            }
        }
    };
    /* the first ST - 1 tiles before the PDL wait (weights are never written by a kernel) */
    for (int f = 0; f < ST - 1; f++) {
        if (f < T) load();
        sk_commit();
    }
    DIC_PDL_ENTER();
    /* the rank's activation slice: k-step j (local), row r, chunk c at j MX 128 + swz(r, c); zeros
     * past M and K */
    {
        const uint16_t *Ag = a.A + (size_t)grp * a.gk;
        const int nch = nk * MX * 8;
        for (int i = tid; i < nch; i += blockDim.x) {
            const int j = i / (MX * 8), r = (i >> 3) % MX, c = i & 7, k = (kt0 + j) * SK_KS + c * 8;
            const bool ok = r < a.M && k < K;
            sk_cp16(abase + (uint32_t)(j * MX * 128) + sk_swz(r, c), ok ? Ag + (size_t)r * a.lda + k : Ag,
                    ok ? 16 : 0);
        }
        sk_commit();
    }
    if (a.S > 1) /* ranks without k-steps leave 0.0f, as k_mma's */
        for (int i = tid; i < a.M * a.cmax; i += blockDim.x) part[i] = 0.0f;
    sk_wait<0>();
    __syncthreads();

    /* F8: the scale bytes of the lane's chunks (rows idx / 4, 16 k each: one scale block) of the tile of
     * unit ordinal u, local k-step j (valid: tile exists) */
    uint32_t scv[NT];
    auto scales = [&](int u, int j, bool valid) {
#pragma unroll
        for (int q = 0; q < NT; q++) {
            scv[q] = 127;
            if (!valid) continue;
            const int r0 = (u0 + warp + u * nw) * U, kt = kt0 + j;
            const int idx = lane + 32 * q, r = idx >> 2, k = kt * SK_KS + (idx & 3) * 16;
            if (r0 + r < R && k < K)
                scv[q] = __ldg(a.tab.s[grp] + (size_t)((r0 + r) / a.tab.wb) * (size_t)(K / a.tab.wb) +
                               (size_t)(k / a.tab.wb));
        }
    };
    if constexpr (F8) scales(0, 0, T > 0);

    const int g = lane >> 2, t = lane & 3;
    float acc[NT][4];
#pragma unroll
    for (int jn = 0; jn < NT; jn++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[jn][e] = 0.0f;
    unsigned long long key = 0ull; /* AM: this lane's best of row g */

    int cu = 0, kl = 0, cs = 0; /* the compute side: unit ordinal, local k-step, ring slot of tile f */
    for (int f = 0; f < T; f++) {
        sk_wait_n(ST - 2);
        __syncwarp(); /* tile f is in for every lane; every lane's reads of slot (f - 1) % ST are done */
        if (f + ST - 1 < T) load();
        sk_commit();
        uint32_t bt = wbase + (uint32_t)(cs * SB);
        if constexpr (F8) { /* the tile's e4m3 bytes -> the warp's BF16 tile (k_mma F8's values and layout) */
            const uint32_t bf = wbase + (uint32_t)(ST * SB);
            const uint8_t *src = sm + (bt - abase);
#pragma unroll
            for (int q = 0; q < NT; q++) {
                const int idx = lane + 32 * q, r = idx >> 2, c = idx & 3;
                const uint4 v = *(const uint4 *)(src + r * 64 + c * 16);
                float wf[16];
                fp8w_x4(v.x, scv[q], wf), fp8w_x4(v.y, scv[q], wf + 4), fp8w_x4(v.z, scv[q], wf + 8);
                fp8w_x4(v.w, scv[q], wf + 12);
                uint4 lo, hi;
                lo.x = fp8w_pack(wf[0], wf[1]), lo.y = fp8w_pack(wf[2], wf[3]);
                lo.z = fp8w_pack(wf[4], wf[5]), lo.w = fp8w_pack(wf[6], wf[7]);
                hi.x = fp8w_pack(wf[8], wf[9]), hi.y = fp8w_pack(wf[10], wf[11]);
                hi.z = fp8w_pack(wf[12], wf[13]), hi.w = fp8w_pack(wf[14], wf[15]);
                *(uint4 *)(sm + (bf - abase) + sk_swz(r, 2 * c)) = lo;
                *(uint4 *)(sm + (bf - abase) + sk_swz(r, 2 * c + 1)) = hi;
            }
            if (kl + 1 < nk) scales(cu, kl + 1, true);
            else scales(cu + 1, 0, f + 1 < T);
            __syncwarp();
            bt = bf;
        }
        const uint32_t at = abase + (uint32_t)(kl * MX * 128);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t a0, a1 = 0u, a2, a3 = 0u, b[NT][2];
            if constexpr (MX == 16) sk_ldsm4(at + sk_swz(lane & 15, kk * 2 + (lane >> 4)), a0, a1, a2, a3);
            else sk_ldsm2(at + sk_swz(lane & 7, kk * 2 + ((lane >> 3) & 1)), a0, a2);
            if constexpr (NT == 2)
                sk_ldsm4(bt + sk_swz(((lane >> 4) << 3) + (lane & 7), kk * 2 + ((lane >> 3) & 1)), b[0][0], b[0][1],
                         b[1][0], b[1][1]);
            else sk_ldsm2(bt + sk_swz(lane & 7, kk * 2 + ((lane >> 3) & 1)), b[0][0], b[0][1]);
#pragma unroll
            for (int jn = 0; jn < NT; jn++) sk_mma(acc[jn], a0, a1, a2, a3, b[jn][0], b[jn][1]);
        }
        cs = cs + 1 == ST ? 0 : cs + 1;
        if (++kl != nk) continue;
        /* the unit's last k-step: its outputs (S == 1) or partials (S > 1) */
        const int ul = warp + cu * nw; /* unit within the slice */
        kl = 0, cu++;
#pragma unroll
        for (int jn = 0; jn < NT; jn++)
#pragma unroll
            for (int h = 0; h < MX / 8; h++) {
                const int m = g + 8 * h, cl = ul * U + jn * 8 + 2 * t, r = u0 * U + cl; /* r: row in the group */
                const float v0 = acc[jn][2 * h], v1 = acc[jn][2 * h + 1];
                acc[jn][2 * h] = acc[jn][2 * h + 1] = 0.0f;
                if (m >= a.M) continue;
                if (a.S > 1) {
                    part[m * a.cmax + cl] = v0, part[m * a.cmax + cl + 1] = v1;
                    continue;
                }
                const size_t n = (size_t)grp * R + r, o = (size_t)m * a.ldc + n;
                if (a.C32) {
                    if (r < R) a.C32[o] = v0;
                    if (r + 1 < R) a.C32[o + 1] = v1;
                } else {
                    if (r < R) a.C16[o] = dic_f32_to_bf16(v0);
                    if (r + 1 < R) a.C16[o + 1] = dic_f32_to_bf16(v1);
                }
                if constexpr (AM) {
                    if (r < R) key = max(key, dic_argmax_key(v0, (int)n));
                    if (r + 1 < R) key = max(key, dic_argmax_key(v1, (int)n + 1));
                }
            }
    }
    sk_wait<0>();

    if (a.S > 1) { /* the S partials of each output, added in rank order from 0.0f */
        cg::cluster_group cl = cg::this_cluster();
        cl.sync();
        const int nc = min(u1 * U, R) - u0 * U; /* the slice's columns */
        for (int i = rank * (int)blockDim.x + tid; i < a.M * nc; i += a.S * (int)blockDim.x) {
            const int m = i / nc, c = i - m * nc;
            float v = 0.0f;
            for (int s = 0; s < a.S; s++) v += cl.map_shared_rank(part, s)[m * a.cmax + c];
            const size_t o = (size_t)m * a.ldc + (size_t)grp * R + (size_t)(u0 * U + c);
            if (a.C32) a.C32[o] = v;
            else a.C16[o] = dic_f32_to_bf16(v);
        }
        cl.sync(); /* no CTA leaves while another reads its partials */
        return;
    }
    if constexpr (AM) { /* row g's best over the quad, the CTA, the grid */
        __shared__ int am_last;
        key = max(key, __shfl_xor_sync(0xFFFFFFFFu, key, 1));
        key = max(key, __shfl_xor_sync(0xFFFFFFFFu, key, 2));
        if (t == 0 && g < a.M && key) atomicMax(&skey[g], key);
        __syncthreads();
        if (tid < a.M && skey[tid]) atomicMax(&g_sk_key[tid], skey[tid]);
        __threadfence();
        __syncthreads();
        if (tid == 0) am_last = atomicAdd(&g_sk_cnt, 1u) == gridDim.x * gridDim.y * gridDim.z - 1;
        __syncthreads();
        if (!am_last) return;
        __threadfence();
        if (tid < a.M) {
            const unsigned long long b = atomicExch(&g_sk_key[tid], 0ull);
            a.ids[tid] = b ? (int32_t)~(uint32_t)b : 0;
        }
        if (tid == 0) g_sk_cnt = 0u;
    }
    (void)key;
}

/* ------------------------------------------------------------------ host */
static int g_sk_off;                   /* dic_gemm_skinny_enable(0): k_mma at every M */
static int g_sk_tw, g_sk_tnt, g_sk_tu; /* lab: forced warps per CTA, NT, units per warp (0 = auto) */
static unsigned long long g_sk_launches;

extern "C" void dic_gemm_skinny_enable(int on) { g_sk_off = !on; }
extern "C" int dic_gemm_skinny_enabled(void) { return !g_sk_off; }
extern "C" void dic_gemm_skinny_tune(int warps, int nt, int units_per_warp) {
    g_sk_tw = warps, g_sk_tnt = nt, g_sk_tu = units_per_warp;
}
extern "C" unsigned long long dic_gemm_skinny_launches(void) { return g_sk_launches; }

typedef void (*sk_fn)(const sk_args);
template <int AM>
static sk_fn sk_pick(int mx, int nt, int f8) {
    if (AM) return nt == 2 ? k_skinny<8, 2, 0, 1> : k_skinny<8, 1, 0, 1>;
    if (mx == 8) return f8 ? (nt == 2 ? k_skinny<8, 2, 1, 0> : k_skinny<8, 1, 1, 0>)
                           : (nt == 2 ? k_skinny<8, 2, 0, 0> : k_skinny<8, 1, 0, 0>);
    return f8 ? (nt == 2 ? k_skinny<16, 2, 1, 0> : k_skinny<16, 1, 1, 0>)
              : (nt == 2 ? k_skinny<16, 2, 0, 0> : k_skinny<16, 1, 0, 0>);
}

/* The device's SM count and opt-in shared memory per block (cached per device). */
static void sk_device(int *sms, int *smem) {
    static int c_sms[16], c_smem[16];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) dev = 0;
    const int d = dev >= 0 && dev < 16 ? dev : 0;
    if (!c_sms[d]) {
        int s = 0, m = 0;
        if (cudaDeviceGetAttribute(&s, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || s <= 0) s = 132;
        if (cudaDeviceGetAttribute(&m, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess || m <= 0)
            m = 48 * 1024;
        c_smem[d] = m, c_sms[d] = s;
    }
    *sms = c_sms[d], *smem = c_smem[d];
}

/* The launch's geometry (none of it changes a bit): rows per unit 8 nt, warps per CTA nw, slices
 * per group spg, shared bytes; 0 if it does not fit in shared memory. */
typedef struct sk_geom {
    int mx, nt, nw, spg, ug, cmax, rs;
    size_t smem;
} sk_geom;

static size_t sk_smem(int mx, int nt, int f8, int rs, int nw, int per, int S, int M, int cmax) {
    return sk_abytes(mx, per) + (size_t)nw * sk_ring(nt, f8, rs) + (S > 1 ? sk_al((size_t)M * cmax * 4) : 0);
}

static int sk_plan(int M, int R, int G, int K, int S, int f8, sk_geom *g) {
    int sms, smax;
    sk_device(&sms, &smax);
    const int nkt = (K + SK_KS - 1) / SK_KS, per = (nkt + S - 1) / S;
    const size_t lim = (size_t)smax - 256; /* the static keys */
    g->mx = M <= 8 ? 8 : 16;
    /* n16 units unless that leaves fewer than two warps per SM */
    g->nt = (long long)G * ((R + 15) / 16) * S < 2LL * sms ? 1 : 2;
    if (g_sk_tnt == 1 || g_sk_tnt == 2) g->nt = g_sk_tnt;
    if (G > 1 && R % (8 * g->nt)) return 0;
    g->ug = (R + 8 * g->nt - 1) / (8 * g->nt);
    /* ring stages: the whole of a small launch's k range in flight at once (S > 1: a rank's unit is at
     * most a few k-steps; FP8B stages are half the bytes); lm_head-sized launches (S == 1, the
     * activations of all of K in shared memory) keep 4 and more warps */
    g->rs = S > 1 || f8 ? SK_MAXRS : 4;
    /* S > 1: up to 4 warps (fewer while that leaves SMs without a CTA), about one unit each, more
     * units per warp above 2 CTAs per SM in all; S == 1 (lm_head-sized, the activations of all of K
     * in each CTA): one CTA per SM, as many warps as fit, the units spread evenly */
    int nw = S > 1 ? 4 : 16;
    if (g_sk_tw >= 1 && g_sk_tw <= SK_MAXW) nw = g_sk_tw;
    else if (S > 1)
        while (nw > 1 && (long long)G * ((g->ug + nw - 1) / nw) * S < sms) nw /= 2;
    for (; nw >= 1; nw /= 2) {
        int spg;
        if (S > 1) {
            long long upw = ((long long)G * g->ug * S + 2LL * sms * nw - 1) / (2LL * sms * nw);
            if (upw < 1) upw = 1;
            if (g_sk_tu >= 1) upw = g_sk_tu;
            spg = (int)((g->ug + nw * upw - 1) / (nw * upw));
        } else {
            spg = (int)((g->ug + nw - 1) / nw);
            const int cap = (sms + G - 1) / G;
            if (g_sk_tu >= 1) spg = (int)((g->ug + (long long)nw * g_sk_tu - 1) / ((long long)nw * g_sk_tu));
            else if (spg > cap) spg = cap;
        }
        if (spg < 1) spg = 1;
        const int cmax = ((g->ug + spg - 1) / spg) * 8 * g->nt;
        const size_t smem = sk_smem(g->mx, g->nt, f8, g->rs, nw, per, S, M, cmax);
        if (smem <= lim) {
            g->nw = nw, g->spg = spg, g->cmax = cmax, g->smem = smem;
            return 1;
        }
        if (g_sk_tw) return 0;
    }
    return 0;
}

extern "C" int dic_gemm_skinny_fits(int M, const uint16_t *A, size_t lda, const dic_wmat *W, int G, int gk, int S) {
    if (!dic_gemm_skinny_enabled() || M < 1 || M > DIC_SKINNY_MAXM || G < 1 || G > DIC_GV_MAXG || S < 1 || S > 8 || !W)
        return 0;
    const int f8 = W->fmt == DIC_WFMT_FP8B, K = W->k, R = W->n;
    if (W->fmt != 0 && !f8) return 0;
    if (R < 1 || K < 8 || K % 8 || lda % 8 || ((uintptr_t)A & 15) || (G > 1 && gk % 8)) return 0;
    if (f8 && (K % 16 || W->wblock <= 0 || W->wblock % 16 || K % W->wblock || !W->scale)) return 0;
    for (int i = 0; i < G; i++)
        if (W[i].fmt != W->fmt || W[i].n != R || W[i].k != K || ((uintptr_t)W[i].w & 15) ||
            (f8 && (W[i].wblock != W->wblock || !W[i].scale)))
            return 0;
    sk_geom g;
    return sk_plan(M, R, G, K, S, f8, &g);
}

extern "C" cudaError_t dic_gemm_skinny_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda,
                                              const dic_wmat *W, int G, int gk, int S, float *C32, uint16_t *C16,
                                              size_t ldc, int32_t *ids) {
    if (!dic_gemm_skinny_enabled() || !dic_gemm_skinny_fits(M, A, lda, W, G, gk, S)) return cudaErrorNotSupported;
    if ((!C32) == (!C16) || (ids && (S != 1 || !C32 || M > DIC_AM_MAXM))) return cudaErrorInvalidValue;
    const int f8 = W->fmt == DIC_WFMT_FP8B, K = W->k, R = W->n;
    sk_geom g;
    if (!sk_plan(M, R, G, K, S, f8, &g)) return cudaErrorNotSupported;
    sk_args a;
    memset(&a, 0, sizeof a);
    a.M = M, a.N = G * R, a.K = K, a.A = A, a.lda = lda;
    for (int i = 0; i < G; i++) a.tab.w[i] = W[i].w, a.tab.s[i] = W[i].scale;
    a.tab.wb = f8 ? W->wblock : 0;
    a.R = R, a.gk = G > 1 ? gk : 0, a.G = G, a.spg = g.spg, a.ug = g.ug;
    a.nkt = (K + SK_KS - 1) / SK_KS, a.S = S, a.per = (a.nkt + S - 1) / S, a.cmax = g.cmax, a.rs = g.rs;
    a.C32 = C32, a.C16 = C16, a.ldc = ldc, a.ids = ids;
    if (ldc < (size_t)G * R) return cudaErrorInvalidValue;
    const sk_fn fn = ids ? sk_pick<1>(g.mx, g.nt, 0) : sk_pick<0>(g.mx, g.nt, f8);
    cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)g.smem);
    if (e != cudaSuccess) return e;
    cudaLaunchAttribute at[2];
    cudaLaunchConfig_t cfg = dic_launch_cfg(dim3((unsigned)(G * g.spg), 1, (unsigned)S), dim3((unsigned)(g.nw * 32)),
                                            g.smem, st, dim3(1, 1, (unsigned)S), at);
    e = cudaLaunchKernelEx(&cfg, fn, a);
    if (e == cudaSuccess) g_sk_launches++;
    return e;
}
