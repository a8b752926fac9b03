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

/* One item's outcome in one run. */
typedef struct gen_out {
    const char *error;        /* NULL: scored */
    char message[1024];
    ev_kind kind;             /* EV_GEN_MATCH | EV_GEN_SCHEMA when scored */
    int correct, found;       /* exact match: the verdict, whether an answer was extracted */
    char extracted[512];
    int valid, parses, constrained;
    char *text;               /* the completion (malloc'd) */
    size_t len, tokens;
    deepinfer_finish_reason finish;
} gen_out;

static int wants_constraint(const ev_item *it, const ev_gen_opts *o) {
    return it->constrained >= 0 ? it->constrained : o->constrained;
}

static void out_fail(gen_out *g, const char *name, const char *msg) {
    g->error = name;
    snprintf(g->message, sizeof g->message, "%s", msg);
}

/* Score one completion into *g. */
static void score_one(const ev_item *it, const ev_gen_opts *o, so_vocab *vocab, const deepinfer_completion *c,
                      gen_out *g) {
    g->kind = it->kind;
    if (it->kind == EV_GEN_MATCH) {
        int f = ev_extract(c->text, c->text_len, it->regex.p, g->extracted, sizeof g->extracted);
        if (f < 0) {
            out_fail(g, "bad_regex", g->extracted);
            return;
        }
        g->found = f == 1;
        g->correct = f == 1 && ev_answer_matches(g->extracted, it->answer.p, it->regex.p == NULL);
    } else {
        di_error se = {0};
        if (ev_schema_check(vocab, it->schema.p, it->schema.n, c->text, c->text_len, &g->valid, &g->parses, &se)) {
            out_fail(g, "bad_schema", se.msg);
            return;
        }
        g->constrained = wants_constraint(it, o);
    }
    g->finish = c->finish_reason;
    g->tokens = c->n_tokens;
    g->text = malloc(c->text_len + 1);
    if (g->text) memcpy(g->text, c->text, c->text_len), g->text[c->text_len] = 0, g->len = c->text_len;
}

/* Run every generation item of t on an engine opened with o->engine (yoco_compact replaced when
 * compact >= 0); outs[i] gets item i's outcome, *sum the aggregates and the engine's configuration. */
static deepinfer_status run(ev_tasks *t, const ev_gen_opts *o, int compact, gen_out *outs, ev_gen_summary *sum,
                            di_error *err) {
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < t->n; i++) {
        ev_item *it = &t->items[i];
        if (it->kind == EV_LL || it->kind == EV_MC || it->kind == EV_ROLLING)
            ev_item_fail(it, "wrong_task", "a scoring item: score it with `deepinfer eval loglikelihood`");
    }
    size_t cap = (size_t)(t->n ? t->n : 1);
    int *idx = calloc(cap, sizeof *idx); /* request -> item */
    deepinfer_prompt *pr = calloc(cap, sizeof *pr);
    deepinfer_sampling_params *sp = calloc(cap, sizeof *sp);
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
    deepinfer_request_output **res = NULL;
    so_vocab *vocab = NULL;
    di_tokenizer *tok = NULL;
    char eb[1024] = "";
    deepinfer_status st = DEEPINFER_OK;
    if (nr) {
        deepinfer_engine_config c;
        if (o->engine) c = *o->engine;
        else deepinfer_engine_config_init(&c);
        c.model = o->model;
        if (o->accelerator) c.accelerator = o->accelerator;
        if (compact >= 0) c.yoco_compact = compact;
        if ((st = deepinfer_engine_open(&c, &e, eb, sizeof eb))) di_error_set(err, st, "%s", eb);
        if (!st) {
            st = deepinfer_generate(e, pr, (size_t)nr, sp, (size_t)nr, &res);
            if (st) di_error_set(err, st, "%s", deepinfer_engine_last_error(e));
            ev_engine_info_read(e, &sum->engine);
            snprintf(sum->accelerator, sizeof sum->accelerator, "%s", sum->engine.accelerator);
            sum->batch_invariant = sum->engine.cfg.batch_invariant;
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
        gen_out *g = &outs[i];
        memset(g, 0, sizeof *g);
        if (it->kind == EV_ERROR) {
            out_fail(g, it->error, it->message);
        } else {
            const deepinfer_request_output *out = res[r++];
            if (out->status != DEEPINFER_OK || !out->n_choices)
                out_fail(g, out->status == DEEPINFER_ERR_LIMIT ? "context_too_long" : "request_failed",
                         out->error ? out->error : deepinfer_status_name(out->status));
            else score_one(it, o, vocab, &out->choices[0], g);
        }
        if (g->error) sum->n_errors++;
        else if (g->kind == EV_GEN_MATCH) sum->n_match++, sum->match_correct += g->correct;
        else sum->n_schema++, sum->schema_valid += g->valid, sum->schema_parses += g->parses;
    }
    if (res) deepinfer_outputs_free(res, (size_t)nr);
    so_vocab_free(vocab);
    di_tokenizer_free(tok);
    deepinfer_engine_close(e);
    free(idx), free(pr), free(sp);
    return st;
}

static void outs_free(gen_out *g, int n) {
    for (int i = 0; g && i < n; i++) free(g[i].text);
    free(g);
}

/* An outcome's members (no braces): the error, or the verdict and the completion. */
static void out_members(ev_buf *b, const ev_item *it, const gen_out *g) {
    if (g->error) {
        ev_printf(b, "\"error\": \"%s\", \"message\": ", g->error);
        ev_json_str(b, g->message, strlen(g->message));
        return;
    }
    if (g->kind == EV_GEN_MATCH) {
        ev_printf(b, "\"kind\": \"exact_match\", \"correct\": %s, \"extracted\": ", g->correct ? "true" : "false");
        if (g->found) ev_json_str(b, g->extracted, strlen(g->extracted));
        else ev_printf(b, "null");
        ev_printf(b, ", \"answer\": ");
        ev_json_str(b, it->answer.p, it->answer.n);
    } else {
        ev_printf(b, "\"kind\": \"json_schema\", \"valid\": %s, \"json_parses\": %s, \"constrained\": %s",
                  g->valid ? "true" : "false", g->parses ? "true" : "false", g->constrained ? "true" : "false");
    }
    ev_printf(b, ", \"finish_reason\": \"%s\", \"tokens\": %zu, \"output\": ", deepinfer_finish_reason_name(g->finish),
              g->tokens);
    ev_json_str(b, g->text ? g->text : "", g->len);
}

deepinfer_status ev_generate_tasks(ev_tasks *t, const ev_gen_opts *o, ev_buf *items, ev_gen_summary *sum, di_error *err) {
    gen_out *g = calloc((size_t)(t->n ? t->n : 1), sizeof *g);
    if (!g) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    deepinfer_status st = run(t, o, -1, g, sum, err);
    for (int i = 0; !st && i < t->n; i++) {
        ev_printf(items, "%s{\"line\": %d, ", i ? ",\n  " : "", t->items[i].line);
        out_members(items, &t->items[i], &g[i]);
        ev_printf(items, "}");
    }
    outs_free(g, t->n);
    return st;
}

static int differs(const gen_out *a, const gen_out *b) {
    if (!a->error != !b->error) return 1;
    if (a->error) return strcmp(a->error, b->error) != 0;
    return a->len != b->len || memcmp(a->text, b->text, a->len) != 0;
}

static double acc(int k, int n) { return n ? (double)k / n : NAN; }

deepinfer_status ev_generate_compare(ev_tasks *t, const ev_gen_opts *o, ev_buf *items, ev_gen_summary *exact,
                                     ev_gen_summary *compact, ev_gen_compare *cmp, di_error *err) {
    memset(cmp, 0, sizeof *cmp);
    memset(compact, 0, sizeof *compact);
    size_t n = (size_t)(t->n ? t->n : 1);
    gen_out *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    deepinfer_status st = a && b ? run(t, o, 0, a, exact, err) : di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st && exact->engine.cfg.yoco_compact)
        st = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                          "--compare-compact: the exact run ran compact prefill too ($DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE"
                          "=compact overrides the configuration); unset it to compare");
    if (!st) st = run(t, o, 1, b, compact, err);
    for (int i = 0; !st && i < t->n; i++) {
        const ev_item *it = &t->items[i];
        ev_printf(items, "%s{\"line\": %d, ", i ? ",\n  " : "", it->line);
        out_members(items, it, &a[i]);
        if (it->kind == EV_GEN_MATCH || it->kind == EV_GEN_SCHEMA) { /* a generation item: it ran in both modes */
            int d = differs(&a[i], &b[i]);
            cmp->items++, cmp->changed += d;
            ev_printf(items, ", \"compact\": {");
            out_members(items, it, &b[i]);
            ev_printf(items, ", \"output_changed\": %s}", d ? "true" : "false");
        }
        ev_printf(items, "}");
    }
    cmp->match_acc_delta = acc(compact->match_correct, compact->n_match) - acc(exact->match_correct, exact->n_match);
    cmp->schema_validity_delta = acc(compact->schema_valid, compact->n_schema) - acc(exact->schema_valid, exact->n_schema);
    outs_free(a, t->n), outs_free(b, t->n);
    return st;
}

void ev_gen_summary_json(ev_buf *b, const ev_gen_summary *s) {
    ev_printf(b, "\"results\": {\"exact_match\": {\"items\": %d, \"correct\": %d, \"acc\": ", s->n_match, s->match_correct);
    ev_json_num(b, acc(s->match_correct, s->n_match));
    ev_printf(b, "}, \"json_schema\": {\"items\": %d, \"valid\": %d, \"json_parses\": %d, \"validity\": ", s->n_schema,
              s->schema_valid, s->schema_parses);
    ev_json_num(b, acc(s->schema_valid, s->n_schema));
    ev_printf(b, "}, \"errors\": %d}", s->n_errors);
}

void ev_gen_compare_json(ev_buf *b, const ev_gen_compare *c) {
    ev_printf(b, "\"compare\": {\"items\": %d, \"output_changed\": %d, \"changed_fraction\": ", c->items, c->changed);
    ev_json_num(b, acc(c->changed, c->items));
    ev_printf(b, ", \"exact_match_acc_delta\": ");
    ev_json_num(b, c->match_acc_delta);
    ev_printf(b, ", \"json_schema_validity_delta\": ");
    ev_json_num(b, c->schema_validity_delta);
    ev_printf(b, "}");
}

void ev_gen_summary_table(FILE *f, const ev_gen_summary *s) {
    ev_engine_table(f, &s->engine);
    fprintf(f, "%-24s %7s  %s\n", "task", "items", "score");
    if (s->n_match) fprintf(f, "%-24s %7d  acc %.4f\n", "exact_match", s->n_match, (double)s->match_correct / s->n_match);
    if (s->n_schema)
        fprintf(f, "%-24s %7d  valid %.4f, parses %.4f\n", "json_schema", s->n_schema, (double)s->schema_valid / s->n_schema,
                (double)s->schema_parses / s->n_schema);
    fprintf(f, "%-24s %7d\n", "errors", s->n_errors);
}

void ev_gen_compare_table(FILE *f, const ev_gen_summary *exact, const ev_gen_summary *compact, const ev_gen_compare *c) {
    fprintf(f, "%-24s %7s  %-10s %-10s %s\n", "task", "items", "exact", "compact", "delta");
    if (exact->n_match)
        fprintf(f, "%-24s %7d  %-10.4f %-10.4f %+.4f\n", "exact_match acc", exact->n_match,
                acc(exact->match_correct, exact->n_match), acc(compact->match_correct, compact->n_match), c->match_acc_delta);
    if (exact->n_schema)
        fprintf(f, "%-24s %7d  %-10.4f %-10.4f %+.4f\n", "json_schema validity", exact->n_schema,
                acc(exact->schema_valid, exact->n_schema), acc(compact->schema_valid, compact->n_schema),
                c->schema_validity_delta);
    fprintf(f, "%-24s %7d  %d changed (%.4f)\n", "outputs", c->items, c->changed, acc(c->changed, c->items));
    fprintf(f, "%-24s %7d / %d\n", "errors", exact->n_errors, compact->n_errors);
}
