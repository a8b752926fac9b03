/* gtest_route_gate.c — the fused MoE router (dic_route_gate.cu, ops.h
 * di_route_gate) against today's fast-mode sequence on the same stream:
 * the gate GEMM (dic_gemm: the GEMV at M <= 4; at M = 5..8, where dic_gemm
 * takes the tensor cores, the GEMV path dic_gemm_float_fast_launch(...GEMV),
 * whose sums the fused kernel keeps) into fp32 logits, then dic_route_rows.
 * Bitwise: the logits (after the temperature division), sel and w. BF16 gate
 * E = 256, 384, 72, 75 (not a multiple of 4, with K = 1000: a partial chunk)
 * and 1024 (64 KB of scores: the shared-memory opt-in), M = 1, 2, 3, 8,
 * k = 6 and 8, temp 1 / 0.7, biased top-k and hash routing (tid2eid by device
 * tokens), normalised or not. Each fused case runs twice (the arrival counter
 * resets itself: a stale one leaves sel / w at their poison; the variants'
 * bitwise checks are lab/router/'s bench). Mode 1
 * (batch_invariant = 1) takes the sequence: bitwise the two calls. One case
 * also checks the logits against the CPU di_route_gate (GEMM tolerance). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

#define RG_K 4096
#define RG_V 1000 /* vocabulary of the hash table */
#define RG_NR 3   /* the sequence, then two fused runs */

typedef struct rg_case {
    int M, E, K, k, hash, normalize;
    float temp;
    int ties; /* gate rows and bias equal in pairs (2i, 2i+1): exact ties, broken by the lower index */
} rg_case;

/* Today's sequence (mode picked by c) or the fused op; outputs copied back. */
static int rg_run(const dic_ctx *c, int fused, const rg_case *t, const uint16_t *dx, size_t lda, const dic_wmat *dw,
                  const float *db, const int32_t *dt2e, const int32_t *dtok, float *dlg, int *dsel, float *dwt,
                  float *lg, int *sel, float *w) {
    const int M = t->M, E = t->E, k = t->k;
    if (cudaMemset(dlg, 0xFF, (size_t)M * E * 4) != cudaSuccess || cudaMemset(dsel, 0xFF, (size_t)M * k * 4) ||
        cudaMemset(dwt, 0xFF, (size_t)M * k * 4))
        return 0;
    cudaError_t e;
    if (fused) {
        e = dic_route_gate(c, M, dx, lda, dw, dlg, E, t->temp, t->hash ? NULL : db, t->hash ? dt2e : NULL, dtok, k,
                           2.5f, 1e-20f, t->normalize, dsel, dwt);
    } else {
        e = (M <= 4 || c->batch_invariant) ? dic_gemm(c, M, dx, lda, dw, 0, dlg, NULL, (size_t)E)
                                           : dic_gemm_float_fast_launch(c->stream, M, dx, lda, dw, dlg, NULL, (size_t)E,
                                                                        DIC_GEMMF_PATH_GEMV);
        if (e == cudaSuccess)
            e = dic_route_rows(c, M, dlg, E, t->temp, t->hash ? NULL : db, t->hash ? dt2e : NULL, dtok, k, 2.5f,
                               1e-20f, t->normalize, dsel, dwt);
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "  launch: %s\n", cudaGetErrorString(e));
        return 0;
    }
    if (cudaStreamSynchronize(c->stream) != cudaSuccess) return 0;
    return cudaMemcpy(lg, dlg, (size_t)M * E * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(sel, dsel, (size_t)M * k * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(w, dwt, (size_t)M * k * 4, cudaMemcpyDeviceToHost) == cudaSuccess;
}

/* One case: returns the number of differing values (fused vs sequence, both fused runs). */
static size_t rg_case_run(const rg_case *t, int mode1, int cpu_check, uint64_t seed) {
    const int M = t->M, E = t->E, K = t->K, k = t->k;
    const size_t lda = (size_t)K + 8;
    uint64_t s = seed;
    uint16_t *x = malloc((size_t)M * lda * 2), *gw = malloc((size_t)E * K * 2);
    float *bias = malloc((size_t)E * 4);
    int32_t *t2e = malloc((size_t)RG_V * k * 4), *tok = malloc((size_t)M * 4);
    for (size_t i = 0; i < (size_t)M * lda; i++) x[i] = di_f32_to_bf16(gt_normal(&s));
    gt_fill_bf16(gw, (size_t)E * K, 0.05f, &s);
    gt_fill_f32(bias, (size_t)E, 0.1f, &s);
    for (size_t i = 0; i < (size_t)RG_V * k; i++) t2e[i] = (int32_t)(gt_rand_u64(&s) % (uint64_t)E);
    for (int m = 0; m < M; m++) tok[m] = (int32_t)(gt_rand_u64(&s) % RG_V);
    if (t->ties)
        for (int e = 1; e < E; e += 2) {
            memcpy(gw + (size_t)e * K, gw + (size_t)(e - 1) * K, (size_t)K * 2);
            bias[e] = bias[e - 1];
        }

    dic_ctx c;
    size_t bad = 0;
    if (!gt_ctx(&c, (size_t)16 << 20)) return 1;
    c.batch_invariant = mode1;
    uint16_t *dx = gt_to_dev(x, (size_t)M * lda * 2);
    void *dW = gt_to_dev(gw, (size_t)E * K * 2);
    float *db = gt_to_dev(bias, (size_t)E * 4);
    int32_t *dt2e = gt_to_dev(t2e, (size_t)RG_V * k * 4), *dtok = gt_to_dev(tok, (size_t)M * 4);
    float *dlg = gt_dev_poison((size_t)M * E * 4), *dwt = gt_dev_poison((size_t)M * k * 4);
    int *dsel = gt_dev_poison((size_t)M * k * 4);
    float *lg[RG_NR], *w[RG_NR];
    int *sel[RG_NR];
    for (int i = 0; i < RG_NR; i++) {
        lg[i] = malloc((size_t)M * E * 4), w[i] = malloc((size_t)M * k * 4), sel[i] = malloc((size_t)M * k * 4);
    }
    dic_wmat dw = {0, E, K, 0, dW, NULL};
    const int ok = dic_route_gate_ok(&c, M, dx, lda, &dw, E, k, t->hash ? dt2e : NULL, dtok);
    if (ok != !mode1) {
        fprintf(stderr, "  dic_route_gate_ok = %d (expected %d)\n", ok, !mode1);
        bad++;
    }
    if (!dx || !dW || !db || !dt2e || !dtok || !dlg || !dwt || !dsel ||
        !rg_run(&c, 0, t, dx, lda, &dw, db, dt2e, dtok, dlg, dsel, dwt, lg[0], sel[0], w[0])) {
        bad++;
        goto out;
    }
    for (int r = 1; r < RG_NR; r++) { /* the fused launch, twice */
        const int okr = rg_run(&c, 1, t, dx, lda, &dw, db, dt2e, dtok, dlg, dsel, dwt, lg[r], sel[r], w[r]);
        if (!okr) {
            fprintf(stderr, "  fused run %d failed\n", r);
            bad++;
            goto out;
        }
    }
    for (int r = 1; r < RG_NR; r++) {
        size_t dl = gt_count_diff_u32(lg[r], lg[0], (size_t)M * E), ds = gt_count_diff_u32(sel[r], sel[0], (size_t)M * k),
               dwd = gt_count_diff_u32(w[r], w[0], (size_t)M * k);
        if (dl + ds + dwd)
            fprintf(stderr, "  fused run %d M=%d E=%d K=%d k=%d hash=%d norm=%d temp=%g mode1=%d: %zu logits, "
                    "%zu sel, %zu w differ\n", r, M, E, K, k, t->hash, t->normalize, t->temp, mode1, dl,
                    ds, dwd);
        bad += dl + ds + dwd;
    }
    /* sanity: ids in range, distinct when selected by score */
    for (int m = 0; m < M; m++)
        for (int i = 0; i < k; i++) {
            int e = sel[1][m * k + i];
            if (e < 0 || e >= E) bad++;
            for (int j = 0; j < i && !t->hash; j++) bad += sel[1][m * k + j] == e;
            if (!(w[1][m * k + i] > 0.0f)) bad++;
        }
    if (cpu_check) { /* the CPU op: the same sequence, logits within GEMM rounding */
        di_wmat pw;
        di_exec xe;
        float *cl = malloc((size_t)M * E * 4), *cw = malloc((size_t)M * k * 4);
        int *cs = malloc((size_t)M * k * 4);
        if (di_exec_init(&xe, 0, NULL) != DEEPINFER_OK) bad++;
        else if (di_wmat_pack(&pw, DI_WFMT_BF16, gw, NULL, E, K, 0, NULL) != DEEPINFER_OK) bad++, di_exec_free(&xe);
        else {
            di_route_gate(&xe, M, x, lda, &pw, cl, E, t->temp, t->hash ? NULL : bias, t->hash ? t2e : NULL, tok, k,
                          2.5f, 1e-20f, t->normalize, cs, cw);
            double rel = gt_rel_err(lg[1], cl, (size_t)M * E);
            size_t dsel = gt_count_diff_u32(sel[1], cs, (size_t)M * k);
            fprintf(stderr, "  vs CPU di_route_gate M=%d E=%d: logits norm rel %.2e, %zu of %d sel differ\n", M, E, rel,
                    dsel, M * k);
            if (!(rel <= 1e-4)) bad++;
            di_wmat_free(&pw);
            di_exec_free(&xe);
        }
        free(cl), free(cw), free(cs);
    }
out:
    cudaFree(dx), cudaFree(dW), cudaFree(db), cudaFree(dt2e), cudaFree(dtok), cudaFree(dlg), cudaFree(dwt);
    cudaFree(dsel), cudaFree(c.scratch);
    cudaStreamDestroy(c.stream);
    for (int i = 0; i < RG_NR; i++) free(lg[i]), free(w[i]), free(sel[i]);
    free(x), free(gw), free(bias), free(t2e), free(tok);
    return bad;
}

TEST(gpu_route_gate) {
    static const int Es[] = {256, 384, 72};
    static const int Ms[] = {1, 2, 3, 8};
    size_t bad = 0, n = 0;
    uint64_t seed = 9100;
    for (unsigned ie = 0; ie < 3; ie++)
        for (unsigned im = 0; im < 4; im++)
            for (int k = 6; k <= 8; k += 2)
                for (int v = 0; v < 3; v++) { /* plain, temperature, hash (+ unnormalised) */
                    rg_case t = {Ms[im], Es[ie], RG_K, k, v == 2, v != 2, v == 1 ? 0.7f : 1.0f, 0};
                    bad += rg_case_run(&t, 0, 0, seed++);
                    n++;
                }
    fprintf(stderr, "route_gate: %zu cases, %zu values differ\n", n, bad);
    CHECK_MSG(bad == 0, "route_gate: %zu values differ from the fast-mode sequence", bad);
}

TEST(gpu_route_gate_edges) {
    static const rg_case cs[] = {
        {8, 1024, RG_K, 8, 0, 1, 1.0f, 0}, /* 64 KB of scores */
        {5, 1024, RG_K, 6, 1, 0, 1.3f, 0},
        {3, 75, 1000, 6, 0, 1, 0.7f, 0}, /* E % 4 != 0, K tail inside a chunk */
        {1, 75, 1000, 8, 0, 1, 1.0f, 0},
        {8, 256, RG_K, 32, 0, 1, 1.0f, 0}, /* k = 32 */
        {6, 384, RG_K, 6, 0, 1, 1.0f, 0},
        {1, 256, RG_K, 6, 0, 1, 1.0f, 1}, /* exact ties */
        {8, 256, RG_K, 8, 0, 1, 0.7f, 1},
        {2, 384, RG_K, 6, 0, 0, 1.0f, 1},
    };
    size_t bad = 0;
    for (unsigned i = 0; i < sizeof cs / sizeof *cs; i++) bad += rg_case_run(&cs[i], 0, i == 0, 777 + i);
    CHECK_MSG(bad == 0, "route_gate edges: %zu values differ", bad);
    /* mode 1: dic_route_gate runs the two calls (bitwise the sequence) */
    static const rg_case m1[] = {{1, 256, RG_K, 6, 0, 1, 1.0f, 0}, {3, 384, RG_K, 6, 1, 0, 0.7f, 0}};
    for (unsigned i = 0; i < 2; i++) bad += rg_case_run(&m1[i], 1, i == 0, 900 + i);
    CHECK_MSG(bad == 0, "route_gate mode 1: %zu values differ", bad);
}
