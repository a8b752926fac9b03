/* AVX2+FMA versions of the vec.h kernels (same operation order as the scalar code). */
#include <immintrin.h>

#include "ops/cpu/vec.h"

static inline __m256 bf16x8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const void *)p)), 16));
}

/* Even / odd elements of 16 consecutive bf16 values as two fp32 vectors. */
static inline void split_pairs(const uint16_t *p, __m256 *even, __m256 *odd) {
    __m256i w = _mm256_loadu_si256((const void *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xFFFF0000u)));
}

float di_vdot_bf16_avx2(const uint16_t *a, const uint16_t *b, int n) {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps(); /* lanes 0..7, 8..15 */
    for (int s = 0; s < n; s += 32) {
        __m256 ae, ao, be, bo;
        split_pairs(a + s, &ae, &ao);
        split_pairs(b + s, &be, &bo);
        lo = _mm256_fmadd_ps(ae, be, _mm256_fmadd_ps(ao, bo, lo));
        split_pairs(a + s + 16, &ae, &ao);
        split_pairs(b + s + 16, &be, &bo);
        hi = _mm256_fmadd_ps(ae, be, _mm256_fmadd_ps(ao, bo, hi));
    }
    __m256 h = _mm256_add_ps(lo, hi);
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
    return _mm_cvtss_f32(q);
}

void di_vaxpy_bf16_avx2(float *o, float p, const uint16_t *v, int n) {
    __m256 pp = _mm256_set1_ps(p);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_fmadd_ps(pp, bf16x8(v + i), _mm256_loadu_ps(o + i)));
    for (; i < n; i++) {
        uint32_t u = (uint32_t)v[i] << 16;
        float f;
        __builtin_memcpy(&f, &u, 4);
        o[i] += p * f;
    }
}
