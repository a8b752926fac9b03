/*
 * mathf.h — the engine's own fp32 exponential, used by the CPU ops instead
 * of libm's expf so that results depend on no library version and the
 * scalar and vector paths agree bit for bit (internal to src/ops/cpu).
 *
 * di_expf(x): x (NaN passes through) is clamped to [-150, 100] and
 * evaluated in double: k = round(x * 32/ln2), r = x * 32/ln2 - k,
 * exp(x) = 2^(k/32) * p(r) with the 32-entry table 2^(j/32) and the degree-5
 * Taylor polynomial of 2^(r/32) (|r| <= 1/2, truncation error < 2^-48),
 * one double product, then one rounding to fp32. Measured over all 2^32
 * inputs (docs/cpu-backend.md §3): within 0.5 ulp of exp(x) (+ double-rounding
 * slack) and correctly rounded on all but 4 of the 4.28e9 non-NaN inputs;
 * it differs from glibc 2.36's expf on 0.004% of inputs (where glibc is
 * off by its documented 0.502 ulp); the AVX-512 version returns the same
 * bits for every input (tests/ops/cpu/test_mathf.c samples this).
 */
#ifndef DI_OPS_CPU_MATHF_H
#define DI_OPS_CPU_MATHF_H

#include <stdint.h>

/* The constants shared by the scalar and vector versions. */
#define DI_EXPF_INVLN2N 0x1.71547652b82fep+5 /* 32 / ln 2 */
#define DI_EXPF_SHIFT 0x1.8p52               /* round-to-integer shift */
#define DI_EXPF_C1 0x1.62e42fefa39efp-6      /* (ln2/32)^i / i! */
#define DI_EXPF_C2 0x1.ebfbdff82c58fp-13
#define DI_EXPF_C3 0x1.c6b08d704a0c0p-20
#define DI_EXPF_C4 0x1.3b2ab6fba4e77p-27
#define DI_EXPF_C5 0x1.5d87fe78a6731p-35
extern const double di_expf_tab[32]; /* 2^(j/32), correctly rounded */

float di_expf(float x);

/* y[i] = di_expf(x[i]) for n values (AVX-512 when available; in place allowed). */
void di_expf_n(const float *x, float *y, int n);
void di_expf_n_avx512(const float *x, float *y, int n);

#endif
