/* gemm16_bench.c — the product's f16 wgmma FP8 GEMM (src/ops/cuda/dic_gemm_f16_wg.cu: k_gemm_dec's bits
 * at every M) on V4-Flash shapes with V4's 128-value and V4.1's 32-value activation blocks, at M = 1, 8,
 * 64, 65, 128, 1024, 4096, 8192:
 *  - bits: every output of dic_gemm_f16_wg (quantisation to slot-ordered f16, then the GEMM) at M rows against
 *    the same row computed alone by the product in fast mode (dic_gemm at M = 1: k_gemm_dec), bitwise,
 *    for the token tiles 128 and 64: "yes 0/total" or "no differ/total u<largest difference in fp32 ulp>"
 *    (a huge u: a NaN or an output never written, i.e. a layout or coverage bug; a few ulp: an order);
 *  - time (CUDA graph of GR calls, median of 10 replays, per call): dic_gemm_f16_wg from bf16 with token
 *    tiles 64 and 128, dic_gemm in fast mode and in batch-invariant mode (whatever each dispatches to
 *    at that M), in ms and TFLOP/s, and the ratios fast / candidate and invariant / candidate (> 1: the
 *    candidate, tile 128, is faster).
 * Usage: gemm16_bench [quick] (quick: M = 1, 65, 4096 only). Output fp32 (the bitwise check). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "io/numfmt.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_gemm_int.h"
#include "gemm16_diff.h"

typedef struct shape {
    const char *name;
    int N, K, act_block;
} shape;

/* V4-Flash shapes; each runs with act blocks 128 (V4) and 32 (V4.1) on the same data */
static const shape S[] = {
    {"wq_a N1024 K4096", 1024, 4096, 0},
    {"wq_b N32768 K1024", 32768, 1024, 0},
    {"wo_b N4096 K8192", 4096, 8192, 0},
    {"shexp N2048 K4096", 2048, 4096, 0},
};
#define MMAX 8192

static double nrm(void) { /* Box-Muller on the benches' xorshift */
    double u = (rnd() + 1.0) / 4294967297.0, v = (rnd() + 1.0) / 4294967297.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* one op under test */
typedef struct job {
    int kind; /* 0 dic_gemm_f16_wg tile 128, 1 tile 64, 2 dic_gemm fast, 3 invariant */
    int M;
    const shape *sh;
    dic_ctx *c;
    dic_wmat W;
    const uint16_t *A;
    float *C;
} job;

static cudaError_t run(const job *j) {
    const int N = j->sh->N, K = j->sh->K, ab = j->sh->act_block;
    if (j->kind >= 2) {
        j->c->batch_invariant = j->kind == 3;
        return dic_gemm(j->c, j->M, j->A, (size_t)K, &j->W, ab, j->C, NULL, (size_t)N);
    }
    return dic_gemm_f16_wg(j->c->stream, j->c->num_sms, &j->W, ab, j->M, j->A, (size_t)K, j->c->scratch,
                           j->c->scratch_cap, j->C, NULL, (size_t)N, j->kind == 1 ? 64 : 128);
}

static cudaEvent_t e0, e1;

/* ms per call; < 0 when the op refused the shape */
static double time_job(const job *j) {
    const int GR = j->M >= 1024 ? 2 : 10;
    cudaStream_t st = j->c->stream;
    if (run(j) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1.0;
    }
    CK(cudaStreamSynchronize(st));
    cudaGraph_t gr;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < GR; i++) CK(run(j));
    CK(cudaStreamEndCapture(st, &gr));
    return graph_median_ms(st, gr, e0, e1) / GR;
}

int main(int argc, char **argv) {
    static const int Ms_full[] = {1, 8, 64, 65, 128, 1024, 4096, 8192}, Ms_quick[] = {1, 65, 4096};
    const int quick = argc > 1 && !strcmp(argv[1], "quick");
    const int *Ms = quick ? Ms_quick : Ms_full, nM = quick ? 3 : 8;
    dic_ctx c;
    bench_ctx_init(&c, 256);
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    size_t scr = 0, maxn = 0, maxk = 0;
    for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
        for (int j = 0; j < nM; j++) {
            size_t b = dic_gemm_scratch(Ms[j], S[i].N, S[i].K);
            scr = b > scr ? b : scr;
        }
        maxn = (size_t)S[i].N > maxn ? (size_t)S[i].N : maxn;
        maxk = (size_t)S[i].K > maxk ? (size_t)S[i].K : maxk;
    }
    CK(cudaFree(c.scratch));
    c.scratch_cap = scr;
    CK(cudaMalloc(&c.scratch, scr));
    float *ref, *out, *out2;
    uint16_t *dA;
    unsigned long long *nd;
    CK(cudaMalloc((void **)&ref, (size_t)MMAX * maxn * 4));
    CK(cudaMalloc((void **)&out, (size_t)MMAX * maxn * 4));
    CK(cudaMalloc((void **)&out2, (size_t)MMAX * maxn * 4));
    CK(cudaMalloc((void **)&dA, (size_t)MMAX * maxk * 2));
    CK(cudaMalloc((void **)&nd, 2 * sizeof *nd));
    printf("gemm16_bench: bits = each of M rows vs the same row alone in dic_gemm fast mode (k_gemm_dec), fp32 out;\n"
           "time per call from a CUDA graph; ratio = other / candidate op (> 1: candidate faster)\n");
    for (size_t si = 0; si < sizeof S / sizeof *S; si++) {
        const shape *sh0 = &S[si];
        const int N = sh0->N, K = sh0->K;
        int kper;
        const int splits = dic_gemm_dec_splits(N, K, c.num_sms, &kper);
        const size_t wb = (size_t)N * K, sb = (size_t)((N + 127) / 128) * (K / 128);
        uint8_t *hw = malloc(wb), *hs = malloc(sb);
        for (size_t k = 0; k < wb; k++) hw[k] = di_f32_to_e4m3((float)nrm() * 64.0f); /* checkpoint-like */
        for (size_t k = 0; k < sb; k++) hs[k] = (uint8_t)(118 + rnd() % 9);
        uint16_t *ha = malloc((size_t)MMAX * K * 2);
        for (size_t k = 0; k < (size_t)MMAX * K; k++) ha[k] = di_f32_to_bf16((float)(nrm() * (rnd() % 251 ? 1.0 : 30.0)));
        void *dw;
        uint8_t *ds;
        CK(cudaMalloc(&dw, wb));
        CK(cudaMalloc((void **)&ds, sb));
        CK(cudaMemcpy(dw, hw, wb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(ds, hs, sb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dA, ha, (size_t)MMAX * K * 2, cudaMemcpyHostToDevice));
        free(hw), free(hs), free(ha);
        const dic_wmat W = {2, N, K, 128, dw, ds};
        for (int ai = 0; ai < 2; ai++) {
            shape shv = *sh0;
            shv.act_block = ai ? 32 : 128;
            const shape *sh = &shv;
            c.batch_invariant = 0; /* the reference: every row alone, fast mode (k_gemm_dec) */
            for (int r = 0; r < MMAX; r++)
                CK(dic_gemm(&c, 1, dA + (size_t)r * K, (size_t)K, &W, sh->act_block, ref + (size_t)r * N, NULL, (size_t)N));
            CK(cudaStreamSynchronize(c.stream));
            printf("\n== %s %s act %d  (split-K %d x %d k, as d_splits)\n", ai ? "V4.1" : "V4", sh->name, sh->act_block,
                   splits, kper);
            printf("%5s | %-30s | %-30s | %8s | %8s %6s | %8s %6s | %8s %6s | %6s %6s\n", "M", "bits==k_gemm_dec tn128",
                   "bits==k_gemm_dec tn64", "tn64 ms", "op ms", "TF/s", "fast ms", "TF/s", "inv ms", "TF/s", "fast/c",
                   "inv/c");
            for (int mi = 0; mi < nM; mi++) {
                const int M = Ms[mi];
                const size_t n = (size_t)M * N;
                const double fl = 2.0 * M * N * (double)K;
                job j = {0, M, sh, &c, W, dA, out};
                char bits[2][64];
                for (int v = 0; v < 2; v++) {
                    j.kind = v, j.C = v ? out2 : out;
                    CK(cudaMemsetAsync(j.C, 0xFF, n * 4, c.stream));
                    cudaError_t e = run(&j);
                    if (e != cudaSuccess) {
                        (void)cudaGetLastError();
                        snprintf(bits[v], sizeof bits[v], "err %s", cudaGetErrorName(e));
                        continue;
                    }
                    CK(g16_count_diff(c.stream, (const uint32_t *)j.C, (const uint32_t *)ref, n, nd));
                    unsigned long long h[2] = {0, 0};
                    CK(cudaMemcpyAsync(h, nd, sizeof h, cudaMemcpyDeviceToHost, c.stream));
                    CK(cudaStreamSynchronize(c.stream));
                    if (h[0]) snprintf(bits[v], sizeof bits[v], "no %llu/%zu u%llu", h[0], n, h[1]);
                    else snprintf(bits[v], sizeof bits[v], "yes 0/%zu", n);
                }
                j.C = out;
                double t[4];
                for (int k = 0; k < 4; k++) {
                    j.kind = k;
                    t[k] = time_job(&j);
                }
                printf("%5d | %-30s | %-30s | %8.4f | %8.4f %6.1f | %8.4f %6.1f | %8.4f %6.1f | %6.2f %6.2f\n", M, bits[0],
                       bits[1], t[1], t[0], t[0] > 0 ? fl / t[0] / 1e9 : 0.0, t[2], t[2] > 0 ? fl / t[2] / 1e9 : 0.0,
                       t[3], t[3] > 0 ? fl / t[3] / 1e9 : 0.0, t[0] > 0 ? t[2] / t[0] : 0.0, t[0] > 0 ? t[3] / t[0] : 0.0);
                fflush(stdout);
            }
        } /* act blocks */
        cudaFree(dw), cudaFree(ds);
    }
    c.batch_invariant = 0;
    cudaFree(ref), cudaFree(out), cudaFree(out2), cudaFree(dA), cudaFree(nd);
    cudaFree(c.scratch);
    cudaStreamDestroy(c.stream);
    return 0;
}
