/*
 * dic_route_gate.cu — the MoE router in one launch (ops.h di_route_gate) for
 * dic_ctx.batch_invariant == 0 at decode sizes (M <= 8, E <= 1024, k <= 32,
 * BF16 gate): logits = x . gate^T (fp32), then di_route_rows' temperature,
 * selection and weights.
 *
 * k_route_gate: the CTAs compute the logits with the fast GEMV's tile
 * (dic_gemv.cuh gemv_tile, the K split / variant of dic_gemv_plan: k_gemv's
 * per-column code and summation order, so the logits are bitwise those of the
 * fast-mode GEMV launch of the same rows; a row's bits do not depend on M or
 * on the other rows) and store them; the last CTA to arrive (threadfence,
 * then an integer atomic on a device counter that it resets for the next
 * launch; no float atomics, so deterministic) then routes every row with
 * dic_route.cuh (k_route's code): the scores by all 256 threads, one warp per
 * row for the top-k and the weights. With temp != 1 it divides the logits
 * (IEEE, as k_div_f32) and writes the quotients back, as dic_route_rows does.
 * sel and w are therefore bitwise those of the GEMV launch followed by
 * dic_route_rows. Where dic_gemm's auto dispatch takes the tensor-core kernel
 * (BF16, M = 5..8), today's logits are other fp32 sums (fast mode: within
 * GEMM rounding, not bitwise); the fused launch keeps the GEMV's.
 *
 * The counter is one per device: launches of this kernel must not run
 * concurrently on two streams (the forward runs the router on line 0 only).
 */
#include <string.h>

#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_gemv.cuh"
#include "ops/cuda/dic_model.h"
#include "ops/cuda/dic_route.cuh"

#define RG_MAXM 8 /* rows (one warp each in the routing) */

static __device__ unsigned int g_rg_cnt; /* CTAs arrived in the running launch */

template <int MR, int PRE, int PIPE>
static __global__ void __launch_bounds__(GV_T) k_route_gate(int M, int E, int K, const uint16_t *__restrict__ A,
                                                            size_t lda, const __grid_constant__ dic_gv_tab tab,
                                                            float *logits, int WPC, int flags, float temp,
                                                            const float *bias, const int *fixed,
                                                            const int32_t *tokens, int k, float route_scale,
                                                            float norm_eps, int normalize, int *sel, float *w) {
    extern __shared__ __align__(16) float rg_sh[]; /* scores [M][E], then biased scores [M][E] */
    __shared__ int sel_sh[GV_T / 32][32];
    __shared__ unsigned last_sh;
    /* the logits (the GEMV tile runs DIC_PDL_ENTER after issuing its first weight batch) */
    gemv_tile<MR, 0, PRE, PIPE, 0>(M, E, K, A, lda, tab, 0, 0, logits, NULL, (size_t)E, WPC, 1, flags);

    /* arrival: the last CTA routes */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned prev = atomicAdd(&g_rg_cnt, 1u);
        last_sh = prev == gridDim.x * gridDim.y * gridDim.z - 1;
        if (last_sh) g_rg_cnt = 0; /* ready for the next launch */
    }
    __syncthreads();
    if (!last_sh) return;
    __threadfence();
    float *s = rg_sh, *b = rg_sh + (size_t)M * E;
    route_scores(M, 0, RG_MAXM, logits, temp != 1.0f ? logits : NULL, E, temp, bias, s, b, E, GV_T);
    __syncthreads();
    const int wp = threadIdx.x >> 5;
    if (wp < M)
        route_token(wp, s + (size_t)wp * E, b + (size_t)wp * E, E, fixed, tokens, k, route_scale, norm_eps, normalize,
                    sel_sh[wp], sel, w);
}

typedef void (*rg_fn)(int, int, int, const uint16_t *, size_t, const dic_gv_tab, float *, int, int, float,
                      const float *, const int *, const int32_t *, int, float, float, int, int *, float *);

/* dic_gemm_float_fast.cu gemv_pick_bf<0>'s variants for mr <= 8 */
static rg_fn rg_pick(int mr, int flags) {
    const int nopre = (flags & DIC_GV_NOPRE) != 0, pipe = (flags & DIC_GV_PIPE) != 0;
    if (mr == 1)
        return nopre ? (pipe ? k_route_gate<1, 0, 1> : k_route_gate<1, 0, 0>)
                     : (pipe ? k_route_gate<1, 1, 1> : k_route_gate<1, 1, 0>);
    return mr == 2 ? k_route_gate<2, 1, 0> : mr == 4 ? k_route_gate<4, 0, 0> : k_route_gate<8, 0, 0>;
}

static int al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" int dic_route_gate_ok(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W, int E,
                                 int k, const int32_t *tid2eid, const int32_t *tokens) {
    if (!c || c->batch_invariant || M < 1 || M > RG_MAXM || !W || W->fmt != 0 || W->n != E) return 0;
    if (E <= 0 || E > RT_MAXE || k <= 0 || k > 32 || k > E || (tid2eid && !tokens)) return 0;
    const int K = W->k;
    if (K <= 0 || K % 8 || lda % 8 || !al16(A) || !al16(W->w)) return 0; /* the fast GEMV's rules */
    int wpc, cy, flags, mr;
    if (dic_gemv_plan(0, M, E, K, &wpc, &cy, &flags, &mr) != cudaSuccess) return 0;
    return cy == 1 && mr <= RG_MAXM; /* no cluster split (one K range per CTA) */
}

extern "C" cudaError_t dic_route_gate(const dic_ctx *c, int M, const uint16_t *A, size_t lda, const dic_wmat *W,
                                      float *logits, int E, float temp, const float *bias, const int32_t *tid2eid,
                                      const int32_t *tokens, int k, float route_scale, float norm_eps, int normalize,
                                      int *sel, float *w) {
    if (M <= 0) return cudaSuccess;
    if (!dic_route_gate_ok(c, M, A, lda, W, E, k, tid2eid, tokens)) { /* the op sequence */
        cudaError_t e = dic_gemm(c, M, A, lda, W, 0, logits, NULL, (size_t)E);
        if (e != cudaSuccess) return e;
        return dic_route_rows(c, M, logits, E, temp, bias, tid2eid, tokens, k, route_scale, norm_eps, normalize, sel,
                              w);
    }
    int wpc, cy, flags, mr;
    cudaError_t e = dic_gemv_plan(0, M, E, W->k, &wpc, &cy, &flags, &mr);
    if (e != cudaSuccess) return e;
    dic_gv_tab tab;
    memset(&tab, 0, sizeof tab);
    tab.w[0] = W->w;
    const int CG = 8 / wpc; /* column groups of 4 per CTA */
    const unsigned gx = (unsigned)((E + 4 * CG - 1) / (4 * CG));
    const size_t smem = (size_t)2 * M * E * sizeof(float);
    rg_fn fn = rg_pick(mr, flags);
    if (smem > 32768) { /* above the default 48 KB with the static arrays: opt in */
        e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    DIC_LAUNCH(fn, gx, GV_T, smem, c->stream, M, E, W->k, A, lda, tab, logits, wpc, flags, temp, bias,
               (const int *)tid2eid, tid2eid ? tokens : NULL, k, route_scale, norm_eps, normalize, sel, w);
    DIC_LAUNCH_CHECK();
}
