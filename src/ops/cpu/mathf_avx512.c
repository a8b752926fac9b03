/* mathf_avx512.c — di_expf_n with the AVX-512 di_expf (simd_avx512.h). */
#include "ops/cpu/mathf.h"
#include "ops/cpu/simd_avx512.h"

void di_expf_n_avx512(const float *x, float *y, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, di512_expf(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, di512_expf(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
