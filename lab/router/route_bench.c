/* lab/router/route_bench.c — the MoE router at decode sizes (V4-Flash: E = 256, V4.1-Flash: E = 384;
 * hidden K = 4096, BF16 gate, top-6 with bias), fast mode (docs/kernels/router.md). First every lab
 * variant (lab_route_gate, router_variants.cu) against the product (dic_route_gate) and the product
 * against the op sequence with the GEMV forced (its sums: the bits it claims), bitwise in logits, sel and
 * w, plain and hash layers, M = 1, 2, 4, 8, and the product against the CPU op (di_route_gate: logits
 * within the GEMM rounding, norm-wise <= 1e-4; the differing sel printed). Then graph us per call of
 *   seq     today's two launches: dic_gemm (GEMV at M <= 4, tensor cores at M = 5..8) into
 *           the fp32 logits, then dic_route_rows
 *   seqgv   the same with the GEMV forced at every M (the fused kernel's sums)
 *   gemm    the gate GEMM alone (auto dispatch); route: dic_route_rows alone
 *   fused   dic_route_gate (the product: one launch)
 *   f0 f1 f2 lab_route_gate in variant 0 (k_route_gate), 1 (last-arriver handoff: the product's),
 *           2 (tagged slots polled by CTA 0) (lab_route_gate_tune; same bits)
 *   h0 h1 h2 the same variants on a hash layer (V4 layers 0-2: ids from tid2eid[token], no bias)
 * against the floor: the gate's bytes / the d2d copy ceiling of the same run. Each graph
 * replays GR calls cycling NS gate matrices (NS * 3 MB > L2, so the weights come from DRAM
 * as in a decode step, where every layer has its own gate). Runs in a few seconds. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "router/router_lab.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

#define K 4096
#define TOPK 6
#define NS 32
#define GR 32
#define MMAX 8
#define EMAX 384

enum { V_SEQ, V_SEQGV, V_GEMM, V_ROUTE, V_FUSED, V_F0, V_F1, V_F2, V_H0, V_H1, V_H2, NV };
static const char *vname[NV] = {"seq", "seqgv", "gemm", "route", "fused", "f0", "f1", "f2", "h0", "h1", "h2"};


int main(void) {
    dic_ctx c;
    bench_ctx_init(&c, (size_t)16 << 20);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const double copy_gbs = copy_ceiling_gbs(c.stream, e0, e1);

    /* NS gates of EMAX x K bf16 (small finite values), activations, bias, outputs */
    const size_t gbytes = (size_t)EMAX * K * 2;
    uint16_t *hg = malloc(gbytes), *hx = malloc((size_t)MMAX * K * 2);
    for (size_t i = 0; i < (size_t)EMAX * K; i++) hg[i] = (uint16_t)(0x3c00u + (rnd() & 0x3ff)) ^ ((rnd() & 1) << 15);
    for (size_t i = 0; i < (size_t)MMAX * K; i++) hx[i] = (uint16_t)(0x3f00u + (rnd() & 0xff)) ^ ((rnd() & 1) << 15);
    uint8_t *pool;
    CK(cudaMalloc((void **)&pool, NS * gbytes));
    for (int i = 0; i < NS; i++) CK(cudaMemcpy(pool + i * gbytes, hg, gbytes, cudaMemcpyHostToDevice));
    uint16_t *dx;
    float *dlg, *dbias, *dw;
    int *ds;
    float hb[EMAX];
    for (int i = 0; i < EMAX; i++) hb[i] = (float)(rnd() % 100) / 1000.0f;
    CK(cudaMalloc((void **)&dx, (size_t)MMAX * K * 2));
    CK(cudaMemcpy(dx, hx, (size_t)MMAX * K * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&dlg, (size_t)MMAX * EMAX * 4));
    CK(cudaMemset(dlg, 0, (size_t)MMAX * EMAX * 4));
    CK(cudaMalloc((void **)&dbias, sizeof hb));
    CK(cudaMemcpy(dbias, hb, sizeof hb, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&dw, MMAX * TOPK * 4));
    CK(cudaMalloc((void **)&ds, MMAX * TOPK * 4));
    int32_t ht2e[1000 * TOPK], htok[MMAX];
    for (int i = 0; i < 1000 * TOPK; i++) ht2e[i] = (int32_t)(rnd() % 256);
    for (int i = 0; i < MMAX; i++) htok[i] = (int32_t)(rnd() % 1000);
    int32_t *dt2e, *dtok;
    CK(cudaMalloc((void **)&dt2e, sizeof ht2e));
    CK(cudaMemcpy(dt2e, ht2e, sizeof ht2e, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&dtok, sizeof htok));
    CK(cudaMemcpy(dtok, htok, sizeof htok, cudaMemcpyHostToDevice));

    static const int Es[] = {256, 384};
    static const int Ms[] = {1, 2, 4, 8};
    /* the checks: path p = 0 the product, 1 the sequence with the GEMV forced, 2 + v lab variant v */
    size_t nbad = 0;
    {
        float *lg = malloc((size_t)MMAX * EMAX * 4), *lg0 = malloc((size_t)MMAX * EMAX * 4);
        float *w = malloc(MMAX * TOPK * 4), *w0 = malloc(MMAX * TOPK * 4);
        int *sl = malloc(MMAX * TOPK * 4), *sl0 = malloc(MMAX * TOPK * 4);
        for (int ie = 0; ie < 2; ie++)
            for (int im = 0; im < 4; im++)
                for (int hash = 0; hash < 2; hash++)
                    for (int p = 0; p < 5; p++) {
                        const int E = Es[ie], M = Ms[im];
                        dic_wmat W = {0, E, K, 0, pool, NULL};
                        CK(cudaMemset(dlg, 0xFF, (size_t)MMAX * EMAX * 4));
                        CK(cudaMemset(ds, 0xFF, MMAX * TOPK * 4));
                        CK(cudaMemset(dw, 0xFF, MMAX * TOPK * 4));
                        const float *bias = hash ? NULL : dbias;
                        const int32_t *t2e = hash ? dt2e : NULL, *tok = hash ? dtok : NULL;
                        if (p == 0) {
                            CK(dic_route_gate(&c, M, dx, K, &W, dlg, E, 1.0f, bias, t2e, tok, TOPK, 2.5f, 1e-20f, 1, ds,
                                              dw));
                        } else if (p == 1) {
                            CK(dic_gemm_float_fast_launch(c.stream, M, dx, K, &W, dlg, NULL, (size_t)E,
                                                          DIC_GEMMF_PATH_GEMV));
                            CK(dic_route_rows(&c, M, dlg, E, 1.0f, bias, t2e, tok, TOPK, 2.5f, 1e-20f, 1, ds, dw));
                        } else {
                            lab_route_gate_tune(p - 2);
                            CK(lab_route_gate(&c, M, dx, K, &W, dlg, E, 1.0f, bias, t2e, tok, TOPK, 2.5f, 1e-20f, 1, ds,
                                              dw));
                            lab_route_gate_tune(-1);
                        }
                        CK(cudaStreamSynchronize(c.stream));
                        float *L = p ? lg : lg0, *Wt = p ? w : w0;
                        int *S = p ? sl : sl0;
                        CK(cudaMemcpy(L, dlg, (size_t)M * E * 4, cudaMemcpyDeviceToHost));
                        CK(cudaMemcpy(Wt, dw, (size_t)M * TOPK * 4, cudaMemcpyDeviceToHost));
                        CK(cudaMemcpy(S, ds, (size_t)M * TOPK * 4, cudaMemcpyDeviceToHost));
                        if (p == 0) { /* the CPU op on the same inputs */
                            di_wmat pw;
                            di_exec xe;
                            float *cl = malloc((size_t)M * E * 4), *cw = malloc(TOPK * M * 4);
                            int *cs = malloc(TOPK * M * 4);
                            if (di_exec_init(&xe, 0, NULL) != DEEPINFER_OK ||
                                di_wmat_pack(&pw, DI_WFMT_BF16, hg, NULL, E, K, 0, NULL) != DEEPINFER_OK) {
                                fprintf(stderr, "CPU reference: setup failed\n");
                                exit(1);
                            }
                            di_route_gate(&xe, M, hx, K, &pw, cl, E, 1.0f, hash ? NULL : hb, hash ? ht2e : NULL,
                                          hash ? htok : NULL, TOPK, 2.5f, 1e-20f, 1, cs, cw);
                            double num = 0, den = 0;
                            for (int i = 0; i < M * E; i++)
                                num += ((double)lg0[i] - cl[i]) * ((double)lg0[i] - cl[i]), den += (double)cl[i] * cl[i];
                            const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
                            int nsel = 0;
                            for (int i = 0; i < M * TOPK; i++) nsel += sl0[i] != cs[i];
                            if (!(rel <= 1e-4)) {
                                printf("MISMATCH E=%d M=%d hash=%d: product logits vs the CPU norm %.2e\n", E, M, hash,
                                       rel);
                                nbad++;
                            } else if (nsel)
                                printf("  E=%d M=%d hash=%d: %d of %d sel differ from the CPU (logits norm %.2e)\n", E,
                                       M, hash, nsel, M * TOPK, rel);
                            di_wmat_free(&pw);
                            di_exec_free(&xe);
                            free(cl), free(cw), free(cs);
                            continue;
                        }
                        const size_t n = (memcmp(lg, lg0, (size_t)M * E * 4) != 0) +
                                         (memcmp(w, w0, (size_t)M * TOPK * 4) != 0) +
                                         (memcmp(sl, sl0, (size_t)M * TOPK * 4) != 0);
                        if (n)
                            printf("MISMATCH E=%d M=%d hash=%d %s: logits / w / sel differ from the product\n", E, M,
                                   hash, p == 1 ? "sequence (GEMV)" : vname[V_F0 + p - 2]);
                        nbad += n;
                    }
        printf("check: lab variants 0, 1, 2 and the GEMV sequence vs the product, E = 256 / 384, M = 1, 2, 4, 8, "
               "plain and hash: %s\n", nbad ? "MISMATCH" : "bitwise equal");
        free(lg), free(lg0), free(w), free(w0), free(sl), free(sl0);
    }
    printf("graph us per call (GR = %d calls cycling %d gates); floor = gate bytes / copy ceiling\n", GR, NS);
    printf("%-5s %-3s %8s", "E", "M", "floor");
    for (int v = 0; v < NV; v++) printf(" %8s", vname[v]);
    printf(" %8s %8s\n", "fused/fl", "saved");
    for (int ie = 0; ie < 2; ie++)
        for (int im = 0; im < 4; im++) {
            const int E = Es[ie], M = Ms[im];
            const double floor_us = ((double)E * K * 2 + (double)M * K * 2) / (copy_gbs * 1e9) * 1e6;
            double us[NV];
            for (int v = 0; v < NV; v++) {
                cudaGraph_t gr;
                for (int r = -1; r < GR; r++) {
                    if (r == 0) {
                        CK(cudaStreamSynchronize(c.stream));
                        CK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
                    }
                    const int i = (r + NS) % NS;
                    dic_wmat W = {0, E, K, 0, pool + (size_t)i * gbytes, NULL};
                    if (v == V_SEQ || v == V_GEMM) CK(dic_gemm(&c, M, dx, K, &W, 0, dlg, NULL, (size_t)E));
                    if (v == V_SEQGV)
                        CK(dic_gemm_float_fast_launch(c.stream, M, dx, K, &W, dlg, NULL, (size_t)E,
                                                      DIC_GEMMF_PATH_GEMV));
                    if (v == V_SEQ || v == V_SEQGV || v == V_ROUTE)
                        CK(dic_route_rows(&c, M, dlg, E, 1.0f, dbias, NULL, NULL, TOPK, 2.5f, 1e-20f, 1, ds, dw));
                    if (v >= V_FUSED) {
                        const int hash = v >= V_H0;
                        if (!dic_route_gate_ok(&c, M, dx, K, &W, E, TOPK, NULL, NULL)) {
                            fprintf(stderr, "dic_route_gate_ok refused E=%d M=%d\n", E, M);
                            exit(1);
                        }
                        if (v == V_FUSED) {
                            CK(dic_route_gate(&c, M, dx, K, &W, dlg, E, 1.0f, dbias, NULL, NULL, TOPK, 2.5f, 1e-20f, 1,
                                              ds, dw));
                        } else {
                            lab_route_gate_tune(hash ? v - V_H0 : v - V_F0);
                            CK(lab_route_gate(&c, M, dx, K, &W, dlg, E, 1.0f, hash ? NULL : dbias, hash ? dt2e : NULL,
                                              hash ? dtok : NULL, TOPK, 2.5f, 1e-20f, 1, ds, dw));
                            lab_route_gate_tune(-1);
                        }
                    }
                }
                CK(cudaStreamEndCapture(c.stream, &gr));
                us[v] = graph_median_ms(c.stream, gr, e0, e1) * 1e3 / GR;
            }
            printf("%-5d %-3d %8.2f", E, M, floor_us);
            for (int v = 0; v < NV; v++) printf(" %8.2f", us[v]);
            printf(" %8.2f %8.2f\n", us[V_FUSED] / floor_us, us[V_SEQ] - us[V_FUSED]);
        }
    CK(cudaGetLastError());
    return nbad != 0;
}
