/*
 * matcher.c — per-request matcher state on top of the Earley parser.
 */
#include "structured/matcher.h"

#include <stdlib.h>
#include <string.h>

deepinfer_status so_matcher_new(const so_grammar *g, const so_matcher_opts *opts, so_matcher **out, di_error *err) {
    so_matcher *m = calloc(1, sizeof *m);
    if (!m) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    m->g = g;
    m->think_end_id = opts ? opts->think_end_id : -1;
    m->started = m->think_end_id < 0;
    deepinfer_status st = so_parser_init(&m->p, g, err);
    if (st != DEEPINFER_OK) {
        free(m);
        return st;
    }
    *out = m;
    return DEEPINFER_OK;
}

void so_matcher_free(so_matcher *m) {
    if (!m) return;
    so_parser_free(&m->p);
    free(m->hist), free(m->hist_mode);
    free(m);
}

void so_matcher_reset(so_matcher *m) {
    if (m->nhist) so_parser_restore(&m->p, m->hist[0]);
    m->nhist = 0;
    m->started = m->think_end_id < 0;
    m->finished = 0;
}

static int is_eos(const so_vocab *v, int32_t id) {
    for (int i = 0; i < v->n_eos; i++)
        if (v->eos[i] == id) return 1;
    return 0;
}

deepinfer_status so_matcher_fill_mask(so_matcher *m, uint32_t *mask, di_error *err) {
    const so_vocab *v = m->g->vocab;
    if (!m->started) { /* unconstrained: every defined token */
        memcpy(mask, v->all_mask, (size_t)v->n_words * sizeof *mask);
        return DEEPINFER_OK;
    }
    if (m->finished) {
        memset(mask, 0, (size_t)v->n_words * sizeof *mask);
        for (int i = 0; i < v->n_eos; i++) mask[v->eos[i] >> 5] |= 1u << (v->eos[i] & 31);
        return DEEPINFER_OK;
    }
    return so_mask_fill(&m->p, mask, &m->stats, err);
}

int so_matcher_try_token(so_matcher *m, int32_t id) {
    const so_vocab *v = m->g->vocab;
    if (id < 0 || id >= v->n_vocab) return 0;
    if (!m->started) return v->tok_len[id] > 0 || is_eos(v, id);
    if (is_eos(v, id)) return m->finished || so_parser_accepting(&m->p);
    if (m->finished || !v->in_trie[id]) return 0;
    uint32_t len;
    const uint8_t *b = so_vocab_token(v, id, &len);
    return so_parser_try_bytes(&m->p, b, len);
}

static int push_hist(so_matcher *m) {
    if (m->nhist == m->histcap) {
        uint32_t nc = m->histcap ? m->histcap * 2 : 64;
        so_pstate *nh = realloc(m->hist, nc * sizeof *nh);
        if (!nh) return 0;
        m->hist = nh;
        uint8_t *nm = realloc(m->hist_mode, nc);
        if (!nm) return 0;
        m->hist_mode = nm;
        m->histcap = nc;
    }
    m->hist[m->nhist] = so_parser_save(&m->p);
    m->hist_mode[m->nhist] = (uint8_t)(m->started | m->finished << 1);
    m->nhist++;
    return 1;
}

deepinfer_status so_matcher_accept_token(so_matcher *m, int32_t id, di_error *err) {
    const so_vocab *v = m->g->vocab;
    if (id < 0 || id >= v->n_vocab) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "token id %d outside the vocabulary", id);
    if (!push_hist(m)) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    if (!m->started) {
        if (id == m->think_end_id) m->started = 1;
        return DEEPINFER_OK;
    }
    if (is_eos(v, id)) {
        if (m->finished || so_parser_accepting(&m->p)) {
            m->finished = 1;
            return DEEPINFER_OK;
        }
        m->nhist--;
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "EOS token %d before the output is complete", id);
    }
    uint32_t len;
    const uint8_t *b = so_vocab_token(v, id, &len);
    if (m->finished || !v->in_trie[id] || !so_parser_push_bytes(&m->p, b, len)) {
        m->nhist--;
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "token %d is not allowed by the grammar here", id);
    }
    return DEEPINFER_OK;
}

deepinfer_status so_matcher_accept_bytes(so_matcher *m, const uint8_t *s, size_t n, di_error *err) {
    if (!m->started || m->finished)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "matcher is not constraining (before </think> or finished)");
    if (!push_hist(m)) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    if (!so_parser_push_bytes(&m->p, s, n)) {
        m->nhist--;
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "bytes not allowed by the grammar here");
    }
    return DEEPINFER_OK;
}

deepinfer_status so_matcher_rollback(so_matcher *m, uint32_t n, di_error *err) {
    if (n > m->nhist)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "rollback of %u tokens, only %u accepted", n, m->nhist);
    if (!n) return DEEPINFER_OK;
    m->nhist -= n;
    so_parser_restore(&m->p, m->hist[m->nhist]);
    m->started = m->hist_mode[m->nhist] & 1;
    m->finished = (m->hist_mode[m->nhist] >> 1) & 1;
    return DEEPINFER_OK;
}

uint32_t so_matcher_num_tokens(const so_matcher *m) { return m->nhist; }

int so_matcher_is_accepting(const so_matcher *m) {
    return m->started && (m->finished || so_parser_accepting(&m->p));
}

int so_matcher_is_finished(const so_matcher *m) {
    return m->finished || (m->started && so_parser_at_end(&m->p) && so_parser_accepting(&m->p));
}
