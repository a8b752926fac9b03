/*
 * numfmt.h — the number formats of DeepSeek's released checkpoints and of the
 * reference's quantisation simulations (architecture.md §2.2, §3):
 *
 *   bf16   1-8-7, round-to-nearest-even from fp32
 *   e4m3   OCP float8_e4m3fn: bias 7, max ±448, no inf, 0x7F/0xFF = NaN
 *   e8m0   unsigned power of two 2^(b-127), 0xFF = NaN (block scales)
 *   e2m1   FP4: sign | 3-bit index into {0,.5,1,1.5,2,3,4,6}; packed two per
 *          byte, logical element 2j in the LOW nibble of byte j
 *
 * Scalar conversions are exact. Encoders round to nearest, ties to even
 * (for e2m1: ties to the even code) and saturate at the format's maximum
 * (the reference clamps before casting, so saturation only matters for
 * out-of-contract input). The row dequantisers are vectorised (AVX-512 /
 * AVX2 / scalar picked at run time) and bit-identical across paths.
 */
#ifndef DI_IO_NUMFMT_H
#define DI_IO_NUMFMT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t di_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float di_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float di_bf16_to_f32(uint16_t h) { return di_bits_f32((uint32_t)h << 16); }

/* Round-to-nearest-even; NaN stays a (quiet) NaN. */
static inline uint16_t di_f32_to_bf16(float f) {
    uint32_t u = di_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Round an fp32 value to bf16 precision and back. */
static inline float di_round_bf16(float f) { return di_bf16_to_f32(di_f32_to_bf16(f)); }

extern const float di_e4m3_table[256];
extern const float di_e2m1_table[16];

static inline float di_e4m3_to_f32(uint8_t b) { return di_e4m3_table[b]; }
static inline float di_e2m1_to_f32(uint8_t nibble) { return di_e2m1_table[nibble & 15]; }

/* 2^(b-127); NaN for 0xFF. */
float di_e8m0_to_f32(uint8_t b);

/* fp32 -> e4m3 byte, RNE, saturating to ±448; NaN -> 0x7F. */
uint8_t di_f32_to_e4m3(float f);

/* fp32 -> e2m1 nibble (0..15), RNE ties to the even code, saturating to ±6; NaN -> 0. */
uint8_t di_f32_to_e2m1(float f);

/* Round through e4m3 and back. */
static inline float di_round_e4m3(float f) { return di_e4m3_to_f32(di_f32_to_e4m3(f)); }

/* The reference's power-of-two scale: 2^ceil(log2 t) computed from the fp32
 * bits (exponent - 127 + (mantissa != 0)), for t > 0 (architecture.md §3.2). */
float di_pow2_ceil(float t);

/* Vectorised dequantisers (dispatch on util/cpu.h). All write fp32.
 *
 * FP8 weight [rows, cols] with e8m0 block scales [ceil(rows/B), ceil(cols/B)]:
 * out[r*cols + c] = e4m3(w[r*cols + c]) * e8m0(scale[(r/B)*ceil(cols/B) + c/B]). */
void di_dequant_fp8_block(const uint8_t *w, const uint8_t *scale, size_t rows, size_t cols, size_t block,
                          float *out);

/* FP4 weight [rows, cols] packed as [rows, cols/2] bytes (low nibble = even
 * element) with e8m0 scales [rows, cols/32]; cols must be a multiple of 32. */
void di_dequant_fp4_rows(const uint8_t *packed, const uint8_t *scale, size_t rows, size_t cols, float *out);

/* n bf16 values -> fp32. */
void di_bf16_to_f32_n(const uint16_t *in, size_t n, float *out);

/* n e4m3 bytes -> fp32 (no scale). */
void di_e4m3_to_f32_n(const uint8_t *in, size_t n, float *out);

/* Per-ISA kernels (internal; numfmt_avx2.c / numfmt_avx512.c). */
void di_e4m3_to_f32_n_avx2(const uint8_t *in, size_t n, float mul, float *out);
void di_e4m3_to_f32_n_avx512(const uint8_t *in, size_t n, float mul, float *out);
void di_e2m1_to_f32_n_avx512(const uint8_t *packed, size_t nbytes, float mul, float *out);
void di_e2m1_to_f32_n_avx2(const uint8_t *packed, size_t nbytes, float mul, float *out);
void di_bf16_to_f32_n_avx512(const uint16_t *in, size_t n, float *out);
void di_bf16_to_f32_n_avx2(const uint16_t *in, size_t n, float *out);

#endif
