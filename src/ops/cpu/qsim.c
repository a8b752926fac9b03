/* qsim.c — the reference's quantisation simulations, in place on bf16
 * (§3.5): FP8 and FP4 round trips with power-of-two block scales, FP4 with
 * E4M3 block scales (V4.1 compressed KV), and the
 * 128-point Walsh-Hadamard rotation used before the V4 indexer's FP4. */
#include <math.h>

#include "io/numfmt.h"
#include "ops/cpu/elem.h"
#include "ops/cpu/vec.h"
#include "util/cpu.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

typedef struct qsim_ctx {
    uint16_t *v;
    size_t ld;
    int n, blk;
} qsim_ctx;

static void fp8_rows(void *p, int m0, int m1) {
    qsim_ctx *c = p;
    const float inv448 = (float)(1.0 / 448.0);
    int vec = di_cpu_isa() == DI_ISA_AVX512 && c->blk % 16 == 0;
    for (int m = m0; m < m1; m++) {
        uint16_t *row = c->v + (size_t)m * c->ld;
        if (vec) {
            di_qat_fp8_row_avx512(row, c->n, c->blk);
            continue;
        }
        for (int b0 = 0; b0 < c->n; b0 += c->blk) {
            float amax = 0.0f;
            for (int i = 0; i < c->blk; i++) amax = fmaxf(amax, fabsf(di_bf16_to_f32(row[b0 + i])));
            amax = fmaxf(amax, 1e-4f);
            float s = di_pow2_ceil(amax * inv448);
            for (int i = 0; i < c->blk; i++) {
                float q = di_bf16_to_f32(row[b0 + i]) / s;
                q = fminf(fmaxf(q, -448.0f), 448.0f);
                row[b0 + i] = di_f32_to_bf16(di_round_e4m3(q) * s);
            }
        }
    }
}

void di_cpu_qat_fp8(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk) {
    qsim_ctx c = {v, ld, n, blk};
    di_par_rows(x, M, 16.0 * n, fp8_rows, &c);
}

static void fp4_rows(void *p, int m0, int m1) {
    qsim_ctx *c = p;
    const float inv6 = (float)(1.0 / 6.0);
    const float amin = 6.0f * 0x1p-126f;
    int vec = di_cpu_isa() == DI_ISA_AVX512 && c->blk % 16 == 0;
    for (int m = m0; m < m1; m++) {
        uint16_t *row = c->v + (size_t)m * c->ld;
        if (vec) {
            di_qat_fp4_row_avx512(row, c->n, c->blk);
            continue;
        }
        for (int b0 = 0; b0 < c->n; b0 += c->blk) {
            float amax = 0.0f;
            for (int i = 0; i < c->blk; i++) amax = fmaxf(amax, fabsf(di_bf16_to_f32(row[b0 + i])));
            amax = fmaxf(amax, amin);
            float s = di_pow2_ceil(amax * inv6);
            for (int i = 0; i < c->blk; i++) {
                float q = di_bf16_to_f32(row[b0 + i]) / s;
                q = fminf(fmaxf(q, -6.0f), 6.0f);
                row[b0 + i] = di_f32_to_bf16(di_e2m1_to_f32(di_f32_to_e2m1(q)) * s);
            }
        }
    }
}

void di_cpu_qat_fp4(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk) {
    qsim_ctx c = {v, ld, n, blk};
    di_par_rows(x, M, 16.0 * n, fp4_rows, &c);
}

static void fp4_e4m3_rows(void *p, int m0, int m1) {
    qsim_ctx *c = p;
    const float amin = 6.0f * 0x1p-9f;
    int vec = di_cpu_isa() == DI_ISA_AVX512 && c->blk == 16 && c->n % 16 == 0;
    for (int m = m0; m < m1; m++) {
        uint16_t *row = c->v + (size_t)m * c->ld;
        if (vec) {
            di_qat_fp4_e4m3_row_avx512(row, c->n);
            continue;
        }
        for (int b0 = 0; b0 < c->n; b0 += c->blk) {
            float amax = 0.0f;
            for (int i = 0; i < c->blk; i++) amax = fmaxf(amax, fabsf(di_bf16_to_f32(row[b0 + i])));
            amax = fmaxf(amax, amin);
            float s = di_round_e4m3(amax / 6.0f);
            for (int i = 0; i < c->blk; i++) {
                float q = di_bf16_to_f32(row[b0 + i]) / s;
                q = fminf(fmaxf(q, -6.0f), 6.0f);
                row[b0 + i] = di_f32_to_bf16(di_e2m1_to_f32(di_f32_to_e2m1(q)) * s);
            }
        }
    }
}

void di_cpu_qat_fp4_e4m3(di_exec *x, int M, uint16_t *v, size_t ld, int n, int blk) {
    qsim_ctx c = {v, ld, n, blk};
    di_par_rows(x, M, 20.0 * n, fp4_e4m3_rows, &c);
}

typedef struct had_ctx {
    uint16_t *v;
    size_t ld;
    int nvec;
} had_ctx;

static void had_rows(void *p, int m0, int m1) {
    had_ctx *c = p;
    const float scale = (float)(1.0 / sqrt(128.0));
    float t[128];
    int vec = di_cpu_isa() == DI_ISA_AVX512;
    for (int m = m0; m < m1; m++)
        for (int vi = 0; vi < c->nvec; vi++) {
            uint16_t *row = c->v + (size_t)m * c->ld + (size_t)vi * 128;
            if (vec) {
                di_hadamard128_avx512(row, scale);
                continue;
            }
            for (int i = 0; i < 128; i++) t[i] = di_bf16_to_f32(row[i]);
            for (int h = 1; h < 128; h *= 2)
                for (int i = 0; i < 128; i += 2 * h)
                    for (int j = i; j < i + h; j++) {
                        float a = t[j], b = t[j + h];
                        t[j] = a + b;
                        t[j + h] = a - b;
                    }
            for (int i = 0; i < 128; i++) row[i] = di_f32_to_bf16(t[i] * scale);
        }
}

void di_cpu_hadamard128(di_exec *x, int M, uint16_t *v, size_t ld, int nvec) {
    had_ctx c = {v, ld, nvec};
    di_par_rows(x, M, 1000.0 * nvec, had_rows, &c);
}
