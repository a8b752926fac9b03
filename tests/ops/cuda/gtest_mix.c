/* gtest_mix.c — hyper-connections, MoE routing/dispatch/combine/SwiGLU,
 * element-wise helpers, embedding, argmax and sampling on the GPU against
 * the CPU ops (src/ops/cpu, src/engine/sampler.c). Bitwise everywhere except
 * the router's libm softplus (see gpu_route_*). Each test runs every shape
 * and reports all failing shapes before failing. */
#include <stdio.h>
#include <string.h>

#include "engine/philox.h"
#include "engine/sampler.h"
#include "ops/cuda/gpu_util.h"
#include "ops/ops.h"

cudaError_t gt_run_gumbel(uint64_t seed, uint32_t stream, uint64_t pos, uint32_t purpose, int n, float *out);

/* Compare n 32-bit (or 16-bit) words; print the first few mismatches. */
static size_t diff32(const char *what, const void *gpu, const void *cpu, size_t n, size_t row) {
    const uint32_t *a = gpu, *b = cpu;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            if (bad < 4) {
                float fa, fb;
                memcpy(&fa, &a[i], 4);
                memcpy(&fb, &b[i], 4);
                fprintf(stderr, "  %s: [%zu][%zu] gpu %08x (%g / %d) cpu %08x (%g / %d)\n", what, row ? i / row : 0,
                        row ? i % row : i, a[i], fa, (int)a[i], b[i], fb, (int)b[i]);
            }
            bad++;
        }
    return bad;
}
static size_t diff16(const char *what, const uint16_t *a, const uint16_t *b, size_t n, size_t row) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            if (bad < 4)
                fprintf(stderr, "  %s: [%zu][%zu] gpu %04x (%g) cpu %04x (%g)\n", what, row ? i / row : 0,
                        row ? i % row : i, a[i], di_bf16_to_f32(a[i]), b[i], di_bf16_to_f32(b[i]));
            bad++;
        }
    return bad;
}

/* ---------------------------------------------------------------- mHC -- */

TEST(gpu_hc_scale_mixes) {
    static const int shapes[][3] = {{1, 4 * 4096, 0}, {3, 4 * 5120, 0}, {17, 4 * 4096, 8}, {64, 4 * 5120, 0},
                                    {5, 1000, 0}, {2, 4 * 40, 3}, {129, 4 * 4096, 0}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 0x1234567ull;
    size_t total_bad = 0, rows = 0;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int M = shapes[t][0], hcd = shapes[t][1], nmix = 24;
        size_t ldr = (size_t)hcd + shapes[t][2];
        uint16_t *R = malloc((size_t)M * ldr * 2);
        /* residual-like rows: normal values times a per-row scale, some tiny */
        for (int m = 0; m < M; m++) {
            float sc = ldexpf(1.0f, (int)(gt_rand_u64(&s) % 12) - 4);
            for (size_t i = 0; i < ldr; i++) R[m * ldr + i] = di_f32_to_bf16(gt_normal(&s) * sc * (i % 97 ? 1.0f : 1e-4f));
        }
        float *in = malloc((size_t)M * nmix * 4), *ref = malloc((size_t)M * nmix * 4);
        gt_fill_f32(in, (size_t)M * nmix, 3.0f, &s);
        di_hc_scale_mixes(NULL, M, R, ldr, hcd, 1e-6f, in, nmix, ref);
        uint16_t *dR = gt_to_dev(R, (size_t)M * ldr * 2);
        float *din = gt_to_dev(in, (size_t)M * nmix * 4), *dout = gt_dev_poison((size_t)M * nmix * 4);
        CHECK(dR && din && dout);
        CUDA_SYNC_CHECK(dic_hc_scale_mixes(&c, M, dR, ldr, hcd, 1e-6f, din, nmix, dout));
        float *got = gt_d2h(dout, (size_t)M * nmix * 4);
        CHECK(got);
        size_t bad = diff32("scale_mixes", got, ref, (size_t)M * nmix, nmix);
        if (bad) fprintf(stderr, "scale_mixes M=%d hcd=%d ldr=%zu: %zu of %d values differ\n", M, hcd, ldr, bad, M * nmix);
        total_bad += bad;
        rows += M;
        cudaFree(dR), cudaFree(din), cudaFree(dout);
        free(R), free(in), free(ref), free(got);
    }
    CHECK_MSG(total_bad == 0, "hc_scale_mixes: %zu values differ from the CPU (%zu rows; the double sum of squares "
              "is tree-ordered: see dic_mhc.cu)", total_bad, rows);
}

TEST(gpu_hc_sinkhorn_rows) {
    static const int Ms[] = {1, 2, 5, 16, 37, 300, 4096};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 99;
    size_t total_bad = 0;
    for (size_t t = 0; t < sizeof Ms / sizeof *Ms; t++) {
        int M = Ms[t], iters = t % 2 ? 20 : 7;
        float eps = 1e-6f;
        float *mix = malloc((size_t)M * 24 * 4), sc3[3], base[24];
        gt_fill_f32(mix, (size_t)M * 24, 4.0f, &s);
        gt_fill_f32(sc3, 3, 2.0f, &s);
        gt_fill_f32(base, 24, 1.5f, &s);
        float *pre = malloc((size_t)M * 16), *post = malloc((size_t)M * 16), *comb = malloc((size_t)M * 64);
        di_hc_sinkhorn_rows(NULL, M, mix, sc3, base, iters, eps, pre, post, comb);
        float *dmix = gt_to_dev(mix, (size_t)M * 96), *dsc = gt_to_dev(sc3, 12), *dbase = gt_to_dev(base, 96);
        float *dpre = gt_dev_poison((size_t)M * 16), *dpost = gt_dev_poison((size_t)M * 16),
              *dcomb = gt_dev_poison((size_t)M * 64);
        CHECK(dmix && dsc && dbase && dpre && dpost && dcomb);
        CUDA_SYNC_CHECK(dic_hc_sinkhorn_rows(&c, M, dmix, dsc, dbase, iters, eps, dpre, dpost, dcomb));
        float *gpre = gt_d2h(dpre, (size_t)M * 16), *gpost = gt_d2h(dpost, (size_t)M * 16), *gcomb = gt_d2h(dcomb, (size_t)M * 64);
        CHECK(gpre && gpost && gcomb);
        size_t bad = diff32("pre", gpre, pre, (size_t)M * 4, 4) + diff32("post", gpost, post, (size_t)M * 4, 4) +
                     diff32("comb", gcomb, comb, (size_t)M * 16, 16);
        if (bad) fprintf(stderr, "sinkhorn M=%d iters=%d: %zu values differ\n", M, iters, bad);
        total_bad += bad;
        cudaFree(dmix), cudaFree(dsc), cudaFree(dbase), cudaFree(dpre), cudaFree(dpost), cudaFree(dcomb);
        free(mix), free(pre), free(post), free(comb), free(gpre), free(gpost), free(gcomb);
    }
    CHECK_MSG(total_bad == 0, "hc_sinkhorn_rows: %zu values differ from the CPU", total_bad);
}

TEST(gpu_hc_collapse_expand) {
    static const int shapes[][3] = {{1, 4096, 0}, {7, 5120, 0}, {33, 4096, 8}, {2, 100, 0}, {3, 8, 0}, {4, 5120, 5}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 7777;
    size_t total_bad = 0;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int M = shapes[t][0], d = shapes[t][1];
        size_t ldr = 4 * (size_t)d + shapes[t][2], ldy = (size_t)d + shapes[t][2];
        uint16_t *R = malloc((size_t)M * ldr * 2), *f = malloc((size_t)M * ldy * 2);
        gt_fill_bf16(R, (size_t)M * ldr, 4.0f, &s);
        gt_fill_bf16(f, (size_t)M * ldy, 2.0f, &s);
        float *pre = malloc((size_t)M * 16), *post = malloc((size_t)M * 16), *comb = malloc((size_t)M * 64);
        gt_fill_f32(pre, (size_t)M * 4, 1.0f, &s);
        gt_fill_f32(post, (size_t)M * 4, 2.0f, &s);
        gt_fill_f32(comb, (size_t)M * 16, 1.0f, &s);
        uint16_t *y = malloc((size_t)M * ldy * 2), *Ro = malloc((size_t)M * ldr * 2);
        memset(y, 0xFF, (size_t)M * ldy * 2);
        memset(Ro, 0xFF, (size_t)M * ldr * 2);
        di_hc_collapse(NULL, M, pre, R, ldr, d, y, ldy);
        di_hc_expand(NULL, M, post, comb, f, ldy, R, Ro, ldr, d);
        uint16_t *dR = gt_to_dev(R, (size_t)M * ldr * 2), *df = gt_to_dev(f, (size_t)M * ldy * 2);
        uint16_t *dy = gt_dev_poison((size_t)M * ldy * 2), *dRo = gt_dev_poison((size_t)M * ldr * 2);
        float *dpre = gt_to_dev(pre, (size_t)M * 16), *dpost = gt_to_dev(post, (size_t)M * 16),
              *dcomb = gt_to_dev(comb, (size_t)M * 64);
        CHECK(dR && df && dy && dRo && dpre && dpost && dcomb);
        CUDA_SYNC_CHECK(dic_hc_collapse(&c, M, dpre, dR, ldr, d, dy, ldy));
        CUDA_SYNC_CHECK(dic_hc_expand(&c, M, dpost, dcomb, df, ldy, dR, dRo, ldr, d));
        uint16_t *gy = gt_d2h(dy, (size_t)M * ldy * 2), *gRo = gt_d2h(dRo, (size_t)M * ldr * 2);
        CHECK(gy && gRo);
        size_t bad = 0;
        for (int m = 0; m < M; m++) {
            bad += diff16("collapse", gy + m * ldy, y + m * ldy, (size_t)d, 0);
            bad += diff16("expand", gRo + m * ldr, Ro + m * ldr, 4 * (size_t)d, 0);
        }
        /* in place: Rout == R */
        CUDA_SYNC_CHECK(dic_hc_expand(&c, M, dpost, dcomb, df, ldy, dR, dR, ldr, d));
        uint16_t *gi = gt_d2h(dR, (size_t)M * ldr * 2);
        CHECK(gi);
        for (int m = 0; m < M; m++) bad += diff16("expand in place", gi + m * ldr, Ro + m * ldr, 4 * (size_t)d, 0);
        if (bad) fprintf(stderr, "collapse/expand M=%d d=%d ldr=%zu: %zu values differ\n", M, d, ldr, bad);
        total_bad += bad;
        cudaFree(dR), cudaFree(df), cudaFree(dy), cudaFree(dRo), cudaFree(dpre), cudaFree(dpost), cudaFree(dcomb);
        free(R), free(f), free(pre), free(post), free(comb), free(y), free(Ro), free(gy), free(gRo), free(gi);
    }
    CHECK_MSG(total_bad == 0, "hc_collapse / hc_expand: %zu values differ from the CPU", total_bad);
}

/* ---------------------------------------------------------------- MoE -- */

/* di_route with the device's softplus: each of expf / log1pf evaluated in
 * double and rounded once (correctly rounded but for ~2^-29 of inputs). */
static void route_cr(const float *logits, int E, const float *bias, const int *fixed, int k, float rs, float neps,
                     int *sel, float *w) {
    float sc[1024], b[1024];
    for (int e = 0; e < E; e++) {
        float l = logits[e];
        float sp = l > 20.0f ? l : (float)log1p((double)(float)exp((double)l));
        sc[e] = sqrtf(sp);
        b[e] = bias ? sc[e] + bias[e] : sc[e];
    }
    if (fixed) for (int i = 0; i < k; i++) sel[i] = fixed[i];
    else di_topk_desc(b, E, k, sel);
    float sum = 0.0f;
    for (int i = 0; i < k; i++) sum += sc[sel[i]];
    sum += neps;
    for (int i = 0; i < k; i++) w[i] = sc[sel[i]] / sum * rs;
}

TEST(gpu_route) {
    static const int shapes[][4] = {/* M, E, k, mode: 0 bias, 1 no bias, 2 fixed, 3 coarse logits (ties) */
                                    {1, 256, 6, 0}, {7, 384, 6, 0}, {128, 256, 6, 1}, {513, 384, 6, 0},
                                    {64, 128, 3, 0}, {33, 256, 6, 2}, {200, 384, 6, 3}, {50, 256, 6, 3}, {9, 1024, 8, 0}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 4242;
    size_t bad_cr = 0, sel_libm = 0, ntok = 0;
    double worst_w = 0;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int M = shapes[t][0], E = shapes[t][1], k = shapes[t][2], mode = shapes[t][3];
        float *lg = malloc((size_t)M * E * 4), *bias = malloc((size_t)E * 4);
        for (size_t i = 0; i < (size_t)M * E; i++) {
            lg[i] = gt_normal(&s) * 3.0f;
            if (mode == 3) lg[i] = roundf(lg[i] * 2.0f) * 0.5f; /* many equal scores */
            if (i % 1009 == 5) lg[i] = 25.0f + (float)(i % 7); /* over the softplus threshold */
        }
        for (int e = 0; e < E; e++) bias[e] = mode == 3 ? 0.0f : gt_rand_unit(&s) * 0.1f;
        int *fixed = NULL;
        if (mode == 2) {
            fixed = malloc((size_t)M * k * 4);
            for (size_t i = 0; i < (size_t)M * k; i++) fixed[i] = (int)(gt_rand_u64(&s) % (uint64_t)E);
        }
        const float *bp = mode == 1 ? NULL : bias;
        int *sel = malloc((size_t)M * k * 4), *sel2 = malloc((size_t)M * k * 4);
        float *w = malloc((size_t)M * k * 4), *w2 = malloc((size_t)M * k * 4);
        for (int m = 0; m < M; m++) {
            const int *fx = fixed ? fixed + (size_t)m * k : NULL;
            route_cr(lg + (size_t)m * E, E, bp, fx, k, 1.5f, 0.0f, sel + (size_t)m * k, w + (size_t)m * k);
            di_route(lg + (size_t)m * E, E, bp, fx, k, 1.5f, 0.0f, sel2 + (size_t)m * k, w2 + (size_t)m * k);
        }
        float *dlg = gt_to_dev(lg, (size_t)M * E * 4), *db = gt_to_dev(bias, (size_t)E * 4),
              *dw = gt_dev_poison((size_t)M * k * 4);
        int *dfx = fixed ? gt_to_dev(fixed, (size_t)M * k * 4) : NULL, *dsel = gt_dev_poison((size_t)M * k * 4);
        CHECK(dlg && db && dw && dsel && (!fixed || dfx));
        CUDA_SYNC_CHECK(dic_route(&c, M, dlg, E, bp ? db : NULL, dfx, k, 1.5f, 0.0f, dsel, dw));
        int *gsel = gt_d2h(dsel, (size_t)M * k * 4);
        float *gw = gt_d2h(dw, (size_t)M * k * 4);
        CHECK(gsel && gw);
        size_t b = diff32("route sel", gsel, sel, (size_t)M * k, k) + diff32("route w", gw, w, (size_t)M * k, k);
        if (b) fprintf(stderr, "route M=%d E=%d k=%d mode=%d: %zu values differ from the correctly rounded reference\n",
                       M, E, k, mode, b);
        bad_cr += b;
        for (int m = 0; m < M; m++) { /* against the CPU's libm: report only */
            int same = !memcmp(gsel + (size_t)m * k, sel2 + (size_t)m * k, (size_t)k * 4);
            sel_libm += !same;
            if (same)
                for (int i = 0; i < k; i++) {
                    double r = fabs((double)gw[m * k + i] - w2[m * k + i]) / fabs((double)w2[m * k + i]);
                    if (r > worst_w) worst_w = r;
                }
        }
        ntok += M;
        cudaFree(dlg), cudaFree(db), cudaFree(dw), cudaFree(dsel), cudaFree(dfx);
        free(lg), free(bias), free(fixed), free(sel), free(sel2), free(w), free(w2), free(gsel), free(gw);
    }
    fprintf(stderr, "route vs CPU libm (log1pf/expf not correctly rounded in glibc): %zu of %zu tokens select "
            "differently, worst weight rel. error %.3g\n", sel_libm, ntok, worst_w);
    CHECK_MSG(bad_cr == 0, "dic_route: %zu values differ from di_route with correctly rounded softplus", bad_cr);
    CHECK_MSG(worst_w < 1e-6 && sel_libm * 100 <= ntok, "dic_route vs CPU libm: %zu tokens select differently, "
              "weights rel. error %.3g (bound 1e-6)", sel_libm, worst_w);
}

TEST(gpu_moe_dispatch) {
    static const int shapes[][4] = {{1, 6, 256, 0}, {5, 6, 384, 0}, {1000, 6, 256, 1}, {8192, 6, 384, 0},
                                    {37, 3, 128, 2}, {4096, 6, 256, 1}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 31337;
    size_t total_bad = 0;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int M = shapes[t][0], k = shapes[t][1], E = shapes[t][2], mode = shapes[t][3];
        int n = M * k, *sel = malloc((size_t)n * 4);
        for (int m = 0; m < M; m++)
            for (int i = 0; i < k; i++) {
                int e;
                for (;;) { /* distinct per token; mode 1 skews to a few hot experts; mode 2 allows repeats and -1 */
                    e = mode == 1 && gt_rand_u64(&s) % 2 ? (int)(gt_rand_u64(&s) % 8) : (int)(gt_rand_u64(&s) % (uint64_t)E);
                    int dup = 0;
                    for (int j = 0; j < i; j++) dup |= sel[m * k + j] == e;
                    if (!dup || mode == 2) break;
                }
                if (mode == 2 && gt_rand_u64(&s) % 10 == 0) e = -1;
                sel[m * k + i] = e;
            }
        int *off = calloc((size_t)E + 1, 4), *rows = malloc((size_t)n * 4), cnt = 0;
        for (int e = 0; e < E; e++) {
            off[e] = cnt;
            for (int j = 0; j < n; j++)
                if (sel[j] == e) rows[cnt++] = j;
        }
        off[E] = cnt;
        int *dsel = gt_to_dev(sel, (size_t)n * 4), *doff = gt_dev_poison((size_t)(E + 1) * 4),
            *drows = gt_dev_poison((size_t)n * 4);
        CHECK(dsel && doff && drows);
        CUDA_SYNC_CHECK(dic_moe_dispatch(&c, M, k, dsel, E, doff, drows));
        int *goff = gt_d2h(doff, (size_t)(E + 1) * 4), *grows = gt_d2h(drows, (size_t)n * 4);
        CHECK(goff && grows);
        size_t b = diff32("dispatch off", goff, off, (size_t)E + 1, 0) + diff32("dispatch rows", grows, rows, (size_t)cnt, 0);
        if (b) fprintf(stderr, "dispatch M=%d k=%d E=%d mode=%d: %zu entries differ\n", M, k, E, mode, b);
        total_bad += b;
        cudaFree(dsel), cudaFree(doff), cudaFree(drows);
        free(sel), free(off), free(rows), free(goff), free(grows);
    }
    CHECK_MSG(total_bad == 0, "dic_moe_dispatch: %zu entries differ from the counting sort", total_bad);
}

TEST(gpu_swiglu) {
    static const int shapes[][4] = {{1, 2048, 0, 1}, {5, 2304, 8, 0}, {64, 2048, 0, 1}, {3, 100, 0, 1}, {7, 2304, 3, 1}};
    static const float limits[] = {0.0f, 7.0f};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 5150;
    size_t total_bad = 0;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++)
        for (int li = 0; li < 2; li++) {
            int M = shapes[t][0], I = shapes[t][1], userw = shapes[t][3];
            size_t ld = (size_t)I + shapes[t][2];
            float lim = limits[li];
            uint16_t *g = malloc((size_t)M * ld * 2), *u = malloc((size_t)M * ld * 2), *o = malloc((size_t)M * ld * 2);
            gt_fill_bf16(g, (size_t)M * ld, 12.0f, &s);
            gt_fill_bf16(u, (size_t)M * ld, 12.0f, &s);
            float *rw = malloc((size_t)M * 4);
            gt_fill_f32(rw, (size_t)M, 1.5f, &s);
            memset(o, 0xFF, (size_t)M * ld * 2);
            di_swiglu(NULL, M, g, u, ld, I, lim, userw ? rw : NULL, o, ld);
            uint16_t *dg = gt_to_dev(g, (size_t)M * ld * 2), *du = gt_to_dev(u, (size_t)M * ld * 2),
                     *dout = gt_dev_poison((size_t)M * ld * 2);
            float *drw = gt_to_dev(rw, (size_t)M * 4);
            CHECK(dg && du && dout && drw);
            CUDA_SYNC_CHECK(dic_swiglu(&c, M, dg, du, ld, I, lim, userw ? drw : NULL, dout, ld));
            uint16_t *go = gt_d2h(dout, (size_t)M * ld * 2);
            CHECK(go);
            size_t b = 0;
            for (int m = 0; m < M; m++) b += diff16("swiglu", go + m * ld, o + m * ld, (size_t)I, 0);
            if (b) fprintf(stderr, "swiglu M=%d I=%d ld=%zu limit=%g rw=%d: %zu differ\n", M, I, ld, lim, userw, b);
            total_bad += b;
            cudaFree(dg), cudaFree(du), cudaFree(dout), cudaFree(drw);
            free(g), free(u), free(o), free(rw), free(go);
        }
    CHECK_MSG(total_bad == 0, "dic_swiglu: %zu values differ from the CPU", total_bad);
}

TEST(gpu_moe_combine) {
    static const int shapes[][5] = {/* M, k, E, d, mode (0 distinct, 1 repeats + invalid, 2 no shared) */
                                    {1, 6, 256, 4096, 0}, {9, 6, 384, 5120, 0}, {64, 6, 256, 4096, 1},
                                    {5, 3, 128, 100, 2}, {300, 6, 384, 5120, 0}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 2718;
    size_t total_bad = 0;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int M = shapes[t][0], k = shapes[t][1], E = shapes[t][2], d = shapes[t][3], mode = shapes[t][4];
        int n = M * k, *sel = malloc((size_t)n * 4);
        for (int m = 0; m < M; m++)
            for (int i = 0; i < k; i++) {
                int e;
                for (;;) {
                    e = (int)(gt_rand_u64(&s) % (uint64_t)E);
                    int dup = 0;
                    for (int j = 0; j < i; j++) dup |= sel[m * k + j] == e;
                    if (!dup || mode == 1) break;
                }
                if (mode == 1 && i == 1) e = sel[m * k]; /* same expert twice */
                if (mode == 1 && gt_rand_u64(&s) % 7 == 0) e = E; /* invalid: ignored */
                sel[m * k + i] = e;
            }
        uint16_t *eo = malloc((size_t)n * d * 2), *sh = malloc((size_t)M * d * 2), *out = malloc((size_t)M * d * 2);
        for (size_t i = 0; i < (size_t)n * d; i++) eo[i] = di_f32_to_bf16(gt_normal(&s) * (i % 5 ? 0.1f : 30.0f));
        gt_fill_bf16(sh, (size_t)M * d, 1.0f, &s);
        /* moe.c's accumulation, literally */
        float *y = calloc((size_t)M * d, 4);
        for (int e = 0; e < E; e++)
            for (int m = 0; m < M; m++)
                for (int i = 0; i < k; i++)
                    if (sel[m * k + i] == e) di_add_bf16_f32(y + (size_t)m * d, eo + ((size_t)m * k + i) * d, (size_t)d);
        if (mode != 2) di_add_bf16_f32(y, sh, (size_t)M * d);
        di_f32_to_bf16_n(y, out, (size_t)M * d);
        int *dsel = gt_to_dev(sel, (size_t)n * 4);
        uint16_t *deo = gt_to_dev(eo, (size_t)n * d * 2), *dsh = gt_to_dev(sh, (size_t)M * d * 2),
                 *dout = gt_dev_poison((size_t)M * d * 2);
        CHECK(dsel && deo && dsh && dout);
        CUDA_SYNC_CHECK(dic_moe_combine(&c, M, k, dsel, E, deo, (size_t)d, mode == 2 ? NULL : dsh, (size_t)d, d, dout,
                                        (size_t)d));
        uint16_t *go = gt_d2h(dout, (size_t)M * d * 2);
        CHECK(go);
        size_t b = diff16("combine", go, out, (size_t)M * d, (size_t)d);
        if (b) fprintf(stderr, "combine M=%d k=%d E=%d d=%d mode=%d: %zu differ\n", M, k, E, d, mode, b);
        total_bad += b;
        cudaFree(dsel), cudaFree(deo), cudaFree(dsh), cudaFree(dout);
        free(sel), free(eo), free(sh), free(out), free(y), free(go);
    }
    CHECK_MSG(total_bad == 0, "dic_moe_combine: %zu values differ from moe.c's accumulation", total_bad);
}

/* ------------------------------------------------------- element-wise -- */

TEST(gpu_elementwise) {
    static const size_t ns[] = {1, 7, 16, 4096 * 4, 1000003, 5120 * 37};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 1618;
    size_t total_bad = 0;
    for (size_t t = 0; t < sizeof ns / sizeof *ns; t++)
        for (int sh = 0; sh < 2; sh++) { /* sh = 1: pointers one element off 16-byte alignment */
            size_t n = ns[t];
            float *a = malloc((n + 1) * 4), *b = malloc((n + 1) * 4), *r1 = malloc((n + 1) * 4), *r2 = malloc((n + 1) * 4);
            uint16_t *v = malloc((n + 1) * 2), *r3 = malloc((n + 1) * 2);
            gt_fill_f32(a, n + 1, 100.0f, &s);
            gt_fill_f32(b, n + 1, 1.0f, &s);
            gt_fill_bf16(v, n + 1, 50.0f, &s);
            if (n > 10) { /* specials: NaN, inf, tie-to-even bf16 cases */
                a[3] = NAN;
                a[4] = INFINITY;
                a[5] = di_bits_f32(0x3F808000u);
                a[6] = di_bits_f32(0x3F818000u);
            }
            memcpy(r1, a, (n + 1) * 4);
            di_add_bf16_f32(r1 + sh, v + sh, n);
            di_add_f32(r2 + sh, a + sh, b + sh, n);
            di_f32_to_bf16_n(a + sh, r3 + sh, n);
            float *da = gt_to_dev(a, (n + 1) * 4), *db = gt_to_dev(b, (n + 1) * 4), *dy = gt_to_dev(a, (n + 1) * 4),
                  *dsum = gt_dev_poison((n + 1) * 4);
            uint16_t *dv = gt_to_dev(v, (n + 1) * 2), *dh = gt_dev_poison((n + 1) * 2);
            CHECK(da && db && dy && dsum && dv && dh);
            CUDA_SYNC_CHECK(dic_add_bf16_f32(&c, dy + sh, dv + sh, n));
            CUDA_SYNC_CHECK(dic_add_f32(&c, dsum + sh, da + sh, db + sh, n));
            CUDA_SYNC_CHECK(dic_f32_to_bf16_n(&c, da + sh, dh + sh, n));
            float *gy = gt_d2h(dy, (n + 1) * 4), *gs = gt_d2h(dsum, (n + 1) * 4);
            uint16_t *gh = gt_d2h(dh, (n + 1) * 2);
            CHECK(gy && gs && gh);
            size_t bb = 0;
            for (size_t i = 0; i < n; i++) { /* NaN + x: any NaN is fine */
                float x = gy[i + sh], y = r1[i + sh];
                if (di_f32_bits(x) != di_f32_bits(y) && !(x != x && y != y)) bb++;
                x = gs[i + sh], y = r2[i + sh];
                if (di_f32_bits(x) != di_f32_bits(y) && !(x != x && y != y)) bb++;
            }
            bb += diff16("f32_to_bf16_n", gh + sh, r3 + sh, n, 0);
            if (bb) fprintf(stderr, "elementwise n=%zu shift=%d: %zu differ\n", n, sh, bb);
            total_bad += bb;
            cudaFree(da), cudaFree(db), cudaFree(dy), cudaFree(dsum), cudaFree(dv), cudaFree(dh);
            free(a), free(b), free(r1), free(r2), free(v), free(r3), free(gy), free(gs), free(gh);
        }
    CHECK_MSG(total_bad == 0, "element-wise helpers: %zu values differ from the CPU", total_bad);
}

TEST(gpu_embed) {
    static const int shapes[][3] = {{1, 4096, 0}, {17, 5120, 0}, {64, 4096, 8}, {5, 100, 0}, {3, 5120, 3}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 1414;
    const int rows = 1500;
    size_t total_bad = 0;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int M = shapes[t][0], w = shapes[t][1];
        size_t ldo = (size_t)w + shapes[t][2];
        uint16_t *tab = malloc((size_t)rows * w * 2);
        gt_fill_bf16(tab, (size_t)rows * w, 1.0f, &s);
        int32_t *ids = malloc((size_t)M * 4);
        for (int m = 0; m < M; m++) ids[m] = m == 1 ? rows - 1 : (int32_t)(gt_rand_u64(&s) % rows);
        uint16_t *dt = gt_to_dev(tab, (size_t)rows * w * 2), *dout = gt_dev_poison((size_t)M * ldo * 2);
        int32_t *dids = gt_to_dev(ids, (size_t)M * 4);
        CHECK(dt && dout && dids);
        CUDA_SYNC_CHECK(dic_embed(&c, M, dids, dt, w, dout, ldo));
        uint16_t *go = gt_d2h(dout, (size_t)M * ldo * 2);
        CHECK(go);
        size_t b = 0;
        for (int m = 0; m < M; m++) b += diff16("embed", go + m * ldo, tab + (size_t)ids[m] * w, (size_t)w, 0);
        if (b) fprintf(stderr, "embed M=%d width=%d ldo=%zu: %zu differ\n", M, w, ldo, b);
        total_bad += b;
        cudaFree(dt), cudaFree(dout), cudaFree(dids);
        free(tab), free(ids), free(go);
    }
    CHECK_MSG(total_bad == 0, "dic_embed: %zu values differ", total_bad);
}

/* ----------------------------------------------------------- sampling -- */

TEST(gpu_argmax) {
    static const int shapes[][3] = {{1, 129280, 0}, {4, 129280, 1}, {33, 129280, 2}, {3, 1000, 3}, {5, 7, 0}, {2, 129281, 1}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 8080;
    size_t total_bad = 0;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int M = shapes[t][0], V = shapes[t][1], mode = shapes[t][2];
        size_t ld = (size_t)V + (mode == 3 ? 1 : 0);
        float *lg = malloc((size_t)M * ld * 4);
        int32_t *ref = malloc((size_t)M * 4);
        for (int m = 0; m < M; m++) {
            float *l = lg + (size_t)m * ld;
            for (int v = 0; v < V; v++) l[v] = gt_normal(&s) * 4.0f;
            if (mode == 1 && V > 100) { /* ties: the max at several ids */
                l[V - 3] = l[77] = l[V / 2] = 40.0f;
            }
            if (mode == 2) { /* NaNs and infinities: NaN counts as -inf */
                for (int v = 0; v < V; v += 13) l[v] = NAN;
                l[V - 1] = -INFINITY;
                if (m % 3 == 0) l[(m * 7919) % V] = INFINITY;
            }
            if (mode == 3) l[V - 1] = 100.0f; /* last id */
            int32_t b = -1;
            for (int v = 0; v < V; v++) {
                float x = l[v] != l[v] ? -INFINITY : l[v];
                if (b < 0 || x > (l[b] != l[b] ? -INFINITY : l[b])) b = v;
            }
            ref[m] = b;
        }
        float *dl = gt_to_dev(lg, (size_t)M * ld * 4);
        int32_t *dids = gt_dev_poison((size_t)M * 4);
        CHECK(dl && dids);
        CUDA_SYNC_CHECK(dic_argmax(&c, M, dl, ld, V, dids));
        int32_t *g = gt_d2h(dids, (size_t)M * 4);
        CHECK(g);
        size_t b = diff32("argmax", g, ref, (size_t)M, 0);
        if (b) fprintf(stderr, "argmax M=%d V=%d mode=%d: %zu rows differ\n", M, V, mode, b);
        total_bad += b;
        cudaFree(dl), cudaFree(dids);
        free(lg), free(ref), free(g);
    }
    CHECK_MSG(total_bad == 0, "dic_argmax: %zu rows differ", total_bad);
}

TEST(gpu_gumbel_noise_matches_cpu) {
    enum { N = 129280 };
    float *d = gt_dev_poison(N * 4), *h = malloc(N * 4);
    CHECK(d);
    uint64_t s = 6;
    size_t bad = 0;
    for (int r = 0; r < 24; r++) {
        uint64_t seed = gt_rand_u64(&s), pos = r < 12 ? (uint64_t)r : gt_rand_u64(&s);
        uint32_t stream = (uint32_t)(r % 3), purpose = (uint32_t)(r % 3);
        CUDA_SYNC_CHECK(gt_run_gumbel(seed, stream, pos, purpose, N, d));
        CUDA_CHECK(cudaMemcpy(h, d, N * 4, cudaMemcpyDeviceToHost));
        for (int v = 0; v < N; v++)
            if (di_f32_bits(h[v]) != di_f32_bits(di_gumbel_at(seed, stream, pos, purpose, (uint32_t)v))) {
                if (bad < 4) fprintf(stderr, "  gumbel seed %llx id %d: gpu %a cpu %a\n", (unsigned long long)seed, v, h[v],
                                     di_gumbel_at(seed, stream, pos, purpose, (uint32_t)v));
                bad++;
            }
    }
    cudaFree(d);
    free(h);
    CHECK_MSG(bad == 0, "Gumbel noise: %zu of %d values differ from philox.c", bad, 24 * N);
}

/* One parameter mix of the sampler test. */
typedef struct mix_case {
    const char *name;
    float temp, top_p, min_p, rep, pres, freq;
    int top_k, min_tokens, mask, logit_scale;
} mix_case;

TEST(gpu_sample_rows_match_cpu) {
    static const mix_case cases[] = {
        {"greedy", 0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 0, 0, 4},
        {"greedy+penalties", 0.0f, 1.0f, 0.0f, 1.3f, 0.5f, 0.3f, 0, 0, 0, 4},
        {"greedy, min_tokens + mask", 0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 1000000, 1, 4},
        {"greedy, coarse logits (ties)", 0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 0, 0, 0},
        {"temp 1", 1.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 0, 0, 4},
        {"temp 0.7 top_k 50", 0.7f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 50, 0, 0, 4},
        {"top_k 1", 1.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 1, 0, 0, 4},
        {"top_k 2000 flat", 1.5f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 2000, 0, 0, 1},
        {"min_p 0.05", 0.8f, 1.0f, 0.05f, 1.0f, 0.0f, 0.0f, 0, 0, 0, 4},
        {"top_p 0.9", 1.0f, 0.9f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 0, 0, 4},
        {"top_p 0.95 flat (many chunks)", 1.2f, 0.95f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 0, 0, 1},
        {"top_p 0.5 top_k 40", 0.9f, 0.5f, 0.0f, 1.0f, 0.0f, 0.0f, 40, 0, 0, 4},
        {"all filters", 0.6f, 0.8f, 0.02f, 1.1f, 0.2f, 0.1f, 100, 0, 0, 4},
        {"penalties", 1.0f, 1.0f, 0.0f, 1.5f, 1.0f, 0.7f, 0, 0, 0, 2},
        {"presence only", 1.0f, 1.0f, 0.0f, 1.0f, -0.5f, 0.0f, 0, 0, 0, 2},
        {"min_tokens + mask", 0.9f, 0.95f, 0.0f, 1.0f, 0.0f, 0.0f, 20, 1000000, 1, 4},
        {"coarse logits (ties)", 1.0f, 0.9f, 0.0f, 1.2f, 0.0f, 0.0f, 30, 0, 0, 0},
    };
    static const int Vs[] = {129280, 1000, 37};
    enum { SEEDS = 24 };
    uint64_t s = 0xABCDEFull;
    size_t bad = 0, total = 0, cpu_err = 0;
    for (size_t vi = 0; vi < sizeof Vs / sizeof *Vs; vi++) {
        int V = Vs[vi], M = SEEDS;
        dic_ctx c;
        CHECK(gt_ctx(&c, dic_sample_rows_scratch(M, V)));
        di_sampler_scratch sc;
        di_error err;
        CHECK(di_sampler_scratch_init(&sc, V, &err) == DEEPINFER_OK);
        float *lg = malloc((size_t)M * V * 4);
        const int NP = 300, NO = 200;
        int32_t *prompt = malloc((size_t)M * NP * 4), *output = malloc((size_t)M * NO * 4), stop_ids[3] = {5, 11, 30};
        uint32_t *mask = malloc((size_t)(V + 31) / 32 * 4);
        for (int i = 0; i < (V + 31) / 32; i++) mask[i] = (uint32_t)gt_rand_u64(&s) | 0x00010001u;
        int32_t *dstop = gt_to_dev(stop_ids, sizeof stop_ids);
        uint32_t *dmask = gt_to_dev(mask, (size_t)(V + 31) / 32 * 4);
        CHECK(dstop && dmask);
        for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
            const mix_case *mc = &cases[ci];
            for (size_t i = 0; i < (size_t)M * V; i++) {
                float x = gt_normal(&s);
                lg[i] = mc->logit_scale ? x * (float)mc->logit_scale : roundf(x * 2.0f);
                if (i % 4099 == 7) lg[i] = NAN;
                if (i % 7001 == 9) lg[i] = -INFINITY;
            }
            for (int i = 0; i < M * NP; i++) prompt[i] = (int32_t)(gt_rand_u64(&s) % (uint64_t)(V + 2)) - 1;
            for (int i = 0; i < M * NO; i++) /* repeats, so counts reach > 1 */
                output[i] = i % 3 ? (int32_t)(gt_rand_u64(&s) % (uint64_t)(V < 64 ? V : 64)) : (int32_t)(gt_rand_u64(&s) % (uint64_t)V);
            dic_sample_params *P = calloc((size_t)M, sizeof *P);
            int32_t *ref = malloc((size_t)M * 4);
            float *dl = gt_to_dev(lg, (size_t)M * V * 4);
            int32_t *dprompt = gt_to_dev(prompt, (size_t)M * NP * 4), *doutput = gt_to_dev(output, (size_t)M * NO * 4);
            CHECK(dl && dprompt && doutput);
            for (int m = 0; m < M; m++) {
                di_sampling_params p;
                di_sampling_params_default(&p);
                p.temperature = mc->temp;
                p.top_k = mc->top_k;
                p.top_p = mc->top_p;
                p.min_p = mc->min_p;
                p.repetition_penalty = mc->rep;
                p.presence_penalty = mc->pres;
                p.frequency_penalty = mc->freq;
                p.min_tokens = mc->min_tokens;
                p.n_stop_ids = mc->min_tokens ? 3 : 0;
                for (int i = 0; i < p.n_stop_ids; i++) p.stop_ids[i] = stop_ids[i];
                int no = m % 4 == 0 ? 0 : NO - m; /* some rows without history */
                di_sample_context cx = {prompt + (size_t)m * NP, (size_t)NP, output + (size_t)m * NO, (size_t)no,
                                        gt_rand_u64(&s), (uint32_t)(m % 3), (uint64_t)m * 1000003u + gt_rand_u64(&s) % 4096,
                                        (uint32_t)(m % 2), mc->mask ? mask : NULL, 1};
                di_sample_result r;
                ref[m] = di_sample_row(lg + (size_t)m * V, &p, &cx, &sc, &r, &err) == DEEPINFER_OK ? r.token : -1;
                cpu_err += ref[m] < 0;
                dic_sample_params *q = &P[m];
                q->temperature = p.temperature;
                q->top_k = p.top_k;
                q->top_p = p.top_p;
                q->min_p = p.min_p;
                q->log_min_p = p.min_p > 0 ? log((double)p.min_p) : 0.0;
                q->repetition_penalty = p.repetition_penalty;
                q->presence_penalty = p.presence_penalty;
                q->frequency_penalty = p.frequency_penalty;
                q->min_tokens = p.min_tokens;
                q->eos_id = cx.eos_id;
                q->n_stop_ids = p.n_stop_ids;
                q->stop_ids = dstop;
                q->prompt_ids = dprompt + (size_t)m * NP;
                q->n_prompt = NP;
                q->output_ids = doutput + (size_t)m * NO;
                q->n_output = no;
                q->allow_mask = mc->mask ? dmask : NULL;
                q->seed = cx.seed;
                q->position = cx.position;
                q->stream = cx.stream;
                q->purpose = cx.purpose;
            }
            dic_sample_params *dP = gt_to_dev(P, (size_t)M * sizeof *P);
            int32_t *dids = gt_dev_poison((size_t)M * 4);
            CHECK(dP && dids);
            CUDA_SYNC_CHECK(dic_sample_rows(&c, M, dl, (size_t)V, V, dP, dids));
            int32_t *g = gt_d2h(dids, (size_t)M * 4);
            CHECK(g);
            for (int m = 0; m < M; m++)
                if (g[m] != ref[m]) {
                    if (bad < 12) fprintf(stderr, "  sample '%s' V=%d row %d: gpu %d cpu %d\n", mc->name, V, m, g[m], ref[m]);
                    bad++;
                }
            total += M;
            for (int mm = 1; mm <= 3; mm += 2) { /* M = 1, 3: the greedy rows split over more CTAs each */
                CUDA_SYNC_CHECK(dic_sample_rows(&c, mm, dl, (size_t)V, V, dP, dids));
                int32_t *g2 = gt_d2h(dids, (size_t)mm * 4);
                CHECK(g2);
                for (int m = 0; m < mm; m++)
                    if (g2[m] != ref[m]) {
                        if (bad < 12) fprintf(stderr, "  sample '%s' V=%d M=%d row %d: gpu %d cpu %d\n", mc->name, V, mm, m, g2[m], ref[m]);
                        bad++;
                    }
                total += mm;
                free(g2);
            }
            if (mc->temp == 0.0f && mc->rep == 1.0f && mc->pres == 0.0f && mc->freq == 0.0f)
                for (int mm = 1; mm <= M; mm += mm < 3 ? 2 : M - 3) { /* the greedy-only kernel: M = 1, 3, all */
                    CUDA_SYNC_CHECK(dic_sample_rows_greedy(&c, mm, dl, (size_t)V, V, dP, dids));
                    int32_t *g3 = gt_d2h(dids, (size_t)mm * 4);
                    CHECK(g3);
                    for (int m = 0; m < mm; m++)
                        if (g3[m] != ref[m]) {
                            if (bad < 12)
                                fprintf(stderr, "  sample_greedy '%s' V=%d M=%d row %d: gpu %d cpu %d\n", mc->name, V,
                                        mm, m, g3[m], ref[m]);
                            bad++;
                        }
                    total += mm;
                    free(g3);
                }
            cudaFree(dl), cudaFree(dprompt), cudaFree(doutput), cudaFree(dP), cudaFree(dids);
            free(P), free(ref), free(g);
        }
        di_sampler_scratch_free(&sc);
        cudaFree(dstop), cudaFree(dmask), cudaFree(c.scratch);
        free(lg), free(prompt), free(output), free(mask);
    }
    fprintf(stderr, "sample_rows: %zu rows, %zu where the CPU finds no token\n", total, cpu_err);
    CHECK_MSG(bad == 0, "dic_sample_rows: %zu of %zu sampled ids differ from di_sample_row", bad, total);
}
