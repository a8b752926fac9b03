/* gemm_prefill_bench.c — FP8 prefill GEMM (M, N, K >= 1024) side by side with
 * cuBLASLt in one process: the wgmma kernels on pre-quantised activations
 * (v2, and the v3 variants of lab/gemm/gemm_wgmma3_variants.cu: c<cl>s<sets>; the product runs c1s1), dic_gemm in
 * fast mode (batch_invariant = 0, incl. the activation quantisation), and
 * cuBLASLt FP8 e4m3 on the same e4m3 bytes (per-tensor scales; and the
 * 128x128 / 1x128 fp32 block-scaled mode), bf16 out, same shapes as
 * gemm_bench's prefill table. CUDA events per launch, 3 warm-up, median of 20.
 * Usage: gemm_prefill_bench [variant ...] with variants v2 c1s1 c1s2 c2s1 c2s2
 * dic lt ltb (default: all); each variant's line is printed as soon as it is
 * timed, so a run cut short keeps what it measured. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "bench_util.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_gemm_int.h"
#include "gemm_lab.h"

#define LTCK(x)                                                                                 \
    do {                                                                                        \
        cublasStatus_t s_ = (x);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                      \
            fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_);   \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

enum { REPS = 20 };


/* random e4m3 bytes (no NaN pattern) */
static void fill_e4m3(void *d, size_t bytes, unsigned seed) {
    uint64_t *h = malloc((bytes + 7) & ~(size_t)7);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < (bytes + 7) / 8; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint64_t v = s, nan = v & (v >> 1) & (v >> 2) & (v >> 3) & (v >> 4) & (v >> 5) & (v >> 6) & 0x0101010101010101ull;
        h[i] = v ^ nan; /* low 7 bits all ones -> clear bit 0 */
    }
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    free(h);
}
static void fill_bf16(void *d, size_t n, unsigned seed) {
    uint16_t *h = malloc(n * 2);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        h[i] = (uint16_t)(0x3C00u | (s & 0x03FFu) | (s & 0x8000u));
    }
    CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
}

static cudaEvent_t e0, e1;
static cudaStream_t st;

/* what one timed call does */
typedef struct job {
    int kind; /* 0 ours (ver / cl / sets), 1 dic_gemm, 2 cuBLASLt */
    int ver, cl, sets;
    int M, N, K;
    void *W, *S, *A, *C;
    uint8_t *q;
    float *sa;
    dic_ctx *c;
    dic_wmat wm;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    void *wsp;
    size_t wsz;
} job;

/* outputs of the lab variant just run (j->C) that differ from the product's wgmma dispatch on the same
 * inputs (every variant claims its bits: docs/kernels/gemm-prefill.md) */
static size_t vs_product(const job *j) {
    void *C2;
    const size_t n = (size_t)j->M * j->N;
    CK(cudaMalloc(&C2, n * 2));
    CK(dic_gemm_q_wgmma_launch(st, j->W, j->S, j->N, j->K, 128, 128, 128, j->M, j->q, dic_gemm_ldq(j->K), j->sa, NULL,
                               C2, j->N, 0));
    CK(cudaStreamSynchronize(st));
    uint16_t *h1 = malloc(n * 2), *h2 = malloc(n * 2);
    CK(cudaMemcpy(h1, j->C, n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2, C2, n * 2, cudaMemcpyDeviceToHost));
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) nd += h1[i] != h2[i];
    free(h1), free(h2), cudaFree(C2);
    return nd;
}

static int run_job(job *j) {
    if (j->kind == 0) {
        if (j->ver == 3)
            return lab_gemm_q_wgmma3_launch(st, j->W, j->S, j->N, j->K, 128, 128, j->M, j->q, dic_gemm_ldq(j->K), j->sa,
                                            NULL, j->C, j->N, j->cl, j->sets) == cudaSuccess;
        return lab_gemm_q_wgmma_launch(st, j->W, j->S, j->N, j->K, 128, 128, 128, j->M, j->q, dic_gemm_ldq(j->K), j->sa,
                                       NULL, j->C, j->N, j->ver) == cudaSuccess;
    }
    if (j->kind == 1) return dic_gemm(j->c, j->M, j->A, j->K, &j->wm, 128, NULL, j->C, j->N) == cudaSuccess;
    float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(j->lt, j->op, &alpha, j->W, j->la, j->q, j->lb, &beta, j->C, j->ld, j->C, j->ld, &j->algo,
                          j->wsp, j->wsz, st) == CUBLAS_STATUS_SUCCESS;
}

static double time_job(job *j) {
    for (int i = 0; i < 3; i++)
        if (!run_job(j)) return -1;
    CK(cudaStreamSynchronize(st));
    float t[REPS];
    for (int r = 0; r < REPS; r++) {
        CK(cudaEventRecord(e0, st));
        if (!run_job(j)) return -1;
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[r], e0, e1));
    }
    CK(cudaGetLastError());
    qsort(t, REPS, sizeof *t, cmpf);
    return t[REPS / 2];
}

/* cuBLASLt on the same bytes: D^T[N][M] (column-major) = W^T(K x N)^T * q(K x M); mode 1 per-tensor, 2 block-scaled */
static int lt_setup(job *j, int mode, float *sW, float *sA) {
    LTCK(cublasLtMatmulDescCreate(&j->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
    LTCK(cublasLtMatmulDescSetAttribute(j->op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA));
    LTCK(cublasLtMatmulDescSetAttribute(j->op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB));
    LTCK(cublasLtMatmulDescSetAttribute(j->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sW, sizeof sW));
    LTCK(cublasLtMatmulDescSetAttribute(j->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sA, sizeof sA));
    if (mode == 2) {
        cublasLtMatmulMatrixScale_t ma = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                                    mb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        if (cublasLtMatmulDescSetAttribute(j->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulDescSetAttribute(j->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb) != CUBLAS_STATUS_SUCCESS)
            return 0;
    }
    LTCK(cublasLtMatrixLayoutCreate(&j->la, CUDA_R_8F_E4M3, j->K, j->N, j->K));
    LTCK(cublasLtMatrixLayoutCreate(&j->lb, CUDA_R_8F_E4M3, j->K, j->M, dic_gemm_ldq(j->K)));
    LTCK(cublasLtMatrixLayoutCreate(&j->ld, CUDA_R_16BF, j->N, j->M, j->N));
    cublasLtMatmulPreference_t pref;
    LTCK(cublasLtMatmulPreferenceCreate(&pref));
    LTCK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &j->wsz, sizeof j->wsz));
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(j->lt, j->op, j->la, j->lb, j->ld, j->ld, pref, 1, &res, &nres);
    cublasLtMatmulPreferenceDestroy(pref);
    if (hs != CUBLAS_STATUS_SUCCESS || nres < 1) return 0;
    j->algo = res.algo;
    return 1;
}
static void lt_free(job *j) {
    cublasLtMatrixLayoutDestroy(j->la), cublasLtMatrixLayoutDestroy(j->lb), cublasLtMatrixLayoutDestroy(j->ld);
    cublasLtMatmulDescDestroy(j->op);
}

int main(int argc, char **argv) {
    static const char *allv[] = {"lt", "ltb", "v2", "c1s1", "c1s2", "c2s1", "c2s2", "dic"};
    const char **vs = argc > 1 ? (const char **)(argv + 1) : allv;
    const int nv = argc > 1 ? argc - 1 : (int)(sizeof allv / sizeof *allv);
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device: %s, %d SMs\n", p.name, p.multiProcessorCount);
    CK(cudaStreamCreate(&st));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    dic_ctx c = {0};
    c.stream = st;
    c.scratch_cap = (size_t)288 << 20;
    CK(cudaMalloc(&c.scratch, c.scratch_cap));
    c.num_sms = p.multiProcessorCount;
    c.batch_invariant = 0;
    cublasLtHandle_t lt;
    LTCK(cublasLtCreate(&lt));
    size_t wsz = (size_t)64 << 20;
    void *wsp;
    CK(cudaMalloc(&wsp, wsz));
    struct { const char *name; int M, N, K; } big[] = {
        {"4096^3", 4096, 4096, 4096},          {"8192^3", 8192, 8192, 8192},
        {"wo_a  M4096 8192x4096", 4096, 8192, 4096}, {"wo_b  M4096 4096x8192", 4096, 4096, 8192},
        {"shexp M4096 2048x4096", 4096, 2048, 4096}, {"wq_a  M4096 1024x4096", 4096, 1024, 4096},
        {"wq_b  M4096 32768x1024", 4096, 32768, 1024}, {"wo_b  M16384 4096x8192", 16384, 4096, 8192},
    };
    for (unsigned i = 0; i < sizeof big / sizeof *big; i++) {
        const int M = big[i].M, N = big[i].N, K = big[i].K;
        const double gfl = 2.0 * M * N * K / 1e9;
        job j;
        memset(&j, 0, sizeof j);
        j.M = M, j.N = N, j.K = K, j.c = &c, j.lt = lt, j.wsp = wsp, j.wsz = wsz;
        const size_t sb = (size_t)((N + 127) / 128) * (K / 128);
        CK(cudaMalloc(&j.W, (size_t)N * K));
        CK(cudaMalloc(&j.S, sb));
        CK(cudaMalloc(&j.A, (size_t)M * K * 2));
        CK(cudaMalloc(&j.C, (size_t)M * N * 2));
        fill_e4m3(j.W, (size_t)N * K, 21 + i);
        CK(cudaMemset(j.S, 127, sb));
        fill_bf16(j.A, (size_t)M * K, 22 + i);
        j.wm = (dic_wmat){2, N, K, 128, j.W, j.S};
        /* the kernels read the quantised rows after the scratch's e4m3 block; dic_gemm rewrites the same bytes */
        j.q = (uint8_t *)c.scratch;
        j.sa = (float *)(j.q + dic_gemm_qbytes(M, K));
        CK(dic_gemm_quant(st, M, j.A, K, K, 128, NULL, NULL, j.q, j.sa, NULL, 0));
        size_t ns = (size_t)((M > N ? M : N) + 127) * ((K + 127) / 128) + 16;
        float *one = malloc(ns * 4), *sW, *sA;
        for (size_t k = 0; k < ns; k++) one[k] = 1.0f;
        CK(cudaMalloc((void **)&sW, ns * 4));
        CK(cudaMalloc((void **)&sA, ns * 4));
        CK(cudaMemcpy(sW, one, ns * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(sA, one, ns * 4, cudaMemcpyHostToDevice));
        free(one);
        double tlt = -1;
        for (int v = 0; v < nv; v++) {
            const char *n = vs[v];
            double ms = -1;
            if (!strcmp(n, "lt") || !strcmp(n, "ltb")) {
                j.kind = 2;
                if (lt_setup(&j, n[2] ? 2 : 1, sW, sA)) ms = time_job(&j);
                lt_free(&j);
                if (!n[2]) tlt = ms;
            } else if (!strcmp(n, "dic")) {
                j.kind = 1;
                ms = time_job(&j);
                CK(dic_gemm_quant(st, M, j.A, K, K, 128, NULL, NULL, j.q, j.sa, NULL, 0));
            } else if (!strcmp(n, "v2") || !strcmp(n, "v1") || !strcmp(n, "v3")) {
                j.kind = 0, j.ver = n[1] == '3' ? 0 : n[1] - '0';
                ms = time_job(&j);
            } else if (n[0] == 'c' && strlen(n) == 4) {
                j.kind = 0, j.ver = 3, j.cl = n[1] - '0', j.sets = n[3] - '0';
                ms = time_job(&j);
            } else {
                fprintf(stderr, "unknown variant %s\n", n);
                continue;
            }
            CK(cudaStreamSynchronize(st));
            printf("%-24s %-5s %9.4f ms %8.1f TFLOP/s", big[i].name, n, ms, ms > 0 ? gfl / ms : 0.0);
            if (tlt > 0 && ms > 0) printf("  /Lt fp8 %.3f", tlt / ms);
            if (j.kind == 0) printf("  vs product: %zu differ", vs_product(&j));
            printf("\n");
            fflush(stdout);
        }
        cudaFree(j.W), cudaFree(j.S), cudaFree(j.A), cudaFree(j.C), cudaFree(sW), cudaFree(sA);
    }
    cudaFree(wsp), cudaFree(c.scratch);
    cublasLtDestroy(lt);
    return 0;
}
