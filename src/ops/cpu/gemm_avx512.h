/*
 * gemm_avx512.h — inline pieces shared by the AVX-512 GEMM kernels
 * (gemm_avx512.c: tiles that decode weights on the fly; gemm_pre_avx512.c:
 * tiles over weights decoded once per call). Internal to src/ops/cpu;
 * include only from files compiled with the AVX-512 flags.
 *
 * Weight decoding (exact: every e4m3 / e2m1 value is a bf16 value):
 *   e4m3 -> bf16: two 128-entry byte-table permutes (VPERMI2B) give the high
 *     and low bytes of the bf16 magnitude, the sign bit is merged in, and
 *     byte unpacks interleave them (the panel byte order makes the lanes come
 *     out in row order).
 *   e2m1 -> bf16: nibble masks, four 16-entry VPSHUFB lookups, unpacks.
 */
#ifndef DI_OPS_CPU_GEMM_AVX512_H
#define DI_OPS_CPU_GEMM_AVX512_H

#include <immintrin.h>
#include <string.h>

#include "io/numfmt.h"
#include "ops/cpu/gemm_kern.h"
#include "ops/cpu/gemm_layout.h"
#include "ops/cpu/simd_avx512.h"

#define AI static inline __attribute__((always_inline))

typedef struct fp8_tabs {
    __m512i h0, h1, l0, l1, sgn;
} fp8_tabs;

static inline void make_fp8_tabs(fp8_tabs *t) {
    uint8_t hi[128], lo[128];
    for (int i = 0; i < 128; i++) {
        uint16_t b = i == 0x7F ? 0x7FC0 : di_f32_to_bf16(di_e4m3_to_f32((uint8_t)i));
        hi[i] = (uint8_t)(b >> 8);
        lo[i] = (uint8_t)(b & 0xFF);
    }
    t->h0 = _mm512_loadu_si512(hi);
    t->h1 = _mm512_loadu_si512(hi + 64);
    t->l0 = _mm512_loadu_si512(lo);
    t->l1 = _mm512_loadu_si512(lo + 64);
    t->sgn = _mm512_set1_epi8((char)0x80);
}

AI void fp8_decode(const uint8_t *p, const fp8_tabs *t, __m512i *z0, __m512i *z1) {
    __m512i v = _mm512_loadu_si512(p);
    __m512i hi = _mm512_permutex2var_epi8(t->h0, v, t->h1);
    hi = _mm512_ternarylogic_epi32(hi, v, t->sgn, 0xF8); /* hi | (v & 0x80) */
    __m512i lo = _mm512_permutex2var_epi8(t->l0, v, t->l1);
    *z0 = _mm512_unpacklo_epi8(lo, hi);
    *z1 = _mm512_unpackhi_epi8(lo, hi);
}

typedef struct fp4_tabs {
    __m512i lo, hi, m0f;
} fp4_tabs;

static inline void make_fp4_tabs(fp4_tabs *t) {
    uint8_t lo[64], hi[64];
    for (int i = 0; i < 64; i++) {
        uint16_t b = di_f32_to_bf16(di_e2m1_to_f32((uint8_t)(i & 15)));
        lo[i] = (uint8_t)(b & 0xFF);
        hi[i] = (uint8_t)(b >> 8);
    }
    t->lo = _mm512_loadu_si512(lo);
    t->hi = _mm512_loadu_si512(hi);
    t->m0f = _mm512_set1_epi8(0x0F);
}

AI void fp4_decode(const uint8_t *p, const fp4_tabs *t, __m512i z[4]) {
    __m512i v = _mm512_loadu_si512(p);
    __m512i nlo = _mm512_and_si512(v, t->m0f);
    __m512i nhi = _mm512_and_si512(_mm512_srli_epi16(v, 4), t->m0f);
    __m512i a = _mm512_shuffle_epi8(t->lo, nlo), b = _mm512_shuffle_epi8(t->hi, nlo);
    __m512i c = _mm512_shuffle_epi8(t->lo, nhi), d = _mm512_shuffle_epi8(t->hi, nhi);
    __m512i e0 = _mm512_unpacklo_epi8(a, b), e1 = _mm512_unpackhi_epi8(a, b);
    __m512i o0 = _mm512_unpacklo_epi8(c, d), o1 = _mm512_unpackhi_epi8(c, d);
    z[0] = _mm512_unpacklo_epi16(e0, o0);
    z[1] = _mm512_unpackhi_epi16(e0, o0);
    z[2] = _mm512_unpacklo_epi16(e1, o1);
    z[3] = _mm512_unpackhi_epi16(e1, o1);
}

AI __m512i bcast_pair(const uint16_t *a) {
    uint32_t v;
    memcpy(&v, a, 4);
    return _mm512_set1_epi32((int)v);
}

AI __m512 dp(__m512 acc, __m512i a, __m512i w) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)w); }

AI void store_tile(const di_gemm_job *j, int m0, int mr, int P0, int nr, __m512 (*tot)[4]) {
    for (int i = 0; i < mr; i++)
        for (int jn = 0; jn < nr; jn++) {
            int n0 = (P0 + jn) * DI_PANEL, cnt = j->W->n - n0 < DI_PANEL ? j->W->n - n0 : DI_PANEL;
            __mmask16 m = (__mmask16)((1u << cnt) - 1);
            if (j->C16) _mm256_mask_storeu_epi16(j->C16 + (size_t)(m0 + i) * j->ldc + n0, m, di512_to_bf16(tot[i][jn]));
            else _mm512_mask_storeu_ps(j->C32 + (size_t)(m0 + i) * j->ldc + n0, m, tot[i][jn]);
        }
}

/* Dispatch of a tile macro CALL(MR, NR) on run-time mr, nr in 1..4. */
#define CASES(CALL)                                                                                       \
    switch (mr * 8 + nr) {                                                                                \
    case 8 + 1: CALL(1, 1); break;                                                                        \
    case 8 + 2: CALL(1, 2); break;                                                                        \
    case 8 + 3: CALL(1, 3); break;                                                                        \
    case 8 + 4: CALL(1, 4); break;                                                                        \
    case 16 + 1: CALL(2, 1); break;                                                                       \
    case 16 + 2: CALL(2, 2); break;                                                                       \
    case 16 + 3: CALL(2, 3); break;                                                                       \
    case 16 + 4: CALL(2, 4); break;                                                                       \
    case 24 + 1: CALL(3, 1); break;                                                                       \
    case 24 + 2: CALL(3, 2); break;                                                                       \
    case 24 + 3: CALL(3, 3); break;                                                                       \
    case 24 + 4: CALL(3, 4); break;                                                                       \
    case 32 + 1: CALL(4, 1); break;                                                                       \
    case 32 + 2: CALL(4, 2); break;                                                                       \
    case 32 + 3: CALL(4, 3); break;                                                                       \
    case 32 + 4: CALL(4, 4); break;                                                                       \
    default: break;                                                                                       \
    }

#endif
