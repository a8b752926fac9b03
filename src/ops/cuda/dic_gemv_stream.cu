/*
 * dic_gemv_stream.cu — the decode lm_head's product in fast mode (dic_gemm_int.h dic_gemv_stream_*):
 * fp32 C[m][n] = sum_k A[m][k] W[n][k] for a BF16 matrix far larger than L2 (V4-Flash lm_head
 * 129280 x 4096, 1.06 GB) and M <= DIC_GS_MAXM (2) rows, streamed through shared memory with TMA bulk
 * copies (cp.async.bulk, mbarrier completion), optionally with each row's greedy argmax.
 *
 * Why (docs/kernels/gemv-lm-head.md): one CTA per SM issuing 32 KB bulk copies reads the lm_head's
 * bytes faster than the register-load pattern of k_gemv (thousands of CTAs, 16-byte loads per thread),
 * and a fused argmax costs one ticket per SM here instead of a fence + ticket in each of the GEMV's
 * CTAs.
 *
 * Layout: one CTA of GS_W warps per SM; CTA b owns the contiguous rows [N b / G, N (b + 1) / G). It walks
 * them in stages of R rows (R K 2 bytes, one bulk copy each) through a ring of S stages; the first S
 * copies are issued BEFORE the programmatic-dependent-launch wait (the weights are constants uploaded at
 * load time, never written by a kernel of the forward), so they overlap the previous kernel. In a stage,
 * the GS_W / R warps of row r each sum one contiguous K / (GS_W / R) part: lane l takes the 16-byte chunks
 * l + 32 i, whose activations it unpacked to fp32 registers once (so a stage's shared-memory reads are the
 * weights alone: the first version read the activations from shared memory per row and ran 1.6x the
 * stream time at M = 1, 5x at M = 8); chunk i goes to the lane's accumulator i % 4 (8 fmaf per chunk in k
 * order), the lane adds them as (a0 + a1) + (a2 + a3), the warp reduces by xor shuffles, and thread (r, m)
 * adds the parts in order. A row's bits depend on K (and the geometry it picks) only: not on M, N, the
 * grid or the row's position; they differ from k_gemv's order, within the GEMM tolerance.
 * The argmax: dic_argmax's order (NaN = -inf, ties to the lowest column) as one 64-bit key per row
 * (dic_argmax_key), the CTA's maximum into a per-device key by integer atomicMax (order-free), a ticket, and
 * the last CTA writes the ids and clears keys and counter (a graph replays). Launches with ids must not
 * overlap each other.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/dic_argmax_key.cuh"
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"

#define GS_STAGE_MAX 40960        /* bytes of one stage (R rows) */
#define GS_RING_MAX (128 * 1024)  /* bytes of the ring; the activations come on top */
#define GS_MAXS 8                 /* stages */
#define GS_W 16                   /* warps per CTA (8: the same time at M = 1, slower at M = 2) */
#define GS_NCH 8                  /* 16-byte chunks of a row part per lane with 8 warps (activations in registers) */
#define GS_MIN_ELEMS (1LL << 26)  /* the AUTO dispatch's threshold: matrices of >= 2^26 values (lm_head) */

static __device__ unsigned long long g_gs_key[DIC_GS_MAXM];
static __device__ unsigned g_gs_cnt;

static __device__ __forceinline__ uint32_t gs_su32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

template <int MX, int NW>
static __global__ void __launch_bounds__(NW * 32, 1)
    k_gemv_stream(int M, int N, int K, const uint16_t *__restrict__ A, size_t lda, const uint16_t *__restrict__ Wt,
                  float *__restrict__ C, size_t ldc, int R, int S, int32_t *ids) {
    constexpr int NCH = GS_NCH * 8 / NW; /* chunks per lane: 8 with 8 warps, 4 with 16 */
    extern __shared__ __align__(128) unsigned char gs_ring[];
    __shared__ __align__(8) unsigned long long bar[GS_MAXS];
    __shared__ float red[2][NW][MX];
    __shared__ unsigned long long best[MX];
    __shared__ int last;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tid = threadIdx.x;
    const int WP = NW / R;               /* warps per row */
    const int kc = K / 8, cpw = kc / WP; /* 16-byte chunks of a row, of a warp's part */
    const size_t rowb = (size_t)K * 2, stb = (size_t)R * rowb;
    const int n0 = (int)((long long)N * blockIdx.x / gridDim.x);
    const int n1 = (int)((long long)N * (blockIdx.x + 1) / gridDim.x);
    const int nst = (n1 - n0 + R - 1) / R;
    const char *src = (const char *)Wt + (size_t)n0 * rowb;
    if (tid == 0) {
        for (int s = 0; s < S; s++) asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(gs_su32(&bar[s])));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (tid < MX) best[tid] = 0ull;
    __syncthreads();
    /* stage t -> slot t % S: one bulk copy of its rows, completing the slot's barrier phase */
    auto issue = [&](int t) {
        const int s = t % S, rows = min(R, n1 - n0 - t * R);
        const uint32_t nb = (uint32_t)((size_t)rows * rowb), b = gs_su32(&bar[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(b), "r"(nb) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         gs_su32(gs_ring + (size_t)s * stb)),
                     "l"(src + (size_t)t * stb), "r"(nb), "r"(b)
                     : "memory");
    };
    if (tid == 0)
        for (int t = 0; t < S && t < nst; t++) issue(t);
    DIC_PDL_ENTER();
    /* the lane's activations, unpacked once: chunk i of the lane = part chunk lane + 32 i (absent: 0) */
    const int r = warp / WP, p = warp - r * WP;
    float xf[MX][NCH][8];
#pragma unroll
    for (int m = 0; m < MX; m++)
#pragma unroll
        for (int i = 0; i < NCH; i++) {
            uint4 v = make_uint4(0, 0, 0, 0);
            if (lane + 32 * i < cpw) v = *(const uint4 *)(A + (size_t)m * lda + (size_t)(p * cpw + lane + 32 * i) * 8);
            const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 4; e++)
                xf[m][i][2 * e] = __uint_as_float(u[e] << 16), xf[m][i][2 * e + 1] = __uint_as_float(u[e] & 0xFFFF0000u);
        }
    const int om = tid % MX, orow = tid / MX; /* the output thread tid < R MX: row orow, activation row om */
    unsigned long long mykey = 0ull;
    for (int t = 0; t < nst; t++) {
        const int s = t % S, rows = min(R, n1 - n0 - t * R);
        const uint32_t ph = (uint32_t)(t / S) & 1u, b = gs_su32(&bar[s]);
        uint32_t done = 0;
        while (!done)
            asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                         : "=r"(done)
                         : "r"(b), "r"(ph)
                         : "memory");
        float acc[MX];
#pragma unroll
        for (int m = 0; m < MX; m++) acc[m] = 0.0f;
        if (r < rows) {
            const uint4 *wr = (const uint4 *)(gs_ring + (size_t)s * stb + (size_t)r * rowb) + p * cpw + lane;
            uint4 w[NCH];
#pragma unroll
            for (int i = 0; i < NCH; i++) w[i] = lane + 32 * i < cpw ? wr[32 * i] : make_uint4(0, 0, 0, 0);
            /* chunk i into accumulator i % 4, its 8 products in k order; then (a0 + a1) + (a2 + a3) */
            float a[MX][4];
#pragma unroll
            for (int m = 0; m < MX; m++)
#pragma unroll
                for (int j = 0; j < 4; j++) a[m][j] = 0.0f;
#pragma unroll
            for (int i = 0; i < NCH; i++) {
                const uint32_t u[4] = {w[i].x, w[i].y, w[i].z, w[i].w};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float lo = __uint_as_float(u[e] << 16), hi = __uint_as_float(u[e] & 0xFFFF0000u);
#pragma unroll
                    for (int m = 0; m < MX; m++) {
                        a[m][i & 3] = fmaf(lo, xf[m][i][2 * e], a[m][i & 3]);
                        a[m][i & 3] = fmaf(hi, xf[m][i][2 * e + 1], a[m][i & 3]);
                    }
                }
            }
#pragma unroll
            for (int m = 0; m < MX; m++) {
                acc[m] = (a[m][0] + a[m][1]) + (a[m][2] + a[m][3]);
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(0xFFFFFFFFu, acc[m], o);
            }
        }
        if (lane == 0)
#pragma unroll
            for (int m = 0; m < MX; m++) red[t & 1][warp][m] = acc[m];
        __syncthreads(); /* the slot is read by every warp; the parts are in red */
        if (tid == 0 && t + S < nst) issue(t + S); /* the slot's reads are done (the barrier above) */
        if (tid < R * MX && orow < rows && om < M) {
            float v = red[t & 1][orow * WP][om];
            for (int q = 1; q < WP; q++) v += red[t & 1][orow * WP + q][om];
            const int n = n0 + t * R + orow;
            C[(size_t)om * ldc + n] = v;
            if (ids) {
                const unsigned long long k = dic_argmax_key(v, n);
                mykey = k > mykey ? k : mykey;
            }
        }
    }
    if (!ids) return;
    if (tid < R * MX && mykey) atomicMax(&best[om], mykey);
    __syncthreads();
    if (tid < M && best[tid]) atomicMax(&g_gs_key[tid], best[tid]);
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(&g_gs_cnt, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (tid < M) {
        const unsigned long long k = atomicExch(&g_gs_key[tid], 0ull);
        ids[tid] = k ? (int32_t)~(uint32_t)k : 0;
    }
    if (tid == 0) g_gs_cnt = 0u;
}

/* Rows per stage R (NW / R warps per row) and ring stages S for rows of K; 0 if none fits: a stage of at
 * most GS_STAGE_MAX bytes, K / 8 chunks split evenly over the row's warps, at most GS_NCH per lane. */
static int gs_geom(int NW, int K, int *R, int *S) {
    static const int rs[4] = {8, 4, 2, 1};
    for (int i = 0; i < 4; i++) {
        const int WP = NW / rs[i];
        const size_t stb = (size_t)rs[i] * K * 2;
        if (WP < 1 || stb > GS_STAGE_MAX || (K / 8) % WP || (K / 8 / WP + 31) / 32 > GS_NCH * 8 / NW) continue;
        int s = (int)(GS_RING_MAX / stb);
        s = s > GS_MAXS ? GS_MAXS : s;
        if (s < 2) continue;
        *R = rs[i], *S = s;
        return 1;
    }
    return 0;
}

static int al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" int dic_gemv_stream_fits(int M, const uint16_t *A, size_t lda, const dic_wmat *W, size_t ldc) {
    int R, S;
    return W && W->fmt == 0 && M >= 1 && M <= DIC_GS_MAXM && W->n >= 1 && W->k >= 8 && W->k % 8 == 0 &&
           lda % 8 == 0 && ldc >= (size_t)W->n && al16(A) && al16(W->w) && gs_geom(GS_W, W->k, &R, &S);
}

/* The AUTO dispatch takes stages of >= 32 KB only: each stage pays a fixed cost of waits, shuffles and a
 * barrier, which V4's K = 4096 (4 rows per stage) amortises and V4.1's K = 5120 (2 rows, 20 KB) does not
 * (docs/kernels/gemv-lm-head.md). */
#define GS_AUTO_MIN_STAGE 32768
extern "C" int dic_gemv_stream_auto(int M, const uint16_t *A, size_t lda, const dic_wmat *W, size_t ldc) {
    int R = 0, S = 0;
    return W && (long long)W->n * W->k >= GS_MIN_ELEMS && dic_gemv_stream_fits(M, A, lda, W, ldc) &&
           gs_geom(GS_W, W->k, &R, &S) && (size_t)R * W->k * 2 >= GS_AUTO_MIN_STAGE;
}

extern "C" cudaError_t dic_gemv_stream_launch(cudaStream_t st, int num_sms, int M, const uint16_t *A, size_t lda,
                                              const dic_wmat *W, float *C32, size_t ldc, int32_t *ids) {
    int R, S;
    if (!C32 || !dic_gemv_stream_fits(M, A, lda, W, ldc) || !gs_geom(GS_W, W->k, &R, &S)) return cudaErrorInvalidValue;
    void (*fn)(int, int, int, const uint16_t *, size_t, const uint16_t *, float *, size_t, int, int, int32_t *) =
        M == 1 ? k_gemv_stream<1, GS_W> : k_gemv_stream<2, GS_W>;
    const size_t smem = (size_t)S * R * W->k * 2;
    cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    if (num_sms <= 0) { /* the AUTO dispatch has no context: the current device's count */
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || num_sms <= 0)
            num_sms = 132;
    }
    cfg.gridDim = dim3((unsigned)num_sms, 1, 1);
    cfg.blockDim = dim3((unsigned)(GS_W * 32), 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = dic_pdl_take() ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, fn, M, W->n, W->k, A, lda, (const uint16_t *)W->w, C32, ldc, R, S, ids);
}
