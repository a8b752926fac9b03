/* gemm_grouped.c — GEMMs over an expert-dispatched row list (ops.h
 * di_gemm_grouped, di_gemm2_grouped, di_swiglu_n). The CPU runs one
 * di_gemm / di_gemm2 per non-empty expert, in increasing expert id. */
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

void di_cpu_gemm_grouped(di_exec *x, int E, const di_wmat *W, const int *off, const uint16_t *A, size_t lda,
                         int act_block, uint16_t *C16, size_t ldc) {
    for (int e = 0; e < E; e++) {
        int n = off[e + 1] - off[e];
        if (n > 0) di_gemm(x, n, A + (size_t)off[e] * lda, lda, &W[e], act_block, NULL, C16 + (size_t)off[e] * ldc, ldc);
    }
}

void di_cpu_gemm2_grouped(di_exec *x, int E, const di_wmat *W1, const di_wmat *W2, const int *off, const uint16_t *A,
                          size_t lda, int act_block, uint16_t *C1, uint16_t *C2, size_t ldc) {
    for (int e = 0; e < E; e++) {
        int n = off[e + 1] - off[e];
        if (n > 0)
            di_gemm2(x, n, A + (size_t)off[e] * lda, lda, &W1[e], &W2[e], act_block, NULL, C1 + (size_t)off[e] * ldc, NULL,
                     C2 + (size_t)off[e] * ldc, ldc);
    }
}

void di_cpu_swiglu_n(di_exec *x, const int *off, int E, const uint16_t *gate, const uint16_t *up, size_t ld, int I,
                     float limit, const float *rw, uint16_t *out, size_t ldo) {
    if (off[E] > 0) di_swiglu(x, off[E], gate, up, ld, I, limit, rw, out, ldo);
}
