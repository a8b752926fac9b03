/* lab/q_proj/q_proj_bench.c — the attention's query projection at decode (V4-Flash: q_lora 1024, wq_b FP8
 * 32768 x 1024, 64 heads x 512, rd 64), fast mode (docs/kernels/attention-decode.md §5). First the fused
 * kernel (lab_q_proj, q_proj_fused.cu) against the product's sequence, bitwise in q and qrn (V4-Flash's wq_b
 * has one K split in the sequence's GEMM: the bits the fused kernel claims), with and without the head
 * norm, M = 1, 2, 4, and the sequence against the CPU op (di_q_proj: qrn bitwise, q within 2^-5 of each
 * head's max |q| and norm-wise within 5e-3). Then
 * CUDA-graph us per call of
 *   seq   = dic_rmsnorm + dic_gemm + dic_q_post (the product's three launches),
 *   gemm  = dic_gemm alone (the sequence's middle launch),
 *   fused = lab_q_proj (one launch: k_q_proj; V4 head norm: clusters of 8),
 *   st3   = fused with 3 ring stages (4 CTAs per SM instead of 5),
 *   v41   = fused without the head norm (V4.1: no cluster),
 * at M = 1, 2, 4 (the fused kernel's range), weights rotated over >= 256 MB so L2 does not serve
 * them; the floor is the weight bytes at the d2d copy ceiling measured in the same run.
 * Usage: q_proj_bench (about 10 s). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ops/cuda/dic_model.h"
#include "io/numfmt.h"
#include "ops/ops.h"
#include "q_proj/q_proj_lab.h"

#define GR 50 /* calls per graph */
#define NC_MAX 64

enum { QK = 1024, QH = 64, QHD = 512, QRD = 64, QN = QH * QHD };

static dic_wmat g_w[NC_MAX];
static int g_nc;
static size_t g_wbytes;
static unsigned char *g_hw; /* copy 0's weight bytes (the CPU reference; every scale byte 118) */

static void make_w(void) {
    size_t wb = (size_t)QN * QK, sb = (size_t)(QN / 128) * (QK / 128);
    g_wbytes = wb + sb;
    g_nc = (int)(((size_t)256 << 20) / g_wbytes) + 1;
    if (g_nc > NC_MAX) g_nc = NC_MAX;
    unsigned char *h = malloc(wb);
    for (size_t i = 0; i < wb; i++) {
        unsigned char b = (unsigned char)rnd();
        if ((b & 0x7F) == 0x7F) b ^= 1;
        h[i] = b;
    }
    for (int i = 0; i < g_nc; i++) {
        void *dw, *ds;
        CK(cudaMalloc(&dw, wb));
        CK(cudaMalloc(&ds, sb));
        CK(cudaMemcpy(dw, h, wb, cudaMemcpyHostToDevice));
        CK(cudaMemset(ds, 118, sb));
        g_w[i] = (dic_wmat){2, QN, QK, 128, dw, ds};
    }
    g_hw = h;
}

static cudaEvent_t e0, e1;
static const unsigned short *g_hqr; /* host copies of the inputs (the CPU reference) */
static const float *g_hg, *g_hcs, *g_hsn;

/* the CPU op di_q_proj on the same inputs against the sequence's q / qrn (hq0, hn0): 0 = ok */
static int cpu_check(int M, int norm, const unsigned short *hq0, const unsigned short *hn0) {
    di_wmat pw;
    di_exec x;
    unsigned char *sc = malloc((size_t)(QN / 128) * (QK / 128));
    memset(sc, 118, (size_t)(QN / 128) * (QK / 128));
    if (di_wmat_pack(&pw, DI_WFMT_FP8, g_hw, sc, QN, QK, 128, NULL) != DEEPINFER_OK ||
        di_exec_init(&x, 0, NULL) != DEEPINFER_OK) {
        fprintf(stderr, "CPU reference: setup failed\n");
        exit(1);
    }
    unsigned short *cq = malloc((size_t)M * QN * 2), *cn = malloc((size_t)M * QK * 2);
    di_q_proj(&x, M, g_hqr, QK, g_hg, 1e-6f, cn, QK, &pw, 128, cq, QN, QH, QHD, norm, QRD, g_hcs, g_hsn);
    int bad = memcmp(cn, hn0, (size_t)M * QK * 2) != 0;
    double num = 0, den = 0;
    for (int m = 0; m < M; m++)
        for (int h = 0; h < QH; h++) {
            const size_t o = (size_t)m * QN + (size_t)h * QHD;
            double mx = 0;
            for (int i = 0; i < QHD; i++) mx = fmax(mx, fabs(di_bf16_to_f32(cq[o + i])));
            for (int i = 0; i < QHD; i++) {
                const double a = di_bf16_to_f32(hq0[o + i]), b = di_bf16_to_f32(cq[o + i]), e = fabs(a - b);
                num += e * e, den += b * b;
                bad += !(e <= 0x1p-5 * mx);
            }
        }
    const double rel = sqrt(num / (den > 0 ? den : 1));
    bad += !(rel <= 5e-3);
    printf("check M=%d norm=%d: the sequence vs the CPU: %s (q norm %.2e)\n", M, norm, bad ? "MISMATCH" : "ok", rel);
    di_wmat_free(&pw);
    di_exec_free(&x);
    free(sc), free(cq), free(cn);
    return bad != 0;
}
static unsigned short *d_qr, *d_qrn, *d_q;
static float *d_g, *d_cs, *d_sn;

enum { V_SEQ, V_GEMM, V_FUSED, V_ST3, V_V41 };

static void call(dic_ctx *c, int v, int M, const dic_wmat *w) {
    const float eps = 1e-6f;
    switch (v) {
    case V_SEQ:
        CK(dic_rmsnorm(c, M, d_qr, QK, d_g, QK, eps, d_qrn, QK));
        CK(dic_gemm(c, M, d_qrn, QK, w, 128, NULL, d_q, QN));
        CK(dic_q_post(c, M, d_q, QN, QH, QHD, 1, eps, QRD, d_cs, d_sn));
        break;
    case V_GEMM: CK(dic_gemm(c, M, d_qrn, QK, w, 128, NULL, d_q, QN)); break;
    default:
        CK(lab_q_proj(c, M, d_qr, QK, d_g, eps, d_qrn, QK, w, 128, d_q, QN, QH, QHD, v != V_V41, QRD, d_cs, d_sn));
        break;
    }
}

static double time_calls(dic_ctx *c, int v, int M) {
    lab_q_proj_config(v == V_ST3 ? 3 : 0);
    for (int i = 0; i < 2; i++) call(c, v, M, &g_w[i % g_nc]); /* eager warm-up (attributes) */
    CK(cudaStreamSynchronize(c->stream));
    cudaGraph_t gr;
    CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < GR; r++) call(c, v, M, &g_w[r % g_nc]);
    CK(cudaStreamEndCapture(c->stream, &gr));
    double us = graph_median_ms(c->stream, gr, e0, e1) * 1e3 / GR;
    lab_q_proj_config(0);
    return us;
}

int main(void) {
    dic_ctx c;
    bench_ctx_init(&c, dic_gemm_scratch(8, QN, QK));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const double gbs = copy_ceiling_gbs(c.stream, e0, e1);
    make_w();
    {
        static unsigned short h[8 * QK];
        for (int i = 0; i < 8 * QK; i++) h[i] = (unsigned short)((rnd() & 0x807F) | ((0x78 + rnd() % 8) << 7));
        CK(cudaMalloc((void **)&d_qr, sizeof h));
        CK(cudaMemcpy(d_qr, h, sizeof h, cudaMemcpyHostToDevice));
        static float g[QK], t[8 * QRD / 2], u[8 * QRD / 2];
        g_hqr = h, g_hg = g, g_hcs = t, g_hsn = u;
        for (int i = 0; i < QK; i++) g[i] = 0.5f + (float)(rnd() % 1000) * 1e-3f;
        for (int i = 0; i < 8 * QRD / 2; i++) {
            float a = (float)(rnd() % 6283) * 1e-3f;
            t[i] = cosf(a), u[i] = sinf(a);
        }
        CK(cudaMalloc((void **)&d_g, sizeof g));
        CK(cudaMemcpy(d_g, g, sizeof g, cudaMemcpyHostToDevice));
        CK(cudaMalloc((void **)&d_cs, sizeof t));
        CK(cudaMemcpy(d_cs, t, sizeof t, cudaMemcpyHostToDevice));
        CK(cudaMalloc((void **)&d_sn, sizeof u));
        CK(cudaMemcpy(d_sn, u, sizeof u, cudaMemcpyHostToDevice));
        CK(cudaMalloc((void **)&d_qrn, (size_t)8 * QK * 2));
        CK(cudaMalloc((void **)&d_q, (size_t)8 * QN * 2));
    }
    const double floor_us = (double)g_wbytes / gbs / 1e3;
    printf("wq_b FP8 %dx%d, %d copies (%.0f MB), floor %.2f us per call at the copy ceiling\n", QN, QK, g_nc,
           g_nc * g_wbytes / 1e6, floor_us);
    lab_q_proj_enable(1);
    int nbad = 0;
    { /* the check: q and qrn of the fused kernel vs the sequence, norm 1 / 0, M = 1, 2, 4 */
        unsigned short *hq0 = malloc((size_t)4 * QN * 2), *hq1 = malloc((size_t)4 * QN * 2);
        unsigned short hn0[4 * QK], hn1[4 * QK];
        for (int M = 1; M <= 4; M *= 2)
            for (int norm = 1; norm >= 0; norm--) {
                const float eps = 1e-6f;
                for (int f = 0; f < 2; f++) {
                    CK(cudaMemset(d_q, 0xFF, (size_t)4 * QN * 2));
                    CK(cudaMemset(d_qrn, 0xFF, (size_t)4 * QK * 2));
                    if (f) {
                        CK(lab_q_proj(&c, M, d_qr, QK, d_g, eps, d_qrn, QK, &g_w[0], 128, d_q, QN, QH, QHD, norm, QRD,
                                      d_cs, d_sn));
                    } else {
                        CK(dic_rmsnorm(&c, M, d_qr, QK, d_g, QK, eps, d_qrn, QK));
                        CK(dic_gemm(&c, M, d_qrn, QK, &g_w[0], 128, NULL, d_q, QN));
                        CK(dic_q_post(&c, M, d_q, QN, QH, QHD, norm, eps, QRD, d_cs, d_sn));
                    }
                    CK(cudaStreamSynchronize(c.stream));
                    CK(cudaMemcpy(f ? hq1 : hq0, d_q, (size_t)M * QN * 2, cudaMemcpyDeviceToHost));
                    CK(cudaMemcpy(f ? hn1 : hn0, d_qrn, (size_t)M * QK * 2, cudaMemcpyDeviceToHost));
                }
                const int same = !memcmp(hq0, hq1, (size_t)M * QN * 2) && !memcmp(hn0, hn1, (size_t)M * QK * 2);
                printf("check M=%d norm=%d: fused vs the sequence: %s\n", M, norm, same ? "bitwise equal" : "MISMATCH");
                nbad += !same + cpu_check(M, norm, hq0, hn0);
            }
        free(hq0), free(hq1);
    }
    static const char *vn[] = {"seq", "gemm", "fused", "st3", "v41"};
    for (int M = 1; M <= 4; M *= 2) {
        printf("q_proj M=%d:", M);
        double us[5];
        for (int v = 0; v < 5; v++) {
            us[v] = time_calls(&c, v, M);
            printf(" %s %.2f", vn[v], us[v]);
        }
        printf(" | fused/floor %.2f (floor/fused %.2f), seq - fused %.2f us\n", us[V_FUSED] / floor_us,
               floor_us / us[V_FUSED], us[V_SEQ] - us[V_FUSED]);
        fflush(stdout);
    }
    for (int i = 0; i < g_nc; i++) cudaFree((void *)g_w[i].w), cudaFree((void *)g_w[i].scale);
    return nbad != 0;
}
