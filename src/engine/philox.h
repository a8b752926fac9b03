/*
 * philox.h — Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
 * as 1, 2, 3", SC'11), the counter-based generator behind deterministic
 * sampling: noise is a pure function of (key, counter), so a request's random
 * numbers depend only on its seed, the absolute position and the vocabulary
 * id — never on the batch, the schedule or speculative decoding.
 *
 * The Gumbel transform below uses only IEEE-754 single-precision adds,
 * multiplies and fused multiply-adds, in a fixed order, so the CPU and CUDA
 * backends produce bit-identical noise.
 */
#ifndef DI_ENGINE_PHILOX_H
#define DI_ENGINE_PHILOX_H

#include <stddef.h>
#include <stdint.h>

/* One Philox4x32-10 block: out = philox(ctr, key). */
void di_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Uniform in the open interval (0, 1) from the top 24 bits: (x>>8 + 0.5) / 2^24. */
static inline float di_uniform_open24(uint32_t x) { return ((float)(x >> 8) + 0.5f) * (1.0f / 16777216.0f); }

/* Natural log for x > 0, finite, normal: error under 3 ulp; bit-reproducible
 * (no libm). */
float di_log_det(float x);

/* Standard Gumbel sample -log(-log(u)) from 32 random bits (deterministic). */
float di_gumbel_from_bits(uint32_t x);

/* The noise stream of the sampler: Gumbel noise for vocabulary ids
 * [0, n) of one (seed, stream, position, purpose) tuple, written to out.
 * stream = request-local choice index (n > 1 sampling); purpose separates
 * target samples, draft proposals, etc. (see sampler.h). */
void di_gumbel_row(uint64_t seed, uint32_t stream, uint64_t position, uint32_t purpose, size_t n, float *out);

/* Gumbel noise of a single vocabulary id (same value di_gumbel_row gives). */
float di_gumbel_at(uint64_t seed, uint32_t stream, uint64_t position, uint32_t purpose, uint32_t vocab_id);

#endif
