/*
 * gemm_avx2.c — AVX2+FMA panel kernels for di_gemm (machines without
 * AVX512_BF16). Weights of one panel and K-block are decoded to fp32 once per
 * group of up to 32 rows (tiles of 4 rows accumulate from it), then each lane accumulates with FMAs in the order of
 * ops.h (k-pairs in order, odd element first). Products of e4m3/e2m1/bf16
 * values are exact in fp32, so fma(a, w, acc) rounds exactly like the
 * AVX-512 VDPBF16PS path and the scalar kernel: all three agree bit for bit.
 */
#include <immintrin.h>

#include "io/numfmt.h"
#include "ops/cpu/gemm_kern.h"
#include "ops/cpu/gemm_layout.h"

#define MR 4
#define KCH 128 /* columns decoded at a time (a K-block is decoded in pieces of at most KCH) */
#define GR 32   /* rows that share one decoded chunk */

/* Decode columns [k0, k0 + nk) of panel P into wf[nk][16] (no scales). */
static void decode(const di_wmat *W, size_t P, size_t k0, size_t nk, float *wf) {
    size_t K = (size_t)W->k;
    switch (W->fmt) {
    case DI_WFMT_FP8: {
        const uint8_t *c = (const uint8_t *)W->data + P * (K / 4) * 64;
        for (size_t k = k0; k < k0 + nk; k++) {
            const uint8_t *ch = c + (k / 4) * 64;
            for (int l = 0; l < 16; l++) wf[(k - k0) * 16 + (size_t)l] = di_e4m3_table[ch[di_fp8_pos(l, (int)(k % 4))]];
        }
        break;
    }
    case DI_WFMT_FP4: {
        const uint8_t *c = (const uint8_t *)W->data + P * (K / 8) * 64;
        for (size_t k = k0; k < k0 + nk; k += 2) {
            size_t p = k / 2;
            const uint8_t *ch = c + (p / 4) * 64;
            for (int l = 0; l < 16; l++) {
                uint8_t b = ch[di_fp4_pos(l, (int)(p % 4))];
                wf[(k - k0) * 16 + (size_t)l] = di_e2m1_table[b & 15];
                wf[(k + 1 - k0) * 16 + (size_t)l] = di_e2m1_table[b >> 4];
            }
        }
        break;
    }
    case DI_WFMT_BF16: {
        const uint16_t *c = (const uint16_t *)W->data + P * (K / 2) * 32;
        for (size_t k = k0; k < k0 + nk; k += 2) {
            const uint16_t *pr = c + (k / 2) * 32;
            for (int l = 0; l < 16; l++) {
                wf[(k - k0) * 16 + (size_t)l] = di_bf16_to_f32(pr[2 * l]);
                wf[(k + 1 - k0) * 16 + (size_t)l] = di_bf16_to_f32(pr[2 * l + 1]);
            }
        }
        break;
    }
    case DI_WFMT_F32: break; /* read in place */
    }
}

/* acc[i][0..1] += pairs of columns [0, nk) of wf, odd element first. */
static inline void pairs(int mr, const uint16_t *const *ap, size_t k0, size_t nk, const float *wf, __m256 acc[MR][2]) {
    for (size_t k = 0; k < nk; k += 2) {
        __m256 w1l = _mm256_loadu_ps(wf + (k + 1) * 16), w1h = _mm256_loadu_ps(wf + (k + 1) * 16 + 8);
        __m256 w0l = _mm256_loadu_ps(wf + k * 16), w0h = _mm256_loadu_ps(wf + k * 16 + 8);
        for (int i = 0; i < mr; i++) {
            __m256 a1 = _mm256_set1_ps(di_bf16_to_f32(ap[i][k0 + k + 1]));
            __m256 a0 = _mm256_set1_ps(di_bf16_to_f32(ap[i][k0 + k]));
            acc[i][0] = _mm256_fmadd_ps(a0, w0l, _mm256_fmadd_ps(a1, w1l, acc[i][0]));
            acc[i][1] = _mm256_fmadd_ps(a0, w0h, _mm256_fmadd_ps(a1, w1h, acc[i][1]));
        }
    }
}

/* Rows [m0, m0 + gr) (gr <= GR) of panel P. Each decoded chunk of weights
 * serves all gr rows, in tiles of MR; a row's operations are the same
 * whatever gr is (batch invariance), only the decoding is shared. */
static void group(const di_gemm_job *j, int m0, int gr, size_t P, float *wf) {
    const di_wmat *W = j->W;
    size_t K = (size_t)W->k;
    const uint16_t *ap[GR];
    __m256 tot[GR][2], acc[GR][2];
    for (int i = 0; i < gr; i++) {
        ap[i] = j->A + (size_t)(m0 + i) * j->lda;
        tot[i][0] = tot[i][1] = _mm256_setzero_ps();
    }
    if (W->fmt == DI_WFMT_F32) {
        const float *w = (const float *)W->data + P * K * 16;
        for (size_t k = 0; k < K; k++) {
            __m256 wl = _mm256_loadu_ps(w + k * 16), wh = _mm256_loadu_ps(w + k * 16 + 8);
            for (int i = 0; i < gr; i++) {
                __m256 a = _mm256_set1_ps(di_bf16_to_f32(ap[i][k]));
                tot[i][0] = _mm256_fmadd_ps(a, wl, tot[i][0]);
                tot[i][1] = _mm256_fmadd_ps(a, wh, tot[i][1]);
            }
        }
    } else if (W->fmt == DI_WFMT_BF16) {
        for (size_t k0 = 0; k0 < K; k0 += KCH) {
            size_t nk = K - k0 < KCH ? K - k0 : KCH;
            decode(W, P, k0, nk, wf);
            for (int t = 0; t < gr; t += MR) pairs(gr - t < MR ? gr - t : MR, ap + t, k0, nk, wf, tot + t);
        }
    } else {
        size_t kb = (size_t)j->kb, nsb = K / 32;
        size_t B = (size_t)W->wblock;
        for (size_t k0 = 0; k0 < K; k0 += kb) {
            for (int i = 0; i < gr; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
            for (size_t off = 0; off < kb; off += KCH) {
                size_t nk = kb - off < KCH ? kb - off : KCH;
                decode(W, P, k0 + off, nk, wf);
                for (int t = 0; t < gr; t += MR) pairs(gr - t < MR ? gr - t : MR, ap + t, k0 + off, nk, wf, acc + t);
            }
            __m256 swl, swh;
            if (W->fmt == DI_WFMT_FP8) {
                swl = swh = _mm256_set1_ps(W->scale[(P * DI_PANEL / B) * (K / B) + k0 / B]);
            } else {
                swl = _mm256_loadu_ps(W->scale + (P * nsb + k0 / 32) * 16);
                swh = _mm256_loadu_ps(W->scale + (P * nsb + k0 / 32) * 16 + 8);
            }
            for (int i = 0; i < gr; i++) {
                __m256 sa = _mm256_set1_ps(j->sA[(size_t)(m0 + i) * (size_t)j->nsa + k0 / (size_t)j->act_block]);
                tot[i][0] = _mm256_fmadd_ps(acc[i][0], _mm256_mul_ps(sa, swl), tot[i][0]);
                tot[i][1] = _mm256_fmadd_ps(acc[i][1], _mm256_mul_ps(sa, swh), tot[i][1]);
            }
        }
    }
    float v[16];
    for (int i = 0; i < gr; i++) {
        _mm256_storeu_ps(v, tot[i][0]);
        _mm256_storeu_ps(v + 8, tot[i][1]);
        di_gemm_store(j, m0 + i, (int)P, v);
    }
}

void di_gemm_panels_avx2(const di_gemm_job *j, int p0, int p1) {
    float wf[KCH * 16];
    for (int P = p0; P < p1; P++)
        for (int m0 = 0; m0 < j->M; m0 += GR) group(j, m0, j->M - m0 < GR ? j->M - m0 : GR, (size_t)P, wf);
}
