/*
 * constrain.h — structured outputs in the engine: so_args compiled into a
 * grammar per request (src/structured/), one matcher per choice, and the
 * constrained sampling step.
 *
 *   request added   di_constrain_request: compile the request's so_args
 *                   against the tokenizer's vocabulary (built once, on first
 *                   use) and give each choice a matcher; a schema that does
 *                   not compile fails that request alone.
 *   each sample     di_constrain_sample, on the device side right after the
 *                   logits: the grammar's allowed tokens mask the candidates
 *                   (after penalties and min_tokens, before temperature and
 *                   the filters), the token is accepted into the matcher at
 *                   once (so the next step's sample sees it, as with the
 *                   sampled ids), and whether the grammar can go on is noted.
 *                   Sample-first fast path: when no filter depends on the
 *                   candidate set (greedy, or no top_k / top_p / min_p), the
 *                   unmasked winner is kept if the grammar allows it — the
 *                   same token the masked draw gives; otherwise the full mask.
 *
 * EOS is allowed exactly when the text is a complete match; start_after_think
 * leaves everything before </think> unconstrained.
 */
#ifndef DI_ENGINE_CONSTRAIN_H
#define DI_ENGINE_CONSTRAIN_H

#include <stdint.h>

#include "engine/request.h"
#include "engine/sampler.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"

typedef struct di_constrain {
    const di_tokenizer *tok;
    int32_t vocab;          /* the model's (padded) vocabulary */
    int32_t eos;            /* the model's EOS id, -1 if none */
    so_vocab *v;            /* built on first use */
} di_constrain;

void di_constrain_init(di_constrain *c, const di_tokenizer *tok, int32_t vocab, int32_t eos);
void di_constrain_free(di_constrain *c);

/* Compile r's so_args and create a matcher per choice (r owns them; freed by
 * di_request_free). Errors name so_args. No-op without so_args. */
deepinfer_status di_constrain_request(di_constrain *c, di_request *r, di_error *err);

/* Sample one token under `m` (see above). ctx->allow_mask is the base mask
 * (may be NULL); mask_scratch has room for the vocabulary's bits. On success
 * the token has been accepted by the matcher and *done tells whether the
 * grammar can take no further token. */
deepinfer_status di_constrain_sample(const float *logits, const di_sampling_params *p, const di_sample_context *ctx,
                                     so_matcher *m, di_sampler_scratch *s, uint32_t *mask_scratch,
                                     di_sample_result *out, int *done, di_error *err);

#endif
