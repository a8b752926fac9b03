/* score.c — the `deepinfer score` driver (score.h). */
#include "score/score.h"

#include <stdlib.h>
#include <string.h>

#include "model/dsv41_compact.h"

typedef struct sreq {
    di_seq_state *s;
    int32_t *prompt;
    int n_prompt, chunk, fed;
    int32_t next;   /* next decode input */
    int main;
    int row0, nrows, want_all; /* this step's rows */
} sreq;

static int argmax_row(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

void di_score_result_free(di_score_result *r) {
    if (!r) return;
    free(r->logits);
    free(r->argmax);
    memset(r, 0, sizeof *r);
}

/* The j-th unrelated request: a fixed pseudo-random text prompt and chunk size. */
static void make_other(sreq *q, int j, const di_model_config *c) {
    int vocab = (int)c->vocab_size;
    q->n_prompt = 3 + (37 * j + 11) % 61;
    q->chunk = 1 + (5 * j) % 17;
    uint32_t x = 2654435761u * (uint32_t)(j + 1);
    for (int i = 0; i < q->n_prompt; i++) {
        x = x * 1103515245u + 12345u;
        q->prompt[i] = (int32_t)((x >> 8) % (uint32_t)vocab);
        if (q->prompt[i] == c->image_token_id) q->prompt[i] = (q->prompt[i] + 1) % vocab;
    }
}

deepinfer_status di_score_run(const di_score_model *m, const di_score_req *req, di_score_result *out, di_error *err) {
    memset(out, 0, sizeof *out);
    const di_model_config *c = m->cfg;
    int V = (int)c->vocab_size;
    if (req->n_prompt < 1) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "score: the prompt is empty");
    if (req->batch_with < 0 || req->batch_with > 256)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "score: --batch-with %d is outside 0..256", req->batch_with);
    if (req->yoco_keep < 0)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "score: yoco_keep %lld is negative",
                            (long long)req->yoco_keep);
    if (req->yoco_keep > 0) {
        if (req->all_positions)
            return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                                "score: --all-positions is not available in compact prefill "
                                "(YOCO_PREFILL_TRUNCATION_MODE=compact): the layers after the last KV source run "
                                "only on the last %lld prompt tokens, so the earlier positions have no logits; "
                                "score them in exact mode",
                                (long long)req->yoco_keep);
        deepinfer_status cs = di_v41_compact_check(c, req->yoco_keep, 0, err);
        if (cs) return cs;
    }
    int ndec = req->force_ids ? req->n_force : req->steps;
    if (ndec < 0) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "score: negative decode steps");
    int total = (req->all_positions ? req->n_prompt : 1) + ndec;
    if ((int64_t)req->n_prompt + ndec > m->max_context)
        return di_error_set(err, DEEPINFER_ERR_LIMIT, "score: %d prompt + %d decode positions exceed max_context %lld",
                            req->n_prompt, ndec, (long long)m->max_context);
    int nq = req->batch_with + 1, mainq = req->batch_with / 2;
    sreq *q = calloc((size_t)nq, sizeof *q);
    out->logits = malloc(sizeof(float) * (size_t)total * V);
    out->argmax = malloc(sizeof(int32_t) * (size_t)total);
    deepinfer_status st = (q && out->logits && out->argmax) ? DEEPINFER_OK
                                                          : di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "score: out of memory");
    for (int i = 0; i < nq && !st; i++) {
        q[i].main = i == mainq;
        q[i].prompt = malloc(sizeof(int32_t) * (size_t)(q[i].main ? req->n_prompt : 64));
        if (!q[i].prompt) {
            st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "score: out of memory");
            break;
        }
        if (q[i].main) {
            memcpy(q[i].prompt, req->prompt, sizeof(int32_t) * (size_t)req->n_prompt);
            q[i].n_prompt = req->n_prompt;
            q[i].chunk = req->chunk > 0 ? req->chunk : req->n_prompt;
        } else {
            make_other(&q[i], i < mainq ? i : i - 1, c);
        }
        st = m->seq_new(m->model, &q[i].s, err);
    }
    int got = 0, decoded = 0;
    int32_t *tok = NULL;
    int64_t *pos = NULL, *late = NULL;
    di_seq_state **seq = NULL;
    int *lrows = NULL;
    float *lbuf = NULL;
    size_t cap = 0;
    while (!st && got < total) {
        /* assemble the step */
        int n = 0;
        for (int i = 0; i < nq; i++) {
            sreq *r = &q[i];
            r->nrows = 0;
            int k;
            if (r->fed < r->n_prompt) k = r->n_prompt - r->fed < r->chunk ? r->n_prompt - r->fed : r->chunk;
            else if (r->main && decoded >= ndec) k = 0;
            else if (!r->main && r->s->n_tokens >= m->max_context) k = 0; /* a neighbour ran out of room */
            else k = 1;
            if (!k) continue;
            if ((size_t)(n + k) > cap) {
                size_t nc = (size_t)(n + k) * 2 + 64;
                void *a = realloc(tok, nc * sizeof *tok), *b = realloc(pos, nc * sizeof *pos);
                void *cc = realloc(seq, nc * sizeof *seq), *d = realloc(lrows, nc * sizeof *lrows);
                void *lf = realloc(late, nc * sizeof *late);
                tok = a ? a : tok, pos = b ? b : pos, seq = cc ? cc : seq, lrows = d ? d : lrows;
                late = lf ? lf : late;
                if (!a || !b || !cc || !d || !lf) {
                    st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "score: out of memory");
                    break;
                }
                cap = nc;
            }
            for (int t = 0; t < k; t++) {
                int in_prompt = r->fed < r->n_prompt;
                tok[n + t] = in_prompt ? r->prompt[r->fed + t] : (r->main && req->force_ids ? req->force_ids[decoded] : r->next);
                pos[n + t] = r->s->n_tokens + t;
                seq[n + t] = r->s;
                late[n + t] = r->n_prompt > req->yoco_keep ? r->n_prompt - req->yoco_keep : 0;
            }
            r->row0 = n;
            r->nrows = k;
            r->want_all = r->main && r->fed < r->n_prompt && req->all_positions;
            n += k;
        }
        if (st) break;
        int nl = 0;
        for (int i = 0; i < nq; i++) {
            sreq *r = &q[i];
            if (!r->nrows) continue;
            int last_prompt = r->fed < r->n_prompt && r->fed + r->nrows == r->n_prompt;
            int decoding = r->fed >= r->n_prompt;
            if (r->want_all)
                for (int t = 0; t < r->nrows; t++) lrows[nl++] = r->row0 + t;
            else if (last_prompt || decoding) lrows[nl++] = r->row0 + r->nrows - 1;
        }
        float *nb = realloc(lbuf, sizeof(float) * (size_t)(nl ? nl : 1) * V);
        if (!nb) {
            st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "score: out of memory");
            break;
        }
        lbuf = nb;
        di_v4_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = seq, .n_logits = nl, .logit_rows = lrows, .logits = lbuf,
                         .late_from = req->yoco_keep > 0 ? late : NULL};
        if ((st = m->forward(m->model, &b, err))) break;
        /* collect */
        int li = 0;
        for (int i = 0; i < nq; i++) {
            sreq *r = &q[i];
            if (!r->nrows) continue;
            int last_prompt = r->fed < r->n_prompt && r->fed + r->nrows == r->n_prompt;
            int decoding = r->fed >= r->n_prompt;
            int nrow = r->want_all ? r->nrows : (last_prompt || decoding) ? 1 : 0;
            for (int t = 0; t < nrow; t++, li++) {
                const float *row = lbuf + (size_t)li * V;
                r->next = argmax_row(row, V);
                if (r->main) {
                    memcpy(out->logits + (size_t)got * V, row, sizeof(float) * (size_t)V);
                    out->argmax[got++] = r->next;
                } else if (r->next == c->image_token_id) { /* neighbours stay text (V4.1 is text-only) */
                    r->next = (r->next + 1) % V;
                }
            }
            if (r->main && decoding) decoded++;
            if (!decoding) r->fed += r->nrows;
        }
    }
    for (int i = 0; q && i < nq; i++) {
        di_seq_destroy(q[i].s);
        free(q[i].prompt);
    }
    free(q), free(tok), free(pos), free(late), free(seq), free(lrows), free(lbuf);
    if (st) {
        di_score_result_free(out);
        return st;
    }
    out->n_rows = total;
    return DEEPINFER_OK;
}

static deepinfer_status v4_seq_new(const void *m, di_seq_state **out, di_error *err) { return di_v4_seq_new(m, out, err); }
static deepinfer_status v4_forward(void *m, const di_v4_batch *b, di_error *err) { return di_v4_forward(m, b, err); }
static deepinfer_status v41_seq_new(const void *m, di_seq_state **out, di_error *err) { return di_v41_seq_new(m, out, err); }
static deepinfer_status v41_forward(void *m, const di_v4_batch *b, di_error *err) { return di_v41_forward(m, b, err); }

di_score_model di_score_model_v4(di_v4_model *m) {
    return (di_score_model){m, di_v4_config(m), di_v4_max_context(m), v4_seq_new, v4_forward};
}

di_score_model di_score_model_v41(di_v41_model *m) {
    return (di_score_model){m, di_v41_config(m), di_v41_max_context(m), v41_seq_new, v41_forward};
}

deepinfer_status di_v4_score(di_v4_model *m, const di_score_req *req, di_score_result *out, di_error *err) {
    di_score_model sm = di_score_model_v4(m);
    return di_score_run(&sm, req, out, err);
}

deepinfer_status di_v41_score(di_v41_model *m, const di_score_req *req, di_score_result *out, di_error *err) {
    di_score_model sm = di_score_model_v41(m);
    return di_score_run(&sm, req, out, err);
}
