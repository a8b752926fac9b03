/* eval_ll.c — loglikelihood, multiple choice and loglikelihood_rolling over task items (eval_ll.h). */
#include "eval/eval_ll.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval_rolling.h"

/* One scored (context, continuation) sequence. */
typedef struct pair {
    int32_t *ids;
    int n, nctx; /* ids = [BOS] + context (nctx tokens incl. BOS) + continuation */
    double *lp;
    uint8_t *gr;
} pair;

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Tokenize (context, continuation) the harness's way into *p. */
static deepinfer_status encode_pair(const ev_model *m, const ev_str *ctx, const ev_str *cont, pair *p, di_error *err) {
    size_t cn = ctx->n;
    while (cn > 0 && is_ws(ctx->p[cn - 1])) cn--;
    char *whole = malloc(ctx->n + cont->n + 1);
    if (!whole) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(whole, ctx->p, ctx->n);
    memcpy(whole + ctx->n, cont->p, cont->n);
    int32_t *w = NULL, *c = NULL;
    int nw = 0, nc = 0;
    deepinfer_status st = ev_encode(m, whole, ctx->n + cont->n, &w, &nw, err);
    if (!st) st = ev_encode(m, ctx->p, cn, &c, &nc, err);
    free(whole);
    if (!st) {
        p->n = nw + 1;
        p->nctx = nc + 1;
        p->ids = malloc(sizeof(int32_t) * (size_t)p->n);
        p->lp = calloc((size_t)p->n, sizeof(double));
        p->gr = calloc((size_t)p->n, 1);
        if (!p->ids || !p->lp || !p->gr) st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        else {
            p->ids[0] = m->bos;
            memcpy(p->ids + 1, w, sizeof(int32_t) * (size_t)nw);
        }
    }
    free(w), free(c);
    return st;
}

static void pair_free(pair *p) {
    free(p->ids), free(p->lp), free(p->gr);
    memset(p, 0, sizeof *p);
}

static double pair_lp(const pair *p, int *greedy) {
    double s = 0;
    int g = 1;
    for (int i = p->nctx; i < p->n; i++) s += p->lp[i], g &= p->gr[i];
    if (greedy) *greedy = g;
    return s;
}

static void item_error_json(ev_buf *b, const ev_item *it) {
    ev_printf(b, "{\"line\": %d, \"error\": \"%s\", \"message\": ", it->line, it->error);
    ev_json_str(b, it->message, strlen(it->message));
    ev_printf(b, "}");
}

deepinfer_status ev_score_tasks(ev_model *m, ev_tasks *t, int window, int stride, ev_buf *items, ev_ll_summary *sum,
                                di_error *err) {
    memset(sum, 0, sizeof *sum);
    int npairs = 0;
    for (int i = 0; i < t->n; i++) {
        ev_item *it = &t->items[i];
        if (it->kind == EV_GEN_MATCH || it->kind == EV_GEN_SCHEMA)
            ev_item_fail(it, "wrong_task", "a generation item: score it with `deepinfer eval generate`");
        npairs += it->kind == EV_LL ? 1 : it->kind == EV_MC ? it->n_choices : 0;
    }
    pair *pp = calloc((size_t)(npairs ? npairs : 1), sizeof *pp);
    int *first = calloc((size_t)(t->n ? t->n : 1), sizeof *first); /* each item's first pair */
    int32_t **rt = calloc((size_t)(t->n ? t->n : 1), sizeof *rt);   /* rolling items' tokens */
    int *rn = calloc((size_t)(t->n ? t->n : 1), sizeof *rn);
    deepinfer_status st = pp && first && rt && rn ? DEEPINFER_OK : di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    int64_t need = 2, longest_text = 1;
    for (int i = 0, k = 0; !st && i < t->n; i++) {
        ev_item *it = &t->items[i];
        first[i] = k;
        if (it->kind == EV_ROLLING) {
            if ((st = ev_encode(m, it->text.p, it->text.n, &rt[i], &rn[i], err))) break;
            if (!rn[i]) ev_item_fail(it, "empty_continuation", "\"text\" has no tokens");
            else if (rn[i] + 1 > longest_text) longest_text = rn[i] + 1;
            continue;
        }
        if (it->kind != EV_LL && it->kind != EV_MC) continue;
        int nc = it->kind == EV_LL ? 1 : it->n_choices;
        for (int c = 0; c < nc && !st; c++) {
            pair *p = &pp[k + c];
            st = encode_pair(m, &it->context, it->kind == EV_LL ? &it->continuation : &it->choices[c], p, err);
            if (st) break;
            if (p->n > m->context) {
                ev_item_fail(it, "context_too_long", "[BOS] + context + continuation%s is %d tokens; the model's context is %lld",
                             it->kind == EV_MC ? " (a choice)" : "", p->n, (long long)m->context);
            } else if (p->n <= p->nctx) {
                ev_item_fail(it, "empty_continuation", "the continuation has no tokens of its own after the context's");
            }
        }
        k += nc;
        if (it->kind != EV_ERROR)
            for (int c = 0; c < nc; c++)
                if (pp[first[i] + c].n > need) need = pp[first[i] + c].n;
    }
    if (!st && !window) window = (int)(longest_text < m->context ? longest_text : m->context);
    if (window < 2) window = 2;
    if (!st && !stride) stride = window - 1;
    if (!st) st = ev_rolling_check(m, window, stride, err);
    if (!st) st = ev_model_load(m, need > window ? need : window, err);
    for (int i = 0; !st && ev_model_compact(m) && i < t->n; i++) /* no prompt logprobs: every scoring item refused */
        if (t->items[i].kind == EV_LL || t->items[i].kind == EV_MC || t->items[i].kind == EV_ROLLING)
            ev_item_fail(&t->items[i], EV_NEEDS_PROMPT_LOGPROBS, "%s", EV_NEEDS_PROMPT_LOGPROBS_MSG);
    /* every pair of a still-valid item, in one batched call */
    ev_seq *sq = st ? NULL : calloc((size_t)(npairs ? npairs : 1), sizeof *sq);
    int ns = 0;
    if (!st && !sq) st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; !st && i < t->n; i++) {
        ev_item *it = &t->items[i];
        if (it->kind != EV_LL && it->kind != EV_MC) continue;
        for (int c = 0; c < (it->kind == EV_LL ? 1 : it->n_choices); c++) {
            pair *p = &pp[first[i] + c];
            sq[ns++] = (ev_seq){.ids = p->ids, .n = p->n, .score_from = p->nctx, .lp = p->lp, .greedy = p->gr};
        }
    }
    if (!st && ns) st = ev_score(m, sq, ns, err);
    free(sq);
    for (int i = 0; !st && i < t->n; i++) {
        ev_item *it = &t->items[i];
        if (items->n) ev_printf(items, ",\n  ");
        if (it->kind == EV_ROLLING) {
            ev_rolling_result r;
            if ((st = ev_rolling(m, rt[i], rn[i], window, stride, &r, err))) break;
            ev_printf(items, "{\"line\": %d, \"kind\": \"loglikelihood_rolling\", \"logprob\": ", it->line);
            ev_json_num(items, -r.nll_sum);
            ev_printf(items, ", \"tokens\": %lld, \"bytes\": %zu, \"windows\": %d}", (long long)r.tokens, it->text.n, r.windows);
            sum->n_rolling++, sum->rolling_nll += r.nll_sum, sum->rolling_tokens += r.tokens;
            sum->rolling_bytes += (int64_t)it->text.n, sum->rolling_windows += r.windows;
        } else if (it->kind == EV_LL) {
            int g;
            double lp = pair_lp(&pp[first[i]], &g);
            ev_printf(items, "{\"line\": %d, \"kind\": \"loglikelihood\", \"logprob\": ", it->line);
            ev_json_num(items, lp);
            ev_printf(items, ", \"is_greedy\": %s, \"tokens\": %d}", g ? "true" : "false", pp[first[i]].n - pp[first[i]].nctx);
            sum->n_ll++, sum->n_ll_greedy += g, sum->ll_sum += lp;
        } else if (it->kind == EV_MC) {
            int pred = 0, pred_norm = 0;
            double best = -INFINITY, best_norm = -INFINITY;
            ev_printf(items, "{\"line\": %d, \"kind\": \"multiple_choice\", \"logprobs\": [", it->line);
            for (int c = 0; c < it->n_choices; c++) {
                double lp = pair_lp(&pp[first[i] + c], NULL), ln = lp / (double)it->choices[c].n;
                if (lp > best) best = lp, pred = c;
                if (ln > best_norm) best_norm = ln, pred_norm = c;
                ev_printf(items, "%s", c ? ", " : "");
                ev_json_num(items, lp);
            }
            ev_printf(items, "], \"pred\": %d, \"pred_norm\": %d, \"answer\": %d, \"correct\": %s, \"correct_norm\": %s}", pred,
                      pred_norm, it->answer_index, pred == it->answer_index ? "true" : "false",
                      pred_norm == it->answer_index ? "true" : "false");
            sum->n_mc++, sum->mc_correct += pred == it->answer_index, sum->mc_correct_norm += pred_norm == it->answer_index;
        } else {
            item_error_json(items, it);
            sum->n_errors++;
        }
    }
    for (int i = 0; i < npairs && pp; i++) pair_free(&pp[i]);
    for (int i = 0; rt && i < t->n; i++) free(rt[i]);
    free(pp), free(first), free(rt), free(rn);
    return st;
}

void ev_ll_summary_json(ev_buf *b, const ev_ll_summary *s) {
    ev_printf(b, "\"results\": {\"loglikelihood\": {\"items\": %d, \"logprob_sum\": ", s->n_ll);
    ev_json_num(b, s->ll_sum);
    ev_printf(b, ", \"greedy_fraction\": ");
    ev_json_num(b, s->n_ll ? (double)s->n_ll_greedy / s->n_ll : NAN);
    ev_printf(b, "}, \"multiple_choice\": {\"items\": %d, \"acc\": ", s->n_mc);
    ev_json_num(b, s->n_mc ? (double)s->mc_correct / s->n_mc : NAN);
    ev_printf(b, ", \"acc_norm\": ");
    ev_json_num(b, s->n_mc ? (double)s->mc_correct_norm / s->n_mc : NAN);
    ev_printf(b, "}, \"loglikelihood_rolling\": {\"items\": %d, \"tokens\": %lld, \"bytes\": %lld, \"windows\": %d, \"nll_sum\": ",
              s->n_rolling, (long long)s->rolling_tokens, (long long)s->rolling_bytes, s->rolling_windows);
    ev_json_num(b, s->rolling_nll);
    ev_printf(b, ", \"perplexity\": ");
    ev_json_num(b, s->rolling_tokens ? exp(s->rolling_nll / (double)s->rolling_tokens) : NAN);
    ev_printf(b, ", \"bits_per_byte\": ");
    ev_json_num(b, s->rolling_bytes ? s->rolling_nll / log(2.0) / (double)s->rolling_bytes : NAN);
    ev_printf(b, "}, \"errors\": %d}", s->n_errors);
}

void ev_ll_summary_table(FILE *f, const ev_ll_summary *s) {
    fprintf(f, "%-24s %7s  %s\n", "task", "items", "score");
    if (s->n_ll)
        fprintf(f, "%-24s %7d  logprob sum %.4f, greedy %.4f\n", "loglikelihood", s->n_ll, s->ll_sum,
                (double)s->n_ll_greedy / s->n_ll);
    if (s->n_mc)
        fprintf(f, "%-24s %7d  acc %.4f, acc_norm %.4f\n", "multiple_choice", s->n_mc, (double)s->mc_correct / s->n_mc,
                (double)s->mc_correct_norm / s->n_mc);
    if (s->n_rolling)
        fprintf(f, "%-24s %7d  perplexity %.4f, bits/byte %.4f (%lld tokens)\n", "loglikelihood_rolling", s->n_rolling,
                exp(s->rolling_nll / (double)s->rolling_tokens), s->rolling_nll / log(2.0) / (double)s->rolling_bytes,
                (long long)s->rolling_tokens);
    fprintf(f, "%-24s %7d\n", "errors", s->n_errors);
}
