/*
 * sampler.h — the deterministic sampler: one logits row in, one token out.
 *
 * No stateful RNG. The noise for vocabulary id v when sampling the token at
 * absolute position p of a request is Gumbel(Philox(seed, choice, p, purpose)[v])
 * (philox.h), so the token depends only on the logits, the parameters, the
 * seed and the position — not on the batch, the schedule, preemption or
 * speculative decoding. Token = argmax over allowed ids of z_v + g_v with
 * z = processed logits / temperature; ties go to the lowest id. Temperature 0
 * is plain argmax (ties to the lowest id).
 *
 * Processing order: penalties on the raw logits (repetition over prompt and
 * output tokens, presence/frequency over output tokens) → min_tokens masks
 * EOS and stop ids → structured-output allow mask → temperature → min_p
 * (keep z_v >= z_max + ln min_p) → top_k (by z desc, id asc) → top_p over the
 * renormalised survivors (smallest prefix by z desc, id asc whose probability
 * mass reaches top_p) → Gumbel-max. Reductions run in a fixed order (double
 * precision, ascending ids), so rows are batch-invariant by construction.
 *
 * Logprobs are those of the raw model distribution (log_softmax of the
 * unprocessed logits), the convention of vLLM's default "raw_logprobs";
 * they are computed only when params.logprobs >= 0 (else logprob is 0).
 */
#ifndef DI_ENGINE_SAMPLER_H
#define DI_ENGINE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/sampling_params.h"
#include "util/error.h"

/* Noise purposes (Philox counter word 3): keep distinct streams apart. */
enum { DI_NOISE_TARGET = 0, DI_NOISE_DRAFT = 1, DI_NOISE_COIN = 2 };

/* Per-call context: the sequence history and where the token goes. */
typedef struct di_sample_context {
    const int32_t *prompt_ids; /* for the repetition penalty */
    size_t n_prompt;
    const int32_t *output_ids; /* generated so far (all penalties, min_tokens) */
    size_t n_output;
    uint64_t seed;             /* request seed (already derived when unseeded) */
    uint32_t stream;           /* choice index for n > 1 */
    uint64_t position;         /* absolute position of the token being sampled */
    uint32_t purpose;          /* DI_NOISE_* */
    const uint32_t *allow_mask; /* bit v set = id v allowed; NULL = all */
    int32_t eos_id;            /* masked while n_output < min_tokens (-1: none) */
} di_sample_context;

typedef struct di_sample_result {
    int32_t token;
    float logprob;                      /* raw log-probability of `token` */
    int32_t n_top;                      /* = params.logprobs when > 0 */
    int32_t top_ids[DI_MAX_LOGPROBS];   /* by logprob desc, id asc */
    float top_logprobs[DI_MAX_LOGPROBS];
} di_sample_result;

/* Scratch sized for one vocabulary, allocated once (no allocation per call). */
typedef struct di_sampler_scratch {
    int32_t vocab;
    float *z;          /* processed logits */
    int32_t *cand;     /* candidate ids */
    int32_t *heap;     /* selection heap */
    uint16_t *counts;  /* output-token counts (saturating) */
    uint8_t *seen;     /* repetition marks */
} di_sampler_scratch;

deepinfer_status di_sampler_scratch_init(di_sampler_scratch *s, int32_t vocab, di_error *err);
void di_sampler_scratch_free(di_sampler_scratch *s);

/* The raw logprobs of one row (log_softmax of `logits` in double precision, rounded to float):
 * *logprob = that of `token`; with k in 1..DI_MAX_LOGPROBS also the k best ids by logit desc, id asc
 * (NaN logits skipped; *n_top < k only then). The sampler's logprobs and prompt logprobs use it. */
void di_raw_logprobs(const float *logits, int32_t V, int32_t token, int32_t k, float *logprob, int32_t *top_ids,
                     float *top_logprobs, int32_t *n_top);

/* Sample one token from `logits` (vocab entries). Params must have been
 * validated. Errors: a row without any finite allowed logit. */
deepinfer_status di_sample_row(const float *logits, const di_sampling_params *p, const di_sample_context *ctx,
                               di_sampler_scratch *s, di_sample_result *out, di_error *err);

#endif
