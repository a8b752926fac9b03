/*
 * dic_gemm_tiles.cuh — the row tiles of a grouped GEMM launch, shared by the
 * FP8/FP4 kernels of dic_gemm_mma.cu and dic_gemm_f16.cu.
 *
 * Tile y of the launch: without off[], rows [y*BM, min(y*BM + BM, M)) of
 * expert 0; with off[] (E experts, device-side), the tiles are numbered
 * expert by expert, ceil(rows_e / BM) each. info (shared memory [3]) gets
 * the expert, first row and end row; returns 0 when y is past the last tile
 * (the whole CTA exits). Called by the whole CTA (one __syncthreads).
 */
#ifndef DI_OPS_CUDA_DIC_GEMM_TILES_CUH
#define DI_OPS_CUDA_DIC_GEMM_TILES_CUH

#include "ops/cuda/dic_gemm_int.h"

static __device__ __forceinline__ int dic_grouped_tile_rows(const int *off, int E, int M, int BM, int y, int *info) {
    if (!off) {
        int i0 = y * BM;
        info[0] = 0, info[1] = i0, info[2] = min(i0 + BM, M);
        return i0 < M;
    }
    if (threadIdx.x < 32) {
        /* all of off[] first (independent loads: one memory latency, not E/32) */
        const int lane = threadIdx.x, nb = (E + 31) / 32;
        int o[DIC_GEMM_MAXE / 32 + 1];
#pragma unroll
        for (int j = 0; j <= DIC_GEMM_MAXE / 32; j++) {
            int idx = 32 * j + lane;
            o[j] = (j <= nb && idx <= E) ? __ldg(off + idx) : 0;
        }
        int before = 0, found = 0;
#pragma unroll
        for (int j = 0; j < DIC_GEMM_MAXE / 32; j++) {
            if (j >= nb || found) break;
            int e = 32 * j + lane;
            int nxt = __shfl_down_sync(0xFFFFFFFFu, o[j], 1), nxt0 = __shfl_sync(0xFFFFFFFFu, o[j + 1], 0);
            int o0 = o[j], o1 = lane == 31 ? nxt0 : nxt, nt = 0;
            if (e < E) nt = (o1 - o0 + BM - 1) / BM;
            int incl = nt;
            for (int d = 1; d < 32; d <<= 1) {
                int v = __shfl_up_sync(0xFFFFFFFFu, incl, d);
                if (lane >= d) incl += v;
            }
            unsigned hit = __ballot_sync(0xFFFFFFFFu, e < E && y < before + incl);
            if (hit) {
                int l = __ffs(hit) - 1;
                if (lane == l) {
                    int i0 = o0 + (y - (before + incl - nt)) * BM;
                    info[0] = e, info[1] = i0, info[2] = min(i0 + BM, o1);
                }
                found = 1;
            }
            before += __shfl_sync(0xFFFFFFFFu, incl, 31);
        }
        if (!found && lane == 0) info[0] = -1;
    }
    __syncthreads();
    return info[0] >= 0;
}

#endif
