/*
 * stop_strings.h — stop-string detection on streamed output text.
 *
 * Text arrives in pieces (from the incremental detokenizer). A stop string
 * may straddle pieces, so the matcher holds back the last (longest stop − 1)
 * bytes until they can no longer begin a match, and only ever releases text
 * at UTF-8 character boundaries. When a stop string matches, the text is
 * truncated before it (the stop string itself is not output, as in vLLM's
 * default) and the matcher reports which stop string fired.
 */
#ifndef DI_ENGINE_STOP_STRINGS_H
#define DI_ENGINE_STOP_STRINGS_H

#include <stddef.h>

#include "util/error.h"

typedef struct di_stop_matcher {
    const char *const *stops; /* not owned */
    int n_stops;
    size_t max_len;           /* longest stop string */
    char *text;               /* all output text so far (owned) */
    size_t len, cap;
    size_t released;          /* bytes of text already handed out */
    int stopped;              /* index of the stop string that fired, or -1 */
} di_stop_matcher;

void di_stop_init(di_stop_matcher *m, const char *const *stops, int n_stops);
void di_stop_free(di_stop_matcher *m);

/* Append a piece. On return *out and *out_len give newly releasable text (points
 * into the matcher; valid until the next call). Returns the index of a stop
 * string that matched (text truncated before it), or -1. After a match,
 * further pushes release nothing. */
int di_stop_push(di_stop_matcher *m, const char *piece, size_t n, const char **out, size_t *out_len, di_error *err);

/* Seed the matcher with text that was already released (e.g. output produced
 * before min_tokens): a stop string that begins in it and ends in a later
 * piece still matches, one that lies wholly inside it does not. Call before
 * the first push. Returns 0, or -1 when out of memory. */
int di_stop_prime(di_stop_matcher *m, const char *prev, size_t n);

/* End of stream: release everything still held back. */
void di_stop_finish(di_stop_matcher *m, const char **out, size_t *out_len);

#endif
