/* gtest_route_gate.c — the MoE router (dic_route_gate.cu, ops.h di_route_gate) in both batch modes.
 *  - gpu_route_gate, gpu_route_gate_edges: the one launch (k_route_gate2, both modes at M <= 8) against
 *    the GEMV launch (dic_gemm_float_fast_launch(...GEMV): k_gemv, whose sums the fused kernel keeps)
 *    into fp32 logits, then dic_route_rows, on the same stream. Bitwise: the logits (after the
 *    temperature division), sel and w. BF16 gate E = 256, 384, 72, 75 (not a multiple of 4, with
 *    K = 1000: a partial chunk) and 1024 (64 KB of scores: the shared-memory opt-in), M = 1, 2, 3, 8,
 *    k = 6 and 8, temp 1 / 0.7, biased top-k and hash routing (tid2eid by device tokens), normalised or
 *    not. Each fused case runs twice (the arrival counter resets itself: a stale one leaves sel / w at
 *    their poison; the variants' bitwise checks are lab/router/'s bench). One case also checks the
 *    logits against the CPU di_route_gate (GEMM tolerance).
 *  - gpu_route_gate_inv: batch-invariant mode at M = 1 .. 8, 9, 64, 1000 on the V4 / V4.1 routers
 *    (below): every row's logits, ids and weights bitwise the row routed alone (M = 1: the one launch
 *    where it applies), mode 0 the same bits where it takes the one launch (M <= 8), and within the
 *    tolerance of the CPU router (di_route_gate_seq); dic_route_logits bitwise k_gemv's launch. */
#include <math.h>
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

/* The GEMV sequence or the fused op (mode picked by c); outputs copied back. */
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
    } else { /* the GEMV launch (k_gemv), then the routing */
        e = dic_gemm_float_fast_launch(c->stream, M, dx, lda, dw, dlg, NULL, (size_t)E, DIC_GEMMF_PATH_GEMV);
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
    if (!ok) { /* both modes take the one launch at these shapes */
        fprintf(stderr, "  dic_route_gate_ok = 0 (mode %d)\n", mode1);
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
    /* mode 1: the same one launch (bitwise the GEMV sequence) */
    static const rg_case m1[] = {{1, 256, RG_K, 6, 0, 1, 1.0f, 0}, {3, 384, RG_K, 6, 1, 0, 0.7f, 0}};
    for (unsigned i = 0; i < 2; i++) bad += rg_case_run(&m1[i], 1, i == 0, 900 + i);
    CHECK_MSG(bad == 0, "route_gate mode 1: %zu values differ", bad);
}

/* ------------------------------------------------------------------ batch-invariant mode at every M */

/* One router configuration of the real models (bench/configs/v4-flash.json, v41-flash.json;
 * docs/architecture.md §4.7, §5.6). */
typedef struct rg_cfg {
    const char *name;
    int E, K, k, hash, normalize;
    float temp, norm_eps;
} rg_cfg;

#define RI_MMAX 1000
#define RI_MCPU 256 /* rows checked against the CPU router (its rows do not depend on M either) */

typedef struct ri_out {
    float *lg, *w;
    int *sel;
} ri_out;

static int ri_alloc(ri_out *o, int M, int E, int k) {
    o->lg = malloc((size_t)M * E * 4), o->w = malloc((size_t)M * k * 4), o->sel = malloc((size_t)M * k * 4);
    return o->lg && o->w && o->sel;
}
static void ri_free(ri_out *o) { free(o->lg), free(o->w), free(o->sel); }

/* dic_route_gate of rows [m0, m0 + M) into the device outputs at the same rows (no copy back). */
static cudaError_t ri_launch(const dic_ctx *c, const rg_cfg *g, int m0, int M, const uint16_t *dx, size_t lda,
                             const dic_wmat *dw, const float *db, const int32_t *dt2e, const int32_t *dtok, float *dlg,
                             int *dsel, float *dwt) {
    const int E = g->E, k = g->k;
    return dic_route_gate(c, M, dx + (size_t)m0 * lda, lda, dw, dlg + (size_t)m0 * E, E, g->temp, g->hash ? NULL : db,
                          g->hash ? dt2e : NULL, dtok + m0, k, 1.5f, g->norm_eps, g->normalize, dsel + (size_t)m0 * k,
                          dwt + (size_t)m0 * k);
}

static int ri_back(const rg_cfg *g, int M, const float *dlg, const int *dsel, const float *dwt, ri_out *o) {
    const size_t nl = (size_t)M * g->E * 4, nk = (size_t)M * g->k * 4;
    return cudaDeviceSynchronize() == cudaSuccess && cudaMemcpy(o->lg, dlg, nl, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(o->sel, dsel, nk, cudaMemcpyDeviceToHost) == cudaSuccess &&
           cudaMemcpy(o->w, dwt, nk, cudaMemcpyDeviceToHost) == cudaSuccess;
}

/* Values of rows [0, M) of a that differ from b's. */
static size_t ri_diff(const rg_cfg *g, int M, const ri_out *a, const ri_out *b) {
    return gt_count_diff_u32(a->lg, b->lg, (size_t)M * g->E) + gt_count_diff_u32(a->sel, b->sel, (size_t)M * g->k) +
           gt_count_diff_u32(a->w, b->w, (size_t)M * g->k);
}

static size_t ri_cfg_run(const rg_cfg *g, uint64_t seed) {
    static const int Ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 64, RI_MMAX};
    const int E = g->E, K = g->K, k = g->k, Mx = RI_MMAX;
    const size_t lda = (size_t)K + 8;
    uint64_t s = seed;
    uint16_t *x = malloc((size_t)Mx * lda * 2), *gw = malloc((size_t)E * K * 2);
    float *bias = malloc((size_t)E * 4);
    int32_t *t2e = malloc((size_t)RG_V * k * 4), *tok = malloc((size_t)Mx * 4);
    ri_out alone, got, got0, cpu;
    if (!x || !gw || !bias || !t2e || !tok || !ri_alloc(&alone, Mx, E, k) || !ri_alloc(&got, Mx, E, k) ||
        !ri_alloc(&got0, Mx, E, k) || !ri_alloc(&cpu, Mx, E, k))
        return 1;
    for (int m = 0; m < Mx; m++) { /* rows of different scales: other logits ranges, other near-ties */
        const float amp = 0.25f + 0.25f * (float)(m % 7);
        for (size_t i = 0; i < lda; i++) x[(size_t)m * lda + i] = di_f32_to_bf16(gt_normal(&s) * amp);
    }
    gt_fill_bf16(gw, (size_t)E * K, 0.05f, &s);
    gt_fill_f32(bias, (size_t)E, 0.1f, &s);
    for (size_t i = 0; i < (size_t)RG_V * k; i++) t2e[i] = (int32_t)(gt_rand_u64(&s) % (uint64_t)E);
    for (int m = 0; m < Mx; m++) tok[m] = (int32_t)(gt_rand_u64(&s) % RG_V);

    dic_ctx c;
    size_t bad = 0;
    if (!gt_ctx(&c, (size_t)64 << 20)) return 1;
    uint16_t *dx = gt_to_dev(x, (size_t)Mx * lda * 2);
    void *dW = gt_to_dev(gw, (size_t)E * K * 2);
    float *db = gt_to_dev(bias, (size_t)E * 4);
    int32_t *dt2e = gt_to_dev(t2e, (size_t)RG_V * k * 4), *dtok = gt_to_dev(tok, (size_t)Mx * 4);
    float *dlg = gt_dev_poison((size_t)Mx * E * 4), *dwt = gt_dev_poison((size_t)Mx * k * 4);
    int *dsel = gt_dev_poison((size_t)Mx * k * 4);
    float *dref = gt_dev_poison((size_t)16 * E * 4);
    dic_wmat dw = {0, E, K, 0, dW, NULL};
    if (!dx || !dW || !db || !dt2e || !dtok || !dlg || !dwt || !dsel || !dref) {
        bad++;
        goto out;
    }
    int wpc, cy, flags, mr;
    if (dic_gemv_plan(0, 1, E, K, &wpc, &cy, &flags, &mr) != cudaSuccess) {
        bad++;
        goto out;
    }
    c.batch_invariant = 1;
    const int fused = dic_route_gate_ok(&c, 1, dx, lda, &dw, E, k, g->hash ? dt2e : NULL, dtok);
    fprintf(stderr, "  %s: E=%d K=%d k=%d: GEMV split %d warps x %d CTAs, one launch at M <= 8: %s\n", g->name, E, K,
            k, wpc, cy, fused ? "yes" : "no (dic_route_logits + dic_route_rows)");
    if (fused != (cy == 1)) bad++;
    for (int M = 1; M <= 16; M++) { /* the ok is a function of the shape and M <= 8 only, in both modes */
        for (int mode = 0; mode < 2; mode++) {
            c.batch_invariant = mode;
            if (dic_route_gate_ok(&c, M, dx, lda, &dw, E, k, g->hash ? dt2e : NULL, dtok) != (fused && M <= 8)) bad++;
        }
        if (!dic_route_logits_ok(&c, M, dx, lda, &dw)) bad++;
    }
    /* dic_route_logits = the GEMV launch (k_gemv, another translation unit), bitwise */
    c.batch_invariant = 1;
    for (int M = 1; M <= 16; M += 7) {
        if (dic_route_logits(&c, M, dx, lda, &dw, dlg) != cudaSuccess ||
            dic_gemm_float_fast_launch(c.stream, M, dx, lda, &dw, dref, NULL, (size_t)E, DIC_GEMMF_PATH_GEMV) !=
                cudaSuccess ||
            cudaStreamSynchronize(c.stream) != cudaSuccess) {
            bad++;
            goto out;
        }
        if (!(cudaMemcpy(got.lg, dlg, (size_t)M * E * 4, cudaMemcpyDeviceToHost) == cudaSuccess)) {
            bad++;
            goto out;
        }
        if (!(cudaMemcpy(got0.lg, dref, (size_t)M * E * 4, cudaMemcpyDeviceToHost) == cudaSuccess)) {
            bad++;
            goto out;
        }
        size_t d = gt_count_diff_u32(got.lg, got0.lg, (size_t)M * E);
        if (d) fprintf(stderr, "  %s M=%d: dic_route_logits vs k_gemv: %zu logits differ\n", g->name, M, d);
        bad += d;
    }
    /* every row alone (mode 1, M = 1), all launched, then one copy */
    for (int m = 0; m < Mx && !bad; m++)
        if (ri_launch(&c, g, m, 1, dx, lda, &dw, db, dt2e, dtok, dlg, dsel, dwt) != cudaSuccess) bad++;
    if (bad || !ri_back(g, Mx, dlg, dsel, dwt, &alone)) {
        bad++;
        goto out;
    }
    for (unsigned im = 0; im < sizeof Ms / sizeof *Ms; im++) {
        const int M = Ms[im];
        c.batch_invariant = 1;
        if (!(cudaMemset(dlg, 0xFF, (size_t)Mx * E * 4) == cudaSuccess)) {
            bad++;
            goto out;
        }
        if (!(cudaMemset(dsel, 0xFF, (size_t)Mx * k * 4) == cudaSuccess)) {
            bad++;
            goto out;
        }
        if (!(cudaMemset(dwt, 0xFF, (size_t)Mx * k * 4) == cudaSuccess)) {
            bad++;
            goto out;
        }
        if (ri_launch(&c, g, 0, M, dx, lda, &dw, db, dt2e, dtok, dlg, dsel, dwt) != cudaSuccess ||
            !ri_back(g, M, dlg, dsel, dwt, &got)) {
            bad++;
            break;
        }
        const size_t da = ri_diff(g, M, &got, &alone);
        size_t d0 = 0;
        if (fused && M <= 8) { /* fast mode takes the same launch */
            c.batch_invariant = 0;
            if (ri_launch(&c, g, 0, M, dx, lda, &dw, db, dt2e, dtok, dlg, dsel, dwt) != cudaSuccess ||
                !ri_back(g, M, dlg, dsel, dwt, &got0)) {
                bad++;
                break;
            }
            d0 = ri_diff(g, M, &got0, &got);
        }
        if (da || d0)
            fprintf(stderr, "  %s M=%d: %zu values differ from the rows alone, %zu between the modes\n", g->name, M, da,
                    d0);
        bad += da + d0;
    }
    { /* the CPU router on all rows: logits within GEMM rounding, ids where no near-tie decides, weights */
        di_wmat pw;
        di_exec xe;
        if (di_exec_init(&xe, 0, NULL) != DEEPINFER_OK) {
            bad++;
            goto out;
        }
        if (di_wmat_pack(&pw, DI_WFMT_BF16, gw, NULL, E, K, 0, NULL) != DEEPINFER_OK) {
            di_exec_free(&xe);
            bad++;
            goto out;
        }
        di_route_gate_seq(&xe, RI_MCPU, x, lda, &pw, cpu.lg, E, g->temp, g->hash ? NULL : bias, g->hash ? t2e : NULL,
                          tok, k, 1.5f, g->norm_eps, g->normalize, cpu.sel, cpu.w);
        const double rel = gt_rel_err(alone.lg, cpu.lg, (size_t)RI_MCPU * E);
        size_t rows_sel = 0, wfar = 0;
        double wmax = 0;
        for (int m = 0; m < RI_MCPU; m++) {
            if (memcmp(alone.sel + (size_t)m * k, cpu.sel + (size_t)m * k, (size_t)k * 4)) {
                rows_sel++;
                continue;
            }
            for (int i = 0; i < k; i++) {
                const double a = alone.w[(size_t)m * k + i], b = cpu.w[(size_t)m * k + i];
                const double r = fabs(a - b) / (fabs(b) > 1e-30 ? fabs(b) : 1e-30);
                if (r > wmax) wmax = r;
                wfar += r > 1e-4;
            }
        }
        fprintf(stderr, "  %s vs CPU di_route_gate_seq (%d rows): logits norm rel %.2e, %zu rows with other ids, "
                "weights max rel %.2e\n", g->name, RI_MCPU, rel, rows_sel, wmax);
        if (!(rel <= 1e-4)) bad++;
        if (g->hash ? rows_sel != 0 : rows_sel * 100 > RI_MCPU) bad++; /* hash ids come from the table */
        bad += wfar;
        di_wmat_free(&pw);
        di_exec_free(&xe);
    }
out:
    cudaFree(dx), cudaFree(dW), cudaFree(db), cudaFree(dt2e), cudaFree(dtok), cudaFree(dlg), cudaFree(dwt);
    cudaFree(dsel), cudaFree(dref), cudaFree(c.scratch);
    cudaStreamDestroy(c.stream);
    ri_free(&alone), ri_free(&got), ri_free(&got0), ri_free(&cpu);
    free(x), free(gw), free(bias), free(t2e), free(tok);
    return bad;
}

TEST(gpu_route_gate_inv) {
    static const rg_cfg cfgs[] = {
        {"V4 biased", 256, 4096, 6, 0, 1, 1.0f, 0.0f},    /* layers 3..42: top-6 of s + bias */
        {"V4 hash", 256, 4096, 6, 1, 1, 1.0f, 0.0f},      /* layers 0..2: tid2eid, no bias */
        {"V4 temp 0.7", 256, 4096, 6, 0, 1, 0.7f, 0.0f},  /* the temperature division in both paths */
        {"V4.1", 384, 5120, 6, 0, 1, 1.0f, 1e-20f},       /* K split over a cluster of 2: no one launch */
        {"V4.1 DSpark", 128, 5120, 3, 0, 1, 1.0f, 1e-20f},
        {"unnormalised", 384, 4096, 8, 0, 0, 1.0f, 0.0f}, /* E = 384 on the one launch (rg_topk<32>) */
    };
    size_t bad = 0;
    for (unsigned i = 0; i < sizeof cfgs / sizeof *cfgs; i++) {
        size_t b = ri_cfg_run(&cfgs[i], 4200 + i);
        if (b) fprintf(stderr, "  %s: %zu failures\n", cfgs[i].name, b);
        bad += b;
    }
    CHECK_MSG(bad == 0, "route_gate batch-invariant: %zu values / checks differ", bad);
}
