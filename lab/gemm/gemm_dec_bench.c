/* gemm_dec_bench.c — FP8 / FP4 decode GEMM at decode sizes (M = 1, 8; fast mode) on the V4-Flash
 * shapes: CUDA-graph time per call (activation quantisation included), GB/s of weight bytes and the
 * ratio to the d2d copy ceiling measured in the same run; each variant's output against the product's
 * dic_gemm ("=": bitwise equal, "!=" differs: expected only for the diagnostics and sN). The variants
 * run the lab's copy of the decode kernel (gemm_dec_variants.cu, lab_gemm_dec_*; docs/kernels/
 * gemm-decode.md), "old" the product's k_gemm_f16 fallback (dic_gemm_dec_mode(2)). The variants
 * (lab_gemm_dec_config): old = quantisation launch + k_gemm_f16; dec = the default (fused or dec+q
 * by dic_gemm_dec_fused); fused = k_gemm_dec quantising its own rows (one launch); dec+q =
 * quantisation launch + k_gemm_dec; stN = ring stages, sN = split count, both on "fused" (s1: no
 * split-K fold; other counts than the default give other bits; a k range over 2048 per CTA falls
 * back to "old"). Round 2 (lab_gemm_dec_tune, all on "fused" unless named): qv2 = the 8-per-thread
 * quantisation (same bits), et = early PDL trigger (same bits), wpost = weights only after the wait
 * (same bits), cpsN = at most N CTAs per SM (same bits); diagnostics with wrong outputs: noq = no
 * activation pass, nocl = no cluster / no split fold, bare = exit after the wait (launch + weight
 * prefetch + handoff), bare0 = bare without weight loads, empty = bare0 without clusters; l2pf = L2
 * prefetch of the weights past the ring (same bits); persN = persistent grid of N CTAs per SM walking
 * column tiles (same bits), persNl2 = with l2pf; all2 = qv2 + et + pers2 + l2pf.
 * Then dic_gemm_multi (wq_a + wkv, shared expert w1 + w3 from one activation) against the calls. Weights rotate over >= 256 MB so L2 does
 * not serve them. Usage: gemm_dec_bench [quick] */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_gemm_int.h"
#include "gemm_lab.h"

#define GR 32 /* calls per graph */

static void fill_w(void *d, size_t bytes, unsigned seed) {
    unsigned char *h = malloc(bytes);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < bytes; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        unsigned char b = (unsigned char)s;
        h[i] = (b & 0x7F) == 0x7F ? (unsigned char)(b ^ 1) : b; /* no e4m3 NaN */
    }
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    free(h);
}

typedef struct wset {
    int n, nc;
    size_t bytes; /* weights + scales of one copy */
    dic_wmat w[128];
} wset;

static void make_w(wset *ws, int fmt, int N, int K) {
    size_t wb = fmt == 2 ? (size_t)N * K : (size_t)N * K / 2;
    size_t sb = fmt == 2 ? (size_t)((N + 127) / 128) * (K / 128) : (size_t)N * (K / 32);
    ws->bytes = wb + sb;
    ws->nc = (int)(((size_t)256 << 20) / ws->bytes) + 1;
    if (ws->nc > 128) ws->nc = 128;
    void *d0 = NULL;
    for (int i = 0; i < ws->nc; i++) {
        void *dw, *ds;
        CK(cudaMalloc(&dw, wb));
        CK(cudaMalloc(&ds, sb));
        if (!i) fill_w(dw, wb, 7), d0 = dw;
        else CK(cudaMemcpy(dw, d0, wb, cudaMemcpyDeviceToDevice));
        CK(cudaMemset(ds, 125, sb));
        ws->w[i] = (dic_wmat){fmt, N, K, fmt == 2 ? 128 : 32, dw, ds};
    }
}
static void free_w(wset *ws) {
    for (int i = 0; i < ws->nc; i++) cudaFree((void *)ws->w[i].w), cudaFree((void *)ws->w[i].scale);
}

/* dic_gemm / dic_gemm_multi's decode path (src/ops/cuda/dic_gemm.cu dec()) over the lab's decode kernel in
 * its configured mode; mode 2 ("old") and shapes the kernel refuses: the product's dic_gemm. */
static cudaError_t lab_gemm_n(const dic_ctx *c, int M, const void *A, size_t lda, int nw, const dic_wmat *W,
                              uint16_t *const *C16, const size_t *ldc) {
    int mode = lab_gemm_dec_status();
    const int K = W[0].k;
    uint8_t *q = (uint8_t *)c->scratch;
    float *s = (float *)(q + dic_gemm_qbytes(M, K));
    if ((mode == 0 || mode == 1 || mode == 3) && lab_gemm_dec_fits(W[0].n, K, c->num_sms)) {
        if (mode == 0) mode = lab_gemm_dec_fused(M, W[0].n, K, 128, c->num_sms) ? 3 : 1;
        if (mode == 1) {
            cudaError_t e = dic_gemm_quant(c->stream, M, A, lda, K, 128, NULL, NULL, q, s, NULL, 0);
            if (e != cudaSuccess) return e;
        }
        cudaError_t e = lab_gemm_dec_launch(c->stream, c->num_sms, nw, W, 128, M, A, lda, mode == 1 ? q : NULL, s,
                                            NULL, C16, ldc);
        if (e != cudaErrorNotSupported) return e;
    }
    dic_gemm_dec_mode(mode == 2 ? 2 : 0);
    cudaError_t e = cudaSuccess;
    if (nw == 1) e = dic_gemm(c, M, A, lda, W, 128, NULL, C16[0], ldc[0]);
    else e = dic_gemm_multi(c, M, A, lda, nw, W, 128, C16, ldc);
    dic_gemm_dec_mode(0);
    return e;
}
static cudaError_t lab_gemm(const dic_ctx *c, int M, const void *A, size_t lda, const dic_wmat *W, void *C, size_t ldc) {
    uint16_t *cc[1] = {C};
    return lab_gemm_n(c, M, A, lda, 1, W, cc, &ldc);
}

/* the lab variant's output bitwise against the product's dic_gemm: "=" or "!=" */
static const char *vs_product(dic_ctx *c, int M, const void *A, int K, const dic_wmat *W, void *C1, void *C2) {
    CK(lab_gemm(c, M, A, K, W, C1, W->n));
    CK(dic_gemm(c, M, A, K, W, 128, NULL, C2, W->n));
    CK(cudaStreamSynchronize(c->stream));
    size_t n = (size_t)M * W->n * 2;
    void *h1 = malloc(n), *h2 = malloc(n);
    CK(cudaMemcpy(h1, C1, n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2, C2, n, cudaMemcpyDeviceToHost));
    const int same = memcmp(h1, h2, n) == 0;
    free(h1), free(h2);
    return same ? "=" : "!=";
}

static cudaEvent_t e0, e1;
static double copy_gbs;

/* graph of GR calls (rotating weight copies): us per call */
static double time_calls(dic_ctx *c, int M, const void *A, int K, wset *w1, wset *w2, int multi, void *C1, void *C2) {
    cudaGraph_t gr;
    for (int i = 0; i < 2; i++) { /* eager warm-up (attributes, first-launch costs) */
        CK(lab_gemm(c, M, A, K, &w1->w[i % w1->nc], C1, w1->w[0].n));
        if (w2) CK(lab_gemm(c, M, A, K, &w2->w[i % w2->nc], C2, w2->w[0].n));
    }
    CK(cudaStreamSynchronize(c->stream));
    CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < GR; r++) {
        const dic_wmat *a = &w1->w[r % w1->nc];
        if (!w2) {
            CK(lab_gemm(c, M, A, K, a, C1, a->n));
        } else if (multi) {
            dic_wmat ww[2] = {*a, w2->w[r % w2->nc]};
            uint16_t *cc[2] = {C1, C2};
            size_t ld[2] = {(size_t)ww[0].n, (size_t)ww[1].n};
            CK(lab_gemm_n(c, M, A, K, 2, ww, cc, ld));
        } else {
            CK(lab_gemm(c, M, A, K, a, C1, a->n));
            CK(lab_gemm(c, M, A, K, &w2->w[r % w2->nc], C2, w2->w[0].n));
        }
    }
    CK(cudaStreamEndCapture(c->stream, &gr));
    return graph_median_ms(c->stream, gr, e0, e1) * 1e3 / GR;
}

static void line(const char *name, int M, const char *var, double us, double bytes) {
    double gbs = bytes / (us * 1e-6) / 1e9;
    printf("%-20s M=%d %-7s %6.2f us %5.0f GB/s %4.2f of copy (floor %.2f) st=%d\n", name, M, var, us, gbs,
           gbs / copy_gbs, bytes / copy_gbs / 1e3, lab_gemm_dec_status());
}

int main(int argc, char **argv) {
    const int quick = argc > 1 && !strcmp(argv[1], "quick");
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device: %s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
    dic_ctx c = {0};
    CK(cudaStreamCreate(&c.stream));
    c.scratch_cap = (size_t)64 << 20;
    CK(cudaMalloc(&c.scratch, c.scratch_cap));
    c.num_sms = p.multiProcessorCount;
    c.batch_invariant = 0;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));

    copy_gbs = copy_ceiling_gbs(c.stream, e0, e1);
    void *A, *C1, *C2;
    CK(cudaMalloc(&A, (size_t)8 * 8192 * 2));
    {
        unsigned short h[8 * 8192];
        unsigned long long s = 99;
        for (int i = 0; i < 8 * 8192; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            h[i] = (unsigned short)((s & 0x807F) | ((0x78 + (s >> 8) % 8) << 7));
        }
        CK(cudaMemcpy(A, h, sizeof h, cudaMemcpyHostToDevice));
    }
    CK(cudaMalloc(&C1, (size_t)8 * 32768 * 2));
    CK(cudaMalloc(&C2, (size_t)8 * 32768 * 2));

    { /* the quantisation launch alone */
        cudaGraph_t gr;
        CK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
        for (int r = 0; r < GR; r++)
            CK(dic_gemm_quant(c.stream, 1, A, 4096, 4096, 128, NULL, NULL, c.scratch, (float *)((char *)c.scratch + (1 << 20)), NULL, 0));
        CK(cudaStreamEndCapture(c.stream, &gr));
        printf("quant launch alone (M=1 K=4096): %.2f us\n", graph_median_ms(c.stream, gr, e0, e1) * 1e3 / GR);
    }

    static const struct { const char *name; int fmt, N, K; } cs[] = {
        {"fp8 wq_a 1024x4096", 2, 1024, 4096},   {"fp8 wkv 512x4096", 2, 512, 4096},
        {"fp8 shexp 2048x4096", 2, 2048, 4096},  {"fp8 4096x2048", 2, 4096, 2048},
        {"fp8 wq_b 32768x1024", 2, 32768, 1024}, {"fp8 wo_b 4096x8192", 2, 4096, 8192},
        {"fp4 w1 2048x4096", 3, 2048, 4096},
    };
    enum { Q = DIC_DEC_QV2, E = DIC_DEC_ET };
    static const struct { const char *v; int mode, st, sp, fl, cps, m8; } vs[] = {
        {"old", 2, 0, 0, 0, 0, 1},
        {"dec", 0, 0, 0, 0, 0, 1},
        {"fused", 3, 0, 0, 0, 0, 1},
        {"dec+q", 1, 0, 0, 0, 0, 1},
        {"qv2", 3, 0, 0, Q, 0, 1},
        {"qv2full", 3, 0, 0, Q | DIC_DEC_FULL, 0, 1}, /* qv2 on the full instantiation (code-size A/B) */
        {"et", 3, 0, 0, E, 0, 0},
        {"qv2+et", 3, 0, 0, Q | E, 0, 1},
        {"dq+et", 1, 0, 0, E, 0, 1},
        {"wpost", 3, 0, 0, DIC_DEC_WPOST, 0, 0},
        {"noq", 3, 0, 0, DIC_DEC_NOQ, 0, 1},
        {"nocl", 3, 0, 0, DIC_DEC_NOCL, 0, 0},
        {"noq+ncl", 3, 0, 0, DIC_DEC_NOQ | DIC_DEC_NOCL, 0, 0},
        {"bare", 3, 0, 0, DIC_DEC_BARE, 0, 0},
        {"bare0", 3, 0, 0, DIC_DEC_BARE | DIC_DEC_NOW, 0, 0},
        {"empty", 3, 0, 0, DIC_DEC_BARE | DIC_DEC_NOW | DIC_DEC_NOCL, 0, 0},
        {"cps2", 3, 0, 0, 0, 2, 0},
        {"cps3", 3, 0, 0, 0, 3, 0},
        {"cps6", 3, 0, 0, 0, 6, 0},
        {"l2pf", 3, 0, 0, DIC_DEC_L2PF, 0, 0},
        {"pers1", 3, 0, 0, DIC_DEC_PERS, 1, 0},
        {"pers2", 3, 0, 0, DIC_DEC_PERS, 2, 1},
        {"pers3", 3, 0, 0, DIC_DEC_PERS, 3, 0},
        {"pers2l2", 3, 0, 0, DIC_DEC_PERS | DIC_DEC_L2PF, 2, 0},
        {"pers1l2", 3, 0, 0, DIC_DEC_PERS | DIC_DEC_L2PF, 1, 0},
        {"all2", 3, 0, 0, Q | E | DIC_DEC_PERS | DIC_DEC_L2PF, 2, 1},
        {"st2", 3, 2, 0, 0, 0, 0},
        {"st3", 3, 3, 0, 0, 0, 0},
        {"st4", 3, 4, 0, 0, 0, 0},
        {"s1", 3, 0, 1, 0, 0, 0},
        {"s2", 3, 0, 2, 0, 0, 0},
        {"s4", 3, 0, 4, 0, 0, 0},
        {"s8", 3, 0, 8, 0, 0, 0},
    };
    const int nv = quick ? 8 : (int)(sizeof vs / sizeof *vs);
    if (argc > 1 && !strcmp(argv[1], "hot")) {
        /* the default kernel with its weights rotated through DRAM vs one copy hot in L2
         * (what an L2 prefetch ahead of the call could buy) */
        for (unsigned ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
            wset w;
            make_w(&w, cs[ci].fmt, cs[ci].N, cs[ci].K);
            for (int M = 1; M <= 8; M += 7) {
                lab_gemm_dec_config(0, 0, 0);
                double cold = time_calls(&c, M, A, cs[ci].K, &w, NULL, 0, C1, NULL);
                int nc = w.nc;
                w.nc = 1;
                double hot = time_calls(&c, M, A, cs[ci].K, &w, NULL, 0, C1, NULL);
                w.nc = nc;
                printf("%s M=%d floor %.2f us: dram %.2f us, L2-hot %.2f us\n", cs[ci].name, M,
                       (double)w.bytes / copy_gbs / 1e3, cold, hot);
            }
            free_w(&w);
            fflush(stdout);
        }
        return 0;
    }
    for (unsigned ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
        wset w;
        make_w(&w, cs[ci].fmt, cs[ci].N, cs[ci].K);
        for (int M = 1; M <= 8; M += 7) {
            /* one line per shape and M (compact: the lead's output tail is short): variant us ... */
            printf("%s M=%d floor %.2f us:", cs[ci].name, M, (double)w.bytes / copy_gbs / 1e3);
            for (int v = 0; v < nv; v++) {
                if (M == 8 && !vs[v].m8) continue;
                lab_gemm_dec_config(vs[v].mode, vs[v].st, vs[v].sp);
                lab_gemm_dec_tune(vs[v].fl, vs[v].cps);
                double us = time_calls(&c, M, A, cs[ci].K, &w, NULL, 0, C1, NULL);
                printf(" %s %.2f%s", vs[v].v, us, vs_product(&c, M, A, cs[ci].K, &w.w[0], C1, C2));
                lab_gemm_dec_tune(-1, 0);
            }
            printf(" [st=%d]\n", lab_gemm_dec_status());
        }
        free_w(&w);
        fflush(stdout);
    }
    { /* dic_gemm_multi: wq_a + wkv (attention), one activation */
        wset wa, wb;
        make_w(&wa, 2, 1024, 4096);
        make_w(&wb, 2, 512, 4096);
        for (int M = 1; M <= 8; M += 7) {
            lab_gemm_dec_config(2, 0, 0);
            line("wq_a+wkv 2 calls", M, "old", time_calls(&c, M, A, 4096, &wa, &wb, 0, C1, C2), (double)(wa.bytes + wb.bytes));
            lab_gemm_dec_config(0, 0, 0);
            line("wq_a+wkv 2 calls", M, "dec", time_calls(&c, M, A, 4096, &wa, &wb, 0, C1, C2), (double)(wa.bytes + wb.bytes));
            line("wq_a+wkv gemm_multi", M, "dec", time_calls(&c, M, A, 4096, &wa, &wb, 1, C1, C2), (double)(wa.bytes + wb.bytes));
            lab_gemm_dec_tune(DIC_DEC_QV2 | DIC_DEC_ET, 0);
            line("wq_a+wkv gemm_multi", M, "qv2+et", time_calls(&c, M, A, 4096, &wa, &wb, 1, C1, C2), (double)(wa.bytes + wb.bytes));
            lab_gemm_dec_tune(-1, 0);
        }
        free_w(&wa), free_w(&wb);
    }
    { /* dic_gemm_multi: the shared expert's w1 + w3 (di_gemm2 in fast mode at M <= 8), FP8 2048x4096 each */
        wset wa, wb;
        make_w(&wa, 2, 2048, 4096);
        make_w(&wb, 2, 2048, 4096);
        for (int M = 1; M <= 8; M += 7) {
            lab_gemm_dec_config(0, 0, 0);
            line("shexp w1+w3 2 calls", M, "dec", time_calls(&c, M, A, 4096, &wa, &wb, 0, C1, C2), (double)(wa.bytes + wb.bytes));
            line("shexp w1+w3 multi", M, "dec", time_calls(&c, M, A, 4096, &wa, &wb, 1, C1, C2), (double)(wa.bytes + wb.bytes));
            lab_gemm_dec_tune(DIC_DEC_QV2 | DIC_DEC_ET, 0);
            line("shexp w1+w3 multi", M, "qv2+et", time_calls(&c, M, A, 4096, &wa, &wb, 1, C1, C2), (double)(wa.bytes + wb.bytes));
            lab_gemm_dec_tune(-1, 0);
        }
        free_w(&wa), free_w(&wb);
    }
    lab_gemm_dec_config(0, 0, 0);
    printf("decode kernel status at the end: %d (-1: refused, fell back)\n", lab_gemm_dec_status());
    return 0;
}
