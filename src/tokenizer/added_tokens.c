/*
 * added_tokens.c — atomic matching of added tokens, as HF's
 * AddedVocabulary::extract_and_normalize does it:
 *
 *  1. tokens with normalized:false are searched in the whole text;
 *  2. tokens with normalized:true are searched in each remaining gap
 *     (after normalization, which is the identity here: we only load
 *     tokenizers without a normalizer).
 *
 * Each search is leftmost-longest (Aho-Corasick MatchKind::LeftmostLongest):
 * the earliest start wins, then the longest token starting there. A match
 * rejected by single_word is skipped and the search resumes after it.
 * lstrip / rstrip widen the match over adjacent Unicode White_Space.
 * special:true only matters for decoding (skip_special).
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static size_t edge_slot(const di_added_matcher *m, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (m->edge_cap - 1);
}

static uint32_t edge_get(const di_added_matcher *m, uint32_t node, uint8_t b) {
    uint64_t key = ((uint64_t)node << 8 | b) + 1;
    size_t j = edge_slot(m, key);
    while (m->edge_keys[j]) {
        if (m->edge_keys[j] == key) return m->edge_vals[j];
        j = (j + 1) & (m->edge_cap - 1);
    }
    return 0;
}

static int edge_put(di_added_matcher *m, uint32_t node, uint8_t b, uint32_t child) {
    uint64_t key = ((uint64_t)node << 8 | b) + 1;
    size_t j = edge_slot(m, key);
    while (m->edge_keys[j]) j = (j + 1) & (m->edge_cap - 1);
    m->edge_keys[j] = key;
    m->edge_vals[j] = child;
    return 0;
}

static deepinfer_status matcher_build(di_tokenizer *tok, di_added_matcher *m, int normalized) {
    size_t total = 1;
    for (int i = 0; i < tok->nadded; i++)
        if (tok->added_tokens[i].normalized == normalized) total += tok->added_tokens[i].len;
    m->edge_cap = 64;
    while (m->edge_cap < total * 2) m->edge_cap *= 2;
    m->edge_keys = calloc(m->edge_cap, sizeof *m->edge_keys);
    m->edge_vals = calloc(m->edge_cap, sizeof *m->edge_vals);
    m->term = malloc(total * sizeof *m->term);
    if (!m->edge_keys || !m->edge_vals || !m->term) return DEEPINFER_ERR_OUT_OF_MEMORY;
    m->nnodes = 1;
    m->term[0] = -1;
    for (int i = 0; i < tok->nadded; i++) {
        const di_added_token *t = &tok->added_tokens[i];
        if (t->normalized != normalized || t->len == 0) continue;
        uint32_t node = 0;
        for (uint32_t j = 0; j < t->len; j++) {
            uint32_t c = edge_get(m, node, t->content[j]);
            if (!c) {
                c = m->nnodes++;
                m->term[c] = -1;
                edge_put(m, node, t->content[j], c);
            }
            node = c;
        }
        /* HF keeps the first registration of a content; later duplicates of
         * the same content were already folded by the loader. */
        if (m->term[node] < 0) m->term[node] = i;
        m->first[t->content[0]] = 1;
        m->ntokens++;
    }
    return DEEPINFER_OK;
}

static void matcher_free(di_added_matcher *m) {
    free(m->edge_keys);
    free(m->edge_vals);
    free(m->term);
    memset(m, 0, sizeof *m);
}

deepinfer_status di_added_build(di_tokenizer *tok, di_error *err) {
    if (matcher_build(tok, &tok->match_raw, 0) != DEEPINFER_OK || matcher_build(tok, &tok->match_norm, 1) != DEEPINFER_OK)
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory building the added-token matcher");
    int need_word = 0;
    for (int i = 0; i < tok->nadded; i++) need_word |= tok->added_tokens[i].single_word;
    if (need_word) {
        /* Rust regex's \w (UTS #18): Alphabetic, marks, decimal digits,
         * connector punctuation, joiners. */
        int ec;
        PCRE2_SIZE off;
        const char *w = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";
        tok->word_start = pcre2_compile((PCRE2_SPTR)w, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED,
                                        &ec, &off, NULL);
        if (!tok->word_start)
            return di_error_set(err, DEEPINFER_ERR_INTERNAL, "compiling the single_word class failed");
    }
    return DEEPINFER_OK;
}

void di_added_free(di_tokenizer *tok) {
    matcher_free(&tok->match_raw);
    matcher_free(&tok->match_norm);
    if (tok->word_start) pcre2_code_free(tok->word_start);
    tok->word_start = NULL;
}

static int is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Start of the UTF-8 character that ends at s[end). */
static size_t prev_char(const uint8_t *s, size_t end) {
    size_t i = end - 1;
    while (i > 0 && (s[i] & 0xC0) == 0x80) i--;
    return i;
}

static int is_word_at(const di_tokenizer *tok, const uint8_t *s, size_t len, size_t at) {
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md) return 0;
    int rc = pcre2_match(tok->word_start, (PCRE2_SPTR)s, len, at, PCRE2_NO_UTF_CHECK, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

/* Leftmost-longest search from `from`. Returns the token index or -1. */
static int find_token(const di_added_matcher *m, const uint8_t *s, size_t len, size_t from, size_t *ms, size_t *me) {
    for (size_t pos = from; pos < len; pos++) {
        if (!m->first[s[pos]]) continue;
        uint32_t node = 0;
        int best = -1;
        size_t best_end = 0;
        for (size_t j = pos; j < len; j++) {
            node = edge_get(m, node, s[j]);
            if (!node) break;
            if (m->term[node] >= 0) {
                best = m->term[node];
                best_end = j + 1;
            }
        }
        if (best >= 0) {
            *ms = pos;
            *me = best_end;
            return best;
        }
    }
    return -1;
}

typedef int (*gap_fn)(const di_tokenizer *tok, const uint8_t *s, size_t len, di_segment_fn fn, void *ctx);

/* One pass: matches of `m` become tokens; the gaps go to `gap`. */
static int split_pass(const di_tokenizer *tok, const di_added_matcher *m, const uint8_t *s, size_t len, gap_fn gap,
                      di_segment_fn fn, void *ctx) {
    size_t start_offset = 0, from = 0;
    int r;
    while (m->ntokens && from < len) {
        size_t a, b;
        int ti = find_token(m, s, len, from, &a, &b);
        if (ti < 0) break;
        const di_added_token *t = &tok->added_tokens[ti];
        from = b;
        if (t->single_word) {
            int start_space = a == 0 || !is_word_at(tok, s, len, prev_char(s, a));
            int stop_space = b == len || !is_word_at(tok, s, len, b);
            if (!start_space || !stop_space) continue;
        }
        if (t->lstrip) {
            size_t na = a;
            while (na > 0) {
                size_t p = prev_char(s, na);
                uint32_t cp;
                size_t bad;
                if (!di_utf8_next(s + p, len - p, &cp, &bad) || !is_white_space(cp)) break;
                na = p;
            }
            a = na > start_offset ? na : start_offset;
        }
        if (t->rstrip) {
            while (b < len) {
                uint32_t cp;
                size_t bad;
                size_t k = di_utf8_next(s + b, len - b, &cp, &bad);
                if (!k || !is_white_space(cp)) break;
                b += k;
            }
            from = b;
        }
        if (start_offset < a && (r = gap(tok, s + start_offset, a - start_offset, fn, ctx))) return r;
        if ((r = fn(ctx, s + a, b - a, t->id))) return r;
        start_offset = b;
    }
    if (start_offset < len && (r = gap(tok, s + start_offset, len - start_offset, fn, ctx))) return r;
    return 0;
}

static int plain_gap(const di_tokenizer *tok, const uint8_t *s, size_t len, di_segment_fn fn, void *ctx) {
    (void)tok;
    return fn(ctx, s, len, -1);
}

static int normalized_gap(const di_tokenizer *tok, const uint8_t *s, size_t len, di_segment_fn fn, void *ctx) {
    return split_pass(tok, &tok->match_norm, s, len, plain_gap, fn, ctx);
}

int di_added_split(const di_tokenizer *tok, const uint8_t *text, size_t len, di_segment_fn fn, void *ctx) {
    return split_pass(tok, &tok->match_raw, text, len, normalized_gap, fn, ctx);
}
