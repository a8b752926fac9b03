/*
 * lab/gemm/gemm_wgmma_v1.cu — src/ops/cuda/dic_gemm_wgmma.cu with its first schedule v1 (k_gemm_q_wgmma,
 * ver 1 of lab_gemm_q_wgmma_launch; the product keeps v2 and v3: docs/kernels/gemm-prefill.md). FP8 weight GEMM for prefill on Hopper's warpgroup
 * tensor-core instructions (sm_90a: wgmma.mma_async m64n128k32 e4m3 x e4m3
 * -> fp32, operands from shared memory filled by the bulk tensor copy
 * engine through an mbarrier pipeline). sm_100a builds an empty body: the
 * host dispatch (dic_gemm_mma.cu) picks this kernel only on a 9.x device.
 *
 * Numerics: those of the mma.sync tile kernel (dic_gemm_mma.cu) — per output,
 * per K-block of kb = min(act_block, B) (32, 64 or 128) the tensor cores form
 * the partial P in fp32 registers, starting from +0 and accumulating k32
 * steps in increasing k; then C = fmaf(P, s_act * s_w, C), blocks in
 * increasing k. Each output's value depends only on its row of A, its column
 * of W and the scales: not on M, the tile or other rows.
 *
 * Layout: CTA = 3 warpgroups (384 threads). Warpgroup 0 is the producer (one
 * thread issues the TMA copies), warpgroups 1 and 2 each own 64 rows of a
 * 128 x 128 output tile. K is walked in chunks of 128 (one 128-byte swizzled
 * row per M / N index, 16 KB per operand per stage), STAGES deep, with full
 * (TMA -> math) and empty (math -> TMA) mbarriers. Tiles are rasterised in
 * groups of 8 row tiles so the CTAs in flight share A and W in L2. Rows past
 * M, columns past N and k past K are zero-filled by the copy engine and never
 * stored.
 *
 * Two schedules, the same operations and bits: v1 (k_gemm_q_wgmma) waits for
 * each K-block's wgmmas before folding; v2 (k_gemm_q_wgmma2_kb*, the default)
 * issues block b + 1 into a second accumulator set before folding block b.
 */
#include <cuda.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_tmap.h"
#include "gemm_lab.h"

#define WG_BM 128
#define WG_BN 128
#define WG_BK 128
#define WG_STAGES 6
#define WG_STAGE_BYTES ((WG_BM + WG_BN) * WG_BK)
#define WG_SMEM (WG_STAGES * WG_STAGE_BYTES + 1024)
#define WG_GROUP_M 8

typedef struct wgargs {
    int M, N, K, kb, act_block, wblock, nsa, mt, nt;
    int lab, lwb, nwb; /* log2(act_block), log2(wblock), K / wblock */
    const float *sa;
    const uint8_t *ws;
    float *C32;
    uint16_t *C16;
    size_t ldc;
} wgargs;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

#include "ops/cuda/dic_wgmma_ptx.cuh"

/* D(64 x 128, fp32) += A(64 x 32, e4m3, smem) * W(128 x 32, e4m3, smem)^T, both K-major;
 * scale_d = 0: D = A W^T (the old D is not read); 1: D += A W^T */
static __device__ __forceinline__ void wgmma_e4m3_n128(float d[64], uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(scale_d));
}
/* epilogue: straight from the accumulator fragments (rows ra / rb, 16 column pairs from n0 + 2 tq) */
static __device__ __forceinline__ void wg_store_tile(const wgargs &a, const float tot[64], int ra, int rb, int n0,
                                                     int tq) {
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
#endif

static __global__ void __launch_bounds__(384, 1)
    k_gemm_q_wgmma(const wgargs a, const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmW) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t dsm[];
    __shared__ __align__(8) uint64_t full[WG_STAGES], empty[WG_STAGES];
    const uint32_t base = (smem_u32(dsm) + 1023u) & ~1023u; /* 128-byte swizzle atoms: 1024-aligned */
    const int tid = threadIdx.x, wg = tid >> 7;

    /* grouped raster: GROUP_M row tiles share the columns in flight */
    const int pid = blockIdx.x, npg = WG_GROUP_M * a.nt, gid = pid / npg, fm = gid * WG_GROUP_M;
    const int gsz = min(a.mt - fm, WG_GROUP_M);
    const int pm = fm + (pid % npg) % gsz, pn = (pid % npg) / gsz;
    const int m0 = pm * WG_BM, n0 = pn * WG_BN;
    const int nch = (a.K + WG_BK - 1) / WG_BK;

    if (tid == 0) {
        for (int s = 0; s < WG_STAGES; s++) {
            mbar_init(smem_u32(&full[s]), 1);
            mbar_init(smem_u32(&empty[s]), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            for (int c = 0; c < nch; c++) {
                const int s = c % WG_STAGES;
                if (c >= WG_STAGES) mbar_wait(smem_u32(&empty[s]), (uint32_t)(((c / WG_STAGES) & 1) ^ 1));
                const uint32_t sA = base + (uint32_t)s * WG_STAGE_BYTES, sW = sA + WG_BM * WG_BK;
                const uint32_t fb = smem_u32(&full[s]);
                mbar_expect_tx(fb, WG_STAGE_BYTES);
                tma_load_2d(sA, &tmA, c * WG_BK, m0, fb);
                tma_load_2d(sW, &tmW, c * WG_BK, n0, fb);
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int cw = wg - 1, t = tid & 127, warp = t >> 5, lane = t & 31, g = lane >> 2, tq = lane & 3;
        const int ra = m0 + cw * 64 + warp * 16 + g, rb = ra + 8;
        float P[64], tot[64];
#pragma unroll
        for (int i = 0; i < 64; i++) P[i] = tot[i] = 0.0f;
        const int spb = a.kb / 32; /* k32 steps per K-block: 1, 2 or 4 */
        const int K = a.K, KB = K / a.wblock;
        const float *saa = a.sa + (size_t)(ra < a.M ? ra : 0) * a.nsa, *sab = a.sa + (size_t)(rb < a.M ? rb : 0) * a.nsa;
        for (int c = 0; c < nch; c++) {
            const int s = c % WG_STAGES;
            mbar_wait(smem_u32(&full[s]), (uint32_t)((c / WG_STAGES) & 1));
            const uint32_t sA = base + (uint32_t)s * WG_STAGE_BYTES + (uint32_t)cw * 64 * WG_BK,
                           sW = base + (uint32_t)s * WG_STAGE_BYTES + WG_BM * WG_BK;
            const uint64_t dA = desc_sw128(sA), dW = desc_sw128(sW);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int k = c * WG_BK + 32 * j;
                if (k < K) {
                    if ((j & (spb - 1)) == 0) {
#pragma unroll
                        for (int i = 0; i < 64; i++) asm volatile("" : "+f"(P[i])::"memory");
                        wg_fence();
                    }
                    wgmma_e4m3_n128(P, dA + (uint64_t)(2 * j), dW + (uint64_t)(2 * j), 1);
                    if (((j + 1) & (spb - 1)) == 0) { /* K-block complete: promote */
                        wg_commit();
                        const int kbs = k + 32 - a.kb;
                        const float s0 = ra < a.M ? saa[kbs / a.act_block] : 0.0f;
                        const float s1 = rb < a.M ? sab[kbs / a.act_block] : 0.0f;
                        float w[16];
                        if (a.wblock >= WG_BN) {
                            const float w8 = dic_e8m0_to_f32(a.ws[(size_t)(n0 / a.wblock) * KB + kbs / a.wblock]);
#pragma unroll
                            for (int q = 0; q < 16; q++) w[q] = w8;
                        } else {
#pragma unroll
                            for (int q = 0; q < 16; q++) {
                                const int col = n0 + 8 * q;
                                w[q] = col < a.N ? dic_e8m0_to_f32(a.ws[(size_t)(col / a.wblock) * KB + kbs / a.wblock])
                                                 : 0.0f;
                            }
                        }
                        wg_wait0();
#pragma unroll
                        for (int i = 0; i < 64; i++) asm volatile("" : "+f"(P[i])::"memory");
#pragma unroll
                        for (int q = 0; q < 16; q++) {
                            const float f0 = s0 * w[q], f1 = s1 * w[q];
                            tot[4 * q + 0] = fmaf(P[4 * q + 0], f0, tot[4 * q + 0]);
                            tot[4 * q + 1] = fmaf(P[4 * q + 1], f0, tot[4 * q + 1]);
                            tot[4 * q + 2] = fmaf(P[4 * q + 2], f1, tot[4 * q + 2]);
                            tot[4 * q + 3] = fmaf(P[4 * q + 3], f1, tot[4 * q + 3]);
                            P[4 * q + 0] = P[4 * q + 1] = P[4 * q + 2] = P[4 * q + 3] = 0.0f;
                        }
                    }
                }
            }
            mbar_arrive(smem_u32(&empty[s]));
        }
        wg_store_tile(a, tot, ra, rb, n0, tq);
    }
#endif
}

/* ---- v2: the fold of K-block b overlaps the tensor cores' work on b + 1 ------
 * Same operations and order per output as v1 (P_b from +0 over the block's
 * k32 steps, then tot = fmaf(P_b, s_act * s_w, tot)), so the same bits: only
 * the schedule changes. Each consumer warpgroup keeps two accumulator sets;
 * block b + 1 is issued into the other set before block b is folded
 * (wgmma.wait_group 1), so the FMAs of the fold run while the tensor cores
 * work. The first k32 step of a block writes P with scale-d = 0 (no zeroing
 * moves). The loop walks K-blocks (SPB = kb / 32 k32 steps each, 4 / SPB per
 * 128-k stage); one kernel per SPB keeps every register index static. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG2_ISSUE(PS, bb)                                                                           \
    do {                                                                                            \
        const int b_ = (bb), c_ = b_ / BPC, j0_ = (b_ % BPC) * SPB, s_ = c_ % WG_STAGES;            \
        if (j0_ == 0) mbar_wait(smem_u32(&full[s_]), (uint32_t)((c_ / WG_STAGES) & 1));             \
        const uint32_t st_ = base + (uint32_t)s_ * WG_STAGE_BYTES;                                  \
        const uint64_t dA_ = desc_sw128(st_ + (uint32_t)cw * 64 * WG_BK), dW_ = desc_sw128(st_ + WG_BM * WG_BK); \
        wg_fence();                                                                                 \
        _Pragma("unroll") for (int i_ = 0; i_ < SPB; i_++)                                          \
            wgmma_e4m3_n128(PS, dA_ + (uint64_t)(2 * (j0_ + i_)), dW_ + (uint64_t)(2 * (j0_ + i_)), i_ > 0); \
        wg_commit();                                                                                \
    } while (0)
/* scales of block bb: s0 / s1 (rows ra / rb), wv (uniform W scale when B >= 128) */
#define WG2_SCALES(bb)                                                                              \
    do {                                                                                            \
        const int kbs_ = (bb) * (32 * SPB);                                                         \
        s0 = ra < a.M ? saa[kbs_ >> a.lab] : 0.0f;                                                  \
        s1 = rb < a.M ? sab[kbs_ >> a.lab] : 0.0f;                                                  \
        wv = wuni ? dic_e8m0_to_f32(wsr[kbs_ >> a.lwb]) : 0.0f;                                     \
    } while (0)
#define WG2_FOLD(PS, bb)                                                                            \
    do {                                                                                            \
        const int b_ = (bb);                                                                        \
        if ((b_ + 1) % BPC == 0 || b_ + 1 == nblk) mbar_arrive(smem_u32(&empty[(b_ / BPC) % WG_STAGES])); \
        _Pragma("unroll") for (int q_ = 0; q_ < 16; q_++) {                                         \
            float w_ = wv;                                                                          \
            if (!wuni) {                                                                            \
                const int col_ = n0 + 8 * q_;                                                       \
                w_ = col_ < a.N ? dic_e8m0_to_f32(a.ws[(size_t)(col_ >> a.lwb) * a.nwb + ((b_ * 32 * SPB) >> a.lwb)]) \
                                : 0.0f;                                                             \
            }                                                                                       \
            const float f0_ = s0 * w_, f1_ = s1 * w_;                                               \
            tot[4 * q_ + 0] = fmaf(PS[4 * q_ + 0], f0_, tot[4 * q_ + 0]);                           \
            tot[4 * q_ + 1] = fmaf(PS[4 * q_ + 1], f0_, tot[4 * q_ + 1]);                           \
            tot[4 * q_ + 2] = fmaf(PS[4 * q_ + 2], f1_, tot[4 * q_ + 2]);                           \
            tot[4 * q_ + 3] = fmaf(PS[4 * q_ + 3], f1_, tot[4 * q_ + 3]);                           \
        }                                                                                           \
    } while (0)
#endif

#define WG2_KERNEL(NAME, SPB)                                                                       \
    static __global__ void __launch_bounds__(384, 1)                                                \
        NAME(const wgargs a, const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmW) { \
        WG2_BODY(SPB)                                                                               \
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG2_BODY(SPB_)                                                                              \
    enum { SPB = SPB_, BPC = 4 / SPB_ };                                                            \
    extern __shared__ uint8_t dsm[];                                                                \
    __shared__ __align__(8) uint64_t full[WG_STAGES], empty[WG_STAGES];                             \
    const uint32_t base = (smem_u32(dsm) + 1023u) & ~1023u;                                         \
    const int tid = threadIdx.x, wg = tid >> 7;                                                     \
    const int pid = blockIdx.x, npg = WG_GROUP_M * a.nt, gid = pid / npg, fm = gid * WG_GROUP_M;    \
    const int gsz = min(a.mt - fm, WG_GROUP_M);                                                     \
    const int pm = fm + (pid % npg) % gsz, pn = (pid % npg) / gsz;                                  \
    const int m0 = pm * WG_BM, n0 = pn * WG_BN;                                                     \
    const int nch = (a.K + WG_BK - 1) / WG_BK;                                                      \
    if (tid == 0) {                                                                                 \
        for (int s = 0; s < WG_STAGES; s++) {                                                       \
            mbar_init(smem_u32(&full[s]), 1);                                                       \
            mbar_init(smem_u32(&empty[s]), 256);                                                    \
        }                                                                                           \
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");                        \
    }                                                                                               \
    __syncthreads();                                                                                \
    if (wg == 0) {                                                                                  \
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");                                      \
        if (tid == 0) {                                                                             \
            for (int c = 0; c < nch; c++) {                                                         \
                const int s = c % WG_STAGES;                                                        \
                if (c >= WG_STAGES) mbar_wait(smem_u32(&empty[s]), (uint32_t)(((c / WG_STAGES) & 1) ^ 1)); \
                const uint32_t sA = base + (uint32_t)s * WG_STAGE_BYTES, sW = sA + WG_BM * WG_BK;   \
                const uint32_t fb = smem_u32(&full[s]);                                             \
                mbar_expect_tx(fb, WG_STAGE_BYTES);                                                 \
                tma_load_2d(sA, &tmA, c * WG_BK, m0, fb);                                           \
                tma_load_2d(sW, &tmW, c * WG_BK, n0, fb);                                           \
            }                                                                                       \
        }                                                                                           \
    } else {                                                                                        \
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");                                     \
        const int cw = wg - 1, t = tid & 127, warp = t >> 5, lane = t & 31, g = lane >> 2, tq = lane & 3; \
        const int ra = m0 + cw * 64 + warp * 16 + g, rb = ra + 8;                                   \
        const int nblk = a.K / (32 * SPB);                                                          \
        const float *saa = a.sa + (size_t)(ra < a.M ? ra : 0) * a.nsa;                              \
        const float *sab = a.sa + (size_t)(rb < a.M ? rb : 0) * a.nsa;                              \
        const int wuni = a.wblock >= WG_BN;                                                         \
        const uint8_t *wsr = a.ws + (size_t)(n0 >> a.lwb) * a.nwb;                                  \
        float P0[64], P1[64], tot[64], s0, s1, wv;                                                  \
        _Pragma("unroll") for (int i = 0; i < 64; i++) P0[i] = P1[i] = tot[i] = 0.0f;               \
        WG2_ISSUE(P0, 0);                                                                           \
        for (int b = 0; b < nblk; b += 2) {                                                         \
            WG2_SCALES(b);                                                                          \
            if (b + 1 < nblk) {                                                                     \
                WG2_ISSUE(P1, b + 1);                                                               \
                wg_wait1();                                                                         \
            } else {                                                                                \
                wg_wait0();                                                                         \
            }                                                                                       \
            WG2_FOLD(P0, b);                                                                        \
            if (b + 1 >= nblk) break;                                                               \
            WG2_SCALES(b + 1);                                                                      \
            if (b + 2 < nblk) {                                                                     \
                WG2_ISSUE(P0, b + 2);                                                               \
                wg_wait1();                                                                         \
            } else {                                                                                \
                wg_wait0();                                                                         \
            }                                                                                       \
            WG2_FOLD(P1, b + 1);                                                                    \
        }                                                                                           \
        wg_store_tile(a, tot, ra, rb, n0, tq);                                                      \
    }
#else
#define WG2_BODY(SPB_)
#endif
WG2_KERNEL(k_gemm_q_wgmma2_kb32, 1)
WG2_KERNEL(k_gemm_q_wgmma2_kb64, 2)
WG2_KERNEL(k_gemm_q_wgmma2_kb128, 4)

/* ---- host ------------------------------------------------------------------- */


/* rows x cols e4m3, row stride ld bytes; box 128 x 128 bytes, 128-byte swizzle, OOB -> 0 */
static int make_map(CUtensorMap *m, const void *p, int rows, int cols, size_t ld) {
    dic_tmap_encode_fn enc = dic_tmap_encoder();
    if (!enc) return 0;
    cuuint64_t dim[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)ld};
    cuuint32_t box[2] = {WG_BK, 128}, es[2] = {1, 1};
    return enc(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)p, dim, stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* Diagnostics for the tests: bit 0 = the activation map could not be made, bit 1 = the weight map. */
extern "C" int lab_gemm_wgmma_maps(const void *q, size_t ldq, int M, const void *w, int N, int K) {
    CUtensorMap tA, tW;
    return (make_map(&tA, q, M, K, ldq) ? 0 : 1) | (make_map(&tW, w, N, K, (size_t)K) ? 0 : 2);
}

extern "C" int lab_gemm_wgmma_usable(int N, int K) {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        return 0;
    return major == 9 && N > 0 && K > 0 && K % 32 == 0 && dic_tmap_encoder() != NULL;
}

extern "C" cudaError_t lab_gemm_q_wgmma_launch(cudaStream_t st, const void *w, const uint8_t *ws, int N, int K,
                                               int wblock, int act_block, int kb, int M, const uint8_t *q,
                                               size_t ldq, const float *sa, float *C32, uint16_t *C16, size_t ldc,
                                               int ver) {
    if (M <= 0 || N <= 0) return cudaSuccess;
    /* ver 0: v3 (dic_gemm_wgmma3.cu: persistent, same bits) where it applies, else v2; 1: v1; 2: v2 */
    if (ver == 0 && lab_gemm_wgmma3_ok(N, K, wblock, act_block))
        return lab_gemm_q_wgmma3_launch(st, w, ws, N, K, wblock, act_block, M, q, ldq, sa, C32, C16, ldc, 1, 1);
    const int v1 = ver == 1;
    if (((uintptr_t)w & 15) || ((uintptr_t)q & 15) || ldq % 16 || K % 32) return cudaErrorInvalidValue;
    CUtensorMap tA, tW;
    if (!make_map(&tA, q, M, K, ldq) || !make_map(&tW, w, N, K, (size_t)K)) return cudaErrorInvalidValue;
    wgargs a;
    a.M = M, a.N = N, a.K = K, a.kb = kb, a.act_block = act_block, a.wblock = wblock, a.nsa = K / act_block;
    a.lab = __builtin_ctz((unsigned)act_block), a.lwb = __builtin_ctz((unsigned)wblock), a.nwb = K / wblock;
    a.mt = (M + WG_BM - 1) / WG_BM, a.nt = (N + WG_BN - 1) / WG_BN;
    a.sa = sa, a.ws = ws, a.C32 = C32, a.C16 = C16, a.ldc = ldc;
    long long nb = (long long)a.mt * a.nt;
    if (nb > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
    void (*kern)(const wgargs, const CUtensorMap, const CUtensorMap) =
        v1 ? k_gemm_q_wgmma : kb == 32 ? k_gemm_q_wgmma2_kb32 : kb == 64 ? k_gemm_q_wgmma2_kb64 : k_gemm_q_wgmma2_kb128;
    if (kb != 32 && kb != 64 && kb != 128) return cudaErrorInvalidValue;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, WG_SMEM);
    if (e != cudaSuccess) return e;
    kern<<<(unsigned)nb, 384, WG_SMEM, st>>>(a, tA, tW);
    DIC_LAUNCH_CHECK();
}
