/* gtest_engram_gate.c — the device Engram gate (dic_model.h dic_engram_gate_rows) against the CPU
 * op (src/ops/cpu/engram_gate.c): R bitwise, gates within 1 ulp of the libm expf in a small
 * fraction (printed); the gate kernel's variants.
 * Outputs poisoned with 0xFF bytes; each test runs all its shapes, prints shape, element and both
 * values of the first mismatches, then fails (split from gtest_model_ops.c by family). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/model_ops_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

/* Engram gate, one case: R and gates vs the CPU (the gate's libm expf may differ by 1 ulp, then R by at
 * most 1 bf16 ulp: counted in *near), and a second launch bitwise equal to the first. rmap_kind 0: none,
 * 1: distinct rows shuffled, 2: reversed. *bad += the values outside that. */
static void eg_case(dic_ctx *c, int M, int dim, int hc, int rmap_kind, uint64_t *s, size_t *near, size_t *bad) {
    const int T = M + 4;
    size_t ldkv = (size_t)(hc + 1) * dim + 8, nR = (size_t)T * hc * dim;
    int64_t *rmap = NULL;
    if (rmap_kind == 1) { /* distinct rows, shuffled */
        rmap = malloc((size_t)M * 8);
        for (int i = 0; i < M; i++) rmap[i] = (int64_t)((i * 7 + 2) % T);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < i; j++)
                if (rmap[j] == rmap[i]) rmap[i] = T - 1 - (i % 4); /* keep distinct (tiny M cases) */
    } else if (rmap_kind == 2) {
        rmap = malloc((size_t)M * 8);
        for (int i = 0; i < M; i++) rmap[i] = (int64_t)(T - 1 - i);
    }
    uint16_t *kv = malloc((size_t)M * ldkv * 2), *R = malloc(nR * 2), *R0 = malloc(nR * 2);
    float *qk = malloc((size_t)hc * dim * 4), *gates = malloc((size_t)T * hc * 4);
    for (size_t i = 0; i < (size_t)M * ldkv; i++) kv[i] = di_f32_to_bf16(gt_normal(s));
    for (size_t i = 0; i < nR; i++) R[i] = di_f32_to_bf16(gt_normal(s) * 2.0f);
    for (size_t i = 0; i < (size_t)hc * dim; i++) qk[i] = 1.0f + 0.2f * gt_rand_unit(s);
    memcpy(R0, R, nR * 2);
    memset(gates, 0xFF, (size_t)T * hc * 4);
    uint16_t *dkv = gt_to_dev(kv, (size_t)M * ldkv * 2), *dR = gt_to_dev(R, nR * 2), *dR2 = gt_to_dev(R, nR * 2);
    float *dqk = gt_to_dev(qk, (size_t)hc * dim * 4), *dg = gt_dev_poison((size_t)T * hc * 4),
          *dg2 = gt_dev_poison((size_t)T * hc * 4);
    int64_t *drm = rmap ? gt_to_dev(rmap, (size_t)M * 8) : NULL;
    CHECK(dkv && dR && dR2 && dqk && dg && dg2 && (!rmap || drm));
    float *kvf = malloc(ldkv * 4), *h = malloc((size_t)dim * 4);
    di_engram_gate_rows(NULL, M, rmap, kv, ldkv, R, qk, dim, hc, 1e-6f, kvf, h, gates);
    CUDA_SYNC_CHECK(dic_engram_gate_rows(c, M, drm, dkv, ldkv, dR, dqk, dim, hc, 1e-6f, dg));
    CUDA_SYNC_CHECK(dic_engram_gate_rows(c, M, drm, dkv, ldkv, dR2, dqk, dim, hc, 1e-6f, dg2));
    uint16_t *gR = gt_d2h(dR, nR * 2), *gR2 = gt_d2h(dR2, nR * 2);
    float *gg = gt_d2h(dg, (size_t)T * hc * 4), *gg2 = gt_d2h(dg2, (size_t)T * hc * 4);
    CHECK(gR && gR2 && gg && gg2);
    size_t b = 0, moved = 0;
    for (size_t i = 0; i < (size_t)T * hc; i++) {
        if (memcmp(&gg[i], &gg2[i], 4)) b++; /* two launches: bitwise */
        if (!memcmp(&gg[i], &gates[i], 4)) continue;
        long long u = ulps32(gg[i], gates[i]);
        fprintf(stderr, "  engram gate M=%d dim=%d [%zu][%zu]: gpu %.9g cpu %.9g (%lld ulp)\n", M, dim, i / hc, i % hc,
                gg[i], gates[i], u);
        if (u <= 1) (*near)++;
        else b++;
    }
    for (size_t i = 0; i < nR; i++) {
        moved += R[i] != R0[i];
        b += gR[i] != gR2[i];
        if (gR[i] == R[i]) continue;
        int du = abs((int)gR[i] - (int)R[i]);
        size_t row = i / dim;
        int gate_near = !memcmp(&gg[row], &gates[row], 4) ? 0 : 1;
        if (!(gate_near && du <= 1)) { /* only a 1-ulp gate difference may move R, by 1 bf16 ulp */
            if (b < 8)
                fprintf(stderr, "  engram R M=%d dim=%d [%zu][%zu]: gpu %04x (%g) cpu %04x (%g)\n", M, dim, row, i % dim,
                        gR[i], di_bf16_to_f32(gR[i]), R[i], di_bf16_to_f32(R[i]));
            b++;
        }
    }
    if (!moved) fprintf(stderr, "engram gate M=%d dim=%d hc=%d: R unchanged (test inputs?)\n", M, dim, hc);
    b += moved == 0;
    if (b) fprintf(stderr, "engram_gate_rows M=%d dim=%d hc=%d rmap=%d: %zu differ\n", M, dim, hc, rmap_kind, b);
    cudaFree(dkv), cudaFree(dR), cudaFree(dR2), cudaFree(dqk), cudaFree(dg), cudaFree(dg2), cudaFree(drm);
    free(rmap), free(kv), free(R), free(R0), free(qk), free(gates), free(kvf), free(h), free(gR), free(gR2), free(gg),
        free(gg2);
    *bad += b;
}

/* Engram gate vs the CPU, both batch modes' kernel (dic_engram_gate.cu): M = 1 .. 300, dims 4096 / 5120 /
 * 1000, with and without a row map. */
TEST(gpu_engram_gate_rows) {
    static const int cases[][4] = {/* M, dim, hc, rmap */ {1, 4096, 4, 0}, {9, 4096, 4, 1}, {64, 5120, 4, 1},
                                   {5, 1000, 3, 0}, {300, 4096, 4, 1}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    size_t bad = 0, near = 0, ngates = 0;
    uint64_t s = 2024;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        eg_case(&c, cases[t][0], cases[t][1], cases[t][2], cases[t][3], &s, &near, &bad);
        ngates += (size_t)cases[t][0] * cases[t][2];
    }
    fprintf(stderr, "engram gate: %zu of %zu gates 1 ulp from the CPU's libm expf\n", near, ngates);
    CHECK_MSG(bad == 0 && near * 100 <= ngates, "engram_gate_rows: %zu values differ from the CPU (%zu 1-ulp gates "
              "of %zu)", bad, near, ngates);
}

/* The same check at the kernel's chunk edges: M = 1, 2, 8, 64, dims below / across / not a multiple of
 * its chunk (EGC_CH), odd hc (the shapes of the former variant comparison, now lab/engram_gate/'s bench). */
TEST(gpu_engram_gate_rows_shapes) {
    static const int cases[][4] = {/* M, dim, hc, rmap */ {1, 5120, 4, 0}, {2, 5120, 4, 2}, {8, 4096, 4, 2},
                                   {64, 5120, 4, 2}, {5, 1000, 3, 0}, {3, 517, 4, 2}, {1, 8, 4, 0}, {2, 1029, 1, 0}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 4242;
    size_t bad = 0, near = 0, ngates = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        eg_case(&c, cases[t][0], cases[t][1], cases[t][2], cases[t][3], &s, &near, &bad);
        ngates += (size_t)cases[t][0] * cases[t][2];
    }
    fprintf(stderr, "engram gate shapes: %zu of %zu gates 1 ulp from the CPU's libm expf\n", near, ngates);
    CHECK_MSG(bad == 0 && near * 100 <= ngates + 99, "engram_gate_rows shapes: %zu values differ from the CPU (%zu "
              "1-ulp gates of %zu)", bad, near, ngates);
}
