/*
 * engram_fp8_avx512.c — AVX-512 kernel of Engram's private FP8 GEMM: 16
 * outputs at a time, the 16 per-output block vectors reduced together by a
 * transpose-add tree whose order is exactly the scalar block_dot of
 * engram_fp8.c (see engram_fp8.h), so results are bit-identical.
 */
#include <immintrin.h>
#include <math.h>

#include "io/numfmt.h"
#include "model/engram_fp8.h"

#define ROW_TILE 32 /* activation rows sharing one converted weight tile */

/* 32 e4m3 bytes -> 32 exact fp32 values (via f16: e4m3 << 7 is e4m3 · 2^-8). */
static inline void cvt32(const uint8_t *in, __m512 *lo, __m512 *hi) {
    const __m512i m80 = _mm512_set1_epi16(0x80), m7f = _mm512_set1_epi16(0x7F);
    const __m512 k256 = _mm512_set1_ps(256.0f), vnan = _mm512_set1_ps(NAN);
    __m512i x = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)in));
    __m512i mag = _mm512_and_si512(x, m7f);
    __m512i h = _mm512_or_si512(_mm512_slli_epi16(_mm512_and_si512(x, m80), 8), _mm512_slli_epi16(mag, 7));
    __mmask32 isnan = _mm512_cmpeq_epi16_mask(mag, m7f);
    *lo = _mm512_mask_mov_ps(_mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), k256),
                             (__mmask16)(isnan & 0xFFFF), vnan);
    *hi = _mm512_mask_mov_ps(_mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), k256),
                             (__mmask16)(isnan >> 16), vnan);
}

/* Slot of output o in the reduction tree: the tree leaves lane l holding
 * slot SIGMA[l] (an involution), so output o goes to slot SIGMA[o]. */
static const int SIGMA[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};

/* r[o] = P of vector v[SIGMA[o]] where v holds l[0..15] of each output. */
static inline __m512 reduce16(__m512 v[16]) {
    __m512 u[8], z[4], s[2];
    for (int i = 0; i < 8; i++) /* t8 */
        u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[i], v[i + 8], 0x44), _mm512_shuffle_f32x4(v[i], v[i + 8], 0xEE));
    for (int i = 0; i < 4; i++) /* t4 */
        z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[i], u[i + 4], 0x88), _mm512_shuffle_f32x4(u[i], u[i + 4], 0xDD));
    for (int i = 0; i < 2; i++) { /* t2 */
        __m512d a = _mm512_castps_pd(z[i]), b = _mm512_castps_pd(z[i + 2]);
        s[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    return _mm512_add_ps(_mm512_shuffle_ps(s[0], s[1], _MM_SHUFFLE(2, 0, 2, 0)), /* t1 */
                         _mm512_shuffle_ps(s[0], s[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

void di_engram_fp8_gemm16_avx512(const float *xq, const float *sx, int64_t m, const uint8_t *w,
                                 const uint8_t *wscale, int n, int k, int j0, int groups, float *y) {
    const int nb = k / DI_ENGRAM_QBLOCK;
    __m512 wt[16][2];
    __m512 acc[ROW_TILE];
    for (int64_t i0 = 0; i0 < m; i0 += ROW_TILE) {
        const int rows = m - i0 < ROW_TILE ? (int)(m - i0) : ROW_TILE;
        for (int g = 0; g < groups; g++) {
            const int jb = j0 + 16 * g;
            const uint8_t *srow = wscale + (int64_t)(jb / DI_ENGRAM_QBLOCK) * nb;
            for (int r = 0; r < rows; r++) acc[r] = _mm512_setzero_ps();
            for (int b = 0; b < nb; b++) {
                for (int o = 0; o < 16; o++)
                    cvt32(w + (int64_t)(jb + o) * k + b * DI_ENGRAM_QBLOCK, &wt[SIGMA[o]][0], &wt[SIGMA[o]][1]);
                const float sw = di_e8m0_to_f32(srow[b]);
                for (int r = 0; r < rows; r++) {
                    const float *xr = xq + (i0 + r) * k + b * DI_ENGRAM_QBLOCK;
                    const __m512 xlo = _mm512_loadu_ps(xr), xhi = _mm512_loadu_ps(xr + 16);
                    __m512 v[16];
                    for (int s = 0; s < 16; s++)
                        v[s] = _mm512_fmadd_ps(wt[s][1], xhi, _mm512_mul_ps(wt[s][0], xlo));
                    const __m512 p = reduce16(v);
                    const float scale = sx[(i0 + r) * nb + b] * sw;
                    acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(p, _mm512_set1_ps(scale)));
                }
            }
            for (int r = 0; r < rows; r++) _mm512_storeu_ps(y + (i0 + r) * n + jb, acc[r]);
        }
    }
}
