/* AVX-512 kernels for numfmt.h (compiled with -mavx512*; called only after
 * run-time dispatch). Results are bit-identical to the scalar definitions. */
#include <immintrin.h>
#include <math.h>

#include "io/numfmt.h"

/* e4m3 -> f16 by moving the fields into place: f16(h) = e4m3 * 2^-8 exactly,
 * subnormals included. Then f32 = f16 * 256 * mul (two exact-or-once-rounded
 * multiplies, like the scalar table[b] * mul). The NaN code is patched. */
void di_e4m3_to_f32_n_avx512(const uint8_t *in, size_t n, float mul, float *out) {
    const __m512i m80 = _mm512_set1_epi16(0x80), m7f = _mm512_set1_epi16(0x7F);
    const __m512 k256 = _mm512_set1_ps(256.0f), vmul = _mm512_set1_ps(mul), vnan = _mm512_set1_ps(NAN);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i x = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(in + i)));
        __m512i mag = _mm512_and_si512(x, m7f);
        __m512i h = _mm512_or_si512(_mm512_slli_epi16(_mm512_and_si512(x, m80), 8), _mm512_slli_epi16(mag, 7));
        __mmask32 isnan = _mm512_cmpeq_epi16_mask(mag, m7f);
        __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
        __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
        lo = _mm512_mul_ps(_mm512_mul_ps(lo, k256), vmul);
        hi = _mm512_mul_ps(_mm512_mul_ps(hi, k256), vmul);
        lo = _mm512_mask_mov_ps(lo, (__mmask16)(isnan & 0xFFFF), vnan);
        hi = _mm512_mask_mov_ps(hi, (__mmask16)(isnan >> 16), vnan);
        _mm512_storeu_ps(out + i, lo);
        _mm512_storeu_ps(out + i + 16, hi);
    }
    for (; i < n; i++) out[i] = di_e4m3_table[in[i]] * mul;
}

void di_e2m1_to_f32_n_avx512(const uint8_t *packed, size_t nbytes, float mul, float *out) {
    const __m512 lut = _mm512_loadu_ps(di_e2m1_table);
    const __m512 vmul = _mm512_set1_ps(mul);
    const __m512i f15 = _mm512_set1_epi32(15);
    const __m512i idx_a = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i idx_b = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    size_t j = 0;
    for (; j + 16 <= nbytes; j += 16) {
        __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(packed + j)));
        __m512 lo = _mm512_permutexvar_ps(_mm512_and_si512(x, f15), lut);
        __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), lut);
        lo = _mm512_mul_ps(lo, vmul);
        hi = _mm512_mul_ps(hi, vmul);
        _mm512_storeu_ps(out + 2 * j, _mm512_permutex2var_ps(lo, idx_a, hi));
        _mm512_storeu_ps(out + 2 * j + 16, _mm512_permutex2var_ps(lo, idx_b, hi));
    }
    for (; j < nbytes; j++) {
        out[2 * j] = di_e2m1_table[packed[j] & 15] * mul;
        out[2 * j + 1] = di_e2m1_table[packed[j] >> 4] * mul;
    }
}

void di_bf16_to_f32_n_avx512(const uint16_t *in, size_t n, float *out) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(in + i)));
        _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)));
    }
    for (; i < n; i++) out[i] = di_bf16_to_f32(in[i]);
}
