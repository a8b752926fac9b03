/* AVX-512 versions of the vec.h kernels (same operation order as the scalar code). */
#include <immintrin.h>

#include "ops/cpu/vec.h"

static inline float lane_tree(__m512 acc) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)); /* l += l+8 */
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));        /* l += l+4 */
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));                                                /* l += l+2 */
    q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));                                            /* l += l+1 */
    return _mm_cvtss_f32(q);
}

static inline float round_bf16(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    __builtin_memcpy(&f, &u, 4);
    return f;
}

void di_index_scores_avx512(const uint16_t *q, int nh, const float *w, const uint16_t *k, size_t ldk, int n, float *score) {
    __m512i qv[64][4];
    int hmax = nh < 64 ? nh : 64;
    for (int h = 0; h < hmax; h++)
        for (int s = 0; s < 4; s++) qv[h][s] = _mm512_loadu_si512(q + (size_t)h * 128 + 32 * s);
    for (int j = 0; j < n; j++) {
        const uint16_t *kj = k + (size_t)j * ldk;
        __m512i kv0 = _mm512_loadu_si512(kj), kv1 = _mm512_loadu_si512(kj + 32);
        __m512i kv2 = _mm512_loadu_si512(kj + 64), kv3 = _mm512_loadu_si512(kj + 96);
        float s = 0.0f;
        for (int h = 0; h < nh; h++) {
            __m512 acc;
            if (h < 64) {
                acc = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)qv[h][0], (__m512bh)kv0);
                acc = _mm512_dpbf16_ps(acc, (__m512bh)qv[h][1], (__m512bh)kv1);
                acc = _mm512_dpbf16_ps(acc, (__m512bh)qv[h][2], (__m512bh)kv2);
                acc = _mm512_dpbf16_ps(acc, (__m512bh)qv[h][3], (__m512bh)kv3);
            } else {
                acc = _mm512_setzero_ps();
                for (int t = 0; t < 4; t++)
                    acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(q + (size_t)h * 128 + 32 * t),
                                           (__m512bh)_mm512_loadu_si512(kj + 32 * t));
            }
            float d = round_bf16(lane_tree(acc));
            if (d < 0.0f) d = 0.0f;
            s += round_bf16(d * w[h]);
        }
        score[j] = round_bf16(s);
    }
}

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
