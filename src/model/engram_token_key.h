/*
 * engram_token_key.h — the key under which the Engram compressed token map
 * groups a token (architecture.md §5.8; reference engram.py
 * build_compressed_token_map), computed with ICU (libicuuc, loaded at run
 * time: only models with Engram need it).
 *
 * For one token string (the tokenizer.json vocab entry in ByteLevel form, or
 * an added token's content):
 *  1. decode it alone as HF `tokenizers` does: the ByteLevel decoder maps the
 *     string back to bytes when every char is in the byte alphabet, else
 *     keeps its UTF-8 bytes; then lossy UTF-8;
 *  2. text containing U+FFFD (a partial UTF-8 byte token) -> key = the raw
 *     token string;
 *  3. else key = NFKC -> NFD -> StripAccents -> Lowercase -> /[ \t\r\n]+/ -> " "
 *     -> /^ $/ -> U+E000 -> Strip -> U+E000 -> " ", or the text itself when
 *     that is empty.
 * The Rust normalizers' exact semantics are reproduced:
 *  - NFKC, NFD and StripAccents use Unicode 9.0.0 data (the crate
 *    unicode-normalization-alignments 0.1.12 that `tokenizers` uses):
 *    characters assigned after 9.0 pass through them untouched (ICU filtered
 *    normalizers over [:age=9.0:]);
 *  - StripAccents removes General_Category Mark (Mn, Mc and Me) as of 9.0;
 *  - Lowercase maps each code point alone (Rust char::to_lowercase): full
 *    mappings (U+0130 -> "i\u0307"), no final-sigma context;
 *  - Strip trims White_Space (Rust char::is_whitespace).
 */
#ifndef DI_MODEL_ENGRAM_TOKEN_KEY_H
#define DI_MODEL_ENGRAM_TOKEN_KEY_H

#include <stddef.h>

#include "util/error.h"

typedef struct di_engram_keyer di_engram_keyer;

/* Open the ICU normalizers. Caller frees with di_engram_keyer_free. Not
 * thread-safe: one keyer per thread. Loads ICU on first use
 * (util/icu_loader.h); without it, DEEPINFER_ERR_UNSUPPORTED and a message
 * saying to install libicu or set DEEPINFER_ICU_LIB. */
deepinfer_status di_engram_keyer_new(di_engram_keyer **out, di_error *err);
void di_engram_keyer_free(di_engram_keyer *k);

/* Key of one token string (`len` bytes of UTF-8). *key points into the
 * keyer and stays valid until its next call; *key_len is its byte length. */
deepinfer_status di_engram_token_key(di_engram_keyer *k, const char *token, size_t len, const char **key,
                                     size_t *key_len, di_error *err);

/* Step 3 alone, on valid UTF-8 text (the normalizer sequence; "" when the
 * result is empty). Same output conventions as di_engram_token_key. */
deepinfer_status di_engram_normalize(di_engram_keyer *k, const char *text, size_t len, const char **out,
                                     size_t *out_len, di_error *err);

#endif
