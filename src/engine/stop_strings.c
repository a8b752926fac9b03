#include "engine/stop_strings.h"

#include <stdlib.h>
#include <string.h>

void di_stop_init(di_stop_matcher *m, const char *const *stops, int n_stops) {
    memset(m, 0, sizeof *m);
    m->stops = stops;
    m->n_stops = n_stops;
    m->stopped = -1;
    for (int i = 0; i < n_stops; i++) {
        size_t l = strlen(stops[i]);
        if (l > m->max_len) m->max_len = l;
    }
}

void di_stop_free(di_stop_matcher *m) {
    free(m->text);
    memset(m, 0, sizeof *m);
    m->stopped = -1;
}

/* Largest boundary <= pos that does not split a UTF-8 sequence. */
static size_t utf8_floor(const char *s, size_t len, size_t pos) {
    if (pos >= len) return len;
    size_t p = pos, back = 0;
    while (p > 0 && back < 3 && ((unsigned char)s[p] & 0xC0) == 0x80) {
        p--;
        back++;
    }
    return ((unsigned char)s[p] & 0xC0) == 0x80 ? pos : p;
}

int di_stop_prime(di_stop_matcher *m, const char *prev, size_t n) {
    size_t cap = m->cap ? m->cap : 256;
    while (cap < n + 1) cap *= 2;
    if (cap != m->cap) {
        char *t = realloc(m->text, cap);
        if (!t) return -1;
        m->text = t;
        m->cap = cap;
    }
    memcpy(m->text, prev, n);
    m->len = n;
    m->released = n;
    m->text[n] = '\0';
    return 0;
}

int di_stop_push(di_stop_matcher *m, const char *piece, size_t n, const char **out, size_t *out_len, di_error *err) {
    *out = m->text ? m->text + m->released : NULL;
    *out_len = 0;
    if (m->stopped >= 0) return m->stopped;
    if (m->len + n + 1 > m->cap) {
        size_t cap = m->cap ? m->cap : 256;
        while (cap < m->len + n + 1) cap *= 2;
        char *t = realloc(m->text, cap);
        if (!t) {
            di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory growing output text");
            return -1;
        }
        m->text = t;
        m->cap = cap;
    }
    size_t old = m->len;
    memcpy(m->text + m->len, piece, n);
    m->len += n;
    m->text[m->len] = '\0';
    /* Earliest match that ends inside the new bytes. */
    size_t best = (size_t)-1;
    int which = -1;
    for (int i = 0; i < m->n_stops; i++) {
        size_t sl = strlen(m->stops[i]);
        size_t from = old + 1 > sl ? old + 1 - sl : 0;
        if (m->len < sl) continue;
        for (size_t p = from; p + sl <= m->len; p++)
            if (memcmp(m->text + p, m->stops[i], sl) == 0) {
                if (p < best) {
                    best = p;
                    which = i;
                }
                break;
            }
    }
    size_t release_to;
    if (which >= 0) {
        m->len = best;
        m->text[m->len] = '\0';
        m->stopped = which;
        release_to = m->len;
    } else {
        size_t hold = m->max_len ? m->max_len - 1 : 0;
        release_to = m->len > hold ? m->len - hold : 0;
        release_to = utf8_floor(m->text, m->len, release_to);
    }
    if (release_to > m->released) {
        *out = m->text + m->released;
        *out_len = release_to - m->released;
        m->released = release_to;
    } else {
        *out = m->text + m->released;
    }
    return which;
}

void di_stop_finish(di_stop_matcher *m, const char **out, size_t *out_len) {
    *out = m->text ? m->text + m->released : "";
    *out_len = m->len - m->released;
    m->released = m->len;
}
