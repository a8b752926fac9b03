/*
 * dic_gemm_f16_wg.cu — FP8 weights over many token rows on wgmma m64nNk16 f16 -> fp32 with the bits of
 * the f16-HMMA decode kernels (k_gemm_dec / k_gemm_f16, dic_gemm_f16.cu) for every row at every M: the
 * batch-invariant family's large-M member (docs/determinism.md §7.1: wgmma f16 and mma.sync m16n8k16 f16
 * give the same block partials when fed the same k slots; docs/kernels/gemm-prefill.md).
 *
 * What it copies from k_gemm_f16 (the header of dic_gemm_f16.cu), and how:
 *  - the activations: k_act_quant_f16 quantises each row exactly as dic_gemm_quant does (the same scale
 *    and e4m3 value per element, dic_gemm_quant.cuh) and stores the value as f16 (exact), each 32-k group
 *    in k_gemm_f16's slot order: in a 32-k sub-block, k_gemm_f16's lane t of a quad holds k = 8t .. 8t + 7,
 *    fed as two m16n8k16 steps h = 0, 1: slot 2t + e <- k = 8t + 4h + e and slot 8 + 2t + e <- k = 8t + 4h
 *    + 2 + e (e = 0, 1); so position 16h + 8hi + 2t + e of a group holds k = 8t + 4h + 2hi + e, and TMA
 *    loads the rows unchanged as wgmma's B operand;
 *  - the weights: the A operand of wgmma's RS form is the mma.sync A fragment of each warp, so each
 *    thread converts the same 8 bytes per row (rows 16 warp + g and + 8, bytes 32j + 8t) with the same
 *    cvt.rn.f16x2.e4m3x2 into the same registers k_gemm_f16 passes to mma.sync;
 *  - the per-K-block fold: kb = min(act_block, wblock) (32 or 128 here); P = the wgmma chain of the
 *    block's kb / 16 steps from +0 (scale-d = 0 on the first, steps in increasing k), then
 *    C_s = fmaf(P, s_act * s_w, C_s), blocks in increasing k, C_s from +0; s_act * s_w is the same
 *    fp32 product (formed once per token and block by the producer warpgroup);
 *  - the split-K structure: dic_gemm_dec_splits (splits and k per split from N, K and the SM count
 *    only); one CTA owns every split of its outputs and folds them in split order, C = ((C_0 + C_1) +
 *    C_2) + ..., as k_gemm_dec's cluster fold and k_gemm_f16's last CTA do.
 * So an output depends on its row of activations, its weight row, K, N and the SM count: never on M,
 * the token tile, the grid or other rows.
 *
 * Schedule: CTA = 3 warpgroups; WG 0 is the producer (one thread issues the TMA loads of a stage: the
 * 128 x 128 e4m3 weight tile and the TN x 128 f16 token tile, 128-byte swizzle; every thread < TN
 * writes its token's s_act * s_w factors next to them), WG 1 and 2 the consumers (64 weight rows each,
 * all TN tokens: wgmma m64n{TN}k16 RS). Stages in a ring (full / empty mbarriers, v3's protocol);
 * persistent grid over tiles (8 weight tiles per raster group), so the producer loads the next tile
 * while the consumers fold and store. FP8 only: FP4 (e2m1, per-32 per-row scales) needs a per-row
 * factor in the fold and k_gemm_f16's FP4 pair permutation (0,4)(1,5).. in both operands.
 */
#include <cuda.h>
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_f16_widen.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_gemm_quant.cuh"
#include "ops/cuda/dic_tmap.h"

/* ---- the activations: dic_gemm_quant's values as f16, in slot order --------------------------------- */

/* One warp per (row, block) as k_act_quant: the same amax, scale and rounding; element k of the row goes
 * to f16 position 32 (k / 32) + 16h + 8hi + 2t + e where k % 32 = 8t + 4h + 2hi + e. */
static __global__ void k_act_quant_f16(const uint16_t *A, size_t lda, int M, int K, int blk, uint16_t *x16, float *s) {
    DIC_PDL_ENTER();
    const int nsa = K / blk;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (warp >= (long long)M * nsa) return;
    const int i = (int)(warp / nsa), b = (int)(warp % nsa);
    const uint16_t *x = A + (size_t)i * lda + (size_t)b * blk;
    float amax = 0.0f;
    for (int j = lane; j < blk; j += 32) {
        const float a = fabsf(dic_bf16_to_f32(x[j]));
        if (a > amax) amax = a;
    }
    for (int o = 16; o; o >>= 1) {
        const float t = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
        if (t > amax) amax = t;
    }
    const float sc = dic_act_scale(amax);
    if (lane == 0) s[(size_t)i * nsa + b] = sc;
    uint16_t *row = x16 + (size_t)i * K;
    for (int j = lane; j < blk; j += 32) {
        const int k = b * blk + j, r = k & 31, t = r >> 3, h = (r >> 2) & 1, hi = (r >> 1) & 1, e = r & 1;
        row[(k & ~31) + 16 * h + 8 * hi + 2 * t + e] =
            (uint16_t)dic_e4m3_f16(__fdiv_rn(dic_bf16_to_f32(x[j]), sc));
    }
}

/* ---- the GEMM ------------------------------------------------------------------------------------- */

#define G16_BW 128                /* weight rows per CTA (2 consumer warpgroups x 64) */
#define G16_BK 128                /* k per stage */
#define G16_WBYTES (G16_BW * G16_BK) /* e4m3 weight tile per stage */
#define G16_GROUP 8               /* weight tiles per raster group */

/* stages by token tile and split: with SPLIT the running sum of the finished splits lives in shared
 * memory (touched once per split; registers are capped at 168 by 384 threads) */
static constexpr __host__ __device__ int g16_stages(int TN, int SPLIT) { return TN == 128 ? (SPLIT ? 3 : 4) : (SPLIT ? 5 : 6); }
static constexpr __host__ __device__ int g16_stage_bytes(int TN) { return G16_WBYTES + 2 * TN * 128; }
static constexpr __host__ __device__ int g16_smem(int TN, int SPLIT) {
    return g16_stages(TN, SPLIT) * (g16_stage_bytes(TN) + 4 * TN * 4) + (SPLIT ? TN / 2 * 256 * 4 : 0) + 1024;
}

typedef struct g16args {
    int M, N, K, nsa, lab, lwb, nwb, cps; /* cps: 128-k chunks per split */
    int mt, nt, units;
    const float *sa;
    const uint8_t *ws;
    float *C32;
    uint16_t *C16;
    size_t ldc;
} g16args;

/* ---- the GEMM ----------------------------------------------------------------------------------- */

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "ops/cuda/dic_wgmma_ptx.cuh"
#include "ops/cuda/dic_wgmma_f16_rs.cuh"

/* unit u -> (token tile pm, weight tile pn): groups of G16_GROUP weight tiles, token tiles fastest */
static __device__ __forceinline__ void g16_tile(const g16args &a, int u, int *pm, int *pn) {
    const int per = G16_GROUP * a.mt, grp = u / per, idx = u - grp * per;
    const int gn = min(G16_GROUP, a.nt - grp * G16_GROUP);
    *pn = grp * G16_GROUP + idx % gn;
    *pm = idx / gn;
}

/* the compiler must not move register reads / writes across the asynchronous wgmma (v3's fence) */
#define G16_FENCE_F(x, n) _Pragma("unroll") for (int i_ = 0; i_ < (n); i_++) asm volatile("" : "+f"((x)[i_])::"memory")
#define G16_FENCE_R(x, n) _Pragma("unroll") for (int i_ = 0; i_ < (n); i_++) asm volatile("" : "+r"((x)[i_])::"memory")

/* the weight A fragments of 32-k sub-block j (bytes 32j .. 32j + 31 of the 128-byte rows) for the rows
 * rl and rl + 8 of a swizzled stage (16-byte chunk c of row r at c ^ (r % 8); rl % 8 == g): the two k16
 * steps' registers {row rl, row rl + 8, row rl hi, row rl + 8 hi}, k_gemm_f16's pa / pb order */
static __device__ __forceinline__ void g16_afrag(const uint8_t *sW, int rl, int j, int t, uint32_t *A) {
    const int bo = 32 * j + 8 * t;
    const int oa = rl * 128 + ((((bo >> 4) ^ rl) & 7) << 4) + (bo & 15);
    const int ob = (rl + 8) * 128 + ((((bo >> 4) ^ (rl + 8)) & 7) << 4) + (bo & 15);
    const uint2 wa = *(const uint2 *)(sW + oa), wb = *(const uint2 *)(sW + ob);
    A[0] = cvt_e4m3x2(wa.x & 0xFFFFu), A[1] = cvt_e4m3x2(wb.x & 0xFFFFu);
    A[2] = cvt_e4m3x2(wa.x >> 16), A[3] = cvt_e4m3x2(wb.x >> 16);
    A[4] = cvt_e4m3x2(wa.y & 0xFFFFu), A[5] = cvt_e4m3x2(wb.y & 0xFFFFu);
    A[6] = cvt_e4m3x2(wa.y >> 16), A[7] = cvt_e4m3x2(wb.y >> 16);
}

template <int TN, int KB, int SPLIT>
static __device__ __forceinline__ void g16_body(const g16args &a, const CUtensorMap *tmX, const CUtensorMap *tmW) {
    constexpr int ST = g16_stages(TN, SPLIT), STG = g16_stage_bytes(TN), NB = G16_BK / KB, SB = KB / 32, ND = TN / 2;
    extern __shared__ uint8_t dsm[];
    __shared__ __align__(8) uint64_t full[ST], empty[ST];
    uint8_t *base = dsm + ((1024u - (smem_u32(dsm) & 1023u)) & 1023u);
    float *fac = (float *)(base + ST * STG); /* [stage][block][token] s_act * s_w */
    float *Rs = fac + ST * 4 * TN;            /* SPLIT: [ND][256 consumer threads] the finished splits' sum */
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
    const int nch = a.K / G16_BK;

    if (tid == 0) {
        for (int s = 0; s < ST; s++) {
            mbar_init(smem_u32(&full[s]), 128 + 1); /* every producer thread + the TMA thread's expect_tx */
            mbar_init(smem_u32(&empty[s]), 8);      /* one arrive per consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        int s = 0;
        uint32_t ph = 0;
        for (int u = blockIdx.x; u < a.units; u += gridDim.x) {
            int pm, pn;
            g16_tile(a, u, &pm, &pn);
            const int m0 = pm * TN, n0 = pn * G16_BW, tok = m0 + tid;
            const uint8_t *wsr = a.ws + (size_t)(n0 >> a.lwb) * a.nwb;
            for (int c = 0; c < nch; c++) {
                const int kc = c * G16_BK;
                float f[NB];
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    const int k = kc + b * KB;
                    const float sw = dic_e8m0_to_f32(wsr[k >> a.lwb]);
                    const float sx = tid < TN && tok < a.M ? a.sa[(size_t)tok * a.nsa + (k >> a.lab)] : 0.0f;
                    f[b] = sx * sw; /* k_gemm_f16: s_act * s_w */
                }
                mbar_wait(smem_u32(&empty[s]), ph ^ 1u);
                if (tid == 0) {
                    const uint32_t sW = smem_u32(base + s * STG), sX = sW + G16_WBYTES, fb = smem_u32(&full[s]);
                    mbar_expect_tx(fb, (uint32_t)STG);
                    tma_load_2d(sW, tmW, kc, n0, fb);
                    tma_load_2d(sX, tmX, kc, m0, fb);
                    tma_load_2d(sX + TN * 128, tmX, kc + 64, m0, fb);
                }
                if (tid < TN)
#pragma unroll
                    for (int b = 0; b < NB; b++) fac[(s * 4 + b) * TN + tid] = f[b];
                mbar_arrive(smem_u32(&full[s]));
                if (++s == ST) s = 0, ph ^= 1u;
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int cw = wg - 1, t = tid & 127, warp = t >> 5, g = lane >> 2, tq = lane & 3;
        const int rl = 64 * cw + 16 * warp + g; /* this thread's weight rows rl, rl + 8 within the CTA */
        int s = 0;
        uint32_t ph = 0;
        float P[ND], acc[ND];
        float *Rt = Rs + (tid - 128); /* this thread's running sum: Rt[256 i] */
        uint32_t A[2][8];
        for (int u = blockIdx.x; u < a.units; u += gridDim.x) {
            int pm, pn;
            g16_tile(a, u, &pm, &pn);
#pragma unroll
            for (int i = 0; i < ND; i++) acc[i] = 0.0f;
            int first = 1;
            for (int c = 0; c < nch; c++) {
                mbar_wait(smem_u32(&full[s]), ph);
                __syncwarp(); /* converged for the .aligned wgmma instructions */
                const uint8_t *sW = base + s * STG, *sX = sW + G16_WBYTES;
                const float *fc = fac + s * 4 * TN;
#pragma unroll
                for (int b = 0; b < NB; b++) {
#pragma unroll
                    for (int jj = 0; jj < SB; jj++) {
                        const int j = b * SB + jj, buf = jj & 1;
                        g16_afrag(sW, rl, j, tq, A[buf]);
                        /* k16 steps 2j, 2j + 1: token sub-tile j / 2, 32 bytes per step (16-byte units) */
                        const uint64_t db = desc_sw128(smem_u32(sX + (j >> 1) * TN * 128)) + 4 * (j & 1);
                        wg_fence();
                        dic_wg16_rs<TN>::mma(P, &A[buf][0], db, jj > 0);
                        dic_wg16_rs<TN>::mma(P, &A[buf][4], db + 2, 1);
                        wg_commit();
                        if (jj > 0) {
                            wg_wait1(); /* the previous sub-block's steps are done: its A registers free */
                            G16_FENCE_R(A[buf ^ 1], 8);
                        }
                    }
                    wg_wait0();
                    G16_FENCE_R(A[(SB - 1) & 1], 8);
                    G16_FENCE_F(P, ND);
                    /* K-block complete: C_s = fmaf(P, s_act * s_w, C_s) (columns 8q + 2tq, + 1) */
                    const float *fb = fc + b * TN + 2 * tq;
#pragma unroll
                    for (int q = 0; q < TN / 8; q++) {
                        const float2 f = *(const float2 *)(fb + 8 * q);
                        acc[4 * q + 0] = fmaf(P[4 * q + 0], f.x, acc[4 * q + 0]);
                        acc[4 * q + 1] = fmaf(P[4 * q + 1], f.y, acc[4 * q + 1]);
                        acc[4 * q + 2] = fmaf(P[4 * q + 2], f.x, acc[4 * q + 2]);
                        acc[4 * q + 3] = fmaf(P[4 * q + 3], f.y, acc[4 * q + 3]);
                    }
                }
                __syncwarp();
                if (lane == 0) mbar_arrive(smem_u32(&empty[s])); /* operands and factors of stage s read */
                if (++s == ST) s = 0, ph ^= 1u;
                if (SPLIT && ((c + 1) % a.cps == 0 || c + 1 == nch)) { /* split done: C = C + C_s in split order */
#pragma unroll
                    for (int i = 0; i < ND; i++) {
                        Rt[256 * i] = first ? acc[i] : __fadd_rn(Rt[256 * i], acc[i]);
                        acc[i] = 0.0f;
                    }
                    first = 0;
                }
            }
            const int m0 = pm * TN, n0 = pn * G16_BW;
#pragma unroll
            for (int q = 0; q < TN / 8; q++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int n = n0 + rl + 8 * (j >> 1), m = m0 + 8 * q + 2 * tq + (j & 1);
                    const float v = SPLIT ? Rt[256 * (4 * q + j)] : acc[4 * q + j];
                    if (m < a.M && n < a.N) {
                        if (a.C32) a.C32[(size_t)m * a.ldc + n] = v;
                        else a.C16[(size_t)m * a.ldc + n] = dic_f32_to_bf16(v);
                    }
                }
        }
    }
}
#endif

template <int TN, int KB, int SPLIT>
static __global__ void __launch_bounds__(384, 1)
    k_g16(const g16args a, const __grid_constant__ CUtensorMap tmX, const __grid_constant__ CUtensorMap tmW) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    g16_body<TN, KB, SPLIT>(a, &tmX, &tmW);
#else
    (void)a, (void)tmX, (void)tmW;
#endif
}

/* ---- host --------------------------------------------------------------------------------------- */


/* rows x cols elements of esz bytes (1: e4m3, 2: f16), row stride ld bytes; box 128 bytes x box_rows,
 * 128-byte swizzle, out of bounds -> 0 */
static int g16_map(CUtensorMap *m, const void *p, int rows, int cols, size_t ld, int esz, int box_rows) {
    dic_tmap_encode_fn enc = dic_tmap_encoder();
    if (!enc) return 0;
    cuuint64_t dim[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)ld};
    cuuint32_t box[2] = {(cuuint32_t)(128 / esz), (cuuint32_t)box_rows}, es[2] = {1, 1};
    return enc(m, esz == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)p, dim,
               stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int TN, int KB, int SPLIT>
static cudaError_t g16_run(cudaStream_t st, int grid, const g16args &a, const CUtensorMap &tX, const CUtensorMap &tW) {
    /* per launch: the attribute is per device, and the call is cheap */
    cudaError_t e = cudaFuncSetAttribute(k_g16<TN, KB, SPLIT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         g16_smem(TN, SPLIT));
    if (e != cudaSuccess) return e;
    k_g16<TN, KB, SPLIT><<<(unsigned)grid, 384, g16_smem(TN, SPLIT), st>>>(a, tX, tW);
    return cudaGetLastError();
}

static cudaError_t wg16_gemm(cudaStream_t st, int num_sms, const void *W, const uint8_t *ws, int N, int K,
                             int wblock, int act_block, int M, const uint16_t *x16, const float *sa, float *C32,
                             uint16_t *C16, size_t ldc, int tn) {
    if (M <= 0 || N <= 0) return cudaSuccess;
    if (!tn) tn = 128;
    const int pw = wblock > 0 && !(wblock & (wblock - 1)), pa = act_block > 0 && !(act_block & (act_block - 1));
    if (K <= 0 || K % G16_BK || !pw || wblock < G16_BW || !pa || act_block < 32 || act_block > 128 ||
        (tn != 64 && tn != 128) || (!C32) == (!C16) || ((uintptr_t)W & 15) || ((uintptr_t)x16 & 15))
        return cudaErrorInvalidValue;
    const int kb = act_block < wblock ? act_block : wblock;
    if (kb != 32 && kb != 128) return cudaErrorInvalidValue; /* the instantiations (act_block 64: add KB = 64) */
    CUtensorMap tX, tW;
    if (!g16_map(&tX, x16, M, K, (size_t)K * 2, 2, tn) || !g16_map(&tW, W, N, K, (size_t)K, 1, G16_BW))
        return cudaErrorInvalidValue;
    int kper;
    const int splits = dic_gemm_dec_splits(N, K, num_sms, &kper);
    g16args a;
    memset(&a, 0, sizeof a);
    a.M = M, a.N = N, a.K = K, a.nsa = K / act_block;
    a.lab = __builtin_ctz((unsigned)act_block), a.lwb = __builtin_ctz((unsigned)wblock), a.nwb = K / wblock;
    a.cps = kper / G16_BK;
    a.mt = (M + tn - 1) / tn, a.nt = (N + G16_BW - 1) / G16_BW;
    if ((long long)a.mt * a.nt > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
    a.units = a.mt * a.nt;
    a.sa = sa, a.ws = ws, a.C32 = C32, a.C16 = C16, a.ldc = ldc;
    const int nsm = num_sms > 0 ? num_sms : 132, grid = a.units < nsm ? a.units : nsm;
    const int sp = splits > 1;
    switch ((tn == 128) * 4 + (kb == 128) * 2 + sp) {
    case 0: return g16_run<64, 32, 0>(st, grid, a, tX, tW);
    case 1: return g16_run<64, 32, 1>(st, grid, a, tX, tW);
    case 2: return g16_run<64, 128, 0>(st, grid, a, tX, tW);
    case 3: return g16_run<64, 128, 1>(st, grid, a, tX, tW);
    case 4: return g16_run<128, 32, 0>(st, grid, a, tX, tW);
    case 5: return g16_run<128, 32, 1>(st, grid, a, tX, tW);
    case 6: return g16_run<128, 128, 0>(st, grid, a, tX, tW);
    default: return g16_run<128, 128, 1>(st, grid, a, tX, tW);
    }
}

/* ---- entry ---------------------------------------------------------------------------------------- */

static size_t wg16_xbytes(int M, int K) { return ((size_t)M * (size_t)K * 2 + 255) & ~(size_t)255; }

extern "C" size_t dic_gemm_f16_wg_scratch(int M, int K) {
    if (M <= 0 || K <= 0) return 0;
    return wg16_xbytes(M, K) + dic_gemm_sbytes(M, K);
}

extern "C" int dic_gemm_f16_wg_ok(const dic_wmat *W, int act_block) {
    if (!W || W->fmt != 2 || W->k <= 0 || W->k % G16_BK || W->n <= 0 || ((uintptr_t)W->w & 15)) return 0;
    const int wb = W->wblock, kb = act_block < wb ? act_block : wb;
    if (wb < G16_BW || (wb & (wb - 1)) || act_block < 32 || act_block > 128 || (act_block & (act_block - 1)) ||
        (kb != 32 && kb != 128))
        return 0;
    static int arch = -1; /* every device of a process is of one kind (cuda-backend.md) */
    if (arch < 0) {
        int dev = 0, major = 0, minor = 0;
        arch = cudaGetDevice(&dev) == cudaSuccess &&
                       cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                       cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess
                   ? major * 10 + minor
                   : 0;
    }
    return arch == 90 && dic_tmap_encoder() != NULL;
}

extern "C" cudaError_t dic_gemm_f16_wg(cudaStream_t st, int num_sms, const dic_wmat *W, int act_block, int M,
                                       const uint16_t *A, size_t lda, void *scratch, size_t scratch_cap, float *C32,
                                       uint16_t *C16, size_t ldc, int tn) {
    if (M <= 0) return cudaSuccess;
    if (!dic_gemm_f16_wg_ok(W, act_block) || (!C32) == (!C16) || scratch_cap < dic_gemm_f16_wg_scratch(M, W->k) ||
        ((uintptr_t)scratch & 255))
        return cudaErrorNotSupported;
    const int K = W->k;
    uint16_t *x16 = (uint16_t *)scratch;
    float *sa = (float *)((uint8_t *)scratch + wg16_xbytes(M, K));
    const long long warps = (long long)M * (K / act_block);
    DIC_LAUNCH(k_act_quant_f16, (unsigned)((warps * 32 + 255) / 256), 256, 0, st, A, lda, M, K, act_block, x16, sa);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    /* the token tile changes no bits (every output is one CTA's) */
    return wg16_gemm(st, num_sms, W->w, W->scale, W->n, K, W->wblock, act_block, M, x16, sa, C32, C16, ldc, tn);
}
