/* attn_bench.c — GPU bench of the sparse-attention decode (64 heads x 512,
 * 128 window + 512 selected rows per query) at batch 1/64/256, and of the
 * lightning indexer (scores + top-512) over 8K/32K keys. CUDA events,
 * warm-up, median of repeats. KV GB/s counts each row's KV bytes once per
 * query row, against a device-to-device copy measured here (read + write).
 * Compact table last. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/numfmt.h"
#include "ops/cuda/dic.h"

#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static uint64_t rs = 0x243F6A8885A308D3ull;
static float urand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((double)(rs >> 11) * 0x1.0p-52 - 1.0);
}
static void *dev_rand_bf16(size_t n, float amp) {
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = di_f32_to_bf16(amp * urand());
    void *d;
    CK(cudaMalloc(&d, n * 2));
    CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
    return d;
}
static int cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef void (*bench_fn)(void *);
/* median milliseconds of `reps` timed calls after `warm` untimed ones */
static float time_ms(bench_fn f, void *arg, cudaStream_t st, int warm, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < warm; i++) f(arg);
    CK(cudaStreamSynchronize(st));
    float t[64];
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a, st));
        f(arg);
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&t[i], a, b));
    }
    qsort(t, (size_t)reps, sizeof t[0], cmpf);
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return t[reps / 2];
}

typedef struct {
    cudaStream_t st;
    void *dst, *src;
    size_t bytes;
} copy_arg;
static void run_copy(void *p) {
    copy_arg *c = p;
    CK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, c->st));
}

typedef struct {
    dic_ctx *c;
    int M, nh, hd, n;
    const uint16_t *q;
    const uint16_t *const *kv;
    const int *nidx;
    const float *sink;
    uint16_t *out;
} attn_arg;
static void run_attn(void *p) {
    attn_arg *a = p;
    CK(dic_sparse_attn(a->c, a->M, a->q, (size_t)a->nh * a->hd, a->nh, a->hd, a->kv, (size_t)a->n, a->nidx, a->sink,
                       0.04419417f, a->out, (size_t)a->nh * a->hd));
}

typedef struct {
    dic_ctx *c;
    int M, nh, nkeys, topk;
    const uint16_t *q, *k;
    const float *w;
    const int64_t *key0;
    const int *nk;
    float *score;
    int *idx, *cnt;
} idx_arg;
static void run_idx(void *p) {
    idx_arg *a = p;
    CK(dic_index_scores(a->c, a->M, a->q, (size_t)a->nh * 128, a->nh, a->w, a->k, 128, a->key0, a->nk, a->nkeys,
                        a->score, (size_t)a->nkeys));
    CK(dic_topk_desc(a->c, a->M, a->score, (size_t)a->nkeys, a->nk, a->topk, a->idx, a->cnt));
}

int main(void) {
    dic_ctx c = {0};
    CK(cudaStreamCreate(&c.stream));
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&c.num_sms, cudaDevAttrMultiProcessorCount, dev));
    char lines[16][160];
    int nl = 0;

    /* copy ceiling: 1 GiB device-to-device */
    copy_arg ca = {c.stream, NULL, NULL, (size_t)1 << 30};
    CK(cudaMalloc(&ca.dst, ca.bytes));
    CK(cudaMalloc(&ca.src, ca.bytes));
    CK(cudaMemset(ca.src, 0x3C, ca.bytes));
    float tcopy = time_ms(run_copy, &ca, c.stream, 3, 15);
    double copy_gbs = 2.0 * (double)ca.bytes / (tcopy * 1e-3) / 1e9;
    CK(cudaFree(ca.dst));
    CK(cudaFree(ca.src));
    snprintf(lines[nl++], 160, "d2d copy 1 GiB: %.3f ms, %.0f GB/s (read + write)", tcopy, copy_gbs);

    /* sparse attention decode: each query row has its own 640 KV rows */
    const int NH = 64, HD = 512, NE = 640;
    const int batches[3] = {1, 64, 256};
    for (int bi = 0; bi < 3; bi++) {
        int M = batches[bi];
        size_t rows = (size_t)M * NE;
        uint16_t *pool = dev_rand_bf16(rows * HD, 1.0f), *q = dev_rand_bf16((size_t)M * NH * HD, 1.0f);
        const uint16_t **hp = malloc(rows * sizeof *hp);
        for (size_t i = 0; i < rows; i++) { /* 128 window rows in order, 512 "selected" rows shuffled */
            size_t m = i / NE, j = i % NE;
            size_t r = j < 128 ? j : 128 + (j * 2654435761u) % 512;
            hp[i] = pool + (m * NE + r) * HD;
        }
        const uint16_t **dkv;
        CK(cudaMalloc((void **)&dkv, rows * sizeof *dkv));
        CK(cudaMemcpy(dkv, hp, rows * sizeof *dkv, cudaMemcpyHostToDevice));
        int *hn = malloc((size_t)M * 4), *dn;
        for (int m = 0; m < M; m++) hn[m] = NE;
        CK(cudaMalloc((void **)&dn, (size_t)M * 4));
        CK(cudaMemcpy(dn, hn, (size_t)M * 4, cudaMemcpyHostToDevice));
        float hs[64], *ds;
        for (int h = 0; h < NH; h++) hs[h] = urand();
        CK(cudaMalloc((void **)&ds, sizeof hs));
        CK(cudaMemcpy(ds, hs, sizeof hs, cudaMemcpyHostToDevice));
        uint16_t *out;
        CK(cudaMalloc((void **)&out, (size_t)M * NH * HD * 2));
        dic_ctx ca2 = c; /* with scratch: the three-phase kernels */
        ca2.scratch_cap = dic_sparse_attn_scratch(M, NH, NE);
        CK(cudaMalloc(&ca2.scratch, ca2.scratch_cap));
        attn_arg aa = {&ca2, M, NH, HD, NE, q, dkv, dn, ds, out};
        float t = time_ms(run_attn, &aa, c.stream, 3, 15);
        double kvb = (double)rows * HD * 2, fma = 2.0 * (double)rows * NH * HD;
        snprintf(lines[nl++], 160, "sparse_attn B=%-3d 64x512, 640 rows: %8.3f ms  KV %6.0f GB/s (%4.1f%% of copy)  %5.2f TFMA/s",
                 M, t, kvb / (t * 1e-3) / 1e9, 100.0 * kvb / (t * 1e-3) / 1e9 / copy_gbs, fma / (t * 1e-3) / 1e12);
        attn_arg af = {&c, M, NH, HD, NE, q, dkv, dn, ds, out}; /* no scratch: the fused kernel */
        float tf = time_ms(run_attn, &af, c.stream, 2, 9);
        snprintf(lines[nl++], 160, "  (fused fallback, no scratch: %8.3f ms)", tf);
        CK(cudaFree(ca2.scratch));
        CK(cudaFree(pool)); CK(cudaFree(q)); CK(cudaFree((void *)dkv)); CK(cudaFree(dn)); CK(cudaFree(ds)); CK(cudaFree(out));
        free(hp); free(hn);
    }

    /* indexer: scores (64 heads x 128) + top-512 */
    const int keys[2] = {8192, 32768}, ib[2] = {1, 64};
    for (int ki = 0; ki < 2; ki++)
        for (int b = 0; b < 2; b++) {
            int M = ib[b], NK = keys[ki], IH = 64;
            uint16_t *k = dev_rand_bf16((size_t)NK * 128, 1.0f), *q = dev_rand_bf16((size_t)M * IH * 128, 1.0f);
            float *hw = malloc((size_t)M * IH * 4), *dw;
            for (int i = 0; i < M * IH; i++) hw[i] = di_bf16_to_f32(di_f32_to_bf16(0.2f * urand()));
            CK(cudaMalloc((void **)&dw, (size_t)M * IH * 4));
            CK(cudaMemcpy(dw, hw, (size_t)M * IH * 4, cudaMemcpyHostToDevice));
            int64_t *hk0 = calloc((size_t)M, 8), *dk0;
            int *hnk = malloc((size_t)M * 4), *dnk, *didx, *dcnt;
            for (int m = 0; m < M; m++) hnk[m] = NK;
            CK(cudaMalloc((void **)&dk0, (size_t)M * 8));
            CK(cudaMemcpy(dk0, hk0, (size_t)M * 8, cudaMemcpyHostToDevice));
            CK(cudaMalloc((void **)&dnk, (size_t)M * 4));
            CK(cudaMemcpy(dnk, hnk, (size_t)M * 4, cudaMemcpyHostToDevice));
            float *dsc;
            CK(cudaMalloc((void **)&dsc, (size_t)M * NK * 4));
            CK(cudaMalloc((void **)&didx, (size_t)M * 512 * 4));
            CK(cudaMalloc((void **)&dcnt, (size_t)M * 4));
            idx_arg ia = {&c, M, IH, NK, 512, q, k, dw, dk0, dnk, dsc, didx, dcnt};
            float t = time_ms(run_idx, &ia, c.stream, 3, 15);
            /* the top-k alone */
            idx_arg it = ia;
            float ts;
            {
                cudaEvent_t a, e;
                CK(cudaEventCreate(&a));
                CK(cudaEventCreate(&e));
                float tt[15];
                for (int r = 0; r < 15; r++) {
                    CK(cudaEventRecord(a, c.stream));
                    CK(dic_topk_desc(it.c, M, dsc, (size_t)NK, dnk, 512, didx, dcnt));
                    CK(cudaEventRecord(e, c.stream));
                    CK(cudaEventSynchronize(e));
                    CK(cudaEventElapsedTime(&tt[r], a, e));
                }
                qsort(tt, 15, sizeof tt[0], cmpf);
                ts = tt[7];
                CK(cudaEventDestroy(a));
                CK(cudaEventDestroy(e));
            }
            double fma = (double)M * NK * IH * 128;
            snprintf(lines[nl++], 160, "indexer B=%-3d %5d keys, 64 heads: scores+top512 %8.3f ms (top-k %.3f ms)  %5.2f TFMA/s",
                     M, NK, t, ts, fma / ((t - ts) * 1e-3) / 1e12);
            CK(cudaFree(k)); CK(cudaFree(q)); CK(cudaFree(dw)); CK(cudaFree(dk0)); CK(cudaFree(dnk)); CK(cudaFree(dsc));
            CK(cudaFree(didx)); CK(cudaFree(dcnt));
            free(hw); free(hk0); free(hnk);
        }

    printf("attn_bench (median of 15, CUDA events)\n");
    for (int i = 0; i < nl; i++) printf("  %s\n", lines[i]);
    return 0;
}
