/*
 * swapab_bench.c — the swap-AB wgmma e4m3 decode GEMV draft (swapab_dec.cu) against the product:
 * bits against the v3 prefill kernel (dic_gemm_q_wgmma_launch on the same quantised activations: the
 * draft claims v3's bits), and CUDA-graph time per call against dic_gemm in fast mode (k_gemm_dec at
 * M <= 8, k_gemm_f16 above; its own quantisation included) and in batch-invariant mode, on V4-Flash
 * decode shapes at M = 1 .. 64. Rows: shape, M, bitwise vs v3 (differing / total, max ulp); the split
 * variant (kg = 512: K groups on separate CTAs, added in order) bitwise vs v3 run on each 512-k slice of
 * W, q and the scales with the slices' results added in order on the host (its claimed bits); then µs:
 * draft kernel alone, split variant (both launches), draft + dic_gemm_quant, dic_gemm fast, dic_gemm
 * batch-invariant.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "io/numfmt.h"
#include "ops/cuda/dic_gemm_int.h"
#include "swapab_lab.h"

#define REPS 20

static double nrm(void) {
    double u = (rnd() + 1.0) / 4294967297.0, v = (rnd() + 1.0) / 4294967297.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static int64_t ord(float f) {
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

typedef struct job {
    dic_ctx *c;
    int M, which; /* 0 draft, 1 quant + draft, 2 dic_gemm fast, 3 dic_gemm invariant, 4 split draft */
    const dic_wmat *W;
    const uint16_t *A;
    uint8_t *q;
    float *sa, *C;
    sab_args s;
    float *part;
} job;

static cudaError_t run(job *j) {
    switch (j->which) {
    case 0: return lab_sab_launch(j->c->stream, &j->s);
    case 4: {
        sab_args s = j->s;
        s.kg = 512, s.part = j->part;
        return lab_sab_launch(j->c->stream, &s);
    }
    case 1: {
        cudaError_t e = dic_gemm_quant(j->c->stream, j->M, j->A, (size_t)j->W->k, j->W->k, 128, NULL, NULL, j->q, j->sa,
                                       NULL, 0);
        return e != cudaSuccess ? e : lab_sab_launch(j->c->stream, &j->s);
    }
    default:
        j->c->batch_invariant = j->which == 3;
        return dic_gemm(j->c, j->M, j->A, (size_t)j->W->k, j->W, 128, j->C, NULL, (size_t)j->W->n);
    }
}

static double time_us(job *j, cudaEvent_t e0, cudaEvent_t e1) {
    cudaStream_t st = j->c->stream;
    if (run(j) != cudaSuccess) return -1;
    CK(cudaStreamSynchronize(st));
    cudaGraph_t gr;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < REPS; r++)
        if (run(j) != cudaSuccess) break;
    CK(cudaStreamEndCapture(st, &gr));
    return graph_median_ms(st, gr, e0, e1) * 1e3 / REPS;
}

int main(void) {
    static const struct { const char *name; int N, K; } S[] = {
        {"wq_a 1024 x 4096", 1024, 4096}, {"wkv 512 x 4096", 512, 4096},    {"shexp 2048 x 4096", 2048, 4096},
        {"wq_b 32768 x 1024", 32768, 1024}, {"wo_b 4096 x 8192", 4096, 8192},
    };
    static const int Ms[] = {1, 2, 4, 8, 16, 32, 64};
    dic_ctx c;
    bench_ctx_init(&c, 256);
    CK(cudaFree(c.scratch));
    c.scratch_cap = dic_gemm_scratch(64, 32768, 8192);
    CK(cudaMalloc(&c.scratch, c.scratch_cap));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    printf("%-20s %3s %-4s %21s %8s %-5s %8s | %9s %9s %9s %9s %9s  (us per call, CUDA graph)\n", "shape", "M", "=v3",
           "differ/total", "max ulp", "split", "max ulp", "draft", "split", "q+draft", "fast", "invar");
    for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
        const int N = S[i].N, K = S[i].K;
        const size_t sb = (size_t)((N + 127) / 128) * (K / 128);
        uint8_t *hw = malloc((size_t)N * K), *hs = malloc(sb);
        for (size_t k = 0; k < (size_t)N * K; k++) hw[k] = di_f32_to_e4m3((float)nrm() * 64.0f);
        for (size_t k = 0; k < sb; k++) hs[k] = (uint8_t)(118 + rnd() % 9);
        uint16_t *ha = malloc((size_t)64 * K * 2);
        for (size_t k = 0; k < (size_t)64 * K; k++) ha[k] = di_f32_to_bf16((float)nrm());
        uint8_t *dw, *ds, *q;
        uint16_t *da;
        float *sa, *cv3, *csab, *cg, *part, *cgrp, *sag;
        uint8_t *wg, *wsg;
        const int G = K / 512, nrb = (N + 127) / 128;
        CK(cudaMalloc((void **)&part, (size_t)G * 64 * N * 4));
        CK(cudaMalloc((void **)&cgrp, (size_t)64 * N * 4));
        CK(cudaMalloc((void **)&sag, (size_t)64 * 4 * 4));
        CK(cudaMalloc((void **)&wg, (size_t)N * 512));
        CK(cudaMalloc((void **)&wsg, (size_t)nrb * 4));
        CK(cudaMalloc((void **)&dw, (size_t)N * K));
        CK(cudaMalloc((void **)&ds, sb));
        CK(cudaMalloc((void **)&da, (size_t)64 * K * 2));
        CK(cudaMalloc((void **)&q, dic_gemm_qbytes(64, K)));
        CK(cudaMalloc((void **)&sa, (size_t)64 * (K / 128) * 4));
        CK(cudaMalloc((void **)&cv3, (size_t)64 * N * 4));
        CK(cudaMalloc((void **)&csab, (size_t)64 * N * 4));
        CK(cudaMalloc((void **)&cg, (size_t)64 * N * 4));
        CK(cudaMemcpy(dw, hw, (size_t)N * K, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(ds, hs, sb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(da, ha, (size_t)64 * K * 2, cudaMemcpyHostToDevice));
        const dic_wmat W = {2, N, K, 128, dw, ds};
        float *h1 = malloc((size_t)64 * N * 4), *h2 = malloc((size_t)64 * N * 4), *hg = malloc((size_t)64 * N * 4),
              *href = malloc((size_t)64 * N * 4);
        for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++) {
            const int M = Ms[mi];
            CK(dic_gemm_quant(c.stream, M, da, (size_t)K, K, 128, NULL, NULL, q, sa, NULL, 0));
            CK(cudaMemsetAsync(cv3, 0xFF, (size_t)M * N * 4, c.stream));
            CK(cudaMemsetAsync(csab, 0xFF, (size_t)M * N * 4, c.stream));
            CK(dic_gemm_q_wgmma_launch(c.stream, dw, ds, N, K, 128, 128, 128, M, q, dic_gemm_ldq(K), sa, cv3, NULL,
                                       (size_t)N, 0));
            sab_args s = {N, K, M, 128, 128, K / 128, K / 128, dw, ds, q, dic_gemm_ldq(K), sa, csab, (size_t)N, 0, NULL};
            cudaError_t e = lab_sab_launch(c.stream, &s);
            if (e == cudaSuccess) e = cudaStreamSynchronize(c.stream);
            if (e != cudaSuccess) {
                printf("%-20s %3d draft failed: %s\n", S[i].name, M, cudaGetErrorString(e));
                return 1;
            }
            CK(cudaMemcpy(h1, csab, (size_t)M * N * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(h2, cv3, (size_t)M * N * 4, cudaMemcpyDeviceToHost));
            size_t diff = 0, gdiff = 0;
            int64_t ulp = 0, gulp = 0;
            for (size_t k = 0; k < (size_t)M * N; k++) {
                diff += memcmp(&h1[k], &h2[k], 4) != 0;
                int64_t d = ord(h1[k]) - ord(h2[k]);
                d = d < 0 ? -d : d;
                ulp = d > ulp ? d : ulp;
            }
            /* the split variant's claimed bits: v3 on each 512-k slice, the slices added in order */
            for (int gi = 0; gi < G; gi++) {
                CK(cudaMemcpy2D(wg, 512, dw + (size_t)gi * 512, (size_t)K, 512, (size_t)N, cudaMemcpyDeviceToDevice));
                CK(cudaMemcpy2D(wsg, 4, ds + (size_t)gi * 4, (size_t)(K / 128), 4, (size_t)nrb, cudaMemcpyDeviceToDevice));
                CK(cudaMemcpy2D(sag, 16, sa + (size_t)gi * 4, (size_t)(K / 128) * 4, 16, (size_t)M, cudaMemcpyDeviceToDevice));
                CK(dic_gemm_q_wgmma_launch(c.stream, wg, wsg, N, 512, 128, 128, 128, M, q + (size_t)gi * 512,
                                           dic_gemm_ldq(K), sag, cgrp, NULL, (size_t)N, 0));
                CK(cudaMemcpy(hg, cgrp, (size_t)M * N * 4, cudaMemcpyDeviceToHost));
                for (size_t k = 0; k < (size_t)M * N; k++) href[k] = gi ? href[k] + hg[k] : hg[k];
            }
            s.kg = 512, s.part = part;
            CK(lab_sab_launch(c.stream, &s));
            CK(cudaMemcpy(h1, csab, (size_t)M * N * 4, cudaMemcpyDeviceToHost));
            s.kg = 0, s.part = NULL;
            for (size_t k = 0; k < (size_t)M * N; k++) {
                gdiff += memcmp(&h1[k], &href[k], 4) != 0;
                int64_t d = ord(h1[k]) - ord(href[k]);
                d = d < 0 ? -d : d;
                gulp = d > gulp ? d : gulp;
            }
            double t[5];
            for (int w = 0; w < 5; w++) {
                job j = {&c, M, w, &W, da, q, sa, cg, s, part};
                t[w] = time_us(&j, e0, e1);
            }
            printf("%-20s %3d %-4s %9zu/%-11zu %8lld %-5s %8lld | %9.2f %9.2f %9.2f %9.2f %9.2f\n", S[i].name, M,
                   diff ? "no" : "yes", diff, (size_t)M * N, (long long)ulp, gdiff ? "no" : "yes", (long long)gulp, t[0],
                   t[4], t[1], t[2], t[3]);
        }
        free(hw), free(hs), free(ha), free(h1), free(h2), free(hg), free(href);
        cudaFree(dw), cudaFree(ds), cudaFree(da), cudaFree(q), cudaFree(sa), cudaFree(cv3), cudaFree(csab), cudaFree(cg);
        cudaFree(part), cudaFree(cgrp), cudaFree(sag), cudaFree(wg), cudaFree(wsg);
    }
    return 0;
}
