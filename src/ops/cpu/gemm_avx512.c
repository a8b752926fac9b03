/*
 * gemm_avx512.c — AVX-512 (BF16 + VBMI) panel kernels for di_gemm.
 *
 * One 32-bit lane per output row; VDPBF16PS adds, per lane, the products of a
 * k-pair (odd element first, then even: the order ops.h specifies). The
 * activation k-pair is broadcast; the weight k-pairs of 16 rows are decoded
 * on the fly from the packed panels (gemm_layout.h, gemm_avx512.h).
 * Tiles are MR rows x NR panels (register-blocked accumulators); the
 * per-K-block sums are scaled by s_act * s_w (powers of two, so the product
 * and the fused add round exactly like the scalar kernel's mul + add).
 */
#include "ops/cpu/gemm_avx512.h"

/* ---- FP8 ------------------------------------------------------------------ */

AI void tile_fp8(const di_gemm_job *j, int m0, const int MR, int P0, const int NR, const fp8_tabs *t) {
    const di_wmat *W = j->W;
    const size_t K = (size_t)W->k, kb = (size_t)j->kb, B = (size_t)W->wblock;
    const uint8_t *wp[4];
    const uint16_t *ap[4];
    float swv[4];
    __m512 tot[4][4];
#pragma GCC unroll 4
    for (int jn = 0; jn < NR; jn++) wp[jn] = (const uint8_t *)W->data + (size_t)(P0 + jn) * (K / 4) * 64;
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        ap[i] = j->A + (size_t)(m0 + i) * j->lda;
#pragma GCC unroll 4
        for (int jn = 0; jn < NR; jn++) tot[i][jn] = _mm512_setzero_ps();
    }
    for (size_t k0 = 0; k0 < K; k0 += kb) {
        __m512 acc[4][4];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int jn = 0; jn < NR; jn++) acc[i][jn] = _mm512_setzero_ps();
        for (size_t k = k0; k < k0 + kb; k += 4) {
            __m512i z0[4], z1[4];
#pragma GCC unroll 4
            for (int jn = 0; jn < NR; jn++) fp8_decode(wp[jn] + (k / 4) * 64, t, &z0[jn], &z1[jn]);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++) {
                __m512i a0 = bcast_pair(ap[i] + k), a1 = bcast_pair(ap[i] + k + 2);
#pragma GCC unroll 4
                for (int jn = 0; jn < NR; jn++) acc[i][jn] = dp(dp(acc[i][jn], a0, z0[jn]), a1, z1[jn]);
            }
        }
#pragma GCC unroll 4
        for (int jn = 0; jn < NR; jn++) swv[jn] = W->scale[((size_t)(P0 + jn) * DI_PANEL / B) * (K / B) + k0 / B];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            float sa = j->sA[(size_t)(m0 + i) * (size_t)j->nsa + k0 / (size_t)j->act_block];
#pragma GCC unroll 4
            for (int jn = 0; jn < NR; jn++) tot[i][jn] = _mm512_fmadd_ps(acc[i][jn], _mm512_set1_ps(sa * swv[jn]), tot[i][jn]);
        }
    }
    store_tile(j, m0, MR, P0, NR, tot);
}

/* ---- FP4 ------------------------------------------------------------------ */

AI void tile_fp4(const di_gemm_job *j, int m0, const int MR, int P0, const int NR, const fp4_tabs *t) {
    const di_wmat *W = j->W;
    const size_t K = (size_t)W->k, nsb = K / 32;
    const uint8_t *wp[4];
    const float *sp[4];
    const uint16_t *ap[4];
    __m512 tot[4][4];
#pragma GCC unroll 4
    for (int jn = 0; jn < NR; jn++) {
        wp[jn] = (const uint8_t *)W->data + (size_t)(P0 + jn) * (K / 8) * 64;
        sp[jn] = W->scale + (size_t)(P0 + jn) * nsb * 16;
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        ap[i] = j->A + (size_t)(m0 + i) * j->lda;
#pragma GCC unroll 4
        for (int jn = 0; jn < NR; jn++) tot[i][jn] = _mm512_setzero_ps();
    }
    for (size_t k0 = 0; k0 < K; k0 += 32) {
        __m512 acc[4][4];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int jn = 0; jn < NR; jn++) acc[i][jn] = _mm512_setzero_ps();
#pragma GCC unroll 4
        for (size_t k = k0; k < k0 + 32; k += 8) {
#pragma GCC unroll 4
            for (int jn = 0; jn < NR; jn++) {
                __m512i z[4];
                fp4_decode(wp[jn] + (k / 8) * 64, t, z);
#pragma GCC unroll 4
                for (int i = 0; i < MR; i++) {
                    __m512 a = acc[i][jn];
                    a = dp(a, bcast_pair(ap[i] + k), z[0]);
                    a = dp(a, bcast_pair(ap[i] + k + 2), z[1]);
                    a = dp(a, bcast_pair(ap[i] + k + 4), z[2]);
                    a = dp(a, bcast_pair(ap[i] + k + 6), z[3]);
                    acc[i][jn] = a;
                }
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            __m512 sa = _mm512_set1_ps(j->sA[(size_t)(m0 + i) * (size_t)j->nsa + k0 / (size_t)j->act_block]);
#pragma GCC unroll 4
            for (int jn = 0; jn < NR; jn++) {
                __m512 s = _mm512_mul_ps(sa, _mm512_loadu_ps(sp[jn] + (k0 / 32) * 16));
                tot[i][jn] = _mm512_fmadd_ps(acc[i][jn], s, tot[i][jn]);
            }
        }
    }
    store_tile(j, m0, MR, P0, NR, tot);
}

/* ---- BF16 ----------------------------------------------------------------- */

AI void tile_bf16(const di_gemm_job *j, int m0, const int MR, int P0, const int NR) {
    const di_wmat *W = j->W;
    const size_t K = (size_t)W->k;
    const uint16_t *wp[4];
    const uint16_t *ap[4];
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int jn = 0; jn < NR; jn++) wp[jn] = (const uint16_t *)W->data + (size_t)(P0 + jn) * (K / 2) * 32;
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        ap[i] = j->A + (size_t)(m0 + i) * j->lda;
#pragma GCC unroll 4
        for (int jn = 0; jn < NR; jn++) acc[i][jn] = _mm512_setzero_ps();
    }
    for (size_t p = 0; p < K / 2; p++) {
        __m512i z[4];
#pragma GCC unroll 4
        for (int jn = 0; jn < NR; jn++) z[jn] = _mm512_loadu_si512(wp[jn] + p * 32);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            __m512i a = bcast_pair(ap[i] + 2 * p);
#pragma GCC unroll 4
            for (int jn = 0; jn < NR; jn++) acc[i][jn] = dp(acc[i][jn], a, z[jn]);
        }
    }
    store_tile(j, m0, MR, P0, NR, acc);
}

/* ---- F32 ------------------------------------------------------------------ */

AI void tile_f32(const di_gemm_job *j, int m0, const int MR, int P0, const int NR) {
    const di_wmat *W = j->W;
    const size_t K = (size_t)W->k;
    const float *wp[4];
    const uint16_t *ap[8];
    __m512 acc[8][4];
#pragma GCC unroll 4
    for (int jn = 0; jn < NR; jn++) wp[jn] = (const float *)W->data + (size_t)(P0 + jn) * K * 16;
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        ap[i] = j->A + (size_t)(m0 + i) * j->lda;
#pragma GCC unroll 4
        for (int jn = 0; jn < NR; jn++) acc[i][jn] = _mm512_setzero_ps();
    }
    size_t k = 0;
    /* 16 k at a time: the rows' activations converted to fp32 once, then
     * broadcast from memory into the multiply-adds (k in order, as ever) */
    float abuf[8][16] __attribute__((aligned(64)));
    for (; k + 16 <= K; k += 16) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
            _mm512_store_ps(abuf[i], _mm512_castsi512_ps(_mm512_slli_epi32(
                                         _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(ap[i] + k))), 16)));
        for (int kk = 0; kk < 16; kk++) {
            __m512 z[4];
#pragma GCC unroll 4
            for (int jn = 0; jn < NR; jn++) z[jn] = _mm512_loadu_ps(wp[jn] + (k + kk) * 16);
#pragma GCC unroll 8
            for (int i = 0; i < MR; i++) {
                __m512 a = _mm512_set1_ps(abuf[i][kk]);
#pragma GCC unroll 4
                for (int jn = 0; jn < NR; jn++) acc[i][jn] = _mm512_fmadd_ps(a, z[jn], acc[i][jn]);
            }
        }
    }
    for (; k < K; k++) {
        __m512 z[4];
#pragma GCC unroll 4
        for (int jn = 0; jn < NR; jn++) z[jn] = _mm512_loadu_ps(wp[jn] + k * 16);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m512 a = _mm512_set1_ps(di_bf16_to_f32(ap[i][k]));
#pragma GCC unroll 4
            for (int jn = 0; jn < NR; jn++) acc[i][jn] = _mm512_fmadd_ps(a, z[jn], acc[i][jn]);
        }
    }
    store_tile(j, m0, MR, P0, NR, acc);
}

/* ---- dispatch ------------------------------------------------------------- */

static void run_fp8(const di_gemm_job *j, int m0, int mr, int P0, int nr, const fp8_tabs *t) {
#define C8(a, b) tile_fp8(j, m0, a, P0, b, t)
    CASES(C8)
#undef C8
}

static void run_fp4(const di_gemm_job *j, int m0, int mr, int P0, int nr, const fp4_tabs *t) {
#define C4(a, b) tile_fp4(j, m0, a, P0, b, t)
    CASES(C4)
#undef C4
}

static void run_bf16(const di_gemm_job *j, int m0, int mr, int P0, int nr) {
#define CB(a, b) tile_bf16(j, m0, a, P0, b)
    CASES(CB)
#undef CB
}

static void run_f32(const di_gemm_job *j, int m0, int mr, int P0, int nr) {
    if (mr == 8) { /* skinny outputs (nr <= 2): 8 rows share each weight load */
        if (nr == 1) tile_f32(j, m0, 8, P0, 1);
        else tile_f32(j, m0, 8, P0, 2);
        return;
    }
    if (mr > 4) { /* the tail of 8-row tiles */
        run_f32(j, m0, 4, P0, nr);
        m0 += 4, mr -= 4;
    }
#define CF(a, b) tile_f32(j, m0, a, P0, b)
    CASES(CF)
#undef CF
}

void di_gemm_panels_avx512(const di_gemm_job *j, int p0, int p1) {
    fp8_tabs t8;
    fp4_tabs t4;
    di_wfmt fmt = j->W->fmt;
    if (fmt == DI_WFMT_FP8) make_fp8_tabs(&t8);
    if (fmt == DI_WFMT_FP4) make_fp4_tabs(&t4);
    const int NR = 4, MR = 4;
    for (int P = p0; P < p1; P += NR) {
        int nr = p1 - P < NR ? p1 - P : NR;
        int MRx = fmt == DI_WFMT_F32 && nr <= 2 && j->M >= 8 ? 8 : MR;
        for (int m0 = 0; m0 < j->M; m0 += MRx) {
            int mr = j->M - m0 < MRx ? j->M - m0 : MRx;
            switch (fmt) {
            case DI_WFMT_FP8: run_fp8(j, m0, mr, P, nr, &t8); break;
            case DI_WFMT_FP4: run_fp4(j, m0, mr, P, nr, &t4); break;
            case DI_WFMT_BF16: run_bf16(j, m0, mr, P, nr); break;
            case DI_WFMT_F32: run_f32(j, m0, mr, P, nr); break;
            }
        }
    }
}
