/* Exhaustive tests of the number formats against double-precision references. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/numfmt.h"
#include "test.h"
#include "util/cpu.h"

static double ref_e4m3(unsigned b) {
    unsigned s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    double v = e == 0 ? ldexp((double)m, -9) : ldexp(1.0 + m / 8.0, (int)e - 7);
    return s ? -v : v;
}

static const double k_e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

/* Reference encoder: nearest finite value by exhaustive search; ties go to
 * the even code; saturate beyond the largest. */
static unsigned ref_encode(double x, int fmt /* 0 = e4m3, 1 = e2m1 */) {
    int ncodes = fmt ? 8 : 127; /* positive codes: e4m3 0..126, e2m1 0..7 */
    unsigned sign = signbit(x) ? (fmt ? 8u : 0x80u) : 0u;
    double a = fabs(x);
    unsigned best = 0;
    double bestd = INFINITY;
    for (int c = 0; c < ncodes; c++) {
        double v = fmt ? k_e2m1[c] : ref_e4m3((unsigned)c);
        double d = fabs(v - a);
        if (d < bestd || (d == bestd && (c & 1) == 0)) {
            bestd = d;
            best = (unsigned)c;
        }
    }
    return sign | best;
}

static int same_float(float a, float b) {
    if (isnan(a) && isnan(b)) return 1;
    return di_f32_bits(a) == di_f32_bits(b);
}

TEST(e4m3_decode_all_256) {
    for (unsigned b = 0; b < 256; b++) {
        double r = ref_e4m3(b);
        float v = di_e4m3_to_f32((uint8_t)b);
        if (isnan(r)) CHECK_MSG(isnan(v), "byte %u should be NaN", b);
        else CHECK_MSG((double)v == r && (signbit(v) != 0) == ((b & 0x80) != 0), "byte %u: %g vs %g", b, v, r);
    }
    CHECK(di_e4m3_to_f32(0x7E) == 448.0f);
    CHECK(di_e4m3_to_f32(0x01) == ldexpf(1.0f, -9));
    CHECK(di_e4m3_to_f32(0x08) == ldexpf(1.0f, -6));
}

TEST(e4m3_encode_roundtrip_all_codes) {
    for (unsigned b = 0; b < 256; b++) {
        if ((b & 0x7F) == 0x7F) continue;
        CHECK_MSG(di_f32_to_e4m3(di_e4m3_to_f32((uint8_t)b)) == b, "code %u", b);
    }
    CHECK_EQ_INT(di_f32_to_e4m3(NAN), 0x7F);
}

TEST(e4m3_encode_rne_midpoints_and_neighbours) {
    /* Every midpoint between adjacent codes, and just around it. */
    for (unsigned c = 0; c < 126; c++) {
        double lo = ref_e4m3(c), hi = ref_e4m3(c + 1);
        double mid = (lo + hi) / 2;
        float fm = (float)mid; /* midpoints are exactly representable in fp32 */
        CHECK((double)fm == mid);
        unsigned want = (c & 1) ? c + 1 : c;
        CHECK_MSG(di_f32_to_e4m3(fm) == want, "midpoint %g between codes %u,%u", mid, c, c + 1);
        CHECK_MSG(di_f32_to_e4m3(-fm) == (0x80 | want), "negative midpoint %g", mid);
        CHECK_MSG(di_f32_to_e4m3(nextafterf(fm, 0)) == c, "below midpoint %g", mid);
        CHECK_MSG(di_f32_to_e4m3(nextafterf(fm, 1e9f)) == c + 1, "above midpoint %g", mid);
    }
    CHECK_EQ_INT(di_f32_to_e4m3(463.99f), 0x7E);
    CHECK_EQ_INT(di_f32_to_e4m3(1e30f), 0x7E);
    CHECK_EQ_INT(di_f32_to_e4m3(-1e30f), 0xFE);
    CHECK_EQ_INT(di_f32_to_e4m3(INFINITY), 0x7E);
}

TEST(e4m3_encode_matches_reference_random) {
    srand(12345);
    for (int i = 0; i < 300000; i++) {
        /* log-uniform magnitudes over the whole range incl. subnormals and saturation */
        double e = -14.0 + 24.0 * (rand() / (double)RAND_MAX);
        float x = (float)(ldexp(1.0, 0) * pow(2.0, e));
        if (rand() & 1) x = -x;
        unsigned got = di_f32_to_e4m3(x), want = ref_encode(x, 0);
        CHECK_MSG(got == want, "x=%.9g: got 0x%02x want 0x%02x", x, got, want);
    }
}

TEST(e2m1_decode_and_encode_exhaustive) {
    for (unsigned n = 0; n < 16; n++) {
        double r = (n & 8 ? -1 : 1) * k_e2m1[n & 7];
        CHECK((double)di_e2m1_to_f32((uint8_t)n) == r);
        CHECK_EQ_INT(di_f32_to_e2m1(di_e2m1_to_f32((uint8_t)n)), n);
    }
    /* The ties listed in architecture.md §3.5. */
    const float ties[][2] = {{0.25f, 0}, {0.75f, 1}, {1.25f, 1}, {1.75f, 2}, {2.5f, 2}, {3.5f, 4}, {5.0f, 4}, {7.0f, 6}, {100.0f, 6}};
    for (size_t i = 0; i < sizeof ties / sizeof ties[0]; i++) {
        CHECK_MSG(di_e2m1_to_f32(di_f32_to_e2m1(ties[i][0])) == ties[i][1], "%g -> %g", ties[i][0], ties[i][1]);
        CHECK_MSG(di_e2m1_to_f32(di_f32_to_e2m1(-ties[i][0])) == -ties[i][1], "-%g", ties[i][0]);
    }
    srand(7);
    for (int i = 0; i < 200000; i++) {
        float x = (float)((rand() / (double)RAND_MAX) * 16.0 - 8.0);
        CHECK_MSG(di_f32_to_e2m1(x) == ref_encode(x, 1), "x=%.9g", x);
    }
    /* Every float between 0 and 8 at a fine grid, including exact midpoints. */
    for (int k = 0; k <= 8 * 1024; k++) {
        float x = (float)k / 1024.0f;
        CHECK_MSG(di_f32_to_e2m1(x) == ref_encode(x, 1), "grid x=%.9g", x);
    }
}

TEST(e8m0_all_256) {
    for (unsigned b = 0; b < 255; b++) CHECK_MSG((double)di_e8m0_to_f32((uint8_t)b) == ldexp(1.0, (int)b - 127), "b=%u", b);
    CHECK(isnan(di_e8m0_to_f32(0xFF)));
    CHECK(di_e8m0_to_f32(127) == 1.0f);
}

TEST(bf16_conversions) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = di_bf16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        CHECK_MSG(di_f32_to_bf16(f) == h, "bf16 0x%04x round trip", h);
    }
    /* RNE at exact midpoints: 1 + 2^-8 lies between 1 and 1 + 2^-7. */
    CHECK_EQ_INT(di_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3F80);              /* tie -> even (1.0) */
    CHECK_EQ_INT(di_f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3F82);          /* tie -> even (1+2^-6) */
    CHECK_EQ_INT(di_f32_to_bf16(nextafterf(1.0f + ldexpf(1.0f, -8), 2)), 0x3F81);
    CHECK(isnan(di_bf16_to_f32(di_f32_to_bf16(NAN))));
    srand(99);
    for (int i = 0; i < 200000; i++) {
        uint32_t u = ((uint32_t)rand() << 16) ^ (uint32_t)rand();
        float f = di_bits_f32(u);
        if (isnan(f) || isinf(f)) continue;
        /* reference: nearest bf16 in double arithmetic, ties to even */
        uint16_t lo = (uint16_t)(u >> 16);
        double vlo = fabs((double)di_bf16_to_f32(lo));
        double vhi = fabs((double)di_bf16_to_f32((uint16_t)(lo + 1)));
        if (isinf(vhi)) vhi = ldexp(1.0, 128); /* IEEE: overflow threshold is the midpoint to 2^128 */
        f = fabsf(f);
        u &= 0x7FFFFFFFu;
        lo &= 0x7FFF;
        double d1 = fabs((double)f - vlo), d2 = fabs((double)f - vhi);
        uint16_t want = (d1 < d2 || (d1 == d2 && !(lo & 1))) ? lo : (uint16_t)(lo + 1);
        CHECK_MSG(di_f32_to_bf16(f) == want, "bits 0x%08x", u);
    }
}

TEST(pow2_ceil_from_bits) {
    CHECK(di_pow2_ceil(1.0f) == 1.0f);
    CHECK(di_pow2_ceil(1.0000001f) == 2.0f);
    CHECK(di_pow2_ceil(0.75f) == 1.0f);
    CHECK(di_pow2_ceil(448.0f / 448.0f) == 1.0f);
    CHECK(di_pow2_ceil(1e-4f * (1.0f / 448.0f)) == ldexpf(1.0f, -22));
    srand(3);
    for (int i = 0; i < 100000; i++) {
        float t = (float)ldexp(1.0 + rand() / (double)RAND_MAX, (rand() % 200) - 100);
        double want = ldexp(1.0, (int)ceil(log2((double)t)));
        /* log2 of an exact power of two is exact in double */
        CHECK_MSG((double)di_pow2_ceil(t) == want, "t=%.9g", t);
    }
}

static void fill_random(uint8_t *p, size_t n, unsigned seed) {
    srand(seed);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rand() & 0xFF);
}

TEST(vectorised_dequant_bit_identical_on_every_isa) {
    enum { R = 67, C = 96, B = 32 };
    uint8_t w[R * C], sc[((R + B - 1) / B) * (C / B)], p4[R * C / 2], s4[R * C / 32];
    uint16_t h[1000];
    fill_random(w, sizeof w, 1);
    for (size_t i = 0; i < sizeof sc; i++) sc[i] = (uint8_t)(110 + i % 30);
    fill_random(p4, sizeof p4, 2);
    for (size_t i = 0; i < sizeof s4; i++) s4[i] = (uint8_t)(100 + i % 50);
    for (size_t i = 0; i < 1000; i++) h[i] = (uint16_t)(i * 65.537);
    for (unsigned i = 0; i < 256; i++) w[i] = (uint8_t)i; /* every code incl. NaN */
    static float ref8[R * C], ref4[R * C], refh[1000], got[R * C];
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++)
            ref8[r * C + c] = di_e4m3_to_f32(w[r * C + c]) * di_e8m0_to_f32(sc[(r / B) * (C / B) + c / B]);
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) {
            uint8_t byte = p4[r * (C / 2) + c / 2];
            ref4[r * C + c] = di_e2m1_to_f32((c & 1) ? byte >> 4 : byte & 15) * di_e8m0_to_f32(s4[r * (C / 32) + c / 32]);
        }
    for (size_t i = 0; i < 1000; i++) refh[i] = di_bf16_to_f32(h[i]);
    for (int isa = DI_ISA_SCALAR; isa <= (int)di_cpu_isa_hw(); isa++) {
        di_cpu_set_isa((di_isa)isa);
        di_dequant_fp8_block(w, sc, R, C, B, got);
        for (size_t i = 0; i < R * C; i++) CHECK_MSG(same_float(got[i], ref8[i]), "%s fp8 i=%zu", di_isa_name((di_isa)isa), i);
        di_dequant_fp4_rows(p4, s4, R, C, got);
        for (size_t i = 0; i < R * C; i++) CHECK_MSG(same_float(got[i], ref4[i]), "%s fp4 i=%zu", di_isa_name((di_isa)isa), i);
        di_bf16_to_f32_n(h, 1000, got);
        for (size_t i = 0; i < 1000; i++) CHECK_MSG(same_float(got[i], refh[i]), "%s bf16 i=%zu", di_isa_name((di_isa)isa), i);
        /* Extreme scales: the largest and smallest e8m0 values must not overflow differently. */
        uint8_t big[40];
        for (int k = 0; k < 40; k++) big[k] = (uint8_t)(0x70 + k % 14);
        float g2[40];
        uint8_t s_hi = 254, s_lo = 0;
        di_dequant_fp8_block(big, &s_hi, 1, 40, 64, g2);
        for (int k = 0; k < 40; k++) CHECK(same_float(g2[k], di_e4m3_to_f32(big[k]) * ldexpf(1.0f, 127)));
        di_dequant_fp8_block(big, &s_lo, 1, 40, 64, g2);
        for (int k = 0; k < 40; k++) CHECK(same_float(g2[k], di_e4m3_to_f32(big[k]) * ldexpf(1.0f, -127)));
    }
    di_cpu_set_isa(DI_ISA_AVX512);
}
