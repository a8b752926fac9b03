/*
 * lab/gemm/skinny_f8_variants.cu — lab variants of the batch-invariant mode's FP8B skinny product
 * (src/ops/cuda/dic_gemm_float_skinny.cu k_skinny<8, 2, 1, 0>, the wo_a launch of dic_gemm_blockdiag at
 * M <= 8; docs/kernels/gemm-float.md "lab: FP8B skinny variants"). The same outputs bit for bit: the
 * same split S (mma_split_inv of G R columns and K), the same rank ranges, per k-step of 64 the four
 * m16n8k16 BF16 steps in k order from 0.0f, the same A fragments (ldmatrix from the same swizzled
 * activation slice) and the same B fragment values (lane (g, t) of n8 tile jn holds row 8 jn + g,
 * k 16 kk + 2t, 2t + 1 in b0 and 2t + 8, 2t + 9 in b1: the ldmatrix placement of k_mma's BF16 tile),
 * the S partials added in rank order.
 *
 * What changes (no bit): the e4m3 bytes go from the cp.async stage straight into the B fragments in
 * registers (two 4-byte shared loads and one byte permute per n8 tile and k16 step, then dic_fp8w.cuh's
 * dequantisation of those 4 bytes), instead of a dequantised BF16 tile written to shared memory and
 * read back by ldmatrix behind two __syncwarp; a stage is KS k-steps of the warp's 16 rows (KS 64
 * contiguous bytes per row: 128 to 512 instead of 64), rows padded by 16 bytes so the fragment loads
 * hit 16 distinct banks; the scale bytes of a stage are read once per k16 step and row block with a
 * host-made divider (no integer division in the loop).
 */
#include <cooperative_groups.h>
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_fp8w.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "gemm_lab.h"

namespace cg = cooperative_groups;

#define LW_MAXW 8 /* warps per CTA, at most */
#define LW_MX 8   /* activation rows in the tile (M <= 8: k_skinny's MX = 8) */

typedef struct lw_div { /* n / d for 0 <= n < 2^31 by multiply-high (dic_gemm_fp8w_gemv.cu's w8_div) */
    uint32_t m, s;
} lw_div;

typedef struct lw_args {
    int M, K, R, G, gk;
    const uint16_t *A;
    size_t lda;
    dic_gv_tab tab;
    int spg, ug, S, per, nkt, rs, cmax;
    lw_div dq; /* k16 index -> scale block: / (wblock / 16) */
    float *C32;
    uint16_t *C16;
    size_t ldc;
} lw_args;

static lw_div lw_div_make(int d) {
    lw_div r;
    uint32_t sh = 0;
    while (sh < 31 && (1u << sh) < (uint32_t)d) sh++;
    r.s = sh;
    r.m = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << sh) - (uint64_t)d)) / (uint64_t)d + 1u);
    return r;
}
static __device__ __forceinline__ int lw_q(int n, lw_div d) {
    return (int)((__umulhi((uint32_t)n, d.m) + (uint32_t)n) >> d.s);
}

static __device__ __forceinline__ uint32_t lw_su32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ void lw_cp16(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
static __device__ __forceinline__ void lw_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
static __device__ __forceinline__ void lw_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
static __device__ __forceinline__ void lw_wait_n(int n) {
    switch (n) {
    case 0: lw_wait<0>(); break;
    case 1: lw_wait<1>(); break;
    case 2: lw_wait<2>(); break;
    case 3: lw_wait<3>(); break;
    case 4: lw_wait<4>(); break;
    case 5: lw_wait<5>(); break;
    default: lw_wait<6>(); break;
    }
}
static __device__ __forceinline__ void lw_ldsm2(uint32_t addr, uint32_t &r0, uint32_t &r1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}
static __device__ __forceinline__ void lw_mma(float *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
/* k_mma's swizzle of the activation slice (k_skinny's sk_swz) */
static __device__ __forceinline__ uint32_t lw_swz(int r, int c) { return (uint32_t)(r * 128 + ((c ^ (r & 7)) << 4)); }

/* shared bytes: a stage is 16 rows of KS 64 bytes plus 16 bytes of padding each */
static __host__ __device__ constexpr int lw_rowb(int ks) { return ks * 64 + 16; }
static __host__ __device__ constexpr int lw_stage(int ks) { return 16 * lw_rowb(ks); }
static __host__ __device__ inline size_t lw_al(size_t b) { return (b + 127) & ~(size_t)127; }

/* PROBE: the same stages, waits and outputs with no arithmetic (zeros out): the cost of the memory stream
 * alone at this geometry (a diagnostic, not the product's bits) */
template <int KS, int PROBE>
static __global__ void __launch_bounds__(LW_MAXW * 32) k_skinny_f8reg(const __grid_constant__ lw_args a) {
    constexpr int RB = lw_rowb(KS), SB = lw_stage(KS);
    extern __shared__ __align__(128) uint8_t sm[];
    const int RS = a.rs, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, nw = blockDim.x >> 5;
    const int grp = blockIdx.x / a.spg, sl = blockIdx.x - grp * a.spg;
    const int u0 = (int)((long long)a.ug * sl / a.spg), u1 = (int)((long long)a.ug * (sl + 1) / a.spg);
    const int rank = blockIdx.z;
    const int kt0 = rank * a.per, nk = max(0, min(a.nkt, kt0 + a.per) - kt0);
    const int nst = (nk + KS - 1) / KS; /* stages per unit */
    const int nu = u1 - u0 > warp ? (u1 - u0 - warp + nw - 1) / nw : 0;
    const int T = nu * nst, K = a.K, R = a.R;
    const int kend = min(K, (kt0 + nk) * 64); /* the rank's k range ends here */
    const uint8_t *__restrict__ wg = (const uint8_t *)a.tab.w[grp];
    const uint8_t *__restrict__ sg = a.tab.s[grp];
    const int wb = a.tab.wb, kb = K / wb;
    const size_t abytes = lw_al((size_t)a.per * LW_MX * 128);
    const uint32_t abase = lw_su32(sm), wbase = abase + (uint32_t)abytes + (uint32_t)(warp * RS * SB);
    float *part = (float *)(sm + abytes + (size_t)nw * RS * SB);

    /* issue side: unit ordinal lu, stage lj, ring slot ls */
    int lu = 0, lj = 0, ls = 0;
    auto load = [&]() {
        const int r0 = (u0 + warp + lu * nw) * 16, k0 = (kt0 + lj * KS) * 64;
        const uint32_t dst = wbase + (uint32_t)(ls * SB);
        ls = ls + 1 == RS ? 0 : ls + 1;
        if (++lj == nst) lj = 0, lu++;
#pragma unroll
        for (int q = 0; q < 2 * KS; q++) { /* 16 rows x 4 KS chunks: a warp instruction covers whole rows */
            const int idx = lane + 32 * q, r = idx / (4 * KS), c = idx % (4 * KS), k = k0 + c * 16;
            const bool ok = r0 + r < R && k < kend;
            lw_cp16(dst + (uint32_t)(r * RB + c * 16), ok ? wg + (size_t)(r0 + r) * K + k : wg, ok ? 16 : 0);
        }
    };
    for (int f = 0; f < RS - 1; f++) {
        if (f < T) load();
        lw_commit();
    }
    DIC_PDL_ENTER();
    {
        const uint16_t *Ag = a.A + (size_t)grp * a.gk;
        const int nch = nk * LW_MX * 8;
        for (int i = tid; i < nch; i += blockDim.x) {
            const int j = i / (LW_MX * 8), r = (i >> 3) % LW_MX, c = i & 7, k = (kt0 + j) * 64 + c * 8;
            const bool ok = r < a.M && k < K;
            lw_cp16(abase + (uint32_t)(j * LW_MX * 128) + lw_swz(r, c), ok ? Ag + (size_t)r * a.lda + k : Ag,
                    ok ? 16 : 0);
        }
        lw_commit();
    }
    if (a.S > 1)
        for (int i = tid; i < a.M * a.cmax; i += blockDim.x) part[i] = 0.0f;
    lw_wait<0>();
    __syncthreads();

    const int g = lane >> 2, t = lane & 3;
    const uint32_t sel = (t & 1) ? 0x7632u : 0x5410u; /* u16 t of words (t >> 1) and 2 + (t >> 1) */
    const uint32_t boff = (uint32_t)(g * RB + 4 * (t >> 1));
    float acc[2][4];
#pragma unroll
    for (int jn = 0; jn < 2; jn++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[jn][e] = 0.0f;

    int cu = 0, cj = 0, cs = 0;
    for (int f = 0; f < T; f++) {
        lw_wait_n(RS - 2);
        __syncwarp(); /* stage f is in for every lane; every lane's reads of slot (f - 1) % RS are done */
        if (f + RS - 1 < T) load();
        lw_commit();
        const int r0 = (u0 + warp + cu * nw) * 16;
        if constexpr (!PROBE) {
            const uint8_t *srow = sg + (size_t)(r0 / wb) * (size_t)kb; /* the unit's 16 rows: one row block */
            const bool rv0 = r0 + g < R, rv1 = r0 + 8 + g < R;
            /* plain loads (after the __syncwarp, free to interleave with the mma) */
            const uint8_t *stp = sm + (wbase - abase) + (size_t)(cs * SB) + boff;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                const int kl = cj * KS + ks; /* local k-step */
                if (kl >= nk) break;         /* warp-uniform */
                const int kt = kt0 + kl;
                const uint32_t at = abase + (uint32_t)(kl * LW_MX * 128);
                uint32_t sv[4];
#pragma unroll
                for (int kk = 0; kk < 4; kk++) {
                    const int k16 = kt * 4 + kk;
                    sv[kk] = k16 * 16 < K ? (uint32_t)__ldg(srow + lw_q(k16, a.dq)) : 127u;
                }
#pragma unroll
                for (int kk = 0; kk < 4; kk++) {
                    uint32_t a0, a2, b[2][2];
                    lw_ldsm2(at + lw_swz(lane & 7, kk * 2 + ((lane >> 3) & 1)), a0, a2);
#pragma unroll
                    for (int jn = 0; jn < 2; jn++) {
                        const uint8_t *p = stp + jn * 8 * RB + ks * 64 + kk * 16;
                        const uint32_t x = __byte_perm(*(const uint32_t *)p, *(const uint32_t *)(p + 8), sel);
                        const uint32_t s = (jn ? rv1 : rv0) ? sv[kk] : 127u;
                        float wf[4];
                        fp8w_x4(x, s, wf);
                        b[jn][0] = fp8w_pack(wf[0], wf[1]), b[jn][1] = fp8w_pack(wf[2], wf[3]);
                    }
#pragma unroll
                    for (int jn = 0; jn < 2; jn++) lw_mma(acc[jn], a0, 0u, a2, 0u, b[jn][0], b[jn][1]);
                }
            }
        }
        cs = cs + 1 == RS ? 0 : cs + 1;
        if (++cj != nst) continue;
        const int ul = warp + cu * nw;
        cj = 0, cu++;
#pragma unroll
        for (int jn = 0; jn < 2; jn++) {
            const int m = g, cl = ul * 16 + jn * 8 + 2 * t, r = u0 * 16 + cl;
            const float v0 = acc[jn][0], v1 = acc[jn][1];
#pragma unroll
            for (int e = 0; e < 4; e++) acc[jn][e] = 0.0f;
            if (m >= a.M) continue;
            if (a.S > 1) {
                part[m * a.cmax + cl] = v0, part[m * a.cmax + cl + 1] = v1;
                continue;
            }
            const size_t o = (size_t)m * a.ldc + (size_t)grp * R + (size_t)r;
            if (a.C32) {
                if (r < R) a.C32[o] = v0;
                if (r + 1 < R) a.C32[o + 1] = v1;
            } else {
                if (r < R) a.C16[o] = dic_f32_to_bf16(v0);
                if (r + 1 < R) a.C16[o + 1] = dic_f32_to_bf16(v1);
            }
        }
    }
    lw_wait<0>();
    if (a.S > 1) { /* k_skinny's cluster sum: ranks 0 .. S - 1 in order from 0.0f */
        cg::cluster_group cl = cg::this_cluster();
        cl.sync();
        const int nc = min(u1 * 16, R) - u0 * 16;
        for (int i = rank * (int)blockDim.x + tid; i < a.M * nc; i += a.S * (int)blockDim.x) {
            const int m = i / nc, c = i - m * nc;
            float v = 0.0f;
            for (int s = 0; s < a.S; s++) v += cl.map_shared_rank(part, s)[m * a.cmax + c];
            const size_t o = (size_t)m * a.ldc + (size_t)grp * R + (size_t)(u0 * 16 + c);
            if (a.C32) a.C32[o] = v;
            else a.C16[o] = dic_f32_to_bf16(v);
        }
        cl.sync();
    }
}

/* ------------------------------------------------------------------ host */
/* k_mma's split rule (dic_gemm_float_fast.cu mma_split / mma_split_inv: 128 columns, 64 k per tile) */
static int lw_split_inv(int N, int K) {
    const long long tiles = (N + 127) / 128;
    const int nkt = (K + 63) / 64;
    int S = 1;
    while (tiles * S < 132 && S < 8 && nkt / (2 * S) >= 4) S *= 2;
    return S;
}

static const struct {
    const char *name;
    int ks, rs, nw, upw, probe;
} lw_var[] = {
    {"f8reg k1 r8 w4", 1, 8, 4, 0, 0},       /* k_skinny's stream (64 B per row, 7 KB ahead per warp) */
    {"f8reg k4 r4 w4", 4, 4, 4, 0, 0},       /* 256 B per row per stage, 12 KB ahead per warp */
    {"f8reg k8 r2 w4", 8, 2, 4, 0, 0},       /* 512 B per row (the fast GEMV's runs), 8 KB ahead */
    {"f8reg k2 r7 w4", 2, 7, 4, 0, 0},       /* 128 B per row, 12 KB ahead */
    {"f8reg k4 r2 w8", 4, 2, 8, 1, 0},       /* 16 warps per SM, 4 KB ahead each */
    {"probe k1 r8 w4 (no math)", 1, 8, 4, 0, 1}, /* k_skinny's stream alone */
    {"probe k4 r4 w4 (no math)", 4, 4, 4, 0, 1},
};

extern "C" int lab_skinny_f8_variants(void) { return (int)(sizeof lw_var / sizeof *lw_var); }
extern "C" const char *lab_skinny_f8_name(int v) {
    return v >= 0 && v < lab_skinny_f8_variants() ? lw_var[v].name : "?";
}
extern "C" int lab_skinny_f8_probe(int v) { return v >= 0 && v < lab_skinny_f8_variants() && lw_var[v].probe; }

extern "C" cudaError_t lab_skinny_f8_launch(int v, cudaStream_t st, int M, const uint16_t *A, size_t lda,
                                            const dic_wmat *W, int G, int gk, float *C32, uint16_t *C16,
                                            size_t ldc) {
    if (v < 0 || v >= lab_skinny_f8_variants() || M < 1 || M > LW_MX || G < 1 || G > DIC_GV_MAXG)
        return cudaErrorInvalidValue;
    const int K = W->k, R = W->n, wb = W->wblock;
    if (W->fmt != DIC_WFMT_FP8B || R % 16 || K % 16 || wb <= 0 || wb % 16 || K % wb || gk % 8 || lda % 8 ||
        ((uintptr_t)A & 15) || (!C32) == (!C16) || ldc < (size_t)G * R)
        return cudaErrorInvalidValue;
    for (int i = 0; i < G; i++)
        if (W[i].fmt != W->fmt || W[i].n != R || W[i].k != K || W[i].wblock != wb || !W[i].scale ||
            ((uintptr_t)W[i].w & 15))
            return cudaErrorInvalidValue;
    int sms = 132, smax = 227 * 1024, dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess) {
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaDeviceGetAttribute(&smax, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    }
    const int ks = lw_var[v].ks, nw = lw_var[v].nw;
    lw_args a;
    memset(&a, 0, sizeof a);
    a.M = M, a.K = K, a.R = R, a.G = G, a.gk = G > 1 ? gk : 0, a.A = A, a.lda = lda;
    for (int i = 0; i < G; i++) a.tab.w[i] = W[i].w, a.tab.s[i] = W[i].scale;
    a.tab.wb = wb;
    a.S = lw_split_inv(G * R, K), a.nkt = (K + 63) / 64, a.per = (a.nkt + a.S - 1) / a.S;
    a.rs = lw_var[v].rs, a.ug = R / 16, a.dq = lw_div_make(wb / 16);
    long long upw = lw_var[v].upw;
    if (upw < 1) { /* k_skinny's rule: about two CTAs per SM */
        upw = ((long long)G * a.ug * a.S + 2LL * sms * nw - 1) / (2LL * sms * nw);
        if (upw < 1) upw = 1;
    }
    a.spg = (int)((a.ug + nw * upw - 1) / (nw * upw));
    if (a.S == 1) { /* one slice per warp-group of units, at most one CTA per SM per group */
        a.spg = (a.ug + nw - 1) / nw;
        const int cap = (sms + G - 1) / G;
        if (a.spg > cap) a.spg = cap;
    }
    a.cmax = ((a.ug + a.spg - 1) / a.spg) * 16;
    a.C32 = C32, a.C16 = C16, a.ldc = ldc;
    const size_t smem = lw_al((size_t)a.per * LW_MX * 128) + (size_t)nw * a.rs * lw_stage(ks) +
                        (a.S > 1 ? lw_al((size_t)M * a.cmax * 4) : 0);
    if (smem > (size_t)smax) return cudaErrorNotSupported;
    void (*fn)(const lw_args);
    if (lw_var[v].probe) fn = ks == 1 ? k_skinny_f8reg<1, 1> : k_skinny_f8reg<4, 1>;
    else fn = ks == 1 ? k_skinny_f8reg<1, 0> : ks == 2 ? k_skinny_f8reg<2, 0> : ks == 4 ? k_skinny_f8reg<4, 0>
                                                                                    : k_skinny_f8reg<8, 0>;
    cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3((unsigned)(G * a.spg), 1, (unsigned)a.S);
    cfg.blockDim = dim3((unsigned)(nw * 32), 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 1, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = (unsigned)a.S;
    cfg.attrs = at;
    cfg.numAttrs = a.S > 1 ? 1 : 0;
    if (dic_pdl_take()) {
        at[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[cfg.numAttrs].val.programmaticStreamSerializationAllowed = 1;
        cfg.numAttrs++;
    }
    return cudaLaunchKernelEx(&cfg, fn, a);
}
