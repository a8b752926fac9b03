/*
 * dic_gemm_grouped_seg.cu — grouped GEMMs over a pre-gathered expert list
 * and the SwiGLU over its rows (ops.h di_gemm_grouped, di_gemm2_grouped,
 * di_swiglu_n; src/ops/cpu/gemm_grouped.c). Expert e's rows are A rows
 * [off[e], off[e+1]): the grouped launch of dic_gemm_grouped with no rows[]
 * indirection (dic_gemm_quant / dic_gemm_f16_launch with rows = NULL). With
 * c->batch_invariant the split is the M-free one, so each row's result equals
 * dic_gemm's on the same row (and the CPU's within the GEMM tolerance);
 * without it the split is sized by the launch. gemm2: one activation quantisation, two
 * launches (W1, W2); the split-K arrival counters reset themselves, so the
 * second launch reuses the scratch.
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_model.h"

static int misaligned(const void *p) { return ((uintptr_t)p & 15) != 0; }

static cudaError_t wtab_of(int E, const dic_wmat *W, int fmt, int N, int K, int wb, dic_gemm_wtab *tab) {
    for (int e = 0; e < E; e++) {
        if (W[e].fmt != fmt || W[e].n != N || W[e].k != K || W[e].wblock != wb || misaligned(W[e].w))
            return cudaErrorInvalidValue;
        tab->w[e] = W[e].w;
        tab->s[e] = W[e].scale;
    }
    return cudaSuccess;
}

/* Quantise the first off[E] rows into the scratch, then one launch per
 * weight table (W2 may be NULL). */
static cudaError_t grouped_seg(const dic_ctx *c, int E, const dic_wmat *W1, const dic_wmat *W2, const int *off,
                               int max_rows, const uint16_t *A, size_t lda, int act_block, uint16_t *C1, uint16_t *C2,
                               size_t ldc) {
    if (E <= 0 || max_rows <= 0) return cudaSuccess;
    if (E > DIC_GEMM_MAXE || !C1 || (W2 && !C2)) return cudaErrorInvalidValue;
    const int fmt = W1[0].fmt, N = W1[0].n, K = W1[0].k, wb = W1[0].wblock;
    if ((fmt != 2 && fmt != 3) || act_block <= 0 || K % act_block || K % 32 ||
        c->scratch_cap < dic_gemm_scratch(max_rows, N, K))
        return cudaErrorInvalidValue;
    dic_gemm_wtab local1, local2; /* host copies, passed by value into the launches' parameters */
    dic_gemm_wtab *t1 = &local1, *t2 = &local2;
    cudaError_t e = wtab_of(E, W1, fmt, N, K, wb, t1);
    if (e == cudaSuccess && W2) e = wtab_of(E, W2, fmt, N, K, wb, t2);
    if (e != cudaSuccess) return e;
    uint8_t *q = (uint8_t *)c->scratch;
    float *s = (float *)(q + dic_gemm_qbytes(max_rows, K));
    float *part = NULL;
    int *cnt = NULL, ncnt = 0;
    if (dic_gemm_partbytes(max_rows, N, K)) {
        part = (float *)(q + dic_gemm_qbytes(max_rows, K) + dic_gemm_sbytes(max_rows, K));
        cnt = (int *)((uint8_t *)part + (((size_t)dic_gemm_ngroups(K) * max_rows * N * 4 + 255) & ~(size_t)255));
        ncnt = (int)dic_gemm_ncnt(max_rows, N);
    }
    e = dic_gemm_quant(c->stream, max_rows, A, lda, K, act_block, NULL, off + E, q, s, cnt, ncnt);
    if (e != cudaSuccess) return e;
    /* f16 HMMA kernels (dic_gemm_f16.cu), batch-invariant: the M-free split; the split counters reset
     * themselves, so the second launch reuses the scratch */
    const int mfree = c->batch_invariant;
    e = dic_gemm_f16_launch(c->stream, c->num_sms, E, t1, fmt, N, K, wb, act_block, max_rows, off, NULL, q, s, part,
                            cnt, ncnt, NULL, C1, ldc, mfree);
    if (e != cudaSuccess || !W2) return e;
    return dic_gemm_f16_launch(c->stream, c->num_sms, E, t2, fmt, N, K, wb, act_block, max_rows, off, NULL, q, s, part,
                               cnt, ncnt, NULL, C2, ldc, mfree);
}

extern "C" cudaError_t dic_gemm_grouped_seg(const dic_ctx *c, int E, const dic_wmat *W, const int *off, int max_rows,
                                            const uint16_t *A, size_t lda, int act_block, uint16_t *C16, size_t ldc) {
    return grouped_seg(c, E, W, NULL, off, max_rows, A, lda, act_block, C16, NULL, ldc);
}

extern "C" cudaError_t dic_gemm2_grouped_seg(const dic_ctx *c, int E, const dic_wmat *W1, const dic_wmat *W2,
                                             const int *off, int max_rows, const uint16_t *A, size_t lda,
                                             int act_block, uint16_t *C1, uint16_t *C2, size_t ldc) {
    if (!W2) return cudaErrorInvalidValue;
    return grouped_seg(c, E, W1, W2, off, max_rows, A, lda, act_block, C1, C2, ldc);
}

/* ---- SwiGLU over off[E] rows -------------------------------------------- */

/* select.c di_swiglu (as dic_moe.cu): g, u clamped; h = g / (1 + exp(-g)) * u;
 * h = rw * h; bf16. */
static __device__ __forceinline__ float swiglu_one(float gv, float uv, float limit, const float *rw, int m) {
    if (limit > 0.0f) {
        uv = fminf(fmaxf(uv, -limit), limit);
        gv = fminf(gv, limit);
    }
    float h = gv / (1.0f + dic_expf(-gv)) * uv;
    if (rw) h = rw[m] * h;
    return h;
}

/* Grid (column chunks, max_rows); rows m >= off[E] exit. */
static __global__ void k_swiglu_n(const int *off, int E, const uint16_t *gate, const uint16_t *up, size_t ld, int I,
                                  float limit, const float *rw, uint16_t *out, size_t ldo) {
    DIC_PDL_ENTER();
    const int m = blockIdx.y;
    if (m >= off[E]) return;
    const uint16_t *g = gate + (size_t)m * ld, *u = up + (size_t)m * ld;
    uint16_t *o = out + (size_t)m * ldo;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < I; i += gridDim.x * blockDim.x)
        o[i] = dic_f32_to_bf16(swiglu_one(dic_bf16_to_f32(g[i]), dic_bf16_to_f32(u[i]), limit, rw, m));
}

extern "C" cudaError_t dic_swiglu_n(const dic_ctx *c, const int *off, int E, int max_rows, const uint16_t *gate,
                                    const uint16_t *up, size_t ld, int I, float limit, const float *rw, uint16_t *out,
                                    size_t ldo) {
    if (max_rows <= 0 || I <= 0) return cudaSuccess;
    if (E <= 0 || max_rows > 65535) return cudaErrorInvalidValue;
    int bx = (I + 255) / 256;
    if (bx > 16) bx = 16;
    DIC_LAUNCH(k_swiglu_n, dim3((unsigned)bx, (unsigned)max_rows), 256, 0, c->stream, off, E, gate, up, ld, I, limit, rw, out,
                                                                              ldo);
    DIC_LAUNCH_CHECK();
}
