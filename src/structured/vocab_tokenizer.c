/*
 * vocab_tokenizer.c — the mask engine's vocabulary from the tokenizer.
 */
#include <stdlib.h>

#include "structured/vocab.h"
#include "tokenizer/tokenizer.h"

int32_t so_tokenizer_default_eos(const di_tokenizer *tok) {
    static const char *names[] = {"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "</s>",
                                  "<|endoftext|>", "<|end_of_text|>", NULL};
    for (int i = 0; names[i]; i++) {
        int32_t id = di_tokenizer_token_id(tok, names[i]);
        if (id >= 0) return id;
    }
    return -1;
}

int32_t so_tokenizer_think_end(const di_tokenizer *tok) { return di_tokenizer_token_id(tok, "</think>"); }

deepinfer_status so_vocab_from_tokenizer(const di_tokenizer *tok, int32_t n_padded, const int32_t *eos, int n_eos,
                                         so_vocab **out, di_error *err) {
    int32_t n = di_tokenizer_vocab_size(tok);
    if (n_padded < n) n_padded = n;
    const uint8_t **toks = malloc((size_t)(n ? n : 1) * sizeof *toks);
    uint32_t *lens = malloc((size_t)(n ? n : 1) * sizeof *lens);
    uint8_t *special = malloc((size_t)(n ? n : 1));
    if (!toks || !lens || !special) {
        free(toks), free(lens), free(special);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory building the mask vocabulary");
    }
    for (int32_t i = 0; i < n; i++) {
        size_t l = 0;
        toks[i] = di_tokenizer_token_bytes(tok, i, &l);
        lens[i] = toks[i] ? (uint32_t)l : 0;
        special[i] = (uint8_t)(di_tokenizer_is_special(tok, i) != 0);
    }
    deepinfer_status st = so_vocab_new(n_padded, n, toks, lens, special, eos, n_eos, out, err);
    free(toks), free(lens), free(special);
    return st;
}
