/*
 * regex.h — the regex front end of the structured-output engine.
 *
 * Syntax: ECMAScript-like (what JSON Schema `pattern` uses), plus the Rust /
 * Python spellings people paste in: character classes with ranges and
 * negation, escapes \d \w \s \D \W \S (ASCII \d \w, JS \s), \xHH \uHHHH
 * \u{H..} \cX \n \r \t \f \v \0, `.` (any code point but \n \r U+2028
 * U+2029), groups ( ) (?: ) (?<n> ) (?P<n> ), alternation, quantifiers
 * * + ? {m} {m,} {m,n} {,n} with optional lazy `?` (laziness does not change
 * a language, so it is accepted and ignored), anchors ^ $ \A \z \Z.
 * Rejected with an error naming the position: lookarounds, backreferences,
 * \b \B, \p{..}, inline flags, possessive quantifiers.
 *
 * The AST is over Unicode code points; regex_compile.c turns it into a byte
 * DFA over UTF-8 (or over the canonical JSON string encoding).
 */
#ifndef DI_STRUCTURED_REGEX_H
#define DI_STRUCTURED_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"
#include "util/error.h"

typedef enum so_rx_kind {
    SO_RX_CLASS = 0, /* one code point from `ranges` */
    SO_RX_CAT,       /* children in sequence (0 children = empty string) */
    SO_RX_ALT,       /* one of the children */
    SO_RX_REP,       /* child repeated min..max times (max < 0: unbounded) */
    SO_RX_BOL,       /* ^ (only legal where so_rx_anchor removes it) */
    SO_RX_EOL        /* $ */
} so_rx_kind;

typedef struct so_rx so_rx;
struct so_rx {
    so_rx_kind kind;
    int min, max;       /* REP */
    uint32_t nranges;   /* CLASS: sorted, disjoint, non-adjacent [lo,hi] pairs */
    uint32_t *ranges;
    uint32_t nkids;     /* CAT / ALT / REP (1) */
    so_rx **kids;
    uint32_t pos;       /* byte offset in the source, for messages */
};

/* Largest {m,n} bound accepted in regex syntax. */
#define SO_RX_MAX_REPEAT 1000

typedef enum so_rx_mode {
    SO_RX_FULL = 0,  /* the whole input must match; ^ and $ at the ends are allowed */
    SO_RX_SEARCH = 1 /* JSON Schema `pattern`: match anywhere unless anchored by ^ / $ */
} so_rx_mode;

/* Parse `len` bytes of UTF-8 `src` into an AST allocated from `a`, then
 * resolve anchors for `mode` (the result contains no BOL/EOL nodes). Errors
 * name the byte offset: "regex: lookahead is not supported (at offset 3)". */
deepinfer_status so_rx_parse(di_arena *a, const char *src, size_t len, so_rx_mode mode, so_rx **out,
                             di_error *err);

/* Constructors for programmatic ASTs (NULL on out-of-memory). */
so_rx *so_rx_new_class(di_arena *a, const uint32_t *ranges, uint32_t nranges);
so_rx *so_rx_new_cat(di_arena *a, so_rx **kids, uint32_t n);
so_rx *so_rx_new_alt(di_arena *a, so_rx **kids, uint32_t n);
so_rx *so_rx_new_rep(di_arena *a, so_rx *kid, int min, int max);
/* The literal UTF-8 string s (must be valid UTF-8; invalid bytes map to U+FFFD). */
so_rx *so_rx_new_literal(di_arena *a, const char *s, size_t len);

/* Append `src` to `dst` as a regex that matches it literally (every
 * metacharacter escaped). Returns bytes written or -1 if `cap` is too small. */
long so_rx_escape(const char *src, size_t len, char *dst, size_t cap);

/* Decode one UTF-8 code point at s[*i] (advancing *i); -1 on invalid input. */
int32_t so_utf8_decode(const uint8_t *s, size_t len, size_t *i);
/* Encode cp into out (4 bytes max); returns the length. */
int so_utf8_encode(uint32_t cp, uint8_t *out);

#endif
