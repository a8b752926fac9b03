/* gtest_moe_dec.c — the routed experts at decode sizes (both modes; gtest_moe_dec_inv.c: the
 * batch-invariant op sequence's bits)
 * (dic_moe_decode.cu, dic_moe_routed_dec: ops.h di_moe_routed without
 * dispatch) against the CPU op sequence (di_moe_routed on the CPU: dispatch,
 * gather, gemm2_grouped, swiglu_n, gemm_grouped, combine, + shared, bf16):
 *  - h (bf16, per (token, slot)) and out (bf16) and y (fp32) within the
 *    GEMM tolerance carried through the bf16 rounding points: elementwise
 *    |gpu - cpu| <= 2^-5 |cpu| + 2e-3 max|row|, norm-wise <= 2e-3 (the
 *    measured norms are printed);
 *  - two runs bitwise equal; the last token alone (M = 1) bitwise equal to
 *    its row in the M-token launch; shared aliasing out;
 *  - gpu_moe_dec_every_m: the CPU check at every M in 1..8 on four shapes (V4-Flash dims and small
 *    odd ones), and every row bitwise equal to its row in the 8-token launch (k_mv_down2 at M <= 2,
 *    k_mv_down above: the same bits), with and without the shared add, with y NULL, with shared
 *    aliasing out, with a line join (k_mo_tail) and replayed from a CUDA graph;
 *  - gpu_moe_dec_down2: the same bitwise row checks from several first tokens at M = 1, 2, 8 with
 *    repeated and invalid expert ids (-1, >= E, a token without any valid entry); k_mv_down2 taken at
 *    M <= 2 (the variants' bitwise checks are lab/moe_decode/'s bench);
 *  - FP4 (V4 experts, V4-Flash dims at M = 1 and 8) and FP8 experts,
 *    E = 16..256, top-k 2..6, hidden 256..4096, M = 1, 2, 5, 8. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gemm_ref.h"
#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

#define MD_POOL 8 /* distinct expert weights; expert e uses pool[e % MD_POOL] */

static void md_gen(int fmt, int N, int K, int B, uint8_t **w, size_t *wb, uint8_t **sc, size_t *sb, uint64_t *s) {
    *wb = fmt == DI_WFMT_FP8 ? (size_t)N * K : (size_t)N * K / 2;
    *sb = fmt == DI_WFMT_FP8 ? (size_t)((N + B - 1) / B) * (K / B) : (size_t)N * (K / 32);
    *w = malloc(*wb);
    *sc = malloc(*sb);
    for (size_t i = 0; i < *wb; i++) {
        uint8_t b = (uint8_t)gt_rand_u64(s);
        if (fmt == DI_WFMT_FP8 && (b & 0x7F) == 0x7F) b ^= 1;
        (*w)[i] = b;
    }
    for (size_t i = 0; i < *sb; i++) (*sc)[i] = (uint8_t)(118 + gt_rand_u64(s) % 6);
}

typedef struct md_mats {
    uint8_t *w[MD_POOL], *s[MD_POOL];
    di_wmat cpu[MD_POOL];
    dic_wmat dev[MD_POOL];
} md_mats;

static void md_mats_make(md_mats *m, int fmt, int N, int K, int B, uint64_t *s) {
    for (int p = 0; p < MD_POOL; p++) {
        size_t wb, sb;
        md_gen(fmt, N, K, B, &m->w[p], &wb, &m->s[p], &sb, s);
        CHECK(di_wmat_pack(&m->cpu[p], (di_wfmt)fmt, m->w[p], m->s[p], N, K, B, NULL) == DEEPINFER_OK);
        m->dev[p] = (dic_wmat){fmt, N, K, fmt == DI_WFMT_FP8 ? B : 32, gt_to_dev(m->w[p], wb), gt_to_dev(m->s[p], sb)};
        CHECK(m->dev[p].w && m->dev[p].scale);
    }
}
static void md_mats_free(md_mats *m) {
    for (int p = 0; p < MD_POOL; p++) {
        di_wmat_free(&m->cpu[p]);
        cudaFree((void *)m->dev[p].w), cudaFree((void *)m->dev[p].scale);
        free(m->w[p]), free(m->s[p]);
    }
}

/* elementwise and norm check of n values (rows of width w, for the row max) */
static int md_cmp(const char *what, const float *g, const float *c, int rows, int w, size_t ldg, size_t ldc, double *norm) {
    double num = 0, den = 0;
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        float rmax = 0;
        for (int j = 0; j < w; j++) rmax = fmaxf(rmax, fabsf(c[(size_t)r * ldc + j]));
        for (int j = 0; j < w; j++) {
            float a = g[(size_t)r * ldg + j], b = c[(size_t)r * ldc + j];
            if (!(fabsf(a - b) <= 0x1p-5f * fabsf(b) + 2e-3f * rmax)) {
                if (bad++ < 4) fprintf(stderr, "    %s row %d col %d: gpu %.7g cpu %.7g\n", what, r, j, a, b);
            }
            num += ((double)a - b) * ((double)a - b), den += (double)b * b;
        }
    }
    *norm = den > 0 ? sqrt(num / den) : sqrt(num);
    return bad;
}

static void md_case(int fmt, int E, int k, int d, int I, int B, int ab, float limit, int M, int share, uint64_t seed) {
    uint64_t s = seed;
    md_mats m1, m3, m2;
    md_mats_make(&m1, fmt, I, d, B, &s);
    md_mats_make(&m3, fmt, I, d, B, &s);
    md_mats_make(&m2, fmt, d, I, B, &s);
    di_wmat *c1 = malloc((size_t)E * sizeof *c1), *c3 = malloc((size_t)E * sizeof *c3), *c2 = malloc((size_t)E * sizeof *c2);
    dic_wmat *g1 = malloc((size_t)E * sizeof *g1), *g3 = malloc((size_t)E * sizeof *g3), *g2 = malloc((size_t)E * sizeof *g2);
    for (int e = 0; e < E; e++) {
        c1[e] = m1.cpu[e % MD_POOL], c3[e] = m3.cpu[e % MD_POOL], c2[e] = m2.cpu[e % MD_POOL];
        g1[e] = m1.dev[e % MD_POOL], g3[e] = m3.dev[e % MD_POOL], g2[e] = m2.dev[e % MD_POOL];
    }
    CHECK_MSG(dic_moe_routed_dec_ok(M, k, E, g1, g3, g2, d, ab), "shape not taken: fmt %d E=%d k=%d d=%d I=%d", fmt, E,
              k, d, I);
    /* routing: distinct experts per token; share: tokens draw from a few experts */
    const int R = M * k;
    int *sel = malloc((size_t)R * sizeof(int));
    float *rw = malloc((size_t)R * sizeof(float));
    for (int t = 0; t < M; t++)
        for (int j = 0; j < k; j++) {
            int e, dup;
            do {
                e = (int)(gt_rand_u64(&s) % (uint64_t)(share ? (k + 2 < E ? k + 2 : E) : E));
                dup = 0;
                for (int j2 = 0; j2 < j; j2++) dup |= sel[t * k + j2] == e;
            } while (dup);
            sel[t * k + j] = e;
            rw[t * k + j] = 0.1f + 0.9f * (gt_rand_unit(&s) * 0.5f + 0.5f);
        }
    const size_t ldx = (size_t)d + 8, ldo = (size_t)d + 16;
    uint16_t *xn = malloc((size_t)M * ldx * 2), *sh = malloc((size_t)M * ldo * 2);
    fill_act(xn, M, d, ldx, ab, &s);
    for (size_t i = 0; i < (size_t)M * ldo; i++) sh[i] = di_f32_to_bf16(gt_rand_unit(&s) * 0.05f);

    /* CPU: the op sequence */
    di_exec x;
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    di_moe_bufs b;
    b.off = malloc(((size_t)E + 1) * sizeof(int)), b.rows = malloc((size_t)R * sizeof(int));
    b.inv = malloc((size_t)R * sizeof(int));
    b.xe = malloc((size_t)R * d * 2), b.eo = malloc((size_t)R * d * 2);
    b.g = malloc((size_t)R * I * 2), b.u = malloc((size_t)R * I * 2), b.h = malloc((size_t)R * I * 2);
    b.erw = malloc((size_t)R * 4);
    float *y = malloc((size_t)M * d * 4);
    uint16_t *out = malloc((size_t)M * ldo * 2);
    memcpy(out, sh, (size_t)M * ldo * 2);
    di_moe_routed(&x, M, k, sel, rw, E, c1, c3, c2, xn, ldx, d, ab, limit, &b, out, y, out, ldo); /* shared = out */

    /* GPU */
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 0));
    int *dsel = gt_to_dev(sel, (size_t)R * sizeof(int));
    float *drw = gt_to_dev(rw, (size_t)R * 4);
    uint16_t *dxn = gt_to_dev(xn, (size_t)M * ldx * 2), *dsh = gt_to_dev(sh, (size_t)M * ldo * 2);
    uint16_t *dh = gt_dev_poison((size_t)R * I * 2), *dout = gt_to_dev(sh, (size_t)M * ldo * 2);
    uint16_t *dout2 = gt_dev_poison((size_t)M * ldo * 2), *dout1 = gt_dev_poison(ldo * 2);
    float *dy = gt_dev_poison((size_t)M * d * 4), *dy2 = gt_dev_poison((size_t)M * d * 4);
    CHECK(dsel && drw && dxn && dsh && dh && dout && dout2 && dout1 && dy && dy2);
    /* run 1: shared aliasing out; run 2: shared separate */
    CUDA_SYNC_CHECK(dic_moe_routed_dec(&ctx, M, k, dsel, drw, E, g1, g3, g2, dxn, ldx, d, ab, limit, dh, (size_t)I,
                                       dout, ldo, dy, dout, ldo));
    CUDA_SYNC_CHECK(dic_moe_routed_dec(&ctx, M, k, dsel, drw, E, g1, g3, g2, dxn, ldx, d, ab, limit, dh, (size_t)I,
                                       dsh, ldo, dy2, dout2, ldo));
    uint16_t *H = gt_d2h(dh, (size_t)R * I * 2), *O = gt_d2h(dout, (size_t)M * ldo * 2), *O2 = gt_d2h(dout2, (size_t)M * ldo * 2);
    float *Y = gt_d2h(dy, (size_t)M * d * 4), *Y2 = gt_d2h(dy2, (size_t)M * d * 4);
    CHECK(H && O && O2 && Y && Y2);
    size_t nd = 0;
    for (int mm = 0; mm < M; mm++) nd += gt_count_diff_u16(O + mm * ldo, O2 + mm * ldo, (size_t)d);
    nd += gt_count_diff_u32(Y, Y2, (size_t)M * d);
    CHECK_MSG(nd == 0, "moe_dec: two runs differ in %zu values", nd);
    /* the last token alone */
    if (M > 1) {
        CUDA_SYNC_CHECK(dic_moe_routed_dec(&ctx, 1, k, dsel + (size_t)(M - 1) * k, drw + (size_t)(M - 1) * k, E, g1, g3,
                                           g2, dxn + (size_t)(M - 1) * ldx, ldx, d, ab, limit, dh, (size_t)I,
                                           dsh + (size_t)(M - 1) * ldo, ldo, NULL, dout1, ldo));
        uint16_t *O1 = gt_d2h(dout1, ldo * 2);
        CHECK(O1);
        size_t n1 = gt_count_diff_u16(O1, O2 + (size_t)(M - 1) * ldo, (size_t)d);
        CHECK_MSG(n1 == 0, "moe_dec: token %d alone differs from its row in M = %d in %zu values", M - 1, M, n1);
        free(O1);
    }
    /* compare: h rows (GPU row t*k+j = CPU dispatched row inv[t*k+j]), y, out */
    float *hg = malloc((size_t)R * I * 4), *hc = malloc((size_t)R * I * 4);
    for (int r = 0; r < R; r++)
        for (int i = 0; i < I; i++) {
            hg[(size_t)r * I + i] = di_bf16_to_f32(H[(size_t)r * I + i]);
            hc[(size_t)r * I + i] = di_bf16_to_f32(b.h[(size_t)b.inv[r] * I + i]);
        }
    float *og = malloc((size_t)M * d * 4), *oc = malloc((size_t)M * d * 4);
    for (int mm = 0; mm < M; mm++)
        for (int j = 0; j < d; j++) {
            og[(size_t)mm * d + j] = di_bf16_to_f32(O[(size_t)mm * ldo + j]);
            oc[(size_t)mm * d + j] = di_bf16_to_f32(out[(size_t)mm * ldo + j]);
        }
    double nh, ny, no;
    int bh = md_cmp("h", hg, hc, R, I, I, I, &nh);
    int by = md_cmp("y", Y, y, M, d, d, d, &ny);
    int bo = md_cmp("out", og, oc, M, d, d, d, &no);
    size_t same = 0;
    for (size_t i = 0; i < (size_t)M * d; i++) same += og[i] == oc[i];
    fprintf(stderr, "  moe_dec %s E=%d k=%d d=%d I=%d B=%d ab=%d limit=%g M=%d%s: norm rel h %.2e y %.2e out %.2e, out "
                    "bits equal %.1f%%\n",
            fmt == DI_WFMT_FP8 ? "FP8" : "FP4", E, k, d, I, B, ab, limit, M, share ? " shared experts" : "", nh, ny, no,
            100.0 * same / ((double)M * d));
    CHECK_MSG(bh == 0 && by == 0 && bo == 0 && nh <= 2e-3 && ny <= 2e-3 && no <= 2e-3,
              "moe_dec fmt %d E=%d k=%d d=%d I=%d M=%d: %d h / %d y / %d out outside tolerance, norms %.2e %.2e %.2e",
              fmt, E, k, d, I, M, bh, by, bo, nh, ny, no);
    /* untouched: out's padding columns */
    size_t pad = 0;
    for (int mm = 0; mm < M; mm++)
        for (size_t j = (size_t)d; j < ldo; j++) pad += O2[mm * ldo + j] != 0xFFFF;
    CHECK_MSG(pad == 0, "moe_dec: %zu padding values written", pad);

    di_exec_free(&x);
    cudaFree(dsel), cudaFree(drw), cudaFree(dxn), cudaFree(dsh), cudaFree(dh), cudaFree(dout), cudaFree(dout2);
    cudaFree(dout1), cudaFree(dy), cudaFree(dy2);
    cudaStreamDestroy(ctx.stream);
    free(H), free(O), free(O2), free(Y), free(Y2), free(hg), free(hc), free(og), free(oc);
    free(b.off), free(b.rows), free(b.inv), free(b.xe), free(b.eo), free(b.g), free(b.u), free(b.h), free(b.erw);
    free(y), free(out), free(xn), free(sh), free(sel), free(rw);
    free(c1), free(c3), free(c2), free(g1), free(g3), free(g2);
    md_mats_free(&m1), md_mats_free(&m3), md_mats_free(&m2);
}

TEST(gpu_moe_dec_fp4) {
    static const int Ms[] = {1, 2, 5, 8};
    for (int i = 0; i < 4; i++) md_case(DI_WFMT_FP4, 16, 2, 256, 128, 32, 128, 0.0f, Ms[i], 0, 7100 + i);
    for (int i = 0; i < 4; i++) md_case(DI_WFMT_FP4, 64, 6, 1024, 512, 32, 32, 7.0f, Ms[i], i == 3, 7110 + i);
    md_case(DI_WFMT_FP4, 256, 6, 4096, 2048, 32, 128, 10.0f, 1, 0, 7120); /* V4-Flash */
    md_case(DI_WFMT_FP4, 256, 6, 4096, 2048, 32, 128, 10.0f, 8, 0, 7121);
}

TEST(gpu_moe_dec_fp8) {
    static const int Ms[] = {1, 2, 5, 8};
    for (int i = 0; i < 4; i++) md_case(DI_WFMT_FP8, 32, 4, 512, 256, 128, 128, 0.0f, Ms[i], i == 2, 7200 + i);
    md_case(DI_WFMT_FP8, 16, 3, 640, 384, 32, 32, 5.0f, 2, 0, 7210);
    md_case(DI_WFMT_FP8, 16, 3, 640, 384, 64, 128, 5.0f, 5, 0, 7211);
}

/* ---- a bitwise-variant fixture: FP4 experts from the pool, MM tokens of inputs, device buffers ---------
 * (md_one_shape, md_down2_shape). md_fx_make draws the weights, xn and shared in that order; the caller
 * fills sel / rw (the next draws) and calls md_fx_upload. */

typedef struct md_fx {
    int E, k, d, I, ab, MM;
    float limit;
    size_t ldx, ldo;
    md_mats m1, m3, m2;
    dic_wmat *g1, *g3, *g2;
    int *sel;
    float *rw;
    uint16_t *xn, *sh;
    dic_ctx ctx;
    int *dsel;
    float *drw, *dy;
    uint16_t *dxn, *dsh, *dh, *dout;
} md_fx;

static void md_fx_make(md_fx *f, int E, int k, int d, int I, int ab, float limit, int MM, uint64_t *s) {
    memset(f, 0, sizeof *f);
    f->E = E, f->k = k, f->d = d, f->I = I, f->ab = ab, f->MM = MM, f->limit = limit;
    md_mats_make(&f->m1, DI_WFMT_FP4, I, d, 32, s);
    md_mats_make(&f->m3, DI_WFMT_FP4, I, d, 32, s);
    md_mats_make(&f->m2, DI_WFMT_FP4, d, I, 32, s);
    f->g1 = malloc((size_t)E * sizeof *f->g1), f->g3 = malloc((size_t)E * sizeof *f->g3);
    f->g2 = malloc((size_t)E * sizeof *f->g2);
    for (int e = 0; e < E; e++)
        f->g1[e] = f->m1.dev[e % MD_POOL], f->g3[e] = f->m3.dev[e % MD_POOL], f->g2[e] = f->m2.dev[e % MD_POOL];
    f->ldx = (size_t)d + 8, f->ldo = (size_t)d + 16;
    f->sel = malloc((size_t)MM * k * sizeof(int));
    f->rw = malloc((size_t)MM * k * sizeof(float));
    f->xn = malloc((size_t)MM * f->ldx * 2), f->sh = malloc((size_t)MM * f->ldo * 2);
    fill_act(f->xn, MM, d, f->ldx, ab, s);
    for (size_t i = 0; i < (size_t)MM * f->ldo; i++) f->sh[i] = di_f32_to_bf16(gt_rand_unit(s) * 0.05f);
}

/* token t's k distinct experts (from the first `few` experts when few > 0) and weights in [0.1, 1) */
static void md_fx_route(md_fx *f, int t, int few, uint64_t *s) {
    const int k = f->k, E = f->E;
    for (int j = 0; j < k; j++) {
        int e, dup;
        do {
            e = (int)(gt_rand_u64(s) % (uint64_t)(few > 0 ? (few < E ? few : E) : E));
            dup = 0;
            for (int j2 = 0; j2 < j; j2++) dup |= f->sel[t * k + j2] == e;
        } while (dup);
        f->sel[t * k + j] = e;
        f->rw[t * k + j] = 0.1f + 0.9f * (gt_rand_unit(s) * 0.5f + 0.5f);
    }
}

static void md_fx_upload(md_fx *f) {
    const size_t RM = (size_t)f->MM * f->k;
    CHECK(gt_ctx(&f->ctx, 0));
    f->dsel = gt_to_dev(f->sel, RM * sizeof(int));
    f->drw = gt_to_dev(f->rw, RM * 4);
    f->dxn = gt_to_dev(f->xn, (size_t)f->MM * f->ldx * 2), f->dsh = gt_to_dev(f->sh, (size_t)f->MM * f->ldo * 2);
    f->dh = gt_dev_poison(RM * f->I * 2), f->dout = gt_dev_poison((size_t)f->MM * f->ldo * 2);
    f->dy = gt_dev_poison((size_t)f->MM * f->d * 4);
    CHECK(f->dsel && f->drw && f->dxn && f->dsh && f->dh && f->dout && f->dy);
}

static void md_fx_free(md_fx *f) {
    cudaFree(f->dsel), cudaFree(f->drw), cudaFree(f->dxn), cudaFree(f->dsh), cudaFree(f->dh), cudaFree(f->dout);
    cudaFree(f->dy);
    cudaStreamDestroy(f->ctx.stream);
    free(f->sel), free(f->rw), free(f->xn), free(f->sh), free(f->g1), free(f->g3), free(f->g2);
    md_mats_free(&f->m1), md_mats_free(&f->m3), md_mats_free(&f->m2);
}

/* One call of the op at M tokens from token `off`, eager or captured once and replayed 3 times. */
static cudaError_t md_fx_call(md_fx *f, int M, int off, const uint16_t *shp, float *y, int graph) {
    const size_t k = (size_t)f->k;
    const int *psel = f->dsel + (size_t)off * k;
    const float *prw = f->drw + (size_t)off * k;
    const uint16_t *pxn = f->dxn + (size_t)off * f->ldx;
    if (!graph)
        return dic_moe_routed_dec(&f->ctx, M, f->k, psel, prw, f->E, f->g1, f->g3, f->g2, pxn, f->ldx, f->d, f->ab,
                                  f->limit, f->dh, (size_t)f->I, shp, f->ldo, y, f->dout, f->ldo);
    cudaGraph_t gr;
    cudaGraphExec_t ge;
    cudaError_t e = cudaStreamBeginCapture(f->ctx.stream, cudaStreamCaptureModeGlobal); /* no sync inside */
    if (e != cudaSuccess) return e;
    cudaError_t e1 = dic_moe_routed_dec(&f->ctx, M, f->k, psel, prw, f->E, f->g1, f->g3, f->g2, pxn, f->ldx, f->d,
                                        f->ab, f->limit, f->dh, (size_t)f->I, shp, f->ldo, y, f->dout, f->ldo);
    e = cudaStreamEndCapture(f->ctx.stream, &gr);
    if (e != cudaSuccess) return e;
    if (e1 != cudaSuccess) return cudaGraphDestroy(gr), e1;
    e = cudaGraphInstantiate(&ge, gr, 0);
    for (int rep = 0; rep < 3 && e == cudaSuccess; rep++) e = cudaGraphLaunch(ge, f->ctx.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(f->ctx.stream);
    cudaGraphExecDestroy(ge), cudaGraphDestroy(gr);
    return e;
}

/* The default path's h, out, y at M tokens from token `off` (eager, no join): w = 0 with shared, w = 1
 * without. */
static void md_fx_ref(md_fx *f, int M, int off, uint16_t *Hr[2], uint16_t *Or[2], float *Yr[2]) {
    const size_t R = (size_t)M * f->k;
    for (int w = 0; w < 2; w++) {
        CUDA_SYNC_CHECK(cudaMemset(f->dh, 0xFF, R * f->I * 2));
        CUDA_SYNC_CHECK(cudaMemset(f->dout, 0xFF, (size_t)M * f->ldo * 2));
        CUDA_SYNC_CHECK(md_fx_call(f, M, off, w ? NULL : f->dsh, f->dy, 0));
        Hr[w] = gt_d2h(f->dh, R * f->I * 2), Or[w] = gt_d2h(f->dout, (size_t)M * f->ldo * 2);
        Yr[w] = gt_d2h(f->dy, (size_t)M * f->d * 4);
        CHECK(Hr[w] && Or[w] && Yr[w]);
    }
}

/* One case against reference w: poison h, y (out = shared when sh == 2), the call, the differing values
 * of h, y (when given) and the d columns of out. */
static void md_fx_case(md_fx *f, int M, int off, int sh, int ygiven, int graph, uint16_t *Hr, uint16_t *Or,
                       float *Yr, size_t *nh, size_t *ny, size_t *no) {
    const size_t R = (size_t)M * f->k;
    CUDA_SYNC_CHECK(cudaMemset(f->dh, 0xFF, R * f->I * 2));
    CUDA_SYNC_CHECK(cudaMemset(f->dy, 0xFF, (size_t)M * f->d * 4));
    /* the shared expert's rows of tokens off..off+M-1 (the reference's rows there) */
    const uint16_t *dsh_off = f->dsh + (size_t)off * f->ldo;
    if (sh == 2) CUDA_SYNC_CHECK(cudaMemcpy(f->dout, dsh_off, (size_t)M * f->ldo * 2, cudaMemcpyDeviceToDevice));
    else CUDA_SYNC_CHECK(cudaMemset(f->dout, 0xFF, (size_t)M * f->ldo * 2));
    const uint16_t *shp = sh == 0 ? NULL : sh == 1 ? dsh_off : f->dout;
    CUDA_SYNC_CHECK(md_fx_call(f, M, off, shp, ygiven ? f->dy : NULL, graph));
    uint16_t *Hv = gt_d2h(f->dh, R * f->I * 2), *Ov = gt_d2h(f->dout, (size_t)M * f->ldo * 2);
    float *Yv = gt_d2h(f->dy, (size_t)M * f->d * 4);
    CHECK(Hv && Ov && Yv);
    *nh = gt_count_diff_u16(Hv, Hr, R * f->I), *no = 0;
    *ny = ygiven ? gt_count_diff_u32(Yv, Yr, (size_t)M * f->d) : 0;
    for (int mm = 0; mm < M; mm++) *no += gt_count_diff_u16(Ov + mm * f->ldo, Or + mm * f->ldo, (size_t)f->d);
    free(Hv), free(Ov), free(Yv);
}

/* ---- every M in 1..Mmax: each row bitwise equal to its row in the Mmax-token launch ------------- */

static void md_nojoin(void *p) { (void)p; }

/* Rows 0..M-1 of the Mmax-token reference (h, out, y), for md_fx_case. */
static void md_fx_rows(const md_fx *f, int off, uint16_t *Hr, uint16_t *Or, float *Yr, uint16_t **H, uint16_t **O,
                       float **Y) {
    *H = Hr + (size_t)off * f->k * f->I, *O = Or + (size_t)off * f->ldo, *Y = Yr + (size_t)off * f->d;
}

static void md_every_m_shape(int E, int k, int d, int I, int ab, float limit, int Mmax, uint64_t seed) {
    uint64_t s = seed;
    md_fx f;
    md_fx_make(&f, E, k, d, I, ab, limit, Mmax, &s);
    for (int t = 0; t < Mmax; t++) /* odd tokens share a few experts (several entries on one expert across tokens) */
        md_fx_route(&f, t, t & 1 ? k + 2 : 0, &s);
    if (Mmax >= 3) f.sel[2 * k + 1] = -1; /* an invalid slot (no expert) in token 2 */
    md_fx_upload(&f);
    /* reference: the Mmax-token launch, with shared (w = 0) and without (w = 1) */
    uint16_t *Hr[2], *Or[2];
    float *Yr[2];
    md_fx_ref(&f, Mmax, 0, Hr, Or, Yr);
    for (int M = 1; M <= Mmax; M++) {
        /* cases: shared (0 none, 1 separate, 2 aliasing out), y given, join, graph */
        static const struct { int sh, y, join, graph; } C[] = {
            {1, 1, 0, 0}, {0, 1, 0, 0}, {2, 1, 0, 0}, {1, 0, 1, 0}, {0, 1, 1, 0}, {2, 0, 1, 0}, {1, 1, 0, 1}, {0, 1, 1, 1}};
        const int nc = (int)(sizeof C / sizeof C[0]);
        for (int ci = 0; ci < nc; ci++) {
            const int w = C[ci].sh == 0; /* the reference without shared */
            f.ctx.join = C[ci].join ? md_nojoin : NULL, f.ctx.join_arg = NULL;
            const int n0 = dic_moe_dec_down2_count();
            uint16_t *H, *O;
            float *Y;
            md_fx_rows(&f, 0, Hr[w], Or[w], Yr[w], &H, &O, &Y);
            size_t nh, ny, no;
            md_fx_case(&f, M, 0, C[ci].sh, C[ci].y, C[ci].graph, H, O, Y, &nh, &ny, &no);
            f.ctx.join = NULL;
            CHECK_MSG(M > 2 || C[ci].graph || dic_moe_dec_down2_count() == n0 + 1,
                      "moe_dec M=%d case %d: k_mv_down2 not taken", M, ci);
            CHECK_MSG(nh == 0 && no == 0 && ny == 0,
                      "moe_dec E=%d k=%d d=%d I=%d M=%d case %d: differs from the %d-token launch in %zu h / %zu y / "
                      "%zu out",
                      E, k, d, I, M, ci, Mmax, nh, ny, no);
        }
        fprintf(stderr, "  moe_dec E=%d k=%d d=%d I=%d ab=%d M=%d: %d cases bitwise equal to the %d-token rows\n", E, k,
                d, I, ab, M, nc, Mmax);
    }
    for (int w = 0; w < 2; w++) free(Hr[w]), free(Or[w]), free(Yr[w]);
    CHECK(!dic_moe_dec_broken());
    md_fx_free(&f);
}

TEST(gpu_moe_dec_every_m) {
    static const struct { int E, k, d, I, ab; float limit; uint64_t seed; } S[] = {
        {256, 6, 4096, 2048, 128, 10.0f, 7300}, /* V4-Flash */
        {16, 2, 256, 128, 128, 0.0f, 7310},
        {64, 6, 1024, 512, 32, 7.0f, 7320},
        {24, 5, 640, 384, 64, 3.0f, 7330}}; /* odd top-k, d / 16 and I / 16 odd multiples */
    for (int i = 0; i < 4; i++) {
        for (int M = 1; M <= 8; M++) /* against the CPU op sequence */
            md_case(DI_WFMT_FP4, S[i].E, S[i].k, S[i].d, S[i].I, 32, S[i].ab, S[i].limit, M, M & 1,
                    S[i].seed + 100 + (uint64_t)M);
        md_every_m_shape(S[i].E, S[i].k, S[i].d, S[i].I, S[i].ab, S[i].limit, 8, S[i].seed);
    }
}

/* ---- k_mv_down2 (M <= 2) and k_mv_down (M = 8) rows against the 8-token launch, bitwise ---------- */

static void md_down2_shape(int E, int k, int d, int I, int ab, float limit, uint64_t seed) {
    enum { MM = 8 };
    uint64_t s = seed;
    md_fx f;
    md_fx_make(&f, E, k, d, I, ab, limit, MM, &s);
    for (int t = 0; t < MM; t++) /* tokens 3, 7, ...: a few shared experts */
        md_fx_route(&f, t, t % 4 == 3 ? k + 2 : 0, &s);
    int *sel = f.sel;
    for (int t = 1; t < MM; t += 4) sel[t * k + 1] = sel[t * k]; /* an expert twice in one token */
    for (int t = 2; t < MM; t += 4) {                            /* invalid slots: -1, >= E */
        sel[t * k + k - 1] = -1;
        if (k >= 3) sel[t * k + 1] = E + 3;
    }
    for (int j = 0; j < k; j++) sel[(MM - 2) * k + j] = j & 1 ? -1 : E; /* token 6: no valid entry */
    md_fx_upload(&f);
    /* reference: the MM-token launch from token 0, with shared (w = 0) and without (w = 1) */
    uint16_t *Hr[2], *Or[2];
    float *Yr[2];
    md_fx_ref(&f, MM, 0, Hr, Or, Yr);
    /* (M, first token) */
    static const int RUNS[][2] = {{1, 0}, {1, 1}, {1, 2}, {1, 6}, {2, 0}, {2, 2}, {8, 0}};
    for (int ri = 0; ri < (int)(sizeof RUNS / sizeof RUNS[0]); ri++) {
        const int M = RUNS[ri][0], off = RUNS[ri][1];
        /* cases: shared (0 none, 1 separate, 2 aliasing out), y given, graph */
        static const struct { int sh, y, graph; } C[] = {{1, 1, 0}, {0, 1, 0}, {2, 0, 0}, {1, 1, 1}, {0, 1, 1}};
        const int nc = (int)(sizeof C / sizeof C[0]);
        for (int ci = 0; ci < nc; ci++) {
            const int w = C[ci].sh == 0;
            const int n0 = dic_moe_dec_down2_count();
            uint16_t *H, *O;
            float *Y;
            md_fx_rows(&f, off, Hr[w], Or[w], Yr[w], &H, &O, &Y);
            size_t nh, ny, no;
            md_fx_case(&f, M, off, C[ci].sh, C[ci].y, C[ci].graph, H, O, Y, &nh, &ny, &no);
            CHECK_MSG(!dic_moe_dec_broken(), "moe_dec_down2 M=%d case %d: a launch failed (fell back)", M, ci);
            CHECK_MSG(M > 2 || C[ci].graph || dic_moe_dec_down2_count() == n0 + 1,
                      "moe_dec_down2 M=%d case %d: k_mv_down2 not taken", M, ci);
            CHECK_MSG(nh == 0 && no == 0 && ny == 0,
                      "moe_dec_down2 E=%d k=%d d=%d I=%d M=%d (from token %d) case %d: differs from the %d-token "
                      "launch in %zu h / %zu y / %zu out",
                      E, k, d, I, M, off, ci, MM, nh, ny, no);
        }
        fprintf(stderr, "  moe_dec_down2 E=%d k=%d d=%d I=%d ab=%d M=%d from token %d: %d cases bitwise equal to the "
                        "%d-token rows\n",
                E, k, d, I, ab, M, off, nc, MM);
    }
    for (int w = 0; w < 2; w++) free(Hr[w]), free(Or[w]), free(Yr[w]);
    CHECK(!dic_moe_dec_broken());
    md_fx_free(&f);
}

TEST(gpu_moe_dec_down2) {
    md_down2_shape(256, 6, 4096, 2048, 128, 10.0f, 7400); /* V4-Flash */
    md_down2_shape(16, 2, 256, 128, 128, 0.0f, 7410);
    md_down2_shape(64, 6, 1024, 512, 32, 7.0f, 7420);
    md_down2_shape(24, 5, 640, 384, 64, 3.0f, 7430); /* odd top-k, d / 16 and I / 16 odd multiples */
    md_down2_shape(32, 8, 512, 640, 64, 0.0f, 7440); /* top-8 (MD_KMAX), I / 128 = 5 chunks */
}
