/*
 * dic_gemm_fp8w_mma.cu — fast-mode (dic_ctx.batch_invariant == 0) block-diagonal product over
 * FP8B weights (dic.h DIC_WFMT_FP8B: e4m3 bytes + e8m0 block scales, FP8 storage with BF16
 * math; the grouped wo_a) at M = 5 .. DIC_W8M_MAXM rows, one launch over the G groups:
 *   C[m][g*R + n] = sum_k A[m][g*gk + k] * w_g[n][k],  w = bf16(e4m3(byte) * 2^(s-127)),
 * the BF16 matrix's weights (dic_fp8w.cuh), on mma.sync m16n8k16 bf16 -> fp32 with the WEIGHTS
 * as the A operand (16 weight rows per m16 tile) and the activations as B (8 tokens per n8 tile):
 * at decode batch sizes the token dimension is small, so a weight row block of 16 is the tall
 * side. Within the GEMM tolerance of the BF16 fast kernels (another fp32 summation order: the
 * tensor cores' k16 partial sums), not bitwise. Deterministic (no atomics; fixed reduction).
 *
 * No shared memory for the weights and no dequantisation pass: a warp loads its A fragments'
 * bytes straight from global memory into registers and converts them there. The k order inside
 * an mma is free as long as A and B agree, so thread (g = lane/4, t = lane%4) of a warp owns
 * PHYSICAL k = k0 + 16 t + 4 j + (0, 1, 2, 3) for mma step j (j = 0..3) of a 64-k span, i.e.
 * logical columns (2t, 2t+1, 2t+8, 2t+9) of step j. So per span a thread loads 16 contiguous
 * e4m3 bytes of weight row g and of row g + 8 (one 16-byte ld.global.nc.L1::no_allocate each;
 * a warp instruction reads 8 rows x 64 contiguous bytes) and 32 contiguous activation bytes
 * (16 bf16: two 16-byte __ldg) per token tile; the 16 bytes lie in one scale block (wblock % 16).
 *
 * Conversion (exact): the e4m3 byte b placed as bf16 bits sign << 15 | (b & 0x7F) << 4 is the
 * e4m3 value times 2^-120 for every code, subnormals included (exponent field = e4m3 exponent,
 * mantissa = its 3 bits); fma.rn.bf16x2 by 2^(s-7) (bf16 fma keeps subnormals) then gives the
 * correctly rounded bf16 of e4m3 * 2^(s-127), i.e. exactly the host's bf16(fp32 product) (the
 * fp32 product is exact). For s > 134 the multiplier 2^(s-7) is not a bf16, so two steps: an
 * exact multiply by 2^127 and a rounded one by 2^(s-134); s = 255 multiplies by NaN (the host's
 * e8m0 NaN). Per 2 weights: PRMT, SHF, LOP3, HFMA2.BF16.
 *
 * Grid: CTA = 8 warps = 4 m16 tiles (64 rows of one group: R % 16 == 0) x 2 halves of K (spans
 * [0, h) and [h, nsp)); each warp keeps D spans (D KB: 8 at NT <= 2, else 4) of weights in flight,
 * the first D before griddepcontrol.wait (weights are constants; activations are read after it);
 * blockIdx.y = chunks of 8 NT tokens (NT = 1, 2, 4, 8 n8 tiles per warp). The two halves'
 * accumulators are added through shared memory (first half + second half). A token's bits may
 * depend on NT (the tile a token lands in) and on nothing run-to-run.
 */
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"

#define W8M_T 256 /* 8 warps: 4 row tiles x 2 K halves */
#define W8M_D 4   /* spans (64 k) in flight per warp (x2 at NT <= 2) */

static __device__ __forceinline__ uint4 w8m_ld16(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

static __device__ __forceinline__ uint32_t w8m_fma2(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
    return d;
}

/* two e4m3 bytes of x (sel 0x1404: bytes 0, 1; 0x3424: bytes 2, 3) -> the bf16 pair (low half:
 * the lower byte) of their weights with multipliers m1 (and m2 when two) */
static __device__ __forceinline__ uint32_t w8m_bf2(uint32_t x, uint32_t sel, uint32_t m1, uint32_t m2, bool two) {
    const uint32_t w = __byte_perm(x, 0u, sel); /* byte -> bits 8..15 / 24..31 of its half */
    uint32_t r = (w & 0x80008000u) | ((w >> 4) & 0x07F007F0u);
    r = w8m_fma2(r, m1);
    if (two) r = w8m_fma2(r, m2);
    return r;
}

static __device__ __forceinline__ void w8m_mma(float *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* NT: n8 token tiles per warp; TPW: m16 row tiles per warp (2: each activation fragment feeds
 * two row tiles, halving the L1 traffic per weight at large M). ntile: m16 row tiles in all
 * (G R / 16; R % (16 TPW) == 0, so a warp's tiles are all live or all past the end). */
template <int NT, int TPW>
static __global__ void __launch_bounds__(W8M_T) k_w8mma(int M, int K, const uint16_t *__restrict__ A, size_t lda,
                                                        const __grid_constant__ dic_gv_tab tab, int R, int gk,
                                                        int ntile, float *C32, uint16_t *C16, size_t ldc) {
    /* spans in flight per warp: 8 KB at NT <= 2 (decode batches: the bytes are the cost), 4 KB at NT >= 4
     * (registers) */
    constexpr int D = (NT <= 2 ? 2 * W8M_D : W8M_D) / TPW;
    __shared__ float red[4][TPW * NT * 4][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wt = warp & 3, kh = warp >> 2;
    const int g = lane >> 2, t = lane & 3;
    const int tile = (blockIdx.x * 4 + wt) * TPW;
    const bool live = tile < ntile;
    const int row0 = (live ? tile : 0) * 16, grp = row0 / R, nl0 = row0 - grp * R;
    const int wb = tab.wb;
    const uint8_t *w0 = (const uint8_t *)tab.w[grp] + (size_t)(nl0 + g) * (size_t)K + 16 * t;
    const uint8_t *srow[TPW]; /* rows nl0 + 16 u .. + 15: one block row (wblock % 16 == 0) */
#pragma unroll
    for (int u = 0; u < TPW; u++) srow[u] = tab.s[grp] + (size_t)((nl0 + 16 * u) / wb) * (size_t)(K / wb);
    const int nsp = K / 64, h = (nsp + 1) / 2;
    const int sp0 = kh ? h : 0, sp1 = live ? (kh ? nsp : h) : sp0;
    const int m0 = blockIdx.y * 8 * NT;
    const uint16_t *Ag = A + (size_t)grp * (size_t)gk + 16 * t;

    uint4 wr[D][TPW][2];
    uint32_t sc[D][TPW];
    auto ld = [&](int d, int sp) {
#pragma unroll
        for (int u = 0; u < TPW; u++) {
            if (sp < sp1) {
                const uint8_t *p = w0 + (size_t)(16 * u) * (size_t)K + (size_t)sp * 64;
                wr[d][u][0] = w8m_ld16(p);
                wr[d][u][1] = w8m_ld16(p + 8 * (size_t)K);
                sc[d][u] = __ldg(srow[u] + (sp * 64 + 16 * t) / wb);
            } else {
                wr[d][u][0] = wr[d][u][1] = make_uint4(0, 0, 0, 0);
                sc[d][u] = 127;
            }
        }
    };
    float acc[TPW][NT][4];
#pragma unroll
    for (int u = 0; u < TPW; u++)
#pragma unroll
        for (int i = 0; i < NT; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[u][i][e] = 0.0f;
#pragma unroll
    for (int d = 0; d < D; d++) ld(d, sp0 + d);
    DIC_PDL_ENTER();
    for (int sb = sp0; sb < sp1; sb += D) {
#pragma unroll
        for (int d = 0; d < D; d++) {
            const int sp = sb + d;
            if (sp < sp1) { /* warp-uniform */
                uint32_t af[TPW][4][4];
#pragma unroll
                for (int u = 0; u < TPW; u++) {
                    const uint32_t s = sc[d][u], s1 = min(s, 134u);
                    const uint32_t m1 = ((s1 + 120u) << 7) * 0x10001u;
                    const uint32_t m2 = (s == 255u ? 0x7FC0u : ((s - 7u) << 7) & 0x7FFFu) * 0x10001u;
                    const bool two = s > 134u;
                    const uint32_t xg[4] = {wr[d][u][0].x, wr[d][u][0].y, wr[d][u][0].z, wr[d][u][0].w};
                    const uint32_t xh[4] = {wr[d][u][1].x, wr[d][u][1].y, wr[d][u][1].z, wr[d][u][1].w};
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        af[u][j][0] = w8m_bf2(xg[j], 0x1404u, m1, m2, two);
                        af[u][j][1] = w8m_bf2(xh[j], 0x1404u, m1, m2, two);
                        af[u][j][2] = w8m_bf2(xg[j], 0x3424u, m1, m2, two);
                        af[u][j][3] = w8m_bf2(xh[j], 0x3424u, m1, m2, two);
                    }
                }
                ld(d, sp + D);
#pragma unroll
                for (int i = 0; i < NT; i++) {
                    const int m = m0 + 8 * i + g;
                    uint4 q0 = make_uint4(0, 0, 0, 0), q1 = q0;
                    if (m < M) {
                        const uint16_t *p = Ag + (size_t)m * lda + (size_t)sp * 64;
                        q0 = __ldg((const uint4 *)p);
                        q1 = __ldg((const uint4 *)(p + 8));
                    }
                    const uint32_t b[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
                    for (int u = 0; u < TPW; u++)
#pragma unroll
                        for (int j = 0; j < 4; j++)
                            w8m_mma(acc[u][i], af[u][j][0], af[u][j][1], af[u][j][2], af[u][j][3], b[2 * j],
                                    b[2 * j + 1]);
                }
            }
        }
    }
    if (kh == 1) {
#pragma unroll
        for (int u = 0; u < TPW; u++)
#pragma unroll
            for (int i = 0; i < NT; i++)
#pragma unroll
                for (int e = 0; e < 4; e++) red[wt][(u * NT + i) * 4 + e][lane] = acc[u][i][e];
    }
    __syncthreads();
    if (kh == 1 || !live) return;
#pragma unroll
    for (int u = 0; u < TPW; u++)
#pragma unroll
        for (int i = 0; i < NT; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float v = acc[u][i][e] + red[wt][(u * NT + i) * 4 + e][lane];
                const int m = m0 + 8 * i + 2 * t + (e & 1), col = row0 + 16 * u + g + 8 * (e >> 1);
                if (m < M) {
                    const size_t o = (size_t)m * ldc + (size_t)col;
                    if (C32) C32[o] = v;
                    else C16[o] = dic_f32_to_bf16(v);
                }
            }
}

static int g_w8m_maxm = DIC_W8M_MAXM; /* bench: the largest M dic_gemm_blockdiag sends here */
extern "C" void dic_gemm_fp8w_mma_maxm(int maxm) { g_w8m_maxm = maxm > 0 ? maxm : DIC_W8M_MAXM; }
extern "C" int dic_gemm_fp8w_mma_maxm_get(void) { return g_w8m_maxm; }

extern "C" cudaError_t dic_gemm_fp8w_mma_g(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                           int G, int gk, float *C32, uint16_t *C16, size_t ldc) {
    if (M <= 0 || G <= 0) return cudaSuccess;
    if (G > DIC_GV_MAXG || W->fmt != DIC_WFMT_FP8B) return cudaErrorInvalidValue;
    const int R = W->n, K = W->k, wb = W->wblock;
    if (R <= 0 || R % 16 || K <= 0 || K % 64 || wb <= 0 || wb % 16 || K % wb || ((uintptr_t)A & 15) || lda % 8 ||
        gk % 8)
        return cudaErrorInvalidValue;
    dic_gv_tab tab;
    if (dic_fp8b_tab(W, G, &tab) != cudaSuccess) return cudaErrorInvalidValue;
    /* M <= 64: one token chunk, 16 rows per warp (128 CTAs for wo_a: every SM streams); larger M:
     * 64-token chunks, 32 rows per warp (R % 32 == 0) */
    const int ntile = G * R / 16, NT = M <= 8 ? 1 : M <= 16 ? 2 : M <= 32 ? 4 : 8, TPW = M > 64 && R % 32 == 0 ? 2 : 1;
    const long long chunks = (M + 8 * NT - 1) / (8 * NT);
    if (chunks > 65535) return cudaErrorInvalidConfiguration;
    void (*fn)(int, int, const uint16_t *, size_t, const dic_gv_tab, int, int, int, float *, uint16_t *, size_t) =
        TPW == 2 ? k_w8mma<8, 2> : NT == 1 ? k_w8mma<1, 1> : NT == 2 ? k_w8mma<2, 1> : NT == 4 ? k_w8mma<4, 1>
                                                                                            : k_w8mma<8, 1>;
    const int rows_cta = 4 * 16 * TPW;
    const dim3 grid((unsigned)((G * R + rows_cta - 1) / rows_cta), (unsigned)chunks, 1);
    DIC_LAUNCH(fn, grid, W8M_T, 0, st, M, K, A, lda, tab, R, gk, ntile, C32, C16, ldc);
    DIC_LAUNCH_CHECK();
}
