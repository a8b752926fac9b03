/* AVX-512 versions of the vec.h kernels (same operation order as the scalar code). */
#include <immintrin.h>

#include "ops/cpu/simd_avx512.h"
#include "ops/cpu/vec.h"

/* 16 keys at a time: per head, the 16 dot products' lane trees are reduced
 * together (di512_tree16: a lane tree l += l+8, +4, +2, +1), then every key's
 * lane performs the scalar bf16 steps in head order. */
void di_index_scores_avx512(const uint16_t *q, int nh, const float *w, const uint16_t *k, size_t ldk, int n, float *score) {
    for (int j0 = 0; j0 < n; j0 += 16) {
        int cnt = n - j0 < 16 ? n - j0 : 16;
        const uint16_t *kb = k + (size_t)j0 * ldk;
        __m512 s = _mm512_setzero_ps();
        for (int h = 0; h < nh; h++) {
            const uint16_t *qh = q + (size_t)h * 128;
            __m512i q0 = _mm512_loadu_si512(qh), q1 = _mm512_loadu_si512(qh + 32);
            __m512i q2 = _mm512_loadu_si512(qh + 64), q3 = _mm512_loadu_si512(qh + 96);
            __m512 acc[16];
            for (int jj = 0; jj < 16; jj++) {
                if (jj >= cnt) {
                    acc[jj] = _mm512_setzero_ps();
                    continue;
                }
                const uint16_t *kj = kb + (size_t)jj * ldk;
                __m512 a = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)q0, (__m512bh)_mm512_loadu_si512(kj));
                a = _mm512_dpbf16_ps(a, (__m512bh)q1, (__m512bh)_mm512_loadu_si512(kj + 32));
                a = _mm512_dpbf16_ps(a, (__m512bh)q2, (__m512bh)_mm512_loadu_si512(kj + 64));
                acc[jj] = _mm512_dpbf16_ps(a, (__m512bh)q3, (__m512bh)_mm512_loadu_si512(kj + 96));
            }
            __m512 d = di512_round_bf16(di512_tree16(acc));
            d = _mm512_mask_mov_ps(d, _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps());
            s = _mm512_add_ps(s, di512_round_bf16(_mm512_mul_ps(d, _mm512_set1_ps(w[h]))));
        }
        _mm512_mask_storeu_ps(score + j0, (__mmask16)((1u << cnt) - 1), di512_round_bf16(s));
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
