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

/* Engram gate: R and gates vs the CPU; the gate's libm expf may differ by
 * 1 ulp (then R by at most 1 bf16 ulp), counted and bounded. Both kernel
 * variants, the same inputs for each (dic_engram_gate_variant: 1 the default,
 * 0 the first kernel, forced here so the old path stays covered). */
TEST(gpu_engram_gate_rows) {
    static const int cases[][4] = {/* M, dim, hc, rmap */ {1, 4096, 4, 0}, {9, 4096, 4, 1}, {64, 5120, 4, 1},
                                   {5, 1000, 3, 0}, {300, 4096, 4, 1}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    const int v_save = dic_engram_gate_variant(-1);
    size_t bad = 0, near = 0, ngates = 0;
    for (int v = 1; v >= 0; v--) {
        dic_engram_gate_variant(v);
        uint64_t s = 2024;
        for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
            int M = cases[t][0], dim = cases[t][1], hc = cases[t][2], T = M + 4;
            size_t ldkv = (size_t)(hc + 1) * dim + 8;
            int64_t *rmap = NULL;
            if (cases[t][3]) { /* distinct rows, shuffled */
                rmap = malloc((size_t)M * 8);
                for (int i = 0; i < M; i++) rmap[i] = (int64_t)((i * 7 + 2) % T);
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < i; j++)
                        if (rmap[j] == rmap[i]) rmap[i] = T - 1 - (i % 4); /* keep distinct (tiny M cases) */
            }
            uint16_t *kv = malloc((size_t)M * ldkv * 2), *R = malloc((size_t)T * hc * dim * 2);
            float *qk = malloc((size_t)hc * dim * 4), *gates = malloc((size_t)T * hc * 4);
            for (size_t i = 0; i < (size_t)M * ldkv; i++) kv[i] = di_f32_to_bf16(gt_normal(&s));
            for (size_t i = 0; i < (size_t)T * hc * dim; i++) R[i] = di_f32_to_bf16(gt_normal(&s) * 2.0f);
            for (size_t i = 0; i < (size_t)hc * dim; i++) qk[i] = 1.0f + 0.2f * gt_rand_unit(&s);
            memset(gates, 0xFF, (size_t)T * hc * 4);
            uint16_t *dkv = gt_to_dev(kv, (size_t)M * ldkv * 2), *dR = gt_to_dev(R, (size_t)T * hc * dim * 2);
            float *dqk = gt_to_dev(qk, (size_t)hc * dim * 4), *dg = gt_dev_poison((size_t)T * hc * 4);
            int64_t *drm = rmap ? gt_to_dev(rmap, (size_t)M * 8) : NULL;
            CHECK(dkv && dR && dqk && dg && (!rmap || drm));
            float *kvf = malloc(ldkv * 4), *h = malloc((size_t)dim * 4);
            di_engram_gate_rows(NULL, M, rmap, kv, ldkv, R, qk, dim, hc, 1e-6f, kvf, h, gates);
            CUDA_SYNC_CHECK(dic_engram_gate_rows(&c, M, drm, dkv, ldkv, dR, dqk, dim, hc, 1e-6f, dg));
            uint16_t *gR = gt_d2h(dR, (size_t)T * hc * dim * 2);
            float *gg = gt_d2h(dg, (size_t)T * hc * 4);
            CHECK(gR && gg);
            size_t b = 0;
            for (size_t i = 0; i < (size_t)T * hc; i++) {
                if (!memcmp(&gg[i], &gates[i], 4)) continue;
                long long u = ulps32(gg[i], gates[i]);
                fprintf(stderr, "  engram gate M=%d dim=%d [%zu][%zu]: gpu %.9g cpu %.9g (%lld ulp)\n", M, dim, i / hc,
                        i % hc, gg[i], gates[i], u);
                if (u <= 1) near++;
                else b++;
            }
            for (size_t i = 0; i < (size_t)T * hc * dim; i++) {
                if (gR[i] == R[i]) continue;
                int du = abs((int)gR[i] - (int)R[i]);
                size_t row = i / dim;
                int gate_near = !memcmp(&gg[row], &gates[row], 4) ? 0 : 1;
                if (!(gate_near && du <= 1)) { /* only a 1-ulp gate difference may move R, by 1 bf16 ulp */
                    if (b < 8)
                        fprintf(stderr, "  engram R M=%d dim=%d [%zu][%zu]: gpu %04x (%g) cpu %04x (%g)\n", M, dim, row,
                                i % dim, gR[i], di_bf16_to_f32(gR[i]), R[i], di_bf16_to_f32(R[i]));
                    b++;
                }
            }
            if (b) fprintf(stderr, "engram_gate_rows variant %d M=%d dim=%d hc=%d rmap=%d: %zu differ\n", v, M, dim, hc,
                           rmap != NULL, b);
            bad += b;
            ngates += (size_t)M * hc;
            cudaFree(dkv), cudaFree(dR), cudaFree(dqk), cudaFree(dg), cudaFree(drm);
            free(rmap), free(kv), free(R), free(qk), free(gates), free(kvf), free(h), free(gR), free(gg);
        }
    }
    dic_engram_gate_variant(v_save);
    fprintf(stderr, "engram gate: %zu of %zu gates 1 ulp from the CPU's libm expf (variants 1 and 0)\n", near, ngates);
    CHECK_MSG(bad == 0 && near * 100 <= ngates, "engram_gate_rows: %zu values differ from the CPU (%zu 1-ulp gates "
              "of %zu)", bad, near, ngates);
}

/* The gate kernel's variant 1 (one CTA per (token, copy), dic_engram_gate.cu; the default) gives variant 0's
 * bits (both forced here):
 * R and gates bitwise, M = 1, 2, 8, 64, dims below / across / not a multiple of its chunk, odd hc. */
TEST(gpu_engram_gate_rows_variants) {
    static const int cases[][4] = {/* M, dim, hc, rmap */ {1, 5120, 4, 0}, {2, 5120, 4, 1}, {8, 4096, 4, 1},
                                   {64, 5120, 4, 1}, {5, 1000, 3, 0}, {3, 517, 4, 1}, {1, 8, 4, 0}, {2, 1029, 1, 0}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 4242;
    size_t bad = 0;
    const int v_save = dic_engram_gate_variant(-1);
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int M = cases[t][0], dim = cases[t][1], hc = cases[t][2], T = M + 4;
        size_t ldkv = (size_t)(hc + 1) * dim + 8, nR = (size_t)T * hc * dim;
        int64_t *rmap = NULL;
        if (cases[t][3]) { /* distinct rows, shuffled */
            rmap = malloc((size_t)M * 8);
            for (int i = 0; i < M; i++) rmap[i] = (int64_t)(T - 1 - i);
        }
        uint16_t *kv = malloc((size_t)M * ldkv * 2), *R = malloc(nR * 2);
        float *qk = malloc((size_t)hc * dim * 4);
        for (size_t i = 0; i < (size_t)M * ldkv; i++) kv[i] = di_f32_to_bf16(gt_normal(&s));
        for (size_t i = 0; i < nR; i++) R[i] = di_f32_to_bf16(gt_normal(&s) * 2.0f);
        for (size_t i = 0; i < (size_t)hc * dim; i++) qk[i] = 1.0f + 0.2f * gt_rand_unit(&s);
        uint16_t *dkv = gt_to_dev(kv, (size_t)M * ldkv * 2), *dR0 = gt_to_dev(R, nR * 2), *dR1 = gt_to_dev(R, nR * 2);
        float *dqk = gt_to_dev(qk, (size_t)hc * dim * 4), *dg0 = gt_dev_poison((size_t)T * hc * 4),
              *dg1 = gt_dev_poison((size_t)T * hc * 4);
        int64_t *drm = rmap ? gt_to_dev(rmap, (size_t)M * 8) : NULL;
        CHECK(dkv && dR0 && dR1 && dqk && dg0 && dg1 && (!rmap || drm));
        dic_engram_gate_variant(0);
        CUDA_SYNC_CHECK(dic_engram_gate_rows(&c, M, drm, dkv, ldkv, dR0, dqk, dim, hc, 1e-6f, dg0));
        dic_engram_gate_variant(1);
        CUDA_SYNC_CHECK(dic_engram_gate_rows(&c, M, drm, dkv, ldkv, dR1, dqk, dim, hc, 1e-6f, dg1));
        uint16_t *r0 = gt_d2h(dR0, nR * 2), *r1 = gt_d2h(dR1, nR * 2);
        float *g0 = gt_d2h(dg0, (size_t)T * hc * 4), *g1 = gt_d2h(dg1, (size_t)T * hc * 4);
        CHECK(r0 && r1 && g0 && g1);
        size_t b = 0, moved = 0;
        for (size_t i = 0; i < (size_t)T * hc; i++)
            if (memcmp(&g0[i], &g1[i], 4)) {
                if (b < 4) fprintf(stderr, "  gate M=%d dim=%d [%zu]: v0 %.9g v1 %.9g\n", M, dim, i, g0[i], g1[i]);
                b++;
            }
        for (size_t i = 0; i < nR; i++) {
            moved += r0[i] != R[i];
            if (r0[i] != r1[i]) {
                if (b < 8) fprintf(stderr, "  R M=%d dim=%d [%zu]: v0 %04x v1 %04x\n", M, dim, i, r0[i], r1[i]);
                b++;
            }
        }
        if (b) fprintf(stderr, "engram gate variants M=%d dim=%d hc=%d: %zu differ\n", M, dim, hc, b);
        if (!moved) fprintf(stderr, "engram gate variants M=%d dim=%d hc=%d: R unchanged (test inputs?)\n", M, dim, hc);
        bad += b + (moved == 0);
        cudaFree(dkv), cudaFree(dR0), cudaFree(dR1), cudaFree(dqk), cudaFree(dg0), cudaFree(dg1), cudaFree(drm);
        free(rmap), free(kv), free(R), free(qk), free(r0), free(r1), free(g0), free(g1);
    }
    dic_engram_gate_variant(v_save);
    CHECK_MSG(bad == 0, "engram gate variant 1: %zu values differ from variant 0", bad);
}
