/* gtest_moe_ops.c — the device MoE helpers (dic_model.h: route_rows, dispatch / gather / combine,
 * swiglu_n) against the CPU ops (src/ops/cpu/moe_route.c), bitwise except route_rows' libm
 * exp / log1p users (1-ulp differences allowed in a small fraction, printed).
 * Outputs poisoned with 0xFF bytes; each test runs all its shapes, prints shape, element and both
 * values of the first mismatches, then fails (split from gtest_model_ops.c by family). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/model_ops_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

/* ------------------------------------------------------------- MoE ---- */

/* di_route_rows with the device's softplus (exp / log1p in double, rounded
 * once): the bitwise reference for dic_route_rows. */
static void route_rows_cr(int M, float *lg, int E, float temp, const float *bias, const int32_t *tid2eid,
                          const int32_t *tokens, int k, float rs, float neps, int normalize, int *sel0, float *w0) {
    if (temp != 1.0f)
        for (size_t i = 0; i < (size_t)M * E; i++) lg[i] /= temp;
    for (int m = 0; m < M; m++) {
        float sc[1024], b[1024];
        const float *l = lg + (size_t)m * E;
        int *sel = sel0 + (size_t)m * k;
        float *w = w0 + (size_t)m * k;
        for (int e = 0; e < E; e++) {
            float sp = l[e] > 20.0f ? l[e] : (float)log1p((double)(float)exp((double)l[e]));
            sc[e] = sqrtf(sp);
            b[e] = bias ? sc[e] + bias[e] : sc[e];
        }
        if (tid2eid) memcpy(sel, tid2eid + (size_t)tokens[m] * k, (size_t)k * 4);
        else di_topk_desc(b, E, k, sel);
        float sum = 0.0f;
        for (int i = 0; i < k; i++) sum += sc[sel[i]];
        sum += neps;
        for (int i = 0; i < k; i++) w[i] = normalize ? sc[sel[i]] / sum * rs : sc[sel[i]] * rs;
    }
}

TEST(gpu_route_rows) {
    static const int cases[][5] = {/* M, E, k, hash, normalize */ {1, 256, 6, 0, 1},  {37, 384, 6, 0, 0},
                                   {300, 256, 6, 1, 1}, {64, 384, 6, 1, 0}, {5, 128, 3, 0, 1}};
    static const float temps[] = {1.0f, 0.7f, 1.3f, 1.0f, 2.0f};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 8080;
    size_t bad = 0, libm_sel = 0, ntok = 0;
    double worst = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int M = cases[t][0], E = cases[t][1], k = cases[t][2], hash = cases[t][3], norm = cases[t][4], V = 1000;
        float temp = temps[t];
        float *lg = malloc((size_t)M * E * 4), *lg_cr = malloc((size_t)M * E * 4), *lg_cpu = malloc((size_t)M * E * 4);
        float *bias = malloc((size_t)E * 4);
        for (size_t i = 0; i < (size_t)M * E; i++) lg[i] = gt_normal(&s) * 3.0f + (i % 997 == 3 ? 30.0f : 0.0f);
        gt_fill_f32(bias, (size_t)E, 0.1f, &s);
        int32_t *tid2eid = malloc((size_t)V * k * 4), *tokens = malloc((size_t)M * 4);
        for (size_t i = 0; i < (size_t)V * k; i++) tid2eid[i] = urand(&s, E);
        for (int m = 0; m < M; m++) tokens[m] = urand(&s, V);
        memcpy(lg_cr, lg, (size_t)M * E * 4), memcpy(lg_cpu, lg, (size_t)M * E * 4);
        int *sel = malloc((size_t)M * k * 4), *sel_cpu = malloc((size_t)M * k * 4);
        float *w = malloc((size_t)M * k * 4), *w_cpu = malloc((size_t)M * k * 4);
        route_rows_cr(M, lg_cr, E, temp, hash ? NULL : bias, hash ? tid2eid : NULL, tokens, k, 2.5f, 1e-20f, norm, sel, w);
        di_route_rows(NULL, M, lg_cpu, E, temp, hash ? NULL : bias, hash ? tid2eid : NULL, tokens, k, 2.5f, 1e-20f, norm,
                      sel_cpu, w_cpu);
        float *dlg = gt_to_dev(lg, (size_t)M * E * 4), *db = gt_to_dev(bias, (size_t)E * 4);
        int32_t *dt2e = gt_to_dev(tid2eid, (size_t)V * k * 4), *dtok = gt_to_dev(tokens, (size_t)M * 4);
        int *dsel = gt_dev_poison((size_t)M * k * 4);
        float *dw = gt_dev_poison((size_t)M * k * 4);
        CHECK(dlg && db && dt2e && dtok && dsel && dw);
        CUDA_SYNC_CHECK(dic_route_rows(&c, M, dlg, E, temp, hash ? NULL : db, hash ? dt2e : NULL, dtok, k, 2.5f, 1e-20f,
                                       norm, dsel, dw));
        float *glg = gt_d2h(dlg, (size_t)M * E * 4), *gw = gt_d2h(dw, (size_t)M * k * 4);
        int *gsel = gt_d2h(dsel, (size_t)M * k * 4);
        CHECK(glg && gw && gsel);
        size_t b = mdiff("route logits / temp", glg, lg_cpu, (size_t)M * E, 4, (size_t)E) +
                   mdiff("route sel", gsel, sel, (size_t)M * k, 4, (size_t)k) +
                   mdiff("route w", gw, w, (size_t)M * k, 4, (size_t)k);
        if (b) fprintf(stderr, "route_rows M=%d E=%d k=%d hash=%d normalize=%d temp=%g: %zu differ (vs the correctly "
                       "rounded softplus reference)\n", M, E, k, hash, norm, temp, b);
        bad += b;
        for (int m = 0; m < M; m++) { /* vs the CPU's libm: reported, bounded below */
            int same = !memcmp(gsel + (size_t)m * k, sel_cpu + (size_t)m * k, (size_t)k * 4);
            libm_sel += !same;
            for (int i = 0; same && i < k; i++) {
                double r = fabs((double)gw[m * k + i] - w_cpu[m * k + i]) / fabs((double)w_cpu[m * k + i]);
                if (r > worst) worst = r;
            }
        }
        ntok += M;
        cudaFree(dlg), cudaFree(db), cudaFree(dt2e), cudaFree(dtok), cudaFree(dsel), cudaFree(dw);
        free(lg), free(lg_cr), free(lg_cpu), free(bias), free(tid2eid), free(tokens), free(sel), free(sel_cpu);
        free(w), free(w_cpu), free(glg), free(gw), free(gsel);
    }
    fprintf(stderr, "route_rows vs CPU libm: %zu of %zu tokens select differently, worst weight rel. error %.3g\n",
            libm_sel, ntok, worst);
    CHECK_MSG(bad == 0, "route_rows: %zu values differ from the correctly rounded reference", bad);
    CHECK_MSG(worst < 1e-6 && libm_sel * 100 <= ntok, "route_rows vs CPU: %zu tokens differ, weights rel. %.3g",
              libm_sel, worst);
}

/* dispatch (off, rows, inv), gather, combine against di_moe_dispatch /
 * di_moe_gather / di_moe_combine on the same routing. */
TEST(gpu_moe_dispatch_gather_combine) {
    static const int cases[][4] = {/* M, k, E, d */ {1, 6, 256, 4096}, {7, 6, 384, 4096}, {513, 6, 256, 1000},
                                   {2048, 8, 64, 64}, {3, 1, 16, 7}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 4711;
    size_t bad = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int M = cases[t][0], k = cases[t][1], E = cases[t][2], d = cases[t][3], n = M * k;
        size_t ldx = (size_t)d + 8, lde = (size_t)d + 3;
        int *sel = malloc((size_t)n * 4);
        for (int i = 0; i < n; i++) sel[i] = urand(&s, E / 2 + 1) * 2 % E; /* some experts unused, skewed */
        int *off = malloc((size_t)(E + 1) * 4), *rows = malloc((size_t)n * 4), *inv = malloc((size_t)n * 4);
        di_moe_dispatch(NULL, M, k, sel, E, off, rows, inv);
        uint16_t *xn = malloc((size_t)M * ldx * 2), *xe = malloc((size_t)n * lde * 2);
        float *rw = malloc((size_t)n * 4), *erw = malloc((size_t)n * 4);
        gt_fill_bf16(xn, (size_t)M * ldx, 2.0f, &s);
        gt_fill_f32(rw, (size_t)n, 1.0f, &s);
        memset(xe, 0xFF, (size_t)n * lde * 2);
        di_moe_gather(NULL, n, off, E, rows, k, xn, ldx, d, rw, xe, lde, erw);
        uint16_t *eo = malloc((size_t)n * lde * 2);
        gt_fill_bf16(eo, (size_t)n * lde, 4.0f, &s);
        float *y = malloc((size_t)M * d * 4);
        di_moe_combine(NULL, M, k, inv, eo, lde, d, y);
        int *dsel = gt_to_dev(sel, (size_t)n * 4), *doff = gt_dev_poison((size_t)(E + 1) * 4);
        int *drows = gt_dev_poison((size_t)n * 4), *dinv = gt_dev_poison((size_t)n * 4);
        uint16_t *dxn = gt_to_dev(xn, (size_t)M * ldx * 2), *dxe = gt_dev_poison((size_t)n * lde * 2);
        float *drw = gt_to_dev(rw, (size_t)n * 4), *derw = gt_dev_poison((size_t)n * 4);
        uint16_t *deo = gt_to_dev(eo, (size_t)n * lde * 2);
        float *dy = gt_dev_poison((size_t)M * d * 4);
        CHECK(dsel && doff && drows && dinv && dxn && dxe && drw && derw && deo && dy);
        CUDA_SYNC_CHECK(dic_moe_dispatch_inv(&c, M, k, dsel, E, doff, drows, dinv));
        CUDA_SYNC_CHECK(dic_moe_gather(&c, n, doff, E, drows, k, dxn, ldx, d, drw, dxe, lde, derw));
        CUDA_SYNC_CHECK(dic_moe_combine_inv(&c, M, k, dinv, deo, lde, d, dy));
        int *goff = gt_d2h(doff, (size_t)(E + 1) * 4), *grows = gt_d2h(drows, (size_t)n * 4), *ginv = gt_d2h(dinv, (size_t)n * 4);
        uint16_t *gxe = gt_d2h(dxe, (size_t)n * lde * 2);
        float *gerw = gt_d2h(derw, (size_t)n * 4), *gy = gt_d2h(dy, (size_t)M * d * 4);
        CHECK(goff && grows && ginv && gxe && gerw && gy);
        size_t b = mdiff("dispatch off", goff, off, (size_t)E + 1, 4, 0) + mdiff("dispatch rows", grows, rows, (size_t)n, 4, 0) +
                   mdiff("dispatch inv", ginv, inv, (size_t)n, 4, (size_t)k) +
                   mdiff("gather xe", gxe, xe, (size_t)n * lde, 2, lde) + mdiff("gather erw", gerw, erw, (size_t)n, 4, 0) +
                   mdiff("combine y", gy, y, (size_t)M * d, 4, (size_t)d);
        if (b) fprintf(stderr, "moe M=%d k=%d E=%d d=%d: %zu differ\n", M, k, E, d, b);
        bad += b;
        cudaFree(dsel), cudaFree(doff), cudaFree(drows), cudaFree(dinv), cudaFree(dxn), cudaFree(dxe), cudaFree(drw);
        cudaFree(derw), cudaFree(deo), cudaFree(dy);
        free(sel), free(off), free(rows), free(inv), free(xn), free(xe), free(rw), free(erw), free(eo), free(y);
        free(goff), free(grows), free(ginv), free(gxe), free(gerw), free(gy);
    }
    CHECK_MSG(bad == 0, "MoE dispatch / gather / combine: %zu values differ from the CPU", bad);
}

TEST(gpu_swiglu_n) {
    static const int cases[][4] = {/* E, rows, max_rows, I */ {256, 6, 48, 2048}, {384, 300, 400, 3072},
                                   {8, 0, 16, 2048}, {4, 17, 17, 1000}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 99;
    size_t bad = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int E = cases[t][0], R = cases[t][1], maxr = cases[t][2], I = cases[t][3];
        size_t ld = (size_t)I + 8, ldo = (size_t)I + 2;
        int *off = calloc((size_t)E + 1, 4);
        for (int e = 1; e <= E; e++) off[e] = (int)((long long)R * e / E);
        uint16_t *g = malloc((size_t)maxr * ld * 2), *u = malloc((size_t)maxr * ld * 2), *o = malloc((size_t)maxr * ldo * 2);
        float *rw = malloc((size_t)maxr * 4);
        gt_fill_bf16(g, (size_t)maxr * ld, 12.0f, &s), gt_fill_bf16(u, (size_t)maxr * ld, 12.0f, &s);
        gt_fill_f32(rw, (size_t)maxr, 1.0f, &s);
        memset(o, 0xFF, (size_t)maxr * ldo * 2);
        di_exec x;
        CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
        di_swiglu_n(&x, off, E, g, u, ld, I, 10.0f, rw, o, ldo);
        di_exec_free(&x);
        int *doff = gt_to_dev(off, (size_t)(E + 1) * 4);
        uint16_t *dg = gt_to_dev(g, (size_t)maxr * ld * 2), *du = gt_to_dev(u, (size_t)maxr * ld * 2);
        float *drw = gt_to_dev(rw, (size_t)maxr * 4);
        uint16_t *dout = gt_dev_poison((size_t)maxr * ldo * 2);
        CHECK(doff && dg && du && drw && dout);
        CUDA_SYNC_CHECK(dic_swiglu_n(&c, doff, E, maxr, dg, du, ld, I, 10.0f, drw, dout, ldo));
        uint16_t *go = gt_d2h(dout, (size_t)maxr * ldo * 2);
        CHECK(go);
        size_t b = mdiff("swiglu_n", go, o, (size_t)maxr * ldo, 2, ldo); /* rows past off[E] stay poisoned */
        if (b) fprintf(stderr, "swiglu_n E=%d rows=%d max_rows=%d I=%d: %zu differ\n", E, R, maxr, I, b);
        bad += b;
        cudaFree(doff), cudaFree(dg), cudaFree(du), cudaFree(drw), cudaFree(dout);
        free(off), free(g), free(u), free(o), free(rw), free(go);
    }
    CHECK_MSG(bad == 0, "swiglu_n: %zu values differ from the CPU", bad);
}
