/*
 * so_hfvocab.h — a minimal reader of a Hugging Face tokenizer.json's
 * vocabulary for the structured-output tools (so-check): model.vocab with
 * the ByteLevel mapping undone, added tokens, and a greedy longest-match
 * encoder. This is NOT the tokenizer (src/tokenizer/ is): the encoder splits
 * text into vocabulary tokens without BPE merges, which is all a grammar
 * check needs (any tokenization of a text gives the same bytes); figures
 * measured with it are labelled as such.
 */
#ifndef DI_TOOLS_SO_HFVOCAB_H
#define DI_TOOLS_SO_HFVOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "structured/vocab.h"

typedef struct so_hfvocab {
    int32_t n_tokens;   /* max id + 1 */
    uint8_t **bytes;
    uint32_t *lens;
    uint8_t *special;
    int32_t eos;        /* id of the end-of-sentence token, or -1 */
} so_hfvocab;

/* Load `path` (tokenizer.json or a directory holding it). */
deepinfer_status so_hfvocab_load(const char *path, so_hfvocab *out, di_error *err);
void so_hfvocab_free(so_hfvocab *h);

/* Greedy longest-match split of text into token ids over v's trie. Returns
 * the number of ids written (<= cap), or -1 if some byte has no token. */
long so_greedy_tokenize(const so_vocab *v, const char *text, size_t len, int32_t *ids, size_t cap);

#endif
