/*
 * outputs.h — what a sampled token does to a choice's output: detokenize it
 * incrementally (never a broken UTF-8 character), match stop strings across
 * piece boundaries (the matched text and anything after it is trimmed), and
 * decide whether the choice finishes:
 *
 *   EOS (unless ignore_eos)             → eos,    token kept, no text
 *   a stop token id                     → stop,   token kept, no text
 *   a stop string (once n >= min_tokens)→ stop,   text cut before the match
 *   max_tokens outputs                  → length
 *   prompt + outputs = max_model_len    → length
 *
 * On finishing, held-back text is released (an incomplete character at the
 * very end becomes U+FFFD) unless a stop string cut the text.
 */
#ifndef DI_ENGINE_OUTPUTS_H
#define DI_ENGINE_OUTPUTS_H

#include "engine/request.h"

typedef struct di_output_ctx {
    const di_tokenizer *tok;  /* NULL: no text */
    char *piece;              /* scratch for one token's text */
    size_t piece_cap;
    int64_t max_model_len;
} di_output_ctx;

/* Take the token the device wrote at out_ids[n_out] into the output.
 * Returns the finish reason, or DEEPINFER_FINISH_NONE to continue;
 * DEEPINFER_FINISH_ERROR when out of memory (message in err). */
deepinfer_finish_reason di_output_token(const di_output_ctx *o, di_choice *c, di_error *err);

/* Close the choice's output with `why` (releases held-back text unless a
 * stop string cut it) and refresh its public view. */
void di_output_finish(const di_output_ctx *o, di_choice *c, deepinfer_finish_reason why);

/* Refresh the public view of a choice (token count, text, pointers). */
void di_output_sync(di_choice *c);

#endif
