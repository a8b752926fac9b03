/* request.c — creating and freeing requests (request.h). */
#include "engine/request.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copy the borrowed strings of params into one owned block. */
static int own_strings(di_request *r, const di_sampling_params *p) {
    size_t need = 0;
    for (int i = 0; i < p->n_stop; i++) need += strlen(p->stop[i]) + 1;
    if (p->so_schema_type) need += strlen(p->so_schema_type) + 1;
    if (p->so_schema) need += strlen(p->so_schema) + 1;
    r->strings = malloc(need ? need : 1);
    if (!r->strings) return -1;
    char *w = r->strings;
    for (int i = 0; i < p->n_stop; i++) {
        size_t n = strlen(p->stop[i]) + 1;
        memcpy(w, p->stop[i], n);
        r->params.stop[i] = w;
        w += n;
    }
    const char **f[2] = {&r->params.so_schema_type, &r->params.so_schema};
    for (int i = 0; i < 2; i++) {
        if (!*f[i]) continue;
        size_t n = strlen(*f[i]) + 1;
        memcpy(w, *f[i], n);
        *f[i] = w;
        w += n;
    }
    return 0;
}

static void set_public(di_request *r) {
    r->out.request_id = r->id;
    r->out.error = r->error;
    r->out.prompt_ids = r->prompt;
    r->out.n_prompt = (size_t)r->n_prompt;
    r->out.choices = r->pub;
    r->out.n_choices = (size_t)r->n_choices;
    r->out.metrics.prompt_tokens = r->n_prompt;
    r->out.prompt_logprobs = r->plp;
    r->out.prompt_top_ids = r->plp_top_ids;
    r->out.prompt_top_logprobs = r->plp_top_lp;
    r->out.n_prompt_top = r->plp_top_ids ? r->params.prompt_logprobs : 0;
    for (int i = 0; i < r->n_choices; i++) {
        deepinfer_completion *c = &r->pub[i];
        c->index = i;
        c->token_ids = r->choices[i].out_ids;
        c->text = r->choices[i].text ? r->choices[i].text : "";
        c->logprobs = r->choices[i].logprobs;
        c->n_top = r->params.logprobs > 0 ? r->params.logprobs : 0;
        c->top_ids = r->choices[i].top_ids;
        c->top_logprobs = r->choices[i].top_lp;
        c->stop_token = -1;
    }
}

di_request *di_request_new(uint64_t id, const int32_t *prompt, size_t n_prompt, const di_sampling_params *params,
                           uint64_t seed, int32_t eos_id, const di_tokenizer *tok) {
    di_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->id = id;
    r->params = *params;
    r->seed = seed;
    r->eos_id = eos_id;
    r->n_choices = params->n;
    r->n_prompt = (int32_t)n_prompt;
    r->prompt = malloc(sizeof(int32_t) * (n_prompt ? n_prompt : 1));
    r->choices = calloc((size_t)r->n_choices, sizeof *r->choices);
    r->pub = calloc((size_t)r->n_choices, sizeof *r->pub);
    if (!r->prompt || !r->choices || !r->pub || own_strings(r, params)) goto fail;
    memcpy(r->prompt, prompt, sizeof(int32_t) * n_prompt);
    size_t T = (size_t)params->max_tokens, K = params->logprobs > 0 ? (size_t)params->logprobs : 0;
    if (params->prompt_logprobs >= 0) {
        size_t P = n_prompt ? n_prompt : 1, PK = (size_t)params->prompt_logprobs;
        if (!(r->plp = malloc(sizeof(float) * P))) goto fail;
        r->plp[0] = NAN; /* the first token has no context */
        if (PK) {
            r->plp_top_ids = malloc(sizeof(int32_t) * P * PK);
            r->plp_top_lp = malloc(sizeof(float) * P * PK);
            if (!r->plp_top_ids || !r->plp_top_lp) goto fail;
            for (size_t j = 0; j < PK; j++) r->plp_top_ids[j] = -1, r->plp_top_lp[j] = NAN;
        }
    }
    for (int i = 0; i < r->n_choices; i++) {
        di_choice *c = &r->choices[i];
        c->req = r;
        c->index = i;
        c->slot = -1;
        c->plan_item = -1;
        c->plan_op = -1;
        c->prio = (id << 16) | (uint64_t)(i & 0xFFFF);
        c->out_ids = malloc(sizeof(int32_t) * T);
        if (!c->out_ids) goto fail;
        if (params->logprobs >= 0) {
            c->logprobs = malloc(sizeof(float) * T);
            if (!c->logprobs) goto fail;
        }
        if (K) {
            c->top_ids = malloc(sizeof(int32_t) * T * K);
            c->top_lp = malloc(sizeof(float) * T * K);
            if (!c->top_ids || !c->top_lp) goto fail;
        }
        c->text_cap = 64;
        c->text = malloc(c->text_cap);
        if (!c->text) goto fail;
        c->text[0] = '\0';
        if (tok) di_detok_init(&c->detok, tok, params->skip_special_tokens);
        di_stop_init(&c->stop, r->params.stop, r->params.n_stop);
    }
    set_public(r);
    return r;
fail:
    di_request_free(r);
    return NULL;
}

di_request *di_request_new_failed(uint64_t id, deepinfer_status st, const char *msg) {
    di_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->id = id;
    snprintf(r->error, sizeof r->error, "%s", msg);
    set_public(r);
    r->out.status = st;
    r->out.finished = 1;
    return r;
}

void di_request_free(di_request *r) {
    if (!r) return;
    for (int i = 0; r->choices && i < r->n_choices; i++) {
        di_choice *c = &r->choices[i];
        free(c->out_ids);
        free(c->logprobs);
        free(c->top_ids);
        free(c->top_lp);
        free(c->text);
        di_stop_free(&c->stop);
        so_matcher_free(c->matcher);
    }
    so_grammar_free(r->grammar);
    free(r->plp);
    free(r->plp_top_ids);
    free(r->plp_top_lp);
    free(r->choices);
    free(r->pub);
    free(r->prompt);
    free(r->strings);
    free(r);
}
