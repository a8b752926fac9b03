/*
 * sampling_params.h — per-request sampling parameters (the counterpart of
 * DeepInfer's / vLLM's SamplingParams) and their validation.
 *
 * Order of application in the sampler (sampler.h): penalties on the raw
 * logits → min_tokens mask → structured-output mask → temperature → min_p →
 * top_k → top_p → Gumbel-max with noise keyed by (seed, choice, absolute
 * position).
 */
#ifndef DI_ENGINE_SAMPLING_PARAMS_H
#define DI_ENGINE_SAMPLING_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define DI_MAX_STOP_STRINGS DEEPINFER_MAX_STOP_STRINGS
#define DI_MAX_STOP_IDS DEEPINFER_MAX_STOP_IDS
#define DI_MAX_LOGPROBS DEEPINFER_MAX_LOGPROBS

/* The struct is public (deepinfer_sampling_params in deepinfer.h, where each
 * field is documented); the engine uses it under its internal name. */
typedef deepinfer_sampling_params di_sampling_params;

/* The defaults (temperature 1, max_tokens 16, n 1, logprobs -1, prompt_logprobs -1,
 * skip_special_tokens 1, everything else disabled). */
void di_sampling_params_default(di_sampling_params *p);

/* Check every field; on error the message names the field and the valid
 * range, e.g. "top_p must be in (0, 1], got 1.5". vocab_size bounds stop_ids. */
deepinfer_status di_sampling_params_validate(const di_sampling_params *p, int32_t vocab_size, di_error *err);

#endif
