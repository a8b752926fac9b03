/* AVX2 + F16C kernels for numfmt.h (see numfmt_avx512.c for the method). */
#include <immintrin.h>
#include <math.h>

#include "io/numfmt.h"

void di_e4m3_to_f32_n_avx2(const uint8_t *in, size_t n, float mul, float *out) {
    const __m128i m80 = _mm_set1_epi16(0x80), m7f = _mm_set1_epi16(0x7F);
    const __m256i m7f32 = _mm256_set1_epi32(0x7F);
    const __m256 k256 = _mm256_set1_ps(256.0f), vmul = _mm256_set1_ps(mul), vnan = _mm256_set1_ps(NAN);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i b8 = _mm_loadl_epi64((const __m128i *)(in + i));
        __m128i x = _mm_cvtepu8_epi16(b8);
        __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(x, m80), 8), _mm_slli_epi16(_mm_and_si128(x, m7f), 7));
        __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtph_ps(h), k256), vmul);
        __m256i mag = _mm256_and_si256(_mm256_cvtepu8_epi32(b8), m7f32);
        __m256 isnan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, m7f32));
        _mm256_storeu_ps(out + i, _mm256_blendv_ps(v, vnan, isnan));
    }
    for (; i < n; i++) out[i] = di_e4m3_table[in[i]] * mul;
}

void di_e2m1_to_f32_n_avx2(const uint8_t *packed, size_t nbytes, float mul, float *out) {
    const __m256 mag_lut = _mm256_loadu_ps(di_e2m1_table); /* entries 0..7: magnitudes */
    const __m256 vmul = _mm256_set1_ps(mul);
    const __m256i seven = _mm256_set1_epi32(7), eight = _mm256_set1_epi32(8);
    size_t j = 0;
    for (; j + 8 <= nbytes; j += 8) {
        __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(packed + j)));
        __m256i hx = _mm256_srli_epi32(x, 4);
        __m256 lo = _mm256_permutevar8x32_ps(mag_lut, _mm256_and_si256(x, seven));
        __m256 hi = _mm256_permutevar8x32_ps(mag_lut, _mm256_and_si256(hx, seven));
        lo = _mm256_xor_ps(lo, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(x, eight), 28)));
        hi = _mm256_xor_ps(hi, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(hx, eight), 28)));
        lo = _mm256_mul_ps(lo, vmul);
        hi = _mm256_mul_ps(hi, vmul);
        __m256 ulo = _mm256_unpacklo_ps(lo, hi); /* l0 h0 l1 h1 | l4 h4 l5 h5 */
        __m256 uhi = _mm256_unpackhi_ps(lo, hi); /* l2 h2 l3 h3 | l6 h6 l7 h7 */
        _mm256_storeu_ps(out + 2 * j, _mm256_permute2f128_ps(ulo, uhi, 0x20));
        _mm256_storeu_ps(out + 2 * j + 8, _mm256_permute2f128_ps(ulo, uhi, 0x31));
    }
    for (; j < nbytes; j++) {
        out[2 * j] = di_e2m1_table[packed[j] & 15] * mul;
        out[2 * j + 1] = di_e2m1_table[packed[j] >> 4] * mul;
    }
}

void di_bf16_to_f32_n_avx2(const uint16_t *in, size_t n, float *out) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(in + i)));
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)));
    }
    for (; i < n; i++) out[i] = di_bf16_to_f32(in[i]);
}
