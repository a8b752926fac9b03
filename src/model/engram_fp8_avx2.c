/*
 * engram_fp8_avx2.c — AVX2 kernel of Engram's private FP8 GEMM: outputs in
 * two sets of 8, their block vectors reduced by a transpose-add tree in
 * exactly the order of the scalar block_dot (engram_fp8.h), so results are
 * bit-identical to the scalar and AVX-512 paths.
 */
#include <immintrin.h>
#include <math.h>

#include "io/numfmt.h"
#include "model/engram_fp8.h"

#define ROW_TILE 32

/* 8 e4m3 bytes -> 8 exact fp32 values (via f16). */
static inline __m256 cvt8(const uint8_t *in) {
    const __m128i m80 = _mm_set1_epi16(0x80), m7f = _mm_set1_epi16(0x7F);
    __m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)in));
    __m128i mag = _mm_and_si128(x, m7f);
    __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(x, m80), 8), _mm_slli_epi16(mag, 7));
    __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
    __m256 isnan = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(mag, m7f)));
    return _mm256_blendv_ps(f, _mm256_set1_ps(NAN), isnan);
}

/* Lane l of the result holds the P of slot SIGMA8[l] (an involution). */
static const int SIGMA8[8] = {0, 2, 1, 3, 4, 6, 5, 7};

/* v[s] holds t8[0..7] of slot s. */
static inline __m256 reduce8(const __m256 v[8]) {
    __m256 u[4], s[2];
    for (int i = 0; i < 4; i++) /* t4 */
        u[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[i], v[i + 4], 0x20), _mm256_permute2f128_ps(v[i], v[i + 4], 0x31));
    for (int i = 0; i < 2; i++) { /* t2 */
        __m256d a = _mm256_castps_pd(u[i]), b = _mm256_castps_pd(u[i + 2]);
        s[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)), _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    return _mm256_add_ps(_mm256_shuffle_ps(s[0], s[1], _MM_SHUFFLE(2, 0, 2, 0)), /* t1 */
                         _mm256_shuffle_ps(s[0], s[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

void di_engram_fp8_gemm16_avx2(const float *xq, const float *sx, int64_t m, const uint8_t *w, const uint8_t *wscale,
                               int n, int k, int j0, int groups, float *y) {
    const int nb = k / DI_ENGRAM_QBLOCK;
    __m256 wt[2][8][4]; /* [half][slot][quarter of the 32-block] */
    __m256 acc[ROW_TILE][2];
    for (int64_t i0 = 0; i0 < m; i0 += ROW_TILE) {
        const int rows = m - i0 < ROW_TILE ? (int)(m - i0) : ROW_TILE;
        for (int g = 0; g < groups; g++) {
            const int jb = j0 + 16 * g;
            const uint8_t *srow = wscale + (int64_t)(jb / DI_ENGRAM_QBLOCK) * nb;
            for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            for (int b = 0; b < nb; b++) {
                for (int o = 0; o < 16; o++)
                    for (int q = 0; q < 4; q++)
                        wt[o / 8][SIGMA8[o % 8]][q] = cvt8(w + (int64_t)(jb + o) * k + b * DI_ENGRAM_QBLOCK + 8 * q);
                const float sw = di_e8m0_to_f32(srow[b]);
                for (int r = 0; r < rows; r++) {
                    const float *xr = xq + (i0 + r) * k + b * DI_ENGRAM_QBLOCK;
                    const __m256 x0 = _mm256_loadu_ps(xr), x1 = _mm256_loadu_ps(xr + 8);
                    const __m256 x2 = _mm256_loadu_ps(xr + 16), x3 = _mm256_loadu_ps(xr + 24);
                    const __m256 scale = _mm256_set1_ps(sx[(i0 + r) * nb + b] * sw);
                    for (int half = 0; half < 2; half++) {
                        __m256 v[8];
                        for (int s = 0; s < 8; s++) {
                            const __m256 *t = wt[half][s];
                            /* l[j] = p[j] + p[j+16] for lanes 0..7 and 8..15; t8 = l[0..7] + l[8..15] */
                            __m256 la = _mm256_fmadd_ps(t[2], x2, _mm256_mul_ps(t[0], x0));
                            __m256 lb = _mm256_fmadd_ps(t[3], x3, _mm256_mul_ps(t[1], x1));
                            v[s] = _mm256_add_ps(la, lb);
                        }
                        acc[r][half] = _mm256_add_ps(acc[r][half], _mm256_mul_ps(reduce8(v), scale));
                    }
                }
            }
            for (int r = 0; r < rows; r++) {
                _mm256_storeu_ps(y + (i0 + r) * n + jb, acc[r][0]);
                _mm256_storeu_ps(y + (i0 + r) * n + jb + 8, acc[r][1]);
            }
        }
    }
}
