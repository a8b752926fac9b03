#include "io/numfmt.h"

#include <math.h>

#include "util/cpu.h"

/* e4m3fn decoding table: exponent field 0 is subnormal (m * 2^-9), otherwise
 * (1 + m/8) * 2^(e-7); 0x7F/0xFF are NaN. Generated from that definition;
 * the unit tests re-derive every entry. */
const float di_e4m3_table[256] = {
    0.0f, 0x1.0000000000000p-9f, 0x1.0000000000000p-8f, 0x1.8000000000000p-8f, 0x1.0000000000000p-7f, 0x1.4000000000000p-7f, 0x1.8000000000000p-7f, 0x1.c000000000000p-7f,
    0x1.0000000000000p-6f, 0x1.2000000000000p-6f, 0x1.4000000000000p-6f, 0x1.6000000000000p-6f, 0x1.8000000000000p-6f, 0x1.a000000000000p-6f, 0x1.c000000000000p-6f, 0x1.e000000000000p-6f,
    0x1.0000000000000p-5f, 0x1.2000000000000p-5f, 0x1.4000000000000p-5f, 0x1.6000000000000p-5f, 0x1.8000000000000p-5f, 0x1.a000000000000p-5f, 0x1.c000000000000p-5f, 0x1.e000000000000p-5f,
    0x1.0000000000000p-4f, 0x1.2000000000000p-4f, 0x1.4000000000000p-4f, 0x1.6000000000000p-4f, 0x1.8000000000000p-4f, 0x1.a000000000000p-4f, 0x1.c000000000000p-4f, 0x1.e000000000000p-4f,
    0x1.0000000000000p-3f, 0x1.2000000000000p-3f, 0x1.4000000000000p-3f, 0x1.6000000000000p-3f, 0x1.8000000000000p-3f, 0x1.a000000000000p-3f, 0x1.c000000000000p-3f, 0x1.e000000000000p-3f,
    0x1.0000000000000p-2f, 0x1.2000000000000p-2f, 0x1.4000000000000p-2f, 0x1.6000000000000p-2f, 0x1.8000000000000p-2f, 0x1.a000000000000p-2f, 0x1.c000000000000p-2f, 0x1.e000000000000p-2f,
    0x1.0000000000000p-1f, 0x1.2000000000000p-1f, 0x1.4000000000000p-1f, 0x1.6000000000000p-1f, 0x1.8000000000000p-1f, 0x1.a000000000000p-1f, 0x1.c000000000000p-1f, 0x1.e000000000000p-1f,
    0x1.0000000000000p+0f, 0x1.2000000000000p+0f, 0x1.4000000000000p+0f, 0x1.6000000000000p+0f, 0x1.8000000000000p+0f, 0x1.a000000000000p+0f, 0x1.c000000000000p+0f, 0x1.e000000000000p+0f,
    0x1.0000000000000p+1f, 0x1.2000000000000p+1f, 0x1.4000000000000p+1f, 0x1.6000000000000p+1f, 0x1.8000000000000p+1f, 0x1.a000000000000p+1f, 0x1.c000000000000p+1f, 0x1.e000000000000p+1f,
    0x1.0000000000000p+2f, 0x1.2000000000000p+2f, 0x1.4000000000000p+2f, 0x1.6000000000000p+2f, 0x1.8000000000000p+2f, 0x1.a000000000000p+2f, 0x1.c000000000000p+2f, 0x1.e000000000000p+2f,
    0x1.0000000000000p+3f, 0x1.2000000000000p+3f, 0x1.4000000000000p+3f, 0x1.6000000000000p+3f, 0x1.8000000000000p+3f, 0x1.a000000000000p+3f, 0x1.c000000000000p+3f, 0x1.e000000000000p+3f,
    0x1.0000000000000p+4f, 0x1.2000000000000p+4f, 0x1.4000000000000p+4f, 0x1.6000000000000p+4f, 0x1.8000000000000p+4f, 0x1.a000000000000p+4f, 0x1.c000000000000p+4f, 0x1.e000000000000p+4f,
    0x1.0000000000000p+5f, 0x1.2000000000000p+5f, 0x1.4000000000000p+5f, 0x1.6000000000000p+5f, 0x1.8000000000000p+5f, 0x1.a000000000000p+5f, 0x1.c000000000000p+5f, 0x1.e000000000000p+5f,
    0x1.0000000000000p+6f, 0x1.2000000000000p+6f, 0x1.4000000000000p+6f, 0x1.6000000000000p+6f, 0x1.8000000000000p+6f, 0x1.a000000000000p+6f, 0x1.c000000000000p+6f, 0x1.e000000000000p+6f,
    0x1.0000000000000p+7f, 0x1.2000000000000p+7f, 0x1.4000000000000p+7f, 0x1.6000000000000p+7f, 0x1.8000000000000p+7f, 0x1.a000000000000p+7f, 0x1.c000000000000p+7f, 0x1.e000000000000p+7f,
    0x1.0000000000000p+8f, 0x1.2000000000000p+8f, 0x1.4000000000000p+8f, 0x1.6000000000000p+8f, 0x1.8000000000000p+8f, 0x1.a000000000000p+8f, 0x1.c000000000000p+8f, NAN,
    -0.0f, -0x1.0000000000000p-9f, -0x1.0000000000000p-8f, -0x1.8000000000000p-8f, -0x1.0000000000000p-7f, -0x1.4000000000000p-7f, -0x1.8000000000000p-7f, -0x1.c000000000000p-7f,
    -0x1.0000000000000p-6f, -0x1.2000000000000p-6f, -0x1.4000000000000p-6f, -0x1.6000000000000p-6f, -0x1.8000000000000p-6f, -0x1.a000000000000p-6f, -0x1.c000000000000p-6f, -0x1.e000000000000p-6f,
    -0x1.0000000000000p-5f, -0x1.2000000000000p-5f, -0x1.4000000000000p-5f, -0x1.6000000000000p-5f, -0x1.8000000000000p-5f, -0x1.a000000000000p-5f, -0x1.c000000000000p-5f, -0x1.e000000000000p-5f,
    -0x1.0000000000000p-4f, -0x1.2000000000000p-4f, -0x1.4000000000000p-4f, -0x1.6000000000000p-4f, -0x1.8000000000000p-4f, -0x1.a000000000000p-4f, -0x1.c000000000000p-4f, -0x1.e000000000000p-4f,
    -0x1.0000000000000p-3f, -0x1.2000000000000p-3f, -0x1.4000000000000p-3f, -0x1.6000000000000p-3f, -0x1.8000000000000p-3f, -0x1.a000000000000p-3f, -0x1.c000000000000p-3f, -0x1.e000000000000p-3f,
    -0x1.0000000000000p-2f, -0x1.2000000000000p-2f, -0x1.4000000000000p-2f, -0x1.6000000000000p-2f, -0x1.8000000000000p-2f, -0x1.a000000000000p-2f, -0x1.c000000000000p-2f, -0x1.e000000000000p-2f,
    -0x1.0000000000000p-1f, -0x1.2000000000000p-1f, -0x1.4000000000000p-1f, -0x1.6000000000000p-1f, -0x1.8000000000000p-1f, -0x1.a000000000000p-1f, -0x1.c000000000000p-1f, -0x1.e000000000000p-1f,
    -0x1.0000000000000p+0f, -0x1.2000000000000p+0f, -0x1.4000000000000p+0f, -0x1.6000000000000p+0f, -0x1.8000000000000p+0f, -0x1.a000000000000p+0f, -0x1.c000000000000p+0f, -0x1.e000000000000p+0f,
    -0x1.0000000000000p+1f, -0x1.2000000000000p+1f, -0x1.4000000000000p+1f, -0x1.6000000000000p+1f, -0x1.8000000000000p+1f, -0x1.a000000000000p+1f, -0x1.c000000000000p+1f, -0x1.e000000000000p+1f,
    -0x1.0000000000000p+2f, -0x1.2000000000000p+2f, -0x1.4000000000000p+2f, -0x1.6000000000000p+2f, -0x1.8000000000000p+2f, -0x1.a000000000000p+2f, -0x1.c000000000000p+2f, -0x1.e000000000000p+2f,
    -0x1.0000000000000p+3f, -0x1.2000000000000p+3f, -0x1.4000000000000p+3f, -0x1.6000000000000p+3f, -0x1.8000000000000p+3f, -0x1.a000000000000p+3f, -0x1.c000000000000p+3f, -0x1.e000000000000p+3f,
    -0x1.0000000000000p+4f, -0x1.2000000000000p+4f, -0x1.4000000000000p+4f, -0x1.6000000000000p+4f, -0x1.8000000000000p+4f, -0x1.a000000000000p+4f, -0x1.c000000000000p+4f, -0x1.e000000000000p+4f,
    -0x1.0000000000000p+5f, -0x1.2000000000000p+5f, -0x1.4000000000000p+5f, -0x1.6000000000000p+5f, -0x1.8000000000000p+5f, -0x1.a000000000000p+5f, -0x1.c000000000000p+5f, -0x1.e000000000000p+5f,
    -0x1.0000000000000p+6f, -0x1.2000000000000p+6f, -0x1.4000000000000p+6f, -0x1.6000000000000p+6f, -0x1.8000000000000p+6f, -0x1.a000000000000p+6f, -0x1.c000000000000p+6f, -0x1.e000000000000p+6f,
    -0x1.0000000000000p+7f, -0x1.2000000000000p+7f, -0x1.4000000000000p+7f, -0x1.6000000000000p+7f, -0x1.8000000000000p+7f, -0x1.a000000000000p+7f, -0x1.c000000000000p+7f, -0x1.e000000000000p+7f,
    -0x1.0000000000000p+8f, -0x1.2000000000000p+8f, -0x1.4000000000000p+8f, -0x1.6000000000000p+8f, -0x1.8000000000000p+8f, -0x1.a000000000000p+8f, -0x1.c000000000000p+8f, NAN,
};

const float di_e2m1_table[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

float di_e8m0_to_f32(uint8_t b) {
    if (b == 0xFF) return NAN;
    return ldexpf(1.0f, (int)b - 127);
}

uint8_t di_f32_to_e4m3(float f) {
    if (isnan(f)) return 0x7F;
    uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (a >= 464.0f) return sign | 0x7E; /* saturate: RNE would reach the NaN code */
    if (a < 0.015625f) {                 /* below 2^-6: subnormal grid m * 2^-9 */
        int m = (int)nearbyintf(a * 512.0f); /* exact scaling; RNE; m == 8 is the first normal */
        return sign | (uint8_t)m;
    }
    int e;
    float fr = frexpf(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
    e -= 1;                   /* a = (2*fr) * 2^e, 2*fr in [1, 2) */
    int m = (int)nearbyintf((2.0f * fr - 1.0f) * 8.0f);
    if (m == 8) {
        m = 0;
        e += 1;
    }
    int ef = e + 7;
    if (ef > 15 || (ef == 15 && m == 7)) return sign | 0x7E;
    return sign | (uint8_t)((ef << 3) | m);
}

uint8_t di_f32_to_e2m1(float f) {
    if (isnan(f)) return 0;
    uint8_t sign = signbit(f) ? 8 : 0;
    float a = fabsf(f);
    uint8_t c;
    /* Midpoints between neighbours; at a tie the even code wins. */
    if (a <= 0.25f) c = 0;
    else if (a < 0.75f) c = 1;
    else if (a <= 1.25f) c = 2;
    else if (a < 1.75f) c = 3;
    else if (a <= 2.5f) c = 4;
    else if (a < 3.5f) c = 5;
    else if (a <= 5.0f) c = 6;
    else c = 7;
    return sign | c;
}

float di_pow2_ceil(float t) {
    uint32_t u = di_f32_bits(t);
    int e = (int)((u >> 23) & 0xFF) - 127;
    uint32_t m = u & 0x7FFFFFu;
    if (((u >> 23) & 0xFF) == 0) return ldexpf(1.0f, -126); /* subnormal input: smallest normal */
    return ldexpf(1.0f, e + (m != 0));
}

static void e4m3_to_f32_scaled(const uint8_t *in, size_t n, float mul, float *out) {
    di_isa isa = di_cpu_isa();
    if (isa == DI_ISA_AVX512) di_e4m3_to_f32_n_avx512(in, n, mul, out);
    else if (isa == DI_ISA_AVX2) di_e4m3_to_f32_n_avx2(in, n, mul, out);
    else
        for (size_t i = 0; i < n; i++) out[i] = di_e4m3_table[in[i]] * mul;
}

static void e2m1_to_f32_scaled(const uint8_t *packed, size_t nbytes, float mul, float *out) {
    di_isa isa = di_cpu_isa();
    if (isa == DI_ISA_AVX512) di_e2m1_to_f32_n_avx512(packed, nbytes, mul, out);
    else if (isa == DI_ISA_AVX2) di_e2m1_to_f32_n_avx2(packed, nbytes, mul, out);
    else
        for (size_t j = 0; j < nbytes; j++) {
            out[2 * j] = di_e2m1_table[packed[j] & 15] * mul;
            out[2 * j + 1] = di_e2m1_table[packed[j] >> 4] * mul;
        }
}

void di_e4m3_to_f32_n(const uint8_t *in, size_t n, float *out) { e4m3_to_f32_scaled(in, n, 1.0f, out); }

void di_dequant_fp8_block(const uint8_t *w, const uint8_t *scale, size_t rows, size_t cols, size_t block,
                          float *out) {
    size_t scols = (cols + block - 1) / block;
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *srow = scale + (r / block) * scols;
        for (size_t cb = 0; cb < scols; cb++) {
            size_t c0 = cb * block;
            size_t n = cols - c0 < block ? cols - c0 : block;
            e4m3_to_f32_scaled(w + r * cols + c0, n, di_e8m0_to_f32(srow[cb]), out + r * cols + c0);
        }
    }
}

void di_dequant_fp4_rows(const uint8_t *packed, const uint8_t *scale, size_t rows, size_t cols, float *out) {
    size_t groups = cols / 32;
    for (size_t r = 0; r < rows; r++)
        for (size_t g = 0; g < groups; g++)
            e2m1_to_f32_scaled(packed + r * (cols / 2) + g * 16, 16, di_e8m0_to_f32(scale[r * groups + g]),
                               out + r * cols + g * 32);
}

void di_bf16_to_f32_n(const uint16_t *in, size_t n, float *out) {
    di_isa isa = di_cpu_isa();
    if (isa == DI_ISA_AVX512) di_bf16_to_f32_n_avx512(in, n, out);
    else if (isa == DI_ISA_AVX2) di_bf16_to_f32_n_avx2(in, n, out);
    else
        for (size_t i = 0; i < n; i++) out[i] = di_bf16_to_f32(in[i]);
}
