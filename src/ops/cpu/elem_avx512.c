/*
 * elem_avx512.c — AVX-512 versions of hot per-row element-wise ops, each
 * performing exactly the scalar code's fp32 operations in the same order
 * (separate multiplies and adds, no contraction; RNE conversions done with
 * the same integer arithmetic), so results are bit-identical to the scalar
 * paths. Callers check di_cpu_isa() == DI_ISA_AVX512 and the size contracts.
 */
#include <immintrin.h>
#include <string.h>

#include "ops/cpu/elem.h"
#include "ops/cpu/simd_avx512.h"

static inline __m512 load_bf16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)p)), 16));
}

/* fp32 -> bf16 round-to-nearest-even (finite inputs; NaN made quiet like the scalar code). */
static inline __m256i to_bf16(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF),
                                                     _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

void di_hc_collapse_row_avx512(const float *pre, const uint16_t *r, int d, uint16_t *y) {
    __m512 p0 = _mm512_set1_ps(pre[0]), p1 = _mm512_set1_ps(pre[1]), p2 = _mm512_set1_ps(pre[2]), p3 = _mm512_set1_ps(pre[3]);
    for (int i = 0; i < d; i += 16) {
        __m512 s = _mm512_mul_ps(p0, load_bf16(r + i));
        s = _mm512_add_ps(s, _mm512_mul_ps(p1, load_bf16(r + (size_t)d + i)));
        s = _mm512_add_ps(s, _mm512_mul_ps(p2, load_bf16(r + 2 * (size_t)d + i)));
        s = _mm512_add_ps(s, _mm512_mul_ps(p3, load_bf16(r + 3 * (size_t)d + i)));
        _mm256_storeu_si256((void *)(y + i), to_bf16(s));
    }
}

void di_hc_expand_row_avx512(const float *post, const float *comb, const uint16_t *f, const uint16_t *r, uint16_t *o,
                             int d) {
    for (int i = 0; i < d; i += 16) {
        __m512 rv[4], fv = load_bf16(f + i), out[4];
        for (int j = 0; j < 4; j++) rv[j] = load_bf16(r + (size_t)j * d + i);
        for (int k = 0; k < 4; k++) {
            __m512 s = _mm512_mul_ps(_mm512_set1_ps(comb[k]), rv[0]);
            for (int j = 1; j < 4; j++) s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(comb[j * 4 + k]), rv[j]));
            out[k] = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(post[k]), fv), s);
        }
        for (int k = 0; k < 4; k++) _mm256_storeu_si256((void *)(o + (size_t)k * d + i), to_bf16(out[k]));
    }
}

void di_f32_to_bf16_row_avx512(const float *in, uint16_t *out, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((void *)(out + i), to_bf16(_mm512_loadu_ps(in + i)));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        _mm256_mask_storeu_epi16(out + i, k, to_bf16(_mm512_maskz_loadu_ps(k, in + i)));
    }
}

/* FP4 (e2m1) round trip of blocks of 32 (qsim.c fp4_rows): s = 2^ceil(log2(
 * max(amax, 6*2^-126) * fp32(1/6))); q = clamp(x/s, ±6) rounded to the
 * e2m1 grid with ties to the even code — a 1-mantissa-bit float rounding
 * (RNE) above 1 and steps of 0.5 below; y = bf16(q * s). */
void di_qat_fp4_row_avx512(uint16_t *v, int n, int blk) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    const float inv6 = (float)(1.0 / 6.0), amin = 6.0f * 0x1p-126f;
    for (int b0 = 0; b0 < n; b0 += blk) {
        __m512 mx = _mm512_setzero_ps();
        for (int i = 0; i < blk; i += 16) mx = _mm512_max_ps(mx, _mm512_and_ps(load_bf16(v + b0 + i), absmask));
        float amax = _mm512_reduce_max_ps(mx);
        if (!(amax >= amin)) amax = amin;
        float t = amax * inv6, s;
        uint32_t u;
        memcpy(&u, &t, 4);
        int e = (int)((u >> 23) & 0xFF) - 127 + ((u & 0x7FFFFFu) != 0);
        if (((u >> 23) & 0xFF) == 0) e = -126;
        uint32_t su = (uint32_t)(e + 127) << 23;
        memcpy(&s, &su, 4);
        __m512 vs = _mm512_set1_ps(s), six = _mm512_set1_ps(6.0f), nsix = _mm512_set1_ps(-6.0f);
        for (int i = 0; i < blk; i += 16) {
            __m512 x = _mm512_div_ps(load_bf16(v + b0 + i), vs);
            x = _mm512_min_ps(_mm512_max_ps(x, nsix), six);
            __m512 q = di512_round_e2m1(x);
            _mm256_storeu_si256((void *)(v + b0 + i), to_bf16(_mm512_mul_ps(q, vs)));
        }
    }
}

void di_add_bf16_f32_avx512(float *y, const uint16_t *v, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), load_bf16(v + i)));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        __m512 b = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, v + i)), 16));
        _mm512_mask_storeu_ps(y + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + i), b));
    }
}

void di_add_f32_avx512(float *out, const float *a, const float *b, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(out + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i)));
    }
}
