/*
 * dic_gemm_float_fast.cu — BF16 and F32 weight GEMMs for dic_ctx.batch_invariant == 0, and
 * the BF16 / FP8B ones of mode 1 (dic_gemm_float_inv_launch: k_mma with the K split from N and K
 * only, docs/determinism.md sec. 7, and at M <= DIC_SKINNY_MAXM the skinny kernel of
 * dic_gemm_float_skinny.cu with k_mma's bits; dic_gemm_float.cu keeps the CPU's exact order
 * for mode-1 F32). fp32 accumulation in other orders than di_gemm: results equal di_gemm to
 * rounding, not bitwise.
 * Deterministic run to run: no atomics; every reduction is a fixed tree.
 *
 * 1. GEMV family (k_gemv, up to 16 rows per tile; auto: F32 at every M, BF16 at M = 1 and
 *    at M <= 4 for N*K <= 2^24):
 *    a warp owns 4 output columns (8 lanes each); a lane loads 16 contiguous bytes of
 *    its column per chunk (a warp instruction reads 4 columns x 128 bytes), up to 8
 *    chunks in flight per lane, then fmaf's them into one fp32 accumulator per row
 *    (activations: bf16 from L1/L2, the 8 lanes of a column group cover 128 B per row,
 *    shared by the warp's 4 column groups). K is split over WPC warps of the CTA
 *    (interleaved chunks) and over CY CTAs of a thread-block cluster (contiguous
 *    ranges); reductions: 8-lane xor butterfly, then the WPC warps in order through
 *    shared memory, then the CY cluster ranks in order through distributed shared
 *    memory (CY > 1 only where a warp would otherwise walk several batches: a cluster
 *    costs microseconds at decode sizes). WPC and CY depend on N and K only, and each
 *    row's chain depends only on that row: a row's bits do not depend on M or on the
 *    other rows (F32 above 16 rows: grid.z tiles of 16 rows, same chains); the variant
 *    flags (weights before the PDL wait, PIPE, PRE) change timing, not sums.
 *    The first batch of weights is read before griddepcontrol.wait (weights are
 *    constants), so its DRAM latency overlaps the previous kernel.
 *    The tile's code is dic_gemv.cuh gemv_tile (shared with the fused router,
 *    dic_route_gate.cu); the launch choices are dic_gemv_plan.
 * 2. BF16 tensor cores (k_mma, every other BF16 launch): mma.sync m16n8k16 bf16 -> fp32, CTA tile
 *    BM x 128 x 64 (BM = 128, or 64 for small M / few tiles), 4 warps, 3-stage cp.async
 *    pipeline into XOR-swizzled shared memory, ldmatrix fragments. Few tiles: split K
 *    over S CTAs of a cluster (S picked from the tile count, so from M too: a row's bits
 *    can depend on M here), partial tiles added in rank order through distributed
 *    shared memory. No scratch is used. Block-diagonal launches (wo_a, M > 4): one launch,
 *    a 128-column tile takes its group's weights and activation columns.
 * FP8B weights (dic.h: FP8 storage, BF16 math) take both families with the BF16 kernels'
 * sums: the GEMV lane loads the 8 bytes standing for its 8 bf16 weights of a chunk (same
 * chunks, same chains: a warp instruction reads 4 columns x 64 bytes) plus the chunk's
 * scale byte; the tensor-core tiles cp.async the 128 x 64 e4m3 bytes of a k-step, and the
 * CTA dequantises them into the BF16 tile the ldmatrix / mma steps read. The dequantised
 * values are the BF16 matrix's exactly (dic_fp8w.cuh), so the outputs are its bits.
 * Exception: dic_gemm_blockdiag with FP8B groups (the wo_a launch) takes kernels of its own:
 * at M <= 4 dic_gemm_fp8w_gemv.cu's GEMV (16-byte e4m3 loads, block-scaled partial sums), above
 * dic_gemm_fp8w_mma.cu's tensor-core kernel (weights as the mma A operand, converted in
 * registers): the GEMM tolerance, not these bits; dic_gemm_fp8w_gemv_enable(0) and
 * dic_gemm_fp8w_mma_maxm(4) restore the paths described here. In mode 1 BF16 / FP8B groups of
 * one shape take one k_mma launch with the M-free split (the per-group bits of mode-1 dic_gemm).
 * Shapes outside the fast kernels' alignment rules (K % 8 for BF16, K % 4 for F32,
 * 16-byte aligned weights, activations aligned to their vector loads) go to the
 * CPU-order kernels (dic_gemm_float_launch), in both modes.
 */
#include <cooperative_groups.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/dic_argmax_key.cuh"
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"
#include "ops/cuda/dic_fp8w.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_gemv.cuh"

namespace cg = cooperative_groups;

/* ------------------------------------------------------------------ GEMV */
#define GV_BF16_MAXM 4 /* auto dispatch: BF16 launches of more rows take k_mma */

/* The GEMV kernel: one tile (dic_gemv.cuh gemv_tile). */
template <int MR, int F32, int PRE, int PIPE, int F8>
static __global__ void __launch_bounds__(GV_T) k_gemv(int M, int N, int K, const uint16_t *__restrict__ A, size_t lda,
                                                      const __grid_constant__ dic_gv_tab tab, int R, int gk,
                                                      float *C32, uint16_t *C16, size_t ldc, int WPC, int CY,
                                                      int flags) {
    gemv_tile<MR, F32, PRE, PIPE, F8>(M, N, K, A, lda, tab, R, gk, C32, C16, ldc, WPC, CY, flags);
}

/* The lean copy of k_gemv<1, 0, 1, 0, 0> for decode-sized BF16 launches at M = 1 (gemv_tile ONE:
 * CY == 1, no DIC_GV_LATE, one batch of GV_U chunks per warp; e.g. the KV compressors' wkv / wgate,
 * N = 128..1024, K = 4096): the same loads and sums, less code (lm_head and other multi-batch
 * launches keep k_gemv). */
static __global__ void __launch_bounds__(GV_T) k_gemv1_one(int M, int N, int K, const uint16_t *__restrict__ A,
                                                           size_t lda, const __grid_constant__ dic_gv_tab tab, int R,
                                                           int gk, float *C32, uint16_t *C16, size_t ldc, int WPC,
                                                           int CY, int flags) {
    gemv_tile<1, 0, 1, 0, 0, 0, 1>(M, N, K, A, lda, tab, R, gk, C32, C16, ldc, WPC, CY, flags);
}

/* The K split: from N and K only. Warps of a CTA first (up to 8, while a warp keeps >= 4
 * chunks); CTAs of a cluster only while a warp would still walk more than one batch of GV_U
 * chunks (a cluster split has a fixed cost that dominates at decode sizes: docs/kernels/gemm-float.md).
 * Both up to ~2048 warps in all. */
static void gemv_split(int f32, int N, int K, int *wpc, int *cy) {
    const int CE = f32 ? 32 : 64, nch = (K + CE - 1) / CE, ngroups = (N + 3) / 4;
    int w = 1, c = 1;
    while ((long long)ngroups * w * c < 2048) {
        const int cpw = (nch + w * c - 1) / (w * c); /* chunks per warp now */
        if (w < 8 && cpw >= 4) w *= 2;
        else if (c < 8 && cpw > GV_U) c *= 2;
        else break;
    }
    *wpc = w, *cy = c;
}

typedef void (*gemv_fn)(int, int, int, const uint16_t *, size_t, const dic_gv_tab, int, int, float *, uint16_t *,
                        size_t, int, int, int);

/* The kernel variant: MR rows per tile; the PIPE choice only at MR = 1 (else the defaults: PRE for
 * MR <= 2, no PIPE). f8: FP8B weights (the BF16 variants' sums). The activations loaded right before
 * their FMAs (PRE = 0 at MR = 1) and the other forced variants: lab/gemm (docs/kernels/gemm-float.md). */
template <int F8>
static gemv_fn gemv_pick_bf(int mr, int pipe) {
    if (mr == 1) return pipe ? k_gemv<1, 0, 1, 1, F8> : k_gemv<1, 0, 1, 0, F8>;
    return mr == 2 ? k_gemv<2, 0, 1, 0, F8> : mr == 4 ? k_gemv<4, 0, 0, 0, F8> : mr == 8 ? k_gemv<8, 0, 0, 0, F8>
                                                                                          : k_gemv<16, 0, 0, 0, F8>;
}
static gemv_fn gemv_pick(int f32, int f8, int mr, int flags) {
    const int pipe = (flags & DIC_GV_PIPE) != 0;
    if (f32) {
        if (mr == 1) return pipe ? k_gemv<1, 1, 1, 1, 0> : k_gemv<1, 1, 1, 0, 0>;
        return mr == 2 ? k_gemv<2, 1, 1, 0, 0> : mr == 4 ? k_gemv<4, 1, 0, 0, 0> : mr == 8 ? k_gemv<8, 1, 0, 0, 0>
                                                                                            : k_gemv<16, 1, 0, 0, 0>;
    }
    return f8 ? gemv_pick_bf<1>(mr, pipe) : gemv_pick_bf<0>(mr, pipe);
}

extern "C" cudaError_t dic_gemv_plan(int f32, int M, int N, int K, int *wpc, int *cy, int *flags, int *mr) {
    gemv_split(f32, N, K, wpc, cy);
    /* PIPE (the next batch's weights in flight during the sums) where a warp walks several
     * batches at M = 1 and the launch is not lm_head-sized (no gain there: docs/kernels/gemv-lm-head.md) */
    const int CE = f32 ? 32 : 64, cpw = ((K + CE - 1) / CE + *wpc * *cy - 1) / (*wpc * *cy);
    *flags = M == 1 && cpw > GV_U && (long long)N * K < (1LL << 26) ? DIC_GV_PIPE : 0;
    *mr = M >= 16 ? 16 : M > 8 ? 16 : M > 4 ? 8 : M > 2 ? 4 : M;
    return cudaSuccess;
}

/* G > 1: block-diagonal launch over W[0..G) (N = G * W->n columns; R = W->n, A offset gk per group). */
static cudaError_t gemv_launch_g(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int G,
                                 int gk, float *C32, uint16_t *C16, size_t ldc) {
    const int f32 = W->fmt == 1, f8 = W->fmt == DIC_WFMT_FP8B, N = G * W->n;
    dic_gv_tab tab;
    memset(&tab, 0, sizeof tab);
    for (int g = 0; g < G; g++) tab.w[g] = W[g].w, tab.s[g] = W[g].scale;
    tab.wb = f8 ? W->wblock : 0;
    int wpc, cy, flags, mr;
    cudaError_t pe = dic_gemv_plan(f32, M, N, W->k, &wpc, &cy, &flags, &mr);
    if (pe != cudaSuccess) return pe;
    gemv_fn fn = gemv_pick(f32, f8, mr, flags);
    /* one batch per warp (the K split over WPC warps only): the lean copy of the same kernel */
    if (fn == (gemv_fn)k_gemv<1, 0, 1, 0, 0> && cy == 1 && !(flags & DIC_GV_LATE) &&
        (W->k + 63) / 64 <= wpc * GV_U)
        fn = k_gemv1_one;
    const int CG = 8 / wpc; /* column groups of 4 per CTA */
    unsigned gx = (unsigned)((N + 4 * CG - 1) / (4 * CG)), gz = (unsigned)((M + mr - 1) / mr);
    if (gz > 65535) return cudaErrorInvalidConfiguration;
    cudaLaunchAttribute at[2];
    cudaLaunchConfig_t cfg = dic_launch_cfg(dim3(gx, (unsigned)cy, gz), dim3(GV_T), 0, st, dim3(1, (unsigned)cy, 1), at);
    return cudaLaunchKernelEx(&cfg, fn, M, N, W->k, A, lda, tab, G > 1 ? W->n : 0, gk, C32, C16, ldc, wpc, cy, flags);
}

static cudaError_t gemv_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W, float *C32,
                               uint16_t *C16, size_t ldc) {
    return gemv_launch_g(st, M, A, lda, W, 1, 0, C32, C16, ldc);
}

/* ------------------------------------------------------------------ tensor cores */
#define MM_BN 128
#define MM_BK 64
#define MM_ST 3
#define MM_T 128
#define MM_LD (MM_BN + 4) /* fp32 reduction tile row stride */

static __device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
static __device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
static __device__ __forceinline__ void mma_bf16(float *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
/* byte offset of (row, 16-byte chunk) in a tile of 128-byte rows, chunks XOR-swizzled by row */
static __device__ __forceinline__ uint32_t swz(int r, int c) { return (uint32_t)(r * 128 + ((c ^ (r & 7)) << 4)); }

/* F8 (FP8B weights): a stage holds the A tile and the 128 x 64 e4m3 bytes of the weight tile
 * (rows of 64 bytes); after the stage lands, the CTA writes the exact BF16 weights into one
 * BF16 tile past the stages (same layout as a BF16 stage's), which the k-step then reads. */
/* AM (k_mma_am, fused greedy argmax: S == 1, fp32 out): the stores as below, then each row's best
 * (value, column) of the tile goes to am_finish (the fused argmax section further down). */
static __device__ __forceinline__ void am_finish(unsigned long long k, int row, int M, int32_t *ids);
template <int BM, int F8, int AM>
static __device__ __forceinline__ void mma_tile(int M, int N, int K, const uint16_t *__restrict__ A, size_t lda,
                                                const dic_gv_tab &tab, int R, int gk, float *C32, uint16_t *C16,
                                                size_t ldc, int S, int32_t *ids) {
    DIC_PDL_ENTER();
    extern __shared__ __align__(128) uint8_t sm[];
    const int STAGE = BM * 128 + MM_BN * (F8 ? 64 : 128);
    const int MI = BM / 32; /* m16 tiles per warp (warp tile BM/2 x 64) */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int wm = (warp >> 1) * (BM / 2), wn = (warp & 1) * 64;
    const int n0 = blockIdx.x * MM_BN, m0 = blockIdx.y * BM;
    /* block-diagonal launches (R > 0, R % MM_BN == 0): the tile's columns belong to group
     * n0 / R (weights tab.w[grp], local columns from nw0, activations from column grp * gk) */
    const int grp = R > 0 ? n0 / R : 0, nw0 = n0 - grp * R, NW = R > 0 ? R : N;
    const uint16_t *__restrict__ W = (const uint16_t *)tab.w[grp];
    const uint8_t *__restrict__ W8 = (const uint8_t *)tab.w[grp];
    A += (size_t)grp * gk;
    const int nkt = (K + MM_BK - 1) / MM_BK, per = (nkt + S - 1) / S;
    const int kt0 = blockIdx.z * per, kt1 = min(nkt, kt0 + per);
    const uint32_t sbase = smem_u32(sm);
    /* F8: the BF16 weight tile; thread tid dequantises rows tid / 4 + 32 i (i < 4), bytes
     * 16 (tid % 4) .. + 16 of each (one scale block: wblock % 16 == 0), with the scale bytes
     * of the k-step loaded one k-step ahead */
    const uint32_t sbf = sbase + MM_ST * STAGE;
    uint32_t scv[4];
    auto load_scales = [&](int kt) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = (tid >> 2) + 32 * i, k = kt * MM_BK + (tid & 3) * 16;
            scv[i] = 127;
            if (nw0 + r < NW && k < K)
                scv[i] = __ldg(tab.s[grp] + (size_t)((nw0 + r) / tab.wb) * (size_t)(K / tab.wb) + (size_t)(k / tab.wb));
        }
    };
    if constexpr (F8) load_scales(kt0);

    float acc[MI][8][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int jn = 0; jn < 8; jn++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][jn][e] = 0.0f;

    auto load_tile = [&](int stage, int kt) {
        const uint32_t sa = sbase + stage * STAGE, sb = sa + BM * 128;
        const int kb = kt * MM_BK;
#pragma unroll
        for (int i = 0; i < BM * 8 / MM_T; i++) {
            int idx = tid + i * MM_T, r = idx >> 3, c = idx & 7, k = kb + c * 8;
            bool ok = m0 + r < M && k < K;
            const uint16_t *src = ok ? A + (size_t)(m0 + r) * lda + k : A;
            cp_async16(sa + swz(r, c), src, ok ? 16 : 0);
        }
        if constexpr (F8) {
#pragma unroll
            for (int i = 0; i < MM_BN * 4 / MM_T; i++) {
                int idx = tid + i * MM_T, r = idx >> 2, c = idx & 3, k = kb + c * 16;
                bool ok = nw0 + r < NW && k < K;
                const uint8_t *src = ok ? W8 + (size_t)(nw0 + r) * K + k : W8;
                cp_async16(sb + r * 64 + c * 16, src, ok ? 16 : 0);
            }
        } else {
#pragma unroll
            for (int i = 0; i < MM_BN * 8 / MM_T; i++) {
                int idx = tid + i * MM_T, r = idx >> 3, c = idx & 7, k = kb + c * 8;
                bool ok = nw0 + r < NW && k < K;
                const uint16_t *src = ok ? W + (size_t)(nw0 + r) * K + k : W;
                cp_async16(sb + swz(r, c), src, ok ? 16 : 0);
            }
        }
    };

#pragma unroll
    for (int s = 0; s < MM_ST - 1; s++) {
        if (kt0 + s < kt1) load_tile(s, kt0 + s);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int kt = kt0; kt < kt1; kt++) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(MM_ST - 2));
        __syncthreads();
        {
            int nk = kt + MM_ST - 1;
            if (nk < kt1) load_tile((nk - kt0) % MM_ST, nk);
            asm volatile("cp.async.commit_group;\n" ::);
        }
        const uint32_t sa = sbase + ((kt - kt0) % MM_ST) * STAGE;
        uint32_t sb = sa + BM * 128;
        if constexpr (F8) {
            /* the previous k-step's reads of the BF16 tile ended before the barrier above */
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = (tid >> 2) + 32 * i, c = tid & 3;
                const uint4 v = *(const uint4 *)(sm + (sb - sbase) + r * 64 + c * 16);
                float wf[16];
                fp8w_x4(v.x, scv[i], wf), fp8w_x4(v.y, scv[i], wf + 4), fp8w_x4(v.z, scv[i], wf + 8);
                fp8w_x4(v.w, scv[i], wf + 12);
                uint4 lo, hi;
                lo.x = fp8w_pack(wf[0], wf[1]), lo.y = fp8w_pack(wf[2], wf[3]);
                lo.z = fp8w_pack(wf[4], wf[5]), lo.w = fp8w_pack(wf[6], wf[7]);
                hi.x = fp8w_pack(wf[8], wf[9]), hi.y = fp8w_pack(wf[10], wf[11]);
                hi.z = fp8w_pack(wf[12], wf[13]), hi.w = fp8w_pack(wf[14], wf[15]);
                *(uint4 *)(sm + (sbf - sbase) + swz(r, 2 * c)) = lo;
                *(uint4 *)(sm + (sbf - sbase) + swz(r, 2 * c + 1)) = hi;
            }
            if (kt + 1 < kt1) load_scales(kt + 1);
            __syncthreads();
            sb = sbf;
        }
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t af[MI][4], bfr[8][2];
#pragma unroll
            for (int i = 0; i < MI; i++) {
                int r = wm + i * 16 + (lane & 15), c = kk * 2 + (lane >> 4);
                ldsm_x4(sa + swz(r, c), af[i][0], af[i][1], af[i][2], af[i][3]);
            }
#pragma unroll
            for (int jp = 0; jp < 4; jp++) {
                int r = wn + jp * 16 + ((lane >> 4) << 3) + (lane & 7), c = kk * 2 + ((lane >> 3) & 1);
                ldsm_x4(sb + swz(r, c), bfr[2 * jp][0], bfr[2 * jp][1], bfr[2 * jp + 1][0], bfr[2 * jp + 1][1]);
            }
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int jn = 0; jn < 8; jn++)
                    mma_bf16(acc[i][jn], af[i][0], af[i][1], af[i][2], af[i][3], bfr[jn][0], bfr[jn][1]);
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);

    if (AM || S == 1) {
        unsigned long long kk[MI][2]; /* AM: this thread's best key of row (i, h) */
#pragma unroll
        for (int i = 0; i < MI; i++) kk[i][0] = kk[i][1] = 0ull;
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int jn = 0; jn < 8; jn++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    int m = m0 + wm + i * 16 + (lane >> 2) + h * 8;
                    int n = n0 + wn + jn * 8 + (lane & 3) * 2;
                    if (m >= M) continue;
                    float v0 = acc[i][jn][2 * h], v1 = acc[i][jn][2 * h + 1];
                    if (AM || C32) {
                        if (n < N) C32[(size_t)m * ldc + n] = v0;
                        if (n + 1 < N) C32[(size_t)m * ldc + n + 1] = v1;
                        if constexpr (AM) {
                            if (n < N) kk[i][h] = max(kk[i][h], dic_argmax_key(v0, n));
                            if (n + 1 < N) kk[i][h] = max(kk[i][h], dic_argmax_key(v1, n + 1));
                        }
                    } else {
                        if (n < N) C16[(size_t)m * ldc + n] = dic_f32_to_bf16(v0);
                        if (n + 1 < N) C16[(size_t)m * ldc + n + 1] = dic_f32_to_bf16(v1);
                    }
                }
        if constexpr (AM) { /* a row's 4 lanes (xor 1, 2), then the 2 warps of its wm through shared memory */
            __shared__ unsigned long long skey[BM];
            if (tid < BM) skey[tid] = 0ull;
            __syncthreads();
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    unsigned long long k = kk[i][h];
                    k = max(k, __shfl_xor_sync(0xFFFFFFFFu, k, 1));
                    k = max(k, __shfl_xor_sync(0xFFFFFFFFu, k, 2));
                    if ((lane & 3) == 0 && k) atomicMax(&skey[wm + i * 16 + (lane >> 2) + h * 8], k);
                }
            __syncthreads();
            am_finish(tid < BM && m0 + tid < M ? skey[tid] : 0ull, m0 + tid, M, ids);
        }
        return;
    }
    /* split K over the cluster: partial tiles through shared memory, added in rank order */
    __syncthreads();
    float *red = (float *)sm;
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int jn = 0; jn < 8; jn++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int r = wm + i * 16 + (lane >> 2) + h * 8, cc = wn + jn * 8 + (lane & 3) * 2;
                *(float2 *)&red[r * MM_LD + cc] = make_float2(acc[i][jn][2 * h], acc[i][jn][2 * h + 1]);
            }
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();
    const int rank = (int)cl.block_rank(), rows = BM / S;
    for (int idx = tid; idx < rows * MM_BN; idx += MM_T) {
        int r = rank * rows + idx / MM_BN, cc = idx % MM_BN;
        int m = m0 + r, n = n0 + cc;
        float v = 0.0f;
        for (int s = 0; s < S; s++) v += cl.map_shared_rank(red, s)[r * MM_LD + cc];
        if (m < M && n < N) {
            if (C32) C32[(size_t)m * ldc + n] = v;
            else C16[(size_t)m * ldc + n] = dic_f32_to_bf16(v);
        }
    }
    cl.sync();
}

template <int BM, int F8>
static __global__ void __launch_bounds__(MM_T) k_mma(int M, int N, int K, const uint16_t *__restrict__ A, size_t lda,
                                                     const __grid_constant__ dic_gv_tab tab, int R, int gk,
                                                     float *C32, uint16_t *C16, size_t ldc, int S) {
    mma_tile<BM, F8, 0>(M, N, K, A, lda, tab, R, gk, C32, C16, ldc, S, NULL);
}

static size_t mma_smem(int bm, int f8) {
    size_t pipe = f8 ? (size_t)MM_ST * (bm * 128 + MM_BN * 64) + MM_BN * 128 : (size_t)MM_ST * (bm * 128 + MM_BN * 128);
    size_t redb = (size_t)bm * MM_LD * 4;
    return pipe > redb ? pipe : redb;
}

/* The K split S (CTAs of a cluster) of `tiles` output tiles over nkt k-steps: from the tile count (so from M). */
static int mma_split(long long tiles, int nkt) {
    int S = 1;
    while (tiles * S < 132 && S < 8 && nkt / (2 * S) >= 4) S *= 2;
    return S;
}

/* The batch-invariant mode's K split (docs/determinism.md sec. 7): mma_split of the column tiles of one
 * row tile, so from N and K only. Every output then takes the same chain at every M: per k-step of its
 * rank's contiguous range the four m16n8k16 steps in k order (fp32 accumulate; an element's sum depends
 * on its own row and column fragments only, not on BM or its place in the tile), the S partials added
 * in rank order from 0.0f. */
static int mma_split_inv(int N, int K) { return mma_split((N + MM_BN - 1) / MM_BN, (K + MM_BK - 1) / MM_BK); }

/* G > 1: block-diagonal launch over W[0..G) (N = G * W->n, W->n % MM_BN == 0; A offset gk per group). */
static cudaError_t mma_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int G, int gk,
                              float *C32, uint16_t *C16, size_t ldc, int force_bm, int force_s) {
    const int N = G * W->n, K = W->k, f8 = W->fmt == DIC_WFMT_FP8B;
    if (G > 1 && W->n % MM_BN) return cudaErrorInvalidValue;
    dic_gv_tab tab;
    memset(&tab, 0, sizeof tab);
    for (int g = 0; g < G; g++) tab.w[g] = W[g].w, tab.s[g] = W[g].scale;
    tab.wb = f8 ? W->wblock : 0;
    const long long t128 = (long long)((M + 127) / 128) * ((N + MM_BN - 1) / MM_BN);
    int bm = (M <= 64 || t128 < 66) ? 64 : 128;
    if (force_bm) bm = force_bm;
    const long long tiles = (long long)((M + bm - 1) / bm) * ((N + MM_BN - 1) / MM_BN);
    int S = mma_split(tiles, (K + MM_BK - 1) / MM_BK);
    if (force_s) S = force_s;
    if ((M + bm - 1) / bm > 65535) return cudaErrorInvalidConfiguration;
    const size_t smem = mma_smem(bm, f8);
    void (*fn)(int, int, int, const uint16_t *, size_t, const dic_gv_tab, int, int, float *, uint16_t *, size_t, int) =
        f8 ? (bm == 64 ? k_mma<64, 1> : k_mma<128, 1>) : (bm == 64 ? k_mma<64, 0> : k_mma<128, 0>);
    cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    cudaLaunchAttribute at[2];
    cudaLaunchConfig_t cfg =
        dic_launch_cfg(dim3((unsigned)((N + MM_BN - 1) / MM_BN), (unsigned)((M + bm - 1) / bm), (unsigned)S),
                       dim3(MM_T), smem, st, dim3(1, 1, (unsigned)S), at);
    return cudaLaunchKernelEx(&cfg, fn, M, N, K, A, lda, tab, G > 1 ? W->n : 0, gk, C32, C16, ldc, S);
}

/* ------------------------------------------------------------------ dispatch */
static int al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static int g_via_bf16_off; /* bench / tests: 1 = FP8B above the mma's M range takes k_mma F8 */
extern "C" void dic_gemm_fp8w_via_bf16_enable(int on) { g_via_bf16_off = !on; }
extern "C" int dic_gemm_fp8w_via_bf16_enabled(void) { return !g_via_bf16_off; }

extern "C" cudaError_t dic_gemm_float_fast_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda,
                                                  const dic_wmat *W, float *C32, uint16_t *C16, size_t ldc,
                                                  int path) {
    if (M <= 0 || W->n <= 0) return cudaSuccess;
    if (W->fmt != 0 && W->fmt != 1 && W->fmt != DIC_WFMT_FP8B) return cudaErrorInvalidValue;
    if (path == DIC_GEMMF_PATH_INV) return dic_gemm_float_inv_launch(st, M, A, lda, W, C32, C16, ldc);
    const int f32 = W->fmt == 1, K = W->k;
    if (W->fmt == DIC_WFMT_FP8B && (W->wblock <= 0 || W->wblock % 16 || K % W->wblock || !W->scale))
        return cudaErrorInvalidValue;
    /* FP8B: the BF16 rules and choices (so the BF16 matrix's kernel and bits) */
    int ok = K > 0 && al16(W->w) && (f32 ? (K % 4 == 0 && lda % 4 == 0 && ((uintptr_t)A & 7) == 0)
                                        : (K % 8 == 0 && lda % 8 == 0 && al16(A)));
    if (path == DIC_GEMMF_PATH_OLD || !ok) return dic_gemm_float_launch(st, M, A, lda, W, C32, C16, ldc);
    if (path == DIC_GEMMF_PATH_GEMV) {
        if (!f32 && M > 16) return cudaErrorInvalidValue;
        return gemv_launch(st, M, A, lda, W, C32, C16, ldc);
    }
    if (path == DIC_GEMMF_PATH_MMA || path == DIC_GEMMF_PATH_MMA64 || path == DIC_GEMMF_PATH_MMA128) {
        if (f32) return cudaErrorInvalidValue;
        return mma_launch(st, M, A, lda, W, 1, 0, C32, C16, ldc,
                          path == DIC_GEMMF_PATH_MMA64 ? 64 : path == DIC_GEMMF_PATH_MMA128 ? 128 : 0, 0);
    }
    /* auto (docs/kernels/gemm-float.md): BF16 on the GEMV kernels at M = 1, and at M <= GV_BF16_MAXM
     * for matrices up to 2^24 elements; else the tensor cores */
    /* the lm_head-sized BF16 matrices at M <= DIC_GS_MAXM with fp32 out: the bulk-copy stream
     * (dic_gemv_stream.cu, docs/kernels/gemv-lm-head.md) */
    if (W->fmt == 0 && C32 && !C16 && dic_gemv_stream_auto(M, A, lda, W, ldc))
        return dic_gemv_stream_launch(st, 0, M, A, lda, W, C32, ldc, NULL);
    if (f32 || M == 1 || (M <= GV_BF16_MAXM && (long long)W->n * K <= (1LL << 24)))
        return gemv_launch(st, M, A, lda, W, C32, C16, ldc);
    return mma_launch(st, M, A, lda, W, 1, 0, C32, C16, ldc, 0, 0);
}

/* The batch-invariant (default) mode's BF16 / FP8B product (dic_gemm_int.h dic_gemm_float_inv_launch):
 * k_mma's chains at every M with the M-free split mma_split_inv, so a row's bits are its own at M = 1 and
 * at M = 8192; at M <= DIC_SKINNY_MAXM computed by the skinny kernel (dic_gemm_float_skinny.cu: the same
 * bits, streamed for bandwidth). F32 weights and shapes outside k_mma's alignment rules keep dic_gemm_float_launch (the CPU's
 * per-row chains: also M-free). */
extern "C" cudaError_t dic_gemm_float_inv_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda,
                                                 const dic_wmat *W, float *C32, uint16_t *C16, size_t ldc) {
    if (M <= 0 || W->n <= 0) return cudaSuccess;
    if (W->fmt != 0 && W->fmt != 1 && W->fmt != DIC_WFMT_FP8B) return cudaErrorInvalidValue;
    const int K = W->k, f8 = W->fmt == DIC_WFMT_FP8B;
    if (f8 && (W->wblock <= 0 || W->wblock % 16 || K % W->wblock || !W->scale)) return cudaErrorInvalidValue;
    const int ok = W->fmt != 1 && K > 0 && K % 8 == 0 && lda % 8 == 0 && al16(A) && al16(W->w) && (!f8 || K % 16 == 0);
    if (!ok) return dic_gemm_float_launch(st, M, A, lda, W, C32, C16, ldc);
    const int S = mma_split_inv(W->n, K);
    if (M <= DIC_SKINNY_MAXM) { /* the same bits, streamed (dic_gemm_float_skinny.cu) */
        const cudaError_t e = dic_gemm_skinny_launch(st, M, A, lda, W, 1, 0, S, C32, C16, ldc, NULL);
        if (e != cudaErrorNotSupported) return e;
    }
    return mma_launch(st, M, A, lda, W, 1, 0, C32, C16, ldc, 0, S);
}

/* ------------------------------------------------------------------ fused greedy argmax */
/* dic_gemm_argmax (dic_gemm_int.h): the decode lm_head's GEMM (BF16 weights, fp32 logits,
 * M <= DIC_AM_MAXM) also writes each row's greedy argmax, replacing the dic_argmax launch
 * after it. The logits are the AUTO dispatch's kernels' bits (the same tile code, split and
 * summation order: k_gemv with EPI, k_mma at BM = 64 with S == 1). Each CTA folds the
 * (value, column) pairs it stored into one 64-bit key per row, ordered like dic_argmax's
 * "better" (dic_sample.cu): NaN counts as -inf, equal values (+0 == -0) go to the lowest
 * column. The CTA's key goes into the row's global key by an INTEGER atomicMax (the maximum
 * of a set: the same bits in any arrival order), then the CTA takes a ticket; the last one
 * (threadfence + counter, reset by it, so a graph replays) writes the ids and clears the keys.
 * The keys and the counter are one set per device: launches of this kernel must not overlap
 * (the decode step runs one lm_head at a time on one stream). */
static __device__ unsigned long long g_am_key[DIC_AM_MAXM];
static __device__ unsigned g_am_cnt;

/* Every thread of the CTA, after its stores: k = its key of row `row` (0: none). */
static __device__ __forceinline__ void am_finish(unsigned long long k, int row, int M, int32_t *ids) {
    __shared__ int am_last;
    if (k) {
        atomicMax(&g_am_key[row], k);
        __threadfence();
    }
    __syncthreads();
    if (threadIdx.x == 0) am_last = atomicAdd(&g_am_cnt, 1u) == gridDim.x * gridDim.y * gridDim.z - 1;
    __syncthreads();
    if (!am_last) return;
    __threadfence();
    if ((int)threadIdx.x < M) {
        const unsigned long long b = atomicExch(&g_am_key[threadIdx.x], 0ull);
        ids[threadIdx.x] = b ? (int32_t)~(uint32_t)b : 0;
    }
    if (threadIdx.x == 0) g_am_cnt = 0u;
}

/* The GEMV tile with EPI (thread idx gets output idx's sum: the stored bits), stored here, then the
 * argmax. MR = 1 (M = 1: the CTA's <= 32 outputs lie in warp 0, a shuffle reduction) or 8
 * (M = 2..4 on the GEMV: shared-memory atomics per row). */
template <int MR, int PRE>
static __global__ void __launch_bounds__(GV_T) k_gemv_am(int M, int N, int K, const uint16_t *__restrict__ A,
                                                         size_t lda, const __grid_constant__ dic_gv_tab tab,
                                                         float *C32, size_t ldc, int WPC, int flags, int32_t *ids) {
    float v = 0.0f;
    gemv_tile<MR, 0, PRE, 0, 0, 1, 0>(M, N, K, A, lda, tab, 0, 0, C32, NULL, ldc, WPC, 1, flags, &v);
    int row, col;
    const bool ok = gemv_out<MR>((int)threadIdx.x, M, N, WPC, &row, &col);
    if (ok) C32[(size_t)row * ldc + col] = v;
    const unsigned long long key = ok ? dic_argmax_key(v, col) : 0ull;
    if constexpr (MR == 1) {
        unsigned long long k = key;
        if (threadIdx.x < 32)
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) k = max(k, __shfl_xor_sync(0xFFFFFFFFu, k, o));
        am_finish(threadIdx.x == 0 ? k : 0ull, (int)blockIdx.z, M, ids);
    } else {
        __shared__ unsigned long long skey[MR];
        if (threadIdx.x < MR) skey[threadIdx.x] = 0ull;
        __syncthreads();
        if (ok) atomicMax(&skey[row - (int)blockIdx.z * MR], key);
        __syncthreads();
        const int t = (int)threadIdx.x, r = (int)blockIdx.z * MR + t;
        am_finish(t < MR && r < M ? skey[t] : 0ull, r, M, ids);
    }
}

static __global__ void __launch_bounds__(MM_T) k_mma_am(int M, int N, int K, const uint16_t *__restrict__ A,
                                                        size_t lda, const __grid_constant__ dic_gv_tab tab,
                                                        float *C32, size_t ldc, int32_t *ids) {
    mma_tile<64, 0, 1>(M, N, K, A, lda, tab, 0, 0, C32, NULL, ldc, 1, ids);
}

/* The argmax fused into the lm_head launch from M = DIC_AM_MINM_DEF, and at every M where the stream kernel
 * runs (its argmax costs one ticket per SM; the GEMV's thousands of CTAs each pay one at M = 1):
 * docs/kernels/gemv-lm-head.md. */
static int am_enabled(int M, int stream) { return M >= DIC_AM_MINM_DEF || stream; }

/* The fused kernel for this call: 1 the GEMV (wpc, flags of dic_gemv_plan), 2 k_mma at BM = 64,
 * 3 the bulk-copy stream (dic_gemv_stream.cu), 0 none. The AUTO dispatch's choice of
 * dic_gemm_float_fast_launch, with its split. */
static int am_plan(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, size_t ldc, int *wpc,
                   int *flags) {
    const int N = W->n, K = W->k;
    const int gs = !c->batch_invariant && dic_gemv_stream_auto(M, A, lda, W, ldc);
    if ((!c->batch_invariant && !am_enabled(M, gs)) || M < 1 || M > DIC_AM_MAXM || W->fmt != 0 || N < 1 ||
        ldc < (size_t)N || !(K > 0 && K % 8 == 0 && lda % 8 == 0 && al16(A) && al16(W->w)))
        return 0;
    /* batch-invariant mode, where the M-free split is 1 (dic_gemm_float_inv_launch's bits): the skinny
     * kernel with its argmax (4), else k_mma_am */
    if (c->batch_invariant) {
        if (mma_split_inv(N, K) != 1) return 0;
        return dic_gemm_skinny_fits(M, A, lda, W, 1, 0, 1) ? 4 : 2;
    }
    if (gs) return 3;
    if (M == 1 || (M <= GV_BF16_MAXM && (long long)N * K <= (1LL << 24))) {
        int cy = 0, mr = 0;
        return dic_gemv_plan(0, M, N, K, wpc, &cy, flags, &mr) == cudaSuccess && cy == 1 ? 1 : 0;
    }
    return mma_split((N + MM_BN - 1) / MM_BN, (K + MM_BK - 1) / MM_BK) == 1 ? 2 : 0; /* M <= 64: one row tile */
}

extern "C" int dic_gemm_argmax_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                  size_t ldc) {
    int wpc, flags;
    return am_plan(c, M, A, lda, W, ldc, &wpc, &flags) != 0;
}

extern "C" cudaError_t dic_gemm_argmax(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                       float *C32, size_t ldc, int32_t *ids) {
    int wpc = 1, flags = 0;
    const int kind = C32 && ids ? am_plan(c, M, A, lda, W, ldc, &wpc, &flags) : 0;
    if (!kind) return cudaErrorNotSupported;
    if (kind == 3) return dic_gemv_stream_launch(c->stream, c->num_sms, M, A, lda, W, C32, ldc, ids);
    if (kind == 4) return dic_gemm_skinny_launch(c->stream, M, A, lda, W, 1, 0, 1, C32, NULL, ldc, ids);
    const int N = W->n, K = W->k;
    dic_gv_tab tab;
    memset(&tab, 0, sizeof tab);
    tab.w[0] = W->w;
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.stream = c->stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = dic_pdl_take() ? 1 : 0;
    if (kind == 1) {
        const int CG = 8 / wpc; /* column groups of 4 per CTA */
        cfg.gridDim = dim3((unsigned)((N + 4 * CG - 1) / (4 * CG)), 1, 1); /* M <= 8: one row tile */
        cfg.blockDim = dim3(GV_T, 1, 1);
        return cudaLaunchKernelEx(&cfg, M == 1 ? k_gemv_am<1, 1> : k_gemv_am<8, 0>, M, N, K, A, lda, tab, C32, ldc,
                                  wpc, flags, ids);
    }
    const size_t smem = mma_smem(64, 0);
    cudaError_t e = cudaFuncSetAttribute(k_mma_am, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    cfg.gridDim = dim3((unsigned)((N + MM_BN - 1) / MM_BN), 1, 1);
    cfg.blockDim = dim3(MM_T, 1, 1);
    cfg.dynamicSmemBytes = smem;
    return cudaLaunchKernelEx(&cfg, k_mma_am, M, N, K, A, lda, tab, C32, ldc, ids);
}

/* Block-diagonal BF16 / F32 / FP8B product (ops.h di_gemm_blockdiag) in one launch in fast mode
 * when every group has the same format and shape: FP8B at M <= GV_BF16_MAXM with n even takes
 * dic_gemm_fp8w_gemv_g (unless switched off: then the bitwise k_gemv F8 below), FP8B above with
 * n % 16 == 0 and K % 64 == 0 dic_gemm_fp8w_mma_g (up to dic_gemm_fp8w_mma_maxm_get()); the GEMV
 * (F32, or BF16 / FP8B at M <= GV_BF16_MAXM;
 * n % 4 == 0 so a warp's 4 columns share a group), else for BF16 with n % 128 == 0 the
 * tensor-core tiles (a 128-column tile lies in one group; the split S depends on the tile
 * count, so on M). Otherwise one dic_gemm per group. */
/* FP8B groups -> their BF16 matrices (the host's load-time values, dic_fp8w.cuh), G x R x K
 * row-major into `out`: 16 weights per thread (one 16-byte load; 16 | wblock, so one scale). */
static __global__ void k_fp8b_to_bf16(const dic_gv_tab tab, int R, int K, size_t per_group, uint16_t *out) {
    DIC_PDL_ENTER();
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 16; /* first weight of the thread */
    const int g = blockIdx.y;
    if (i >= per_group) return;
    const int r = (int)(i / (size_t)K), k = (int)(i % (size_t)K), wb = tab.wb;
    const uint4 q = __ldg((const uint4 *)((const uint8_t *)tab.w[g] + i));
    const uint32_t sb = tab.s[g][(size_t)(r / wb) * (size_t)(K / wb) + (size_t)(k / wb)];
    const uint32_t x[4] = {q.x, q.y, q.z, q.w};
    uint32_t o[8];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float f[4];
        fp8w_x4(x[j], sb, f);
        o[2 * j] = fp8w_pack(f[0], f[1]);
        o[2 * j + 1] = fp8w_pack(f[2], f[3]);
    }
    uint4 *dst = (uint4 *)(out + (size_t)g * per_group + i);
    dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
    dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

/* Fast mode, FP8B groups at M >= DIC_W8_VIA_BF16_MINM: their BF16 matrices into the top of
 * the scratch, then the BF16 tensor-core kernel on them (the BF16 storage's kernel and bits; the
 * conversion costs one read of the FP8 bytes and one write + read of the BF16 copy, small next to
 * the tiles' work at these M). 0 when the scratch is too small (the caller falls back). */
static int fp8b_via_bf16(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int G, const dic_wmat *W, int gk,
                         float *C32, uint16_t *C16, size_t ldc, int force_s, cudaError_t *res) {
    const int R = W[0].n, K = W[0].k;
    const size_t per_group = (size_t)R * (size_t)K, bytes = (size_t)G * per_group * 2;
    if (!c->scratch || c->scratch_cap < bytes + 256 || K % 16 || R % MM_BN) return 0;
    uint16_t *wb = (uint16_t *)(((uintptr_t)c->scratch + c->scratch_cap - bytes) & ~(uintptr_t)255);
    dic_gv_tab tab;
    if (dic_fp8b_tab(W, G, &tab) != cudaSuccess) return 0;
    dic_wmat W16[DIC_GV_MAXG];
    for (int g = 0; g < G; g++) {
        W16[g] = W[g];
        W16[g].fmt = 0;
        W16[g].w = wb + (size_t)g * per_group;
        W16[g].scale = NULL;
        W16[g].wblock = 0;
    }
    const unsigned blocks = (unsigned)((per_group / 16 + 255) / 256);
    DIC_LAUNCH(k_fp8b_to_bf16, dim3(blocks, (unsigned)G), 256, 0, c->stream, tab, R, K, per_group, wb);
    *res = cudaGetLastError();
    if (*res == cudaSuccess) *res = mma_launch(c->stream, M, A, lda, W16, G, gk, C32, C16, ldc, 0, force_s);
    return 1;
}

extern "C" cudaError_t dic_gemm_blockdiag(const dic_ctx *c, int M, const uint16_t *A, size_t lda, int G,
                                          const dic_wmat *W, int gk, int act_block, float *C32, uint16_t *C16,
                                          size_t ldc) {
    if (M <= 0 || G <= 0) return cudaSuccess;
    const int f8 = W[0].fmt == DIC_WFMT_FP8B;
    int same = G <= DIC_GV_MAXG && (W[0].fmt == 0 || W[0].fmt == 1 || f8) && W[0].k == gk && gk % 8 == 0 &&
               lda % 8 == 0 && al16(A);
    if (same && f8) same = W[0].wblock > 0 && W[0].wblock % 16 == 0 && gk % W[0].wblock == 0;
    for (int g = 0; g < G && same; g++)
        same = W[g].fmt == W[0].fmt && W[g].n == W[0].n && W[g].k == W[0].k && al16(W[g].w) &&
               (!f8 || (W[g].wblock == W[0].wblock && W[g].scale));
    if (c->batch_invariant) {
        /* BF16 / FP8B groups of one shape (wo_a): one k_mma launch with the M-free split of the whole
         * product (dic_gemm_float_inv_launch's chains: each group's outputs are that launch's on its
         * own matrix); FP8B at M >= DIC_W8_VIA_BF16_MINM through the BF16 copy, the same kernel on the
         * same exact values. Otherwise one dic_gemm per group (below), also M-free. */
        if (same && W[0].fmt != 1 && W[0].n % MM_BN == 0 && (!f8 || gk % 16 == 0)) {
            const int S = mma_split_inv(G * W[0].n, gk);
            cudaError_t res = cudaSuccess;
            if (f8 && M >= DIC_W8_VIA_BF16_MINM && dic_gemm_fp8w_via_bf16_enabled() &&
                fp8b_via_bf16(c, M, A, lda, G, W, gk, C32, C16, ldc, S, &res))
                return res;
            if (M <= DIC_SKINNY_BLOCKDIAG_MAXM) { /* the same bits, streamed (dic_gemm_float_skinny.cu) */
                res = dic_gemm_skinny_launch(c->stream, M, A, lda, W, G, gk, S, C32, C16, ldc, NULL);
                if (res != cudaErrorNotSupported) return res;
            }
            return mma_launch(c->stream, M, A, lda, W, G, gk, C32, C16, ldc, 0, S);
        }
        same = 0;
    }
    /* FP8B at M <= 4: the FP8 GEMV of its own (dic_gemm_fp8w_gemv.cu: 16-byte loads of e4m3
     * bytes, block-scaled partial sums; within tolerance, not the BF16 kernel's bits) */
    if (same && f8 && M <= GV_BF16_MAXM && W[0].n % 2 == 0 && dic_gemm_fp8w_gemv_enabled())
        return dic_gemm_fp8w_gemv_g(c->stream, c->num_sms, M, A, lda, W, G, gk, C32, C16, ldc);
    /* FP8B at 4 < M <= dic_gemm_fp8w_mma_maxm_get(): the tensor-core kernel of its own
     * (dic_gemm_fp8w_mma.cu: weights converted in registers, no shared-memory pass) */
    if (same && f8 && M > GV_BF16_MAXM && M <= dic_gemm_fp8w_mma_maxm_get() && W[0].n % 16 == 0 && gk % 64 == 0)
        return dic_gemm_fp8w_mma_g(c->stream, M, A, lda, W, G, gk, C32, C16, ldc);
    cudaError_t res = cudaSuccess;
    if (same && f8 && M >= DIC_W8_VIA_BF16_MINM && dic_gemm_fp8w_via_bf16_enabled() &&
        fp8b_via_bf16(c, M, A, lda, G, W, gk, C32, C16, ldc, 0, &res))
        return res;
    if (same && W[0].n % 4 == 0 && (W[0].fmt == 1 || M <= GV_BF16_MAXM))
        return gemv_launch_g(c->stream, M, A, lda, W, G, gk, C32, C16, ldc);
    if (same && (W[0].fmt == 0 || f8) && W[0].n % MM_BN == 0)
        return mma_launch(c->stream, M, A, lda, W, G, gk, C32, C16, ldc, 0, 0);
    for (int g = 0; g < G; g++) {
        size_t co = (size_t)g * (size_t)W[g].n;
        cudaError_t e = dic_gemm(c, M, A + (size_t)g * gk, lda, &W[g], act_block, C32 ? C32 + co : NULL,
                                 C16 ? C16 + co : NULL, ldc);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
