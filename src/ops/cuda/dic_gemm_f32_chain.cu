/*
 * dic_gemm_f32_chain.cu — mode-1 (batch-invariant) GEMM over F32 weights with few
 * columns (the mHC mixes: N = 24, K = 16384; the mHC head: N = 4), bitwise di_gemm:
 * every output (m, n) is one thread's fmaf chain in k order,
 *     c = fmaf(bf16_to_f32(a[m][k]), w[n][k], c),  k = 0 .. K-1, c from 0,
 * exactly the CPU's (gemm.c), so the bits depend neither on M nor on the launch shape.
 *
 * The chain is the floor: K dependent FMAs (~4 cycles each), whatever M and N, as long as the chains run side by side and their operands
 * wait in shared memory. k_gemm_float (dic_gemm_float.cu) walked K in 64-k chunks with
 * two barriers and a synchronous global load per chunk, far slower (docs/kernels/gemm-float.md).
 *
 * CTA: 4 warps, FC_TN(R) = 4 R columns x FC_TM = 32 rows; lane = row (m0 + lane), warp w
 * owns columns n0 + w R .. + R - 1 (R = 1 at M <= 64: one chain per thread, twice the CTAs;
 * R = 2 above: two chains per thread, half the shared-memory reads of A per FMA). Per 8 k
 * a warp issues ~19 (R = 1) / ~29 (R = 2) instructions against the chain's 32 cycles: one
 * warp per scheduler keeps up with the FMA latency.
 * K streams through FC_NS stages of FC_KC k (W rows as fp32, A rows as bf16 converted in
 * registers: exact), filled by cp.async from all threads FC_NS - 1 chunks ahead; the
 * weights of the first chunks are requested before the PDL wait (constants). Per chunk
 * one barrier. Reads per 8 k: one 16-byte A load per lane (8 consecutive rows of a quarter
 * warp on distinct banks: row stride 528 bytes) and 2 R broadcast 16-byte W loads.
 * Rows >= M and columns >= N are computed on whatever the stage holds and not stored.
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"

#define FC_T 128 /* threads: 4 warps */
#define FC_TN(R) (4 * (R)) /* columns per CTA: R per warp */
#define FC_TM 32
#define FC_KC 512
#define FC_NS 4
#define FC_AST (FC_KC + 8) /* bf16 per staged A row */
#define FC_WBYTES(R) (FC_TN(R) * FC_KC * 4)
#define FC_STAGE(R) (FC_WBYTES(R) + FC_TM * FC_AST * 2)
#define FC_SMEM(R) (FC_NS * FC_STAGE(R))
#define FC_WAITN 2 /* FC_NS - 2 */

static int g_fc_off;
extern "C" void dic_gemm_f32_chain_enable(int on) { g_fc_off = !on; }
extern "C" int dic_gemm_f32_chain_enabled(void) { return !g_fc_off; }

static __device__ __forceinline__ void fc_cp16(void *dst, const void *src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
static __device__ __forceinline__ void fc_cp4(void *dst, const void *src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
}
static __device__ __forceinline__ void fc_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
#define FC_STR_(x) #x
#define FC_STR(x) FC_STR_(x)
static __device__ __forceinline__ void fc_wait(void) { /* all but the FC_NS - 2 newest groups complete */
    asm volatile("cp.async.wait_group " FC_STR(FC_WAITN) ";\n" ::: "memory");
}

/* chunk c's weights (rows n0 .. n0 + nt - 1) into stage buffer buf; wv: K % 4 == 0 and W 16-aligned */
static __device__ __forceinline__ void fc_stage_w(float *ws, const float *W, int K, int n0, int nt, int c, int wv,
                                                  int tid, int nthr) {
    const int kc = c * FC_KC, klen = min(FC_KC, K - kc);
    if (wv) { /* klen % 4 == 0 */
        for (int i = tid; i < nt * (FC_KC / 4); i += nthr) {
            const int r = i / (FC_KC / 4), kk = (i % (FC_KC / 4)) * 4;
            if (kk < klen) fc_cp16(ws + r * FC_KC + kk, W + (size_t)(n0 + r) * K + kc + kk);
        }
    } else {
        for (int i = tid; i < nt * FC_KC; i += nthr) {
            const int r = i / FC_KC, kk = i % FC_KC;
            if (kk < klen) fc_cp4(ws + r * FC_KC + kk, W + (size_t)(n0 + r) * K + kc + kk);
        }
    }
}

/* chunk c's activations (rows m0 .. m0 + mt - 1); av: lda % 8 == 0 and A 16-aligned (pieces of
 * 8 bf16 that cross K, and every piece otherwise, go element by element through registers) */
static __device__ __forceinline__ void fc_stage_a(uint16_t *as, const uint16_t *A, size_t lda, int K, int m0, int mt,
                                                  int c, int av, int tid, int nthr) {
    const int kc = c * FC_KC, klen = min(FC_KC, K - kc);
    for (int i = tid; i < mt * (FC_KC / 8); i += nthr) {
        const int r = i / (FC_KC / 8), kk = (i % (FC_KC / 8)) * 8;
        if (kk >= klen) continue;
        const uint16_t *src = A + (size_t)(m0 + r) * lda + kc + kk;
        uint16_t *dst = as + r * FC_AST + kk;
        if (av && kk + 8 <= klen) {
            fc_cp16(dst, src);
        } else {
            for (int e = 0; e < 8 && kk + e < klen; e++) dst[e] = src[e];
        }
    }
}

/* 8 activations (bf16 -> f32, exact) and each of the R columns' 8 weights at k offset kk of a
 * staged chunk */
template <int R>
static __device__ __forceinline__ void fc_load8(const uint16_t *ar, const float *ws, int kk, float *a,
                                                float (*w)[8]) {
    const uint4 a4 = *(const uint4 *)(ar + kk);
    const uint32_t aw[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
    for (int q = 0; q < 4; q++) {
        a[2 * q] = __uint_as_float(aw[q] << 16);
        a[2 * q + 1] = __uint_as_float(aw[q] & 0xFFFF0000u);
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float4 w0 = *(const float4 *)(ws + r * FC_KC + kk);
        const float4 w1 = *(const float4 *)(ws + r * FC_KC + kk + 4);
        w[r][0] = w0.x, w[r][1] = w0.y, w[r][2] = w0.z, w[r][3] = w0.w;
        w[r][4] = w1.x, w[r][5] = w1.y, w[r][6] = w1.z, w[r][7] = w1.w;
    }
}

template <int R>
static __global__ void __launch_bounds__(FC_T) k_gemm_f32_chain(int M, int N, int K, const uint16_t *A,
                                                                         size_t lda, const float *W, float *C32,
                                                                         uint16_t *C16, size_t ldc, int wv, int av) {
    extern __shared__ __align__(16) uint8_t fc_sm[];
    const int nthr = FC_T, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n0 = blockIdx.x * FC_TN(R), m0 = blockIdx.y * FC_TM;
    const int nt = min(FC_TN(R), N - n0), mt = min(FC_TM, M - m0);
#define FC_WS(s) ((float *)(fc_sm + (s) * FC_STAGE(R)))
#define FC_AS(s) ((uint16_t *)(fc_sm + (s) * FC_STAGE(R) + FC_WBYTES(R)))
    const int nch = (K + FC_KC - 1) / FC_KC;
    /* weights are constants: the first stages' before the wait (in the first commit group) */
    for (int s = 0; s < FC_NS - 1; s++)
        if (s < nch) fc_stage_w(FC_WS(s), W, K, n0, nt, s, wv, tid, nthr);
    DIC_PDL_ENTER();
    for (int s = 0; s < FC_NS - 1; s++) {
        if (s < nch) fc_stage_a(FC_AS(s), A, lda, K, m0, mt, s, av, tid, nthr);
        fc_commit();
    }
    const int live = warp * R < nt; /* warp-uniform: this warp has a column < N */
    const int arow = lane < mt ? lane : 0; /* rows >= M read row 0: a broadcast, not a new bank line */
    float c[R];
#pragma unroll
    for (int r = 0; r < R; r++) c[r] = 0.0f;
    for (int ch = 0; ch < nch; ch++) {
        fc_wait();
        __syncthreads(); /* chunk ch landed for every thread; chunk ch - 1 consumed by all */
        {
            const int nx = ch + FC_NS - 1;
            if (nx < nch) {
                fc_stage_w(FC_WS(nx % FC_NS), W, K, n0, nt, nx, wv, tid, nthr);
                fc_stage_a(FC_AS(nx % FC_NS), A, lda, K, m0, mt, nx, av, tid, nthr);
            }
            fc_commit();
        }
        if (!live) continue;
        const float *ws = FC_WS(ch % FC_NS) + (warp * R) * FC_KC;
        const uint16_t *ar = FC_AS(ch % FC_NS) + arow * FC_AST;
        const int klen = min(FC_KC, K - ch * FC_KC);
        if (klen == FC_KC) {
            /* register double buffer: the shared loads of the next 8 k are issued before the 8 dependent
             * FMAs of these, so the chain never waits on a load (the chain order is unchanged) */
            float a[8], w[R][8], an[8], wn[R][8];
            fc_load8<R>(ar, ws, 0, a, w);
#pragma unroll
            for (int kk = 0; kk < FC_KC; kk += 8) {
                if (kk + 8 < FC_KC) fc_load8<R>(ar, ws, kk + 8, an, wn);
#pragma unroll
                for (int e = 0; e < 8; e++)
#pragma unroll
                    for (int r = 0; r < R; r++) c[r] = fmaf(a[e], w[r][e], c[r]);
                if (kk + 8 < FC_KC) {
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        a[e] = an[e];
#pragma unroll
                        for (int r = 0; r < R; r++) w[r][e] = wn[r][e];
                    }
                }
            }
        } else {
            for (int kk = 0; kk < klen; kk++) {
                const float a = dic_bf16_to_f32(ar[kk]);
#pragma unroll
                for (int r = 0; r < R; r++) c[r] = fmaf(a, ws[r * FC_KC + kk], c[r]);
            }
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory"); /* (only empty groups can be left) */
    if (!live || lane >= mt) return;
    const size_t m = (size_t)(m0 + lane);
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int n = n0 + warp * R + r;
        if (n >= N) break;
        if (C32) C32[m * ldc + n] = c[r];
        else C16[m * ldc + n] = dic_f32_to_bf16(c[r]);
    }
#undef FC_WS
#undef FC_AS
}

extern "C" cudaError_t dic_gemm_f32_chain_launch(cudaStream_t st, int M, const uint16_t *A, size_t lda,
                                                 const dic_wmat *W, float *C32, uint16_t *C16, size_t ldc) {
    if (g_fc_off || W->fmt != 1 || W->n <= 0 || W->n > DIC_F32_CHAIN_MAXN || W->k <= 0 || M <= 0 ||
        ((uintptr_t)W->w & 3))
        return cudaErrorNotSupported;
    const int N = W->n, K = W->k;
    if ((M + FC_TM - 1) / FC_TM > 65535) return cudaErrorNotSupported;
    const int wv = K % 4 == 0 && ((uintptr_t)W->w & 15) == 0;
    const int av = lda % 8 == 0 && ((uintptr_t)A & 15) == 0;
    static thread_local int attr1, attr2; /* per thread: its device's attributes */
    cudaError_t e;
    if (M <= 64) { /* R = 1: 4 columns per CTA, one chain per thread (more CTAs at small M) */
        const dim3 grid((unsigned)((N + FC_TN(1) - 1) / FC_TN(1)), (unsigned)((M + FC_TM - 1) / FC_TM));
        if (!attr1) {
            if ((e = cudaFuncSetAttribute(k_gemm_f32_chain<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, FC_SMEM(1))))
                return e;
            attr1 = 1;
        }
        DIC_LAUNCH(k_gemm_f32_chain<1>, grid, FC_T, FC_SMEM(1), st, M, N, K, A, lda, (const float *)W->w, C32, C16,
                   ldc, wv, av);
        DIC_LAUNCH_CHECK();
    }
    /* R = 2: 8 columns per CTA, two chains per thread: half the A reads per FMA (large M) */
    const dim3 grid((unsigned)((N + FC_TN(2) - 1) / FC_TN(2)), (unsigned)((M + FC_TM - 1) / FC_TM));
    if (!attr2) {
        if ((e = cudaFuncSetAttribute(k_gemm_f32_chain<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, FC_SMEM(2))))
            return e;
        attr2 = 1;
    }
    DIC_LAUNCH(k_gemm_f32_chain<2>, grid, FC_T, FC_SMEM(2), st, M, N, K, A, lda, (const float *)W->w, C32, C16, ldc,
               wv, av);
    DIC_LAUNCH_CHECK();
}
