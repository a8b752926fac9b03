/*
 * simd_avx512.h — inline AVX-512 helpers shared by the *_avx512.c row
 * kernels of src/ops/cpu (include only from files compiled with the
 * AVX-512 flags). Every helper performs the same IEEE operations as the
 * scalar code it stands for, lane by lane.
 */
#ifndef DI_OPS_CPU_SIMD_AVX512_H
#define DI_OPS_CPU_SIMD_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "ops/cpu/mathf.h"

/* 16 bf16 values -> fp32 (exact). */
static inline __m512 di512_load_bf16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)p)), 16));
}

/* fp32 -> bf16 round-to-nearest-even as 32-bit words with the bf16 in the
 * high half and zeros below (numfmt.h di_f32_to_bf16: NaN made quiet). */
static inline __m512i di512_bf16_hi(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF),
                                                     _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
    return _mm512_and_si512(r, _mm512_set1_epi32((int)0xFFFF0000u));
}

/* di_round_bf16 of 16 lanes. */
static inline __m512 di512_round_bf16(__m512 v) { return _mm512_castsi512_ps(di512_bf16_hi(v)); }

/* 16 fp32 -> 16 bf16 (RNE). */
static inline __m256i di512_to_bf16(__m512 v) {
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(di512_bf16_hi(v), 16));
}

static inline void di512_store_bf16(uint16_t *p, __m512 v) { _mm256_storeu_si256((void *)p, di512_to_bf16(v)); }

/* In-place transpose of a 16 x 16 fp32 matrix held as 16 rows: afterwards
 * r[c] lane l = old r[l] lane c. */
static inline void di512_transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    /* r[4g + j], 128-bit chunk q, holds column j + 4q of rows 4g..4g+3 */
    for (int j = 0; j < 4; j++) {
        __m512 u0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44), u1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);
        __m512 u2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44), u3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
        t[j] = _mm512_shuffle_f32x4(u0, u2, 0x88);
        t[j + 4] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
        t[j + 8] = _mm512_shuffle_f32x4(u1, u3, 0x88);
        t[j + 12] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* Load columns [i0, i0+16) of 16 bf16 rows, transposed: out[c] lane l =
 * rows[l][i0 + c] as fp32. */
static inline void di512_load_bf16_t16(const uint16_t *const rows[16], int i0, __m512 out[16]) {
    for (int l = 0; l < 16; l++) out[l] = di512_load_bf16(rows[l] + i0);
    di512_transpose16(out);
}

/* di_expf (mathf.h) of 8 doubles holding fp32 values clamped to [-150, 100]. */
static inline __m512d di512_exp_pd(__m512d x) {
    const __m512d shift = _mm512_set1_pd(DI_EXPF_SHIFT);
    __m512d z = _mm512_mul_pd(x, _mm512_set1_pd(DI_EXPF_INVLN2N));
    __m512d s = _mm512_add_pd(z, shift);
    __m512d r = _mm512_sub_pd(z, _mm512_sub_pd(s, shift));
    __m512i k = _mm512_sub_epi64(_mm512_castpd_si512(s), _mm512_castpd_si512(shift));
    __m512d p = _mm512_fmadd_pd(_mm512_set1_pd(DI_EXPF_C5), r, _mm512_set1_pd(DI_EXPF_C4));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(DI_EXPF_C3));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(DI_EXPF_C2));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(DI_EXPF_C1));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    __m512i j = _mm512_and_si512(k, _mm512_set1_epi64(31));
    __m512d t0 = _mm512_permutex2var_pd(_mm512_loadu_pd(di_expf_tab), j, _mm512_loadu_pd(di_expf_tab + 8));
    __m512d t1 = _mm512_permutex2var_pd(_mm512_loadu_pd(di_expf_tab + 16), j, _mm512_loadu_pd(di_expf_tab + 24));
    __m512d t = _mm512_mask_blend_pd(_mm512_test_epi64_mask(j, _mm512_set1_epi64(16)), t0, t1);
    __m512i e = _mm512_slli_epi64(_mm512_srai_epi64(k, 5), 52);
    return _mm512_mul_pd(_mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(t), e)), p);
}

/* di_expf of 16 fp32 lanes. */
static inline __m512 di512_expf(__m512 x) {
    __m512 c = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-150.0f)), _mm512_set1_ps(100.0f));
    __m256 lo = _mm512_cvtpd_ps(di512_exp_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(c))));
    __m256 hi = _mm512_cvtpd_ps(di512_exp_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(c, 1))));
    __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

/* The lane trees of 16 dot-product accumulators at once: lane j of the
 * result is acc[j] reduced as l += l+8, l += l+4, l += l+2, l += l+1 (vec.h),
 * the same additions of the same pairs as the one-vector tree. */
static inline __m512 di512_tree16(const __m512 acc[16]) {
    __m512 s[8], u[4], w[2];
    for (int i = 0; i < 8; i++) /* l += l+8: entries 2i | 2i+1 */
        s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++) /* l += l+4: chunks = entries 4i .. 4i+3 */
        u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++) /* l += l+2: chunk q lanes 0,1 = entry 8i+q, lanes 2,3 = 8i+4+q */
        w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44), _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xEE));
    /* l += l+1: lane 4q + r = entry q + 4r */
    __m512 z = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), z);
}

/* e2m1 (FP4) RNE of x in [-6, 6] (ties to the even code), as fp32: a
 * 1-mantissa-bit float rounding above 1 and steps of 0.5 below. */
static inline __m512 di512_round_e2m1(__m512 x) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    __m512 a = _mm512_and_ps(x, absmask);
    __m512i ua = _mm512_castps_si512(a);
    __m512i rn = _mm512_add_epi32(ua, _mm512_add_epi32(_mm512_set1_epi32(0x1FFFFF),
                                                     _mm512_and_si512(_mm512_srli_epi32(ua, 22), _mm512_set1_epi32(1))));
    rn = _mm512_and_si512(rn, _mm512_set1_epi32((int)0xFFC00000u));
    __m512 sub = _mm512_mul_ps(_mm512_roundscale_ps(_mm512_add_ps(a, a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                               _mm512_set1_ps(0.5f));
    __mmask16 is_sub = _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.0f), _CMP_LT_OQ);
    __m512 q = _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_sub, rn, _mm512_castps_si512(sub)));
    return _mm512_or_ps(q, _mm512_and_ps(x, _mm512_castsi512_ps(_mm512_set1_epi32((int)0x80000000u))));
}

#endif
