/*
 * attention_avx512.c — the sparse-attention row kernel of attention.c with
 * AVX-512 BF16: per block of 64 entries, a head's logits are 16 dot
 * products at a time (VDPBF16PS over the head dimension, then the 16 lane
 * trees together, di512_tree16), the exponentials are vectorised, and P.V
 * keeps 128 output columns of a head in registers while it walks the
 * block's entries in order. Every value goes through attention.c's fp32
 * operations in the same order (so the results are bit-identical): the
 * logit scaling, the running max, p = exp(l - M'), the sequential fp32
 * sum, den = den * a + sum, o *= a, o += bf16(p) * v entry by entry
 * (skipping p == 0 and absent entries), out = bf16(o / (den + exp(sink - M))).
 */
#include <math.h>

#include "ops/cpu/attn_kern.h"
#include "ops/cpu/simd_avx512.h"

#define BLOCK 64

static inline float exp1(float x) { return _mm512_cvtss_f32(di512_expf(_mm512_set1_ps(x))); }

/* Dot-product accumulators (before the lane tree) of q with 16 entries;
 * absent ones (NULL) give zeros and a clear bit in *valid. */
static inline void dots16(const uint16_t *qh, int hd, const uint16_t *const *k, int cnt, __m512 acc[16],
                          __mmask16 *valid) {
    __mmask16 v = 0;
    for (int jj = 0; jj < 16; jj++) {
        acc[jj] = _mm512_setzero_ps();
        if (jj < cnt && k[jj]) v |= (__mmask16)(1u << jj);
    }
    *valid = v;
    if (hd == 128) { /* q in registers, four entries' chains interleaved */
        __m512i q0 = _mm512_loadu_si512(qh), q1 = _mm512_loadu_si512(qh + 32);
        __m512i q2 = _mm512_loadu_si512(qh + 64), q3 = _mm512_loadu_si512(qh + 96);
        for (int jj = 0; jj < 16; jj += 4) {
            if (!((v >> jj) & 15)) continue;
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) {
                if (!((v >> (jj + u)) & 1)) continue;
                const uint16_t *kj = k[jj + u];
                __m512 a = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)q0, (__m512bh)_mm512_loadu_si512(kj));
                a = _mm512_dpbf16_ps(a, (__m512bh)q1, (__m512bh)_mm512_loadu_si512(kj + 32));
                a = _mm512_dpbf16_ps(a, (__m512bh)q2, (__m512bh)_mm512_loadu_si512(kj + 64));
                acc[jj + u] = _mm512_dpbf16_ps(a, (__m512bh)q3, (__m512bh)_mm512_loadu_si512(kj + 96));
            }
        }
        return;
    }
    for (int jj = 0; jj < 16; jj++) {
        if (!((v >> jj) & 1)) continue;
        __m512 a = _mm512_setzero_ps();
        for (int s = 0; s < hd; s += 32)
            a = _mm512_dpbf16_ps(a, (__m512bh)_mm512_loadu_si512(qh + s), (__m512bh)_mm512_loadu_si512(k[jj] + s));
        acc[jj] = a;
    }
}

/* Logits of entries [b0, b0 + bn) for one head into lg (absent entries -inf);
 * returns their max (NaN logits ignored, like the scalar `l > bmax`). */
static float block_logits(const uint16_t *qh, int hd, const uint16_t *const *kv, int b0, int bn, float scale,
                          float *lg) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int j0 = 0; j0 < bn; j0 += 16) {
        __m512 acc[16];
        __mmask16 valid;
        dots16(qh, hd, kv + b0 + j0, bn - j0, acc, &valid);
        __m512 l = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), valid, di512_tree16(acc), _mm512_set1_ps(scale));
        vmax = _mm512_max_ps(l, vmax);
        _mm512_storeu_ps(lg + j0, l);
    }
    return _mm512_reduce_max_ps(vmax);
}

/* oh[0 .. 16 NV) += pr[j] * v_j[d0 .. d0 + 16 NV) for the block's entries in
 * order (pr: the bf16-rounded probabilities), in registers. */
static inline __attribute__((always_inline)) void pv_chunk(float *oh, const uint16_t *const *kv, const float *pr, int bn,
                                                           int d0, const int NV) {
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < NV; t++) acc[t] = _mm512_loadu_ps(oh + 16 * t);
    for (int j = 0; j < bn; j++) {
        const uint16_t *v = kv[j];
        if (!v || pr[j] == 0.0f) continue;
        __m512 vp = _mm512_set1_ps(pr[j]);
#pragma GCC unroll 8
        for (int t = 0; t < NV; t++) acc[t] = _mm512_fmadd_ps(vp, di512_load_bf16(v + d0 + 16 * t), acc[t]);
    }
#pragma GCC unroll 8
    for (int t = 0; t < NV; t++) _mm512_storeu_ps(oh + 16 * t, acc[t]);
}

void di_attend_avx512(const uint16_t *q, int nh, int hd, const uint16_t *const *kv, int n, const float *sink,
                      float scale, uint16_t *out, float *o /* [nh][hd] scratch */) {
    float mx[DI_ATTN_HGROUP], den[DI_ATTN_HGROUP];
    float lg[DI_ATTN_HGROUP][BLOCK] __attribute__((aligned(64)));
    for (int h = 0; h < nh; h++) {
        mx[h] = -INFINITY;
        den[h] = 0.0f;
        for (int d = 0; d < hd; d += 16) _mm512_storeu_ps(o + (size_t)h * hd + d, _mm512_setzero_ps());
    }
    for (int b0 = 0; b0 < n; b0 += BLOCK) {
        int bn = n - b0 < BLOCK ? n - b0 : BLOCK;
        for (int h = 0; h < nh; h++) {
            float *l = lg[h];
            float bmax = block_logits(q + (size_t)h * hd, hd, kv, b0, bn, scale, l);
            float nmax = bmax > mx[h] ? bmax : mx[h];
            float a = 1.0f, sum = 0.0f;
            if (nmax == -INFINITY) {
                for (int j = 0; j < bn; j++) l[j] = 0.0f;
            } else {
                __m512 vm = _mm512_set1_ps(nmax);
                for (int j = 0; j < bn; j += 16) _mm512_storeu_ps(l + j, di512_expf(_mm512_sub_ps(_mm512_loadu_ps(l + j), vm)));
                a = exp1(mx[h] - nmax);
                for (int j = 0; j < bn; j++) sum += l[j];
            }
            den[h] = den[h] * a + sum;
            mx[h] = nmax;
            __m512 va = _mm512_set1_ps(a);
            float *oh = o + (size_t)h * hd;
            for (int d = 0; d < hd; d += 16) _mm512_storeu_ps(oh + d, _mm512_mul_ps(_mm512_loadu_ps(oh + d), va));
        }
        /* P.V: 128 columns of one head in registers, entries in order */
        for (int h = 0; h < nh; h++) {
            float pr[BLOCK] __attribute__((aligned(64)));
            for (int j = 0; j < bn; j += 16) _mm512_storeu_ps(pr + j, di512_round_bf16(_mm512_loadu_ps(lg[h] + j)));
            int d0 = 0;
            for (; d0 + 128 <= hd; d0 += 128) {
                pv_chunk(o + (size_t)h * hd + d0, kv + b0, pr, bn, d0, 8);
            }
            for (; d0 < hd; d0 += 16) {
                pv_chunk(o + (size_t)h * hd + d0, kv + b0, pr, bn, d0, 1);
            }
        }
    }
    for (int h = 0; h < nh; h++) {
        __m512 d = _mm512_set1_ps(den[h] + exp1(sink[h] - mx[h]));
        for (int i = 0; i < hd; i += 16)
            di512_store_bf16(out + (size_t)h * hd + i, _mm512_div_ps(_mm512_loadu_ps(o + (size_t)h * hd + i), d));
    }
}
