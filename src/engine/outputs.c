/* outputs.c — detokenization, stop conditions and finish reasons (outputs.h). */
#include "engine/outputs.h"

#include <stdlib.h>
#include <string.h>

static int append_text(di_choice *c, const char *s, size_t n) {
    if (!n) return 0;
    if (c->text_len + n + 1 > c->text_cap) {
        size_t cap = c->text_cap * 2;
        while (cap < c->text_len + n + 1) cap *= 2;
        char *t = realloc(c->text, cap);
        if (!t) return -1;
        c->text = t;
        c->text_cap = cap;
    }
    memcpy(c->text + c->text_len, s, n);
    c->text_len += n;
    c->text[c->text_len] = '\0';
    return 0;
}

void di_output_sync(di_choice *c) {
    deepinfer_completion *p = &c->req->pub[c->index];
    p->n_tokens = (size_t)c->n_out;
    p->text = c->text;
    p->text_len = c->text_len;
    p->num_preemptions = c->num_preemptions;
}

/* Stop strings are checked once the output has min_tokens tokens (as vLLM
 * does); text before that bypasses the matcher (nothing is held back then).
 * When matching starts, the matcher is primed with the last bytes of the
 * text so far, so a stop string that straddles the min_tokens boundary is
 * still found (and the text is cut before it). */
static int matching(const di_choice *c) { return c->req->params.n_stop > 0 && c->n_out >= c->req->params.min_tokens; }

/* Text of `piece` into the output; returns the index of a stop string that
 * fired, -1 if none, -2 when out of memory. */
static int push_text(di_choice *c, const char *piece, size_t n, di_error *err) {
    if (!matching(c)) return append_text(c, piece, n) ? -2 : -1;
    if (!c->stop_primed) {
        size_t keep = c->stop.max_len ? c->stop.max_len - 1 : 0;
        if (keep > c->text_len) keep = c->text_len;
        c->stop_base = c->text_len - keep;
        if (di_stop_prime(&c->stop, c->text + c->stop_base, keep)) return -2;
        c->stop_primed = 1;
    }
    const char *rel;
    size_t rel_len;
    di_error e = {0};
    int which = di_stop_push(&c->stop, piece, n, &rel, &rel_len, &e);
    if (e.code) {
        *err = e;
        return -2;
    }
    if (which >= 0 && c->stop_base + c->stop.len < c->text_len) {
        /* the stop string began in text already output before matching started */
        c->text_len = c->stop_base + c->stop.len;
        c->text[c->text_len] = '\0';
        return which;
    }
    if (append_text(c, rel, rel_len)) return -2;
    return which;
}

static int is_stop_id(const di_sampling_params *p, int32_t t) {
    for (int i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] == t) return 1;
    return 0;
}

deepinfer_finish_reason di_output_token(const di_output_ctx *o, di_choice *c, di_error *err) {
    di_request *q = c->req;
    deepinfer_completion *pub = &q->pub[c->index];
    int32_t t = c->out_ids[c->n_out++];
    deepinfer_finish_reason why = DEEPINFER_FINISH_NONE;
    if (t == q->eos_id) {
        why = DEEPINFER_FINISH_EOS;
        pub->stop_token = t;
    } else if (is_stop_id(&q->params, t)) {
        why = DEEPINFER_FINISH_STOP;
        pub->stop_token = t;
    } else if (o->tok) {
        long n = di_detok_push(&c->detok, t, o->piece, o->piece_cap);
        if (n == -1) {
            di_error_set(err, DEEPINFER_ERR_INTERNAL, "detokenizer buffer too small for token %d", t);
            return DEEPINFER_FINISH_ERROR;
        }
        /* n == -2: an id of the model's padded vocabulary the tokenizer does not define: no text */
        int which = push_text(c, o->piece, n > 0 ? (size_t)n : 0, err);
        if (which == -2) {
            if (!err->code) di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for output text");
            return DEEPINFER_FINISH_ERROR;
        }
        if (which >= 0) {
            why = DEEPINFER_FINISH_STOP;
            pub->stop_str = q->params.stop[which];
        }
    }
    if (!why && (c->n_out >= q->params.max_tokens || q->n_prompt + c->n_out >= o->max_model_len))
        why = DEEPINFER_FINISH_LENGTH;
    di_output_sync(c);
    return why;
}

void di_output_finish(const di_output_ctx *o, di_choice *c, deepinfer_finish_reason why) {
    deepinfer_completion *pub = &c->req->pub[c->index];
    if (!pub->stop_str && o->tok) {
        long n = di_detok_flush(&c->detok, o->piece, o->piece_cap);
        di_error e = {0};
        int which = n > 0 ? push_text(c, o->piece, (size_t)n, &e) : -1;
        if (which >= 0) {
            pub->stop_str = c->req->params.stop[which];
        } else if (matching(c)) {
            const char *rel;
            size_t rel_len;
            di_stop_finish(&c->stop, &rel, &rel_len);
            append_text(c, rel, rel_len); /* on failure the text stays shorter; nothing else to do */
        }
    }
    pub->finish_reason = why;
    di_output_sync(c);
}
