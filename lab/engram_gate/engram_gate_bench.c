/* lab/engram_gate/engram_gate_bench.c — the Engram gate at V4.1-Flash decode sizes (dim 5120, 4 copies;
 * docs/kernels/engram-gate.md): first lab variant 0 (lab_engram_gate_rows: k_engram_gate, one warp per
 * (token, copy)) against the product (dic_engram_gate_rows: k_engram_gate_cta, one CTA per (token, copy)),
 * bitwise in R and the gates, and the product against the CPU op (di_engram_gate_rows: gates bitwise
 * or 1 ulp of libm's expf, then R within 1 bf16 ulp), M = 1, 2, 4, 8; then graph us per call of both.
 * Each graph replays GR calls cycling NS qk tables (NS * 80 KB > L2: qk comes from DRAM as in a decode
 * step, where the step's other bytes evict it) on one R and kv (in L2, as after the GEMM that writes kv).
 * The floor: the call's bytes (R read + written, key + value, qk) / the d2d copy ceiling of the same run.
 * Microbench calls back to back under-state a kernel's in-step latency (its predecessor's PDL wait and
 * cold code); the step figure is the bench ablation `egate=1` (docs/kernels/engram-gate.md §4). Runs in a few seconds. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "engram_gate/engram_gate_lab.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

#define DIM 5120
#define HC 4
#define MMAX 8
#define NS 1024
#define GR 32

int main(void) {
    dic_ctx c;
    bench_ctx_init(&c, (size_t)1 << 20);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const double copy_gbs = copy_ceiling_gbs(c.stream, e0, e1);
    const size_t ldkv = (size_t)(HC + 1) * DIM, qkn = (size_t)HC * DIM;
    uint16_t *hR = malloc((size_t)MMAX * HC * DIM * 2), *hkv = malloc((size_t)MMAX * ldkv * 2);
    float *hq = malloc(qkn * 4);
    for (size_t i = 0; i < (size_t)MMAX * HC * DIM; i++) hR[i] = (uint16_t)(0x3c00u + (rnd() & 0x3ff)) ^ ((rnd() & 1) << 15);
    for (size_t i = 0; i < (size_t)MMAX * ldkv; i++) hkv[i] = (uint16_t)(0x3800u + (rnd() & 0x3ff)) ^ ((rnd() & 1) << 15);
    for (size_t i = 0; i < qkn; i++) hq[i] = 1.0f + (float)(rnd() % 1000) / 5000.0f;
    uint16_t *dR, *dkv;
    float *dq, *dg;
    CK(cudaMalloc((void **)&dR, (size_t)MMAX * HC * DIM * 2));
    CK(cudaMalloc((void **)&dkv, (size_t)MMAX * ldkv * 2));
    CK(cudaMalloc((void **)&dq, (size_t)NS * qkn * 4));
    CK(cudaMalloc((void **)&dg, (size_t)MMAX * HC * 4));
    CK(cudaMemcpy(dkv, hkv, (size_t)MMAX * ldkv * 2, cudaMemcpyHostToDevice));
    for (int i = 0; i < NS; i++) CK(cudaMemcpy(dq + (size_t)i * qkn, hq, qkn * 4, cudaMemcpyHostToDevice));
    static const int Ms[] = {1, 2, 4, 8};
    int nbad = 0;
    { /* the check: R and gates of one call, variant 0 vs the product */
        uint16_t *r0 = malloc((size_t)MMAX * HC * DIM * 2), *r1 = malloc((size_t)MMAX * HC * DIM * 2);
        float g0[MMAX * HC], g1[MMAX * HC];
        for (int im = 0; im < 4; im++) {
            const int M = Ms[im];
            for (int v = 0; v < 2; v++) {
                CK(cudaMemcpy(dR, hR, (size_t)MMAX * HC * DIM * 2, cudaMemcpyHostToDevice));
                if (v == 0) {
                    lab_engram_gate_variant(0);
                    CK(lab_engram_gate_rows(&c, M, NULL, dkv, ldkv, dR, dq, DIM, HC, 1e-20f, dg));
                    lab_engram_gate_variant(-1);
                } else {
                    CK(dic_engram_gate_rows(&c, M, NULL, dkv, ldkv, dR, dq, DIM, HC, 1e-20f, dg));
                }
                CK(cudaStreamSynchronize(c.stream));
                CK(cudaMemcpy(v ? r1 : r0, dR, (size_t)M * HC * DIM * 2, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(v ? g1 : g0, dg, (size_t)M * HC * 4, cudaMemcpyDeviceToHost));
            }
            const int same = !memcmp(r0, r1, (size_t)M * HC * DIM * 2) && !memcmp(g0, g1, (size_t)M * HC * 4);
            /* the CPU op on the same inputs */
            uint16_t *rc = malloc((size_t)M * HC * DIM * 2);
            float gc[MMAX * HC], *kvf = malloc(ldkv * 4), *hh = malloc((size_t)DIM * 4);
            memcpy(rc, hR, (size_t)M * HC * DIM * 2);
            di_engram_gate_rows(NULL, M, NULL, hkv, ldkv, rc, hq, DIM, HC, 1e-20f, kvf, hh, gc);
            int far = 0, near = 0;
            for (int i = 0; i < M * HC; i++) {
                if (!memcmp(&g1[i], &gc[i], 4)) continue;
                int32_t a, b;
                memcpy(&a, &g1[i], 4), memcpy(&b, &gc[i], 4);
                if (a - b == 1 || b - a == 1) near++;
                else far++;
            }
            for (size_t i = 0; i < (size_t)M * HC * DIM; i++) {
                const int du = (int)r1[i] - (int)rc[i];
                const int gsame = !memcmp(&g1[i / DIM], &gc[i / DIM], 4);
                if (du && (gsame || du > 1 || du < -1)) far++;
            }
            printf("check M=%d: variant 0 vs the product: %s; product vs the CPU: %s (%d gates 1 ulp off)\n", M,
                   same ? "bitwise equal" : "MISMATCH", far ? "MISMATCH" : "ok", near);
            nbad += !same + (far != 0);
            free(rc), free(kvf), free(hh);
        }
        free(r0), free(r1);
    }
    printf("graph us per call (GR = %d calls cycling %d qk tables), dim %d, %d copies; floor = bytes / copy "
           "ceiling\n%-3s %8s %8s %8s %8s\n", GR, NS, DIM, HC, "M", "floor", "v0", "product", "v0/prod");
    for (int im = 0; im < 4; im++) {
        const int M = Ms[im];
        double us[2];
        for (int v = 0; v < 2; v++) {
            CK(cudaMemcpy(dR, hR, (size_t)MMAX * HC * DIM * 2, cudaMemcpyHostToDevice)); /* R grows by g * value per call: reset */
            cudaGraph_t gr;
            CK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeRelaxed));
            for (int r = 0; r < GR; r++)
                if (v == 0) {
                    lab_engram_gate_variant(0);
                    CK(lab_engram_gate_rows(&c, M, NULL, dkv, ldkv, dR, dq + (size_t)((r * 37) % NS) * qkn, DIM, HC,
                                            1e-20f, dg));
                    lab_engram_gate_variant(-1);
                } else {
                    CK(dic_engram_gate_rows(&c, M, NULL, dkv, ldkv, dR, dq + (size_t)((r * 37) % NS) * qkn, DIM, HC,
                                            1e-20f, dg));
                }
            CK(cudaStreamEndCapture(c.stream, &gr));
            us[v] = graph_median_ms(c.stream, gr, e0, e1) * 1e3 / GR;
        }
        const double bytes = (double)M * (HC * DIM * 2 * 2 + ldkv * 2) + (double)qkn * 4;
        printf("%-3d %8.2f %8.2f %8.2f %8.2f\n", M, bytes / (copy_gbs * 1e3), us[0], us[1], us[0] / us[1]);
    }
    cudaFree(dR), cudaFree(dkv), cudaFree(dq), cudaFree(dg);
    free(hR), free(hkv), free(hq);
    return nbad != 0;
}
