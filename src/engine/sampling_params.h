/*
 * sampling_params.h — per-request sampling parameters (the counterpart of
 * DeepInfer's / vLLM's SamplingParams) and their validation.
 *
 * Order of application in the sampler (sampler.h): penalties on the raw
 * logits → temperature → min_p → top_k → top_p → structured-output mask →
 * Gumbel-max with noise keyed by (seed, choice, absolute position).
 */
#ifndef DI_ENGINE_SAMPLING_PARAMS_H
#define DI_ENGINE_SAMPLING_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define DI_MAX_STOP_STRINGS 16
#define DI_MAX_STOP_IDS 64
#define DI_MAX_LOGPROBS 20

typedef struct di_sampling_params {
    float temperature;        /* 0 = greedy (argmax); default 1 */
    int32_t top_k;            /* 0 or -1 = disabled */
    float top_p;              /* (0, 1]; 1 = disabled */
    float min_p;              /* [0, 1]; 0 = disabled */
    float repetition_penalty; /* > 0; 1 = disabled (prompt + output tokens) */
    float presence_penalty;   /* [-2, 2]; 0 = disabled (output tokens) */
    float frequency_penalty;  /* [-2, 2]; 0 = disabled (output tokens) */
    int32_t max_tokens;       /* >= 1; default 16 */
    int32_t min_tokens;       /* 0 <= min_tokens <= max_tokens: EOS/stop ids masked before */
    int32_t n;                /* >= 1 independent samples */
    int ignore_eos;           /* do not stop at EOS */
    int has_seed;             /* seed below is set (else derived from the request id) */
    uint64_t seed;            /* seq_seed */
    int32_t logprobs;         /* number of top logprobs to return per token, 0..DI_MAX_LOGPROBS; -1 = none */
    const char *stop[DI_MAX_STOP_STRINGS]; /* stop strings (not owned) */
    int32_t n_stop;
    int32_t stop_ids[DI_MAX_STOP_IDS];
    int32_t n_stop_ids;
    /* Structured outputs: schema_type "regex" | "json" | "ebnf" and the schema
     * text (not owned); NULL = unconstrained. */
    const char *so_schema_type;
    const char *so_schema;
    int so_after_think;       /* constrain only after </think> (thinking mode) */
} di_sampling_params;

/* The defaults (temperature 1, max_tokens 16, everything else disabled). */
void di_sampling_params_default(di_sampling_params *p);

/* Check every field; on error the message names the field and the valid
 * range, e.g. "top_p must be in (0, 1], got 1.5". vocab_size bounds stop_ids. */
deepinfer_status di_sampling_params_validate(const di_sampling_params *p, int32_t vocab_size, di_error *err);

#endif
