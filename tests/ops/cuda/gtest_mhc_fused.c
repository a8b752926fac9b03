/* gtest_mhc_fused.c — the fused mHC transition (dic_hc_transition, both
 * modes' kernel of ops.h di_hc_transition: expand + mixes +
 * scale + Sinkhorn + collapse + RMSNorm in one launch) against the CPU op
 * sequence (di_hc_transition on the CPU = di_hc_transition_seq), at V4-Flash
 * dims (hc = 4, d = 4096) and d = 256, M = 1, 2, 8, 33 (and 70: two launches),
 * with and without the expand (first site of a step), with and without the
 * V4.1 chain (pre_in), padded strides on some cases:
 *  - R after the expand: bit-identical to the CPU's;
 *  - mixes: |gpu - cpu| <= 2^-10 * rs * sum_k |fn_k r_k| per element and
 *    norm-wise <= 1e-4 (gtest_gemm_fast_float.c's F32 GEMM bounds);
 *  - everything downstream of the mixes has the sequence's bits for the
 *    GPU's mixes: the CPU Sinkhorn of the GPU mixes gives the GPU pre / post /
 *    comb bit for bit, the CPU collapse of the GPU R with the GPU (or carried)
 *    pre gives x, the CPU RMSNorm of x gives xn, pre_in = pre (chain);
 *  - against the CPU reference itself (loose, printed): pre/post/comb
 *    norm-wise <= 1e-5, x and xn norm-wise <= 1e-3; with the chain x is the
 *    carried pre's collapse, so x and xn are bitwise the CPU's;
 *  - determinism: a second launch on the same inputs gives the same bits;
 *    a row's bits do not depend on M (row 0 alone = row 0 of the launch);
 *  - the product's kernel (k_transition2, 32 columns per CTA, rows per tile by
 *    M: 1 / 2 / 4, so both its lean and full instantiations; k_hc_rows at M = 70)
 *    on every case; one
 *    line per case, then the worst mixes errors. The kernel's variants (the
 *    first version, 16 / 64 columns, the R stash, the grid-synchronised tail)
 *    are lab/mhc's, compared bitwise with it in mhc_bench (docs/kernels/mhc.md). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

#define MF_TOL_ELEM 0x1p-10
#define MF_TOL_NORM 1e-4

typedef struct mf_out {
    uint16_t *R, *x, *xn;
    float *mixes, *pre, *post, *comb, *pre_in;
} mf_out;

static void mf_free(mf_out *o) {
    free(o->R), free(o->x), free(o->xn), free(o->mixes), free(o->pre), free(o->post), free(o->comb), free(o->pre_in);
}

/* Device state of one case (inputs uploaded by mf_upload, outputs poisoned). */
typedef struct mf_dev {
    uint16_t *R, *sub, *x, *xn;
    float *fn, *sc3, *base, *mixes, *pre, *post, *comb, *pre_in, *w;
} mf_dev;

typedef struct mf_host {
    int M, d, chain, first;
    size_t ldr, ldx;
    uint16_t *R, *sub;
    float *fn, sc3[3], base[24], *post, *comb, *pre_in, *w;
} mf_host;

static int mf_upload(const mf_host *h, mf_dev *g) {
    size_t M = (size_t)h->M;
    return cudaMemcpy(g->R, h->R, M * h->ldr * 2, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(g->post, h->post, M * 16, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(g->comb, h->comb, M * 64, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(g->pre_in, h->pre_in, M * 16, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemset(g->x, 0xFF, M * h->ldx * 2) == cudaSuccess && cudaMemset(g->xn, 0xFF, M * h->ldx * 2) == cudaSuccess &&
           cudaMemset(g->mixes, 0xFF, M * 96) == cudaSuccess && cudaMemset(g->pre, 0xFF, M * 16) == cudaSuccess;
}

static int mf_download(const mf_host *h, const mf_dev *g, mf_out *o) {
    size_t M = (size_t)h->M;
    o->R = gt_d2h(g->R, M * h->ldr * 2), o->x = gt_d2h(g->x, M * h->ldx * 2), o->xn = gt_d2h(g->xn, M * h->ldx * 2);
    o->mixes = gt_d2h(g->mixes, M * 96), o->pre = gt_d2h(g->pre, M * 16), o->post = gt_d2h(g->post, M * 16);
    o->comb = gt_d2h(g->comb, M * 64), o->pre_in = gt_d2h(g->pre_in, M * 16);
    return o->R && o->x && o->xn && o->mixes && o->pre && o->post && o->comb && o->pre_in;
}

static cudaError_t mf_launch(const dic_ctx *c, const mf_host *h, const mf_dev *g, int M) {
    return dic_hc_transition(c, M, h->first ? NULL : g->sub, (size_t)h->d, g->R, h->ldr, h->d, g->fn, g->sc3, g->base,
                             20, 1e-6f, 1e-6f, g->mixes, g->pre, g->post, g->comb, h->chain ? g->pre_in : NULL, g->w,
                             1e-6f, g->x, g->xn, h->ldx);
}

static size_t mf_cnt16(const uint16_t *a, const uint16_t *b, size_t rows, size_t ld, size_t cols) {
    size_t n = 0;
    for (size_t r = 0; r < rows; r++) n += gt_count_diff_u16(a + r * ld, b + r * ld, cols);
    return n;
}

/* the worst mixes errors (printed at the end of each test) */
static double mf_welem[1], mf_wnorm[1];

static void mf_report(void) {
    for (int v = 0; v < 1; v++) {
        fprintf(stderr, "  kernel %d: mixes max|d|/mag %.2e, norm-wise %.2e (all cases passed)\n", v, mf_welem[v],
                mf_wnorm[v]);
        mf_welem[v] = mf_wnorm[v] = 0;
    }
}

static void mf_case(int d, int M, int chain, int first, int pad, uint64_t seed) {
    uint64_t s = seed;
    const int hcd = 4 * d;
    mf_host h = {.M = M, .d = d, .chain = chain, .first = first};
    h.ldr = (size_t)hcd + (size_t)pad * 8, h.ldx = (size_t)d + (size_t)pad * 8;
    h.R = malloc((size_t)M * h.ldr * 2), h.sub = malloc((size_t)M * d * 2);
    h.fn = malloc((size_t)24 * hcd * 4), h.w = malloc((size_t)d * 4);
    h.post = malloc((size_t)M * 16), h.comb = malloc((size_t)M * 64), h.pre_in = malloc((size_t)M * 16);
    for (int m = 0; m < M; m++) { /* residual-like rows, per-row scales */
        float sc = ldexpf(1.0f, (int)(gt_rand_u64(&s) % 8) - 3);
        for (size_t i = 0; i < h.ldr; i++) h.R[m * h.ldr + i] = di_f32_to_bf16(gt_normal(&s) * sc);
        for (int i = 0; i < d; i++) h.sub[(size_t)m * d + i] = di_f32_to_bf16(gt_normal(&s) * sc * 0.5f);
    }
    gt_fill_f32(h.fn, (size_t)24 * hcd, 1.5f / sqrtf((float)hcd / 3.0f), &s); /* mixes ~ O(1) */
    for (int i = 0; i < 3; i++) h.sc3[i] = 1.0f + 0.5f * gt_rand_unit(&s);
    gt_fill_f32(h.base, 24, 1.0f, &s);
    for (int i = 0; i < d; i++) h.w[i] = 1.0f + 0.2f * gt_rand_unit(&s);
    { /* the previous site's post / comb: a Sinkhorn split of random mixes */
        float *mx = malloc((size_t)M * 96), *pp = malloc((size_t)M * 16);
        gt_fill_f32(mx, (size_t)M * 24, 2.0f, &s);
        di_hc_sinkhorn_rows(NULL, M, mx, h.sc3, h.base, 20, 1e-6f, pp, h.post, h.comb);
        free(mx), free(pp);
    }
    for (int i = 0; i < M * 4; i++) h.pre_in[i] = 0.5f + 0.5f * gt_rand_unit(&s);

    /* CPU: the op sequence */
    di_exec x;
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    di_wmat pw;
    CHECK(di_wmat_pack(&pw, DI_WFMT_F32, h.fn, NULL, 24, hcd, 0, NULL) == DEEPINFER_OK);
    mf_out c = {0};
    c.R = malloc((size_t)M * h.ldr * 2), memcpy(c.R, h.R, (size_t)M * h.ldr * 2);
    c.post = malloc((size_t)M * 16), memcpy(c.post, h.post, (size_t)M * 16);
    c.comb = malloc((size_t)M * 64), memcpy(c.comb, h.comb, (size_t)M * 64);
    c.pre_in = malloc((size_t)M * 16), memcpy(c.pre_in, h.pre_in, (size_t)M * 16);
    c.mixes = malloc((size_t)M * 96), c.pre = malloc((size_t)M * 16);
    c.x = calloc((size_t)M * h.ldx, 2), c.xn = calloc((size_t)M * h.ldx, 2);
    di_hc_transition(&x, M, first ? NULL : h.sub, (size_t)d, c.R, h.ldr, d, &pw, h.sc3, h.base, 20, 1e-6f, 1e-6f,
                     c.mixes, c.pre, c.post, c.comb, chain ? c.pre_in : NULL, h.w, 1e-6f, c.x, c.xn, h.ldx);

    /* GPU */
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, (size_t)8 << 20));
    ctx.batch_invariant = 0;
    mf_dev g;
    g.R = gt_dev_poison((size_t)M * h.ldr * 2), g.sub = gt_to_dev(h.sub, (size_t)M * d * 2);
    g.x = gt_dev_poison((size_t)M * h.ldx * 2), g.xn = gt_dev_poison((size_t)M * h.ldx * 2);
    g.fn = gt_to_dev(h.fn, (size_t)24 * hcd * 4), g.sc3 = gt_to_dev(h.sc3, 12), g.base = gt_to_dev(h.base, 96);
    g.mixes = gt_dev_poison((size_t)M * 96), g.pre = gt_dev_poison((size_t)M * 16);
    g.post = gt_dev_poison((size_t)M * 16), g.comb = gt_dev_poison((size_t)M * 64);
    g.pre_in = gt_dev_poison((size_t)M * 16), g.w = gt_to_dev(h.w, (size_t)d * 4);
    CHECK(g.R && g.sub && g.x && g.xn && g.fn && g.sc3 && g.base && g.mixes && g.pre && g.post && g.comb && g.pre_in &&
          g.w);
    CHECK_MSG(dic_hc_transition_ok(&ctx, M, g.R, h.ldr, d, 24, hcd, g.fn, g.x, g.xn, h.ldx), "d=%d M=%d not taken", d,
              M);
    /* |fn| . |r| * rs per output: the mixes bound */
    double *mags = malloc((size_t)M * 24 * sizeof *mags);
    for (int m = 0; m < M; m++) {
        const uint16_t *r = c.R + (size_t)m * h.ldr;
        double ss = 0;
        for (int k = 0; k < hcd; k++) ss += (double)di_bf16_to_f32(r[k]) * di_bf16_to_f32(r[k]);
        double rs = 1.0 / sqrt(ss / hcd + 1e-6);
        for (int n = 0; n < 24; n++) {
            double mag = 0;
            for (int k = 0; k < hcd; k++) mag += fabs((double)h.fn[(size_t)n * hcd + k] * di_bf16_to_f32(r[k]));
            mags[m * 24 + n] = mag * rs;
        }
    }
    for (int v = 0; v < 1; v++) { /* the product's kernel; its variants are lab/mhc's (mhc_bench) */
        CHECK(mf_upload(&h, &g));
        CUDA_SYNC_CHECK(mf_launch(&ctx, &h, &g, M));
        mf_out o = {0};
        CHECK(mf_download(&h, &g, &o));

        char tag[112];
        snprintf(tag, sizeof tag, "v%d d=%d M=%d chain=%d first=%d pad=%d", v, d, M, chain, first, pad);
        /* R: bitwise */
        size_t bR = gt_bits("R", o.R, c.R, (size_t)M, h.ldr, (size_t)hcd, 2);
        /* mixes: the F32 GEMM bounds */
        double num = 0, den = 0, worst = 0;
        size_t bad_m = 0;
        for (int m = 0; m < M; m++) {
            for (int n = 0; n < 24; n++) {
                double mag = mags[m * 24 + n];
                double gv = o.mixes[m * 24 + n], cv = c.mixes[m * 24 + n], dd = fabs(gv - cv);
                if (!(dd <= MF_TOL_ELEM * mag + 1e-30)) {
                    if (bad_m < 3) fprintf(stderr, "    mixes [%d][%d]: %.9g vs %.9g (bound %.3g)\n", m, n, gv, cv, MF_TOL_ELEM * mag);
                    bad_m++;
                }
                if (mag > 0 && dd / mag > worst) worst = dd / mag;
                num += dd * dd, den += cv * cv;
            }
        }
        double mrel = den > 0 ? sqrt(num / den) : sqrt(num);
        /* downstream: the sequence's bits for the GPU's mixes */
        float *spre = malloc((size_t)M * 16), *spost = malloc((size_t)M * 16), *scomb = malloc((size_t)M * 64);
        di_hc_sinkhorn_rows(NULL, M, o.mixes, h.sc3, h.base, 20, 1e-6f, spre, spost, scomb);
        size_t bS = gt_bits("pre", o.pre, spre, (size_t)M, 4, 4, 4) + gt_bits("post", o.post, spost, (size_t)M, 4, 4, 4) +
                    gt_bits("comb", o.comb, scomb, (size_t)M, 16, 16, 4);
        uint16_t *sx = calloc((size_t)M * h.ldx, 2), *sxn = calloc((size_t)M * h.ldx, 2);
        di_hc_collapse(NULL, M, chain ? h.pre_in : o.pre, o.R, h.ldr, d, sx, h.ldx);
        size_t bX = gt_bits("x", o.x, sx, (size_t)M, h.ldx, (size_t)d, 2);
        di_rmsnorm(NULL, M, o.x, h.ldx, h.w, d, 1e-6f, sxn, h.ldx);
        size_t bXn = gt_bits("xn", o.xn, sxn, (size_t)M, h.ldx, (size_t)d, 2);
        size_t bP = chain ? gt_bits("pre_in", o.pre_in, o.pre, (size_t)M, 4, 4, 4)
                          : gt_bits("pre_in (untouched)", o.pre_in, h.pre_in, (size_t)M, 4, 4, 4);
        /* against the CPU reference */
        double rpre = gt_rel_err(o.pre, c.pre, (size_t)M * 4), rpost = gt_rel_err(o.post, c.post, (size_t)M * 4),
               rcomb = gt_rel_err(o.comb, c.comb, (size_t)M * 16);
        double rx = gt_rel_bf16_2d(o.x, c.x, (size_t)M, h.ldx, (size_t)d), rxn = gt_rel_bf16_2d(o.xn, c.xn, (size_t)M, h.ldx, (size_t)d);
        size_t dx = mf_cnt16(o.x, c.x, (size_t)M, h.ldx, (size_t)d);
        if (mrel > mf_wnorm[v]) mf_wnorm[v] = mrel;
        if (worst > mf_welem[v]) mf_welem[v] = worst;
        if (v == 0) fprintf(stderr, "  %s: mixes max|d|/mag %.2e norm %.2e; vs CPU: pre %.1e post %.1e comb %.1e x %.1e (%zu differ) xn %.1e\n",
                tag, worst, mrel, rpre, rpost, rcomb, rx, dx, rxn);
        CHECK_MSG(bR == 0, "%s: R differs from the CPU in %zu values", tag, bR);
        CHECK_MSG(bad_m == 0 && mrel <= MF_TOL_NORM, "%s: %zu mixes out of bounds, norm-wise %.3g", tag, bad_m, mrel);
        CHECK_MSG(bS + bX + bXn + bP == 0,
                  "%s: downstream of the mixes differs from the op sequence: sinkhorn %zu, x %zu, xn %zu, pre_in %zu", tag,
                  bS, bX, bXn, bP);
        CHECK_MSG(rpre <= 1e-5 && rpost <= 1e-5 && rcomb <= 1e-5 && rx <= 1e-3 && rxn <= 1e-3, "%s: far from the CPU", tag);
        if (chain) CHECK_MSG(dx == 0 && mf_cnt16(o.xn, c.xn, (size_t)M, h.ldx, (size_t)d) == 0,
                             "%s: x / xn (carried pre) differ from the CPU", tag);
        /* determinism, and a row's bits do not depend on M */
        CHECK(mf_upload(&h, &g));
        CUDA_SYNC_CHECK(mf_launch(&ctx, &h, &g, M));
        mf_out o2 = {0};
        CHECK(mf_download(&h, &g, &o2));
        size_t bD = gt_bits("R#2", o2.R, o.R, (size_t)M, h.ldr, (size_t)hcd, 2) +
                    gt_bits("mixes#2", o2.mixes, o.mixes, (size_t)M, 24, 24, 4) +
                    gt_bits("comb#2", o2.comb, o.comb, (size_t)M, 16, 16, 4) +
                    gt_bits("x#2", o2.x, o.x, (size_t)M, h.ldx, (size_t)d, 2) +
                    gt_bits("xn#2", o2.xn, o.xn, (size_t)M, h.ldx, (size_t)d, 2);
        CHECK_MSG(bD == 0, "%s: second launch differs in %zu values", tag, bD);
        if (M > 1) {
            CHECK(mf_upload(&h, &g));
            CUDA_SYNC_CHECK(mf_launch(&ctx, &h, &g, 1));
            mf_out o1 = {0};
            CHECK(mf_download(&h, &g, &o1));
            size_t b1 = gt_bits("R(M=1)", o1.R, o.R, 1, h.ldr, (size_t)hcd, 2) +
                        gt_bits("mixes(M=1)", o1.mixes, o.mixes, 1, 24, 24, 4) +
                        gt_bits("xn(M=1)", o1.xn, o.xn, 1, h.ldx, (size_t)d, 2);
            CHECK_MSG(b1 == 0, "%s: row 0 alone differs from row 0 of the launch in %zu values", tag, b1);
            mf_free(&o1);
        }
        mf_free(&o2), mf_free(&o);
        free(spre), free(spost), free(scomb), free(sx), free(sxn);
    }
    free(mags);
    mf_free(&c);
    cudaFree(g.R), cudaFree(g.sub), cudaFree(g.x), cudaFree(g.xn), cudaFree(g.fn), cudaFree(g.sc3), cudaFree(g.base);
    cudaFree(g.mixes), cudaFree(g.pre), cudaFree(g.post), cudaFree(g.comb), cudaFree(g.pre_in), cudaFree(g.w);
    cudaFree(ctx.scratch), cudaStreamDestroy(ctx.stream);
    di_wmat_free(&pw);
    di_exec_free(&x);
    free(h.R), free(h.sub), free(h.fn), free(h.w), free(h.post), free(h.comb), free(h.pre_in);
}

TEST(gpu_mhc_fused_v4_dims) {
    static const int Ms[] = {1, 2, 4, 8, 33};
    uint64_t seed = 0xC0FFEEull;
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
        for (int chain = 0; chain < 2; chain++)
            for (int first = 0; first < 2; first++) mf_case(4096, Ms[i], chain, first, Ms[i] == 33, seed++);
    mf_report();
}

TEST(gpu_mhc_fused_small) {
    static const int Ms[] = {1, 2, 4, 8, 33, 70};
    uint64_t seed = 0xBEEFull;
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
        for (int chain = 0; chain < 2; chain++)
            for (int first = 0; first < 2; first++) mf_case(256, Ms[i], chain, first, Ms[i] >= 8, seed++);
    mf_report();
    /* shapes the kernel does not take (the op then runs the sequence) */
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, (size_t)1 << 20));
    void *p = gt_dev_poison(4096);
    CHECK(!dic_hc_transition_ok(&ctx, 1, p, 400, 100, 24, 400, p, p, p, 100));
    CHECK(!dic_hc_transition_ok(&ctx, 1, p, 4 * 256, 256, 4, 4 * 256, p, p, p, 256));
    CHECK(dic_hc_transition_ok(&ctx, 1, p, 4 * 256, 256, 24, 4 * 256, p, p, p, 256));
    cudaFree(p), cudaFree(ctx.scratch), cudaStreamDestroy(ctx.stream);
}

/* d = 192 (3 x 64: S = 6 slices at 32 columns, an odd count), M = 1, 2, 4 and 5 (the shapes of the former
 * variant 8's stash paths, now on the product's kernel: one, two and a partial tile of rows). */
TEST(gpu_mhc_fused_odd) {
    static const int Ms[] = {1, 2, 4, 5};
    uint64_t seed = 0xD1CEull;
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
        for (int chain = 0; chain < 2; chain++)
            for (int first = 0; first < 2; first++) mf_case(192, Ms[i], chain, first, Ms[i] == 5, seed++);
    mf_report();
}
