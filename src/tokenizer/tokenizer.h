/*
 * tokenizer.h — byte-level BPE tokenizer loaded from a Hugging Face
 * `tokenizer.json` (DeepSeek V3/V4/V4.1 and the embedded demo model).
 *
 * Contract (implementation in src/tokenizer/):
 *  - Encoding matches HF `tokenizers` exactly: added tokens (special or not)
 *    are matched atomically first, the rest goes through the pre-tokenizer
 *    (the Split regexes of tokenizer.json, then ByteLevel) and BPE merges.
 *  - Decoding maps ids back to raw bytes. The streaming decoder never emits
 *    a partial UTF-8 character: bytes of an incomplete character are held
 *    until the character completes (or are flushed as U+FFFD at the end).
 *  - Every id in [0, vocab_size) has a byte string (possibly empty for ids
 *    of a padded vocabulary that the tokenizer does not define).
 *  - Invalid UTF-8 input is repaired before encoding: each maximal invalid
 *    subpart (Unicode §3.9 "substitution of maximal subparts", what a
 *    WHATWG TextDecoder and Rust's from_utf8_lossy do) becomes U+FFFD. So
 *    encode(bytes) == HF encode(TextDecoder().decode(bytes)), and
 *    decode(encode(s)) == s for every valid UTF-8 s.
 *  - Encoding never adds BOS/EOS: tokenizer.json's post_processor is not
 *    applied (chat encoders write BOS explicitly).
 *
 * Thread-safety: a loaded di_tokenizer is immutable and may be shared by
 * threads; encoders/decoders carry their own state.
 */
#ifndef DI_TOKENIZER_TOKENIZER_H
#define DI_TOKENIZER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct di_tokenizer di_tokenizer;

/* Load tokenizer.json from `path` (a file, or a directory holding
 * tokenizer.json). Caller frees with di_tokenizer_free. */
deepinfer_status di_tokenizer_load(const char *path, di_tokenizer **out, di_error *err);
/* Load from the `len` bytes of a tokenizer.json already in memory. */
deepinfer_status di_tokenizer_load_json(const char *text, size_t len, di_tokenizer **out, di_error *err);
void di_tokenizer_free(di_tokenizer *tok);

/* Number of ids the tokenizer defines (max id + 1). */
int32_t di_tokenizer_vocab_size(const di_tokenizer *tok);

/* The raw bytes of token `id` (after the ByteLevel mapping is undone; added
 * tokens give their content as UTF-8). Returns NULL for an id outside the
 * vocabulary. *len receives the byte length. The pointer lives as long as
 * the tokenizer. */
const uint8_t *di_tokenizer_token_bytes(const di_tokenizer *tok, int32_t id, size_t *len);

/* The token's string as written in tokenizer.json (ByteLevel form for
 * vocab entries, the content for added tokens); NULL if `id` is undefined. */
const char *di_tokenizer_token_str(const di_tokenizer *tok, int32_t id, size_t *len);

/* 1 if `id` is an added token marked special:true (skipped by decode with
 * skip_special). */
int di_tokenizer_is_special(const di_tokenizer *tok, int32_t id);

/* 1 if `id` is an added token (special or not). */
int di_tokenizer_is_added(const di_tokenizer *tok, int32_t id);

/* Look up the id of an exact token string (vocab entry in its ByteLevel
 * form, or an added token's content); -1 if absent. */
int32_t di_tokenizer_token_id(const di_tokenizer *tok, const char *token);

/* Encode `len` bytes of text (need not be valid UTF-8: invalid subparts are
 * replaced by U+FFFD first, see above). Appends ids to *ids (realloc'd with
 * realloc(); *n updated, *cap tracks capacity; caller frees *ids with free()).
 * Added tokens (special or not) found in the text are matched atomically, as
 * HF does. Thread-safe; each thread keeps its own piece cache (about 5 MB,
 * freed when the thread exits). */
deepinfer_status di_tokenizer_encode(const di_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                                     size_t *n, size_t *cap, di_error *err);

/* Streaming decoder: feed ids one at a time, get the bytes that are now
 * complete characters. */
typedef struct di_detok {
    const di_tokenizer *tok;
    int skip_special;
    uint8_t pending[8];
    size_t npending;
} di_detok;

void di_detok_init(di_detok *d, const di_tokenizer *tok, int skip_special);

/* Append the completed text produced by `id` to out (capacity out_cap);
 * returns the number of bytes written, -1 if out_cap is too small (nothing
 * consumed then), or -2 if `id` is outside [0, vocab_size). Output is
 * always valid UTF-8; out_cap >= 3 * (token bytes + 3) always suffices. */
long di_detok_push(di_detok *d, int32_t id, char *out, size_t out_cap);

/* Flush held bytes at end of stream (an incomplete character becomes one
 * U+FFFD). Needs out_cap >= 3 when bytes are held. */
long di_detok_flush(di_detok *d, char *out, size_t out_cap);

/* Decode a whole id sequence (same rules as the streaming decoder). *out is
 * malloc'd and NUL-terminated; caller frees. Fails on an id outside
 * [0, vocab_size). */
deepinfer_status di_tokenizer_decode(const di_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                                     char **out, size_t *out_len, di_error *err);

#endif
