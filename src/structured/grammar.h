/*
 * grammar.h — the grammar IR shared by the front ends (regex, JSON Schema,
 * GBNF) and the compiled form the Earley parser runs.
 *
 * A grammar is a CFG whose terminals are lexemes: regular languages given as
 * lexeme specs (lexspec.h), optionally with a character counter (JSON
 * strings with min/maxLength: counting in the thread keeps the DFA small).
 * Lexemes are matched nondeterministically — a lexeme may end at any
 * accepting state while also continuing — so grouping terminals into larger
 * lexemes never changes the language.
 *
 * Builder: so_gb_* (front ends). so_grammar_compile() interns the lexeme
 * DFAs in the vocab registry, drops unproductive rules, computes nullable
 * nonterminals and flattens the productions.
 */
#ifndef DI_STRUCTURED_GRAMMAR_H
#define DI_STRUCTURED_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "structured/vocab.h"

/* Symbols in productions: nonterminal n >= 0; lexeme l encoded as SO_T(l). */
#define SO_T(l) (-1 - (int32_t)(l))
#define SO_IS_T(s) ((s) < 0 && (s) > -(1 << 30))
#define SO_T_IDX(s) ((uint32_t)(-1 - (s)))
/* End-of-production marker in the flattened sequence, carrying the lhs. */
#define SO_END(lhs) (-(1 << 30) - (int32_t)(lhs))
#define SO_IS_END(s) ((s) <= -(1 << 30))
#define SO_END_LHS(s) ((uint32_t)(-(1 << 30) - (s)))

typedef struct so_limits {
    uint32_t max_rules;        /* productions; 0 = 200000 */
    uint32_t max_lexemes;      /* 0 = 20000 */
    uint32_t max_items;        /* Earley items of one parser; 0 = 4,000,000 */
    uint32_t max_compile_ms;   /* 0 = 10000 */
    int whitespace_max;        /* JSON: whitespace bytes allowed between tokens; < 0 = 20 */
    int lenient;               /* JSON: ignore unsupported keywords instead of failing */
} so_limits;

typedef struct so_gb_lexdef {
    char *spec;
    size_t spec_len;
    int32_t cmin, cmax; /* JSON-string character count bounds; cmax < 0 = none */
} so_gb_lexdef;

typedef struct so_gb {
    /* productions: lhs + symbols, stored flat */
    int32_t *syms;
    size_t nsyms, symcap;
    uint32_t *prod_lhs, *prod_off, *prod_len;
    uint32_t nprods, prodcap;
    uint32_t nnt;
    so_gb_lexdef *lex;
    uint32_t nlex, lexcap;
    uint32_t *lex_hash; /* open addressing, id + 1 */
    uint32_t lex_hcap;
    uint32_t max_rules, max_lexemes;
    int failed;         /* sticky: an allocation or a limit failed */
    deepinfer_status fail_code;
    char fail_msg[160];
} so_gb;

void so_gb_init(so_gb *b, const so_limits *lim);
void so_gb_free(so_gb *b);
/* A new nonterminal id. */
int32_t so_gb_nt(so_gb *b);
/* A lexeme symbol for `spec` (deduplicated); cmin/cmax count characters of a
 * J/S spec (cmax < 0: unbounded, cmin 0: none). Returns SO_T(id). */
int32_t so_gb_lex(so_gb *b, const char *spec, size_t len, int32_t cmin, int32_t cmax);
/* Convenience: R-spec lexeme for a regex / a literal string. */
int32_t so_gb_regex(so_gb *b, const char *regex);
int32_t so_gb_literal(so_gb *b, const char *s, size_t len);
/* Add lhs ::= syms[0..n). */
void so_gb_prod(so_gb *b, int32_t lhs, const int32_t *syms, uint32_t n);
/* A nonterminal for sym{min,max} (max < 0: unbounded), items separated by
 * `sep` (0x7fffffff = no separator). Left-recursive for unbounded tails. */
#define SO_NOSEP 0x7fffffff
int32_t so_gb_repeat(so_gb *b, int32_t sym, int32_t min, int32_t max, int32_t sep);

typedef struct so_lexeme {
    so_dfa *dfa;
    uint32_t gid;      /* registry id (SO_GID_PRIVATE: not cacheable) */
    int owned;
    int32_t cmin, cmax;
    int nullable;      /* start state accepting with no count minimum */
    /* cache identity: for ~<A><B> lexemes the states of A (dfa->proj) with
     * completions left to the parser; otherwise the lexeme itself */
    const so_dfa *cdfa;
    uint32_t cgid;
    int sensitive;
} so_lexeme;

typedef struct so_grammar {
    so_vocab *vocab;
    uint32_t nlex;
    so_lexeme *lex;
    uint32_t nnt;
    int32_t *seq;          /* flattened productions, each ended by SO_END(lhs) */
    uint32_t nseq;
    uint32_t *nt_off;      /* per nonterminal: range in nt_prods */
    uint32_t *nt_prods;    /* production start indices into seq */
    uint8_t *nullable;
    uint32_t start_dot;    /* the augmented production S' -> root */
    uint32_t start_nt;
    so_limits lim;
} so_grammar;

/* Compile builder `b` with root nonterminal `root`. The vocab must outlive
 * the grammar. */
deepinfer_status so_grammar_compile(so_gb *b, int32_t root, so_vocab *v, const so_limits *lim, so_grammar **out,
                                    di_error *err);
void so_grammar_free(so_grammar *g);

#endif
