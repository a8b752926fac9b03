/* attn_out_bench.c — the attention output projection at decode (V4-Flash: wo_a 8 groups of
 * 1024 x 4096 FP8B, wo_b 4096 x 8192 FP8, act_block 128; fast mode): CUDA-graph time per call of
 * dic_attn_out_gemm with the fusion off (the two launches: dic_gemm_blockdiag + dic_gemm) and on
 * (dic_attn_out.cu, one launch), at M = 1, 2, 4, 8 (M = 8 fused through dic_attn_out_tune(8)),
 * and the fused variants: pfl = wo_b L2 prefetch after phase 1, nopf = none, noef = no
 * evict_first on wo_a. Weights rotate over >= 256 MB of copies so L2 does not serve them; the
 * floor is the weight bytes at the d2d copy ceiling measured in the same run. Under 20 s. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_gemm_int.h"

#define GR 16 /* calls per graph */
#define G 8
#define R 1024
#define K 4096
#define D 4096
#define NSET 5 /* 5 x 67 MB */

typedef struct aset {
    dic_wmat wa[G], wb;
} aset;

static void fill(void *d, size_t bytes, unsigned seed) {
    unsigned char *h = malloc(bytes);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < bytes; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        unsigned char b = (unsigned char)s;
        h[i] = (b & 0x7F) == 0x7F ? (unsigned char)(b ^ 1) : b;
    }
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    free(h);
}

static cudaEvent_t e0, e1;

static double time_calls(dic_ctx *c, int M, const void *A, aset *s, uint16_t *Z, uint16_t *C) {
    for (int i = 0; i < 2; i++)
        CK(dic_attn_out_gemm(c, M, A, (size_t)G * K, G, s[i].wa, K, &s[i].wb, 128, Z, (size_t)G * R, C, D));
    CK(cudaStreamSynchronize(c->stream));
    cudaGraph_t gr;
    CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < GR; r++) {
        aset *a = &s[r % NSET];
        CK(dic_attn_out_gemm(c, M, A, (size_t)G * K, G, a->wa, K, &a->wb, 128, Z, (size_t)G * R, C, D));
    }
    CK(cudaStreamEndCapture(c->stream, &gr));
    return graph_median_ms(c->stream, gr, e0, e1) * 1e3 / GR;
}

int main(void) {
    dic_ctx c;
    bench_ctx_init(&c, (size_t)64 << 20);
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const double gbs = copy_ceiling_gbs(c.stream, e0, e1);
    const size_t ab = (size_t)R * K, asb = (size_t)(R / 128) * (K / 128);
    const size_t bb = (size_t)D * G * R, bsb = (size_t)(D / 128) * (G * R / 128);
    const double bytes = (double)G * (ab + asb) + (double)(bb + bsb);
    static aset s[NSET];
    void *w0a = NULL, *w0b = NULL;
    for (int i = 0; i < NSET; i++) {
        for (int g = 0; g < G; g++) {
            void *w, *sc;
            CK(cudaMalloc(&w, ab));
            CK(cudaMalloc(&sc, asb));
            if (!w0a) fill(w, ab, 11), w0a = w;
            else CK(cudaMemcpy(w, w0a, ab, cudaMemcpyDeviceToDevice));
            CK(cudaMemset(sc, 120, asb));
            s[i].wa[g] = (dic_wmat){DIC_WFMT_FP8B, R, K, 128, w, sc};
        }
        void *w, *sc;
        CK(cudaMalloc(&w, bb));
        CK(cudaMalloc(&sc, bsb));
        if (!w0b) fill(w, bb, 12), w0b = w;
        else CK(cudaMemcpy(w, w0b, bb, cudaMemcpyDeviceToDevice));
        CK(cudaMemset(sc, 121, bsb));
        s[i].wb = (dic_wmat){2, D, G * R, 128, w, sc};
    }
    uint16_t *A, *Z, *C;
    CK(cudaMalloc((void **)&A, (size_t)8 * G * K * 2));
    CK(cudaMalloc((void **)&Z, (size_t)8 * G * R * 2));
    CK(cudaMalloc((void **)&C, (size_t)8 * D * 2));
    {
        uint16_t *h = malloc((size_t)8 * G * K * 2);
        for (size_t i = 0; i < (size_t)8 * G * K; i++) h[i] = (uint16_t)(0x3C00 + (rnd() & 0x7F) + ((rnd() & 1) << 15));
        CK(cudaMemcpy(A, h, (size_t)8 * G * K * 2, cudaMemcpyHostToDevice));
        free(h);
    }
    const double floor_us = bytes / gbs / 1e3;
    printf("attn_out V4-Flash: wo_a %dx[%dx%d] FP8B + wo_b %dx%d FP8, %.1f MB per call, floor %.2f us at the copy ceiling; "
           "%d sets rotated (%.0f MB)\n", G, R, K, D, G * R, bytes / 1e6, floor_us, NSET, NSET * bytes / 1e6);
    static const int Ms[] = {1, 2, 4, 8};
    static const struct { const char *name; int on, flags; } vs[] = {
        {"2launch", 0, 0}, {"fused", 1, 0}, {"pfl", 1, 1}, {"nopf", 1, 2}, {"noef", 1, 4}};
    for (int mi = 0; mi < 4; mi++) {
        const int M = Ms[mi];
        printf("M=%d:", M);
        for (int v = 0; v < 5; v++) {
            dic_attn_out_enable(vs[v].on);
            dic_attn_out_tune(8, vs[v].flags);
            if (vs[v].on && !dic_attn_out_fusable(&c, M, A, (size_t)G * K, G, s[0].wa, K, &s[0].wb, 128, Z,
                                                  (size_t)G * R, D)) {
                printf(" %s n/a", vs[v].name);
                continue;
            }
            const double us = time_calls(&c, M, A, s, Z, C);
            printf(" %s %.2f us (%.2f of floor)", vs[v].name, us, floor_us / us);
        }
        printf("\n");
        fflush(stdout);
    }
    dic_attn_out_tune(0, 0);
    dic_attn_out_enable(1);
    return 0;
}
