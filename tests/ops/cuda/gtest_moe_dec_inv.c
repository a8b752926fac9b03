/* gtest_moe_dec_inv.c — batch-invariant mode (the default): the fused routed-expert decode kernels
 * (dic_moe_routed_dec, dic_moe_decode.cu) give every token the bits of the op sequence the model
 * runs at large M (dic_moe_dispatch_inv, dic_moe_gather, dic_gemm2_grouped_seg, dic_swiglu_n,
 * dic_gemm_grouped_seg with the M-free split, dic_moe_combine_inv, + shared, bf16;
 * cu_ops_model.c moe_routed, docs/kernels/moe-decode.md §2):
 *  - the op sequence over MM = 65 / 300 tokens (random routings, every third token on a few experts
 *    shared across tokens) is the reference (its dispatch takes valid expert ids only);
 *  - the fused kernels at M = 1, 2, 3, 4, 5, 8 tokens from several first tokens: h (per (token, slot),
 *    against the op sequence's dispatched row), y (fp32) and out (bf16) bitwise equal to the
 *    reference's rows, with and without the shared-expert add;
 *  - FP4 experts at V4-Flash dims (E 256 top-6, d 4096, I 2048, act_block 128) and V4.1's (E 384,
 *    d 5120, I 2304, act_block 32), FP8 experts (wblock 128 / act_block 128 and wblock 64 / act_block 32).
 * The tolerance against the CPU op is gtest_moe_dec.c's (the same kernels). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gemm_ref.h"
#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

#define MI_POOL 8 /* distinct expert weights; expert e uses pool[e % MI_POOL] */

typedef struct mi_mats {
    dic_wmat dev[MI_POOL];
} mi_mats;

static void mi_mats_make(mi_mats *m, int fmt, int N, int K, int B, uint64_t *s) {
    for (int p = 0; p < MI_POOL; p++) {
        const size_t wb = fmt == DI_WFMT_FP8 ? (size_t)N * K : (size_t)N * K / 2;
        const size_t sb = fmt == DI_WFMT_FP8 ? (size_t)((N + B - 1) / B) * (K / B) : (size_t)N * (K / 32);
        uint8_t *w = malloc(wb), *sc = malloc(sb);
        CHECK(w && sc);
        for (size_t i = 0; i < wb; i++) {
            uint8_t b = (uint8_t)gt_rand_u64(s);
            if (fmt == DI_WFMT_FP8 && (b & 0x7F) == 0x7F) b ^= 1; /* no NaN weights */
            w[i] = b;
        }
        for (size_t i = 0; i < sb; i++) sc[i] = (uint8_t)(118 + gt_rand_u64(s) % 6);
        m->dev[p] = (dic_wmat){fmt, N, K, fmt == DI_WFMT_FP8 ? B : 32, gt_to_dev(w, wb), gt_to_dev(sc, sb)};
        CHECK(m->dev[p].w && m->dev[p].scale);
        free(w), free(sc);
    }
}
static void mi_mats_free(mi_mats *m) {
    for (int p = 0; p < MI_POOL; p++) cudaFree((void *)m->dev[p].w), cudaFree((void *)m->dev[p].scale);
}

/* The op sequence over M tokens (shared NULL: no shared add): h at the dispatched rows, y, out
 * (ld d); inv (host) maps entry m * k + s to its dispatched row. */
static void mi_opseq(dic_ctx *c, int M, int k, int E, const dic_wmat *g1, const dic_wmat *g3, const dic_wmat *g2,
                     const int *dsel, const float *drw, const uint16_t *dxn, size_t ldx, int d, int I, int ab,
                     float limit, const uint16_t *dsh, uint16_t **H, int **inv, float **Y, uint16_t **O) {
    const int R = M * k;
    int *doff = gt_dev_poison((size_t)(E + 1) * 4), *drows = gt_dev_poison((size_t)R * 4);
    int *dinv = gt_dev_poison((size_t)R * 4);
    uint16_t *dxe = gt_dev_poison((size_t)R * d * 2), *dg = gt_dev_poison((size_t)R * I * 2);
    uint16_t *du = gt_dev_poison((size_t)R * I * 2), *dh = gt_dev_poison((size_t)R * I * 2);
    uint16_t *deo = gt_dev_poison((size_t)R * d * 2), *dout = gt_dev_poison((size_t)M * d * 2);
    float *derw = gt_dev_poison((size_t)R * 4), *dy = gt_dev_poison((size_t)M * d * 4);
    CHECK(doff && drows && dinv && dxe && dg && du && dh && deo && dout && derw && dy);
    CUDA_SYNC_CHECK(dic_moe_dispatch_inv(c, M, k, dsel, E, doff, drows, dinv));
    CUDA_SYNC_CHECK(dic_moe_gather(c, R, doff, E, drows, k, dxn, ldx, d, drw, dxe, (size_t)d, derw));
    CUDA_SYNC_CHECK(dic_gemm2_grouped_seg(c, E, g1, g3, doff, R, dxe, (size_t)d, ab, dg, du, (size_t)I));
    CUDA_SYNC_CHECK(dic_swiglu_n(c, doff, E, R, dg, du, (size_t)I, I, limit, derw, dh, (size_t)I));
    CUDA_SYNC_CHECK(dic_gemm_grouped_seg(c, E, g2, doff, R, dh, (size_t)I, ab, deo, (size_t)d));
    CUDA_SYNC_CHECK(dic_moe_combine_inv(c, M, k, dinv, deo, (size_t)d, d, dy));
    if (dsh) CUDA_SYNC_CHECK(dic_add_bf16_f32(c, dy, dsh, (size_t)M * d));
    CUDA_SYNC_CHECK(dic_f32_to_bf16_n(c, dy, dout, (size_t)M * d));
    *H = gt_d2h(dh, (size_t)R * I * 2), *inv = gt_d2h(dinv, (size_t)R * 4);
    *Y = gt_d2h(dy, (size_t)M * d * 4), *O = gt_d2h(dout, (size_t)M * d * 2);
    CHECK(*H && *inv && *Y && *O);
    cudaFree(doff), cudaFree(drows), cudaFree(dinv), cudaFree(dxe), cudaFree(dg), cudaFree(du), cudaFree(dh);
    cudaFree(deo), cudaFree(dout), cudaFree(derw), cudaFree(dy);
}

static void mi_shape(int fmt, int E, int k, int d, int I, int B, int ab, float limit, int MM, uint64_t seed) {
    uint64_t s = seed;
    mi_mats m1, m3, m2;
    mi_mats_make(&m1, fmt, I, d, B, &s);
    mi_mats_make(&m3, fmt, I, d, B, &s);
    mi_mats_make(&m2, fmt, d, I, B, &s);
    dic_wmat *g1 = malloc((size_t)E * sizeof *g1), *g3 = malloc((size_t)E * sizeof *g3), *g2 = malloc((size_t)E * sizeof *g2);
    CHECK(g1 && g3 && g2);
    for (int e = 0; e < E; e++) g1[e] = m1.dev[e % MI_POOL], g3[e] = m3.dev[e % MI_POOL], g2[e] = m2.dev[e % MI_POOL];
    CHECK_MSG(dic_moe_routed_dec_ok(1, k, E, g1, g3, g2, d, ab), "shape not taken: fmt %d E=%d k=%d d=%d I=%d", fmt, E,
              k, d, I);
    const int R = MM * k;
    int *sel = malloc((size_t)R * 4);
    float *rw = malloc((size_t)R * 4);
    for (int t = 0; t < MM; t++) { /* every 3rd token from the first k + 2 experts (shared experts across tokens) */
        const int few = t % 3 == 1 ? k + 2 : E;
        for (int j = 0; j < k; j++) {
            int e, dup;
            do {
                e = (int)(gt_rand_u64(&s) % (uint64_t)few);
                dup = 0;
                for (int j2 = 0; j2 < j; j2++) dup |= sel[t * k + j2] == e;
            } while (dup);
            sel[t * k + j] = e;
            rw[t * k + j] = 0.1f + 0.9f * (gt_rand_unit(&s) * 0.5f + 0.5f);
        }
    }
    const size_t ldx = (size_t)d + 8;
    uint16_t *xn = malloc((size_t)MM * ldx * 2), *sh = malloc((size_t)MM * d * 2);
    fill_act(xn, MM, d, ldx, ab, &s);
    for (size_t i = 0; i < (size_t)MM * d; i++) sh[i] = di_f32_to_bf16(gt_rand_unit(&s) * 0.05f);

    dic_ctx c;
    const size_t scu = dic_gemm_scratch(R, I, d), scd = dic_gemm_scratch(R, d, I);
    CHECK(gt_ctx(&c, scu > scd ? scu : scd));
    c.batch_invariant = 1; /* the default mode */
    int *dsel = gt_to_dev(sel, (size_t)R * 4);
    float *drw = gt_to_dev(rw, (size_t)R * 4);
    uint16_t *dxn = gt_to_dev(xn, (size_t)MM * ldx * 2), *dsh = gt_to_dev(sh, (size_t)MM * d * 2);
    CHECK(dsel && drw && dxn && dsh);
    uint16_t *Hr[2], *Or[2];
    int *inv[2];
    float *Yr[2];
    for (int w = 0; w < 2; w++) /* w = 0: with the shared add */
        mi_opseq(&c, MM, k, E, g1, g3, g2, dsel, drw, dxn, ldx, d, I, ab, limit, w ? NULL : dsh, &Hr[w], &inv[w],
                 &Yr[w], &Or[w]);
    /* the fused kernels at small M from several first tokens */
    static const int RUNS[][2] = {{1, 0}, {1, 1}, {1, 5}, {1, 64}, {2, 3}, {3, 10}, {4, 20}, {5, 1}, {8, 0}, {8, 57}};
    uint16_t *dh = gt_dev_poison((size_t)8 * k * I * 2), *dout = gt_dev_poison((size_t)8 * d * 2);
    float *dy = gt_dev_poison((size_t)8 * d * 4);
    CHECK(dh && dout && dy);
    size_t bad = 0;
    for (int ri = 0; ri < (int)(sizeof RUNS / sizeof RUNS[0]); ri++) {
        const int M = RUNS[ri][0], t0 = RUNS[ri][1];
        if (t0 + M > MM) continue;
        for (int w = 0; w < 2; w++) {
            CUDA_SYNC_CHECK(cudaMemset(dh, 0xFF, (size_t)M * k * I * 2));
            CUDA_SYNC_CHECK(cudaMemset(dout, 0xFF, (size_t)M * d * 2));
            CUDA_SYNC_CHECK(cudaMemset(dy, 0xFF, (size_t)M * d * 4));
            CUDA_SYNC_CHECK(dic_moe_routed_dec(&c, M, k, dsel + (size_t)t0 * k, drw + (size_t)t0 * k, E, g1, g3, g2,
                                               dxn + (size_t)t0 * ldx, ldx, d, ab, limit, dh, (size_t)I,
                                               w ? NULL : dsh + (size_t)t0 * d, (size_t)d, dy, dout, (size_t)d));
            uint16_t *H = gt_d2h(dh, (size_t)M * k * I * 2), *O = gt_d2h(dout, (size_t)M * d * 2);
            float *Y = gt_d2h(dy, (size_t)M * d * 4);
            CHECK(H && O && Y);
            size_t nh = 0;
            for (int r = 0; r < M * k; r++) {
                const int er = t0 * k + r;
                nh += gt_count_diff_u16(H + (size_t)r * I, Hr[w] + (size_t)inv[w][er] * I, (size_t)I);
            }
            const size_t ny = gt_count_diff_u32(Y, Yr[w] + (size_t)t0 * d, (size_t)M * d);
            const size_t no = gt_count_diff_u16(O, Or[w] + (size_t)t0 * d, (size_t)M * d);
            if (nh || ny || no)
                fprintf(stderr, "    moe_dec_inv %s E=%d k=%d d=%d I=%d ab=%d M=%d from token %d%s: %zu h / %zu y / %zu "
                                "out differ from the %d-token op sequence\n",
                        fmt == DI_WFMT_FP8 ? "FP8" : "FP4", E, k, d, I, ab, M, t0, w ? "" : " +shared", nh, ny, no, MM);
            bad += nh + ny + no;
            free(H), free(O), free(Y);
        }
    }
    fprintf(stderr, "  moe_dec_inv %s E=%d k=%d d=%d I=%d B=%d ab=%d, op sequence at M = %d: %zu values differ\n",
            fmt == DI_WFMT_FP8 ? "FP8" : "FP4", E, k, d, I, B, ab, MM, bad);
    CHECK_MSG(bad == 0, "moe_dec_inv fmt %d E=%d d=%d I=%d: %zu fused values differ from the op sequence's", fmt, E, d,
              I, bad);
    CHECK(!dic_moe_dec_broken());
    for (int w = 0; w < 2; w++) free(Hr[w]), free(inv[w]), free(Yr[w]), free(Or[w]);
    cudaFree(dh), cudaFree(dout), cudaFree(dy), cudaFree(dsel), cudaFree(drw), cudaFree(dxn), cudaFree(dsh);
    cudaFree(c.scratch), cudaStreamDestroy(c.stream);
    free(sel), free(rw), free(xn), free(sh), free(g1), free(g3), free(g2);
    mi_mats_free(&m1), mi_mats_free(&m3), mi_mats_free(&m2);
}

TEST(gpu_moe_dec_inv_fp4) {
    mi_shape(DI_WFMT_FP4, 256, 6, 4096, 2048, 32, 128, 10.0f, 65, 7500);  /* V4-Flash */
    mi_shape(DI_WFMT_FP4, 256, 6, 4096, 2048, 32, 128, 10.0f, 300, 7501);
    mi_shape(DI_WFMT_FP4, 384, 6, 5120, 2304, 32, 32, 10.0f, 65, 7510);   /* V4.1-Flash */
    mi_shape(DI_WFMT_FP4, 384, 6, 5120, 2304, 32, 32, 10.0f, 300, 7511);
    mi_shape(DI_WFMT_FP4, 24, 5, 640, 384, 32, 64, 3.0f, 65, 7520);      /* odd top-k, short last split */
}

TEST(gpu_moe_dec_inv_fp8) {
    mi_shape(DI_WFMT_FP8, 64, 6, 1024, 512, 128, 128, 7.0f, 65, 7600);
    mi_shape(DI_WFMT_FP8, 64, 6, 1024, 512, 128, 128, 7.0f, 300, 7601);
    mi_shape(DI_WFMT_FP8, 32, 4, 2048, 1024, 64, 32, 5.0f, 65, 7610);
    mi_shape(DI_WFMT_FP8, 16, 3, 640, 384, 128, 128, 0.0f, 65, 7620);
}
