/*
 * rope_avx512.c — the rotation of rope.c, 16 interleaved pairs at a time:
 * re = fma(a, c, -(b*s)), im = fma(a, s, b*c), each rounded to bf16 (the
 * same fp32 operations as the scalar loop, so bit-identical).
 */
#include "ops/cpu/elem.h"
#include "ops/cpu/simd_avx512.h"

void di_rope_row_avx512(uint16_t *x, int half, const float *cs, const float *sn, int inverse) {
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(inverse ? (int)0x80000000u : 0));
    for (int i = 0; i < half; i += 16) {
        __m512i w = _mm512_loadu_si512(x + 2 * i);
        __m512 a = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), b = _mm512_castsi512_ps(_mm512_and_si512(w, hi));
        __m512 c = _mm512_loadu_ps(cs + i), s = _mm512_xor_ps(_mm512_loadu_ps(sn + i), sign);
        __m512 re = _mm512_fmadd_ps(a, c, _mm512_xor_ps(_mm512_mul_ps(b, s), _mm512_set1_ps(-0.0f)));
        __m512 im = _mm512_fmadd_ps(a, s, _mm512_mul_ps(b, c));
        _mm512_storeu_si512(x + 2 * i, _mm512_or_si512(_mm512_srli_epi32(di512_bf16_hi(re), 16), di512_bf16_hi(im)));
    }
}
