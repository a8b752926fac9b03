/*
 * `deepinfer eval` (tools/eval/) on the embedded demo model: perplexity
 * and loglikelihood equal what an independent log-softmax of `score`'s
 * all-position logits gives for the same tokens; multiple choice picks
 * the highest; bad items get named errors while the rest is scored; an
 * exact-match and a JSON-schema generation task through the engine. The
 * engine path (prompt logprobs) and the model-forward path give the same
 * perplexity. Any engine configuration: speculation on gives bitwise the
 * same scores and outputs; compact prefill refuses scoring per task and
 * --compare-compact reports the generation difference; the report's
 * "engine" object names the configuration.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eval/eval_extract.h"
#include "eval/eval_gen.h"
#include "eval/eval_ll.h"
#include "eval/eval_ppl.h"
#include "eval/eval_schema.h"
#include "test.h"
#include "util/file.h"

#define DEMO_MODEL "../../models/deepinfer-demo-v41"

static const char TEXT[] = "In the beginning God created the heaven and the earth. And the earth was without form.";

/* -sum log p(ids[i] | ids[<i]) for i in [from, n), from score's all-position logits, log-softmax in double. */
static double ref_nll(ev_model *m, const int32_t *ids, int n, int from) {
    di_score_req req = {.prompt = ids, .n_prompt = n, .all_positions = 1};
    di_score_result r = {0};
    di_error err = {0};
    if (di_score_run(&m->sm, &req, &r, &err)) return NAN;
    int V = m->vocab;
    double nll = 0;
    for (int p = from; p < n; p++) {
        const float *row = r.logits + (size_t)(p - 1) * V;
        double mx = row[0], s = 0;
        for (int i = 1; i < V; i++) mx = row[i] > mx ? row[i] : mx;
        for (int i = 0; i < V; i++) s += exp(row[i] - mx);
        nll -= row[ids[p]] - mx - log(s);
    }
    di_score_result_free(&r);
    return nll;
}

static int open_demo(ev_model *m) {
    di_error err = {0};
    if (ev_model_open(di_test_data(DEMO_MODEL), "cpu", -1, m, &err)) {
        di_test_fail(__FILE__, __LINE__, "open: %s", err.msg);
        return 0;
    }
    return 1;
}

TEST(eval_perplexity_equals_score_nll) {
    ev_model m;
    if (!open_demo(&m)) return;
    di_error err = {0};
    ev_ppl_result r;
    CHECK_MSG(!ev_perplexity(&m, TEXT, strlen(TEXT), 0, 0, &r, &err), "%s", err.msg);
    int32_t *ids = NULL;
    int T = 0;
    CHECK(!ev_encode(&m, TEXT, strlen(TEXT), &ids, &T, &err));
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)(T + 1));
    seq[0] = m.bos;
    memcpy(seq + 1, ids, sizeof(int32_t) * (size_t)T);
    double nll = ref_nll(&m, seq, T + 1, 1);
    CHECK_EQ_INT(r.tokens, T);
    CHECK_EQ_INT(r.windows, 1);
    CHECK_EQ_INT(r.bytes, (int64_t)strlen(TEXT));
    CHECK_NEAR(r.nll_sum, nll, 1e-9 * fabs(nll));
    CHECK_NEAR(r.perplexity, exp(nll / T), 1e-9 * r.perplexity);
    CHECK_NEAR(r.bits_per_byte, nll / log(2.0) / (double)strlen(TEXT), 1e-12);
    /* sliding windows (8 positions every 3 tokens): each window's new tokens, scored after [BOS] + its start */
    ev_ppl_result w;
    CHECK_MSG(!ev_perplexity(&m, TEXT, strlen(TEXT), 8, 3, &w, &err), "%s", err.msg);
    double wn = 0;
    int windows = 0;
    for (int b = 0, prev = 0;; b += 3, windows++) {
        int end = b + 7 < T ? b + 7 : T;
        seq[0] = m.bos;
        memcpy(seq + 1, ids + b, sizeof(int32_t) * (size_t)(end - b));
        wn += ref_nll(&m, seq, end - b + 1, 1 + prev - b);
        prev = end;
        if (end == T) break;
    }
    CHECK_EQ_INT(w.windows, windows + 1);
    CHECK_EQ_INT(w.tokens, T);
    CHECK_NEAR(w.nll_sum, wn, 1e-9 * wn);
    CHECK(w.nll_sum > nll); /* less context per token: a worse score */
    free(ids), free(seq);
    ev_model_close(&m);
}

static const char TASKS[] =
    "{\"context\": \"In the beginning God created the heaven\", \"continuation\": \" and the earth.\"}\n"
    "{\"context\": \"The Lord is my\", \"choices\": [\" banana\", \" shepherd\", \" keyboard\"], \"answer\": 1}\n"
    "{\"context\": \"x\", \"continuation\": \"\"}\n"
    "{\"context\": \"x\", \"continuation\": \n"
    "\n"
    "{\"text\": \"And God said, Let there be light: and there was light.\"}\n"
    "{\"context\": \"a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h\", \"continuation\": \" i\"}\n"
    "{\"prompt\": \"2+2=\", \"answer\": \"4\"}\n";

TEST(eval_loglikelihood_matches_score_and_bad_items) {
    ev_model m;
    if (!open_demo(&m)) return;
    m.context = 32; /* a short model context, so the alphabet line is too long for it */
    di_error err = {0};
    ev_tasks t;
    CHECK(!ev_tasks_parse(TASKS, strlen(TASKS), &t, &err));
    CHECK_EQ_INT(t.n, 7);
    ev_buf items = {0};
    ev_ll_summary s;
    CHECK_MSG(!ev_score_tasks(&m, &t, 0, 0, &items, &s, &err), "%s", err.msg);
    CHECK_EQ_INT(s.n_ll, 1);
    CHECK_EQ_INT(s.n_mc, 1);
    CHECK_EQ_INT(s.n_rolling, 1);
    CHECK_EQ_INT(s.n_errors, 4);
    CHECK_EQ_INT(t.items[2].kind, EV_ERROR);
    CHECK_STR_EQ(t.items[2].error, "empty_continuation");
    CHECK_STR_EQ(t.items[3].error, "malformed_json");
    CHECK_EQ_INT(t.items[3].line, 4);
    CHECK_STR_EQ(t.items[5].error, "context_too_long");
    CHECK_STR_EQ(t.items[6].error, "wrong_task");
    CHECK(strstr(items.p, "\"line\": 4, \"error\": \"malformed_json\"") != NULL);
    /* the loglikelihood item against score: context and continuation tokenized apart here (no trailing blank) */
    int32_t *c = NULL, *w = NULL;
    int nc = 0, nw = 0;
    const char *ctx = "In the beginning God created the heaven", *whole = "In the beginning God created the heaven and the earth.";
    CHECK(!ev_encode(&m, ctx, strlen(ctx), &c, &nc, &err) && !ev_encode(&m, whole, strlen(whole), &w, &nw, &err));
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)(nw + 1));
    seq[0] = m.bos;
    memcpy(seq + 1, w, sizeof(int32_t) * (size_t)nw);
    double nll = ref_nll(&m, seq, nw + 1, nc + 1);
    CHECK_NEAR(s.ll_sum, -nll, 1e-9 * nll);
    /* multiple choice: pred is the argmax of the reported logprobs */
    const char *mc = strstr(items.p, "\"logprobs\": [");
    CHECK(mc);
    double lp[3];
    CHECK(sscanf(mc, "\"logprobs\": [%lf, %lf, %lf]", &lp[0], &lp[1], &lp[2]) == 3);
    int best = lp[1] > lp[0] ? 1 : 0;
    best = lp[2] > lp[best] ? 2 : best;
    char want[32];
    snprintf(want, sizeof want, "\"pred\": %d,", best);
    CHECK(strstr(mc, want) != NULL);
    CHECK_EQ_INT(s.mc_correct, best == 1);
    CHECK(best == 1); /* the demo model knows Psalm 23 */
    free(c), free(w), free(seq);
    ev_buf_free(&items);
    ev_tasks_free(&t);
    ev_model_close(&m);
}

TEST(eval_extract_and_schema_check) {
    char got[64];
    CHECK_EQ_INT(ev_extract("so 12 apples, then 1,200.50 in all", 34, NULL, got, sizeof got), 1);
    CHECK_STR_EQ(got, "1,200.50");
    CHECK(ev_answer_matches(got, "1200.5", 1));
    CHECK(!ev_answer_matches(got, "1200.6", 1));
    CHECK_EQ_INT(ev_extract("#### 42 and 7", 13, "#### (\\-?[0-9.,]+)", got, sizeof got), 1);
    CHECK_STR_EQ(got, "42");
    CHECK_EQ_INT(ev_extract("no digits", 9, NULL, got, sizeof got), 0);
    CHECK_EQ_INT(ev_extract("x", 1, "(", got, sizeof got), -1);
    ev_model m;
    if (!open_demo(&m)) return;
    so_vocab *v = NULL;
    di_error err = {0};
    int32_t eos = so_tokenizer_default_eos(m.tok);
    CHECK(!so_vocab_from_tokenizer(m.tok, m.vocab, &eos, eos >= 0, &v, &err));
    const char *schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}";
    int valid, parses;
    CHECK(!ev_schema_check(v, schema, strlen(schema), " {\"a\": 3}\n", 10, &valid, &parses, &err));
    CHECK(valid && parses);
    CHECK(!ev_schema_check(v, schema, strlen(schema), "{\"a\": \"x\"}", 10, &valid, &parses, &err));
    CHECK(!valid && parses);
    CHECK(!ev_schema_check(v, schema, strlen(schema), "{\"a\": 3", 7, &valid, &parses, &err));
    CHECK(!valid && !parses);
    CHECK(ev_schema_check(v, "{\"type\": 5}", 11, "1", 1, &valid, &parses, &err) != DEEPINFER_OK);
    so_vocab_free(v);
    ev_model_close(&m);
}

static const char GEN[] =
    "{\"prompt\": \"In the beginning God created\", \"answer\": \"him\", \"regex\": \"^\\\\s*(\\\\w+)\"}\n"
    "{\"prompt\": \"In the beginning God created\", \"answer\": \"7\"}\n"
    "{\"prompt\": \"Answer yes or no:\", \"schema\": {\"enum\": [\"yes\", \"no\"]}, \"constrained\": true}\n"
    "{\"prompt\": \"Answer yes or no:\", \"schema\": {\"enum\": [\"yes\", \"no\"]}}\n"
    "{\"prompt\": 5}\n";

TEST(eval_generate_exact_match_and_schema) {
    ev_tasks t;
    di_error err = {0};
    CHECK(!ev_tasks_parse(GEN, strlen(GEN), &t, &err));
    ev_gen_opts o = {.model = di_test_data(DEMO_MODEL), .accelerator = "cpu", .max_tokens = 12, .top_p = 1};
    ev_buf items = {0};
    ev_gen_summary s;
    CHECK_MSG(!ev_generate_tasks(&t, &o, &items, &s, &err), "%s", err.msg);
    CHECK_EQ_INT(s.n_match, 2);
    CHECK_EQ_INT(s.match_correct, 1); /* greedy: " him, and in the end ..." (tools/reference/eval_results.json) */
    CHECK(strstr(items.p, "\"correct\": true, \"extracted\": \"him\"") != NULL);
    CHECK_EQ_INT(s.n_schema, 2);
    CHECK_EQ_INT(s.schema_valid, 1); /* constrained: valid; unconstrained: the demo model writes prose */
    CHECK(strstr(items.p, "\"valid\": true, \"json_parses\": true, \"constrained\": true") != NULL);
    CHECK(strstr(items.p, "\"valid\": false, \"json_parses\": false, \"constrained\": false") != NULL);
    CHECK_EQ_INT(s.n_errors, 1);
    CHECK_STR_EQ(s.accelerator, "cpu");
    ev_buf_free(&items);
    ev_tasks_free(&t);
}

/* Both scoring paths on the same text and windows: the engine's prefill rows and the model path's
 * rows are the same logits (batch-invariant CPU kernels); the engine rounds each logprob to float
 * (deepinfer.h prompt_logprobs) where the model path keeps double, so each token's lp agrees to
 * float rounding (|lp| * 2^-24, plus the lse's) and the sum to 1e-6 relative; greedy counts are
 * equal. */
TEST(eval_perplexity_engine_equals_model_forward) {
    ev_model a, b;
    if (!open_demo(&a) || !open_demo(&b)) return;
    ev_model_use_engine(&b, NULL);
    di_error err = {0};
    ev_ppl_result ra, rb;
    for (int w = 0; w < 2; w++) {
        int win = w ? 8 : 0, stride = w ? 3 : 0; /* one window, then sliding windows */
        CHECK_MSG(!ev_perplexity(&a, TEXT, strlen(TEXT), win, stride, &ra, &err), "%s", err.msg);
        CHECK_MSG(!ev_perplexity(&b, TEXT, strlen(TEXT), win, stride, &rb, &err), "%s", err.msg);
        CHECK_EQ_INT(ra.tokens, rb.tokens);
        CHECK_EQ_INT(ra.windows, rb.windows);
        CHECK_EQ_INT(ra.greedy, rb.greedy);
        CHECK_NEAR(rb.nll_sum, ra.nll_sum, 1e-6 * fabs(ra.nll_sum));
        CHECK_NEAR(rb.perplexity, ra.perplexity, 1e-6 * ra.perplexity);
        fprintf(stderr, "    window %d: perplexity %.12g (model-forward) vs %.12g (engine)\n", win, ra.perplexity,
                rb.perplexity);
    }
    ev_model_close(&a);
    ev_model_close(&b);
}

TEST(eval_cli_perplexity_json) {
    char exe[4096], cmd[9000], dir[] = "/tmp/di_eval_XXXXXX";
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    CHECK(mkdtemp(dir));
    char txt[256], out[256];
    snprintf(txt, sizeof txt, "%s/t.txt", dir);
    snprintf(out, sizeof out, "%s/r.json", dir);
    FILE *f = fopen(txt, "w");
    CHECK(f && fputs(TEXT, f) >= 0 && !fclose(f));
    snprintf(cmd, sizeof cmd, "%s eval perplexity --model %s --text %s --output %s 2>/dev/null", exe, di_test_data(DEMO_MODEL),
             txt, out);
    CHECK(system(cmd) == 0);
    char buf[4096] = "";
    f = fopen(out, "r");
    CHECK(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *keys[] = {"\"perplexity\": ", "\"tokens\": ", "\"bits_per_byte\": ", "\"nll_sum\": ", "\"bytes\": 86",
                          "\"windows\": 1", "\"accelerator\": \"cpu\"", "\"batch_invariant\": true", "\"commit\": \"",
                          "\"path\": \"engine\"", "\"engine\": {\"accelerator\": \"cpu\", \"batch_invariant\": true, "
                          "\"speculation\": \"off\", \"nextn_decode\": 0", "\"bounded_replay\": \"exact\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) CHECK_MSG(strstr(buf, keys[i]), "%s missing in %s", keys[i], buf);
    snprintf(cmd, sizeof cmd, "%s eval perplexity --model %s --text %s --stride 0 2>/dev/null", exe, di_test_data(DEMO_MODEL), txt);
    CHECK(WEXITSTATUS(system(cmd)) == 2);
    remove(txt), remove(out), rmdir(dir);
}

/* The lines of eval/demo/lastword.jsonl numbered in `which` (1-based, ascending), as one JSONL text. */
static char *lastword_lines(const int *which, int n) {
    char *all = NULL, *out = NULL;
    size_t len = 0, w = 0;
    di_error err = {0};
    if (di_read_file(di_test_data("../../eval/demo/lastword.jsonl"), 0, &all, &len, &err) || !(out = malloc(len + 2))) {
        free(all);
        return NULL;
    }
    int line = 1, k = 0;
    for (size_t i = 0; i < len && k < n; line++) {
        size_t e = i;
        while (e < len && all[e] != '\n') e++;
        if (line == which[k]) {
            memcpy(out + w, all + i, e - i);
            w += e - i;
            out[w++] = '\n';
            k++;
        }
        i = e + 1;
    }
    out[w] = 0;
    free(all);
    return k == n ? out : (free(out), NULL);
}

typedef struct gen_run {
    ev_buf items;
    ev_gen_summary s;
} gen_run;

static int run_gen(const char *jsonl, const deepinfer_engine_config *cfg, int max_tokens, gen_run *r) {
    ev_tasks t;
    di_error err = {0};
    memset(r, 0, sizeof *r);
    ev_gen_opts o = {.model = di_test_data(DEMO_MODEL), .engine = cfg, .accelerator = "cpu", .max_tokens = max_tokens,
                     .top_p = 1};
    int ok = !ev_tasks_parse(jsonl, strlen(jsonl), &t, &err) && !ev_generate_tasks(&t, &o, &r->items, &r->s, &err);
    if (!ok) fprintf(stderr, "    generate: %s\n", err.msg);
    ev_tasks_free(&t);
    return ok;
}

/* Speculation changes no score and no output: perplexity and loglikelihood (prompt logprobs through
 * the engine) and greedy generation, through the eval code path, with speculation off, fixed drafts
 * of 5 (--nextn-decode 5), confidence-scheduled drafts (--mtp-varlen 1) and the environment's
 * $DEEPINFER_USE_NEXTN_DECODE: the numbers bitwise, the item reports byte for byte. The fixed-draft
 * generation runs did verify drafts (the report's counters); the confidence-scheduled run verifies
 * what the step costs measured at open say pays, which depends on the machine's load, so only its
 * results are checked. */
TEST(eval_speculation_gives_identical_scores) {
    static const int lines[] = {1, 2, 3};
    char *gen = lastword_lines(lines, 3);
    CHECK(gen != NULL);
    if (!gen) return;
    deepinfer_engine_config cfg[4];
    for (int k = 0; k < 4; k++) deepinfer_engine_config_init(&cfg[k]);
    cfg[1].nextn_decode = 5;
    cfg[2].mtp_varlen = 1;
    const char *want_spec[] = {"off", "fixed", "varlen", "fixed"};
    ev_ppl_result ppl[4];
    ev_buf ll[4] = {{0}};
    ev_ll_summary lls[4];
    gen_run g[4];
    for (int k = 0; k < 4; k++) {
        if (k == 3) setenv("DEEPINFER_USE_NEXTN_DECODE", "3", 1); /* the environment overrides the config */
        ev_model m;
        if (!open_demo(&m)) break;
        ev_model_use_engine(&m, &cfg[k]);
        di_error err = {0};
        CHECK_MSG(!ev_perplexity(&m, TEXT, strlen(TEXT), 0, 0, &ppl[k], &err), "%s", err.msg);
        CHECK_STR_EQ(m.info.accelerator, "cpu");
        ev_model_close(&m);
        if (!open_demo(&m)) break;
        ev_model_use_engine(&m, &cfg[k]);
        ev_tasks t;
        CHECK(!ev_tasks_parse(TASKS, strlen(TASKS), &t, &err));
        CHECK_MSG(!ev_score_tasks(&m, &t, 0, 0, &ll[k], &lls[k], &err), "%s", err.msg);
        ev_tasks_free(&t);
        ev_model_close(&m);
        CHECK(run_gen(gen, &cfg[k], 16, &g[k]));
        if (k == 3) unsetenv("DEEPINFER_USE_NEXTN_DECODE");
        ev_buf e = {0};
        ev_engine_json(&e, &g[k].s.engine);
        char want[64];
        snprintf(want, sizeof want, "\"speculation\": \"%s\"", want_spec[k]);
        CHECK_MSG(e.p && strstr(e.p, want), "%s missing in %s", want, e.p ? e.p : "");
        CHECK_EQ_INT(g[k].s.engine.cfg.nextn_decode, k == 0 ? 0 : k == 3 ? 3 : 5);
        if (k == 1 || k == 3) CHECK_MSG(g[k].s.engine.spec_steps > 0, "config %d verified no drafts", k);
        ev_buf_free(&e);
    }
    for (int k = 1; k < 4; k++) {
        CHECK(memcmp(&ppl[k].nll_sum, &ppl[0].nll_sum, sizeof(double)) == 0); /* bitwise */
        CHECK(memcmp(&ppl[k].perplexity, &ppl[0].perplexity, sizeof(double)) == 0);
        CHECK_EQ_INT(ppl[k].greedy, ppl[0].greedy);
        CHECK(memcmp(&lls[k].ll_sum, &lls[0].ll_sum, sizeof(double)) == 0);
        CHECK(memcmp(&lls[k].rolling_nll, &lls[0].rolling_nll, sizeof(double)) == 0);
        CHECK(ll[k].p && ll[0].p && !strcmp(ll[k].p, ll[0].p));
        CHECK_EQ_INT(g[k].s.match_correct, g[0].s.match_correct);
        CHECK_MSG(g[k].items.p && g[0].items.p && !strcmp(g[k].items.p, g[0].items.p), "config %d:\n%s\nvs\n%s", k,
                  g[k].items.p ? g[k].items.p : "", g[0].items.p ? g[0].items.p : "");
    }
    for (int k = 0; k < 4; k++) ev_buf_free(&ll[k]), ev_buf_free(&g[k].items);
    free(gen);
}

/* Compact prefill (bounded replay) gives prompt positions no logits: perplexity is refused with the
 * named error, every scoring item of a task file gets it (the other items keep theirs), and the
 * command still reports. */
TEST(eval_compact_refuses_scoring_per_task) {
    deepinfer_engine_config cfg;
    deepinfer_engine_config_init(&cfg);
    cfg.yoco_compact = 1;
    ev_model m;
    if (!open_demo(&m)) return;
    ev_model_use_engine(&m, &cfg);
    di_error err = {0};
    ev_ppl_result r;
    CHECK(ev_perplexity(&m, TEXT, strlen(TEXT), 0, 0, &r, &err) == DEEPINFER_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, EV_NEEDS_PROMPT_LOGPROBS) && strstr(err.msg, "compact"), "%s", err.msg);
    CHECK(ev_model_compact(&m));
    ev_model_close(&m);
    if (!open_demo(&m)) return;
    ev_model_use_engine(&m, &cfg);
    ev_tasks t;
    CHECK(!ev_tasks_parse(TASKS, strlen(TASKS), &t, &err));
    ev_buf items = {0};
    ev_ll_summary s;
    CHECK_MSG(!ev_score_tasks(&m, &t, 0, 0, &items, &s, &err), "%s", err.msg);
    CHECK_EQ_INT(s.n_ll + s.n_mc + s.n_rolling, 0);
    CHECK_EQ_INT(s.n_errors, 7);
    CHECK_STR_EQ(t.items[0].error, EV_NEEDS_PROMPT_LOGPROBS); /* loglikelihood */
    CHECK_STR_EQ(t.items[1].error, EV_NEEDS_PROMPT_LOGPROBS); /* multiple choice */
    CHECK_STR_EQ(t.items[4].error, EV_NEEDS_PROMPT_LOGPROBS); /* rolling */
    CHECK_STR_EQ(t.items[2].error, "empty_continuation");
    CHECK_STR_EQ(t.items[6].error, "wrong_task");
    ev_buf_free(&items);
    ev_tasks_free(&t);
    ev_model_close(&m);
}

/* --compare-compact on demo lastword items whose prompts (~450 tokens) exceed the compact tail (140):
 * its exact half equals a plain exact run and its compact half a plain compact run, byte for byte;
 * the changed count is the items whose outputs differ between those two runs (lines 38 and 61 of
 * the bundled file change within 16 tokens, lines 1 and 2 do not); the score delta is the
 * difference of the two accuracies. */
TEST(eval_generate_compare_compact) {
    static const int lines[] = {1, 2, 38, 61};
    char *gen = lastword_lines(lines, 4);
    CHECK(gen != NULL);
    if (!gen) return;
    deepinfer_engine_config ex, cp;
    deepinfer_engine_config_init(&ex);
    deepinfer_engine_config_init(&cp);
    cp.yoco_compact = 1;
    gen_run a, b;
    CHECK(run_gen(gen, &ex, 16, &a) && run_gen(gen, &cp, 16, &b));
    CHECK(a.s.engine.opened && !a.s.engine.cfg.yoco_compact);
    CHECK(b.s.engine.opened && b.s.engine.cfg.yoco_compact && b.s.engine.cfg.yoco_keep_tokens == 140);
    ev_tasks t;
    di_error err = {0};
    CHECK(!ev_tasks_parse(gen, strlen(gen), &t, &err));
    ev_gen_opts o = {.model = di_test_data(DEMO_MODEL), .engine = &ex, .accelerator = "cpu", .max_tokens = 16, .top_p = 1};
    ev_buf items = {0};
    ev_gen_summary se, sc;
    ev_gen_compare c;
    CHECK_MSG(!ev_generate_compare(&t, &o, &items, &se, &sc, &c, &err), "%s", err.msg);
    CHECK_EQ_INT(c.items, 4);
    CHECK(se.engine.opened && !se.engine.cfg.yoco_compact && sc.engine.cfg.yoco_compact);
    /* walk the four items: the exact object, then its "compact" member */
    const char *p = items.p;
    int changed = 0;
    for (int i = 0; i < 4 && p; i++) {
        const char *oa = strstr(p, "\"output\": \""), *ob = oa ? strstr(oa + 1, "\"output\": \"") : NULL;
        const char *flag = ob ? strstr(ob, "\"output_changed\": ") : NULL;
        CHECK(oa && ob && flag);
        if (!flag) break;
        int ch = !strncmp(flag + 18, "true", 4);
        changed += ch;
        CHECK_EQ_INT(ch, i >= 2); /* lines 38 and 61 */
        p = flag + 1;
    }
    CHECK_EQ_INT(c.changed, changed);
    CHECK_EQ_INT(c.changed, 2);
    /* each half equals its plain run: the plain runs' item objects appear in the compared items */
    const char *pa = a.items.p, *pb = b.items.p;
    for (int i = 0; i < 4 && pa && pb; i++) {
        const char *ea = strstr(pa, "\"output\": "), *eb = strstr(pb, "\"output\": ");
        CHECK(ea && eb);
        if (!ea || !eb) break;
        const char *xa = strstr(ea, "}"), *xb = strstr(eb, "}");
        char oa[2048] = "", ob[2048] = "";
        snprintf(oa, sizeof oa, "%.*s", (int)(xa - ea), ea);
        snprintf(ob, sizeof ob, "%.*s", (int)(xb - eb), eb);
        CHECK_MSG(strstr(items.p, oa) && strstr(items.p, ob), "item %d: %s / %s", i, oa, ob);
        pa = xa + 1, pb = xb + 1;
    }
    CHECK_EQ_INT(se.match_correct, a.s.match_correct);
    CHECK_EQ_INT(sc.match_correct, b.s.match_correct);
    CHECK_NEAR(c.match_acc_delta, (sc.match_correct - se.match_correct) / 4.0, 1e-15);
    /* the environment forcing compact on the exact half is refused, naming it */
    setenv("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE", "compact", 1);
    ev_buf junk = {0};
    CHECK(ev_generate_compare(&t, &o, &junk, &se, &sc, &c, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE"), "%s", err.msg);
    unsetenv("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE");
    ev_buf_free(&junk), ev_buf_free(&items), ev_buf_free(&a.items), ev_buf_free(&b.items);
    ev_tasks_free(&t);
    free(gen);
}

static int slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return 1;
}

/* The CLI: engine flags reach the engine and the report's "engine" object; compact mode refuses
 * perplexity (exit 1, the report naming the error) and every scoring item (exit 0); --compare-compact
 * reports both runs and the difference; an engine flag with --path model-forward is bad usage. */
TEST(eval_cli_engine_config_and_compact) {
    char exe[4096], cmd[9000], dir[] = "/tmp/di_eval_XXXXXX";
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    CHECK(mkdtemp(dir));
    char txt[256], tasks[256], gen[256], out[256];
    snprintf(txt, sizeof txt, "%s/t.txt", dir);
    snprintf(tasks, sizeof tasks, "%s/t.jsonl", dir);
    snprintf(gen, sizeof gen, "%s/g.jsonl", dir);
    snprintf(out, sizeof out, "%s/r.json", dir);
    FILE *f = fopen(txt, "w");
    CHECK(f && fputs(TEXT, f) >= 0 && !fclose(f));
    f = fopen(tasks, "w");
    CHECK(f && fputs(TASKS, f) >= 0 && !fclose(f));
    static const int lines[] = {38};
    char *g = lastword_lines(lines, 1);
    f = fopen(gen, "w");
    CHECK(g && f && fputs(g, f) >= 0 && !fclose(f));
    free(g);
    const char *model = di_test_data(DEMO_MODEL);
    static char buf[1 << 16];
    snprintf(cmd, sizeof cmd, "%s eval perplexity --model %s --text %s --yoco-compact --output %s 2>/dev/null", exe, model,
             txt, out);
    CHECK(WEXITSTATUS(system(cmd)) == 1);
    CHECK(slurp(out, buf, sizeof buf));
    CHECK_MSG(strstr(buf, "\"bounded_replay\": \"compact\"") && strstr(buf, "\"error\": \"needs_prompt_logprobs\""), "%s", buf);
    snprintf(cmd, sizeof cmd, "%s eval loglikelihood --model %s --tasks %s --yoco-compact --output %s 2>/dev/null", exe,
             model, tasks, out);
    CHECK(WEXITSTATUS(system(cmd)) == 0);
    CHECK(slurp(out, buf, sizeof buf));
    CHECK_MSG(strstr(buf, "\"line\": 1, \"error\": \"needs_prompt_logprobs\"") && strstr(buf, "\"errors\": 7"), "%s", buf);
    snprintf(cmd, sizeof cmd, "%s eval loglikelihood --model %s --tasks %s --nextn-decode 5 --max-num-seqs 3 --output %s "
             "2>/dev/null", exe, model, tasks, out);
    CHECK(WEXITSTATUS(system(cmd)) == 0);
    CHECK(slurp(out, buf, sizeof buf));
    CHECK_MSG(strstr(buf, "\"speculation\": \"fixed\", \"nextn_decode\": 5") && strstr(buf, "\"max_num_seqs\": 3"), "%s", buf);
    snprintf(cmd, sizeof cmd, "%s eval generate --model %s --tasks %s --max-tokens 16 --compare-compact --output %s "
             "2>/dev/null", exe, model, gen, out);
    CHECK(WEXITSTATUS(system(cmd)) == 0);
    CHECK(slurp(out, buf, sizeof buf));
    const char *keys[] = {"\"compare_compact\": true", "\"compact\": {\"engine\": {", "\"bounded_replay\": \"compact\"",
                          "\"compare\": {\"items\": 1, \"output_changed\": 1, \"changed_fraction\": 1",
                          "\"output_changed\": true"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) CHECK_MSG(strstr(buf, keys[i]), "%s missing in %s", keys[i], buf);
    snprintf(cmd, sizeof cmd, "%s eval perplexity --model %s --text %s --path model-forward --mtp-varlen 1 2>/dev/null", exe,
             model, txt);
    CHECK(WEXITSTATUS(system(cmd)) == 2);
    snprintf(cmd, sizeof cmd, "%s eval perplexity --model %s --text %s --max-model-len 64 2>/dev/null", exe, model, txt);
    CHECK(WEXITSTATUS(system(cmd)) == 2);
    remove(txt), remove(tasks), remove(gen), remove(out), rmdir(dir);
}
