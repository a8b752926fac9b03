/* vecops.c — the element-wise helpers of ops.h (per-row loops of the model). */
#include "io/numfmt.h"
#include "ops/cpu/elem.h"
#include "ops/ops.h"
#include "util/cpu.h"

void di_add_bf16_f32(float *y, const uint16_t *v, size_t n) {
    if (di_cpu_isa() == DI_ISA_AVX512) {
        di_add_bf16_f32_avx512(y, v, n);
        return;
    }
    for (size_t i = 0; i < n; i++) y[i] += di_bf16_to_f32(v[i]);
}

void di_add_f32(float *out, const float *a, const float *b, size_t n) {
    if (di_cpu_isa() == DI_ISA_AVX512) {
        di_add_f32_avx512(out, a, b, n);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void di_f32_to_bf16_n(const float *x, uint16_t *y, size_t n) {
    if (di_cpu_isa() == DI_ISA_AVX512) {
        for (size_t i = 0; i < n; i += 1 << 20) di_f32_to_bf16_row_avx512(x + i, y + i, (int)(n - i < (1u << 20) ? n - i : 1u << 20));
        return;
    }
    for (size_t i = 0; i < n; i++) y[i] = di_f32_to_bf16(x[i]);
}
