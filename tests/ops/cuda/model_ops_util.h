/* model_ops_util.h — helpers shared by the GPU tests of the device-shaped forward's ops
 * (gtest_model_rows.c, gtest_index_select.c, gtest_moe_ops.c, gtest_gemm_grouped_seg.c,
 * gtest_engram_gate.c): a bounded random integer, the first mismatches of two word arrays with
 * both values, fp32 ulps. Included by path; every function static inline. */
#ifndef DI_TESTS_OPS_CUDA_MODEL_OPS_UTIL_H
#define DI_TESTS_OPS_CUDA_MODEL_OPS_UTIL_H

#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"

static inline int urand(uint64_t *s, int n) { return (int)(gt_rand_u64(s) % (uint64_t)n); }

/* Mismatches of n words of `size` bytes (2, 4 or 8); prints the first 4 as
 * [row][col] with both values. */
static inline size_t mdiff(const char *what, const void *gpu, const void *cpu, size_t n, int size, size_t row) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = 0, b = 0;
        memcpy(&a, (const char *)gpu + i * size, (size_t)size);
        memcpy(&b, (const char *)cpu + i * size, (size_t)size);
        if (a == b) continue;
        if (bad < 4) {
            size_t r = row ? i / row : 0, c = row ? i % row : i;
            if (size == 2)
                fprintf(stderr, "  %s [%zu][%zu]: gpu %04llx (%g) cpu %04llx (%g)\n", what, r, c, (unsigned long long)a,
                        di_bf16_to_f32((uint16_t)a), (unsigned long long)b, di_bf16_to_f32((uint16_t)b));
            else if (size == 4) {
                float fa, fb;
                memcpy(&fa, &a, 4), memcpy(&fb, &b, 4);
                fprintf(stderr, "  %s [%zu][%zu]: gpu %08llx (%g / %d) cpu %08llx (%g / %d)\n", what, r, c,
                        (unsigned long long)a, fa, (int)a, (unsigned long long)b, fb, (int)b);
            } else
                fprintf(stderr, "  %s [%zu][%zu]: gpu %016llx cpu %016llx\n", what, r, c, (unsigned long long)a,
                        (unsigned long long)b);
        }
        bad++;
    }
    return bad;
}
/* fp32 ulps between a and b (same sign assumed; large if not). */
static inline long long ulps32(float a, float b) {
    int32_t x, y;
    memcpy(&x, &a, 4), memcpy(&y, &b, 4);
    if ((x < 0) != (y < 0)) return (a == b) ? 0 : 1LL << 40;
    long long d = (long long)x - y;
    return d < 0 ? -d : d;
}

#endif
