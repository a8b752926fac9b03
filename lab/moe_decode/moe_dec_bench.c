/* lab/moe_decode/moe_dec_bench.c — the routed experts + MoE tail at decode sizes, V4-Flash
 * dims (E = 256, top-6, hidden 4096, moe_intermediate 2048, FP4 experts,
 * act_block 128), fast mode (docs/kernels/moe-decode.md):
 * first every lab variant (lab_moe_routed_dec, moe_decode_variants.cu; the diagnostics excepted)
 * against the product (dic_moe_routed_dec, src/ops/cuda/dic_moe_decode.cu), bitwise in h, y and out
 * at M = 1, 2, 4, 8, and the product against the CPU op (di_moe_routed: y and out within the GEMM
 * tolerance, |gpu - cpu| <= 2^-5 |cpu| + 2e-3 max|row|, norm-wise <= 2e-3) at M = 1 and 2
 * (`moe_dec_bench check` stops there); then graph us per call of
 *   product dic_moe_routed_dec
 *   fused  lab_moe_routed_dec, one row per
 *          variant (lab_moe_dec_config: up 0/1/2, down 0/1, ring stages)
 *   today  dispatch_inv, gather, gemm2_grouped_seg, swiglu_n,
 *          gemm_grouped_seg, combine_inv, add_bf16_f32, f32_to_bf16
 * against the floor: bytes of the distinct selected experts (w1, w3, w2 and
 * scales) / the d2d copy ceiling (bytes read + written) of the same run.
 * Each graph replays GR calls over NS routing sets (different experts each
 * call: > 600 MB cycled, so L2 does not serve the weights).
 * `moe_dec_bench one`: only the one-launch rows (k_mo, lab_moe_dec_one) next to the default two
 * launches at M = 1, 2, 4, 8 (a few seconds); the full run prints them last. The variant table
 * and the decomposition run with the one-launch path off (lab_moe_dec_one(0)).
 * `moe_dec_bench down2`: only the down variant 2 rows (k_mv_down2: a CTA per token and 16 columns
 * with all k entries, no cluster) next to the default at M = 1, 2, 4, 8, and the two down kernels
 * alone (DIC_MD_DNONLY) with parts removed at M = 1 and 8 (a few seconds). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "moe_decode/moe_decode_lab.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_model.h"
#include "io/numfmt.h"
#include "ops/ops.h"
#include <math.h>

#define E 256
#define TOPK 6
#define D 4096
#define I 2048
#define AB 128
#define NS 8
#define GR 16
#define MMAX 8


static void nojoin(void *p) { (void)p; }

/* graph us per call of GR calls of lab_moe_routed_dec at M tokens (knobs as set by the caller) */
static double time_calls(dic_ctx *c, int M, int *const dsel[NS], const float *drw, const dic_wmat *w1,
                         const dic_wmat *w3, const dic_wmat *w2, const uint16_t *dxn, uint16_t *dh, const uint16_t *dsh,
                         float *dy, uint16_t *dout, cudaEvent_t e0, cudaEvent_t e1) {
    cudaGraph_t gr;
    for (int r = -1; r < GR; r++) {
        if (r == 0) {
            CK(cudaStreamSynchronize(c->stream));
            CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
        }
        CK(lab_moe_routed_dec(c, M, TOPK, dsel[(r + NS) % NS], drw, E, w1, w3, w2, dxn, D, D, AB, 10.0f, dh, I, dsh, D,
                              dy, dout, D));
    }
    CK(cudaStreamEndCapture(c->stream, &gr));
    return graph_median_ms(c->stream, gr, e0, e1) * 1e3 / GR;
}

/* the host weights (the CPU reference): matrix j of expert e at g_hr + mat_off(e, j), its scales at
 * g_hs + scl_off(e, j) */
static uint8_t *g_hr, *g_hs;
#define RB ((size_t)16 << 20)
#define SB ((size_t)1 << 20)
static size_t mat_off(int e, int j) { return ((size_t)(e * 3 + j) * 40961) % RB; }
static size_t scl_off(int e, int j, size_t sb) { return ((size_t)(e * 3 + j) * 4099) % (SB - sb); }

/* the CPU op di_moe_routed on routing set sel (M tokens) against the product's y / out: 0 = ok */
static int cpu_check(int M, const int *sel, const float *rw, const uint16_t *xn, const float *yp, const uint16_t *op) {
    const int R = M * TOPK;
    static di_wmat c1[E], c3[E], c2[E];
    int packed[E];
    memset(packed, 0, sizeof packed);
    const size_t sb = (size_t)I * (D / 32);
    int first = -1;
    for (int i = 0; i < R; i++) {
        const int e = sel[i];
        if (packed[e]) continue;
        packed[e] = 1;
        if (first < 0) first = e;
        if (di_wmat_pack(&c1[e], DI_WFMT_FP4, g_hr + mat_off(e, 0), g_hs + scl_off(e, 0, sb), I, D, 32, NULL) != DEEPINFER_OK ||
            di_wmat_pack(&c3[e], DI_WFMT_FP4, g_hr + mat_off(e, 1), g_hs + scl_off(e, 1, sb), I, D, 32, NULL) != DEEPINFER_OK ||
            di_wmat_pack(&c2[e], DI_WFMT_FP4, g_hr + mat_off(e, 2), g_hs + scl_off(e, 2, sb), D, I, 32, NULL) != DEEPINFER_OK) {
            fprintf(stderr, "CPU reference: pack failed\n");
            exit(1);
        }
    }
    for (int e = 0; e < E; e++) /* experts without rows are never read: any valid descriptor */
        if (!packed[e]) c1[e] = c1[first], c3[e] = c3[first], c2[e] = c2[first];
    di_exec x;
    if (di_exec_init(&x, 0, NULL) != DEEPINFER_OK) exit(1);
    di_moe_bufs b;
    b.off = malloc((E + 1) * sizeof(int)), b.rows = malloc((size_t)R * sizeof(int)), b.inv = malloc((size_t)R * sizeof(int));
    b.xe = malloc((size_t)R * D * 2), b.eo = malloc((size_t)R * D * 2);
    b.g = malloc((size_t)R * I * 2), b.u = malloc((size_t)R * I * 2), b.h = malloc((size_t)R * I * 2);
    b.erw = malloc((size_t)R * 4);
    float *y = malloc((size_t)M * D * 4);
    uint16_t *out = malloc((size_t)M * D * 2);
    di_moe_routed(&x, M, TOPK, sel, rw, E, c1, c3, c2, xn, D, D, AB, 10.0f, &b, xn, y, out, D); /* shared = xn (dsh) */
    int bad = 0;
    double num = 0, den = 0;
    for (int m = 0; m < M; m++) {
        float rmax = 0;
        for (int j = 0; j < D; j++) rmax = fmaxf(rmax, fabsf(y[(size_t)m * D + j]));
        for (int j = 0; j < D; j++) {
            const size_t i = (size_t)m * D + j;
            const float a = yp[i], bb = y[i], ao = di_bf16_to_f32(op[i]), bo = di_bf16_to_f32(out[i]);
            bad += !(fabsf(a - bb) <= 0x1p-5f * fabsf(bb) + 2e-3f * rmax);
            bad += !(fabsf(ao - bo) <= 0x1p-5f * fabsf(bo) + 2e-3f * rmax);
            num += ((double)a - bb) * ((double)a - bb), den += (double)bb * bb;
        }
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    bad += !(rel <= 2e-3);
    printf("check M=%d: the product vs the CPU: %s (y norm %.2e)\n", M, bad ? "MISMATCH" : "ok", rel);
    for (int e = 0; e < E; e++)
        if (packed[e]) di_wmat_free(&c1[e]), di_wmat_free(&c3[e]), di_wmat_free(&c2[e]);
    di_exec_free(&x);
    free(b.off), free(b.rows), free(b.inv), free(b.xe), free(b.eo), free(b.g), free(b.u), free(b.h), free(b.erw);
    free(y), free(out);
    return bad != 0;
}

/* h, y, out of one eager call (product = 1: dic_moe_routed_dec, else lab_moe_routed_dec at its knobs) */
static void run_once(dic_ctx *c, int product, int M, const int *dsel, const float *drw, const dic_wmat *w1,
                     const dic_wmat *w3, const dic_wmat *w2, const uint16_t *dxn, uint16_t *dh, const uint16_t *dsh,
                     float *dy, uint16_t *dout, uint16_t *h, float *y, uint16_t *out) {
    CK(cudaMemset(dh, 0xFF, (size_t)M * TOPK * I * 2));
    CK(cudaMemset(dy, 0xFF, (size_t)M * D * 4));
    CK(cudaMemset(dout, 0xFF, (size_t)M * D * 2));
    if (product)
        CK(dic_moe_routed_dec(c, M, TOPK, dsel, drw, E, w1, w3, w2, dxn, D, D, AB, 10.0f, dh, I, dsh, D, dy, dout, D));
    else
        CK(lab_moe_routed_dec(c, M, TOPK, dsel, drw, E, w1, w3, w2, dxn, D, D, AB, 10.0f, dh, I, dsh, D, dy, dout, D));
    CK(cudaStreamSynchronize(c->stream));
    CK(cudaMemcpy(h, dh, (size_t)M * TOPK * I * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y, dy, (size_t)M * D * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out, dout, (size_t)M * D * 2, cudaMemcpyDeviceToHost));
}

/* every same-bits variant (up, down, nst, flags, one-launch M) against the product, bitwise: the number of
 * differing values */
static size_t check_rows(dic_ctx *c, int *const dsel[NS], const int *const hsel[NS], const float *hrw,
                         const uint16_t *hx, const float *drw, const dic_wmat *w1, const dic_wmat *w3,
                         const dic_wmat *w2, const uint16_t *dxn, uint16_t *dh, const uint16_t *dsh, float *dy,
                         uint16_t *dout) {
    enum { Q = DIC_MD_QHW, C = DIC_MD_CVT, X = DIC_MD_XPRE, L = DIC_MD_DLITE, A = Q | C | X | L };
    static const int V[][5] = {{0, 0, 0, 0, 0}, {1, 1, 2, 0, 0}, {1, 1, 3, 0, 0}, {1, 1, 4, 0, 0}, {1, 1, 8, 0, 0},
                               {2, 1, 2, 0, 0}, {2, 1, 4, 0, 0}, {2, 1, 8, Q, 0}, {1, 0, 4, 0, 0}, {0, 1, 4, 0, 0},
                               {1, 1, 2, Q, 0}, {1, 1, 2, C, 0}, {1, 1, 2, Q | C, 0}, {1, 1, 2, Q | X, 0},
                               {1, 1, 2, Q | L, 0}, {1, 1, 2, A, 0}, {1, 1, 3, A, 0}, {2, 1, 2, A, 0}, {0, 1, 4, A, 0},
                               {1, 0, 2, A, 0}, {1, 2, 2, A, 0}, {1, 2, 2, 0, 0}, {0, 2, 4, Q | C, 0}, {2, 2, 2, Q, 0},
                               {1, 1, 2, A, 8}, {1, 1, 2, Q | C, 8}, {1, 1, 2, 0, 8}, {-1, -1, -1, -1, 8},
                               {-1, -1, -1, -1, 0}};
    const int NV = (int)(sizeof V / sizeof V[0]);
    static const int Ms[] = {1, 2, 4, 8};
    const size_t nh = (size_t)MMAX * TOPK * I, nd = (size_t)MMAX * D;
    uint16_t *hp = malloc(nh * 2), *hv = malloc(nh * 2), *op = malloc(nd * 2), *ov = malloc(nd * 2);
    float *yp = malloc(nd * 4), *yv = malloc(nd * 4);
    size_t bad = 0;
    for (int mi = 0; mi < 4; mi++) {
        const int M = Ms[mi];
        run_once(c, 1, M, dsel[mi], drw, w1, w3, w2, dxn, dh, dsh, dy, dout, hp, yp, op);
        if (M <= 2) bad += (size_t)cpu_check(M, hsel[mi], hrw, hx, yp, op);
        for (int v = 0; v < NV; v++) {
            lab_moe_dec_config(V[v][0], V[v][1], V[v][2]), lab_moe_dec_flags(V[v][3]), lab_moe_dec_one(V[v][4]);
            run_once(c, 0, M, dsel[mi], drw, w1, w3, w2, dxn, dh, dsh, dy, dout, hv, yv, ov);
            size_t n = 0;
            for (size_t i = 0; i < (size_t)M * TOPK * I; i++) n += hv[i] != hp[i];
            for (size_t i = 0; i < (size_t)M * D; i++) n += ov[i] != op[i] || memcmp(&yv[i], &yp[i], 4) != 0;
            if (n)
                printf("MISMATCH variant %d,%d,%d fl %#x one %d M=%d: %zu values differ from the product\n", V[v][0],
                       V[v][1], V[v][2], V[v][3], V[v][4], M, n);
            bad += n;
        }
    }
    lab_moe_dec_config(-1, -1, -1), lab_moe_dec_flags(-1), lab_moe_dec_one(-1);
    if (lab_moe_dec_broken()) printf("WARNING: a variant launch failed: rows after it ran variant 0\n");
    printf("check: %d variants x M = 1, 2, 4, 8 against the product: %zu values differ%s\n", NV, bad,
           bad ? "" : " (bitwise equal)");
    free(hp), free(hv), free(op), free(ov), free(yp), free(yv);
    return bad;
}

/* the one-launch rows: default two launches (one off) vs k_mo, k_mo + tail (a line join: shared added
 * after it by k_mo_tail, as in the model), k_mo without XPRE */
static void one_rows(dic_ctx *c, const double floor_us[4], int *const dsel[NS], const float *drw, const dic_wmat *w1,
                     const dic_wmat *w3, const dic_wmat *w2, const uint16_t *dxn, uint16_t *dh, const uint16_t *dsh,
                     float *dy, uint16_t *dout, cudaEvent_t e0, cudaEvent_t e1) {
    static const int Ms[] = {1, 2, 4, 8};
    static const struct { const char *nm; int one, fl, join; } RW[] = {
        {"two (default)", 0, -1, 0}, {"one", 8, -1, 0}, {"one+tail", 8, -1, 1}, {"one qc", 8, DIC_MD_QHW | DIC_MD_CVT, 0}};
    const int NR = (int)(sizeof RW / sizeof RW[0]);
    double us[8][4];
    for (int v = 0; v < NR; v++)
        for (int mi = 0; mi < 4; mi++) {
            lab_moe_dec_config(-1, -1, -1), lab_moe_dec_flags(RW[v].fl), lab_moe_dec_one(RW[v].one);
            c->join = RW[v].join ? nojoin : NULL, c->join_arg = NULL;
            const int n0 = lab_moe_dec_one_count();
            us[v][mi] = time_calls(c, Ms[mi], dsel, drw, w1, w3, w2, dxn, dh, dsh, dy, dout, e0, e1);
            c->join = NULL;
            if (RW[v].one && lab_moe_dec_one_count() == n0)
                printf("WARNING: row %s M=%d: k_mo not taken (two launches measured)\n", RW[v].nm, Ms[mi]);
            fprintf(stderr, "one-launch row %s M=%d: %.1f us\n", RW[v].nm, Ms[mi], us[v][mi]);
        }
    lab_moe_dec_config(-1, -1, -1), lab_moe_dec_flags(-1), lab_moe_dec_one(-1);
    printf("one launch (k_mo) vs the default two launches (1,1,2,qcxl), graph us per call (GR=%d over %d routing sets)\n",
           GR, NS);
    printf("%-14s %9s %9s %9s %9s   %s\n", "path", "M=1", "M=2", "M=4", "M=8", "floor/us at M=1,2,4,8");
    printf("%-14s %9.1f %9.1f %9.1f %9.1f\n", "floor", floor_us[0], floor_us[1], floor_us[2], floor_us[3]);
    for (int v = 0; v < NR; v++)
        printf("%-14s %9.1f %9.1f %9.1f %9.1f   %.2f %.2f %.2f %.2f\n", RW[v].nm, us[v][0], us[v][1], us[v][2],
               us[v][3], floor_us[0] / us[v][0], floor_us[1] / us[v][1], floor_us[2] / us[v][2], floor_us[3] / us[v][3]);
    if (lab_moe_dec_broken()) printf("WARNING: a variant launch failed\n");
}

/* the down variant 2 rows: up,down,nst 1,2,2 (qcxl) vs the default 1,1,2 (qcxl), then the down kernels
 * alone with parts removed (timing-only diagnostics) */
static void down2_rows(dic_ctx *c, const double floor_us[4], int *const dsel[NS], const float *drw, const dic_wmat *w1,
                       const dic_wmat *w3, const dic_wmat *w2, const uint16_t *dxn, uint16_t *dh, const uint16_t *dsh,
                       float *dy, uint16_t *dout, cudaEvent_t e0, cudaEvent_t e1) {
    enum { Q = DIC_MD_QHW, C = DIC_MD_CVT, X = DIC_MD_XPRE, L = DIC_MD_DLITE, A = Q | C | X | L, DN = DIC_MD_DNONLY,
           NOW = DIC_MD_NOW, NOQ = DIC_MD_NOQ, NOM = DIC_MD_NOMMA, EX = DIC_MD_EXIT, EM = DIC_MD_EMPTY };
    static const int Ms[] = {1, 2, 4, 8};
    static const struct { const char *nm; int down, fl; } RW[] = {{"1,1,2,qcxl", 1, -1}, {"1,2,2,qcxl", 2, -1}};
    const int NR = (int)(sizeof RW / sizeof RW[0]);
    double us[4][4];
    lab_moe_dec_one(0);
    for (int v = 0; v < NR; v++)
        for (int mi = 0; mi < 4; mi++) {
            lab_moe_dec_config(1, RW[v].down, 2), lab_moe_dec_flags(RW[v].fl);
            const int n0 = lab_moe_dec_down2_count();
            us[v][mi] = time_calls(c, Ms[mi], dsel, drw, w1, w3, w2, dxn, dh, dsh, dy, dout, e0, e1);
            if (RW[v].down == 2 && lab_moe_dec_down2_count() == n0)
                printf("WARNING: row %s M=%d: k_mv_down2 not taken\n", RW[v].nm, Ms[mi]);
            fprintf(stderr, "down2 row %s M=%d: %.1f us\n", RW[v].nm, Ms[mi], us[v][mi]);
        }
    static const struct { const char *nm; int down, fl; } DX[] = {
        {"down1", 1, DN | A},           {"down1 stream", 1, DN | A | NOQ | NOM}, {"down1 bare", 1, DN | A | NOW | NOQ | NOM},
        {"down2", 2, DN | A},           {"down2 noq", 2, DN | A | NOQ},          {"down2 nomma", 2, DN | A | NOM},
        {"down2 now", 2, DN | A | NOW}, {"down2 stream", 2, DN | A | NOQ | NOM}, {"down2 bare", 2, DN | A | NOW | NOQ | NOM},
        {"down2 exit", 2, DN | A | EX}, {"down2 empty", 2, DN | A | EM}};
    const int ND = (int)(sizeof DX / sizeof DX[0]);
    static const int Md[] = {1, 8};
    double du[16][2];
    for (int mi = 0; mi < 2; mi++)
        for (int v = 0; v < ND; v++) {
            lab_moe_dec_config(1, DX[v].down, 2), lab_moe_dec_flags(DX[v].fl);
            du[v][mi] = time_calls(c, Md[mi], dsel, drw, w1, w3, w2, dxn, dh, dsh, dy, dout, e0, e1);
            fprintf(stderr, "down2 decomposition %s M=%d: %.1f us\n", DX[v].nm, Md[mi], du[v][mi]);
        }
    lab_moe_dec_config(-1, -1, -1), lab_moe_dec_flags(-1), lab_moe_dec_one(-1);
    printf("down variant 2 (k_mv_down2) vs the default (up,down,nst 1,1,2, flags qcxl), graph us per call (GR=%d over %d "
           "routing sets)\n",
           GR, NS);
    printf("%-14s %9s %9s %9s %9s   %s\n", "variant", "M=1", "M=2", "M=4", "M=8", "floor/us at M=1,2,4,8");
    printf("%-14s %9.1f %9.1f %9.1f %9.1f\n", "floor", floor_us[0], floor_us[1], floor_us[2], floor_us[3]);
    for (int v = 0; v < NR; v++)
        printf("%-14s %9.1f %9.1f %9.1f %9.1f   %.2f %.2f %.2f %.2f\n", RW[v].nm, us[v][0], us[v][1], us[v][2],
               us[v][3], floor_us[0] / us[v][0], floor_us[1] / us[v][1], floor_us[2] / us[v][2], floor_us[3] / us[v][3]);
    printf("the down kernel alone (DIC_MD_DNONLY, flags qcxl; TIMING ONLY: noq / nomma / now / stream / bare / exit /\n"
           "empty as in the decomposition below). Floor of the down bytes M=1: %.1f us, M=8: %.1f us\n",
           floor_us[0] / 3, floor_us[3] / 3);
    printf("%-14s %9s %9s\n", "part", "M=1", "M=8");
    for (int v = 0; v < ND; v++) printf("%-14s %9.1f %9.1f\n", DX[v].nm, du[v][0], du[v][1]);
    if (lab_moe_dec_broken()) printf("WARNING: a variant launch failed\n");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const int only_one = argc > 1 && !strcmp(argv[1], "one"), only_down2 = argc > 1 && !strcmp(argv[1], "down2");
    const int only_check = argc > 1 && !strcmp(argv[1], "check");
    dic_ctx c;
    bench_ctx_init(&c, (size_t)64 << 20);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));

    const double copy_gbs = copy_ceiling_gbs(c.stream, e0, e1);

    /* weights: one allocation, 3 matrices per expert; random e2m1 bytes and scales 2^-9 .. 2^-4 (every
     * matrix a different window of one random buffer: the bitwise check sees distinct experts) */
    const size_t wb = (size_t)I * D / 2, sb = (size_t)I * (D / 32), mat = wb + sb;
    uint8_t *pool;
    CK(cudaMalloc((void **)&pool, (size_t)E * 3 * mat));
    const size_t rb = (size_t)16 << 20;
    uint8_t *hr = malloc(rb + wb), *hs = malloc((size_t)1 << 20);
    for (size_t i = 0; i < rb + wb; i++) hr[i] = (uint8_t)rnd();
    for (size_t i = 0; i < ((size_t)1 << 20); i++) hs[i] = (uint8_t)(118 + rnd() % 6);
    dic_wmat w1[E], w3[E], w2[E];
    for (int e = 0; e < E; e++) {
        uint8_t *b = pool + (size_t)e * 3 * mat;
        w1[e] = (dic_wmat){3, I, D, 32, b, b + wb};
        w3[e] = (dic_wmat){3, I, D, 32, b + mat, b + mat + wb};
        w2[e] = (dic_wmat){3, D, I, 32, b + 2 * mat, b + 2 * mat + wb};
        for (int j = 0; j < 3; j++) {
            const size_t o = mat_off(e, j), os = scl_off(e, j, sb);
            CK(cudaMemcpy(b + (size_t)j * mat, hr + o, wb, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(b + (size_t)j * mat + wb, hs + os, sb, cudaMemcpyHostToDevice));
        }
    }
    g_hr = hr, g_hs = hs; /* kept for the CPU reference */
    const double ebytes = 3.0 * (double)mat;

    /* routing sets, activations, buffers */
    int hsel[NS][MMAX * TOPK];
    float hrw[MMAX * TOPK];
    for (int q = 0; q < NS; q++)
        for (int m = 0; m < MMAX; m++)
            for (int j = 0; j < TOPK; j++) {
                int e, dup;
                do {
                    e = (int)(rnd() % E);
                    dup = 0;
                    for (int j2 = 0; j2 < j; j2++) dup |= hsel[q][m * TOPK + j2] == e;
                } while (dup);
                hsel[q][m * TOPK + j] = e;
            }
    for (int i = 0; i < MMAX * TOPK; i++) hrw[i] = 0.1f + (float)(rnd() % 1000) / 1200.0f;
    int *dsel[NS];
    for (int q = 0; q < NS; q++) {
        CK(cudaMalloc((void **)&dsel[q], sizeof hsel[q]));
        CK(cudaMemcpy(dsel[q], hsel[q], sizeof hsel[q], cudaMemcpyHostToDevice));
    }
    uint16_t hx[MMAX * D];
    for (int i = 0; i < MMAX * D; i++) hx[i] = (uint16_t)(0x3C00 + (rnd() % 0x300) - 0x180 + ((rnd() & 1) << 15));
    float *drw, *dy, *derw;
    uint16_t *dxn, *dsh, *dout, *dh, *dxe, *dg, *du, *deo;
    int *doff, *drows, *dinv;
    CK(cudaMalloc((void **)&drw, sizeof hrw));
    CK(cudaMemcpy(drw, hrw, sizeof hrw, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&dxn, sizeof hx));
    CK(cudaMemcpy(dxn, hx, sizeof hx, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&dsh, sizeof hx));
    CK(cudaMemcpy(dsh, hx, sizeof hx, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&dout, sizeof hx));
    CK(cudaMalloc((void **)&dy, (size_t)MMAX * D * 4));
    CK(cudaMalloc((void **)&derw, MMAX * TOPK * 4));
    CK(cudaMalloc((void **)&dh, (size_t)MMAX * TOPK * I * 2));
    CK(cudaMalloc((void **)&dg, (size_t)MMAX * TOPK * I * 2));
    CK(cudaMalloc((void **)&du, (size_t)MMAX * TOPK * I * 2));
    CK(cudaMalloc((void **)&dxe, (size_t)MMAX * TOPK * D * 2));
    CK(cudaMalloc((void **)&deo, (size_t)MMAX * TOPK * D * 2));
    CK(cudaMalloc((void **)&doff, (E + 1) * 4));
    CK(cudaMalloc((void **)&drows, MMAX * TOPK * 4));
    CK(cudaMalloc((void **)&dinv, MMAX * TOPK * 4));

    double floor_us[4];
    {
        static const int Ms[] = {1, 2, 4, 8};
        for (int mi = 0; mi < 4; mi++) {
            const int R = Ms[mi] * TOPK;
            double fl = 0;
            for (int q = 0; q < NS; q++) { /* distinct experts of set q */
                int n = 0;
                for (int i = 0; i < R; i++) {
                    int dup = 0;
                    for (int j = 0; j < i; j++) dup |= hsel[q][j] == hsel[q][i];
                    n += !dup;
                }
                fl += n * ebytes;
            }
            floor_us[mi] = fl / NS / (copy_gbs * 1e9) * 1e6;
        }
    }
    const int *hs_sets[NS];
    for (int q = 0; q < NS; q++) hs_sets[q] = hsel[q];
    const size_t nbad = check_rows(&c, dsel, hs_sets, hrw, hx, drw, w1, w3, w2, dxn, dh, dsh, dy, dout);
    if (only_check) return nbad != 0;
    {
        static const int Ms[] = {1, 2, 4, 8};
        printf("%-12s", "product");
        for (int mi = 0; mi < 4; mi++) {
            cudaGraph_t gr;
            for (int r = -1; r < GR; r++) {
                if (r == 0) {
                    CK(cudaStreamSynchronize(c.stream));
                    CK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
                }
                CK(dic_moe_routed_dec(&c, Ms[mi], TOPK, dsel[(r + NS) % NS], drw, E, w1, w3, w2, dxn, D, D, AB, 10.0f,
                                      dh, I, dsh, D, dy, dout, D));
            }
            CK(cudaStreamEndCapture(c.stream, &gr));
            const double us = graph_median_ms(c.stream, gr, e0, e1) * 1e3 / GR;
            printf(" M=%d %.1f us (floor/us %.2f)", Ms[mi], us, floor_us[mi] / us);
        }
        printf("  [dic_moe_routed_dec, graph us per call]\n");
    }
    if (only_down2) {
        down2_rows(&c, floor_us, dsel, drw, w1, w3, w2, dxn, dh, dsh, dy, dout, e0, e1);
        CK(cudaGetLastError());
        return 0;
    }
    if (only_one) {
        one_rows(&c, floor_us, dsel, drw, w1, w3, w2, dxn, dh, dsh, dy, dout, e0, e1);
        CK(cudaGetLastError());
        return 0;
    }
    lab_moe_dec_one(0); /* the variant table and the decomposition: the two-launch kernels */
    /* variants: lab_moe_dec_config(up, down, nst) + lab_moe_dec_flags(fl); "today" = the unfused sequence */
    enum { Q = DIC_MD_QHW, C = DIC_MD_CVT, X = DIC_MD_XPRE, L = DIC_MD_DLITE, A = Q | C | X | L };
    static const int V[][4] = {{-1, -1, -1, -1}, {0, 0, 0, 0}, {1, 1, 2, 0},     {1, 1, 2, Q},     {2, 1, 2, Q},
                               {1, 1, 2, Q | C}, {2, 1, 2, Q | C}, {1, 1, 2, Q | X}, {2, 1, 2, Q | X}, {1, 1, 2, Q | L},
                               {1, 1, 2, A},     {1, 1, 3, A},     {1, 1, 4, A},     {2, 1, 2, A},     {2, 1, 3, A},
                               {1, 2, 2, A}};
    const int NV = (int)(sizeof V / sizeof V[0]);
    static const int Ms[] = {1, 2, 4, 8};
    double us[32][4];
    for (int mi = 0; mi < 4; mi++) {
        const int M = Ms[mi], R = M * TOPK;
        for (int v = 0; v <= NV; v++) { /* v == NV: today */
            if (v < NV) lab_moe_dec_config(V[v][0], V[v][1], V[v][2]), lab_moe_dec_flags(V[v][3]);
            cudaGraph_t gr;
            /* r = -1: one warm call (attributes, first-launch costs) outside the capture */
            for (int r = -1; r < GR; r++) {
                if (r == 0) {
                    CK(cudaStreamSynchronize(c.stream));
                    CK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
                }
                const int *sel = dsel[(r + NS) % NS];
                if (v < NV) {
                    CK(lab_moe_routed_dec(&c, M, TOPK, sel, drw, E, w1, w3, w2, dxn, D, D, AB, 10.0f, dh, I, dsh, D, dy,
                                          dout, D));
                } else {
                    CK(dic_moe_dispatch_inv(&c, M, TOPK, sel, E, doff, drows, dinv));
                    CK(dic_moe_gather(&c, R, doff, E, drows, TOPK, dxn, D, D, drw, dxe, D, derw));
                    CK(dic_gemm2_grouped_seg(&c, E, w1, w3, doff, R, dxe, D, AB, dg, du, I));
                    CK(dic_swiglu_n(&c, doff, E, R, dg, du, I, I, 10.0f, derw, dh, I));
                    CK(dic_gemm_grouped_seg(&c, E, w2, doff, R, dh, I, AB, deo, D));
                    CK(dic_moe_combine_inv(&c, M, TOPK, dinv, deo, D, D, dy));
                    CK(dic_add_bf16_f32(&c, dy, dsh, (size_t)M * D));
                    CK(dic_f32_to_bf16_n(&c, dy, dout, (size_t)M * D));
                }
            }
            CK(cudaStreamEndCapture(c.stream, &gr));
            us[v][mi] = graph_median_ms(c.stream, gr, e0, e1) * 1e3 / GR;
            /* progress on stderr (unbuffered): a run cut short shows the last row done */
            fprintf(stderr, "row %d (%d,%d,%d,%d) M=%d: %.1f us\n", v, v < NV ? V[v][0] : 9, v < NV ? V[v][1] : 9,
                    v < NV ? V[v][2] : 9, v < NV ? V[v][3] : 9, M, us[v][mi]);
        }
    }
    lab_moe_dec_config(-1, -1, -1);
    lab_moe_dec_flags(-1);
    if (lab_moe_dec_broken()) printf("WARNING: a variant launch failed: rows after it ran variant 0\n");
    printf("graph us per call (GR=%d calls over %d routing sets); variant = up,down,nst[,flags] (lab_moe_dec_config; "
           "-1 = default; flags q = DIC_MD_QHW, c = _CVT, x = _XPRE, l = _DLITE)\n",
           GR, NS);
    printf("%-12s %9s %9s %9s %9s   %s\n", "variant", "M=1", "M=2", "M=4", "M=8", "floor/us at M=1,2,4,8");
    printf("%-12s %9.1f %9.1f %9.1f %9.1f\n", "floor", floor_us[0], floor_us[1], floor_us[2], floor_us[3]);
    for (int v = 0; v <= NV; v++) {
        char nm[32];
        if (v < NV)
            snprintf(nm, sizeof nm, "%d,%d,%d%s%s%s%s", V[v][0], V[v][1], V[v][2], V[v][3] & Q ? ",q" : "",
                     V[v][3] & C ? "c" : "", V[v][3] & X ? "x" : "", V[v][3] & L ? "l" : "");
        else snprintf(nm, sizeof nm, "today");
        printf("%-12s %9.1f %9.1f %9.1f %9.1f   %.2f %.2f %.2f %.2f\n", nm, us[v][0], us[v][1], us[v][2], us[v][3],
               floor_us[0] / us[v][0], floor_us[1] / us[v][1], floor_us[2] / us[v][2], floor_us[3] / us[v][3]);
    }
    /* decomposition (timing-only diagnostics, wrong results): per kernel of variants 1,1,2 and
     * 2,1,2, with parts removed (lab_moe_dec_flags DIC_MD_*), at M = 1 and 8 */
    {
        enum { UP = DIC_MD_UPONLY, DN = DIC_MD_DNONLY, NOW = DIC_MD_NOW, NOQ = DIC_MD_NOQ, NOM = DIC_MD_NOMMA,
               EX = DIC_MD_EXIT, EM = DIC_MD_EMPTY, LIN = DIC_MD_LIN };
        static const struct { const char *nm; int up, fl; } DX[] = {
            {"both", 1, 0},
            {"both q", 1, Q},
            {"both noq", 1, NOQ},
            {"both nomma", 1, NOM},
            {"both stream", 1, NOQ | NOM},
            {"both bare", 1, NOW | NOQ | NOM},
            {"both exit", 1, EX},
            {"both empty", 1, EM},
            {"up", 1, UP},
            {"up q", 1, UP | Q},
            {"up noq", 1, UP | NOQ},
            {"up nomma", 1, UP | NOM},
            {"up now", 1, UP | NOW},
            {"up now+noq", 1, UP | NOW | NOQ},
            {"up stream", 1, UP | NOQ | NOM},
            {"up linstrm", 1, UP | NOQ | NOM | LIN},
            {"up bare", 1, UP | NOW | NOQ | NOM},
            {"up exit", 1, UP | EX},
            {"up empty", 1, UP | EM},
            {"up2", 2, UP},
            {"up2 noq", 2, UP | NOQ},
            {"up2 stream", 2, UP | NOQ | NOM},
            {"up2 bare", 2, UP | NOW | NOQ | NOM},
            {"up2 empty", 2, UP | EM},
            {"down", 1, DN},
            {"down q", 1, DN | Q},
            {"down noq", 1, DN | NOQ},
            {"down nomma", 1, DN | NOM},
            {"down now", 1, DN | NOW},
            {"down now+noq", 1, DN | NOW | NOQ},
            {"down stream", 1, DN | NOQ | NOM},
            {"down linstrm", 1, DN | NOQ | NOM | LIN},
            {"down bare", 1, DN | NOW | NOQ | NOM},
            {"down exit", 1, DN | EX},
            {"down empty", 1, DN | EM},
            /* round 4: the same parts with the options (c = CVT, x = XPRE, l = DLITE; all with q) */
            {"both A", 1, A},
            {"up qc", 1, UP | Q | C},
            {"up qx", 1, UP | Q | X},
            {"up qcx", 1, UP | Q | C | X},
            {"up qc now", 1, UP | Q | C | NOW},
            {"up qcx now", 1, UP | Q | C | X | NOW},
            {"up2 qcx", 2, UP | Q | C | X},
            {"down qc", 1, DN | Q | C},
            {"down ql", 1, DN | Q | L},
            {"down qcl", 1, DN | Q | C | L},
            {"down qc now", 1, DN | Q | C | NOW},
            {"down l bare", 1, DN | L | NOW | NOQ | NOM},
            {"down l exit", 1, DN | L | EX},
        };
        const int ND = (int)(sizeof DX / sizeof DX[0]);
        static const int Md[] = {1, 8};
        double du[96][2];
        for (int mi = 0; mi < 2; mi++) {
            const int M = Md[mi];
            for (int v = 0; v < ND; v++) {
                lab_moe_dec_config(DX[v].up, 1, 2), lab_moe_dec_flags(DX[v].fl);
                cudaGraph_t gr;
                for (int r = -1; r < GR; r++) {
                    if (r == 0) {
                        CK(cudaStreamSynchronize(c.stream));
                        CK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
                    }
                    CK(lab_moe_routed_dec(&c, M, TOPK, dsel[(r + NS) % NS], drw, E, w1, w3, w2, dxn, D, D, AB, 10.0f,
                                          dh, I, dsh, D, dy, dout, D));
                }
                CK(cudaStreamEndCapture(c.stream, &gr));
                du[v][mi] = graph_median_ms(c.stream, gr, e0, e1) * 1e3 / GR;
                fprintf(stderr, "decomposition %s M=%d: %.1f us\n", DX[v].nm, M, du[v][mi]);
            }
        }
        lab_moe_dec_config(-1, -1, -1);
        lab_moe_dec_flags(-1);
        printf("decomposition (graph us per call; variant up,1,2; TIMING ONLY, wrong results): q = hw quantisation,\n"
               "noq = no quantisation, nomma = no convert/MMA, now = no weight loads, stream = loads only,\n"
               "linstrm = the same bytes as contiguous 1 KB runs, bare = none of them, exit = return after the PDL\n"
               "wait, empty = return at entry. Floors (bytes / copy ceiling) M=1: up %.1f down %.1f; M=8: up %.1f "
               "down %.1f\n",
               floor_us[0] * 2 / 3, floor_us[0] / 3, floor_us[3] * 2 / 3, floor_us[3] / 3);
        printf("%-14s %9s %9s\n", "part", "M=1", "M=8");
        for (int v = 0; v < ND; v++) printf("%-14s %9.1f %9.1f\n", DX[v].nm, du[v][0], du[v][1]);
        if (lab_moe_dec_broken()) printf("WARNING: a variant launch failed\n");
    }

    /* router tail at decode sizes: dic_route_rows M = 1, E = 256, top-6, bias (round 2: the scores
     * by the whole CTA) */
    {
        float *dlg, *dbias, *dw;
        int *ds;
        float hl[E], hb[E];
        for (int i = 0; i < E; i++) hl[i] = (float)(rnd() % 2000) / 500.0f - 2.0f, hb[i] = (float)(rnd() % 100) / 1000.0f;
        CK(cudaMalloc((void **)&dlg, sizeof hl));
        CK(cudaMalloc((void **)&dbias, sizeof hb));
        CK(cudaMalloc((void **)&dw, TOPK * 4));
        CK(cudaMalloc((void **)&ds, TOPK * 4));
        CK(cudaMemcpy(dlg, hl, sizeof hl, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dbias, hb, sizeof hb, cudaMemcpyHostToDevice));
        cudaGraph_t gr;
        for (int r = -1; r < GR; r++) {
            if (r == 0) {
                CK(cudaStreamSynchronize(c.stream));
                CK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
            }
            CK(dic_route_rows(&c, 1, dlg, E, 1.0f, dbias, NULL, NULL, TOPK, 2.5f, 1e-20f, 1, ds, dw));
        }
        CK(cudaStreamEndCapture(c.stream, &gr));
        printf("route_rows M=1 E=%d top-%d: %.2f us per call (graph)\n", E, TOPK,
               graph_median_ms(c.stream, gr, e0, e1) * 1e3 / GR);
    }
    one_rows(&c, floor_us, dsel, drw, w1, w3, w2, dxn, dh, dsh, dy, dout, e0, e1);
    down2_rows(&c, floor_us, dsel, drw, w1, w3, w2, dxn, dh, dsh, dy, dout, e0, e1);
    CK(cudaGetLastError());
    return 0;
}
