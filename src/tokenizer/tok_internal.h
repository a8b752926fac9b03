/*
 * tok_internal.h — the tokenizer's private data structures, shared by the
 * files of src/tokenizer/ (one job per file):
 *
 *   tokenizer_load.c  tokenizer.json → this struct (validation, clear errors)
 *   bytelevel.c       GPT-2 byte↔char alphabet
 *   utf8.c            UTF-8 decoding and lossy repair (U+FFFD substitution)
 *   regex.c           PCRE2 compilation with Oniguruma-compatible classes
 *   pretokenize.c     the Split / ByteLevel pre-tokenizer pipeline
 *   added_tokens.c    atomic added-token matching (HF's two passes)
 *   bpe.c             merge ranks, the merge loop, the per-thread piece cache
 *   encode.c          text → ids (the steps above in order)
 *   detok.c           ids → bytes, the streaming decoder
 */
#ifndef DI_TOKENIZER_TOK_INTERNAL_H
#define DI_TOKENIZER_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/tokenizer.h"
#include "util/arena.h"
#include "util/strmap.h"

/* ---- byte-string -> id maps (util/strmap.h; keys live in the tokenizer arena) ---- */
static inline int32_t tok_map_get(const di_strmap *m, const uint8_t *key, size_t len) {
    uint32_t v;
    return di_strmap_get(m, (const char *)key, len, &v) ? (int32_t)v : -1;
}
/* Insert a key that is not present yet. Returns 0, or -1 when out of memory. */
static inline int tok_map_add(di_strmap *m, const uint8_t *key, size_t len, int32_t value) {
    if (!m->slots && di_strmap_init(m, 1024) != 0) return -1;
    return di_strmap_put(m, (const char *)key, len, (uint32_t)value, NULL) < 0 ? -1 : 0;
}

/* ---- bytelevel.c ---- */
/* The codepoint GPT-2's ByteLevel maps byte b to. */
uint32_t di_bytelevel_char(uint8_t b);
/* The byte a codepoint stands for, or -1 if it is not in the alphabet. */
int di_bytelevel_byte(uint32_t cp);
/* Decode a token string the way HF's ByteLevel decoder does: every char
 * mapped back to its byte if all are in the alphabet, else the raw UTF-8
 * bytes unchanged. Writes at most n bytes to out (n >= n_in suffices). */
size_t di_bytelevel_decode_token(const uint8_t *s, size_t n, uint8_t *out);

/* ---- utf8.c ---- */
/* Decode one scalar at s[0..n): returns its length (1..4) and sets *cp, or
 * returns 0 if s does not start with a valid UTF-8 sequence; then *bad is
 * the length of the maximal subpart to replace with U+FFFD (1..3). */
size_t di_utf8_next(const uint8_t *s, size_t n, uint32_t *cp, size_t *bad);
/* 1 if the n bytes are valid UTF-8. */
int di_utf8_valid(const uint8_t *s, size_t n);
/* Lossy repair: a malloc'd copy with every maximal invalid subpart replaced
 * by U+FFFD (Unicode "substitution of maximal subparts", as a WHATWG
 * TextDecoder and Rust's String::from_utf8_lossy do). NULL on OOM. */
uint8_t *di_utf8_repair(const uint8_t *s, size_t n, size_t *out_len);
/* Encode cp as UTF-8 into out (4 bytes room); returns the length. */
size_t di_utf8_put(uint32_t cp, uint8_t *out);

/* ---- regex.c ---- */
typedef struct di_regex {
    pcre2_code *code;
    int jit;
} di_regex;

/* Compile a tokenizer.json regex (Oniguruma syntax as HF uses it) with
 * PCRE2 UTF+UCP+JIT. Classes whose meaning differs between the two
 * engines are rewritten first (\s, \S → Unicode White_Space; \w, \W →
 * Oniguruma's Unicode word; \h, \H → hex digits). `literal` compiles the
 * pattern as a plain string (Split {"String": ...}). */
deepinfer_status di_regex_compile(di_regex *re, const char *pattern, size_t len, int literal, di_error *err);
void di_regex_free(di_regex *re);

/* ---- pretokenize.c ---- */
typedef enum di_split_behavior {
    DI_SPLIT_ISOLATED = 0,
    DI_SPLIT_REMOVED,
    DI_SPLIT_MERGED_WITH_PREVIOUS,
    DI_SPLIT_MERGED_WITH_NEXT,
    DI_SPLIT_CONTIGUOUS
} di_split_behavior;

typedef struct di_split_step {
    di_regex re;
    di_split_behavior behavior;
    int invert;
} di_split_step;

#define DI_MAX_SPLITS 8

typedef struct di_pretok {
    di_split_step steps[DI_MAX_SPLITS + 1]; /* +1: ByteLevel's own regex when use_regex */
    int nsteps;
    int nsplits;          /* steps before ByteLevel (the rest is ByteLevel's regex) */
    int add_prefix_space; /* ByteLevel add_prefix_space */
} di_pretok;

/* Per-thread matching state (see encode.c): PCRE2 match data, a JIT stack
 * big enough for long pieces, and reusable buffers. */
typedef struct di_span {
    size_t start, end;
    int is_match;
} di_span;

typedef struct di_match_scratch {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
    di_span *spans[DI_MAX_SPLITS + 1];
    size_t span_cap[DI_MAX_SPLITS + 1];
    uint8_t *prefix_buf;
    size_t prefix_cap;
} di_match_scratch;

deepinfer_status di_match_scratch_init(di_match_scratch *s);
void di_match_scratch_free(di_match_scratch *s);

/* Called for every final piece (bytes of the original text, except that a
 * prefix space may have been prepended). Return 0 to go on, non-zero to stop
 * (that value is returned by di_pretok_run). */
typedef int (*di_piece_fn)(void *ctx, const uint8_t *piece, size_t len);

/* Split `text` (valid UTF-8, no added tokens) into pieces. Returns 0, the
 * callback's non-zero value, or -1 on a regex failure / OOM. */
int di_pretok_run(const di_pretok *p, di_match_scratch *ms, const uint8_t *text, size_t len, di_piece_fn fn,
                  void *ctx);

/* ---- added_tokens.c ---- */
typedef struct di_added_token {
    const uint8_t *content;
    uint32_t len;
    int32_t id;
    uint8_t single_word, lstrip, rstrip, normalized, special;
} di_added_token;

/* A byte trie over the contents of one class of added tokens (normalized
 * or not), matched leftmost-longest like HF's Aho-Corasick automaton. */
typedef struct di_added_matcher {
    uint64_t *edge_keys; /* (node << 8 | byte) + 1, open addressing; 0 = empty */
    uint32_t *edge_vals; /* child node */
    size_t edge_cap;
    int32_t *term;       /* node → index into tok->added_tokens, or -1 */
    uint32_t nnodes, node_cap;
    uint8_t first[256];  /* 1 if some token starts with this byte */
    int ntokens;
} di_added_matcher;

/* A segment of the input: either an added token (id >= 0) or text to
 * pre-tokenize (id == -1). */
typedef int (*di_segment_fn)(void *ctx, const uint8_t *s, size_t len, int32_t id);

/* ---- the tokenizer ---- */
struct di_tokenizer {
    di_arena arena; /* token strings, added tokens, id tables */
    uint64_t serial; /* unique per loaded tokenizer (keys the piece cache) */

    int32_t nids;              /* max id + 1 */
    const uint8_t **id_bytes;  /* decoded bytes of every id (NULL if undefined) */
    uint32_t *id_bytes_len;
    const uint8_t **id_str;    /* the token's string as written in the file */
    uint32_t *id_str_len;
    uint8_t *id_flags;         /* DI_TOKF_* */

    di_strmap vocab; /* model vocab: ByteLevel string → id */
    di_strmap added; /* added-token content → id */

    /* BPE */
    uint64_t *merge_keys; /* (left id << 32 | right id), open addressing; UINT64_MAX = empty */
    uint64_t *merge_vals; /* (rank << 32 | merged id) */
    size_t merge_cap;
    size_t nmerges;
    int32_t byte_id[256]; /* id of the single-byte token for each byte, -1 if none */
    int ignore_merges;
    int32_t unk_id;       /* -1 if none */
    int fuse_unk;

    di_pretok pretok;

    di_added_token *added_tokens;
    int nadded;
    di_added_matcher match_raw;  /* normalized:false tokens (first pass) */
    di_added_matcher match_norm; /* normalized:true tokens (second pass) */
    pcre2_code *word_start;      /* HF's \w (single_word) */
    pcre2_code *word_end;
};

#define DI_TOKF_DEFINED 1
#define DI_TOKF_ADDED 2
#define DI_TOKF_SPECIAL 4

/* added_tokens.c */
deepinfer_status di_added_build(di_tokenizer *tok, di_error *err);
void di_added_free(di_tokenizer *tok);
/* Split text into added-token and plain segments in HF's order (pass 1:
 * normalized:false tokens over the whole text; pass 2: normalized:true
 * tokens inside the remaining gaps). Returns 0 or the callback's value. */
int di_added_split(const di_tokenizer *tok, const uint8_t *text, size_t len, di_segment_fn fn, void *ctx);

/* bpe.c */
/* Insert a merge; returns 0, or -1 on OOM. */
int di_bpe_add_merge(di_tokenizer *tok, int32_t left, int32_t right, uint32_t rank, int32_t merged);
/* Encode one pre-tokenized piece (raw bytes), appending ids. Returns 0 or
 * -1 on OOM. */
typedef struct di_idvec {
    int32_t *ids;
    size_t n, cap;
} di_idvec;
int di_idvec_push(di_idvec *v, int32_t id);

/* Reusable work arrays for the merge loop. */
typedef struct di_bpe_work {
    int32_t *sym;     /* symbol id */
    int32_t *prev, *next;
    uint64_t *heap;   /* (rank << 32 | position), a binary min-heap */
    size_t cap, heap_cap;
} di_bpe_work;
void di_bpe_work_free(di_bpe_work *w);
int di_bpe_piece(const di_tokenizer *tok, const uint8_t *piece, size_t len, di_bpe_work *w, di_idvec *out);

#endif
