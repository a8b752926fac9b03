#include "engine/sampling_params.h"

#include <math.h>
#include <string.h>

void di_sampling_params_default(di_sampling_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->max_tokens = 16;
    p->n = 1;
    p->logprobs = -1;
    p->prompt_logprobs = -1;
    p->skip_special_tokens = 1;
    p->so_whitespace_max = -1;
}

void deepinfer_sampling_params_init(deepinfer_sampling_params *p) { di_sampling_params_default(p); }

deepinfer_status di_sampling_params_validate(const di_sampling_params *p, int32_t vocab_size, di_error *err) {
    const deepinfer_status E = DEEPINFER_ERR_INVALID_ARGUMENT;
    if (!(p->temperature >= 0.0f) || !isfinite(p->temperature))
        return di_error_set(err, E, "temperature must be a finite number >= 0, got %g", p->temperature);
    if (p->top_k < -1) return di_error_set(err, E, "top_k must be -1, 0 (disabled) or positive, got %d", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) return di_error_set(err, E, "top_p must be in (0, 1], got %g", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) return di_error_set(err, E, "min_p must be in [0, 1], got %g", p->min_p);
    if (!(p->repetition_penalty > 0.0f) || !isfinite(p->repetition_penalty))
        return di_error_set(err, E, "repetition_penalty must be a finite number > 0, got %g", p->repetition_penalty);
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f))
        return di_error_set(err, E, "presence_penalty must be in [-2, 2], got %g", p->presence_penalty);
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
        return di_error_set(err, E, "frequency_penalty must be in [-2, 2], got %g", p->frequency_penalty);
    if (p->max_tokens < 1) return di_error_set(err, E, "max_tokens must be >= 1, got %d", p->max_tokens);
    if (p->min_tokens < 0 || p->min_tokens > p->max_tokens)
        return di_error_set(err, E, "min_tokens must be in [0, max_tokens=%d], got %d", p->max_tokens, p->min_tokens);
    if (p->n < 1 || p->n > 1024) return di_error_set(err, E, "n must be in [1, 1024], got %d", p->n);
    if (p->logprobs < -1 || p->logprobs > DI_MAX_LOGPROBS)
        return di_error_set(err, E, "logprobs must be in [0, %d] (or -1 for none), got %d", DI_MAX_LOGPROBS, p->logprobs);
    if (p->prompt_logprobs < -1 || p->prompt_logprobs > DI_MAX_LOGPROBS)
        return di_error_set(err, E, "prompt_logprobs must be in [0, %d] (or -1 for none), got %d", DI_MAX_LOGPROBS,
                            p->prompt_logprobs);
    if (p->n_stop < 0 || p->n_stop > DI_MAX_STOP_STRINGS)
        return di_error_set(err, E, "at most %d stop strings are allowed, got %d", DI_MAX_STOP_STRINGS, p->n_stop);
    for (int i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0]) return di_error_set(err, E, "stop[%d] must be a non-empty string", i);
    if (p->n_stop_ids < 0 || p->n_stop_ids > DI_MAX_STOP_IDS)
        return di_error_set(err, E, "at most %d stop ids are allowed, got %d", DI_MAX_STOP_IDS, p->n_stop_ids);
    for (int i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] < 0 || p->stop_ids[i] >= vocab_size)
            return di_error_set(err, E, "stop_token_ids[%d] = %d is outside the vocabulary [0, %d)", i, p->stop_ids[i],
                                vocab_size);
    if (p->so_schema_type) {
        if (strcmp(p->so_schema_type, "regex") && strcmp(p->so_schema_type, "json") && strcmp(p->so_schema_type, "ebnf"))
            return di_error_set(err, E, "so_args.schema_type must be \"regex\", \"json\" or \"ebnf\", got \"%s\"",
                                p->so_schema_type);
        if (!p->so_schema) return di_error_set(err, E, "so_args.schema is missing");
        if (p->so_whitespace_max < -1)
            return di_error_set(err, E, "so_args.whitespace_max must be >= 0 (or -1 for the default), got %d",
                                p->so_whitespace_max);
    }
    return DEEPINFER_OK;
}
