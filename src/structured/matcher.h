/*
 * matcher.h — the API the sampler uses: one matcher per request, over a
 * grammar compiled once (and shareable by many requests).
 *
 *   so_compile(vocab, &args, &g)           compile (so_args.h)
 *   so_matcher_new(g, &opts, &m)           per request
 *   each step:
 *     sampled = sample(logits)             sample-first fast path:
 *     if (!so_matcher_try_token(m, sampled)) {
 *         so_matcher_fill_mask(m, mask)    full mask only on rejection
 *         apply mask to logits; sampled = sample(masked logits)
 *     }
 *     so_matcher_accept_token(m, sampled)
 *   speculative decoding: accept draft tokens, so_matcher_rollback(m, n)
 *   for the rejected ones.
 *
 * Masks are bitmaps over the padded vocabulary (vocab->n_words uint32 words,
 * bit t of word t/32 = token t allowed). EOS ids are allowed exactly when the
 * text so far is a complete match; padding ids and special tokens never are.
 * With think_end_id >= 0 nothing is constrained until that token (e.g.
 * DeepSeek's `</think>`) has been accepted.
 *
 * A matcher is not thread-safe; different matchers may run concurrently.
 */
#ifndef DI_STRUCTURED_MATCHER_H
#define DI_STRUCTURED_MATCHER_H

#include <stdint.h>

#include "structured/mask.h"

typedef struct so_matcher_opts {
    int32_t think_end_id; /* -1: constrain from the first token */
} so_matcher_opts;

typedef struct so_matcher {
    const so_grammar *g;
    so_parser p;
    so_pstate *hist;      /* parser state before each accepted token */
    uint8_t *hist_mode;   /* started | finished << 1 before each token */
    uint32_t nhist, histcap;
    int started, finished;
    int32_t think_end_id;
    so_mask_stats stats;
} so_matcher;

deepinfer_status so_matcher_new(const so_grammar *g, const so_matcher_opts *opts, so_matcher **out, di_error *err);
void so_matcher_free(so_matcher *m);

/* Back to the state before the first token. */
void so_matcher_reset(so_matcher *m);

/* Fill the allowed-token bitmap. */
deepinfer_status so_matcher_fill_mask(so_matcher *m, uint32_t *mask, di_error *err);

/* 1 if token `id` is allowed now (state unchanged). */
int so_matcher_try_token(so_matcher *m, int32_t id);

/* Advance by token `id`; DEEPINFER_ERR_INVALID_ARGUMENT (state unchanged)
 * if it is not allowed. */
deepinfer_status so_matcher_accept_token(so_matcher *m, int32_t id, di_error *err);

/* Advance by raw bytes (e.g. a forced prefix); same rules as tokens. */
deepinfer_status so_matcher_accept_bytes(so_matcher *m, const uint8_t *s, size_t n, di_error *err);

/* Undo the last n accepted tokens (n <= so_matcher_num_tokens). */
deepinfer_status so_matcher_rollback(so_matcher *m, uint32_t n, di_error *err);

uint32_t so_matcher_num_tokens(const so_matcher *m);

/* 1 if the text so far is a complete match (EOS would be accepted). */
int so_matcher_is_accepting(const so_matcher *m);

/* 1 after an EOS token was accepted, or when no further token is possible
 * and the text is complete. */
int so_matcher_is_finished(const so_matcher *m);

#endif
