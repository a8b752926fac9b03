/*
 * dic_gemm_float.cu — BF16 and F32 weight GEMMs in the CPU's summation
 * order (ops.h di_gemm), so results equal di_gemm bit for bit: BF16 adds,
 * per k-pair in increasing order, the odd product then the even one (each
 * product of two bf16 values is exact in fp32, so mul-then-add rounds once,
 * like VDPBF16PS); F32 runs one fmaf chain in k order.
 * CTA: 32 output columns x 16 rows; chunks of 64 k staged in shared memory
 * (weights decoded to fp32, rows padded to 65 words: conflict-free).
 * FP8B weights (dic.h: FP8 storage, BF16 math) run the BF16 kernels on the
 * exact BF16 values dequantised in registers (dic_fp8w.cuh): the BF16 bits.
 */
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_fp8w.cuh"
#include "ops/cuda/dic_gemm_int.h"

#define F_BN 32
#define F_BM 16
#define F_BK 64

/* One tile's k range of rows mg and mg + 8 against column n: the products of each (odd, even) k pair
 * added odd first, rounded at every step (the CPU's pairwise order, see above). */
static __device__ __forceinline__ void f_pair_chain(const float (*ws)[F_BK + 1], const float (*as)[F_BK], int n, int mg,
                                                    int klen, float *c0, float *c1) {
    for (int kk = 0; kk < klen; kk += 2) {
        const float wo = ws[n][kk + 1], we = ws[n][kk];
        *c0 = __fadd_rn(*c0, __fmul_rn(as[mg][kk + 1], wo));
        *c0 = __fadd_rn(*c0, __fmul_rn(as[mg][kk], we));
        *c1 = __fadd_rn(*c1, __fmul_rn(as[mg + 8][kk + 1], wo));
        *c1 = __fadd_rn(*c1, __fmul_rn(as[mg + 8][kk], we));
    }
}

static __global__ void __launch_bounds__(256) k_gemm_float(int fmt, int M, int N, int K, const uint16_t *A,
                                                           size_t lda, const void *Wv, const uint8_t *Ws, int wb,
                                                           float *C32, uint16_t *C16, size_t ldc) {
    const int f32 = fmt == 1;
    DIC_PDL_ENTER();
    __shared__ float ws[F_BN][F_BK + 1];
    __shared__ float as[F_BM][F_BK];
    const int tid = threadIdx.x, n = tid & 31, mg = tid >> 5;
    const int n0 = blockIdx.x * F_BN, m0 = blockIdx.y * F_BM;
    float c0 = 0.0f, c1 = 0.0f;
    for (int kc = 0; kc < K; kc += F_BK) {
        const int klen = min(F_BK, K - kc);
        __syncthreads();
        for (int idx = tid; idx < F_BN * F_BK; idx += 256) {
            int r = idx / F_BK, kk = idx % F_BK;
            float v = 0.0f;
            if (n0 + r < N && kk < klen) {
                size_t o = (size_t)(n0 + r) * K + kc + kk;
                if (fmt == DIC_WFMT_FP8B)
                    v = fp8w_one(((const uint8_t *)Wv)[o], Ws[(size_t)((n0 + r) / wb) * (size_t)(K / wb) + (size_t)((kc + kk) / wb)]);
                else
                    v = f32 ? ((const float *)Wv)[o] : dic_bf16_to_f32(((const uint16_t *)Wv)[o]);
            }
            ws[r][kk] = v;
        }
        for (int idx = tid; idx < F_BM * F_BK; idx += 256) {
            int r = idx / F_BK, kk = idx % F_BK;
            as[r][kk] = (m0 + r < M && kk < klen) ? dic_bf16_to_f32(A[(size_t)(m0 + r) * lda + kc + kk]) : 0.0f;
        }
        __syncthreads();
        if (f32) {
            for (int kk = 0; kk < klen; kk++) {
                float w = ws[n][kk];
                c0 = fmaf(as[mg][kk], w, c0);
                c1 = fmaf(as[mg + 8][kk], w, c1);
            }
        } else {
            f_pair_chain(ws, as, n, mg, klen, &c0, &c1);
        }
    }
    if (n0 + n >= N) return;
    const int ma = m0 + mg, mb = m0 + mg + 8;
    if (C32) {
        if (ma < M) C32[(size_t)ma * ldc + n0 + n] = c0;
        if (mb < M) C32[(size_t)mb * ldc + n0 + n] = c1;
    } else {
        if (ma < M) C16[(size_t)ma * ldc + n0 + n] = dic_f32_to_bf16(c0);
        if (mb < M) C16[(size_t)mb * ldc + n0 + n] = dic_f32_to_bf16(c1);
    }
}

/* BF16 decode (M <= BD_MAXM): each output column is one thread's chain
 * (the CPU's pair order, so the bits are di_gemm's at every M). A warp owns
 * 32 columns and reads them 64 k at a time with coalesced 16-byte loads (one
 * instruction: 4 columns x 128 contiguous bytes), the next chunk in flight
 * while the current one goes through the warp's shared buffer to the lane
 * that owns the column; activations: warp-uniform 16-byte loads. */
#define BD_MAXM 8
#define BD_T 128
#define BD_SR 144 /* bytes per staged column (128 + 16): conflict-free 16-byte reads and writes */

static __device__ __forceinline__ void bd_pairs(float *c, uint32_t a, uint32_t w) {
    /* one k pair: odd product then even, each mul and add rounded */
    *c = __fadd_rn(*c, __fmul_rn(__uint_as_float(a & 0xFFFF0000u), __uint_as_float(w & 0xFFFF0000u)));
    *c = __fadd_rn(*c, __fmul_rn(__uint_as_float(a << 16), __uint_as_float(w << 16)));
}

static __global__ void __launch_bounds__(BD_T) k_gemm_bf16_dec(int M, int N, int K, const uint16_t *A, size_t lda,
                                                             const uint16_t *W, float *C32, uint16_t *C16,
                                                             size_t ldc) {
    DIC_PDL_ENTER();
    __shared__ __align__(16) uint8_t sb[BD_T / 32][32 * BD_SR];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int nb = blockIdx.x * BD_T + warp * 32, n = nb + lane;
    uint8_t *buf = sb[warp];
    float c[BD_MAXM];
#pragma unroll
    for (int m = 0; m < BD_MAXM; m++) c[m] = 0.0f;
    const int K64 = K & ~63;
    uint4 r[8];
    /* chunk at k: instruction j loads column nb + 4j + lane/8, bytes 16 (lane%8) of its 128 */
#define BD_LOAD(k)                                                                                  \
    _Pragma("unroll") for (int j = 0; j < 8; j++) {                                                 \
        int col = nb + 4 * j + (lane >> 3);                                                         \
        r[j] = make_uint4(0, 0, 0, 0);                                                              \
        if (col < N) r[j] = __ldg((const uint4 *)(W + (size_t)col * K + (k) + (lane & 7) * 8));     \
    }
    if (K64 > 0) BD_LOAD(0);
    for (int k = 0; k < K64; k += 64) {
#pragma unroll
        for (int j = 0; j < 8; j++) *(uint4 *)(buf + (4 * j + (lane >> 3)) * BD_SR + (lane & 7) * 16) = r[j];
        __syncwarp();
        if (k + 64 < K64) BD_LOAD(k + 64);
        uint4 w[8];
#pragma unroll
        for (int j = 0; j < 8; j++) w[j] = *(const uint4 *)(buf + lane * BD_SR + j * 16);
        __syncwarp();
#pragma unroll
        for (int m = 0; m < BD_MAXM; m++) {
            if (m < M) {
                const uint4 *am = (const uint4 *)(A + (size_t)m * lda + k);
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    uint4 av = __ldg(am + j);
                    bd_pairs(&c[m], av.x, w[j].x);
                    bd_pairs(&c[m], av.y, w[j].y);
                    bd_pairs(&c[m], av.z, w[j].z);
                    bd_pairs(&c[m], av.w, w[j].w);
                }
            }
        }
    }
#undef BD_LOAD
    if (n >= N) return;
    for (int k = K64; k < K; k += 2) { /* tail pairs */
        uint32_t wp = *(const uint32_t *)(W + (size_t)n * K + k);
        for (int m = 0; m < M && m < BD_MAXM; m++) bd_pairs(&c[m], *(const uint32_t *)(A + (size_t)m * lda + k), wp);
    }
#pragma unroll
    for (int m = 0; m < BD_MAXM; m++) {
        if (m < M) {
            if (C32) C32[(size_t)m * ldc + n] = c[m];
            else C16[(size_t)m * ldc + n] = dic_f32_to_bf16(c[m]);
        }
    }
}

/* FP8B decode (M <= BD_MAXM): k_gemm_bf16_dec's chains (one thread per column, the CPU's pair
 * order) over the FP8 bytes: a chunk is 128 k = 128 bytes per column, loaded like the BF16
 * kernel's 64 k (one instruction: 4 columns x 128 contiguous bytes, 8 per lane, half the
 * bytes per k), each 16 bytes (one scale block: wblock % 16 == 0) dequantised in registers
 * to the exact BF16 values (dic_fp8w.cuh); the lane's scale bytes of the next chunk are
 * loaded with its weights. Same sums, same order: the BF16 kernel's bits.
 * One launch over G groups (blockIdx.y = group, tab: weights and scales; activations of group g
 * from column g * gk), one warp per CTA (R / 32 x G CTAs: spread over the SMs). MR: rows
 * compiled (M <= MR). The chunk is dequantised first (the rare non-fast scales out of line,
 * fd_pair_slow) and then summed row by row, so the code stays small. The earlier form (one
 * launch per group of 8 CTAs x 4 warps: 8 SMs busy; unrolled over 8 rows with both
 * dequantisation paths inline: several times the BF16 kernel's SASS) took several times its time at
 * M = 1 (docs/kernels/gemm-float.md); our reading: instruction fetch with one warp per scheduler. */
#define FD_T 32

/* two e4m3 bytes (low 16 bits of x) with a non-fast scale: the host's sequence per element (out of line: cold) */
static __device__ __noinline__ uint32_t fd_pair_slow(uint32_t x, uint32_t s) {
    return fp8w_pack(fp8w_one(x & 0xFFu, s), fp8w_one((x >> 8) & 0xFFu, s));
}

template <int MR>
static __global__ void __launch_bounds__(FD_T) k_gemm_fp8w_dec(int M, int N, int K, const uint16_t *A, size_t lda,
                                                             const __grid_constant__ dic_gv_tab tab, int gk,
                                                             float *C32, uint16_t *C16, size_t ldc) {
    __shared__ __align__(16) uint8_t buf[32 * BD_SR];
    const int lane = threadIdx.x & 31, grp = blockIdx.y;
    const int nb = blockIdx.x * FD_T, n = nb + lane;
    const int wb = tab.wb;
    const uint8_t *W = (const uint8_t *)tab.w[grp];
    const uint8_t *srow = tab.s[grp] + (size_t)((n < N ? n : 0) / wb) * (size_t)(K / wb);
    A += (size_t)grp * (size_t)gk;
    C32 = C32 ? C32 + (size_t)grp * (size_t)N : NULL;
    C16 = C16 ? C16 + (size_t)grp * (size_t)N : NULL;
    float c[MR];
#pragma unroll
    for (int m = 0; m < MR; m++) c[m] = 0.0f;
    const int K128 = K & ~127;
    uint4 r[8];
    uint32_t sc[8];
    auto load = [&](int k) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int col = nb + 4 * j + (lane >> 3);
            r[j] = make_uint4(0, 0, 0, 0);
            if (col < N) r[j] = __ldg((const uint4 *)(W + (size_t)col * K + k + (lane & 7) * 16));
            sc[j] = 127;
            if (n < N) sc[j] = __ldg(srow + (k + 16 * j) / wb);
        }
    };
    if (K128 > 0) load(0); /* weights and scales are constants: before the wait */
    DIC_PDL_ENTER();
    for (int k = 0; k < K128; k += 128) {
#pragma unroll
        for (int j = 0; j < 8; j++) *(uint4 *)(buf + (4 * j + (lane >> 3)) * BD_SR + (lane & 7) * 16) = r[j];
        uint32_t s[8];
#pragma unroll
        for (int j = 0; j < 8; j++) s[j] = sc[j];
        __syncwarp();
        if (k + 128 < K128) load(k + 128);
        uint32_t wp[8][8]; /* the chunk's 128 weights of this lane's column, bf16 pairs */
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const uint4 wv = *(const uint4 *)(buf + lane * BD_SR + j * 16);
            const uint32_t x[4] = {wv.x, wv.y, wv.z, wv.w};
            if (fp8w_fast(s[j])) {
                const float sc2 = __uint_as_float(s[j] << 23);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const uint32_t p0 = cvt_e4m3x2(x[q] & 0xFFFFu), p1 = cvt_e4m3x2(x[q] >> 16);
                    wp[j][2 * q] = fp8w_pack(__fmul_rn(fp8w_h2f(p0 & 0xFFFFu), sc2), __fmul_rn(fp8w_h2f(p0 >> 16), sc2));
                    wp[j][2 * q + 1] =
                        fp8w_pack(__fmul_rn(fp8w_h2f(p1 & 0xFFFFu), sc2), __fmul_rn(fp8w_h2f(p1 >> 16), sc2));
                }
            } else {
#pragma unroll
                for (int q = 0; q < 8; q++) wp[j][q] = fd_pair_slow(x[q >> 1] >> (16 * (q & 1)), s[j]);
            }
        }
        __syncwarp();
#pragma unroll
        for (int m = 0; m < MR; m++) {
            if (m < M) {
                const uint4 *am = (const uint4 *)(A + (size_t)m * lda + k);
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const uint4 a0 = __ldg(am + 2 * j), a1 = __ldg(am + 2 * j + 1);
                    bd_pairs(&c[m], a0.x, wp[j][0]);
                    bd_pairs(&c[m], a0.y, wp[j][1]);
                    bd_pairs(&c[m], a0.z, wp[j][2]);
                    bd_pairs(&c[m], a0.w, wp[j][3]);
                    bd_pairs(&c[m], a1.x, wp[j][4]);
                    bd_pairs(&c[m], a1.y, wp[j][5]);
                    bd_pairs(&c[m], a1.z, wp[j][6]);
                    bd_pairs(&c[m], a1.w, wp[j][7]);
                }
            }
        }
    }
    if (n >= N) return;
    for (int k = K128; k < K; k += 2) { /* tail pairs (K % 16 == 0) */
        const uint32_t s = srow[k / wb];
        const uint32_t wq = fp8w_pack(fp8w_one(W[(size_t)n * K + k], s), fp8w_one(W[(size_t)n * K + k + 1], s));
        for (int m = 0; m < M && m < MR; m++) bd_pairs(&c[m], *(const uint32_t *)(A + (size_t)m * lda + k), wq);
    }
#pragma unroll
    for (int m = 0; m < MR; m++) {
        if (m < M) {
            if (C32) C32[(size_t)m * ldc + n] = c[m];
            else C16[(size_t)m * ldc + n] = dic_f32_to_bf16(c[m]);
        }
    }
}

/* FP8B at M > BD_MAXM: k_gemm_float's tiles and chains (32 columns x 16 rows per CTA, 64-k
 * chunks, per k-pair the odd product then the even one: its BF16 bits), over G groups in one
 * launch (blockIdx.z = group), the weight chunk staged 8 bytes per thread with one scale byte
 * (the 8 bytes lie in one 16-aligned block) instead of per element. */
static __global__ void __launch_bounds__(256) k_gemm_fp8w_float(int M, int N, int K, const uint16_t *A, size_t lda,
                                                                const __grid_constant__ dic_gv_tab tab, int gk,
                                                                float *C32, uint16_t *C16, size_t ldc) {
    __shared__ float ws[F_BN][F_BK + 1];
    __shared__ float as[F_BM][F_BK];
    const int tid = threadIdx.x, n = tid & 31, mg = tid >> 5, grp = blockIdx.z;
    const int n0 = blockIdx.x * F_BN, m0 = blockIdx.y * F_BM;
    const int wb = tab.wb, kb = K / wb;
    const uint8_t *W = (const uint8_t *)tab.w[grp];
    /* staging: thread tid takes row sr = tid / 8, bytes 8 (tid % 8) .. + 7 of the chunk */
    const int sr = tid >> 3, sk = (tid & 7) * 8;
    const uint8_t *wrow = W + (size_t)(n0 + sr) * (size_t)K;
    const uint8_t *srow = tab.s[grp] + (size_t)((n0 + sr) / wb) * (size_t)kb;
    A += (size_t)grp * (size_t)gk;
    DIC_PDL_ENTER();
    float c0 = 0.0f, c1 = 0.0f;
    for (int kc = 0; kc < K; kc += F_BK) {
        const int klen = min(F_BK, K - kc);
        __syncthreads();
        {
            float v[8];
            if (n0 + sr < N && sk < klen) {
                const uint2 x = *(const uint2 *)(wrow + kc + sk);
                const uint32_t s = srow[(kc + sk) / wb];
                fp8w_x4(x.x, s, v), fp8w_x4(x.y, s, v + 4);
            } else {
#pragma unroll
                for (int e = 0; e < 8; e++) v[e] = 0.0f;
            }
#pragma unroll
            for (int e = 0; e < 8; e++) ws[sr][sk + e] = v[e];
        }
        for (int idx = tid; idx < F_BM * F_BK; idx += 256) {
            int r = idx / F_BK, kk = idx % F_BK;
            as[r][kk] = (m0 + r < M && kk < klen) ? dic_bf16_to_f32(A[(size_t)(m0 + r) * lda + kc + kk]) : 0.0f;
        }
        __syncthreads();
        f_pair_chain(ws, as, n, mg, klen, &c0, &c1);
    }
    if (n0 + n >= N) return;
    const int ma = m0 + mg, mb = m0 + mg + 8;
    const size_t co = (size_t)grp * (size_t)N + (size_t)(n0 + n);
    if (C32) {
        if (ma < M) C32[(size_t)ma * ldc + co] = c0;
        if (mb < M) C32[(size_t)mb * ldc + co] = c1;
    } else {
        if (ma < M) C16[(size_t)ma * ldc + co] = dic_f32_to_bf16(c0);
        if (mb < M) C16[(size_t)mb * ldc + co] = dic_f32_to_bf16(c1);
    }
}

/* FP8B, mode 1, G groups of the same shape (dic_gemm_int.h). */
extern "C" cudaError_t dic_gemm_fp8w_bd_g(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                          int G, int gk, float *C32, uint16_t *C16, size_t ldc) {
    if (M <= 0 || G <= 0 || W->n <= 0) return cudaSuccess;
    if (G > DIC_GV_MAXG || W->fmt != DIC_WFMT_FP8B) return cudaErrorInvalidValue;
    const int N = W->n, K = W->k, wb = W->wblock;
    if (wb <= 0 || wb % 16 || K <= 0 || K % wb) return cudaErrorInvalidValue;
    dic_gv_tab tab;
    memset(&tab, 0, sizeof tab);
    for (int g = 0; g < G; g++) {
        if (W[g].fmt != DIC_WFMT_FP8B || W[g].n != N || W[g].k != K || W[g].wblock != wb || !W[g].scale ||
            ((uintptr_t)W[g].w & 15))
            return cudaErrorInvalidValue;
        tab.w[g] = W[g].w, tab.s[g] = W[g].scale;
    }
    tab.wb = wb;
    if (M <= BD_MAXM && lda % 8 == 0 && gk % 8 == 0 && ((uintptr_t)A & 15) == 0) {
        void (*fn)(int, int, int, const uint16_t *, size_t, const dic_gv_tab, int, float *, uint16_t *, size_t) =
            M == 1 ? k_gemm_fp8w_dec<1> : M == 2 ? k_gemm_fp8w_dec<2> : M <= 4 ? k_gemm_fp8w_dec<4>
                                                                                : k_gemm_fp8w_dec<8>;
        DIC_LAUNCH(fn, dim3((unsigned)((N + FD_T - 1) / FD_T), (unsigned)G, 1), FD_T, 0, st, M, N, K, A, lda, tab,
                   gk, C32, C16, ldc);
        DIC_LAUNCH_CHECK();
    }
    dim3 grid((unsigned)((N + F_BN - 1) / F_BN), (unsigned)((M + F_BM - 1) / F_BM), (unsigned)G);
    if (grid.y > 65535) return cudaErrorInvalidConfiguration;
    DIC_LAUNCH(k_gemm_fp8w_float, grid, 256, 0, st, M, N, K, A, lda, tab, gk, C32, C16, ldc);
    DIC_LAUNCH_CHECK();
}

extern "C" cudaError_t dic_gemm_float_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                             float *C32, uint16_t *C16, size_t ldc) {
    if (M <= 0 || W->n <= 0) return cudaSuccess;
    if (W->fmt == 0 && (W->k & 1)) return cudaErrorInvalidValue; /* bf16 pairs */
    if (W->fmt == DIC_WFMT_FP8B) {
        if (W->wblock <= 0 || W->wblock % 16 || W->k % W->wblock || !W->scale || ((uintptr_t)W->w & 15))
            return cudaErrorInvalidValue;
        return dic_gemm_fp8w_bd_g(st, M, A, lda, W, 1, 0, C32, C16, ldc);
    } else if (W->fmt != 0 && W->fmt != 1) {
        return cudaErrorInvalidValue;
    }
    if (W->fmt == 1) { /* few columns: the streamed chains (dic_gemm_f32_chain.cu), same bits */
        cudaError_t e = dic_gemm_f32_chain_launch(st, M, A, lda, W, C32, C16, ldc);
        if (e != cudaErrorNotSupported) return e;
    }
    if (W->fmt == 0 && M <= BD_MAXM && W->k % 8 == 0 && lda % 8 == 0 && ((uintptr_t)W->w & 15) == 0 &&
        ((uintptr_t)A & 15) == 0) {
        DIC_LAUNCH(k_gemm_bf16_dec, (unsigned)((W->n + BD_T - 1) / BD_T), BD_T, 0, st, M, W->n, W->k, A, lda,
                                                                              (const uint16_t *)W->w, C32, C16, ldc);
        DIC_LAUNCH_CHECK();
    }
    dim3 grid((unsigned)((W->n + F_BN - 1) / F_BN), (unsigned)((M + F_BM - 1) / F_BM));
    if (grid.y > 65535) return cudaErrorInvalidConfiguration;
    DIC_LAUNCH(k_gemm_float, grid, 256, 0, st, W->fmt, M, W->n, W->k, A, lda, W->w, W->scale, W->wblock, C32, C16,
               ldc);
    DIC_LAUNCH_CHECK();
}
