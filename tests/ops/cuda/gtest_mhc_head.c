/* gtest_mhc_head.c — the fused output head (dic_hc_head, both modes' kernel
 * of ops.h di_hc_head_final: the last block's expand + the head's
 * 4 mixes + scale_mixes + head_pre + collapse + final RMSNorm in one launch;
 * V4.1: expand + collapse with the carried pre + RMSNorm) against the unfused
 * sequence of the mode-0 kernels (dic_hc_expand, dic_gemm F32, dic_hc_scale_mixes,
 * dic_hc_head_pre, dic_hc_collapse, dic_rmsnorm) in the same run, at V4-Flash
 * dims (hc = 4, d = 4096) and d = 192 (3 x 64: S = 6 / 3 slices), M = 1, 2, 3, 4
 * (and 9: two tiles of 4 rows ... several launches at small d), with and
 * without the expand, V4 (fn) and V4.1 (carried pre), 64 columns per CTA (the product's; 32: lab/mhc),
 * padded strides on some cases:
 *  - R: bitwise the sequence's (and the CPU's);
 *  - mixes: |fused - seq| <= 2^-10 * rs * sum_k |fn_k r_k| per element and
 *    norm-wise <= 1e-4 (the F32 GEMM bounds; only their fp32 order differs);
 *  - downstream of the mixes bitwise the sequence's kernels applied to the
 *    fused mixes: dic_hc_head_pre -> pre, dic_hc_collapse -> x, dic_rmsnorm
 *    -> xn; V4.1 (no mixes): x and xn bitwise the sequence's outputs;
 *  - vs the CPU op sequence (di_hc_head_final on the CPU, printed): pre
 *    norm-wise <= 1e-5, x / xn <= 1e-3;
 *  - determinism (a second launch) and a row's bits do not depend on M
 *    (row 0 alone = row 0 of the launch). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

#define MH_TOL_ELEM 0x1p-10
#define MH_TOL_NORM 1e-4
#define MH_EPS_HC 1e-6f
#define MH_EPS_RMS 1e-6f

typedef struct mh_host {
    int M, d, v4, expand;
    size_t ldr, ldx;
    uint16_t *R, *sub;
    float *fn, base[4], scale0, *post, *comb, *pre_in, *w;
} mh_host;

typedef struct mh_dev {
    uint16_t *R, *x, *xn;
    float *mixes, *pre;
} mh_dev;

typedef struct mh_out {
    uint16_t *R, *x, *xn;
    float *mixes, *pre;
} mh_out;

static void mh_free(mh_out *o) { free(o->R), free(o->x), free(o->xn), free(o->mixes), free(o->pre); }

/* shared device inputs */
typedef struct mh_in {
    uint16_t *sub;
    float *fn, *base, *post, *comb, *pre_in, *w;
} mh_in;

static int mh_alloc(const mh_host *h, mh_dev *g) {
    size_t M = (size_t)h->M;
    g->R = gt_dev_poison(M * h->ldr * 2), g->x = gt_dev_poison(M * h->ldx * 2), g->xn = gt_dev_poison(M * h->ldx * 2);
    g->mixes = gt_dev_poison(M * 16), g->pre = gt_dev_poison(M * 16);
    return g->R && g->x && g->xn && g->mixes && g->pre;
}
static void mh_dfree(mh_dev *g) { cudaFree(g->R), cudaFree(g->x), cudaFree(g->xn), cudaFree(g->mixes), cudaFree(g->pre); }

/* inputs: R uploaded, outputs poisoned, V4.1's pre = the carried pre */
static int mh_reset(const mh_host *h, const mh_in *in, mh_dev *g) {
    size_t M = (size_t)h->M;
    int ok = cudaMemcpy(g->R, h->R, M * h->ldr * 2, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemset(g->x, 0xFF, M * h->ldx * 2) == cudaSuccess && cudaMemset(g->xn, 0xFF, M * h->ldx * 2) == cudaSuccess &&
             cudaMemset(g->mixes, 0xFF, M * 16) == cudaSuccess;
    if (h->v4) ok = ok && cudaMemset(g->pre, 0xFF, M * 16) == cudaSuccess;
    else ok = ok && cudaMemcpy(g->pre, in->pre_in, M * 16, cudaMemcpyDeviceToDevice) == cudaSuccess;
    return ok;
}

static int mh_get(const mh_host *h, const mh_dev *g, int M, mh_out *o) {
    size_t m = (size_t)M;
    o->R = gt_d2h(g->R, m * h->ldr * 2), o->x = gt_d2h(g->x, m * h->ldx * 2), o->xn = gt_d2h(g->xn, m * h->ldx * 2);
    o->mixes = gt_d2h(g->mixes, m * 16), o->pre = gt_d2h(g->pre, m * 16);
    return o->R && o->x && o->xn && o->mixes && o->pre;
}

static cudaError_t mh_fused(const dic_ctx *c, const mh_host *h, const mh_in *in, const mh_dev *g, int M) {
    return dic_hc_head(c, M, h->expand ? in->sub : NULL, (size_t)h->d, in->post, in->comb, g->R, h->ldr, h->d,
                       h->v4 ? in->fn : NULL, h->scale0, in->base, MH_EPS_HC, MH_EPS_RMS, g->mixes, g->pre, in->w,
                       MH_EPS_RMS, g->x, g->xn, h->ldx);
}

/* the unfused sequence of the mode-0 kernels (what the graph ran before) */
static cudaError_t mh_seq(const dic_ctx *c, const mh_host *h, const mh_in *in, const mh_dev *g) {
    const int M = h->M, d = h->d, hcd = 4 * d;
    cudaError_t e = cudaSuccess;
    if (h->expand) e = dic_hc_expand(c, M, in->post, in->comb, in->sub, (size_t)d, g->R, g->R, h->ldr, d);
    if (h->v4) {
        dic_wmat wm = {1, 4, hcd, 0, in->fn, NULL};
        if (e == cudaSuccess) e = dic_gemm(c, M, g->R, h->ldr, &wm, 0, g->mixes, NULL, 4);
        if (e == cudaSuccess) e = dic_hc_scale_mixes(c, M, g->R, h->ldr, hcd, MH_EPS_RMS, g->mixes, 4, g->mixes);
        if (e == cudaSuccess) e = dic_hc_head_pre(c, M, g->mixes, 4, h->scale0, in->base, MH_EPS_HC, g->pre);
    }
    if (e == cudaSuccess) e = dic_hc_collapse(c, M, g->pre, g->R, h->ldr, d, g->x, h->ldx);
    if (e == cudaSuccess) e = dic_rmsnorm(c, M, g->x, h->ldx, in->w, d, MH_EPS_RMS, g->xn, h->ldx);
    return e;
}

static void mh_case(int d, int M, int v4, int expand, int pad, int cw, uint64_t seed) {
    uint64_t s = seed;
    const int hcd = 4 * d;
    mh_host h = {.M = M, .d = d, .v4 = v4, .expand = expand};
    h.ldr = (size_t)hcd + (size_t)pad * 8, h.ldx = (size_t)d + (size_t)pad * 8;
    h.R = malloc((size_t)M * h.ldr * 2), h.sub = malloc((size_t)M * d * 2);
    h.fn = malloc((size_t)4 * hcd * 4), h.w = malloc((size_t)d * 4);
    h.post = malloc((size_t)M * 16), h.comb = malloc((size_t)M * 64), h.pre_in = malloc((size_t)M * 16);
    for (int m = 0; m < M; m++) { /* residual-like rows, per-row scales */
        float sc = ldexpf(1.0f, (int)(gt_rand_u64(&s) % 8) - 3);
        for (size_t i = 0; i < h.ldr; i++) h.R[m * h.ldr + i] = di_f32_to_bf16(gt_normal(&s) * sc);
        for (int i = 0; i < d; i++) h.sub[(size_t)m * d + i] = di_f32_to_bf16(gt_normal(&s) * sc * 0.5f);
    }
    gt_fill_f32(h.fn, (size_t)4 * hcd, 1.5f / sqrtf((float)hcd / 3.0f), &s); /* mixes ~ O(1) */
    gt_fill_f32(h.base, 4, 1.0f, &s);
    h.scale0 = 1.0f + 0.5f * gt_rand_unit(&s);
    for (int i = 0; i < d; i++) h.w[i] = 1.0f + 0.2f * gt_rand_unit(&s);
    { /* the last site's post / comb: a Sinkhorn split of random mixes */
        float *mx = malloc((size_t)M * 96), *pp = malloc((size_t)M * 16), sc3[3] = {1.0f, 1.0f, 1.0f}, b24[24];
        gt_fill_f32(mx, (size_t)M * 24, 2.0f, &s);
        gt_fill_f32(b24, 24, 1.0f, &s);
        di_hc_sinkhorn_rows(NULL, M, mx, sc3, b24, 20, 1e-6f, pp, h.post, h.comb);
        free(mx), free(pp);
    }
    for (int i = 0; i < M * 4; i++) h.pre_in[i] = 0.5f + 0.5f * gt_rand_unit(&s);
    char tag[128];
    snprintf(tag, sizeof tag, "%s d=%d M=%d expand=%d pad=%d cw=%d", v4 ? "V4" : "V4.1", d, M, expand, pad, cw);

    /* CPU: the op sequence */
    di_exec x;
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    di_wmat pw;
    CHECK(di_wmat_pack(&pw, DI_WFMT_F32, h.fn, NULL, 4, hcd, 0, NULL) == DEEPINFER_OK);
    mh_out c = {0};
    c.R = malloc((size_t)M * h.ldr * 2), memcpy(c.R, h.R, (size_t)M * h.ldr * 2);
    c.mixes = malloc((size_t)M * 16), c.pre = malloc((size_t)M * 16);
    if (!v4) memcpy(c.pre, h.pre_in, (size_t)M * 16);
    c.x = calloc((size_t)M * h.ldx, 2), c.xn = calloc((size_t)M * h.ldx, 2);
    di_hc_head_final(&x, M, expand ? h.sub : NULL, (size_t)d, h.post, h.comb, c.R, h.ldr, d, v4 ? &pw : NULL, h.scale0,
                     h.base, MH_EPS_HC, MH_EPS_RMS, c.mixes, c.pre, h.w, MH_EPS_RMS, c.x, c.xn, h.ldx);

    /* GPU */
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, (size_t)8 << 20));
    ctx.batch_invariant = 0;
    mh_in in;
    in.sub = gt_to_dev(h.sub, (size_t)M * d * 2), in.fn = gt_to_dev(h.fn, (size_t)4 * hcd * 4);
    in.base = gt_to_dev(h.base, 16), in.post = gt_to_dev(h.post, (size_t)M * 16);
    in.comb = gt_to_dev(h.comb, (size_t)M * 64), in.pre_in = gt_to_dev(h.pre_in, (size_t)M * 16);
    in.w = gt_to_dev(h.w, (size_t)d * 4);
    CHECK(in.sub && in.fn && in.base && in.post && in.comb && in.pre_in && in.w);
    mh_dev gf, gs;
    CHECK(mh_alloc(&h, &gf) && mh_alloc(&h, &gs));
    CHECK_MSG(dic_hc_head_ok(&ctx, M, gf.R, h.ldr, d, v4 ? 4 : 0, v4 ? hcd : 0, v4 ? (const void *)in.fn : NULL, gf.x,
                             gf.xn, h.ldx),
              "%s: not taken", tag);
    CHECK(mh_reset(&h, &in, &gs));
    CUDA_SYNC_CHECK(mh_seq(&ctx, &h, &in, &gs));
    CHECK(mh_reset(&h, &in, &gf));
    CUDA_SYNC_CHECK(mh_fused(&ctx, &h, &in, &gf, M));
    mh_out o = {0}, q = {0};
    CHECK(mh_get(&h, &gf, M, &o) && mh_get(&h, &gs, M, &q));

    size_t bR = gt_bits("R", o.R, q.R, (size_t)M, h.ldr, (size_t)hcd, 2) +
                gt_bits("R (CPU)", o.R, c.R, (size_t)M, h.ldr, (size_t)hcd, 2);
    size_t bad_m = 0, bD = 0;
    double worst = 0, mrel = 0;
    if (v4) {
        /* mixes: the F32 GEMM bounds against the sequence's */
        double num = 0, den = 0;
        for (int m = 0; m < M; m++) {
            const uint16_t *r = q.R + (size_t)m * h.ldr;
            double ss = 0;
            for (int k = 0; k < hcd; k++) ss += (double)di_bf16_to_f32(r[k]) * di_bf16_to_f32(r[k]);
            double rs = 1.0 / sqrt(ss / hcd + MH_EPS_RMS);
            for (int n = 0; n < 4; n++) {
                double mag = 0;
                for (int k = 0; k < hcd; k++) mag += fabs((double)h.fn[(size_t)n * hcd + k] * di_bf16_to_f32(r[k]));
                mag *= rs;
                double gv = o.mixes[m * 4 + n], sv = q.mixes[m * 4 + n], dd = fabs(gv - sv);
                if (!(dd <= MH_TOL_ELEM * mag + 1e-30)) {
                    if (bad_m < 3) fprintf(stderr, "    mixes [%d][%d]: %.9g vs %.9g (bound %.3g)\n", m, n, gv, sv, MH_TOL_ELEM * mag);
                    bad_m++;
                }
                if (mag > 0 && dd / mag > worst) worst = dd / mag;
                num += dd * dd, den += sv * sv;
            }
        }
        mrel = den > 0 ? sqrt(num / den) : sqrt(num);
        /* downstream: the sequence's kernels on the fused mixes */
        float *dm = gt_to_dev(o.mixes, (size_t)M * 16);
        CHECK(dm);
        CUDA_SYNC_CHECK(dic_hc_head_pre(&ctx, M, dm, 4, h.scale0, in.base, MH_EPS_HC, gs.pre));
        CUDA_SYNC_CHECK(dic_hc_collapse(&ctx, M, gs.pre, gf.R, h.ldr, d, gs.x, h.ldx));
        CUDA_SYNC_CHECK(dic_rmsnorm(&ctx, M, gs.x, h.ldx, in.w, d, MH_EPS_RMS, gs.xn, h.ldx));
        cudaFree(dm);
        mh_free(&q);
        CHECK(mh_get(&h, &gs, M, &q));
    }
    bD = gt_bits("pre", o.pre, q.pre, (size_t)M, 4, 4, 4) + gt_bits("x", o.x, q.x, (size_t)M, h.ldx, (size_t)d, 2) +
         gt_bits("xn", o.xn, q.xn, (size_t)M, h.ldx, (size_t)d, 2);
    size_t bMix = v4 ? 0 : gt_bits("mixes (untouched)", o.mixes, q.mixes, (size_t)M, 4, 4, 4);
    double rpre = gt_rel_err(o.pre, c.pre, (size_t)M * 4);
    double rx = gt_rel_bf16_2d(o.x, c.x, (size_t)M, h.ldx, (size_t)d), rxn = gt_rel_bf16_2d(o.xn, c.xn, (size_t)M, h.ldx, (size_t)d);
    fprintf(stderr, "  %s: mixes max|d|/mag %.2e norm %.2e; vs CPU: pre %.1e x %.1e xn %.1e\n", tag, worst, mrel, rpre,
            rx, rxn);
    CHECK_MSG(bR == 0, "%s: R differs from the sequence / CPU in %zu values", tag, bR);
    CHECK_MSG(bad_m == 0 && mrel <= MH_TOL_NORM, "%s: %zu mixes out of bounds, norm-wise %.3g", tag, bad_m, mrel);
    CHECK_MSG(bD + bMix == 0, "%s: downstream of the mixes differs from the sequence in %zu values (mixes written %zu)",
              tag, bD, bMix);
    CHECK_MSG(rpre <= 1e-5 && rx <= 1e-3 && rxn <= 1e-3, "%s: far from the CPU", tag);

    /* determinism, and a row's bits do not depend on M */
    CHECK(mh_reset(&h, &in, &gf));
    CUDA_SYNC_CHECK(mh_fused(&ctx, &h, &in, &gf, M));
    mh_out o2 = {0};
    CHECK(mh_get(&h, &gf, M, &o2));
    size_t b2 = gt_bits("R#2", o2.R, o.R, (size_t)M, h.ldr, (size_t)hcd, 2) +
                gt_bits("mixes#2", o2.mixes, o.mixes, (size_t)M, 4, 4, 4) +
                gt_bits("pre#2", o2.pre, o.pre, (size_t)M, 4, 4, 4) +
                gt_bits("xn#2", o2.xn, o.xn, (size_t)M, h.ldx, (size_t)d, 2);
    CHECK_MSG(b2 == 0, "%s: second launch differs in %zu values", tag, b2);
    if (M > 1) {
        CHECK(mh_reset(&h, &in, &gf));
        CUDA_SYNC_CHECK(mh_fused(&ctx, &h, &in, &gf, 1));
        mh_out o1 = {0};
        CHECK(mh_get(&h, &gf, 1, &o1));
        size_t b1 = gt_bits("R(M=1)", o1.R, o.R, 1, h.ldr, (size_t)hcd, 2) +
                    gt_bits("mixes(M=1)", o1.mixes, o.mixes, 1, 4, 4, 4) +
                    gt_bits("x(M=1)", o1.x, o.x, 1, h.ldx, (size_t)d, 2) +
                    gt_bits("xn(M=1)", o1.xn, o.xn, 1, h.ldx, (size_t)d, 2);
        CHECK_MSG(b1 == 0, "%s: row 0 alone differs from row 0 of the launch in %zu values", tag, b1);
        mh_free(&o1);
    }
    mh_free(&o), mh_free(&o2), mh_free(&q), mh_free(&c);
    mh_dfree(&gf), mh_dfree(&gs);
    cudaFree(in.sub), cudaFree(in.fn), cudaFree(in.base), cudaFree(in.post), cudaFree(in.comb), cudaFree(in.pre_in);
    cudaFree(in.w);
    cudaFree(ctx.scratch), cudaStreamDestroy(ctx.stream);
    di_wmat_free(&pw);
    di_exec_free(&x);
    free(h.R), free(h.sub), free(h.fn), free(h.w), free(h.post), free(h.comb), free(h.pre_in);
}

static void mh_dims(int d, const int *Ms, int nM, uint64_t seed) {
    for (int i = 0; i < nM; i++)
        for (int v4 = 1; v4 >= 0; v4--)
            for (int expand = 1; expand >= 0; expand--)
                mh_case(d, Ms[i], v4, expand, Ms[i] == 3, 64, seed++); /* 32 columns per CTA: lab/mhc */
}

TEST(gpu_mhc_head_v4_dims) {
    static const int Ms[] = {1, 2, 3, 4};
    mh_dims(4096, Ms, 4, 0xFEEDull);
}

TEST(gpu_mhc_head_small) {
    static const int Ms[] = {1, 2, 3, 4, 9, 70};
    mh_dims(192, Ms, 6, 0xD00Dull);
    /* shapes the kernel does not take (the op then runs the sequence) */
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, (size_t)1 << 20));
    void *p = gt_dev_poison(4096);
    CHECK(!dic_hc_head_ok(&ctx, 1, p, 400, 100, 4, 400, p, p, p, 100));
    CHECK(!dic_hc_head_ok(&ctx, 1, p, 4 * 256, 256, 24, 4 * 256, p, p, p, 256));
    CHECK(!dic_hc_head_ok(&ctx, 1, p, 4 * 256, 256, 4, 4 * 256, NULL, p, p, 256));
    CHECK(dic_hc_head_ok(&ctx, 1, p, 4 * 256, 256, 4, 4 * 256, p, p, p, 256));
    CHECK(dic_hc_head_ok(&ctx, 1, p, 4 * 256, 256, 0, 0, NULL, p, p, 256));
    cudaFree(p), cudaFree(ctx.scratch), cudaStreamDestroy(ctx.stream);
}
