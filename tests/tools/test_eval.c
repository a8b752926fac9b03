/*
 * `deepinfer eval` (tools/eval/) on the embedded demo model: perplexity
 * and loglikelihood equal what an independent log-softmax of `score`'s
 * all-position logits gives for the same tokens; multiple choice picks
 * the highest; bad items get named errors while the rest is scored; an
 * exact-match and a JSON-schema generation task through the engine. The
 * engine path (prompt logprobs) and the model-forward path give the same
 * perplexity.
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
    if (ev_model_open(di_test_data(DEMO_MODEL), "cpu", m, &err)) {
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
    ev_model_use_engine(&b);
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
                          "\"path\": \"engine\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) CHECK_MSG(strstr(buf, keys[i]), "%s missing in %s", keys[i], buf);
    snprintf(cmd, sizeof cmd, "%s eval perplexity --model %s --text %s --stride 0 2>/dev/null", exe, di_test_data(DEMO_MODEL), txt);
    CHECK(WEXITSTATUS(system(cmd)) == 2);
    remove(txt), remove(out), rmdir(dir);
}
