/*
 * dic_gemm_wgmma3.cu — FP8 prefill GEMM, third schedule ("v3") of the wgmma +
 * TMA kernel (dic_gemm_wgmma.cu holds v2 and the host entry point that
 * picks v3 where it applies: FP8, plain rows, K-block kb = 128 — act_block and
 * the weight block both >= 128 — and K % 256 == 0). sm_100a builds an empty
 * body (the dispatch takes wgmma only on a 9.x device).
 *
 * Numerics: exactly v2's (so v1's): per output, per 128-k block the tensor
 * cores form P in fp32 from +0 over four m64n128k32 e4m3 steps in increasing
 * k (scale-d = 0 on the first), then tot = fmaf(P, s_act * s_w, tot), blocks
 * in increasing k, tot from +0. The factor s_act * s_w is the same fp32
 * product v2 forms (0 for rows past M). A row's bits depend only on its row of
 * A, the weights and the scales: not on M, the tile, the grid or other rows
 * (no split-K; every output is owned by one thread). Deterministic.
 *
 * What changes against v2 (same 128 x 128 tile, 2 consumer warpgroups of 64
 * rows, 6 x 32 KB stages, 128-byte swizzle, two accumulator sets per consumer
 * so the fold of block b overlaps the wgmmas of block b + 1):
 *  - persistent grid (one CTA per SM, or as many 2-CTA clusters as fit): the
 *    tiles are walked in a grouped raster (8 row tiles per group) by every CTA
 *    with a stride of the grid, so the producer loads the next tile's first
 *    stages while the consumers fold and store the current one;
 *  - the per-block factors s_act[row] * s_w are formed by three producer warps
 *    (each owns two of the six stages) and put next to the stage's operands in
 *    shared memory: the consumers read two floats from shared memory instead
 *    of global loads on their critical path;
 *  - the consumer loop is straight-line per pair of blocks (K % 256 == 0: no
 *    branch between issue and wait) with the accumulator operands fenced for
 *    the compiler on both sides of each wgmma batch, so no accumulator register
 *    is touched while its wgmmas are in flight (ptxas C7514 on v2);
 *  - stage release is one arrive per consumer warp (lane 0 after the warp's
 *    wait_group), not one per thread;
 *  - in lab/gemm only (cl = 2; docs/kernels/gemm-prefill.md "Tried") a cluster of 2 CTAs on vertically adjacent tiles
 *    shares the 128 x 128 weight tile: each CTA loads 64 of its rows and the
 *    copy engine multicasts them into both CTAs (half the weight traffic from
 *    L2); each CTA's stage is released only when both CTAs' consumers are done
 *    with it (remote mbarrier arrives), and the CTAs leave through a cluster
 *    barrier.
 */
#include <cuda.h>
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_tmap.h"

#define W3_BM 128
#define W3_BN 128
#define W3_BK 128
#define W3_ST 6
#define W3_TILE_BYTES ((W3_BM + W3_BN) * W3_BK) /* 32 KB of operands per stage */
#define W3_SMEM (W3_ST * W3_TILE_BYTES + W3_ST * W3_BM * 4 + 1024)
#define W3_GROUP 8 /* row tiles per raster group */

typedef struct w3args {
    int M, N, K, nsa, lab, lwb, nwb;
    int mt, nt, mtc, units; /* row tiles, column tiles, cluster rows (ceil(mt / cl)), mtc * nt */
    const float *sa;
    const uint8_t *ws;
    float *C32;
    uint16_t *C16;
    size_t ldc;
} w3args;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

#include "ops/cuda/dic_wgmma_ptx.cuh"

/* arrive on the barrier at the same offset in cluster CTA `cta` (may be this one) */
static __device__ __forceinline__ void w3_arrive_cluster(uint32_t b, uint32_t cta) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(b), "r"(cta));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(r) : "memory");
}
/* the same box into every CTA of the cluster in `mask`, at the same offsets, completing on each one's barrier */
static __device__ __forceinline__ void w3_tma_mc(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar,
                                                 uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n"
                 ::"r"(dst), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
                 : "memory");
}
static __device__ __forceinline__ void w3_cluster_sync(void) {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ uint32_t w3_ctarank(void) {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
/* compiler-level fence on the accumulator registers: no read or write of d moves across this point */
static __device__ __forceinline__ void w3_fence_acc(float d[64]) {
#pragma unroll
    for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[i])::"memory");
}
/* D = A W^T (scale-d = 0; d is written only). D 64 x 128 fp32, A 64 x 32 and W 128 x 32 e4m3, both K-major in smem */
static __device__ __forceinline__ void w3_mma0(float d[64], uint64_t da, uint64_t db) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, 0, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1;\n"
                 "}\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31]), "=f"(d[32]), "=f"(d[33]), "=f"(d[34]), "=f"(d[35]), "=f"(d[36]), "=f"(d[37]), "=f"(d[38]), "=f"(d[39]), "=f"(d[40]), "=f"(d[41]), "=f"(d[42]), "=f"(d[43]), "=f"(d[44]), "=f"(d[45]), "=f"(d[46]), "=f"(d[47]), "=f"(d[48]), "=f"(d[49]), "=f"(d[50]), "=f"(d[51]), "=f"(d[52]), "=f"(d[53]), "=f"(d[54]), "=f"(d[55]), "=f"(d[56]), "=f"(d[57]), "=f"(d[58]), "=f"(d[59]), "=f"(d[60]), "=f"(d[61]), "=f"(d[62]), "=f"(d[63])
                 : "l"(da), "l"(db));
}

/* D += A W^T. D 64 x 128 fp32, A 64 x 32 and W 128 x 32 e4m3, both K-major in smem */
static __device__ __forceinline__ void w3_mma(float d[64], uint64_t da, uint64_t db) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db));
}

/* schedule unit u -> this CTA's tile (pm, pn): grouped raster over cluster rows of cl row tiles */
static __device__ __forceinline__ void w3_tile(const w3args &a, int u, int cl, int rank, int *pm, int *pn) {
    const int G = W3_GROUP / cl, npg = G * a.nt, gid = u / npg, f = gid * G, gsz = min(a.mtc - f, G);
    const int r = u - gid * npg;
    *pm = (f + r % gsz) * cl + rank;
    *pn = r / gsz;
}

static __device__ __forceinline__ void w3_store(const w3args &a, const float tot[64], int ra, int rb, int n0, int tq) {
    const int pair = (a.ldc & 1) == 0;
#pragma unroll
    for (int q = 0; q < 16; q++) {
        const int col = n0 + 8 * q + 2 * tq;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = h ? rb : ra;
            const float v0 = tot[4 * q + 2 * h], v1 = tot[4 * q + 2 * h + 1];
            if (r >= a.M || col >= a.N) continue;
            const size_t o = (size_t)r * a.ldc + col;
            if (a.C32) {
                if (pair && col + 1 < a.N) *(float2 *)(a.C32 + o) = make_float2(v0, v1);
                else {
                    a.C32[o] = v0;
                    if (col + 1 < a.N) a.C32[o + 1] = v1;
                }
            } else {
                const uint32_t b0 = dic_f32_to_bf16(v0), b1 = dic_f32_to_bf16(v1);
                if (pair && col + 1 < a.N) *(uint32_t *)(a.C16 + o) = b0 | (b1 << 16);
                else {
                    a.C16[o] = (uint16_t)b0;
                    if (col + 1 < a.N) a.C16[o + 1] = (uint16_t)b1;
                }
            }
        }
    }
}

/* Consumer: wait for stage s, read the rows' factors, issue the block's four k32 steps into PS (one group). */
#define W3_ISSUE(PS, FA, FB, REL)                                                                   \
    do {                                                                                            \
        mbar_wait(smem_u32(&full[s]), ph);                                                             \
        FA = fac[s * W3_BM + rla];                                                                  \
        FB = fac[s * W3_BM + rlb];                                                                  \
        REL = s;                                                                                    \
        const uint32_t st_ = base + (uint32_t)s * W3_TILE_BYTES;                                    \
        const uint64_t dA_ = desc_sw128(st_ + (uint32_t)cw * 64 * W3_BK), dW_ = desc_sw128(st_ + W3_BM * W3_BK); \
        wg_fence();                                                                                 \
        w3_mma0(PS, dA_, dW_);                                                                      \
        w3_mma(PS, dA_ + 2, dW_ + 2);                                                               \
        w3_mma(PS, dA_ + 4, dW_ + 4);                                                               \
        w3_mma(PS, dA_ + 6, dW_ + 6);                                                               \
        wg_commit();                                                                                \
        if (++s == W3_ST) s = 0, ph ^= 1u;                                                          \
    } while (0)
/* Consumer, after the wait that retired PS's group: release its stage, fold PS into tot. */
#define W3_FOLD(PS, FA, FB, REL)                                                                    \
    do {                                                                                            \
        w3_fence_acc(PS);                                                                           \
        __syncwarp();                                                                               \
        if (lane == 0) {                                                                            \
            if (CL == 1) mbar_arrive(smem_u32(&empty[REL]));                                           \
            else                                                                                    \
                for (int d_ = 0; d_ < CL; d_++) w3_arrive_cluster(smem_u32(&empty[REL]), (uint32_t)d_); \
        }                                                                                           \
        _Pragma("unroll") for (int q_ = 0; q_ < 16; q_++) {                                         \
            tot[4 * q_ + 0] = fmaf(PS[4 * q_ + 0], FA, tot[4 * q_ + 0]);                            \
            tot[4 * q_ + 1] = fmaf(PS[4 * q_ + 1], FA, tot[4 * q_ + 1]);                            \
            tot[4 * q_ + 2] = fmaf(PS[4 * q_ + 2], FB, tot[4 * q_ + 2]);                            \
            tot[4 * q_ + 3] = fmaf(PS[4 * q_ + 3], FB, tot[4 * q_ + 3]);                            \
        }                                                                                           \
    } while (0)

static __device__ __forceinline__ void w3_body(const w3args &a, const CUtensorMap *tmA, const CUtensorMap *tmW,
                                               const int CL, const int TWO) {
    extern __shared__ uint8_t dsm[];
    __shared__ __align__(8) uint64_t full[W3_ST], empty[W3_ST];
    const uint32_t base = (smem_u32(dsm) + 1023u) & ~1023u;
    float *fac = (float *)(dsm + (base - smem_u32(dsm)) + W3_ST * W3_TILE_BYTES); /* [stage][row] s_act * s_w */
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
    const int rank = CL == 1 ? 0 : (int)w3_ctarank();
    const int cid = blockIdx.x / CL, ncl = gridDim.x / CL;
    const int nch = a.K / W3_BK;

    if (tid == 0) {
        for (int s = 0; s < W3_ST; s++) {
            mbar_init(smem_u32(&full[s]), 1 + 32); /* the TMA thread's expect_tx + one factor warp */
            mbar_init(smem_u32(&empty[s]), 8 * CL); /* one arrive per consumer warp of every CTA in the cluster */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (CL == 1) __syncthreads();
    else w3_cluster_sync();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        const int warp = tid >> 5;
        if (warp == 0) {
            if (lane == 0) { /* TMA */
                int s = 0;
                uint32_t ph = 0;
                for (int u = cid; u < a.units; u += ncl) {
                    int pm, pn;
                    w3_tile(a, u, CL, rank, &pm, &pn);
                    const int mA = min(pm, a.mt - 1) * W3_BM, n0 = pn * W3_BN; /* a tile past M: any rows, not stored */
                    for (int c = 0; c < nch; c++) {
                        mbar_wait(smem_u32(&empty[s]), ph ^ 1u);
                        const uint32_t sA = base + (uint32_t)s * W3_TILE_BYTES, sW = sA + W3_BM * W3_BK;
                        const uint32_t fb = smem_u32(&full[s]);
                        mbar_expect_tx(fb, W3_TILE_BYTES);
                        tma_load_2d(sA, tmA, c * W3_BK, mA, fb);
                        if (CL == 1) tma_load_2d(sW, tmW, c * W3_BK, n0, fb);
                        else
                            w3_tma_mc(sW + (uint32_t)rank * (W3_BN / CL) * W3_BK, tmW, c * W3_BK, n0 + rank * (W3_BN / CL),
                                      fb, (uint16_t)((1u << CL) - 1u));
                        if (++s == W3_ST) s = 0, ph ^= 1u;
                    }
                }
            }
        } else { /* factor warps 1..3: warp w serves the stages s with s % 3 == w - 1 */
            int s = 0;
            uint32_t ph = 0;
            for (int u = cid; u < a.units; u += ncl) {
                int pm, pn;
                w3_tile(a, u, CL, rank, &pm, &pn);
                const int m0 = pm * W3_BM, n0 = pn * W3_BN;
                const uint8_t *wsr = a.ws + (size_t)(n0 >> a.lwb) * a.nwb;
                for (int c = 0; c < nch; c++) {
                    if (s % 3 == warp - 1) {
                        const int kbs = c * W3_BK;
                        const float wv = dic_e8m0_to_f32(wsr[kbs >> a.lwb]);
                        float v[4];
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            const int row = m0 + lane + 32 * i;
                            const float s0 = row < a.M ? a.sa[(size_t)row * a.nsa + (kbs >> a.lab)] : 0.0f;
                            v[i] = s0 * wv;
                        }
                        mbar_wait(smem_u32(&empty[s]), ph ^ 1u);
#pragma unroll
                        for (int i = 0; i < 4; i++) fac[s * W3_BM + lane + 32 * i] = v[i];
                        mbar_arrive(smem_u32(&full[s]));
                    }
                    if (++s == W3_ST) s = 0, ph ^= 1u;
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int cw = wg - 1, t = tid & 127, warp = t >> 5, g = lane >> 2, tq = lane & 3;
        const int rla = cw * 64 + warp * 16 + g, rlb = rla + 8;
        int s = 0, r0 = 0, r1 = 0;
        uint32_t ph = 0;
        float P0[64], P1[64], tot[64], fa0, fb0, fa1, fb1;
        for (int u = cid; u < a.units; u += ncl) {
            int pm, pn;
            w3_tile(a, u, CL, rank, &pm, &pn);
#pragma unroll
            for (int i = 0; i < 64; i++) tot[i] = 0.0f;
            if (!TWO) { /* one accumulator set: wait for each block, fold it (the other warpgroup keeps the tensor cores busy) */
                for (int c = 0; c < nch; c++) {
                    W3_ISSUE(P0, fa0, fb0, r0);
                    wg_wait0();
                    W3_FOLD(P0, fa0, fb0, r0);
                }
                const int m0 = pm * W3_BM;
                w3_store(a, tot, m0 + rla, m0 + rlb, pn * W3_BN, tq);
                continue;
            }
            W3_ISSUE(P0, fa0, fb0, r0);
            for (int c = 0; c < nch - 2; c += 2) {
                W3_ISSUE(P1, fa1, fb1, r1);
                wg_wait1();
                W3_FOLD(P0, fa0, fb0, r0);
                W3_ISSUE(P0, fa0, fb0, r0);
                wg_wait1();
                W3_FOLD(P1, fa1, fb1, r1);
            }
            W3_ISSUE(P1, fa1, fb1, r1);
            wg_wait1();
            W3_FOLD(P0, fa0, fb0, r0);
            wg_wait0();
            W3_FOLD(P1, fa1, fb1, r1);
            const int m0 = pm * W3_BM;
            w3_store(a, tot, m0 + rla, m0 + rlb, pn * W3_BN, tq);
        }
    }
    __syncwarp();
    if (CL > 1) w3_cluster_sync(); /* no CTA leaves while its peer may still multicast into it or arrive on it */
}
#endif

#define W3_KERNEL(NAME, CL, TWO)                                                                    \
    static __global__ void __launch_bounds__(384, 1)                                                \
        NAME(const w3args a, const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmW) { \
        W3_CALL(CL, TWO)                                                                            \
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define W3_CALL(CL, TWO) w3_body(a, &tmA, &tmW, CL, TWO);
#else
#define W3_CALL(CL, TWO)
#endif
W3_KERNEL(k_gemm_q_wgmma3_c1s1, 1, 0) /* the other (cl, sets) instantiations: lab/gemm */

/* ---- host ------------------------------------------------------------------- */


/* rows x cols e4m3, row stride ld bytes; box 128 bytes x box_rows, 128-byte swizzle, OOB -> 0 */
static int w3_map(CUtensorMap *m, const void *p, int rows, int cols, size_t ld, int box_rows) {
    dic_tmap_encode_fn enc = dic_tmap_encoder();
    if (!enc) return 0;
    cuuint64_t dim[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)ld};
    cuuint32_t box[2] = {W3_BK, (cuuint32_t)box_rows}, es[2] = {1, 1};
    return enc(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)p, dim, stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

extern "C" int dic_gemm_wgmma3_ok(int N, int K, int wblock, int act_block) {
    const int kb = act_block < wblock ? act_block : wblock;
    return N > 0 && kb == 128 && K % 256 == 0 && (wblock & (wblock - 1)) == 0 && (act_block & (act_block - 1)) == 0;
}

/* grid: persistent, one CTA per SM (at most one per tile unit) */
static int w3_grid(int units) {
    static int nsm = 0;
    if (!nsm) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            nsm = 132;
    }
    return units < nsm ? units : nsm;
}

extern "C" cudaError_t dic_gemm_q_wgmma3_launch(cudaStream_t st, const void *w, const uint8_t *ws, int N, int K,
                                                int wblock, int act_block, int M, const uint8_t *q, size_t ldq,
                                                const float *sa, float *C32, uint16_t *C16, size_t ldc) {
    if (M <= 0 || N <= 0) return cudaSuccess;
    if (!dic_gemm_wgmma3_ok(N, K, wblock, act_block)) return cudaErrorInvalidValue;
    if (((uintptr_t)w & 15) || ((uintptr_t)q & 15) || ldq % 16) return cudaErrorInvalidValue;
    CUtensorMap tA, tW;
    if (!w3_map(&tA, q, M, K, ldq, W3_BM) || !w3_map(&tW, w, N, K, (size_t)K, W3_BN)) return cudaErrorInvalidValue;
    w3args a;
    a.M = M, a.N = N, a.K = K, a.nsa = K / act_block;
    a.lab = __builtin_ctz((unsigned)act_block), a.lwb = __builtin_ctz((unsigned)wblock), a.nwb = K / wblock;
    a.mt = (M + W3_BM - 1) / W3_BM, a.nt = (N + W3_BN - 1) / W3_BN, a.mtc = a.mt;
    if ((long long)a.mtc * a.nt > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
    a.units = a.mtc * a.nt;
    a.sa = sa, a.ws = ws, a.C32 = C32, a.C16 = C16, a.ldc = ldc;
    void (*kern)(const w3args, const CUtensorMap, const CUtensorMap) = k_gemm_q_wgmma3_c1s1;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, W3_SMEM);
    if (e != cudaSuccess) return e;
    const int grid = w3_grid(a.units);
    kern<<<(unsigned)grid, 384, W3_SMEM, st>>>(a, tA, tW);
    DIC_LAUNCH_CHECK();
}
