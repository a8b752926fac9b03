/* AVX-512 versions of the vec.h kernels (same operation order as the scalar code). */
#include <immintrin.h>

#include "ops/cpu/vec.h"

float di_vdot_bf16_avx512(const uint16_t *a, const uint16_t *b, int n) {
    __m512 acc = _mm512_setzero_ps();
    for (int s = 0; s < n; s += 32)
        acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(a + s), (__m512bh)_mm512_loadu_si512(b + s));
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)); /* l += l+8 */
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));        /* l += l+4 */
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));                                                /* l += l+2 */
    q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));                                            /* l += l+1 */
    return _mm_cvtss_f32(q);
}

void di_vaxpy_bf16_avx512(float *o, float p, const uint16_t *v, int n) {
    __m512 pp = _mm512_set1_ps(p);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 vv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(v + i))), 16));
        _mm512_storeu_ps(o + i, _mm512_fmadd_ps(pp, vv, _mm512_loadu_ps(o + i)));
    }
    for (; i < n; i++) {
        uint32_t u = (uint32_t)v[i] << 16;
        float f;
        __builtin_memcpy(&f, &u, 4);
        o[i] += p * f;
    }
}
