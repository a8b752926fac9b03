/*
 * quant_avx512.c — the per-row activation quantisation of di_gemm (gemm.c
 * act_quant_row) for a range of rows, 16 (row, block) pairs at a time: the
 * blocks' |x| maxima are reduced together (a max tree across 16 vectors,
 * exact in any order), the 16 power-of-two scales are computed in one
 * vector from the fp32 bits, and each block is quantised with its scale.
 * Per value: x / s is exact (s a power of two, so x * (1/s) rounds the same),
 * clamp to ±448, e4m3 round-to-nearest-even — the scalar code's results bit
 * for bit (tests/ops/cpu/test_quant.c checks every bf16 input). NaN inputs are ignored by the maximum, as there.
 */
#include "ops/cpu/gemm_kern.h"
#include "ops/cpu/simd_avx512.h"

/* lane i = max over the lanes of v[i] */
static inline __m512 max_tree16(__m512 v[16]) {
    __m512 s[8], u[4], w[2];
    for (int i = 0; i < 8; i++)
        s[i] = _mm512_max_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44), _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++)
        u[i] = _mm512_max_ps(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0x88), _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++)
        w[i] = _mm512_max_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44), _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xEE));
    __m512 z = _mm512_max_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), z);
}

/* Quantise 16 values by inv = 1/s: e4m3 bit patterns as bf16 (exact). The
 * e4m3 round-to-nearest-even of a = |x/s| <= 448 is (a + K) - K with K =
 * max(2^floor(log2 a) * 2^20, 2^14): the sum's ulp is the e4m3 spacing at a
 * (2^(e-3), or 2^-9 below 2^-6), so the hardware's RNE add rounds exactly
 * as the bit arithmetic of gemm.c round_e4m3, and the subtraction is exact. */
static inline __m256i quant16(__m512 v, __m512 inv) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, inv), _mm512_set1_ps(-448.0f)), _mm512_set1_ps(448.0f));
    __m512 a = _mm512_and_ps(v, absmask);
    __m512 k = _mm512_and_ps(a, _mm512_castsi512_ps(_mm512_set1_epi32(0x7F800000)));
    k = _mm512_max_ps(_mm512_mul_ps(k, _mm512_set1_ps(0x1p20f)), _mm512_set1_ps(0x1p14f));
    __m512 mag = _mm512_sub_ps(_mm512_add_ps(a, k), k);
    __m512i res = _mm512_or_si512(_mm512_castps_si512(mag),
                                  _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u)));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(res, 16));
}

void di_act_quant_rows_avx512(const uint16_t *A, size_t lda, int M, int K, int blk, uint16_t *q, size_t qstride,
                              float *s, size_t sstride) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    const int nb = K / blk, total = M * nb;
    for (int g = 0; g < total; g += 16) {
        int cnt = total - g < 16 ? total - g : 16;
        const uint16_t *x[16];
        __m512 part[16];
        for (int i = 0; i < 16; i++) {
            part[i] = _mm512_setzero_ps();
            if (i >= cnt) continue;
            int m = (g + i) / nb, b = (g + i) % nb;
            x[i] = A + (size_t)m * lda + (size_t)b * blk;
            for (int v = 0; v < blk; v += 16) part[i] = _mm512_max_ps(_mm512_and_ps(di512_load_bf16(x[i] + v), absmask), part[i]);
        }
        __m512 amax = max_tree16(part);
        amax = _mm512_mask_mov_ps(amax, _mm512_cmp_ps_mask(amax, _mm512_set1_ps(1e-4f), _CMP_NGE_UQ), _mm512_set1_ps(1e-4f));
        __m512i u = _mm512_castps_si512(_mm512_mul_ps(amax, _mm512_set1_ps((float)(1.0 / 448.0))));
        __m512i e = _mm512_and_si512(_mm512_srli_epi32(u, 23), _mm512_set1_epi32(0xFF));
        e = _mm512_mask_add_epi32(e, _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7FFFFF)), e, _mm512_set1_epi32(1));
        __m512 sc = _mm512_castsi512_ps(_mm512_slli_epi32(e, 23)), inv = _mm512_div_ps(_mm512_set1_ps(1.0f), sc);
        float scv[16];
        _mm512_storeu_ps(scv, sc);
        for (int i = 0; i < cnt; i++) {
            int m = (g + i) / nb, b = (g + i) % nb;
            s[(size_t)m * sstride + b] = scv[i];
            __m512 vi = _mm512_permutexvar_ps(_mm512_set1_epi32(i), inv);
            uint16_t *qb = q + (size_t)m * qstride + (size_t)b * blk;
            for (int v = 0; v < blk; v += 16) _mm256_storeu_si256((void *)(qb + v), quant16(di512_load_bf16(x[i] + v), vi));
        }
    }
}
