/*
 * numpy_rng.h — an independent re-implementation, for tests only, of the
 * numpy draws that define the Engram hash multipliers (architecture.md §5.8):
 * `numpy.random.default_rng(seed).integers(0, bound, size=n)`, i.e.
 * SeedSequence(seed) -> 4 x uint64 of state -> PCG64 (128-bit LCG, XSL-RR
 * output) -> Lemire's bounded draw on uint64. Written from numpy's documented
 * algorithms (SeedSequence's hash mixing, PCG64 seeding, bounded integers), so
 * the test derives the constants instead of repeating the source's literals.
 * Included by tests/model/test_engram_hash.c only.
 */
#ifndef DI_TESTS_NUMPY_RNG_H
#define DI_TESTS_NUMPY_RNG_H

#include <stdint.h>

typedef unsigned __int128 np_u128;

/* SeedSequence's 32-bit hash of one word; the running constant advances per call. */
static inline uint32_t np_hashmix(uint32_t v, uint32_t *hc) {
    v ^= *hc;
    *hc *= 0x931e8875u;
    v *= *hc;
    return v ^ (v >> 16);
}

static inline uint32_t np_mix(uint32_t x, uint32_t y) {
    uint32_t r = 0xca01f9ddu * x - 0x4973f715u * y;
    return r ^ (r >> 16);
}

/* SeedSequence(entropy = seed < 2^32).generate_state(4, uint64). */
static inline void np_seed_state(uint32_t seed, uint64_t out[4]) {
    uint32_t pool[4], hc = 0x43b0d7e5u;
    for (int i = 0; i < 4; i++) pool[i] = np_hashmix(i == 0 ? seed : 0u, &hc);
    for (int s = 0; s < 4; s++)
        for (int d = 0; d < 4; d++)
            if (s != d) pool[d] = np_mix(pool[d], np_hashmix(pool[s], &hc));
    uint32_t w[8], hb = 0x8b51f9ddu;
    for (int i = 0; i < 8; i++) {
        uint32_t v = pool[i % 4] ^ hb;
        hb *= 0x58f38dedu;
        v *= hb;
        w[i] = v ^ (v >> 16);
    }
    for (int i = 0; i < 4; i++) out[i] = (uint64_t)w[2 * i] | (uint64_t)w[2 * i + 1] << 32;
}

typedef struct np_pcg64 {
    np_u128 state, inc;
} np_pcg64;

static inline void np_pcg64_step(np_pcg64 *g) {
    const np_u128 mult = ((np_u128)2549297995355413924ull << 64) | 4865540595714422341ull;
    g->state = g->state * mult + g->inc;
}

/* PCG64(SeedSequence(seed)): state words 0..1 the initial state, 2..3 the stream (high word first). */
static inline np_pcg64 np_pcg64_seed(uint32_t seed) {
    uint64_t v[4];
    np_seed_state(seed, v);
    np_pcg64 g = {0, (((np_u128)v[2] << 64) | v[3]) << 1 | 1u};
    np_pcg64_step(&g);
    g.state += ((np_u128)v[0] << 64) | v[1];
    np_pcg64_step(&g);
    return g;
}

static inline uint64_t np_pcg64_next(np_pcg64 *g) {
    np_pcg64_step(g);
    uint64_t x = (uint64_t)(g->state >> 64) ^ (uint64_t)g->state;
    unsigned rot = (unsigned)(g->state >> 122);
    return (x >> rot) | (x << ((64 - rot) & 63));
}

/* Generator.integers(0, bound) for bound > 2^32 (the uint64 path): Lemire's multiply-shift with rejection. */
static inline int64_t np_integers(np_pcg64 *g, uint64_t bound) {
    np_u128 m = (np_u128)np_pcg64_next(g) * bound;
    uint64_t left = (uint64_t)m;
    if (left < bound) {
        uint64_t threshold = (UINT64_MAX - (bound - 1)) % bound;
        while (left < threshold) {
            m = (np_u128)np_pcg64_next(g) * bound;
            left = (uint64_t)m;
        }
    }
    return (int64_t)(m >> 64);
}

/* The spec's multipliers of one Engram layer: default_rng(10007 * layer).integers(0, (INT64_MAX // classes) // 2, n) * 2 + 1. */
static inline void np_engram_multipliers(int32_t layer, int64_t classes, int n, int64_t *out) {
    np_pcg64 g = np_pcg64_seed((uint32_t)(10007 * layer));
    uint64_t bound = (uint64_t)((INT64_MAX / classes) / 2);
    for (int i = 0; i < n; i++) out[i] = np_integers(&g, bound) * 2 + 1;
}

#endif
