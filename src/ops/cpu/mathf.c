/* mathf.c — di_expf (mathf.h), scalar version and dispatch. */
#include "ops/cpu/mathf.h"

#include <math.h>
#include <string.h>

#include "util/cpu.h"

const double di_expf_tab[32] = {
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0,
};

float di_expf(float x) {
    if (x != x) return x;
    double xd = x < -150.0f ? -150.0 : x > 100.0f ? 100.0 : (double)x;
    double z = xd * DI_EXPF_INVLN2N;
    double kd = (z + DI_EXPF_SHIFT) - DI_EXPF_SHIFT;
    double r = z - kd;
    int64_t k = (int64_t)kd;
    double p = fma(DI_EXPF_C5, r, DI_EXPF_C4);
    p = fma(p, r, DI_EXPF_C3);
    p = fma(p, r, DI_EXPF_C2);
    p = fma(p, r, DI_EXPF_C1);
    p = fma(p, r, 1.0);
    uint64_t tb;
    memcpy(&tb, &di_expf_tab[k & 31], 8);
    tb += (uint64_t)((k - (k & 31)) / 32) << 52; /* * 2^floor(k/32): exact, never subnormal in double */
    double t;
    memcpy(&t, &tb, 8);
    return (float)(t * p);
}

void di_expf_n(const float *x, float *y, int n) {
    if (di_cpu_isa() == DI_ISA_AVX512) {
        di_expf_n_avx512(x, y, n);
        return;
    }
    for (int i = 0; i < n; i++) y[i] = di_expf(x[i]);
}
