/* gtest_q_proj.c — the query projection at decode as the product runs it (ops.h di_q_proj: dic_rmsnorm,
 * dic_gemm, dic_q_post; docs/kernels/attention-decode.md §5) in both batch modes:
 *  - shapes: V4-Flash (q_lora 1024, 64 heads x 512, rd 64), the tiny golden models' (V4: K 128,
 *    4 x 128; V4.1: K 64, act / wblock 32) and odd ones (5 heads x 192, act 64; 7 x 64; 2 x 512 at
 *    K 1024), M = 1, 2, 3, 4, with the head norm (V4) and without (V4.1);
 *  - against the CPU op (di_q_proj, di_exec without a device): qrn bitwise (k_rmsnorm is CPU-exact),
 *    q per element within 2^-5 of the head's max |q| and norm-wise within 5e-3 (the GEMM tolerance
 *    through a bf16 output, then k_q_post's order of the head sum);
 *  - two runs bitwise equal; padding columns untouched; batch-invariant mode: row 0 alone bitwise
 *    row 0 of the batch.
 * The fused one-launch kernel that lost is lab/q_proj/ (its bench compares it with this sequence). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

typedef struct qp_out {
    uint16_t *q, *qrn;
} qp_out;

static void qp_free(qp_out *o) { free(o->q), free(o->qrn); }

/* the sequence on fresh poisoned outputs */
static int qp_run(dic_ctx *ctx, int M, const void *dqr, size_t ldqr, const float *dg, float eps, size_t ldn,
                  const dic_wmat *dw, int act, size_t ldq, int H, int hd, int norm, int rd, const float *dcs,
                  const float *dsn, qp_out *o) {
    uint16_t *dqrn = gt_dev_poison((size_t)M * ldn * 2), *dq = gt_dev_poison((size_t)M * ldq * 2);
    if (!dqrn || !dq) return 0;
    cudaError_t e = dic_rmsnorm(ctx, M, dqr, ldqr, dg, dw->k, eps, dqrn, ldn);
    if (e == cudaSuccess) e = dic_gemm(ctx, M, dqrn, ldn, dw, act, NULL, dq, ldq);
    /* the query post-processing as the op runs it (cu_ops_model.c q_post): one kernel where
     * dic_q_post_ok (both modes), else the head RMSNorm and the RoPE launches */
    if (e == cudaSuccess && dic_q_post_ok(ctx, M, dq, ldq, hd, rd)) {
        e = dic_q_post(ctx, M, dq, ldq, H, hd, norm, eps, rd, dcs, dsn);
    } else if (e == cudaSuccess) {
        if (norm) e = dic_head_rmsnorm_bf16(ctx, M, dq, ldq, H, hd, eps);
        if (e == cudaSuccess) e = dic_rope_tab(ctx, M, dq, ldq, H, hd, rd, dcs, dsn, 0);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx->stream);
    if (e != cudaSuccess) {
        fprintf(stderr, "  q_proj run: %s\n", cudaGetErrorString(e));
        cudaFree(dqrn), cudaFree(dq);
        return 0;
    }
    o->qrn = gt_d2h(dqrn, (size_t)M * ldn * 2);
    o->q = gt_d2h(dq, (size_t)M * ldq * 2);
    cudaFree(dqrn), cudaFree(dq);
    return o->qrn && o->q;
}

static void qp_case(int M, int K, int H, int hd, int rd, int wb, int act, int norm, int bi, uint64_t seed) {
    uint64_t s = seed;
    const int N = H * hd;
    const size_t ldqr = (size_t)K + 8, ldn = (size_t)K + 16, ldq = (size_t)N + 8;
    const float eps = 1e-6f;
    uint16_t *qr = malloc((size_t)M * ldqr * 2);
    for (int m = 0; m < M; m++)
        for (size_t k = 0; k < ldqr; k++)
            qr[(size_t)m * ldqr + k] = di_f32_to_bf16(gt_normal(&s) * ldexpf(1.0f, (m % 5) - 2));
    float *g = malloc((size_t)K * 4);
    for (int k = 0; k < K; k++) g[k] = 1.0f + 0.5f * gt_rand_unit(&s);
    const size_t wbytes = (size_t)N * K, sbytes = (size_t)((N + wb - 1) / wb) * (K / wb);
    uint8_t *w = malloc(wbytes), *sc = malloc(sbytes);
    for (size_t i = 0; i < wbytes; i++) {
        uint8_t b = (uint8_t)gt_rand_u64(&s);
        if ((b & 0x7F) == 0x7F) b ^= 1;
        w[i] = b;
    }
    for (size_t i = 0; i < sbytes; i++) sc[i] = (uint8_t)(112 + gt_rand_u64(&s) % 8);
    const int half = rd / 2;
    float *cs = malloc((size_t)M * (half ? half : 1) * 4), *sn = malloc((size_t)M * (half ? half : 1) * 4);
    for (int i = 0; i < M * half; i++) {
        float a = 3.14159265f * gt_rand_unit(&s);
        cs[i] = cosf(a), sn[i] = sinf(a);
    }
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, dic_gemm_scratch(M, N, K)));
    void *dqr = gt_to_dev(qr, (size_t)M * ldqr * 2), *dW = gt_to_dev(w, wbytes), *dS = gt_to_dev(sc, sbytes);
    float *dg = gt_to_dev(g, (size_t)K * 4), *dcs = gt_to_dev(cs, (size_t)M * (half ? half : 1) * 4);
    float *dsn = gt_to_dev(sn, (size_t)M * (half ? half : 1) * 4);
    CHECK(dqr && dW && dS && dg && dcs && dsn);
    dic_wmat dw = {2, N, K, wb, dW, dS};
    ctx.batch_invariant = bi;

    qp_out f, f2, f1;
    CHECK(qp_run(&ctx, M, dqr, ldqr, dg, eps, ldn, &dw, act, ldq, H, hd, norm, rd, dcs, dsn, &f));
    CHECK(qp_run(&ctx, M, dqr, ldqr, dg, eps, ldn, &dw, act, ldq, H, hd, norm, rd, dcs, dsn, &f2));
    CHECK(qp_run(&ctx, 1, dqr, ldqr, dg, eps, ldn, &dw, act, ldq, H, hd, norm, rd, dcs, dsn, &f1));
    if (di_test_failed()) return;
    const size_t tq = (size_t)M * ldq, tn = (size_t)M * ldn;
    CHECK_MSG(gt_count_diff_u16(f.q, f2.q, tq) == 0 && gt_count_diff_u16(f.qrn, f2.qrn, tn) == 0,
              "q_proj M=%d K=%d H=%d hd=%d: two runs differ", M, K, H, hd);
    if (bi) /* batch-invariant mode: a row's bits do not depend on M */
        CHECK_MSG(gt_count_diff_u16(f.q, f1.q, (size_t)N) == 0 && gt_count_diff_u16(f.qrn, f1.qrn, (size_t)K) == 0,
                  "q_proj M=%d K=%d H=%d hd=%d: row 0 alone differs from row 0 of the batch", M, K, H, hd);
    for (int m = 0; m < M && !di_test_failed(); m++) {
        for (size_t n = (size_t)N; n < ldq; n++)
            CHECK_MSG(f.q[(size_t)m * ldq + n] == 0xFFFF, "q_proj: q padding column %zu of row %d written", n, m);
        for (size_t k = (size_t)K; k < ldn; k++)
            CHECK_MSG(f.qrn[(size_t)m * ldn + k] == 0xFFFF, "q_proj: qrn padding column %zu of row %d written", k, m);
    }

    /* the CPU op */
    di_wmat pw;
    di_exec x;
    CHECK(di_wmat_pack(&pw, DI_WFMT_FP8, w, sc, N, K, wb, NULL) == DEEPINFER_OK);
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    uint16_t *cq = malloc(tq * 2), *cn = malloc(tn * 2);
    memset(cq, 0xFF, tq * 2), memset(cn, 0xFF, tn * 2);
    di_q_proj(&x, M, qr, ldqr, g, eps, cn, ldn, &pw, act, cq, ldq, H, hd, norm, rd, cs, sn);
    size_t dcn = 0;
    for (int m = 0; m < M; m++) dcn += gt_count_diff_u16(f.qrn + (size_t)m * ldn, cn + (size_t)m * ldn, (size_t)K);
    CHECK_MSG(dcn == 0, "q_proj M=%d K=%d: qrn vs the CPU: %zu values differ", M, K, dcn);
    double num = 0, den = 0, worst = 0;
    for (int m = 0; m < M && !di_test_failed(); m++)
        for (int h = 0; h < H && !di_test_failed(); h++) {
            const size_t o = (size_t)m * ldq + (size_t)h * hd;
            double mx = 0;
            for (int i = 0; i < hd; i++) mx = fmax(mx, fabs(di_bf16_to_f32(cq[o + i])));
            for (int i = 0; i < hd; i++) {
                double a = di_bf16_to_f32(f.q[o + i]), b = di_bf16_to_f32(cq[o + i]), e = fabs(a - b);
                num += e * e, den += b * b;
                if (mx > 0 && e / mx > worst) worst = e / mx;
                CHECK_MSG(e <= 0x1p-5 * mx, "q_proj M=%d K=%d H=%d hd=%d norm=%d: q[%d][%d] = %.6g, CPU %.6g (head max %.3g)",
                          M, K, H, hd, norm, m, h * hd + i, a, b, mx);
                if (di_test_failed()) break;
            }
        }
    const double rcpu = sqrt(num / (den > 0 ? den : 1));
    CHECK_MSG(rcpu <= 5e-3, "q_proj M=%d K=%d H=%d hd=%d: q vs the CPU: norm error %.3g", M, K, H, hd, rcpu);
    if (!di_test_failed())
        fprintf(stderr, "  q_proj M=%d K=%d H=%d hd=%d rd=%d wb=%d act=%d norm=%d mode %d: vs CPU norm %.1e, "
                        "worst/headmax %.1e\n", M, K, H, hd, rd, wb, act, norm, bi, rcpu, worst);
    di_wmat_free(&pw);
    di_exec_free(&x);
    free(cq), free(cn);
    qp_free(&f), qp_free(&f2), qp_free(&f1);
    cudaFree(dqr), cudaFree(dW), cudaFree(dS), cudaFree(dg), cudaFree(dcs), cudaFree(dsn), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(qr), free(g), free(w), free(sc), free(cs), free(sn);
}

static const int qp_ms[] = {1, 2, 3, 4};

TEST(gpu_q_proj_flash) { /* V4-Flash: q_lora 1024, 64 heads x 512, rd 64; V4 (norm) and V4.1; fast mode */
    for (int norm = 1; norm >= 0; norm--)
        for (unsigned j = 0; j < sizeof qp_ms / sizeof *qp_ms; j++) {
            qp_case(qp_ms[j], 1024, 64, 512, 64, 128, 128, norm, 0, 7000 + 10 * norm + j);
            if (di_test_failed()) return;
        }
}

static const struct { int K, H, hd, rd, wb, act, norm; } qp_small[] = {
    {128, 4, 128, 64, 128, 128, 1}, /* v4-tiny-a */
    {64, 4, 128, 64, 32, 32, 0},    /* v41-tiny-a */
    {64, 4, 128, 64, 32, 32, 1},
    {384, 5, 192, 32, 128, 64, 1},  /* act 64 */
    {256, 7, 64, 16, 128, 128, 1},
    {1024, 2, 512, 64, 128, 128, 1},
};

TEST(gpu_q_proj_small) { /* fast mode */
    for (unsigned i = 0; i < sizeof qp_small / sizeof *qp_small; i++)
        for (unsigned j = 0; j < sizeof qp_ms / sizeof *qp_ms; j++) {
            qp_case(qp_ms[j], qp_small[i].K, qp_small[i].H, qp_small[i].hd, qp_small[i].rd, qp_small[i].wb,
                    qp_small[i].act, qp_small[i].norm, 0, 7100 + 10 * i + j);
            if (di_test_failed()) return;
        }
}

TEST(gpu_q_proj_batch_invariant) { /* batch-invariant mode: the same shapes, V4-Flash at M = 1 and 4 */
    for (unsigned i = 0; i < sizeof qp_small / sizeof *qp_small; i++)
        for (unsigned j = 0; j < sizeof qp_ms / sizeof *qp_ms; j++) {
            qp_case(qp_ms[j], qp_small[i].K, qp_small[i].H, qp_small[i].hd, qp_small[i].rd, qp_small[i].wb,
                    qp_small[i].act, qp_small[i].norm, 1, 7300 + 10 * i + j);
            if (di_test_failed()) return;
        }
    qp_case(1, 1024, 64, 512, 64, 128, 128, 1, 1, 7400);
    qp_case(4, 1024, 64, 512, 64, 128, 128, 0, 1, 7401);
}
