/*
 * select_avx512.c — AVX-512 versions of the element-wise parts of select.c:
 * the clamped SwiGLU of a row and the compressor's softmax pooling, 16
 * channels per vector. Every lane performs select.c's scalar fp32
 * operations in the same order with the same di_expf, so results are
 * bit-identical. Sizes: any (masked tails).
 */
#include "ops/cpu/elem.h"
#include "ops/cpu/simd_avx512.h"

void di_swiglu_row_avx512(const uint16_t *g, const uint16_t *u, int I, float limit, const float *rw, uint16_t *o) {
    const __m512 one = _mm512_set1_ps(1.0f), neg = _mm512_set1_ps(-0.0f);
    for (int i = 0; i < I; i += 16) {
        __mmask16 m = I - i >= 16 ? 0xFFFF : (__mmask16)((1u << (I - i)) - 1);
        __m512 gv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, g + i)), 16));
        __m512 uv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, u + i)), 16));
        if (limit > 0.0f) { /* fminf(fmaxf(u, -l), l), fminf(g, l): a NaN operand yields the bound, as max/min_ps do */
            __m512 l = _mm512_set1_ps(limit);
            uv = _mm512_min_ps(_mm512_max_ps(uv, _mm512_xor_ps(l, neg)), l);
            gv = _mm512_min_ps(gv, l);
        }
        __m512 h = _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, di512_expf(_mm512_xor_ps(gv, neg)))), uv);
        if (rw) h = _mm512_mul_ps(_mm512_set1_ps(*rw), h);
        _mm256_mask_storeu_epi16(o + i, m, di512_to_bf16(h));
    }
}

void di_softmax_pool_avx512(const float *kv, const float *score, size_t ld, int S, int D, float *out) {
    __m512 e[256];
    for (int d = 0; d < D; d += 16) {
        __mmask16 m = D - d >= 16 ? 0xFFFF : (__mmask16)((1u << (D - d)) - 1);
        /* fmaxf(mx, s): a NaN score leaves mx (max_ps returns its second operand) */
        __m512 mx = _mm512_set1_ps(-__builtin_inff());
        for (int s = 0; s < S; s++) mx = _mm512_max_ps(_mm512_maskz_loadu_ps(m, score + (size_t)s * ld + d), mx);
        __m512 sum = _mm512_setzero_ps();
        for (int s = 0; s < S; s++) {
            e[s] = di512_expf(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, score + (size_t)s * ld + d), mx));
            sum = _mm512_add_ps(sum, e[s]);
        }
        __m512 acc = _mm512_setzero_ps();
        for (int s = 0; s < S; s++)
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, kv + (size_t)s * ld + d), _mm512_div_ps(e[s], sum)));
        _mm512_mask_storeu_ps(out + d, m, acc);
    }
}

int di_next_better_avx512(const float *score, int j, int n, float y) {
    const __m512 vy = _mm512_set1_ps(y);
    int ynan = y != y;
    for (; j < n; j += 16) {
        __mmask16 live = n - j >= 16 ? 0xFFFF : (__mmask16)((1u << (n - j)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(live, score + j);
        __mmask16 m = _mm512_mask_cmp_ps_mask(live, x, vy, _CMP_GT_OQ);
        if (ynan) m |= _mm512_mask_cmp_ps_mask(live, x, x, _CMP_ORD_Q);
        if (m) return j + __builtin_ctz(m);
    }
    return n;
}
