/* eval_gen.c — generation tasks through the engine (eval_gen.h). */
#include "eval/eval_gen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval_extract.h"
#include "eval/eval_schema.h"
#include "structured/vocab.h"
#include "tokenizer/tokenizer.h"

static void error_json(ev_buf *b, int line, const char *name, const char *msg) {
    ev_printf(b, "{\"line\": %d, \"error\": \"%s\", \"message\": ", line, name);
    ev_json_str(b, msg, strlen(msg));
    ev_printf(b, "}");
}

static int wants_constraint(const ev_item *it, const ev_gen_opts *o) {
    return it->constrained >= 0 ? it->constrained : o->constrained;
}

deepinfer_status ev_generate_tasks(ev_tasks *t, const ev_gen_opts *o, ev_buf *items, ev_gen_summary *sum, di_error *err) {
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < t->n; i++) {
        ev_item *it = &t->items[i];
        if (it->kind == EV_LL || it->kind == EV_MC || it->kind == EV_ROLLING)
            ev_item_fail(it, "wrong_task", "a scoring item: score it with `deepinfer eval loglikelihood`");
    }
    int *idx = calloc((size_t)(t->n ? t->n : 1), sizeof *idx); /* request -> item */
    deepinfer_prompt *pr = calloc((size_t)(t->n ? t->n : 1), sizeof *pr);
    deepinfer_sampling_params *sp = calloc((size_t)(t->n ? t->n : 1), sizeof *sp);
    if (!idx || !pr || !sp) {
        free(idx), free(pr), free(sp);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int nr = 0;
    for (int i = 0; i < t->n; i++) {
        ev_item *it = &t->items[i];
        if (it->kind != EV_GEN_MATCH && it->kind != EV_GEN_SCHEMA) continue;
        deepinfer_sampling_params *p = &sp[nr];
        deepinfer_sampling_params_init(p);
        p->temperature = o->temperature;
        p->top_p = o->top_p;
        p->top_k = o->top_k;
        p->max_tokens = o->max_tokens;
        p->has_seed = o->has_seed, p->seed = o->seed;
        for (int s = 0; s < it->n_stop; s++) p->stop[p->n_stop++] = it->stop[s].p;
        if (it->kind == EV_GEN_SCHEMA && wants_constraint(it, o)) {
            p->so_schema_type = "json";
            p->so_schema = it->schema.p;
        }
        pr[nr].text = it->prompt.p;
        idx[nr++] = i;
    }
    deepinfer_engine *e = NULL;
    deepinfer_request_output **outs = NULL;
    so_vocab *vocab = NULL;
    di_tokenizer *tok = NULL;
    char eb[1024] = "";
    deepinfer_status st = DEEPINFER_OK;
    if (nr) {
        deepinfer_engine_config c;
        deepinfer_engine_config_init(&c);
        c.model = o->model;
        c.accelerator = o->accelerator;
        if ((st = deepinfer_engine_open(&c, &e, eb, sizeof eb))) di_error_set(err, st, "%s", eb);
        if (!st) {
            deepinfer_memory_plan plan;
            deepinfer_engine_plan(e, &plan);
            snprintf(sum->accelerator, sizeof sum->accelerator, "%s", plan.accelerator);
            sum->batch_invariant = plan.batch_invariant;
            st = deepinfer_generate(e, pr, (size_t)nr, sp, (size_t)nr, &outs);
            if (st) di_error_set(err, st, "%s", deepinfer_engine_last_error(e));
        }
        /* the validator's vocabulary (schema items only) */
        int need_vocab = 0;
        for (int r = 0; r < nr; r++) need_vocab |= t->items[idx[r]].kind == EV_GEN_SCHEMA;
        if (!st && need_vocab && (st = di_tokenizer_load(o->model, &tok, err)) == DEEPINFER_OK) {
            int32_t eos = so_tokenizer_default_eos(tok);
            st = so_vocab_from_tokenizer(tok, deepinfer_engine_vocab_size(e), &eos, eos >= 0, &vocab, err);
        }
    }
    for (int i = 0, r = 0; !st && i < t->n; i++) {
        ev_item *it = &t->items[i];
        if (items->n) ev_printf(items, ",\n  ");
        if (it->kind == EV_ERROR) {
            error_json(items, it->line, it->error, it->message);
            sum->n_errors++;
            continue;
        }
        const deepinfer_request_output *out = outs[r++];
        if (out->status != DEEPINFER_OK || !out->n_choices) {
            error_json(items, it->line, out->status == DEEPINFER_ERR_LIMIT ? "context_too_long" : "request_failed",
                       out->error ? out->error : deepinfer_status_name(out->status));
            sum->n_errors++;
            continue;
        }
        const deepinfer_completion *c = &out->choices[0];
        if (it->kind == EV_GEN_MATCH) {
            char got[512];
            int f = ev_extract(c->text, c->text_len, it->regex.p, got, sizeof got);
            if (f < 0) {
                error_json(items, it->line, "bad_regex", got);
                sum->n_errors++;
                continue;
            }
            int ok = f == 1 && ev_answer_matches(got, it->answer.p, it->regex.p == NULL);
            ev_printf(items, "{\"line\": %d, \"kind\": \"exact_match\", \"correct\": %s, \"extracted\": ", it->line,
                      ok ? "true" : "false");
            if (f == 1) ev_json_str(items, got, strlen(got));
            else ev_printf(items, "null");
            ev_printf(items, ", \"answer\": ");
            ev_json_str(items, it->answer.p, it->answer.n);
            sum->n_match++, sum->match_correct += ok;
        } else {
            int valid = 0, parses = 0;
            di_error se = {0};
            if (ev_schema_check(vocab, it->schema.p, it->schema.n, c->text, c->text_len, &valid, &parses, &se)) {
                error_json(items, it->line, "bad_schema", se.msg);
                sum->n_errors++;
                continue;
            }
            ev_printf(items, "{\"line\": %d, \"kind\": \"json_schema\", \"valid\": %s, \"json_parses\": %s, \"constrained\": %s",
                      it->line, valid ? "true" : "false", parses ? "true" : "false", wants_constraint(it, o) ? "true" : "false");
            sum->n_schema++, sum->schema_valid += valid, sum->schema_parses += parses;
        }
        ev_printf(items, ", \"finish_reason\": \"%s\", \"tokens\": %zu, \"output\": ",
                  deepinfer_finish_reason_name(c->finish_reason), c->n_tokens);
        ev_json_str(items, c->text, c->text_len);
        ev_printf(items, "}");
    }
    if (outs) deepinfer_outputs_free(outs, (size_t)nr);
    so_vocab_free(vocab);
    di_tokenizer_free(tok);
    deepinfer_engine_close(e);
    free(idx), free(pr), free(sp);
    return st;
}

void ev_gen_summary_json(ev_buf *b, const ev_gen_summary *s) {
    ev_printf(b, "\"results\": {\"exact_match\": {\"items\": %d, \"correct\": %d, \"acc\": ", s->n_match, s->match_correct);
    ev_json_num(b, s->n_match ? (double)s->match_correct / s->n_match : NAN);
    ev_printf(b, "}, \"json_schema\": {\"items\": %d, \"valid\": %d, \"json_parses\": %d, \"validity\": ", s->n_schema,
              s->schema_valid, s->schema_parses);
    ev_json_num(b, s->n_schema ? (double)s->schema_valid / s->n_schema : NAN);
    ev_printf(b, "}, \"errors\": %d}", s->n_errors);
}

void ev_gen_summary_table(FILE *f, const ev_gen_summary *s) {
    fprintf(f, "%-24s %7s  %s\n", "task", "items", "score");
    if (s->n_match) fprintf(f, "%-24s %7d  acc %.4f\n", "exact_match", s->n_match, (double)s->match_correct / s->n_match);
    if (s->n_schema)
        fprintf(f, "%-24s %7d  valid %.4f, parses %.4f\n", "json_schema", s->n_schema, (double)s->schema_valid / s->n_schema,
                (double)s->schema_parses / s->n_schema);
    fprintf(f, "%-24s %7d\n", "errors", s->n_errors);
}
