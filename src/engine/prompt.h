/*
 * prompt.h — a public prompt (text, token ids or chat messages) to token
 * ids, with the errors a caller can act on.
 */
#ifndef DI_ENGINE_PROMPT_H
#define DI_ENGINE_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "deepinfer.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

/* Tokenize `p` into *ids (malloc'd, caller frees; *n ids). Checks: exactly
 * one source given, not empty, ids inside [0, vocab) and not `image_id`
 * (the image token of a text-only model; -1 = none), a tokenizer present for
 * text and messages. Messages are rendered with `arch`'s encoder (which
 * writes BOS itself). Text gets `bos_id` in front unless it already starts
 * with it, p->no_bos is set, or bos_id < 0. */
deepinfer_status di_prompt_tokens(const deepinfer_prompt *p, const di_tokenizer *tok, di_chat_arch arch, int32_t vocab,
                                  int32_t image_id, int32_t bos_id, int32_t **ids, size_t *n, di_error *err);

#endif
