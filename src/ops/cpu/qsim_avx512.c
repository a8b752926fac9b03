/*
 * qsim_avx512.c — AVX-512 rows of the quantisation simulations (qsim.c):
 * the FP8 round trip and the 128-point Walsh-Hadamard transform. Each lane
 * performs the scalar code's fp32 operations (division by the power-of-two
 * scale, clamps with fmaxf/fminf's NaN handling, e4m3 RNE by the bits,
 * butterflies a+b / a-b), so results are bit-identical.
 */
#include <string.h>

#include "ops/cpu/elem.h"
#include "ops/cpu/simd_avx512.h"

/* e4m3 RNE of |v| <= 448 (gemm.c round_e4m3), sign kept. */
static inline __m512 round_e4m3(__m512 v) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    __m512 a = _mm512_and_ps(v, absmask);
    __m512i ua = _mm512_castps_si512(a);
    __m512i r = _mm512_add_epi32(ua, _mm512_add_epi32(_mm512_set1_epi32(0x7FFFF),
                                                    _mm512_and_si512(_mm512_srli_epi32(ua, 20), _mm512_set1_epi32(1))));
    r = _mm512_and_si512(r, _mm512_set1_epi32((int)0xFFF00000u));
    __m512 sub = _mm512_mul_ps(_mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(512.0f)),
                                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                               _mm512_set1_ps(1.0f / 512.0f));
    __mmask16 is_sub = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0x1p-6f), _CMP_LT_OQ);
    __m512i mag = _mm512_mask_blend_epi32(is_sub, r, _mm512_castps_si512(sub));
    return _mm512_castsi512_ps(
        _mm512_or_si512(mag, _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u))));
}

void di_qat_fp8_row_avx512(uint16_t *v, int n, int blk) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    const float inv448 = (float)(1.0 / 448.0);
    for (int b0 = 0; b0 < n; b0 += blk) {
        __m512 mx = _mm512_setzero_ps();
        /* fmaxf(amax, |x|): a NaN |x| leaves amax (max_ps returns its second operand on NaN) */
        for (int i = 0; i < blk; i += 16) mx = _mm512_max_ps(_mm512_and_ps(di512_load_bf16(v + b0 + i), absmask), mx);
        float amax = _mm512_reduce_max_ps(mx);
        if (!(amax >= 1e-4f)) amax = 1e-4f;
        float t = amax * inv448, s;
        uint32_t u;
        memcpy(&u, &t, 4);
        uint32_t su = (uint32_t)((int)((u >> 23) & 0xFF) + ((u & 0x7FFFFFu) != 0)) << 23;
        memcpy(&s, &su, 4);
        __m512 vs = _mm512_set1_ps(s), lo = _mm512_set1_ps(-448.0f), hi = _mm512_set1_ps(448.0f);
        for (int i = 0; i < blk; i += 16) {
            __m512 q = _mm512_div_ps(di512_load_bf16(v + b0 + i), vs);
            q = _mm512_min_ps(_mm512_max_ps(q, lo), hi);
            di512_store_bf16(v + b0 + i, _mm512_mul_ps(round_e4m3(q), vs));
        }
    }
}

/* One butterfly stage with partner distance h < 16 inside a vector. */
static inline __m512 bfly(__m512 t, __m512 p, __mmask16 upper) {
    return _mm512_mask_blend_ps(upper, _mm512_add_ps(t, p), _mm512_sub_ps(p, t));
}

void di_hadamard128_avx512(uint16_t *row, float scale) {
    __m512 t[8];
    for (int j = 0; j < 8; j++) t[j] = di512_load_bf16(row + 16 * j);
    for (int j = 0; j < 8; j++) {
        t[j] = bfly(t[j], _mm512_permute_ps(t[j], 0xB1), 0xAAAA);               /* h = 1 */
        t[j] = bfly(t[j], _mm512_permute_ps(t[j], 0x4E), 0xCCCC);               /* h = 2 */
        t[j] = bfly(t[j], _mm512_shuffle_f32x4(t[j], t[j], 0xB1), 0xF0F0);      /* h = 4 */
        t[j] = bfly(t[j], _mm512_shuffle_f32x4(t[j], t[j], 0x4E), 0xFF00);      /* h = 8 */
    }
    for (int h = 1; h < 8; h *= 2) /* h = 16, 32, 64 elements */
        for (int j = 0; j < 8; j++)
            if (!(j & h)) {
                __m512 a = t[j], b = t[j + h];
                t[j] = _mm512_add_ps(a, b);
                t[j + h] = _mm512_sub_ps(a, b);
            }
    const __m512 vs = _mm512_set1_ps(scale);
    for (int j = 0; j < 8; j++) di512_store_bf16(row + 16 * j, _mm512_mul_ps(t[j], vs));
}

/* The V4.1 FP4 round trip with an e4m3 block scale (qsim.c fp4_e4m3_rows),
 * one block of 16 per vector: s = e4m3_RNE(max(amax, 6*2^-9) / 6) (true
 * division; saturation at 448 = clamp, then RNE), q = e2m1_RNE(clamp(x / s,
 * ±6)), y = bf16(q * s). */
void di_qat_fp4_e4m3_row_avx512(uint16_t *v, int n) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    for (int b0 = 0; b0 < n; b0 += 16) {
        __m512 x = di512_load_bf16(v + b0);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(x, absmask), _mm512_setzero_ps()));
        if (!(amax >= 6.0f * 0x1p-9f)) amax = 6.0f * 0x1p-9f;
        __m512 s = round_e4m3(_mm512_min_ps(_mm512_set1_ps(amax / 6.0f), _mm512_set1_ps(448.0f)));
        __m512 q = _mm512_div_ps(x, s);
        q = _mm512_min_ps(_mm512_max_ps(q, _mm512_set1_ps(-6.0f)), _mm512_set1_ps(6.0f));
        di512_store_bf16(v + b0, _mm512_mul_ps(di512_round_e2m1(q), s));
    }
}
