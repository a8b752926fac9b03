/* gtest_common.c — the device number formats and exp equal the CPU's bit for bit. */
#include "ops/cuda/gpu_util.h"
#include "ops/cpu/mathf.h"

cudaError_t gt_run_expf(const float *x, float *y, int n);
cudaError_t gt_run_formats(const float *x, uint8_t *e4m3, uint8_t *e2m1, uint16_t *bf16, float *p2, int n);
cudaError_t gt_run_decode(float *e4m3, float *e2m1, float *e8m0);

TEST(gpu_expf_matches_cpu) {
    enum { N = 1 << 22 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < N; i++) {
        /* every exponent range the ops meet: [-160, 110] plus raw bit patterns */
        x[i] = i % 4 ? 135.0f * gt_rand_unit(&s) - 25.0f : di_bits_f32((uint32_t)gt_rand_u64(&s));
    }
    float *dx = gt_to_dev(x, N * 4), *dy = gt_dev_poison(N * 4);
    CHECK(dx && dy);
    CUDA_SYNC_CHECK(gt_run_expf(dx, dy, N));
    CUDA_CHECK(cudaMemcpy(y, dy, N * 4, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (int i = 0; i < N; i++) {
        float r = di_expf(x[i]);
        if (di_f32_bits(r) != di_f32_bits(y[i]) && !(r != r && y[i] != y[i])) bad++;
    }
    CHECK_MSG(bad == 0, "%zu of %d exp values differ from the CPU", bad, N);
    cudaFree(dx);
    cudaFree(dy);
    free(x);
    free(y);
}

TEST(gpu_number_formats_match_cpu) {
    enum { N = 1 << 20 };
    float *x = malloc(N * 4);
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0) x[i] = di_bits_f32((uint32_t)gt_rand_u64(&s));
        else x[i] = ldexpf(gt_rand_unit(&s), (int)(gt_rand_u64(&s) % 40) - 20);
    }
    /* every e4m3 / e2m1 midpoint exactly */
    for (int b = 0; b < 127; b++) x[b] = (di_e4m3_to_f32((uint8_t)b) + di_e4m3_to_f32((uint8_t)(b + 1))) * 0.5f;
    for (int b = 0; b < 7; b++) x[200 + b] = (di_e2m1_to_f32((uint8_t)b) + di_e2m1_to_f32((uint8_t)(b + 1))) * 0.5f;
    float *dx = gt_to_dev(x, N * 4), *dp2 = gt_dev_poison(N * 4);
    uint8_t *de4 = gt_dev_poison(N), *de2 = gt_dev_poison(N);
    uint16_t *db = gt_dev_poison(N * 2);
    CHECK(dx && dp2 && de4 && de2 && db);
    CUDA_SYNC_CHECK(gt_run_formats(dx, de4, de2, db, dp2, N));
    uint8_t *e4 = malloc(N), *e2 = malloc(N);
    uint16_t *bf = malloc(N * 2);
    float *p2 = malloc(N * 4);
    CUDA_CHECK(cudaMemcpy(e4, de4, N, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(e2, de2, N, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(bf, db, N * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(p2, dp2, N * 4, cudaMemcpyDeviceToHost));
    size_t b4 = 0, b2 = 0, bb = 0, bp = 0;
    for (int i = 0; i < N; i++) {
        b4 += e4[i] != di_f32_to_e4m3(x[i]);
        b2 += e2[i] != di_f32_to_e2m1(x[i]);
        bb += bf[i] != di_f32_to_bf16(x[i]);
        if (x[i] > 0 && x[i] < 1e38f) bp += di_f32_bits(p2[i]) != di_f32_bits(di_pow2_ceil(x[i]));
    }
    CHECK_MSG(!b4 && !b2 && !bb && !bp, "differences: e4m3 %zu, e2m1 %zu, bf16 %zu, pow2_ceil %zu", b4, b2, bb, bp);
    float *d4 = gt_dev_poison(256 * 4), *d2 = gt_dev_poison(16 * 4), *d8 = gt_dev_poison(256 * 4);
    CUDA_SYNC_CHECK(gt_run_decode(d4, d2, d8));
    float h4[256], h2[16], h8[256];
    CUDA_CHECK(cudaMemcpy(h4, d4, sizeof h4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(h2, d2, sizeof h2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(h8, d8, sizeof h8, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 256; i++) {
        float r = di_e4m3_to_f32((uint8_t)i);
        CHECK_MSG(di_f32_bits(r) == di_f32_bits(h4[i]) || (r != r && h4[i] != h4[i]), "e4m3 %d", i);
        float r8 = di_e8m0_to_f32((uint8_t)i);
        CHECK_MSG(di_f32_bits(r8) == di_f32_bits(h8[i]) || (r8 != r8 && h8[i] != h8[i]), "e8m0 %d", i);
    }
    for (int i = 0; i < 16; i++) CHECK_MSG(di_f32_bits(h2[i]) == di_f32_bits(di_e2m1_to_f32((uint8_t)i)), "e2m1 %d", i);
    free(x); free(e4); free(e2); free(bf); free(p2);
}
