/* gtest_wgmma3.c — the v3 wgmma FP8 prefill kernel (dic_gemm_wgmma3.cu; its other (cluster,
 * accumulator sets) variants are lab/gemm's, compared in gemm_prefill_bench):
 *  - bitwise equal to v2 (dic_gemm_wgmma.cu; same operations and order) at
 *    M = 1, 3, 8, 17, 64, 129, 300, 1024, N not a multiple of the tile, K = 256 .. 4096,
 *    act_block / weight block 128 / 128, 256 / 128, 128 / 256, f32 and bf16 out;
 *  - within the wgmma bounds (1e-3 norm-wise, 2^-9 of the abs-sum per element) of
 *    a double reference on the same quantised activations and the weights;
 *  - row-local: the first 3 rows launched alone give the same bits as inside M rows;
 *    rows past M untouched. */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_gemm_int.h"

static double e4m3(uint8_t b) {
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}

static void w3_case(int M, int N, int K, int B, int act, int bf16, uint64_t seed) {
    uint64_t s = seed;
    const size_t ldc = bf16 ? (size_t)N : (size_t)N + 1, osz = bf16 ? 2 : 4;
    uint16_t *A = malloc((size_t)M * K * 2);
    for (size_t i = 0; i < (size_t)M * K; i++)
        A[i] = di_f32_to_bf16(gt_rand_unit(&s) * ldexpf(1.0f, (int)(gt_rand_u64(&s) % 11) - 6));
    size_t wb = (size_t)N * K, sb = (size_t)((N + B - 1) / B) * (K / B);
    uint8_t *w = malloc(wb), *sc = malloc(sb);
    for (size_t i = 0; i < wb; i++) {
        uint8_t b = (uint8_t)gt_rand_u64(&s);
        w[i] = (b & 0x7F) == 0x7F ? (uint8_t)(b ^ 1) : b;
    }
    for (size_t i = 0; i < sb; i++) sc[i] = (uint8_t)(118 + gt_rand_u64(&s) % 12);
    void *dA = gt_to_dev(A, (size_t)M * K * 2), *dW = gt_to_dev(w, wb), *dS = gt_to_dev(sc, sb);
    uint8_t *dq = gt_dev_poison(dic_gemm_qbytes(M, K));
    float *dsa = gt_dev_poison((size_t)M * (K / act) * 4);
    const size_t cb = (size_t)M * ldc * osz;
    void *dref = gt_dev_poison(cb), *dv = gt_dev_poison(cb), *d3 = gt_dev_poison(cb);
    CHECK(dA && dW && dS && dq && dsa && dref && dv && d3);
    CHECK_MSG(dic_gemm_wgmma_usable(N, K) && dic_gemm_wgmma3_ok(N, K, B, act),
              "wgmma v3 M=%d N=%d K=%d B=%d act=%d: shape not usable (the test's cases must be)", M, N, K, B, act);
    const size_t ldq = dic_gemm_ldq(K);
    CUDA_SYNC_CHECK(dic_gemm_quant(0, M, dA, K, K, act, NULL, NULL, dq, dsa, NULL, 0));
    float *C32 = bf16 ? NULL : (float *)dref;
    uint16_t *C16 = bf16 ? (uint16_t *)dref : NULL;
    CUDA_SYNC_CHECK(dic_gemm_q_wgmma_launch(0, dW, dS, N, K, B, act, 128, M, dq, ldq, dsa, C32, C16, ldc, 2)); /* v2 */
    void *h2 = gt_d2h(dref, cb), *hv = malloc(cb), *h3 = malloc(cb);
    /* double reference on the quantised activations */
    uint8_t *q = gt_d2h(dq, (size_t)M * ldq);
    float *sa = gt_d2h(dsa, (size_t)M * (K / act) * 4);
    double *qa = malloc(sizeof(double) * (size_t)M * K), *wd = malloc(sizeof(double) * (size_t)N * K);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) qa[(size_t)m * K + k] = e4m3(q[(size_t)m * ldq + k]) * sa[(size_t)m * (K / act) + k / act];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            wd[(size_t)n * K + k] = e4m3(w[(size_t)n * K + k]) * ldexp(1.0, sc[(size_t)(n / B) * (K / B) + k / B] - 127);
    double en = 0, rn = 0, worst = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double ref = 0, abs = 0;
            const double *x = qa + (size_t)m * K, *y = wd + (size_t)n * K;
            for (int k = 0; k < K; k++) {
                double t = x[k] * y[k];
                ref += t, abs += fabs(t);
            }
            size_t i = (size_t)m * ldc + n;
            double g = bf16 ? di_bf16_to_f32(((uint16_t *)h2)[i]) : ((float *)h2)[i];
            double d = fabs(g - ref) - (bf16 ? fabs(ref) * 0x1p-8 : 0);
            en += (g - ref) * (g - ref), rn += ref * ref;
            if (abs > 0 && d / abs > worst) worst = d / abs;
        }
    double nrm = rn > 0 ? sqrt(en / rn) : sqrt(en);
    fprintf(stderr, "  v2 M=%d N=%d K=%d B=%d act=%d %s: norm err %.3g, worst elem %.3g of abs-sum\n", M, N, K, B, act,
            bf16 ? "bf16" : "f32", nrm, worst);
    CHECK_MSG(nrm <= (bf16 ? 4e-3 : 1e-3) && worst <= 0x1p-9, "M=%d N=%d K=%d: v2 vs reference", M, N, K);
    for (int cl = 1; cl <= 1; cl++) /* the product's v3: one CTA per cluster, one accumulator set */
        for (int sets = 1; sets <= 1; sets++) {
            CUDA_CHECK(cudaMemset(dv, 0xFF, cb));
            CUDA_CHECK(cudaMemset(d3, 0xFF, cb));
            float *V32 = bf16 ? NULL : (float *)dv, *T32 = bf16 ? NULL : (float *)d3;
            uint16_t *V16 = bf16 ? (uint16_t *)dv : NULL, *T16 = bf16 ? (uint16_t *)d3 : NULL;
            CUDA_SYNC_CHECK(dic_gemm_q_wgmma3_launch(0, dW, dS, N, K, B, act, M, dq, ldq, dsa, V32, V16, ldc));
            const int m3 = M < 3 ? M : 3;
            CUDA_SYNC_CHECK(dic_gemm_q_wgmma3_launch(0, dW, dS, N, K, B, act, m3, dq, ldq, dsa, T32, T16, ldc));
            CUDA_CHECK(cudaMemcpy(hv, dv, cb, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(h3, d3, cb, cudaMemcpyDeviceToHost));
            size_t dd = 0, d3n = 0, wr = 0;
            for (int m = 0; m < M; m++)
                for (size_t n = 0; n < ldc; n++) {
                    size_t i = (size_t)m * ldc + n;
                    int same = bf16 ? ((uint16_t *)hv)[i] == ((uint16_t *)h2)[i]
                                    : memcmp((float *)hv + i, (float *)h2 + i, 4) == 0;
                    dd += !same; /* the pad column (n = N) must keep the poison in both */
                    if (m < m3) {
                        int same3 = bf16 ? ((uint16_t *)h3)[i] == ((uint16_t *)hv)[i]
                                         : memcmp((float *)h3 + i, (float *)hv + i, 4) == 0;
                        d3n += !same3;
                    } else {
                        wr += bf16 ? ((uint16_t *)h3)[i] != 0xFFFF : ((uint32_t *)h3)[i] != 0xFFFFFFFFu;
                    }
                }
            fprintf(stderr, "  v3 cl=%d sets=%d: %zu outputs differ from v2; first %d rows alone: %zu differ; %zu written past M\n",
                    cl, sets, dd, m3, d3n, wr);
            CHECK_MSG(dd == 0 && d3n == 0 && wr == 0, "v3 cl=%d sets=%d M=%d N=%d K=%d B=%d act=%d", cl, sets, M, N, K, B, act);
        }
    cudaFree(dA), cudaFree(dW), cudaFree(dS), cudaFree(dq), cudaFree(dsa), cudaFree(dref), cudaFree(dv), cudaFree(d3);
    free(A), free(w), free(sc), free(h2), free(hv), free(h3), free(q), free(sa), free(qa), free(wd);
}

TEST(gpu_gemm_fp8_wgmma3) {
    if (!dic_gemm_wgmma_usable(128, 256)) SKIP("wgmma not usable on this device (needs compute capability 9.x and cuTensorMapEncodeTiled)");
    static const struct { int M, N, K, B, act, bf16; } cs[] = {
        {1, 128, 256, 128, 128, 0},    {3, 200, 512, 128, 128, 0},   {8, 136, 1024, 128, 128, 1},
        {17, 520, 768, 128, 128, 0},   {64, 256, 2048, 128, 128, 0}, {129, 77, 256, 128, 128, 0},
        {300, 520, 4096, 128, 128, 1}, {1024, 384, 1024, 128, 128, 0}, {257, 300, 1536, 128, 256, 0},
        {200, 520, 2048, 256, 128, 1},
    };
    for (unsigned i = 0; i < sizeof cs / sizeof *cs; i++) {
        w3_case(cs[i].M, cs[i].N, cs[i].K, cs[i].B, cs[i].act, cs[i].bf16, 9100 + i);
        if (di_test_failed()) return;
    }
}
