/*
 * mma_bits.cu — the tensor-core instruction families the FP8 / FP4 GEMMs use, each forming the
 * block partial P[m][n] = sum over one K-block (kb = 32 or 128 values) of a[m][k] * w[n][k] from
 * +0, on e4m3 inputs, so numerics_probe.c can compare their bits (lab/numerics/README.md):
 *
 *   MMA_E4M3  mma.sync m16n8k32 e4m3 (the batch-invariant tiles, dic_gemm_mma.cu): tokens the
 *             16-row operand, weights the 8-column one, k32 steps accumulating into P;
 *   MMA_F16   mma.sync m16n8k16 f16 on the widened values (k_gemm_f16 / k_gemm_dec,
 *             dic_gemm_f16.cu): weights the 16-row operand, tokens the 8-column one (swap = 0,
 *             the product's roles) or the other way round (swap = 1); two k16 steps per 32 k;
 *   WG_F16    wgmma m64nNk16 f16 from shared memory: tokens the 64-row operand, weights the
 *             N side (swap = 0), or weights the 64 rows and tokens the N side (swap = 1);
 *   WG_E4M3   wgmma m64nNk32 e4m3 (the v3 prefill kernel's instruction, dic_gemm_wgmma3.cu),
 *             swap as for WG_F16 (swap = 1: the swap-AB decode layout).
 *
 * Every kernel takes its inputs in slot order: within each 32-k sub-block, slot s of the
 * instruction holds the byte at position s of the row (mma.sync: the natural fragment layout;
 * wgmma: the natural shared-memory layout). A product kernel's k permutation (which k lands in
 * which slot) is applied by the host to the data, so "same slots" and "as the kernel uses them"
 * are both a matter of what the host passes. Layout: a [ntr][64][kb] (64 tokens), w [ntr][256][kb]
 * (256 weight rows), p [ntr][64][256] (token-major). One CTA of 128 threads per trial.
 */
#include <stdint.h>

#include "ops/cuda/dic_f16_widen.cuh"
#include "numerics_lab.h"

#define NT 64   /* tokens per trial */
#define NWR 256 /* weight rows per trial */

static __device__ __forceinline__ uint32_t ld32(const uint8_t *p) { return *(const uint32_t *)p; }

/* ---- mma.sync --------------------------------------------------------------------------------- */

static __global__ void k_mma_e4m3(const uint8_t *A, const uint8_t *W, float *P, int kb) {
    const uint8_t *a = A + (size_t)blockIdx.x * NT * kb, *w = W + (size_t)blockIdx.x * NWR * kb;
    float *p = P + (size_t)blockIdx.x * NT * NWR;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int m0 = 16 * warp;
    for (int nt = 0; nt < NWR / 8; nt++) {
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int s = 0; s < kb / 32; s++) {
            const int k = 32 * s + 4 * t;
            const uint32_t a0 = ld32(a + (m0 + g) * kb + k), a1 = ld32(a + (m0 + g + 8) * kb + k);
            const uint32_t a2 = ld32(a + (m0 + g) * kb + k + 16), a3 = ld32(a + (m0 + g + 8) * kb + k + 16);
            const uint32_t b0 = ld32(w + (8 * nt + g) * kb + k), b1 = ld32(w + (8 * nt + g) * kb + k + 16);
            asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                         "{%8,%9}, {%0,%1,%2,%3};\n"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
        const int n = 8 * nt + 2 * t;
        p[(m0 + g) * NWR + n] = d[0], p[(m0 + g) * NWR + n + 1] = d[1];
        p[(m0 + g + 8) * NWR + n] = d[2], p[(m0 + g + 8) * NWR + n + 1] = d[3];
    }
}

/* two consecutive e4m3 bytes of a row -> one f16x2 register (low half: the first), exact */
static __device__ __forceinline__ uint32_t h2(const uint8_t *p) { return cvt_e4m3x2(*(const uint16_t *)p); }

static __global__ void k_mma_f16(const uint8_t *A, const uint8_t *W, float *P, int kb, int swap) {
    const uint8_t *a = A + (size_t)blockIdx.x * NT * kb, *w = W + (size_t)blockIdx.x * NWR * kb;
    float *p = P + (size_t)blockIdx.x * NT * NWR;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    /* swap 0: 16-row operand = weights (NWR / 16 tiles), 8-column operand = tokens (NT / 8 tiles);
     * swap 1: 16-row operand = tokens, 8-column operand = weights */
    const uint8_t *R = swap ? a : w, *Cc = swap ? w : a;
    const int nrt = (swap ? NT : NWR) / 16, nct = (swap ? NWR : NT) / 8;
    for (int tile = warp; tile < nrt * nct; tile += 4) {
        const int r0 = 16 * (tile / nct), c0 = 8 * (tile % nct);
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int s = 0; s < kb / 16; s++) {
            const int k = 16 * s + 2 * t;
            const uint32_t a0 = h2(R + (r0 + g) * kb + k), a1 = h2(R + (r0 + g + 8) * kb + k);
            const uint32_t a2 = h2(R + (r0 + g) * kb + k + 8), a3 = h2(R + (r0 + g + 8) * kb + k + 8);
            const uint32_t b0 = h2(Cc + (c0 + g) * kb + k), b1 = h2(Cc + (c0 + g) * kb + k + 8);
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                         "{%8,%9}, {%0,%1,%2,%3};\n"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
        /* d0 (row r0 + g, col c0 + 2t), d1 (.., + 1), d2 (row + 8, col), d3 */
        for (int j = 0; j < 4; j++) {
            const int r = r0 + g + 8 * (j >> 1), c = c0 + 2 * t + (j & 1);
            const int m = swap ? r : c, n = swap ? c : r;
            p[m * NWR + n] = d[j];
        }
    }
}

/* ---- wgmma ------------------------------------------------------------------------------------ */

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "ops/cuda/dic_wgmma_ptx.cuh"
#include "wgmma_ops.cuh"

/* byte b (< 128) of row r of a K-major tile of 128-byte rows, 128-byte swizzle (the TMA layout the
 * product kernels load: 16-byte chunk c of row r at chunk c ^ (r % 8)) */
static __device__ __forceinline__ int sw_off(int r, int b) { return r * 128 + ((((b >> 4) ^ r) & 7) << 4) + (b & 15); }

/* Stage `rows` rows of kb e4m3 bytes: f16 = 0 as the bytes (one tile of 128-byte rows, zero past kb),
 * f16 = 1 widened to f16 (kb / 64 rounded up tiles of 64 values, tile stride rows * 128 bytes). */
static __device__ void stage(uint8_t *dst, const uint8_t *src, int rows, int kb, int f16) {
    const int per = f16 ? 64 : 128, ntile = (kb + per - 1) / per;
    for (int i = threadIdx.x; i < rows * ntile * per; i += blockDim.x) {
        const int r = i / (ntile * per), k = i % (ntile * per), tl = k / per, kk = k % per;
        const uint8_t v = k < kb ? src[r * kb + k] : 0;
        uint8_t *tile = dst + (size_t)tl * rows * 128;
        if (f16) {
            *(uint16_t *)(tile + sw_off(r, 2 * kk)) = (uint16_t)(cvt_e4m3x2(v) & 0xFFFFu); /* exact */
        } else {
            tile[sw_off(r, kk)] = v;
        }
    }
}

template <int N, int F16, int KB>
static __device__ void wg_tiles(const uint8_t *sX, const uint8_t *sY, int rowsX, int rowsY, int swap, float *p) {
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
    constexpr int STEPS = F16 ? KB / 16 : KB / 32;
    for (int x0 = 0; x0 < rowsX; x0 += 64)
        for (int y0 = 0; y0 < rowsY; y0 += N) {
            float d[N / 2];
#pragma unroll
            for (int i = 0; i < N / 2; i++) d[i] = 0.0f;
            uint64_t da[STEPS], db[STEPS];
#pragma unroll
            for (int s = 0; s < STEPS; s++) {
                /* k step s: f16 tile s / 4 at byte offset 32 (s % 4); e4m3 byte offset 32 s (desc units: 16 bytes) */
                const int tl = F16 ? s / 4 : 0, off = F16 ? 2 * (s % 4) : 2 * s;
                da[s] = desc_sw128(smem_u32(sX + (size_t)tl * rowsX * 128 + x0 * 128)) + off;
                db[s] = desc_sw128(smem_u32(sY + (size_t)tl * rowsY * 128 + y0 * 128)) + off;
            }
            wg_fence();
#pragma unroll
            for (int s = 0; s < STEPS; s++) {
                if (F16) wg_op<N>::f16(d, da[s], db[s], s > 0);
                else wg_op<N>::e4m3(d, da[s], db[s], s > 0);
            }
            wg_commit();
            wg_wait0();
#pragma unroll
            for (int i = 0; i < N / 2; i++) asm volatile("" : "+f"(d[i])::"memory");
#pragma unroll
            for (int q = 0; q < N / 8; q++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int xr = x0 + 16 * warp + g + 8 * (j >> 1), yc = y0 + 8 * q + 2 * tq + (j & 1);
                    const int m = swap ? yc : xr, n = swap ? xr : yc;
                    p[m * NWR + n] = d[4 * q + j];
                }
        }
}
#endif

/* swap 0: the 64-row operand = tokens, the N side = weights; swap 1: the 64-row operand = weights
 * (4 tiles), the N side = tokens. Dynamic shared memory: 1024 alignment + tokens + weights tiles. */
template <int N, int F16, int KB>
static __global__ void __launch_bounds__(128) k_wg(const uint8_t *A, const uint8_t *W, float *P, int swap) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t dsm[];
    uint8_t *base = dsm + ((1024u - (smem_u32(dsm) & 1023u)) & 1023u);
    const int ntile = F16 ? (KB + 63) / 64 : 1;
    uint8_t *sA = base, *sW = base + (size_t)ntile * NT * 128;
    stage(sA, A + (size_t)blockIdx.x * NT * KB, NT, KB, F16);
    stage(sW, W + (size_t)blockIdx.x * NWR * KB, NWR, KB, F16);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    float *p = P + (size_t)blockIdx.x * NT * NWR;
    if (!swap) wg_tiles<N, F16, KB>(sA, sW, NT, NWR, 0, p);
    else wg_tiles<N, F16, KB>(sW, sA, NWR, NT, 1, p);
#else
    (void)A, (void)W, (void)P, (void)swap;
#endif
}

template <int N, int F16, int KB>
static cudaError_t launch_wg3(int ntr, const uint8_t *A, const uint8_t *W, float *P, int swap) {
    const int ntile = F16 ? (KB + 63) / 64 : 1;
    const int smem = 1024 + ntile * (NT + NWR) * 128;
    cudaError_t e = cudaFuncSetAttribute(k_wg<N, F16, KB>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    k_wg<N, F16, KB><<<ntr, 128, smem>>>(A, W, P, swap);
    return cudaGetLastError();
}

template <int N>
static cudaError_t launch_wg(int ntr, const uint8_t *A, const uint8_t *W, float *P, int kb, int f16, int swap) {
    if (f16) return kb == 32 ? launch_wg3<N, 1, 32>(ntr, A, W, P, swap) : launch_wg3<N, 1, 128>(ntr, A, W, P, swap);
    return kb == 32 ? launch_wg3<N, 0, 32>(ntr, A, W, P, swap) : launch_wg3<N, 0, 128>(ntr, A, W, P, swap);
}

extern "C" cudaError_t nl_run(int fam, int N, int swap, int kb, int ntr, const uint8_t *A, const uint8_t *W,
                              float *P) {
    if ((kb != 32 && kb != 128) || ntr <= 0) return cudaErrorInvalidValue;
    if (fam == NL_MMA_E4M3) {
        k_mma_e4m3<<<ntr, 128>>>(A, W, P, kb);
        return cudaGetLastError();
    }
    if (fam == NL_MMA_F16) {
        k_mma_f16<<<ntr, 128>>>(A, W, P, kb, swap);
        return cudaGetLastError();
    }
    if (fam != NL_WG_F16 && fam != NL_WG_E4M3) return cudaErrorInvalidValue;
    if (swap && N > NT) return cudaErrorInvalidValue; /* the N side holds the 64 tokens */
    int dev = 0, major = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (major != 9) return cudaErrorNotSupported; /* wgmma: sm_90a only */
    const int f16 = fam == NL_WG_F16;
    switch (N) {
    case 8: return launch_wg<8>(ntr, A, W, P, kb, f16, swap);
    case 16: return launch_wg<16>(ntr, A, W, P, kb, f16, swap);
    case 32: return launch_wg<32>(ntr, A, W, P, kb, f16, swap);
    case 64: return launch_wg<64>(ntr, A, W, P, kb, f16, swap);
    case 128: return launch_wg<128>(ntr, A, W, P, kb, f16, swap);
    case 256: return launch_wg<256>(ntr, A, W, P, kb, f16, swap);
    default: return cudaErrorInvalidValue;
    }
}
