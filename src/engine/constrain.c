/* constrain.c — structured outputs in the engine (constrain.h). */
#include "engine/constrain.h"

#include <stdlib.h>
#include <string.h>

#include "structured/so_args.h"

void di_constrain_init(di_constrain *c, const di_tokenizer *tok, int32_t vocab, int32_t eos) {
    memset(c, 0, sizeof *c);
    c->tok = tok;
    c->vocab = vocab;
    c->eos = eos;
}

void di_constrain_free(di_constrain *c) {
    so_vocab_free(c->v);
    memset(c, 0, sizeof *c);
}

deepinfer_status di_constrain_request(di_constrain *c, di_request *r, di_error *err) {
    const di_sampling_params *p = &r->params;
    if (!p->so_schema_type) return DEEPINFER_OK;
    if (!c->tok)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "so_args need a tokenizer (to map tokens to text) and this model has none");
    deepinfer_status st;
    if (!c->v && (st = so_vocab_from_tokenizer(c->tok, c->vocab, &c->eos, c->eos >= 0, &c->v, err)))
        return di_error_prefix(err, "so_args");
    so_args a = {.type = !strcmp(p->so_schema_type, "regex")  ? SO_SCHEMA_REGEX
                         : !strcmp(p->so_schema_type, "json") ? SO_SCHEMA_JSON
                                                              : SO_SCHEMA_EBNF,
                 .schema = p->so_schema,
                 .schema_len = strlen(p->so_schema),
                 .whitespace_max = p->so_whitespace_max,
                 .lenient = p->so_lenient,
                 .start_after_think = p->so_after_think};
    if ((st = so_compile(c->v, &a, &r->grammar, err))) return di_error_prefix(err, "so_args (%s)", p->so_schema_type);
    so_matcher_opts mo = {.think_end_id = p->so_after_think ? so_tokenizer_think_end(c->tok) : -1};
    if (p->so_after_think && mo.think_end_id < 0)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "so_args.start_after_think: the tokenizer has no </think> token");
    for (int i = 0; i < r->n_choices; i++)
        if ((st = so_matcher_new(r->grammar, &mo, &r->choices[i].matcher, err))) return di_error_prefix(err, "so_args");
    return DEEPINFER_OK;
}

/* Filters whose candidate set depends on the mask make the unmasked winner
 * differ from the masked one; without them (or when greedy) it is the same. */
static int sample_first_exact(const di_sampling_params *p) {
    return p->temperature == 0.0f || (p->top_k <= 0 && p->top_p >= 1.0f && p->min_p <= 0.0f);
}

deepinfer_status di_constrain_sample(const float *logits, const di_sampling_params *p, const di_sample_context *ctx,
                                     so_matcher *m, di_sampler_scratch *s, uint32_t *mask_scratch,
                                     di_sample_result *out, int *done, di_error *err) {
    deepinfer_status st;
    int ok = 0;
    if (sample_first_exact(p)) {
        st = di_sample_row(logits, p, ctx, s, out, err);
        ok = !st && so_matcher_try_token(m, out->token);
    }
    if (!ok) {
        if ((st = so_matcher_fill_mask(m, mask_scratch, err))) return st;
        size_t words = ((size_t)s->vocab + 31) / 32;
        if (ctx->allow_mask)
            for (size_t w = 0; w < words; w++) mask_scratch[w] &= ctx->allow_mask[w];
        di_sample_context c2 = *ctx;
        c2.allow_mask = mask_scratch;
        if ((st = di_sample_row(logits, p, &c2, s, out, err))) return st;
    }
    if ((st = so_matcher_accept_token(m, out->token, err))) return st;
    *done = so_matcher_is_finished(m);
    return DEEPINFER_OK;
}
