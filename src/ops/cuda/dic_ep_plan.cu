/*
 * dic_ep_plan.cu — the expert-parallel exchange plan of a replicated-router
 * MoE sub-layer and the row gather with holes (ops.h di_ep_plan,
 * di_gather_rows_bf16; src/ops/cpu/ep_plan.c). Integer work only, so the
 * tables are the CPU's bit for bit; the launch shapes depend on M, k, E and
 * nloc (a recorded step holds them).
 *   k_ep_exec     one warp per expert: its entries in increasing index by
 *                 ballots (as k_dispatch_rows), the j-th on copy j % ncopies;
 *                 its counters (the warp owns load[e]; replica by atomicAdd:
 *                 an integer sum, the same in any order)
 *   dispatch      dic_moe_dispatch_inv over sel_loc (nloc + 1 groups)
 *   k_ep_places   one thread per entry: its combine place q, pack, and for
 *                 the rank's slice cinv and unpack
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"

static __global__ void k_ep_exec(int n, const int *sel, int E, const int *ncopies, const int *copies, int maxc,
                                 const int *local, int nloc, int rank, int *exec, int *sel_loc, long long *load,
                                 unsigned long long *replica) {
    DIC_PDL_ENTER();
    const int e = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (e >= E) return;
    const int nc = ncopies[e], loc = local[e];
    int done = 0, rep = 0;
    for (int j0 = 0; j0 < n; j0 += 32) {
        const int i = j0 + lane;
        const bool hit = i < n && sel[i] == e;
        const uint32_t bal = __ballot_sync(0xFFFFFFFFu, hit);
        if (hit) {
            const int j = done + __popc(bal & ((1u << lane) - 1u)), cp = j % nc, r = copies[(size_t)e * maxc + cp];
            exec[i] = r;
            sel_loc[i] = r == rank && loc >= 0 ? loc : nloc;
            rep += r == rank && cp != 0;
        }
        done += __popc(bal);
    }
    for (int o = 16; o > 0; o >>= 1) rep += __shfl_down_sync(0xFFFFFFFFu, rep, o);
    if (lane == 0) {
        load[e] += done;
        if (rep) atomicAdd(replica, (unsigned long long)rep);
    }
}

static __global__ void k_ep_places(int M, int k, const int *sel, int rank, int lo, int hi, int nloc, const int *exec,
                                   const int *sel_loc, const int *inv, int *pack, int *cinv, int *unpack) {
    DIC_PDL_ENTER();
    const int n = M * k, msk = (hi - lo) * k;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int m = i / k, s = i - m * k, es = sel[i];
        const int *row = sel + (size_t)m * k;
        int q = 0;
        for (int t = 0; t < k; t++) q += row[t] < es || (row[t] == es && t < s);
        const int r = exec[i];
        pack[m * k + q] = r == rank && sel_loc[i] < nloc ? inv[i] : -1;
        if (m >= lo && m < hi) {
            const int p = (m - lo) * k + q;
            cinv[(m - lo) * k + s] = p;
            unpack[p] = r >= 0 ? r * msk + p : p;
        }
    }
}

extern "C" cudaError_t dic_ep_plan(const dic_ctx *c, const di_ep_plan_args *a) {
    const int n = a->M > 0 ? a->M * a->k : 0;
    if (n <= 0) return cudaSuccess;
    if (a->E <= 0 || a->E > 1024 || a->k > 64 || a->nloc + 1 > 1024 || a->size < 1) return cudaErrorInvalidValue;
    DIC_LAUNCH(k_ep_exec, (a->E + 7) / 8, 256, 0, c->stream, n, a->sel, a->E, a->ncopies, a->copies, a->maxc,
               a->local, a->nloc, a->rank, a->exec, a->sel_loc, (long long *)a->load,
               (unsigned long long *)a->replica);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    if ((e = dic_moe_dispatch_inv(c, a->M, a->k, a->sel_loc, a->nloc + 1, a->off, a->rows, a->inv)) != cudaSuccess)
        return e;
    const int lo = (int)((long long)a->M * a->rank / a->size), hi = (int)((long long)a->M * (a->rank + 1) / a->size);
    int blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    DIC_LAUNCH(k_ep_places, blocks, 256, 0, c->stream, a->M, a->k, a->sel, a->rank, lo, hi, a->nloc, a->exec,
               a->sel_loc, a->inv, a->pack, a->cinv, a->unpack);
    DIC_LAUNCH_CHECK();
}

/* One CTA per row (grid-stride): dst[j] = src[idx[j]] where idx[j] >= 0. */
static __global__ void k_gather_rows(int n, const int *idx, const uint16_t *src, size_t lds, int d, uint16_t *dst,
                                     size_t ldd) {
    DIC_PDL_ENTER();
    for (int j = blockIdx.x; j < n; j += gridDim.x) {
        const int r = idx[j];
        if (r < 0) continue;
        const uint16_t *s = src + (size_t)r * lds;
        uint16_t *o = dst + (size_t)j * ldd;
        if (((uintptr_t)s & 15) == 0 && ((uintptr_t)o & 15) == 0 && d % 8 == 0) {
            for (int t = threadIdx.x; t < d / 8; t += blockDim.x) ((uint4 *)o)[t] = ((const uint4 *)s)[t];
        } else {
            for (int t = threadIdx.x; t < d; t += blockDim.x) o[t] = s[t];
        }
    }
}

extern "C" cudaError_t dic_gather_rows_bf16(const dic_ctx *c, int n, const int *idx, const uint16_t *src, size_t lds,
                                            int d, uint16_t *dst, size_t ldd) {
    if (n <= 0 || d <= 0) return cudaSuccess;
    int blocks = n < 65535 ? n : 65535;
    DIC_LAUNCH(k_gather_rows, blocks, 128, 0, c->stream, n, idx, src, lds, d, dst, ldd);
    DIC_LAUNCH_CHECK();
}
