/*
 * vocab.h — the tokenizer's vocabulary as the mask engine sees it, plus the
 * state shared by every grammar compiled against it.
 *
 *  - token bytes for every id of the padded vocabulary (padding ids and
 *    special tokens never enter the trie, so masks never allow them; EOS ids
 *    are allowed exactly when the grammar accepts);
 *  - a byte trie over the tokens, flattened in preorder (children sorted by
 *    byte), so a walk can skip a whole subtree in O(1);
 *  - a registry of lexeme DFAs keyed by their canonical spec string, so
 *    identical lexemes of different grammars share one DFA (and one set of
 *    cached masks);
 *  - the mask cache: for a lexer state (the set of (lexeme, state class,
 *    counter bucket) of the live lexeme threads) the tokens the lexer alone
 *    accepts, and the trie subtrees whose tokens need the parser.
 *
 * Thread-safety: a vocab is shared by all matchers; the registry and cache
 * are protected by an internal mutex.
 */
#ifndef DI_STRUCTURED_VOCAB_H
#define DI_STRUCTURED_VOCAB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "structured/dfa.h"
#include "util/error.h"

typedef struct so_trie_node {
    uint32_t end;    /* index one past this node's subtree */
    uint32_t parent;
    int32_t tok;     /* a token ending here, or -1 (more in so_vocab.dup_next) */
    uint8_t byte;
    uint8_t pad;     /* 1: more tokens with these bytes (so_vocab.dup_next) */
    uint16_t depth;
} so_trie_node;

typedef struct so_cache_entry so_cache_entry;
struct so_cache_entry {
    so_cache_entry *next;  /* hash chain */
    uint64_t hash;
    uint32_t keylen;       /* in uint32 words */
    uint32_t ndep;
    uint32_t *key;
    uint32_t *acc;         /* n_words bitmask */
    uint32_t *dep;         /* trie node indices (subtree roots), preorder */
    uint32_t ntrim;
    uint32_t *trim;        /* (characters, token) pairs, characters descending: tokens
                              accepted only by a string thread walked without its
                              maximum; dropped when they exceed the remaining room */
    uint32_t *layers;      /* with trim: 16 bitmaps, acc minus tokens adding > r characters */
    uint32_t nlist;
    uint32_t *list;        /* narrow entries: the accepted token ids instead of acc (NULL) */
};

typedef struct so_reg_entry {
    char *spec;
    size_t spec_len;
    uint64_t hash;
    so_dfa *dfa;           /* NULL with err set when the spec failed to compile */
    char *err;
    deepinfer_status code;
} so_reg_entry;

typedef struct so_vocab {
    int32_t n_vocab;       /* padded vocabulary size (mask length in bits) */
    uint32_t n_words;      /* ceil(n_vocab / 32) */
    uint8_t *blob;         /* all token bytes */
    size_t *tok_off;
    uint32_t *tok_len;
    uint8_t *in_trie;      /* 1 if the token is text (not special, not empty) */
    int32_t eos[8];
    int n_eos;
    int max_token_len;
    so_trie_node *nodes;
    uint32_t nnodes;
    int32_t *dup_next;     /* per token id: next id with identical bytes, -1 */
    uint32_t *all_mask;    /* every defined id (the unconstrained mask) */

    pthread_mutex_t mu;
    so_reg_entry *reg;     /* registry, index = global lexeme id */
    uint32_t nreg, regcap;
    uint32_t *reg_hash;    /* open addressing: id + 1 */
    uint32_t reg_hcap;
    size_t reg_bytes, reg_limit;

    so_cache_entry **cache;
    uint32_t cache_cap, cache_n;
    size_t cache_bytes, cache_limit;
    uint64_t cache_hits, cache_misses;
} so_vocab;

/* Build from explicit token byte strings. `toks[i]` / `lens[i]` for
 * i < n_tokens; ids n_tokens..n_vocab-1 are padding. `special` (may be
 * NULL) flags ids that must never be sampled as text. eos: ids allowed when
 * the grammar accepts (at most 8). Copies everything. */
deepinfer_status so_vocab_new(int32_t n_vocab, int32_t n_tokens, const uint8_t *const *toks, const uint32_t *lens,
                              const uint8_t *special, const int32_t *eos, int n_eos, so_vocab **out,
                              di_error *err);
void so_vocab_free(so_vocab *v);

/* From the tokenizer (tokenizer/tokenizer.h): every id's bytes, special
 * tokens excluded from text; n_padded >= the tokenizer's size (129,280 for
 * DeepSeek V4). */
struct di_tokenizer;
deepinfer_status so_vocab_from_tokenizer(const struct di_tokenizer *tok, int32_t n_padded, const int32_t *eos,
                                         int n_eos, so_vocab **out, di_error *err);
/* The end-of-sentence id (DeepSeek's <｜end▁of▁sentence｜>, else </s> or
 * <|endoftext|>), or -1. */
int32_t so_tokenizer_default_eos(const struct di_tokenizer *tok);
/* The id of `</think>` (so_matcher_opts.think_end_id for so_args
 * start_after_think), or -1. */
int32_t so_tokenizer_think_end(const struct di_tokenizer *tok);

/* Bytes of token id (NULL/0 for padding). */
static inline const uint8_t *so_vocab_token(const so_vocab *v, int32_t id, uint32_t *len) {
    if (id < 0 || id >= v->n_vocab) {
        *len = 0;
        return NULL;
    }
    *len = v->tok_len[id];
    return v->blob + v->tok_off[id];
}

/* Intern a lexeme spec (see lexspec.h for the spec language) and return its
 * global id and DFA (compiled on first use; owned by the vocab). When the
 * registry is over its budget the DFA is built for the caller alone:
 * *gid = SO_GID_PRIVATE and *owned = 1 (caller frees it with so_dfa_free). */
#define SO_GID_PRIVATE UINT32_MAX
deepinfer_status so_vocab_lexeme(so_vocab *v, const char *spec, size_t len, uint32_t *gid, so_dfa **dfa,
                                 int *owned, di_error *err);

/* Mask cache (locking inside). Lookup returns NULL on a miss; insert takes
 * ownership of `e` (returns the entry now in the table: `e`, or an equal one
 * another thread inserted first, in which case `e` is freed; or NULL when the
 * cache is full, in which case the caller keeps `e`). */
so_cache_entry *so_cache_lookup(so_vocab *v, const uint32_t *key, uint32_t keylen, uint64_t hash);
so_cache_entry *so_cache_insert(so_vocab *v, so_cache_entry *e);
void so_cache_entry_free(so_cache_entry *e);

/* Set the memory budgets (bytes) of the DFA registry and the mask cache;
 * past them new DFAs are still built (private to the grammar) and masks are
 * computed without caching. Defaults: 512 MiB and 1 GiB. */
void so_vocab_set_limits(so_vocab *v, size_t reg_limit, size_t cache_limit);

#endif
