/* mhc_bench.c — the lab's mHC variants (mhc_variants.cu, docs/kernels/mhc.md) against the product's
 * kernels: one mHC transition (ops.h di_hc_transition: the previous site's
 * expand, this site's mixes GEMM + scale + Sinkhorn + collapse + RMSNorm) at
 * V4-Flash dims (hc = 4, d = 4096, fn F32 [24][16384] = 1.57 MB), decode rows
 * M = 1, 2, 4, 8: the fused batch_invariant == 0 kernel (dic_hc_transition, one
 * launch) against the unfused sequence of today's kernels in the same run
 * (mode 0: fast F32 GEMV; and mode 1), each timed as a CUDA graph of 64
 * transitions (what decode replays), fn rotated over 64 copies (100 MB, so
 * L2 does not serve the weights), R / sub / state shared (L2-resident as in
 * the step). Floor: fn bytes + R read and written + sub + x + xn at the d2d
 * copy rate measured first. One row per fused kernel variant
 * (lab_hc_transition_variant; "prod" = the product's dic_hc_transition) and case, with the variant's
 * xn and mixes bitwise against the product's ("=" / "!="; the same bits expected for the variants with
 * 32 columns per CTA). Usage: mhc_bench [m1] (m1: also the
 * mode-1 sequence, ~600 us per transition). Then the output head (ops.h
 * di_hc_head_final: the last block's expand, the head's 4 mixes (fn: the first
 * 4 rows of a rotated fn copy), scale_mixes, head_pre, collapse, final
 * RMSNorm; V4.1: expand, collapse with the carried pre, RMSNorm) at M = 1, 2,
 * 4: dic_hc_head (64 columns per CTA, the product) and the lab's 32 against the mode-0 sequence
 * (6 / 3 launches). Usage: mhc_bench [m1] [head] (head: only the head rows).
 * mhc_bench sweep [m1]: the M sweep of both modes' path (docs/kernels/mhc.md): per M = 1 .. 4096 the
 * product's dic_hc_transition (k_transition2 below 65 rows, k_hc_rows from 65), k_transition2 forced (launches
 * of 64 rows), k_hc_rows forced (dic_hc_transition_rows), the mode-0 sequence (and with m1 the mode-1
 * sequence), graph us per transition, and whether k_hc_rows' and k_transition2's x / xn / mixes agree bitwise;
 * then the V4 head (dic_hc_head) against the mode-0 sequence over the same M. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_model.h"
#include "mhc_lab.h"

#define D 4096
#define HCD (4 * D)
#define NW 64    /* fn copies */
#define CALLS 64 /* transitions per graph */

static cudaStream_t st;
static cudaEvent_t e0, e1;
static dic_ctx ctx;
static float *fn[NW], *sc3, *base, *mixes, *pre, *post, *comb, *pre_in, *w;
static uint16_t *R, *sub, *x, *xn;

static void fill_f32(float *d, size_t n, float amp, unsigned long long seed) {
    float *h = malloc(n * 4);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        h[i] = amp * (float)((double)(s >> 11) * 0x1.0p-52 - 1.0);
    }
    CK(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
    free(h);
}
static void fill_bf16(uint16_t *d, size_t n, unsigned long long seed) {
    uint16_t *h = malloc(n * 2);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 3;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float f = (float)((double)(s >> 11) * 0x1.0p-52 - 1.0);
        unsigned u;
        memcpy(&u, &f, 4);
        h[i] = (uint16_t)(u >> 16);
    }
    CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
}

/* mode: 0 fused (the product), 1 unfused with the mode-0 kernels, 2 unfused with the mode-1 kernels,
 * 3 fused, the lab's variant in force, 4 k_transition2 forced (dic_hc_transition per 64 rows), 5 k_hc_rows
 * forced (dic_hc_transition_rows) */
static void transition(int mode, int M, int i, int expand, int chain) {
    const float *f = fn[i % NW];
    float *pin = chain ? pre_in : NULL;
    const uint16_t *s = expand ? sub : NULL;
    if (mode == 4) {
        for (int r0 = 0; r0 < M; r0 += 64) {
            const size_t o = (size_t)r0;
            const int mc = M - r0 < 64 ? M - r0 : 64;
            CK(dic_hc_transition(&ctx, mc, s ? s + o * D : NULL, D, R + o * HCD, HCD, D, f, sc3, base, 20, 1e-6f,
                                 1e-6f, mixes + o * 24, pre + o * 4, post + o * 4, comb + o * 16,
                                 pin ? pin + o * 4 : NULL, w, 1e-6f, x + o * D, xn + o * D, D));
        }
        return;
    }
    if (mode == 5) {
        CK(dic_hc_transition_rows(&ctx, M, s, D, R, HCD, D, f, sc3, base, 20, 1e-6f, 1e-6f, mixes, pre, post, comb,
                                  pin, w, 1e-6f, x, xn, D));
        return;
    }
    if (mode == 3) {
        ctx.batch_invariant = 0;
        CK(lab_hc_transition(&ctx, M, s, D, R, HCD, D, f, sc3, base, 20, 1e-6f, 1e-6f, mixes, pre, post, comb, pin, w,
                             1e-6f, x, xn, D));
        return;
    }
    if (mode == 0) {
        ctx.batch_invariant = 0;
        CK(dic_hc_transition(&ctx, M, s, D, R, HCD, D, f, sc3, base, 20, 1e-6f, 1e-6f, mixes, pre, post, comb, pin, w,
                             1e-6f, x, xn, D));
        return;
    }
    ctx.batch_invariant = mode == 1 ? 0 : 1;
    dic_wmat wm = {1, 24, HCD, 0, f, NULL};
    if (s) CK(dic_hc_expand(&ctx, M, post, comb, s, D, R, R, HCD, D));
    CK(dic_gemm(&ctx, M, R, HCD, &wm, 0, mixes, NULL, 24));
    CK(dic_hc_scale_mixes(&ctx, M, R, HCD, HCD, 1e-6f, mixes, 24, mixes));
    CK(dic_hc_sinkhorn_rows(&ctx, M, mixes, sc3, base, 20, 1e-6f, pre, post, comb));
    CK(dic_hc_collapse(&ctx, M, pin ? pin : pre, R, HCD, D, x, D));
    if (pin) CK(cudaMemcpyAsync(pin, pre, (size_t)M * 16, cudaMemcpyDeviceToDevice, st));
    CK(dic_rmsnorm(&ctx, M, x, D, w, D, 1e-6f, xn, D));
}

/* The output head. mode: 0 fused (the product), 1 the mode-0 sequence, 3 the lab's head (lab_hc_head_cw);
 * v4: the head's mixes (else V4.1: carried pre) */
static void head(int mode, int M, int i, int v4) {
    const float *f = v4 ? fn[i % NW] : NULL; /* rows 0-3 of the copy: [4][HCD] */
    ctx.batch_invariant = 0;
    if (mode == 3) {
        CK(lab_hc_head(&ctx, M, sub, D, post, comb, R, HCD, D, f, 1.25f, base, 1e-6f, 1e-6f, mixes, v4 ? pre : pre_in, w,
                       1e-6f, x, xn, D));
        return;
    }
    if (mode == 0) {
        CK(dic_hc_head(&ctx, M, sub, D, post, comb, R, HCD, D, f, 1.25f, base, 1e-6f, 1e-6f, mixes, v4 ? pre : pre_in, w,
                       1e-6f, x, xn, D));
        return;
    }
    CK(dic_hc_expand(&ctx, M, post, comb, sub, D, R, R, HCD, D));
    if (v4) {
        dic_wmat wm = {1, 4, HCD, 0, f, NULL};
        CK(dic_gemm(&ctx, M, R, HCD, &wm, 0, mixes, NULL, 4));
        CK(dic_hc_scale_mixes(&ctx, M, R, HCD, HCD, 1e-6f, mixes, 4, mixes));
        CK(dic_hc_head_pre(&ctx, M, mixes, 4, 1.25f, base, 1e-6f, pre));
    }
    CK(dic_hc_collapse(&ctx, M, v4 ? pre : pre_in, R, HCD, D, x, D));
    CK(dic_rmsnorm(&ctx, M, x, D, w, D, 1e-6f, xn, D));
}

static int calls = CALLS; /* transitions / heads per graph (the sweep: fewer at large M) */

static double head_us(int mode, int M, int v4) {
    cudaGraph_t gr;
    for (int i = 0; i < 4; i++) head(mode, M, i, v4);
    CK(cudaStreamSynchronize(st));
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < calls; i++) head(mode, M, i, v4);
    CK(cudaStreamEndCapture(st, &gr));
    return graph_median_ms(st, gr, e0, e1) * 1e3 / calls;
}

static double graph_us(int mode, int M, int expand, int chain) {
    cudaGraph_t gr;
    for (int i = 0; i < 4; i++) transition(mode, M, i, expand, chain); /* warm (module load) */
    CK(cudaStreamSynchronize(st));
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < calls; i++) transition(mode, M, i, expand, chain);
    CK(cudaStreamEndCapture(st, &gr));
    return graph_median_ms(st, gr, e0, e1) * 1e3 / calls;
}

/* x, xn and mixes of M rows after transition(mode) without the expand (R read only) */
static void outputs(int mode, int M, void *hx, void *hm) {
    transition(mode, M, 0, 0, 0);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(hx, xn, (size_t)M * D * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy((char *)hx + (size_t)M * D * 2, x, (size_t)M * D * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hm, mixes, (size_t)M * 96, cudaMemcpyDeviceToHost));
}

/* The M sweep (header): both organisations of the fused transition against the sequences, bits compared. */
static void sweep(int with_m1, double copy_gbs) {
    static const int Ms[] = {1, 2, 4, 5, 8, 16, 32, 64, 65, 128, 256, 500, 1024, 2048, 4096};
    printf("-- M sweep, graph us per transition (expand + mixes + Sinkhorn + collapse + RMSNorm, d = %d): prod = "
           "dic_hc_transition (both modes), tiles = k_transition2 per 64 rows, rows = k_hc_rows; bits: rows vs tiles\n",
           D);
    printf("%6s %10s %10s %10s %10s %10s %8s %6s\n", "M", "prod", "tiles", "rows", "seq.m0", with_m1 ? "seq.m1" : "-",
           "floor", "bits");
    for (size_t k = 0; k < sizeof Ms / sizeof *Ms; k++) {
        const int M = Ms[k];
        calls = M <= 64 ? CALLS : M <= 512 ? 16 : 4;
        const double bytes = 24.0 * HCD * 4 + (double)M * (HCD * 2 * 2 + D * 2 + 2 * D * 2);
        const double floor_us = bytes / (copy_gbs * 1e9) * 1e6;
        const double up = graph_us(0, M, 1, 0), ut = graph_us(4, M, 1, 0), ur = graph_us(5, M, 1, 0);
        const double u0 = graph_us(1, M, 1, 0), u1 = with_m1 ? graph_us(2, M, 1, 0) : 0.0;
        void *tx = malloc((size_t)M * D * 4), *tm = malloc((size_t)M * 96), *rx = malloc((size_t)M * D * 4),
             *rm = malloc((size_t)M * 96);
        outputs(4, M, tx, tm);
        outputs(5, M, rx, rm);
        const int same = !memcmp(tx, rx, (size_t)M * D * 4) && !memcmp(tm, rm, (size_t)M * 96);
        free(tx), free(tm), free(rx), free(rm);
        printf("%6d %10.2f %10.2f %10.2f %10.2f %10.2f %8.2f %6s\n", M, up, ut, ur, u0, u1, floor_us,
               same ? "=" : "!=");
        fflush(stdout);
    }
    printf("-- M sweep, the V4 head (dic_hc_head, both modes) vs the mode-0 sequence, graph us per head\n");
    printf("%6s %10s %10s\n", "M", "fused", "seq.m0");
    for (size_t k = 0; k < sizeof Ms / sizeof *Ms; k++) {
        const int M = Ms[k];
        calls = M <= 64 ? CALLS : M <= 512 ? 16 : 4;
        printf("%6d %10.2f %10.2f\n", M, head_us(0, M, 1), head_us(1, M, 1));
        fflush(stdout);
    }
    calls = CALLS;
}

/* The lab's transition (the variant in force) against the product's on the same inputs, without the
 * expand (R read only): 1 when xn and the mixes are bitwise equal. */
static int vs_product(int M) {
    const size_t nx = (size_t)M * D * 2, nm = (size_t)M * 24 * 4;
    void *hx = malloc(nx), *hm = malloc(nm), *lx = malloc(nx), *lm = malloc(nm);
    transition(0, M, 0, 0, 0);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(hx, xn, nx, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hm, mixes, nm, cudaMemcpyDeviceToHost));
    transition(3, M, 0, 0, 0);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(lx, xn, nx, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lm, mixes, nm, cudaMemcpyDeviceToHost));
    const int same = !memcmp(hx, lx, nx) && !memcmp(hm, lm, nm);
    free(hx), free(hm), free(lx), free(lm);
    return same;
}

int main(int argc, char **argv) {
    CK(cudaStreamCreate(&st));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double copy_gbs = copy_ceiling_gbs(st, e0, e1);
    ctx.stream = st;
    ctx.scratch_cap = (size_t)64 << 20;
    CK(cudaMalloc(&ctx.scratch, ctx.scratch_cap));
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&ctx.num_sms, cudaDevAttrMultiProcessorCount, dev));
    for (int i = 0; i < NW; i++) {
        CK(cudaMalloc((void **)&fn[i], (size_t)24 * HCD * 4));
        fill_f32(fn[i], (size_t)24 * HCD, 0.02f, 100 + i);
    }
    int with_m1 = 0, only_head = 0, do_sweep = 0;
    for (int a = 1; a < argc; a++)
        with_m1 |= !strcmp(argv[a], "m1"), only_head |= !strcmp(argv[a], "head"), do_sweep |= !strcmp(argv[a], "sweep");
    const int MM = do_sweep ? 4096 : 8;
    CK(cudaMalloc((void **)&sc3, 12));
    CK(cudaMalloc((void **)&base, 96));
    CK(cudaMalloc((void **)&mixes, MM * 96));
    CK(cudaMalloc((void **)&pre, MM * 16));
    CK(cudaMalloc((void **)&post, MM * 16));
    CK(cudaMalloc((void **)&comb, MM * 64));
    CK(cudaMalloc((void **)&pre_in, MM * 16));
    CK(cudaMalloc((void **)&w, D * 4));
    CK(cudaMalloc((void **)&R, (size_t)MM * HCD * 2));
    CK(cudaMalloc((void **)&sub, (size_t)MM * D * 2));
    CK(cudaMalloc((void **)&x, (size_t)MM * D * 2));
    CK(cudaMalloc((void **)&xn, (size_t)MM * D * 2));
    fill_f32(sc3, 3, 1.0f, 1), fill_f32(base, 24, 1.0f, 2), fill_f32(w, D, 1.0f, 3);
    fill_bf16(R, (size_t)MM * HCD, 4), fill_bf16(sub, (size_t)MM * D, 5);
    fill_f32(pre_in, MM * 4, 0.5f, 6);
    /* a valid post / comb to start from: one transition without the expand */
    ctx.batch_invariant = 1;
    transition(2, MM, 0, 0, 0);
    CK(cudaStreamSynchronize(st));

    if (do_sweep) {
        sweep(with_m1, copy_gbs);
        return 0;
    }
    printf("-- graph us per transition (d = %d, fn %.2f MB F32; %d transitions per graph, fn rotated over %d copies)\n",
           D, 24.0 * HCD * 4 / 1e6, CALLS, NW);
    printf("-- fused variants (lab_hc_transition_variant): v0 first version; v1..v6 k_transition2 (cols/CTA, rows/tile, "
           "Sinkhorn beside collapse): v1 32,4,y v2 32,4,n v3 16,4,y v4 64,4,y v5 32,2,y v6 32,1,y v7 32,by M,y; "
           "v8 32,1 (M<=4),y + shorter tail (R stash, one-thread fences, early norm weights)\n");
    printf("%-28s %3s %9s %9s %9s %8s %8s %8s\n", "case", "var", "fused", "unf.m0", with_m1 ? "unf.m1" : "-", "floor",
           "f/floor", "unf0/f");
    static const int Ms[] = {1, 2, 4, 8};
    for (int c = 0; c < (only_head ? 0 : 6); c++) {
        int M = c < 4 ? Ms[c] : 1, expand = c != 4, chain = c == 5;
        double bytes = 24.0 * HCD * 4 + (double)M * (HCD * 2 * (expand ? 2 : 1) + (expand ? D * 2 : 0) + 2 * D * 2);
        double floor_us = bytes / (copy_gbs * 1e9) * 1e6;
        double u0 = graph_us(1, M, expand, chain), u1 = with_m1 ? graph_us(2, M, expand, chain) : 0.0;
        char name[64];
        snprintf(name, sizeof name, "M=%d %s%s", M, expand ? "expand+pre+norm" : "pre+norm (first)", chain ? " chain" : "");
        double fp = graph_us(0, M, expand, chain);
        printf("%-28s %4s %9.2f %9.2f %9.2f %8.2f %8.2f %8.2f\n", name, "prod", fp, u0, u1, floor_us, fp / floor_us, u0 / fp);
        for (int v = 0; v < LAB_HT_NVAR; v++) {
            lab_hc_transition_variant(v);
            double f = graph_us(3, M, expand, chain);
            printf("%-28s %4d %9.2f %9.2f %9.2f %8.2f %8.2f %8.2f %s\n", name, v, f, u0, u1, floor_us, f / floor_us, u0 / f,
                   vs_product(M) ? "=" : "!=");
            fflush(stdout);
        }
    }
    lab_hc_transition_variant(LAB_HT_DEFAULT);

    /* the output head: graph us per head, fused (32 / 64 columns per CTA) vs the mode-0 sequence */
    printf("-- output head (di_hc_head_final): expand + [4 mixes + scale + head_pre] + collapse + final RMSNorm; "
           "unf.m0 = the mode-0 sequence (V4: 6 launches, V4.1: 3)\n");
    printf("%-28s %9s %9s %9s %8s %8s %8s\n", "case", "fused32", "fused64", "unf.m0", "floor", "f/floor", "unf0/f");
    for (int v4 = 1; v4 >= 0; v4--)
        for (int c = 0; c < 3; c++) {
            const int M = c == 2 ? 4 : c + 1;
            double bytes = (v4 ? 4.0 * HCD * 4 : 0.0) + (double)M * (HCD * 2 * 2 + D * 2 + 2 * D * 2);
            double floor_us = bytes / (copy_gbs * 1e9) * 1e6;
            double u0 = head_us(1, M, v4);
            lab_hc_head_cw(32);
            double f32 = head_us(3, M, v4);
            double f64 = head_us(0, M, v4);
            lab_hc_head_cw(64);
            double fb = f32 < f64 ? f32 : f64;
            char name[64];
            snprintf(name, sizeof name, "M=%d head %s", M, v4 ? "V4 (mixes)" : "V4.1 (carried)");
            printf("%-28s %9.2f %9.2f %9.2f %8.2f %8.2f %8.2f\n", name, f32, f64, u0, floor_us, fb / floor_us, u0 / fb);
            fflush(stdout);
        }
    return 0;
}
