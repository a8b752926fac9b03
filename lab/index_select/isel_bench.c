/*
 * lab/index_select/isel_bench.c — the indexer's selection at decode (ops.h di_index_select;
 * src/ops/cuda/dic_index_select.cu; docs/kernels/index-select.md): 64 heads x 128, top-512, at 1024 keys
 * (ctx 4096, ratio 4) and 8192 keys (ctx 32768), M = 1, 2, 8: the two kernels (scores, then one CTA per
 * row selects: what batch-invariant mode runs) and the one launch (k_isel_dec: the fast mode's decode
 * path), the same selection bitwise, and both against the CPU op (di_index_select: the selection
 * and its count bitwise). Times: the median of 10 replays of a CUDA graph
 * of 20 calls, per call; floor: the keys and q at the d2d copy ceiling measured here. Exit status 1 when
 * the selections differ.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

#define REPS 20

static int g_bad;

static cudaStream_t st;
static cudaEvent_t e0, e1;

static uint16_t *g_keep; /* dev_rand: the host copy of the last draw (the CPU reference) */

static void *dev_rand(size_t n16, uint64_t *s) { /* n16 bf16 values in [-1, 1) */
    uint16_t *h = malloc(n16 * 2);
    for (size_t i = 0; i < n16; i++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        float f = (float)((double)(*s >> 11) * 0x1.0p-52 - 1.0);
        uint32_t u;
        memcpy(&u, &f, 4);
        h[i] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    }
    void *d;
    CK(cudaMalloc(&d, n16 * 2));
    CK(cudaMemcpy(d, h, n16 * 2, cudaMemcpyHostToDevice));
    g_keep = h;
    return d;
}
static void *dev_copy(const void *h, size_t b) {
    void *d;
    CK(cudaMalloc(&d, b));
    CK(cudaMemcpy(d, h, b, cudaMemcpyHostToDevice));
    return d;
}

/* index_select at decode: M rows, nk visible keys each (page 64), stride as the model's max_context / 4 + 16 */
static void isel_rows(const dic_ctx *c, int M, int nk, double copy_gbs) {
    uint64_t s = 0x1234567ull + (uint64_t)nk;
    const int nh = 64, K = 512, pr = 64;
    size_t lds = (size_t)nk + 22;
    int64_t nv[16], kc[16];
    int prs[16];
    uint16_t **pt[16], **hpt[16];
    int np = (nk + pr - 1) / pr;
    for (int m = 0; m < M; m++) {
        nv[m] = nk, kc[m] = nk, prs[m] = pr;
        uint16_t *pool = dev_rand((size_t)np * pr * 128, &s), **h = malloc((size_t)np * sizeof *h);
        hpt[m] = malloc((size_t)np * sizeof *hpt[m]);
        for (int i = 0; i < np; i++) h[i] = pool + (size_t)i * pr * 128, hpt[m][i] = g_keep + (size_t)i * pr * 128;
        pt[m] = dev_copy(h, (size_t)np * sizeof *h);
        free(h);
    }
    float *hw = malloc((size_t)M * nh * 4);
    for (int i = 0; i < M * nh; i++) hw[i] = 0.01f * (float)((i * 37) % 50) - 0.2f;
    di_index_select_args a = {0};
    a.M = M, a.nh = nh, a.q = dev_rand((size_t)M * nh * 128, &s), a.w = dev_copy(hw, (size_t)M * nh * 4);
    const uint16_t *hq = g_keep;
    a.kpages = dev_copy(pt, (size_t)M * sizeof pt[0]), a.page_rows = dev_copy(prs, (size_t)M * 4);
    a.nvis = dev_copy(nv, (size_t)M * 8), a.kcap = dev_copy(kc, (size_t)M * 8);
    a.K = K, a.sort_sel = 0, a.bs = 64, a.KB = 16;
    CK(cudaMalloc((void **)&a.topk, (size_t)M * K * 4));
    CK(cudaMalloc((void **)&a.ntopk, (size_t)M * 4));
    a.iscore_stride = lds;
    double fl = ((double)M * nk * 256 + (double)M * nh * 256) / (copy_gbs * 1e9) * 1e6;
    double t[2];
    int *sel[2];
    dic_ctx cv = *c;
    for (int v = 0; v < 2; v++) {
        dic_index_select_one_launch(v); /* v = 0: the two kernels, 1: the one launch (both modes) */
        CK(dic_index_select(&cv, &a));
        CK(cudaStreamSynchronize(st));
        cudaGraph_t gr;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int r = 0; r < REPS; r++) CK(dic_index_select(&cv, &a));
        CK(cudaStreamEndCapture(st, &gr));
        t[v] = graph_median_ms(st, gr, e0, e1) * 1e3 / REPS;
        sel[v] = malloc((size_t)M * K * 4);
        CK(cudaMemcpy(sel[v], a.topk, (size_t)M * K * 4, cudaMemcpyDeviceToHost));
    }
    int same = memcmp(sel[0], sel[1], (size_t)M * K * 4) == 0;
    { /* the CPU op: the first ntopk entries of each row bitwise, the device's -1 after them */
        int *ct = malloc((size_t)M * K * 4), cn[16], gn[16];
        const int nscr = 16;
        float *isc = malloc((size_t)nscr * lds * 4);
        di_index_select_args h = {0};
        h.M = M, h.nh = nh, h.q = hq, h.w = hw, h.kpages = hpt, h.page_rows = prs, h.nvis = nv, h.kcap = kc;
        h.K = K, h.sort_sel = 0, h.bs = 64, h.KB = 16, h.topk = ct, h.ntopk = cn;
        h.iscore = isc, h.iscore_stride = lds, h.nscratch = nscr;
        di_exec x;
        if (di_exec_init(&x, 0, NULL) != DEEPINFER_OK) exit(1);
        di_index_select(&x, &h);
        di_exec_free(&x);
        CK(cudaMemcpy(gn, a.ntopk, (size_t)M * 4, cudaMemcpyDeviceToHost));
        int ok = 1;
        for (int m = 0; m < M; m++) {
            ok &= gn[m] == cn[m];
            const int n = cn[m] < K ? cn[m] : K;
            for (int i = 0; i < K; i++)
                ok &= i < n ? sel[1][(size_t)m * K + i] == ct[(size_t)m * K + i] : sel[1][(size_t)m * K + i] == -1;
        }
        printf("    CPU check M=%d keys %d: %s\n", M, nk, ok ? "the selection bitwise" : "MISMATCH");
        same &= ok;
        free(ct), free(isc);
    }
    printf("%-3d isel %5dk %10.2f %10.2f %7.2fx %10.3f %7.1fx  (v0 two kernels, v1 one launch; bitwise the same selection: %s)\n", M,
           nk, t[0], t[1], t[0] / t[1], fl, t[1] / fl, same ? "yes" : "NO");
    g_bad += !same;
    free(sel[0]), free(sel[1]), free(hw);
}

int main(void) {
    CK(cudaStreamCreate(&st));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double copy_gbs = copy_ceiling_gbs(st, e0, e1);
    dic_ctx c = {0};
    c.stream = st;
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&c.num_sms, cudaDevAttrMultiProcessorCount, dev));
    c.scratch_cap = (size_t)64 << 20;
    CK(cudaMalloc(&c.scratch, c.scratch_cap));
    printf("index_select: M, keys per row, v0 us, v1 us, speed-up, floor (keys + q at the copy ceiling), v1 x floor\n");
    isel_rows(&c, 1, 1024, copy_gbs);
    isel_rows(&c, 1, 8192, copy_gbs);
    isel_rows(&c, 2, 1024, copy_gbs);
    isel_rows(&c, 8, 1024, copy_gbs);
    isel_rows(&c, 8, 8192, copy_gbs);
    CK(cudaGetLastError());
    return g_bad != 0;
}
