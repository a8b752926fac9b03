/*
 * detok.c — ids → bytes, whole or streamed.
 *
 * A token's bytes are its ByteLevel string mapped back to bytes (added
 * tokens: their content, by the same HF rule; see bytelevel.c). The
 * streaming decoder concatenates them and emits only complete UTF-8
 * characters: the bytes of a character split across tokens wait in
 * `pending`. Invalid sequences become U+FFFD per maximal subpart, exactly
 * like HF's decode (String::from_utf8_lossy over all the bytes); a
 * character still incomplete at the end becomes one U+FFFD in flush.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

int32_t di_tokenizer_vocab_size(const di_tokenizer *tok) { return tok->nids; }

const uint8_t *di_tokenizer_token_bytes(const di_tokenizer *tok, int32_t id, size_t *len) {
    if (id < 0 || id >= tok->nids) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = tok->id_bytes_len[id];
    return tok->id_bytes[id] ? tok->id_bytes[id] : (const uint8_t *)"";
}

const char *di_tokenizer_token_str(const di_tokenizer *tok, int32_t id, size_t *len) {
    if (id < 0 || id >= tok->nids || !tok->id_str[id]) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = tok->id_str_len[id];
    return (const char *)tok->id_str[id];
}

int di_tokenizer_is_special(const di_tokenizer *tok, int32_t id) {
    return id >= 0 && id < tok->nids && (tok->id_flags[id] & DI_TOKF_SPECIAL) != 0;
}

int di_tokenizer_is_added(const di_tokenizer *tok, int32_t id) {
    return id >= 0 && id < tok->nids && (tok->id_flags[id] & DI_TOKF_ADDED) != 0;
}

int32_t di_tokenizer_token_id(const di_tokenizer *tok, const char *token) {
    size_t n = strlen(token);
    int32_t id = tok_map_get(&tok->added, (const uint8_t *)token, n);
    return id >= 0 ? id : tok_map_get(&tok->vocab, (const uint8_t *)token, n);
}

void di_detok_init(di_detok *d, const di_tokenizer *tok, int skip_special) {
    d->tok = tok;
    d->skip_special = skip_special;
    d->npending = 0;
}

/* Run the UTF-8 repair over pending + b[0..n). With out == NULL only count.
 * Returns the output length; *keep receives how many trailing bytes form
 * an incomplete (but so far valid) character to hold back. */
static size_t run(const uint8_t *pend, size_t np, const uint8_t *b, size_t n, uint8_t *out, size_t *keep) {
    uint8_t tmp[8];
    size_t o = 0, i = 0, total = np + n;
    *keep = 0;
#define AT(k) ((k) < np ? pend[(k)] : b[(k) - np])
    while (i < total) {
        uint8_t c = AT(i);
        if (c < 0x80) {
            if (out) out[o] = c;
            o++;
            i++;
            continue;
        }
        size_t m = total - i < 4 ? total - i : 4;
        for (size_t k = 0; k < m; k++) tmp[k] = AT(i + k);
        uint32_t cp;
        size_t bad;
        size_t k = di_utf8_next(tmp, m, &cp, &bad);
        if (k) {
            if (out) memcpy(out + o, tmp, k);
            o += k;
            i += k;
        } else if (c >= 0xC2 && c <= 0xF4 && i + bad == total) {
            *keep = bad; /* a valid prefix cut by the end of the input so far */
            break;
        } else {
            if (out) di_utf8_put(0xFFFD, out + o);
            o += 3;
            i += bad;
        }
    }
#undef AT
    return o;
}

long di_detok_push(di_detok *d, int32_t id, char *out, size_t out_cap) {
    size_t n = 0;
    const uint8_t *b = di_tokenizer_token_bytes(d->tok, id, &n);
    if (!b) return -2;
    if ((d->skip_special && di_tokenizer_is_special(d->tok, id))) return 0;
    size_t keep;
    size_t need = run(d->pending, d->npending, b, n, NULL, &keep);
    if (need > out_cap) return -1;
    run(d->pending, d->npending, b, n, (uint8_t *)out, &keep);
    /* The held bytes are the last `keep` of pending + b. */
    uint8_t held[8];
    size_t total = d->npending + n;
    for (size_t k = 0; k < keep; k++) {
        size_t at = total - keep + k;
        held[k] = at < d->npending ? d->pending[at] : b[at - d->npending];
    }
    memcpy(d->pending, held, keep);
    d->npending = keep;
    return (long)need;
}

long di_detok_flush(di_detok *d, char *out, size_t out_cap) {
    if (!d->npending) return 0;
    if (out_cap < 3) return -1;
    di_utf8_put(0xFFFD, (uint8_t *)out);
    d->npending = 0;
    return 3;
}

deepinfer_status di_tokenizer_decode(const di_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                                     char **out, size_t *out_len, di_error *err) {
    /* Worst case 3 output bytes per input byte (every byte a U+FFFD). */
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->nids)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "decode: id %d at position %zu is outside [0, %d)",
                                ids[i], i, tok->nids);
        total += tok->id_bytes_len[ids[i]];
    }
    char *buf = malloc(total * 3 + 4);
    if (!buf) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "decode: out of memory");
    di_detok d;
    di_detok_init(&d, tok, skip_special);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)di_detok_push(&d, ids[i], buf + o, total * 3 + 4 - o);
    o += (size_t)di_detok_flush(&d, buf + o, 4);
    buf[o] = 0;
    *out = buf;
    *out_len = o;
    return DEEPINFER_OK;
}
