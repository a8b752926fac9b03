/* gtest_mhc_inv.c — the fused mHC transition and output head serve both modes at every M
 * (cu_ops_model.c hc_transition / hc_head_final, docs/determinism.md sec. 7, docs/kernels/mhc.md):
 * a row's bits depend on the row and d only. MM rows of random inputs (residual-like rows with
 * per-row scales, the previous site's post / comb from a Sinkhorn split), V4-Flash (d = 4096) and
 * V4.1-Flash (d = 5120) dims, with and without the expand, the V4.1 chain (pre_in) and the norm
 * weights (norm_w NULL: no weight), padded strides on some cases:
 *  - reference: every row alone (dic_hc_transition / dic_hc_head at M = 1, one launch per row at
 *    the row's offset: the decode-size kernel k_transition2);
 *  - the MM rows in launches of M = 2, 4, 5, 64, 500 rows (dic_hc_transition: k_transition2 up to
 *    64 rows, k_hc_rows from 65), and k_hc_rows forced (dic_hc_transition_rows) at M = 1, 5, 64,
 *    500 and all MM rows (rows per CTA 1 .. 16), each in both modes (ctx.batch_invariant 0 and 1):
 *    R, mixes, pre, post, comb, pre_in, x, xn bitwise the reference's for every row;
 *  - tolerance of the reference (rows 0 .. 15 and every 61st): mixes against a double reference
 *    from the GPU's R, |d| <= 2^-10 * rs * sum |fn r| (gtest_mhc_fused.c's F32 GEMM bound); pre /
 *    post / comb = the CPU Sinkhorn of the GPU's mixes bitwise (the head's pre: the CPU head_pre within
 *    1 ulp, its libm expf), x = the CPU collapse, xn = the CPU RMSNorm of x (everything after the mixes
 *    has the op sequence's bits);
 *  - the head (V4: 4 mixes + head_pre, and the V4.1 carried pre) the same way at M = 1, 2, 4, 5,
 *    64, 500 (launches of 64 rows inside dic_hc_head). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

#define MI_EPS 1e-6f
#define MI_TOL 0x1p-10

typedef struct mi_case {
    int d, MM, head, v4, expand, chain, normw;
    size_t ldr, ldx;
    int nmix;
    /* host inputs */
    uint16_t *R, *sub;
    float *fn, sc3[3], base[24], scale0, *post, *comb, *pre_in, *w;
    /* device */
    uint16_t *dR, *dsub, *dx, *dxn;
    float *dfn, *dsc3, *dbase, *dpost, *dcomb, *dpre_in, *dmix, *dpre, *dw;
} mi_case;

typedef struct mi_out {
    uint16_t *R, *x, *xn;
    float *mix, *pre, *post, *comb, *pre_in;
} mi_out;

static void mi_out_free(mi_out *o) {
    free(o->R), free(o->x), free(o->xn), free(o->mix), free(o->pre), free(o->post), free(o->comb), free(o->pre_in);
}

/* inputs to the device, outputs poisoned */
static int mi_reset(const mi_case *c) {
    const size_t M = (size_t)c->MM;
    int ok = cudaMemcpy(c->dR, c->R, M * c->ldr * 2, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(c->dpost, c->post, M * 16, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(c->dcomb, c->comb, M * 64, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(c->dpre_in, c->pre_in, M * 16, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemset(c->dx, 0xFF, M * c->ldx * 2) == cudaSuccess &&
             cudaMemset(c->dxn, 0xFF, M * c->ldx * 2) == cudaSuccess &&
             cudaMemset(c->dmix, 0xFF, M * 96) == cudaSuccess;
    /* the head without mixes reads pre (the carried pre) */
    if (c->head && !c->v4) ok = ok && cudaMemcpy(c->dpre, c->pre_in, M * 16, cudaMemcpyHostToDevice) == cudaSuccess;
    else ok = ok && cudaMemset(c->dpre, 0xFF, M * 16) == cudaSuccess;
    return ok;
}

/* kind 0: dic_hc_transition, 1: dic_hc_transition_rows, 2: dic_hc_head; rows [r0, r0 + M) */
static cudaError_t mi_launch(const dic_ctx *x, const mi_case *c, int kind, int r0, int M) {
    const size_t o = (size_t)r0;
    const uint16_t *sub = c->expand ? c->dsub + o * c->d : NULL;
    const float *w = c->normw ? c->dw : NULL;
    if (kind == 2)
        return dic_hc_head(x, M, sub, (size_t)c->d, c->dpost + o * 4, c->dcomb + o * 16, c->dR + o * c->ldr, c->ldr,
                           c->d, c->v4 ? c->dfn : NULL, c->scale0, c->dbase, MI_EPS, MI_EPS, c->dmix + o * 4,
                           c->dpre + o * 4, w, MI_EPS, c->dx + o * c->ldx, c->dxn + o * c->ldx, c->ldx);
    cudaError_t (*f)(const dic_ctx *, int, const uint16_t *, size_t, uint16_t *, size_t, int, const float *,
                     const float *, const float *, int, float, float, float *, float *, float *, float *, float *,
                     const float *, float, uint16_t *, uint16_t *, size_t) =
        kind == 0 ? dic_hc_transition : dic_hc_transition_rows;
    return f(x, M, sub, (size_t)c->d, c->dR + o * c->ldr, c->ldr, c->d, c->dfn, c->dsc3, c->dbase, 20, MI_EPS, MI_EPS,
             c->dmix + o * 24, c->dpre + o * 4, c->dpost + o * 4, c->dcomb + o * 16,
             c->chain ? c->dpre_in + o * 4 : NULL, w, MI_EPS, c->dx + o * c->ldx, c->dxn + o * c->ldx, c->ldx);
}

/* all MM rows in launches of M rows */
static int mi_run(dic_ctx *x, const mi_case *c, int kind, int M, int mode, mi_out *out) {
    x->batch_invariant = mode;
    if (!mi_reset(c)) return 0;
    for (int r0 = 0; r0 < c->MM; r0 += M)
        if (mi_launch(x, c, kind, r0, c->MM - r0 < M ? c->MM - r0 : M) != cudaSuccess) return 0;
    if (cudaStreamSynchronize(x->stream) != cudaSuccess) return 0;
    const size_t MMz = (size_t)c->MM;
    out->R = gt_d2h(c->dR, MMz * c->ldr * 2), out->x = gt_d2h(c->dx, MMz * c->ldx * 2);
    out->xn = gt_d2h(c->dxn, MMz * c->ldx * 2), out->mix = gt_d2h(c->dmix, MMz * 96);
    out->pre = gt_d2h(c->dpre, MMz * 16), out->post = gt_d2h(c->dpost, MMz * 16);
    out->comb = gt_d2h(c->dcomb, MMz * 64), out->pre_in = gt_d2h(c->dpre_in, MMz * 16);
    return out->R && out->x && out->xn && out->mix && out->pre && out->post && out->comb && out->pre_in;
}

/* differing values of b against the reference a, all outputs (memcmp first: the arrays are large) */
static size_t mi_diff(const mi_case *c, const mi_out *a, const mi_out *b) {
    const size_t M = (size_t)c->MM, hcd = 4 * (size_t)c->d;
    if (!memcmp(a->R, b->R, M * c->ldr * 2) && !memcmp(a->x, b->x, M * c->ldx * 2) &&
        !memcmp(a->xn, b->xn, M * c->ldx * 2) && !memcmp(a->mix, b->mix, M * 96) && !memcmp(a->pre, b->pre, M * 16) &&
        !memcmp(a->post, b->post, M * 16) && !memcmp(a->comb, b->comb, M * 64) && !memcmp(a->pre_in, b->pre_in, M * 16))
        return 0;
    return gt_bits("R", b->R, a->R, M, c->ldr, hcd, 2) + gt_bits("x", b->x, a->x, M, c->ldx, (size_t)c->d, 2) +
           gt_bits("xn", b->xn, a->xn, M, c->ldx, (size_t)c->d, 2) +
           gt_bits("mixes", b->mix, a->mix, M, (size_t)c->nmix, (size_t)c->nmix, 4) +
           gt_bits("pre", b->pre, a->pre, M, 4, 4, 4) + gt_bits("post", b->post, a->post, M, 4, 4, 4) +
           gt_bits("comb", b->comb, a->comb, M, 16, 16, 4) + gt_bits("pre_in", b->pre_in, a->pre_in, M, 4, 4, 4);
}

/* the reference's tolerance on the checked rows (header) */
static void mi_check_ref(const mi_case *c, const mi_out *o, const char *tag) {
    const int d = c->d, hcd = 4 * d;
    size_t bad = 0, bits = 0;
    double worst = 0;
    uint16_t *sx = malloc((size_t)c->ldx * 2), *sxn = malloc((size_t)c->ldx * 2);
    for (int m = 0; m < c->MM; m++) {
        if (m >= 16 && m % 61) continue;
        const uint16_t *r = o->R + (size_t)m * c->ldr;
        if (c->nmix) {
            double ss = 0;
            for (int k = 0; k < hcd; k++) ss += (double)di_bf16_to_f32(r[k]) * di_bf16_to_f32(r[k]);
            const double rs = 1.0 / sqrt(ss / hcd + MI_EPS);
            for (int n = 0; n < c->nmix; n++) {
                double dot = 0, mag = 0;
                for (int k = 0; k < hcd; k++) {
                    const double p = (double)c->fn[(size_t)n * hcd + k] * di_bf16_to_f32(r[k]);
                    dot += p, mag += fabs(p);
                }
                const double dd = fabs(o->mix[m * c->nmix + n] - dot * rs);
                if (!(dd <= MI_TOL * mag * rs + 1e-30)) bad++;
                if (mag > 0 && dd / (mag * rs) > worst) worst = dd / (mag * rs);
            }
        }
        float pre[4], post[4], comb[16];
        const float *pc = c->head && !c->v4 ? c->pre_in + m * 4 : o->pre + m * 4; /* the collapse's pre */
        if (!c->head) {
            di_hc_sinkhorn(o->mix + m * 24, c->sc3, c->base, 20, MI_EPS, pre, post, comb);
            bits += gt_bits("pre (CPU Sinkhorn)", o->pre + m * 4, pre, 1, 4, 4, 4) +
                    gt_bits("post (CPU Sinkhorn)", o->post + m * 4, post, 1, 4, 4, 4) +
                    gt_bits("comb (CPU Sinkhorn)", o->comb + m * 16, comb, 1, 16, 16, 4);
            if (c->chain) pc = c->pre_in + m * 4, bits += gt_bits("pre_in", o->pre_in + m * 4, o->pre + m * 4, 1, 4, 4, 4);
        } else if (c->v4) { /* the CPU's head_pre takes libm expf: 1 ulp allowed (gtest_model_rows.c) */
            di_hc_head_pre(NULL, 1, o->mix + m * 4, 4, c->scale0, c->base, MI_EPS, pre);
            for (int k = 0; k < 4; k++) {
                const float g = o->pre[m * 4 + k];
                if (!memcmp(&g, &pre[k], 4)) continue;
                int32_t ig, ic;
                memcpy(&ig, &g, 4), memcpy(&ic, &pre[k], 4);
                if (ig - ic > 1 || ic - ig > 1) {
                    fprintf(stderr, "    pre [%d][%d]: %.9g vs CPU head_pre %.9g\n", m, k, g, pre[k]);
                    bits++;
                }
            }
        }
        di_hc_collapse(NULL, 1, pc, r, c->ldr, d, sx, c->ldx);
        bits += gt_bits("x (CPU collapse)", o->x + (size_t)m * c->ldx, sx, 1, c->ldx, (size_t)d, 2);
        di_rmsnorm(NULL, 1, o->x + (size_t)m * c->ldx, c->ldx, c->normw ? c->w : NULL, d, MI_EPS, sxn, c->ldx);
        bits += gt_bits("xn (CPU RMSNorm)", o->xn + (size_t)m * c->ldx, sxn, 1, c->ldx, (size_t)d, 2);
    }
    free(sx), free(sxn);
    fprintf(stderr, "  %s: reference mixes max|d|/mag %.2e\n", tag, worst);
    CHECK_MSG(bad == 0, "%s: %zu mixes outside the F32 GEMM bound", tag, bad);
    CHECK_MSG(bits == 0, "%s: %zu values after the mixes differ from the CPU ops on the GPU's mixes", tag, bits);
}

static void mi_setup(mi_case *c, uint64_t seed) {
    uint64_t s = seed;
    const int d = c->d, hcd = 4 * d, MM = c->MM;
    c->nmix = c->head ? (c->v4 ? 4 : 0) : 24;
    const int nf = c->head ? 4 : 24;
    c->R = malloc((size_t)MM * c->ldr * 2), c->sub = malloc((size_t)MM * d * 2);
    c->fn = malloc((size_t)nf * hcd * 4), c->w = malloc((size_t)d * 4);
    c->post = malloc((size_t)MM * 16), c->comb = malloc((size_t)MM * 64), c->pre_in = malloc((size_t)MM * 16);
    for (int m = 0; m < MM; m++) {
        const float sc = ldexpf(1.0f, (int)(gt_rand_u64(&s) % 8) - 3);
        /* uniform values (cheap to draw: thousands of rows) */
        for (size_t i = 0; i < c->ldr; i++) c->R[(size_t)m * c->ldr + i] = di_f32_to_bf16(gt_rand_unit(&s) * sc);
        for (int i = 0; i < d; i++) c->sub[(size_t)m * d + i] = di_f32_to_bf16(gt_rand_unit(&s) * sc * 0.5f);
    }
    gt_fill_f32(c->fn, (size_t)nf * hcd, 1.5f / sqrtf((float)hcd / 3.0f), &s);
    for (int i = 0; i < 3; i++) c->sc3[i] = 1.0f + 0.5f * gt_rand_unit(&s);
    gt_fill_f32(c->base, 24, 1.0f, &s);
    c->scale0 = 1.0f + 0.5f * gt_rand_unit(&s);
    for (int i = 0; i < d; i++) c->w[i] = 1.0f + 0.2f * gt_rand_unit(&s);
    float *mx = malloc((size_t)MM * 96), *pp = malloc((size_t)MM * 16);
    gt_fill_f32(mx, (size_t)MM * 24, 2.0f, &s);
    di_hc_sinkhorn_rows(NULL, MM, mx, c->sc3, c->base, 20, MI_EPS, pp, c->post, c->comb);
    free(mx), free(pp);
    for (int i = 0; i < MM * 4; i++) c->pre_in[i] = 0.5f + 0.5f * gt_rand_unit(&s);
    c->dR = gt_dev_poison((size_t)MM * c->ldr * 2), c->dsub = gt_to_dev(c->sub, (size_t)MM * d * 2);
    c->dx = gt_dev_poison((size_t)MM * c->ldx * 2), c->dxn = gt_dev_poison((size_t)MM * c->ldx * 2);
    c->dfn = gt_to_dev(c->fn, (size_t)nf * hcd * 4), c->dsc3 = gt_to_dev(c->sc3, 12);
    c->dbase = gt_to_dev(c->base, 96), c->dw = gt_to_dev(c->w, (size_t)d * 4);
    c->dpost = gt_dev_poison((size_t)MM * 16), c->dcomb = gt_dev_poison((size_t)MM * 64);
    c->dpre_in = gt_dev_poison((size_t)MM * 16), c->dmix = gt_dev_poison((size_t)MM * 96);
    c->dpre = gt_dev_poison((size_t)MM * 16);
    CHECK(c->dR && c->dsub && c->dx && c->dxn && c->dfn && c->dsc3 && c->dbase && c->dw && c->dpost && c->dcomb &&
          c->dpre_in && c->dmix && c->dpre);
}

static void mi_teardown(mi_case *c) {
    free(c->R), free(c->sub), free(c->fn), free(c->w), free(c->post), free(c->comb), free(c->pre_in);
    cudaFree(c->dR), cudaFree(c->dsub), cudaFree(c->dx), cudaFree(c->dxn), cudaFree(c->dfn), cudaFree(c->dsc3);
    cudaFree(c->dbase), cudaFree(c->dw), cudaFree(c->dpost), cudaFree(c->dcomb), cudaFree(c->dpre_in);
    cudaFree(c->dmix), cudaFree(c->dpre);
}

/* One case: the reference (rows alone), its tolerance, then every (kernel, M, mode) bitwise against it. */
static void mi_do(mi_case *c, uint64_t seed) {
    mi_setup(c, seed);
    dic_ctx x;
    CHECK(gt_ctx(&x, (size_t)16 << 20));
    const void *fnp = c->head && !c->v4 ? NULL : (const void *)c->dfn;
    if (c->head)
        CHECK(dic_hc_head_ok(&x, 1, c->dR, c->ldr, c->d, c->nmix, c->nmix ? 4 * c->d : 0, fnp, c->dx, c->dxn, c->ldx));
    else
        CHECK(dic_hc_transition_ok(&x, 1, c->dR, c->ldr, c->d, 24, 4 * c->d, fnp, c->dx, c->dxn, c->ldx));
    char tag[160];
    snprintf(tag, sizeof tag, "%s d=%d MM=%d expand=%d chain=%d normw=%d pad=%d",
             c->head ? (c->v4 ? "head V4" : "head V4.1") : "transition", c->d, c->MM, c->expand, c->chain, c->normw,
             (int)(c->ldx - (size_t)c->d) / 8);
    const int kref = c->head ? 2 : 0;
    mi_out ref = {0};
    CHECK(mi_run(&x, c, kref, 1, 1, &ref));
    mi_check_ref(c, &ref, tag);
    static const int Ms[] = {1, 2, 4, 5, 64, 500};
    size_t total = 0;
    for (int kind = kref; kind <= (c->head ? 2 : 1); kind++)
        for (int i = 0; i < 7; i++) {
            const int M = i < 6 ? Ms[i] : c->MM;
            if (kind == 0 && M == c->MM && M != 500) continue;
            if (kind == 1 && (M == 2 || M == 4)) continue;
            for (int mode = 0; mode < 2; mode++) {
                if (kind == kref && M == 1 && mode == 1) continue; /* the reference itself */
                mi_out o = {0};
                CHECK(mi_run(&x, c, kind, M, mode, &o));
                const size_t b = mi_diff(c, &ref, &o);
                if (b) fprintf(stderr, "  %s: kernel %d M=%d mode %d: %zu values differ from the rows alone\n", tag,
                               kind, M, mode, b);
                total += b;
                mi_out_free(&o);
            }
        }
    fprintf(stderr, "  %s: every row at every M, both modes%s: %s\n", tag, c->head ? "" : ", both organisations",
            total ? "DIFFER" : "bitwise the row alone");
    CHECK_MSG(total == 0, "%s: %zu values depend on M, the mode or the kernel organisation", tag, total);
    mi_out_free(&ref);
    cudaFree(x.scratch), cudaStreamDestroy(x.stream);
    mi_teardown(c);
}

/* variant 0 on MM rows, the others on 600 */
static void mi_transition(int d, int MM, uint64_t seed) {
    for (int v = 0; v < 4; v++) {
        mi_case c = {.d = d, .MM = v ? 600 : MM, .expand = v != 1, .chain = v == 2, .normw = v != 3};
        const int pad = v == 3;
        c.ldr = 4 * (size_t)d + 8 * (size_t)pad, c.ldx = (size_t)d + 8 * (size_t)pad;
        mi_do(&c, seed + (uint64_t)v);
    }
}

static void mi_head(int d, int MM, uint64_t seed) {
    for (int v = 0; v < 4; v++) {
        mi_case c = {.d = d, .MM = MM, .head = 1, .v4 = v < 2, .expand = v != 1, .normw = !(v & 1)};
        const int pad = v == 3;
        c.ldr = 4 * (size_t)d + 8 * (size_t)pad, c.ldx = (size_t)d + 8 * (size_t)pad;
        mi_do(&c, seed + (uint64_t)v);
    }
}

/* 2100 rows: k_hc_rows at 16 rows per CTA over the whole set (132 SMs) */
TEST(gpu_mhc_inv_transition_v4) { mi_transition(4096, 2100, 0x4A11ull); }
TEST(gpu_mhc_inv_transition_v41) { mi_transition(5120, 1100, 0x4B22ull); }
TEST(gpu_mhc_inv_head_v4) { mi_head(4096, 600, 0x4C33ull); }
TEST(gpu_mhc_inv_head_v41) { mi_head(5120, 600, 0x4D44ull); }
