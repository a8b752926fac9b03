/*
 * earley.h — byte-at-a-time Earley parser over lexeme terminals.
 *
 * State: Earley sets (created only where some lexeme completes, so a long
 * string costs no sets), their items (dot into the flattened grammar,
 * origin set), and the frontier of lexeme threads: (set where the lexeme
 * started, lexeme, DFA state, character count). A byte advances every
 * thread's DFA; threads reaching an accepting state complete their lexeme
 * (the waiting items advance in a new set, followed by the usual
 * prediction/completion closure, which starts new threads), while staying
 * alive as long as the DFA can continue (nondeterministic lexing).
 *
 * Everything is append-only, so a snapshot is six integers and going back
 * is truncation: the trie walk pushes and pops bytes, rollback of draft
 * tokens restores an older snapshot.
 */
#ifndef DI_STRUCTURED_EARLEY_H
#define DI_STRUCTURED_EARLEY_H

#include <stdint.h>

#include "structured/grammar.h"

typedef struct so_item {
    uint32_t dot;
    uint32_t origin;
} so_item;

typedef struct so_set {
    uint32_t lo, hi;      /* items */
    uint32_t pos;         /* byte position */
    uint32_t accepting;   /* contains the completed start production */
    uint64_t stamp;       /* unique per set instance (validates its index) */
    uint32_t wlo, whi;    /* its index in so_parser.widx, when built */
} so_set;

typedef struct so_thread {
    uint32_t set;
    uint32_t lex;
    uint32_t state;
    uint32_t count;
} so_thread;

typedef struct so_pstate {
    uint32_t nitems, nsets, nthr, fr_lo, fr_hi, pos, nwidx;
} so_pstate;

typedef struct so_parser {
    const so_grammar *g;
    so_item *items;
    uint32_t nitems, itemcap;
    so_set *sets;
    uint32_t nsets, setcap;
    so_thread *thr;
    uint32_t nthr, thrcap;
    uint32_t fr_lo, fr_hi;
    uint32_t pos;
    /* closure scratch */
    uint64_t *dedup;      /* open addressing over (dot, origin) of the set being built */
    uint32_t dedup_cap, gen;
    uint32_t *lex_stamp;  /* per lexeme: closure id that already started a thread */
    uint32_t closure_id;
    /* per-set index of items by next symbol, built for large sets on their
     * first use as a completion origin: a header (the set's stamp) then
     * (symbol << 32 | item) pairs sorted */
    uint64_t *widx;
    uint32_t nwidx, widxcap;
    uint64_t set_stamp;
    int error;            /* sticky limit/oom error */
} so_parser;

deepinfer_status so_parser_init(so_parser *p, const so_grammar *g, di_error *err);
void so_parser_free(so_parser *p);

static inline so_pstate so_parser_save(const so_parser *p) {
    return (so_pstate){p->nitems, p->nsets, p->nthr, p->fr_lo, p->fr_hi, p->pos, p->nwidx};
}
static inline void so_parser_restore(so_parser *p, so_pstate s) {
    p->nitems = s.nitems, p->nsets = s.nsets, p->nthr = s.nthr;
    p->fr_lo = s.fr_lo, p->fr_hi = s.fr_hi, p->pos = s.pos, p->nwidx = s.nwidx;
}

/* Consume one byte. Returns 1 if accepted, 0 if the byte is not allowed
 * (state unchanged), -1 on a memory/limit error (state unchanged). */
int so_parser_push(so_parser *p, uint8_t b);

/* Consume bytes; 1 if all accepted (state advanced), else state unchanged. */
int so_parser_push_bytes(so_parser *p, const uint8_t *s, size_t n);

/* 1 if the input so far is a complete sentence of the grammar. */
int so_parser_accepting(const so_parser *p);

/* 1 if no further byte can be accepted. */
static inline int so_parser_at_end(const so_parser *p) { return p->fr_lo == p->fr_hi; }

/* One step of a lexeme thread on byte b: new state (0 = dead) and count. */
static inline uint32_t so_lex_step(const so_lexeme *l, uint32_t s, uint32_t *count, uint8_t b) {
    uint32_t t = so_dfa_next(l->dfa, s, b);
    if (!t || (l->cmax < 0 && l->cmin <= 0)) return t;
    if (s != 1 && (l->dfa->flags[s] & SO_DFA_BOUNDARY)) {
        if (b == '"') {
            if ((int32_t)*count < l->cmin) return 0;
        } else {
            ++*count;
            if (l->cmax >= 0 && (int32_t)*count > l->cmax) return 0;
        }
    }
    return t;
}

#endif
