/*
 * norm_avx512.c — AVX-512 kernels for the row normalisations (norm.c,
 * mhc.c). The reductions are sequential in index order per row, so they are
 * vectorised across rows: 16 rows are loaded 16 columns at a time and
 * transposed, and lane l then runs exactly the scalar loop of row l (same
 * operations, same order). Element-wise output passes are vectorised along
 * the row. Sizes: multiples of 16.
 */
#include "ops/cpu/norm_kern.h"
#include "ops/cpu/simd_avx512.h"

void di_sumsq16_avx512(const uint16_t *const rows[16], int D, double ss[16]) {
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    __m512 t[16];
    for (int i0 = 0; i0 < D; i0 += 16) {
        di512_load_bf16_t16(rows, i0, t);
        for (int c = 0; c < 16; c++) {
            __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(t[c]));
            __m512d b = _mm512_cvtps_pd(_mm512_extractf32x8_ps(t[c], 1));
            lo = _mm512_add_pd(lo, _mm512_mul_pd(a, a));
            hi = _mm512_add_pd(hi, _mm512_mul_pd(b, b));
        }
    }
    _mm512_storeu_pd(ss, lo);
    _mm512_storeu_pd(ss + 8, hi);
}

void di_rmsnorm_out_avx512(const uint16_t *x, const float *w, int D, float r, uint16_t *y) {
    __m512 vr = _mm512_set1_ps(r);
    for (int i = 0; i < D; i += 16) {
        __m512 v = _mm512_mul_ps(di512_load_bf16(x + i), vr);
        if (w) v = _mm512_mul_ps(_mm512_loadu_ps(w + i), v);
        di512_store_bf16(y + i, v);
    }
}

void di_head_rmsnorm16_avx512(uint16_t *const seqs[16], int n, int hd, float eps) {
    __m512 s = _mm512_setzero_ps(), t[16];
    for (int i0 = 0; i0 < hd; i0 += 16) {
        di512_load_bf16_t16((const uint16_t *const *)seqs, i0, t);
        for (int c = 0; c < 16; c++) s = _mm512_add_ps(s, di512_round_bf16(_mm512_mul_ps(t[c], t[c])));
    }
    __m512 mean = di512_round_bf16(_mm512_div_ps(s, _mm512_set1_ps((float)hd)));
    __m512 tt = di512_round_bf16(_mm512_add_ps(mean, _mm512_set1_ps(eps)));
    __m512 r = di512_round_bf16(_mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(tt)));
    float rv[16];
    _mm512_storeu_ps(rv, r);
    for (int l = 0; l < n; l++) {
        __m512 vr = _mm512_set1_ps(rv[l]);
        for (int i = 0; i < hd; i += 16) di512_store_bf16(seqs[l] + i, _mm512_mul_ps(di512_load_bf16(seqs[l] + i), vr));
    }
}
