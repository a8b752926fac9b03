/* draft.c — the checks every drafter step makes of its request (draft.h di_model_draft_check). */
#include "model/draft.h"

deepinfer_status di_model_draft_check(const di_model_config *c, const di_draft_rules *r, const di_model_draft *d,
                                      di_error *err) {
    if (!r->has_drafter)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "this checkpoint has no DSpark/MTP tensors: it cannot draft");
    if (d->n < 0 || (d->n && (!d->seq || !d->n_feed || !d->hidden || !d->k)))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "draft step: missing sequences, feed counts, hidden rows or draft counts");
    for (int q = 0; q < d->n; q++) {
        const di_seq_state *s = d->seq[q];
        int nf = d->n_feed[q], k = d->k[q];
        if (!s || s->n_layers != c->n_layers + c->n_stages)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "draft step request %d: no sequence of this model", q);
        for (int o = 0; o < q; o++)
            if (d->seq[o] == s)
                return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "draft step requests %d and %d share a sequence", o, q);
        if (k < 0 || k > r->block)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "draft step request %d: %d drafts asked, %s gives 0 .. %d",
                                q, k, r->what, r->block);
        if (nf < 0 || (k > 0 && nf < 1))
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "draft step request %d: n_feed %d; drafting needs the position it drafts from (n_feed >= 1 "
                                "when k > 0)", q, nf);
        if (nf > 0 && (!d->hidden[q] || (r->reads_next && (!d->next || !d->next[q]))))
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "draft step request %d: no hidden rows or next tokens for %d fed positions", q, nf);
        if (s->mtp_tokens + nf > s->n_tokens)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "draft step request %d: feeds positions %lld .. %lld (continuing mtp_tokens), but the target "
                                "has processed only %lld positions",
                                q, (long long)s->mtp_tokens, (long long)(s->mtp_tokens + nf - 1), (long long)s->n_tokens);
        for (int i = 0; r->reads_next && i < nf; i++)
            if (d->next[q][i] < 0 || d->next[q][i] >= c->vocab_size)
                return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                    "draft step request %d: next token %d (%d) is outside the vocabulary [0,%lld)", q, i,
                                    d->next[q][i], (long long)c->vocab_size);
        if (k == 0) continue;
        if (!d->ids || !d->next || !d->next[q])
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "draft step request %d: no ids output or no anchor (next)", q);
        int64_t p = s->mtp_tokens + nf - 1;
        int32_t a = d->next[q][nf - 1];
        if (a < 0 || a >= c->vocab_size || (r->text_anchor && a == c->image_token_id))
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "draft step request %d: anchor %d is not a text token", q, a);
        int64_t end = p + (r->whole_block ? 1 + r->block : k);
        if (end > r->max_context)
            return di_error_set(err, DEEPINFER_ERR_LIMIT, "draft step request %d: the drafts after position %lld pass max_context %lld",
                                q, (long long)p, (long long)r->max_context);
    }
    return DEEPINFER_OK;
}
