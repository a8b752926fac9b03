/* di_gemm's activation quantisation (AVX-512 rows kernel) against a
 * reference built from numfmt's exhaustively tested e4m3 encoder: every
 * finite bf16 value, in blocks whose maxima (hence scales) vary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "ops/cpu/gemm_kern.h"
#include "test.h"
#include "util/cpu.h"

TEST(act_quant_rows_match_e4m3_reference_on_every_bf16) {
    if (di_cpu_isa_hw() != DI_ISA_AVX512) SKIP("no AVX-512 on this CPU: the kernel under test cannot run");
    enum { BLK = 32, K = 64 };
    int n = 0;
    uint16_t *vals = malloc(2 * 65536);
    for (int b = 0; b < 65536; b++)
        if ((b & 0x7F80) != 0x7F80) vals[n++] = (uint16_t)b; /* finite */
    int M = (n + K - 1) / K;
    uint16_t *A = calloc((size_t)M * K, 2), *q = malloc(2 * (size_t)M * K);
    float *s = malloc(sizeof(float) * (size_t)M * (K / BLK));
    /* shuffle so each block mixes magnitudes (a few blocks stay all-tiny) */
    uint32_t r = 99;
    for (int i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        int j = (int)(r % (uint32_t)(i + 1));
        uint16_t t = vals[i];
        vals[i] = vals[j], vals[j] = t;
    }
    memcpy(A, vals, 2 * (size_t)n);
    for (int i = 0; i < 3 * BLK; i++) A[i] = di_f32_to_bf16(ldexpf((float)(i % 7), -130 + i % 11)); /* tiny blocks */
    di_act_quant_rows_avx512(A, K, M, K, BLK, q, K, s, K / BLK);
    int bad = 0;
    for (int m = 0; m < M && bad < 5; m++)
        for (int b = 0; b < K / BLK; b++) {
            const uint16_t *x = A + (size_t)m * K + b * BLK;
            float amax = 0.0f;
            for (int i = 0; i < BLK; i++) amax = fmaxf(amax, fabsf(di_bf16_to_f32(x[i])));
            if (!(amax >= 1e-4f)) amax = 1e-4f;
            float sc = di_pow2_ceil(amax * (float)(1.0 / 448.0));
            if (s[(size_t)m * (K / BLK) + b] != sc) bad++;
            for (int i = 0; i < BLK; i++) {
                float v = fminf(fmaxf(di_bf16_to_f32(x[i]) / sc, -448.0f), 448.0f);
                uint16_t want = (uint16_t)(di_f32_bits(di_round_e4m3(v)) >> 16);
                if (v == 0.0f) want = (uint16_t)(di_f32_bits(v) >> 16); /* the sign of zero is kept */
                if (q[(size_t)m * K + b * BLK + i] != want && bad++ < 5)
                    fprintf(stderr, "    x %a / s %a: got %04x want %04x\n", (double)di_bf16_to_f32(x[i]), (double)sc,
                            q[(size_t)m * K + b * BLK + i], want);
            }
        }
    CHECK_EQ_INT(bad, 0);
    free(vals), free(A), free(q), free(s);
}
