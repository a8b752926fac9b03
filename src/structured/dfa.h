/*
 * dfa.h — byte-level DFAs for lexemes.
 *
 * Built from a regex AST by Thompson construction + subset construction over
 * byte equivalence classes (regex_compile.c); combined by product
 * construction (and / and-not). State 0 is the dead state (no accepting state
 * reachable), state 1 the start state. Every non-dead state can reach an
 * accepting state, so "not dead" means "still a viable prefix".
 */
#ifndef DI_STRUCTURED_DFA_H
#define DI_STRUCTURED_DFA_H

#include <stddef.h>
#include <stdint.h>

#include "structured/regex.h"
#include "util/error.h"

enum {
    SO_DFA_ACCEPT = 1,   /* accepting */
    SO_DFA_MORE = 2,     /* has a transition to a non-dead state */
    SO_DFA_BOUNDARY = 4  /* between two characters (not inside a UTF-8 sequence or JSON escape) */
};

typedef struct so_dfa {
    uint32_t nstates;
    uint32_t nclasses;
    uint8_t cls[256];   /* byte -> class */
    uint32_t *trans;    /* nstates * nclasses */
    uint8_t *flags;     /* per state, SO_DFA_* bits */
    uint32_t *eqc;      /* per state: class of states indistinguishable by strings of length <= depth */
    uint32_t neqc;
    uint32_t *proj;     /* difference products only: the state of the left operand */
    size_t bytes;       /* memory held, for budgets */
} so_dfa;

static inline uint32_t so_dfa_next(const so_dfa *d, uint32_t s, uint8_t b) {
    return d->trans[(size_t)s * d->nclasses + d->cls[b]];
}

/* Limits for one build. */
typedef struct so_dfa_limits {
    uint32_t max_nfa_states; /* 0 = 100000 */
    uint32_t max_dfa_states; /* 0 = 20000 */
    uint64_t max_work;       /* subset-construction steps (set sizes x classes); 0 = 30M, ~50 ms */
} so_dfa_limits;

/* Compile `rx` to a DFA. json_string = 1 wraps it as a JSON string literal:
 * '"' + canonical JSON encoding of a matching string + '"' (escapes as
 * Python's json.dumps(ensure_ascii=False) writes them). Caller frees. */
deepinfer_status so_dfa_from_rx(const so_rx *rx, int json_string, const so_dfa_limits *lim, so_dfa **out,
                                di_error *err);

/* Product: op 0 = intersection (a and b), 1 = difference (a and not b), 2 = union. */
deepinfer_status so_dfa_product(const so_dfa *a, const so_dfa *b, int op, const so_dfa_limits *lim, so_dfa **out,
                                di_error *err);

/* Compute eqc/neqc: states equivalent for every string of length <= depth
 * (Moore refinement, stopping early when stable). Skipped (eqc = identity)
 * when the work would exceed `max_work` state*class*round steps. */
deepinfer_status so_dfa_classes(so_dfa *d, int depth, size_t max_work, di_error *err);

/* Decimal integers (JSON syntax, optional ".0+") divisible by m. */
deepinfer_status so_dfa_multiple(uint32_t m, so_dfa **out, di_error *err);

/* 1 if the DFA accepts the whole byte string. */
int so_dfa_matches(const so_dfa *d, const uint8_t *s, size_t len);

/* 1 if the language is empty (start state dead). */
static inline int so_dfa_empty(const so_dfa *d) { return d->nstates < 2 || !(d->flags[1] & (SO_DFA_ACCEPT | SO_DFA_MORE)); }

void so_dfa_free(so_dfa *d);

#endif
