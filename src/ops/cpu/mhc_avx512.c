/*
 * mhc_avx512.c — di_hc_sinkhorn for 16 tokens at once, one token per lane:
 * each lane performs mhc.c's scalar fp32 sequence (same operations, same
 * order, the same di_expf), so a token's pre/post/comb do not depend on
 * which tokens share the vector. The division-bound Sinkhorn loop then
 * costs one vector division where the scalar code does 16.
 */
#include "ops/cpu/elem.h"
#include "ops/cpu/simd_avx512.h"

#define HC 4

/* fmaxf(a, b) lane by lane, NaN handling included (max_ps alone returns b on NaN). */
static inline __m512 fmaxf16(__m512 a, __m512 b) {
    __m512 r = _mm512_max_ps(b, a); /* a when b is NaN */
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), b);
}

static inline __m512 sigmoid_of_neg(__m512 negz) { /* 1 / (1 + exp(-z)) given -z */
    return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), di512_expf(negz)));
}

void di_hc_sinkhorn16_avx512(const float *mixes, int n, const float *scale3, const float *base, int iters, float eps,
                             float *pre, float *post, float *comb) {
    __mmask16 live = (__mmask16)((1u << n) - 1);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i o24 = _mm512_mullo_epi32(lane, _mm512_set1_epi32(24)), o4 = _mm512_slli_epi32(lane, 2),
                  o16 = _mm512_slli_epi32(lane, 4);
    const __m512 neg = _mm512_set1_ps(-0.0f), ve = _mm512_set1_ps(eps);
    __m512 mx[24];
    for (int i = 0; i < 24; i++)
        mx[i] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, o24, mixes + i, 4);
    for (int j = 0; j < HC; j++) {
        __m512 z0 = _mm512_add_ps(_mm512_mul_ps(mx[j], _mm512_set1_ps(scale3[0])), _mm512_set1_ps(base[j]));
        __m512 z1 = _mm512_add_ps(_mm512_mul_ps(mx[j + HC], _mm512_set1_ps(scale3[1])), _mm512_set1_ps(base[j + HC]));
        __m512 p0 = _mm512_add_ps(sigmoid_of_neg(_mm512_xor_ps(z0, neg)), ve);
        __m512 p1 = _mm512_mul_ps(_mm512_set1_ps(2.0f), sigmoid_of_neg(_mm512_xor_ps(z1, neg)));
        _mm512_mask_i32scatter_ps(pre + j, live, o4, p0, 4);
        _mm512_mask_i32scatter_ps(post + j, live, o4, p1, 4);
    }
    __m512 c[HC][HC];
    for (int j = 0; j < HC; j++)
        for (int k = 0; k < HC; k++)
            c[j][k] = _mm512_add_ps(_mm512_mul_ps(mx[j * HC + k + 2 * HC], _mm512_set1_ps(scale3[2])),
                                    _mm512_set1_ps(base[j * HC + k + 2 * HC]));
    for (int j = 0; j < HC; j++) { /* row softmax + eps */
        __m512 m = c[j][0];
        for (int k = 1; k < HC; k++) m = fmaxf16(m, c[j][k]);
        __m512 s = _mm512_setzero_ps();
        for (int k = 0; k < HC; k++) {
            c[j][k] = di512_expf(_mm512_sub_ps(c[j][k], m));
            s = _mm512_add_ps(s, c[j][k]);
        }
        for (int k = 0; k < HC; k++) c[j][k] = _mm512_add_ps(_mm512_div_ps(c[j][k], s), ve);
    }
    for (int it = 0; it < iters; it++) {
        if (it > 0)
            for (int j = 0; j < HC; j++) {
                __m512 s = _mm512_setzero_ps();
                for (int k = 0; k < HC; k++) s = _mm512_add_ps(s, c[j][k]);
                s = _mm512_add_ps(s, ve);
                for (int k = 0; k < HC; k++) c[j][k] = _mm512_div_ps(c[j][k], s);
            }
        for (int k = 0; k < HC; k++) {
            __m512 s = _mm512_setzero_ps();
            for (int j = 0; j < HC; j++) s = _mm512_add_ps(s, c[j][k]);
            s = _mm512_add_ps(s, ve);
            for (int j = 0; j < HC; j++) c[j][k] = _mm512_div_ps(c[j][k], s);
        }
    }
    for (int j = 0; j < HC; j++)
        for (int k = 0; k < HC; k++) _mm512_mask_i32scatter_ps(comb + j * HC + k, live, o16, c[j][k], 4);
}
