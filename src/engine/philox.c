#include "engine/philox.h"

#include "io/numfmt.h"

#include <math.h>
#include <string.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void di_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* log(x) = e*ln2 + log(m), m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(s),
 * s = (m-1)/(m+1), |s| <= 0.1716, odd series to s^13 (truncation < 1e-10). */
float di_log_det(float x) {
    uint32_t u = di_f32_bits(x);
    int e = (int)((u >> 23) & 0xFF) - 127;
    float m = di_bits_f32((u & 0x007FFFFFu) | 0x3F800000u); /* [1, 2) */
    if (m > 1.41421356f) {
        m = m * 0.5f;
        e += 1;
    }
    float s = (m - 1.0f) / (m + 1.0f);
    float s2 = s * s;
    float p = fmaf(s2, 0.0769230769f, 0.0909090909f); /* 1/13, 1/11 */
    p = fmaf(s2, p, 0.111111111f);
    p = fmaf(s2, p, 0.142857143f);
    p = fmaf(s2, p, 0.2f);
    p = fmaf(s2, p, 0.333333333f);
    p = fmaf(s2, p, 1.0f);
    float logm = 2.0f * s * p;
    /* e*ln2 split into hi + lo for accuracy. */
    float fe = (float)e;
    return fmaf(fe, 0.693145752f, fmaf(fe, 1.42860677e-06f, logm));
}

float di_gumbel_from_bits(uint32_t x) {
    float u = di_uniform_open24(x);
    float l = di_log_det(u);  /* < 0 */
    return -di_log_det(-l);   /* -l > 0 */
}

/* Counter layout: (vocab block = id/4, position lo, position hi, purpose);
 * key = (seed lo ^ stream * golden, seed hi). Lane = id % 4. */
static void make_key(uint64_t seed, uint32_t stream, uint32_t key[2]) {
    key[0] = (uint32_t)seed ^ (stream * 0x9E3779B9u);
    key[1] = (uint32_t)(seed >> 32) ^ (stream * 0x85EBCA6Bu);
}

void di_gumbel_row(uint64_t seed, uint32_t stream, uint64_t position, uint32_t purpose, size_t n, float *out) {
    uint32_t key[2];
    make_key(seed, stream, key);
    uint32_t ctr[4] = {0, (uint32_t)position, (uint32_t)(position >> 32), purpose};
    uint32_t r[4];
    for (size_t b = 0; b * 4 < n; b++) {
        ctr[0] = (uint32_t)b;
        di_philox4x32_10(ctr, key, r);
        for (size_t l = 0; l < 4 && b * 4 + l < n; l++) out[b * 4 + l] = di_gumbel_from_bits(r[l]);
    }
}

float di_gumbel_at(uint64_t seed, uint32_t stream, uint64_t position, uint32_t purpose, uint32_t vocab_id) {
    uint32_t key[2];
    make_key(seed, stream, key);
    uint32_t ctr[4] = {vocab_id / 4, (uint32_t)position, (uint32_t)(position >> 32), purpose};
    uint32_t r[4];
    di_philox4x32_10(ctr, key, r);
    return di_gumbel_from_bits(r[vocab_id % 4]);
}
