/* gtest_q_proj.c — the fused query projection (dic_q_proj.cu k_q_proj; ops.h di_q_proj) in fast mode:
 *  - the fused launch applies (dic_q_proj_ok) on the V4-Flash shape (q_lora 1024, 64 heads x 512,
 *    rd 64), the tiny golden models' shapes (V4: K 128, 4 x 128; V4.1: K 64, act / wblock 32) and odd
 *    ones (5 heads x 192: clusters of 3; 7 x 64: no cluster; act 64), M = 1, 2, 3, 4, with the head
 *    norm (V4) and without (V4.1);
 *  - against the fast-mode three-launch sequence (dic_rmsnorm, dic_gemm, dic_q_post): qrn bitwise,
 *    q bitwise where the sequence's GEMM has one K split (K <= 512 or a grid over 2 CTAs per SM),
 *    else (5th group: 2 x 512 heads at K 1024) norm-wise within 2e-3;
 *  - against the CPU op (di_q_proj, di_exec without a device): qrn bitwise (k_rmsnorm is CPU-exact),
 *    q per element within 2^-5 of the head's max |q| and norm-wise within 5e-3 (the GEMM tolerance
 *    through a bf16 output, then k_q_post's order of the head sum);
 *  - two runs bitwise equal; row 0 alone bitwise row 0 of the batch; padding columns untouched;
 *  - batch_invariant = 1: dic_q_proj_ok is 0 and dic_q_proj launches nothing (cudaErrorNotSupported). */
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

/* one fused launch (or the sequence: seq = 1) on fresh poisoned outputs */
static int qp_run(dic_ctx *ctx, int seq, int M, const void *dqr, size_t ldqr, const float *dg, float eps, size_t ldn,
                  const dic_wmat *dw, int act, size_t ldq, int H, int hd, int norm, int rd, const float *dcs,
                  const float *dsn, qp_out *o) {
    uint16_t *dqrn = gt_dev_poison((size_t)M * ldn * 2), *dq = gt_dev_poison((size_t)M * ldq * 2);
    if (!dqrn || !dq) return 0;
    cudaError_t e;
    if (seq) {
        e = dic_rmsnorm(ctx, M, dqr, ldqr, dg, dw->k, eps, dqrn, ldn);
        if (e == cudaSuccess) e = dic_gemm(ctx, M, dqrn, ldn, dw, act, NULL, dq, ldq);
        if (e == cudaSuccess) e = dic_q_post(ctx, M, dq, ldq, H, hd, norm, eps, rd, dcs, dsn);
    } else {
        e = dic_q_proj(ctx, M, dqr, ldqr, dg, eps, dqrn, ldn, dw, act, dq, ldq, H, hd, norm, rd, dcs, dsn);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx->stream);
    if (e != cudaSuccess) {
        fprintf(stderr, "  q_proj run (seq %d): %s\n", seq, cudaGetErrorString(e));
        cudaFree(dqrn), cudaFree(dq);
        return 0;
    }
    o->qrn = gt_d2h(dqrn, (size_t)M * ldn * 2);
    o->q = gt_d2h(dq, (size_t)M * ldq * 2);
    cudaFree(dqrn), cudaFree(dq);
    return o->qrn && o->q;
}

static void qp_case(int M, int K, int H, int hd, int rd, int wb, int act, int norm, uint64_t seed) {
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
    const int gx = N / 64, exact = K <= 512 || (4 * ctx.num_sms) / gx <= 1;

    CHECK_MSG(dic_q_proj_ok(&ctx, M, dqr, ldqr, (const uint16_t *)dqr + 0, ldqr, &dw, act, NULL, ldq, H, hd, rd) == 0,
              "q_proj: qrn == qr must not take the fused kernel");
    /* the real output buffers are allocated per run; ok() with stand-in aligned pointers apart from qr */
    {
        uint16_t *tn = gt_dev_poison((size_t)M * ldn * 2), *tq = gt_dev_poison((size_t)M * ldq * 2);
        CHECK(tn && tq);
        CHECK_MSG(dic_q_proj_ok(&ctx, M, dqr, ldqr, tn, ldn, &dw, act, tq, ldq, H, hd, rd),
                  "q_proj M=%d K=%d H=%d hd=%d: the fused kernel does not apply", M, K, H, hd);
        dic_ctx ci = ctx;
        ci.batch_invariant = 1;
        CHECK_MSG(!dic_q_proj_ok(&ci, M, dqr, ldqr, tn, ldn, &dw, act, tq, ldq, H, hd, rd) &&
                      dic_q_proj(&ci, M, dqr, ldqr, dg, eps, tn, ldn, &dw, act, tq, ldq, H, hd, norm, rd, dcs, dsn) ==
                          cudaErrorNotSupported,
                  "q_proj: mode 1 must not take the fused kernel");
        cudaFree(tn), cudaFree(tq);
    }
    if (di_test_failed()) return;

    qp_out f, f2, sq, f1;
    CHECK(qp_run(&ctx, 0, M, dqr, ldqr, dg, eps, ldn, &dw, act, ldq, H, hd, norm, rd, dcs, dsn, &f));
    CHECK(dic_q_proj_enabled());
    CHECK(qp_run(&ctx, 0, M, dqr, ldqr, dg, eps, ldn, &dw, act, ldq, H, hd, norm, rd, dcs, dsn, &f2));
    CHECK(qp_run(&ctx, 1, M, dqr, ldqr, dg, eps, ldn, &dw, act, ldq, H, hd, norm, rd, dcs, dsn, &sq));
    CHECK(qp_run(&ctx, 0, 1, dqr, ldqr, dg, eps, ldn, &dw, act, ldq, H, hd, norm, rd, dcs, dsn, &f1));
    if (di_test_failed()) return;
    const size_t tq = (size_t)M * ldq, tn = (size_t)M * ldn;
    CHECK_MSG(gt_count_diff_u16(f.q, f2.q, tq) == 0 && gt_count_diff_u16(f.qrn, f2.qrn, tn) == 0,
              "q_proj M=%d K=%d H=%d hd=%d: two runs differ", M, K, H, hd);
    CHECK_MSG(gt_count_diff_u16(f.q, f1.q, (size_t)N) == 0 && gt_count_diff_u16(f.qrn, f1.qrn, (size_t)K) == 0,
              "q_proj M=%d K=%d H=%d hd=%d: row 0 alone differs from row 0 of the batch", M, K, H, hd);
    for (int m = 0; m < M && !di_test_failed(); m++) {
        for (size_t n = (size_t)N; n < ldq; n++)
            CHECK_MSG(f.q[(size_t)m * ldq + n] == 0xFFFF, "q_proj: q padding column %zu of row %d written", n, m);
        for (size_t k = (size_t)K; k < ldn; k++)
            CHECK_MSG(f.qrn[(size_t)m * ldn + k] == 0xFFFF, "q_proj: qrn padding column %zu of row %d written", k, m);
    }
    size_t dn = gt_count_diff_u16(f.qrn, sq.qrn, tn), dq = gt_count_diff_u16(f.q, sq.q, tq);
    CHECK_MSG(dn == 0, "q_proj M=%d K=%d: qrn vs the sequence: %zu values differ", M, K, dn);
    double sn2 = 0, sd2 = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double a = di_bf16_to_f32(f.q[(size_t)m * ldq + n]), b = di_bf16_to_f32(sq.q[(size_t)m * ldq + n]);
            sn2 += (a - b) * (a - b), sd2 += b * b;
        }
    const double rseq = sqrt(sn2 / (sd2 > 0 ? sd2 : 1));
    if (exact)
        CHECK_MSG(dq == 0, "q_proj M=%d K=%d H=%d hd=%d norm=%d: q vs the sequence: %zu values differ (norm %.2e)", M, K,
                  H, hd, norm, dq, rseq);
    else
        CHECK_MSG(rseq <= 2e-3, "q_proj M=%d K=%d H=%d hd=%d: q vs the sequence: norm error %.3g", M, K, H, hd, rseq);

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
        fprintf(stderr, "  q_proj M=%d K=%d H=%d hd=%d rd=%d wb=%d act=%d norm=%d: vs sequence %s (%zu differ, %.1e); vs CPU "
                        "norm %.1e, worst/headmax %.1e\n", M, K, H, hd, rd, wb, act, norm, exact ? "bitwise" : "tolerance",
                dq, rseq, rcpu, worst);
    di_wmat_free(&pw);
    di_exec_free(&x);
    free(cq), free(cn);
    qp_free(&f), qp_free(&f2), qp_free(&sq), qp_free(&f1);
    cudaFree(dqr), cudaFree(dW), cudaFree(dS), cudaFree(dg), cudaFree(dcs), cudaFree(dsn), cudaFree(ctx.scratch);
    cudaStreamDestroy(ctx.stream);
    free(qr), free(g), free(w), free(sc), free(cs), free(sn);
}

static const int qp_ms[] = {1, 2, 3, 4}; /* the fused range (Q_FUSE_MAXM = 4) */

TEST(gpu_q_proj_flash) { /* V4-Flash: q_lora 1024, 64 heads x 512, rd 64; V4 (norm) and V4.1 */
    dic_q_proj_enable(1); /* opt-in path ($DEEPINFER_Q_PROJ_FUSE=1) */
    for (int norm = 1; norm >= 0; norm--)
        for (unsigned j = 0; j < sizeof qp_ms / sizeof *qp_ms; j++) {
            qp_case(qp_ms[j], 1024, 64, 512, 64, 128, 128, norm, 7000 + 10 * norm + j);
            if (di_test_failed()) return;
        }
}

TEST(gpu_q_proj_small) {
    dic_q_proj_enable(1);
    static const struct { int K, H, hd, rd, wb, act, norm; } cs[] = {
        {128, 4, 128, 64, 128, 128, 1}, /* v4-tiny-a */
        {64, 4, 128, 64, 32, 32, 0},    /* v41-tiny-a */
        {64, 4, 128, 64, 32, 32, 1},
        {384, 5, 192, 32, 128, 64, 1},  /* clusters of 3, act 64 */
        {256, 7, 64, 16, 128, 128, 1},  /* one CTA per head: no cluster */
        {1024, 2, 512, 64, 128, 128, 1}, /* the sequence splits K in 2: tolerance */
    };
    for (unsigned i = 0; i < sizeof cs / sizeof *cs; i++)
        for (unsigned j = 0; j < sizeof qp_ms / sizeof *qp_ms; j++) {
            qp_case(qp_ms[j], cs[i].K, cs[i].H, cs[i].hd, cs[i].rd, cs[i].wb, cs[i].act, cs[i].norm, 7100 + 10 * i + j);
            if (di_test_failed()) return;
        }
}

TEST(gpu_q_proj_switch) { /* dic_q_proj_enable(0): the fused kernel never applies */
    dic_ctx ctx;
    CHECK(gt_ctx(&ctx, 0));
    uint16_t *a = gt_dev_poison(4096), *b = gt_dev_poison(4096), *c = gt_dev_poison(65536);
    void *w = gt_dev_poison(64 * 256), *s = gt_dev_poison(64);
    CHECK(a && b && c && w && s);
    dic_wmat dw = {2, 128, 128, 128, w, s};
    dic_q_proj_enable(1);
    CHECK(dic_q_proj_ok(&ctx, 1, a, 128, b, 128, &dw, 128, c, 128, 2, 64, 16));
    dic_q_proj_enable(0);
    CHECK(!dic_q_proj_ok(&ctx, 1, a, 128, b, 128, &dw, 128, c, 128, 2, 64, 16));
    dic_q_proj_enable(1);
    CHECK(dic_q_proj_ok(&ctx, 1, a, 128, b, 128, &dw, 128, c, 128, 2, 64, 16));
    cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(w), cudaFree(s);
    cudaStreamDestroy(ctx.stream);
}
