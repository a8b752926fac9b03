/*
 * dic_gemv.cuh — the fast-mode BF16 / F32 / FP8B GEMV tile (dic_gemm_float_fast.cu k_gemv,
 * described there), as a device function: k_gemv is this function alone, and the fused
 * router (dic_route_gate.cu) calls it for the gate's logits, so both give the same bits
 * (same per-column code, same summation order for the same WPC / CY).
 * Every thread of the CTA (GV_T threads) must call it; it ends with the CTA's outputs
 * stored (no early return). It runs DIC_PDL_ENTER after the first weight batch is issued.
 */
#ifndef DI_OPS_CUDA_DIC_GEMV_CUH
#define DI_OPS_CUDA_DIC_GEMV_CUH

#include <cooperative_groups.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_fp8w.cuh"
#include "ops/cuda/dic_gemm_int.h"

#define GV_T 256 /* 8 warps */
#define GV_U 8   /* 16-byte loads in flight per lane */

static __device__ __forceinline__ float bf_lo(uint32_t x) { return __uint_as_float(x << 16); }
static __device__ __forceinline__ float bf_hi(uint32_t x) { return __uint_as_float(x & 0xFFFF0000u); }

/* MR: rows per tile (compile time); F32: weights are fp32 (else bf16); PRE: each batch's
 * activation vectors are loaded together with the batch (else right before their FMAs,
 * from L1); PIPE: the next batch's weights are in flight while this one is summed.
 * Element e of a chunk: bf16 chunk = 8 lanes x 8 k = 64 k; f32 chunk = 8 lanes x 4 k = 32 k.
 * The first batch of weights is loaded BEFORE the programmatic-dependent-launch wait
 * (unless flags & DIC_GV_LATE): weights are constants uploaded synchronously at load
 * time (cu_exec.c dev_upload), never written by a kernel of the forward, so their DRAM
 * latency overlaps the previous kernel's tail; the activations (the previous kernel's
 * output) are read only after the wait. None of the variants changes a sum's order. */
/* EPI (the fused router, CY == 1, G * 4 * MR <= GV_T): nothing is stored; thread idx receives its
 * output's sum in *ev (gemv_out says which output that is); the same sums as the stored ones.
 * ONE (a lean instantiation for decode-sized launches: less code to fetch cold): the launch has
 * CY == 1, no DIC_GV_LATE and at most one batch per warp (nch <= WPC * GV_U); the late load, the
 * batch reload and the cluster reduction are compiled out. Same loads, same sums (the general
 * loop would also run once). The fused router's lean copy (dic_route_gate.cu k_route_gate2l) uses it too. */
template <int MR, int F32, int PRE, int PIPE, int F8, int EPI = 0, int ONE = 0>
static __device__ __forceinline__ void gemv_tile(int M, int N, int K, const uint16_t *__restrict__ A, size_t lda,
                                                 const dic_gv_tab &tab, int R, int gk, float *C32, uint16_t *C16,
                                                 size_t ldc, int WPC, int CY, int flags, float *ev = NULL) {
    __shared__ float red[8][4][MR];
    __shared__ float part[32 * MR];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = 8 / WPC;              /* column groups per CTA */
    const int g = warp / WPC, j = warp % WPC;
    const int colq = lane >> 3, q = lane & 7;
    const int n = (blockIdx.x * G + g) * 4 + colq;
    const int m0 = blockIdx.z * MR;
    const int mt = min(MR, M - m0); /* rows of this tile */
    const int EPL = F32 ? 4 : 8, CE = 8 * EPL;
    const int nch = (K + CE - 1) / CE, per = (nch + CY - 1) / CY;
    const int c0 = blockIdx.y * per, c1 = min(nch, c0 + per);
    const bool nok = n < N;
    /* block-diagonal launches (R > 0): column n belongs to group n / R, whose weight is
     * tab.w[n / R] and whose activations start at column (n / R) * gk of A */
    const int grp = R > 0 && nok ? n / R : 0, nl = (nok ? n : 0) - grp * R;
    const uint16_t *Am = A + (size_t)m0 * lda + (size_t)grp * gk;
    const char *wrow = (const char *)tab.w[grp] + (size_t)nl * K * (F32 ? 4 : F8 ? 1 : 2);
    /* FP8B: the column's scale row (a lane's 8 k of a chunk lie in one block) */
    const uint8_t *srow = F8 ? tab.s[grp] + (size_t)(nl / tab.wb) * (size_t)(K / tab.wb) : NULL;
    const int step = WPC * GV_U, cb0 = c0 + j;
    auto ldw = [&](uint4 *w, uint32_t *sc, int cb) {
#pragma unroll
        for (int u = 0; u < GV_U; u++) {
            int c = cb + u * WPC, k = c * CE + q * EPL;
            w[u] = make_uint4(0, 0, 0, 0);
            if constexpr (F8) {
                sc[u] = 127;
                if (nok && c < c1 && k < K) {
                    const uint2 t = __ldg((const uint2 *)(wrow + (size_t)k));
                    w[u].x = t.x, w[u].y = t.y;
                    sc[u] = __ldg(srow + k / tab.wb);
                }
            } else {
                if (nok && c < c1 && k < K) w[u] = __ldg((const uint4 *)(wrow + (size_t)k * (F32 ? 4 : 2)));
            }
        }
    };
    uint4 w[GV_U];
    uint32_t sw[GV_U];
    const bool late = !ONE && (flags & DIC_GV_LATE) != 0;
    if (!late) ldw(w, sw, cb0);
    DIC_PDL_ENTER();
    if (late) ldw(w, sw, cb0);
    float acc[MR];
#pragma unroll
    for (int m = 0; m < MR; m++) acc[m] = 0.0f;
    for (int cb = cb0; cb < c1; cb += step) {
        uint4 wn[PIPE ? GV_U : 1];
        uint32_t swn[PIPE ? GV_U : 1];
        if constexpr (PIPE) ldw(wn, swn, cb + step);
        uint4 ap[PRE ? GV_U : 1][MR];
        if constexpr (PRE) {
#pragma unroll
            for (int u = 0; u < GV_U; u++) {
                int c = cb + u * WPC, k = c * CE + q * EPL;
                bool ok = c < c1 && k < K;
#pragma unroll
                for (int m = 0; m < MR; m++) {
                    ap[u][m] = make_uint4(0, 0, 0, 0);
                    if (ok && m < mt) {
                        if constexpr (F32) {
                            uint2 t = __ldg((const uint2 *)(Am + (size_t)m * lda + k));
                            ap[u][m].x = t.x, ap[u][m].y = t.y;
                        } else {
                            ap[u][m] = __ldg((const uint4 *)(Am + (size_t)m * lda + k));
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < GV_U; u++) {
            int c = cb + u * WPC, k = c * CE + q * EPL;
            if (c < c1 && k < K) {
                if constexpr (F32) {
                    uint2 a[MR];
#pragma unroll
                    for (int m = 0; m < MR; m++) {
                        if constexpr (PRE) a[m] = make_uint2(ap[u][m].x, ap[u][m].y);
                        else a[m] = m < mt ? __ldg((const uint2 *)(Am + (size_t)m * lda + k)) : make_uint2(0, 0);
                    }
                    float w0 = __uint_as_float(w[u].x), w1 = __uint_as_float(w[u].y), w2 = __uint_as_float(w[u].z),
                          w3 = __uint_as_float(w[u].w);
#pragma unroll
                    for (int m = 0; m < MR; m++) {
                        if (m < mt) {
                            acc[m] = fmaf(bf_lo(a[m].x), w0, acc[m]);
                            acc[m] = fmaf(bf_hi(a[m].x), w1, acc[m]);
                            acc[m] = fmaf(bf_lo(a[m].y), w2, acc[m]);
                            acc[m] = fmaf(bf_hi(a[m].y), w3, acc[m]);
                        }
                    }
                } else {
                    uint4 a[MR];
#pragma unroll
                    for (int m = 0; m < MR; m++) {
                        if constexpr (PRE) a[m] = ap[u][m];
                        else a[m] = m < mt ? __ldg((const uint4 *)(Am + (size_t)m * lda + k)) : make_uint4(0, 0, 0, 0);
                    }
                    float wf[8];
                    if constexpr (F8) { /* the exact bf16 values of the 8 e4m3 bytes */
                        fp8w_x4(w[u].x, sw[u], wf);
                        fp8w_x4(w[u].y, sw[u], wf + 4);
                    } else {
                        wf[0] = bf_lo(w[u].x), wf[1] = bf_hi(w[u].x), wf[2] = bf_lo(w[u].y), wf[3] = bf_hi(w[u].y);
                        wf[4] = bf_lo(w[u].z), wf[5] = bf_hi(w[u].z), wf[6] = bf_lo(w[u].w), wf[7] = bf_hi(w[u].w);
                    }
#pragma unroll
                    for (int m = 0; m < MR; m++) {
                        if (m < mt) {
                            acc[m] = fmaf(bf_lo(a[m].x), wf[0], acc[m]);
                            acc[m] = fmaf(bf_hi(a[m].x), wf[1], acc[m]);
                            acc[m] = fmaf(bf_lo(a[m].y), wf[2], acc[m]);
                            acc[m] = fmaf(bf_hi(a[m].y), wf[3], acc[m]);
                            acc[m] = fmaf(bf_lo(a[m].z), wf[4], acc[m]);
                            acc[m] = fmaf(bf_hi(a[m].z), wf[5], acc[m]);
                            acc[m] = fmaf(bf_lo(a[m].w), wf[6], acc[m]);
                            acc[m] = fmaf(bf_hi(a[m].w), wf[7], acc[m]);
                        }
                    }
                }
            }
        }
        if constexpr (PIPE) {
#pragma unroll
            for (int u = 0; u < GV_U; u++) w[u] = wn[u], sw[u] = swn[u];
        } else if (!ONE && cb + step < c1) {
            ldw(w, sw, cb + step);
        }
        if constexpr (ONE) break; /* one batch per warp */
    }
    /* 8-lane butterfly: every lane of the column group ends with the same sum */
#pragma unroll
    for (int m = 0; m < MR; m++) {
        float v = acc[m];
        v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
        v += __shfl_xor_sync(0xFFFFFFFFu, v, 2);
        v += __shfl_xor_sync(0xFFFFFFFFu, v, 4);
        acc[m] = v;
    }
    if (q == 0) {
#pragma unroll
        for (int m = 0; m < MR; m++) red[warp][colq][m] = acc[m];
    }
    __syncthreads();
    /* outputs of this CTA: (g, colq, m) = idx; warps of the group added in order */
    const int nout = G * 4 * MR;
    for (int idx = threadIdx.x; idx < nout; idx += GV_T) {
        int m = idx % MR, cq = (idx / MR) % 4, gg = idx / (4 * MR);
        float v = red[gg * WPC][cq][m];
#pragma unroll 1
        for (int jj = 1; jj < WPC; jj++) v += red[gg * WPC + jj][cq][m];
        part[idx] = v;
    }
    if (!ONE && CY > 1) {
        cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
        cl.sync();
        const int r = (int)cl.block_rank();
        for (int idx = threadIdx.x; idx < nout; idx += GV_T) {
            if (idx % CY != r) continue;
            float v = 0.0f;
            for (int s = 0; s < CY; s++) v += cl.map_shared_rank(part, s)[idx];
            int m = idx % MR, nn = (blockIdx.x * G + idx / (4 * MR)) * 4 + (idx / MR) % 4;
            if (m < mt && nn < N) {
                if (C32) C32[(size_t)(m0 + m) * ldc + nn] = v;
                else C16[(size_t)(m0 + m) * ldc + nn] = dic_f32_to_bf16(v);
            }
        }
        cl.sync(); /* keep this CTA's part alive until every rank has read it */
    } else if constexpr (EPI) {
        __syncthreads();
        if ((int)threadIdx.x < nout) *ev = part[threadIdx.x];
    } else {
        __syncthreads();
        for (int idx = threadIdx.x; idx < nout; idx += GV_T) {
            int m = idx % MR, nn = (blockIdx.x * G + idx / (4 * MR)) * 4 + (idx / MR) % 4;
            if (m < mt && nn < N) {
                float v = part[idx];
                if (C32) C32[(size_t)(m0 + m) * ldc + nn] = v;
                else C16[(size_t)(m0 + m) * ldc + nn] = dic_f32_to_bf16(v);
            }
        }
    }
}

/* Output idx of a CY == 1 tile (gemv_tile's store order): row *row, column *col; whether it exists. */
template <int MR>
static __device__ __forceinline__ bool gemv_out(int idx, int M, int N, int WPC, int *row, int *col) {
    const int G = 8 / WPC, m = idx % MR, cq = (idx / MR) % 4, gg = idx / (4 * MR);
    *row = (int)blockIdx.z * MR + m;
    *col = ((int)blockIdx.x * G + gg) * 4 + cq;
    return idx < G * 4 * MR && *row < M && *col < N;
}

#endif
