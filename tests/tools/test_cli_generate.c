/*
 * `deepinfer generate` end to end: JSONL prompts in (text, ids, messages,
 * per-line sampling params, bad lines), JSONL out, equal to the library's
 * outputs; the plan and the summary on stderr; exit statuses; a --chat
 * prompt's text equal to the library's completion of that user message.
 * Also runs examples/offline_inference and checks every completion it prints
 * against the library's.
 */
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine_util.h"
#include "io/json.h"
#include "util/file.h"

static int sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *JSONL =
    "\"hello world\"\n"
    "{\"prompt\": \"the and\", \"sampling_params\": {\"temperature\": 0.7, \"max_tokens\": 9, \"logprobs\": 2, \"seed\": 5}}\n"
    "\n"
    "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"sampling_params\": {\"n\": 2, \"seed\": 7}}\n"
    "{\"prompt_token_ids\": [7, 8, 9], \"sampling_params\": {\"stop_token_ids\": [3000]}}\n"
    "{\"prompt\": \"x\", \"sampling_params\": {\"tempurature\": 0}}\n";

TEST(cli_generate_jsonl_matches_the_library) {
    char exe[PATH_MAX + 64];
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    char dir[] = "/tmp/di_gen_XXXXXX";
    CHECK(mkdtemp(dir));
    char in[256], out[256], err[256], cmd[8192];
    snprintf(in, sizeof in, "%s/in.jsonl", dir);
    snprintf(out, sizeof out, "%s/out.jsonl", dir);
    snprintf(err, sizeof err, "%s/err.txt", dir);
    FILE *f = fopen(in, "w");
    CHECK(f);
    fputs(JSONL, f);
    fclose(f);
    const char *model = di_test_data(ENGINE_GOLDEN), *tok = di_test_data("engine/tokenizer.json");
    snprintf(cmd, sizeof cmd,
             "'%s' generate --model %s --tokenizer %s --max-model-len 1024 --prompts %s --max-tokens 6 --seed 11 "
             "--output %s 2>%s",
             exe, model, tok, in, out, err);
    CHECK_EQ_INT(sh(cmd), 1); /* one line is bad */
    char *text = NULL, *log = NULL;
    size_t len = 0, loglen = 0;
    CHECK(di_read_file(out, 0, &text, &len, NULL) == DEEPINFER_OK && di_read_file(err, 0, &log, &loglen, NULL) == 0);
    CHECK(strstr(log, "memory") && strstr(log, "pages") && strstr(log, "TTFT") && strstr(log, "decode"));
    CHECK(strstr(log, "tempurature is not a sampling parameter"));
    /* the same requests through the library */
    eng_opts o = {.tokenizer = tok};
    deepinfer_engine *e = eng_open(&o);
    CHECK(e);
    deepinfer_sampling_params sp[4];
    for (int i = 0; i < 4; i++) {
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].max_tokens = 6, sp[i].has_seed = 1, sp[i].seed = 11;
    }
    sp[1].temperature = 0.7f, sp[1].max_tokens = 9, sp[1].logprobs = 2, sp[1].seed = 5;
    sp[2].n = 2, sp[2].seed = 7;
    sp[3].stop_ids[0] = 3000, sp[3].n_stop_ids = 1;
    int32_t ids[3] = {7, 8, 9};
    deepinfer_prompt pr[4] = {{.text = "hello world"},
                              {.text = "the and"},
                              {.messages = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"},
                              {.token_ids = ids, .n_token_ids = 3}};
    deepinfer_request_output **lib = NULL;
    CHECK(deepinfer_generate(e, pr, 4, sp, 4, &lib) == DEEPINFER_OK);
    /* compare record by record: lines come in the order requests finished, each names its input index */
    size_t nlines = 0;
    int seen[5] = {0};
    for (char *p = text; *p; nlines++) {
        char *nl = strchr(p, '\n');
        CHECK(nl);
        di_json_doc *doc = NULL;
        CHECK(di_json_parse(p, (size_t)(nl - p), NULL, &doc, NULL) == DEEPINFER_OK);
        const di_json *st = di_json_get(doc->root, "status");
        int64_t idx = -1;
        CHECK(di_json_as_i64(di_json_get(doc->root, "index"), &idx) && idx >= 0 && idx < 5 && !seen[idx]);
        seen[idx] = 1;
        size_t line = (size_t)idx;
        if (line == 4) {
            CHECK(st && strcmp(st->str, "ok") != 0 && strstr(di_json_get(doc->root, "error")->str, "line 6"));
        } else if (line == 3) { /* stop id 3000 is outside the vocabulary */
            CHECK(strstr(di_json_get(doc->root, "error")->str, "stop_token_ids[0] = 3000"));
        } else {
            CHECK_MSG(st && !strcmp(st->str, "ok"), "line %zu: %s", line, di_json_get(doc->root, "error")->str);
            const deepinfer_request_output *r = lib[line];
            const di_json *outs = di_json_get(doc->root, "outputs");
            CHECK(outs && outs->count == r->n_choices);
            for (size_t j = 0; j < r->n_choices; j++) {
                const di_json *c = di_json_at(outs, j), *tk = di_json_get(c, "token_ids"), *tx = di_json_get(c, "text");
                CHECK(tk->count == r->choices[j].n_tokens);
                for (uint32_t t = 0; t < tk->count; t++) {
                    int64_t v;
                    CHECK(di_json_as_i64(di_json_at(tk, t), &v) && v == r->choices[j].token_ids[t]);
                }
                CHECK(tx->str_len == r->choices[j].text_len && !memcmp(tx->str, r->choices[j].text, tx->str_len));
                const di_json *lp = di_json_get(c, "logprobs");
                CHECK((lp != NULL) == (r->choices[j].logprobs != NULL));
                for (uint32_t t = 0; lp && t < lp->count; t++) {
                    double d;
                    CHECK(di_json_as_f64(di_json_at(lp, t), &d) && (float)d == r->choices[j].logprobs[t]);
                }
            }
        }
        di_json_free(doc);
        p = nl + 1;
    }
    CHECK_EQ_INT(nlines, 5);
    deepinfer_outputs_free(lib, 4);
    deepinfer_engine_close(e);
    /* bad usage: exit 2 */
    snprintf(cmd, sizeof cmd, "'%s' generate --model %s --temperature 2>/dev/null", exe, model);
    CHECK_EQ_INT(sh(cmd), 2);
    snprintf(cmd, sizeof cmd, "'%s' generate --model %s --bogus 1 2>/dev/null", exe, model);
    CHECK_EQ_INT(sh(cmd), 2);
    /* --prompt text printed to stdout; a V4 model has no trouble with --chat: the text is the
     * library's greedy completion of the user message (the chat encoding, not the bare prompt) */
    snprintf(cmd, sizeof cmd,
             "'%s' generate --model %s --tokenizer %s --prompt hi --chat --max-tokens 8 --temperature 0 --quiet >%s", exe,
             model, tok, out);
    CHECK_EQ_INT(sh(cmd), 0);
    free(text);
    text = NULL;
    CHECK(di_read_file(out, 0, &text, &len, NULL) == DEEPINFER_OK);
    e = eng_open(&o);
    CHECK(e);
    deepinfer_sampling_params cs;
    deepinfer_sampling_params_init(&cs);
    cs.max_tokens = 8, cs.temperature = 0.0f;
    deepinfer_prompt cp[2] = {{.messages = "[{\"role\": \"user\", \"content\": \"hi\"}]"}, {.text = "hi"}};
    CHECK(deepinfer_generate(e, cp, 2, &cs, 1, &lib) == DEEPINFER_OK);
    CHECK(lib[0]->status == DEEPINFER_OK && lib[0]->n_choices == 1 && lib[0]->choices[0].text_len > 0);
    const deepinfer_completion *cc = &lib[0]->choices[0], *bare = &lib[1]->choices[0];
    CHECK_MSG(len == cc->text_len + 1 && !memcmp(text, cc->text, cc->text_len) && text[len - 1] == '\n',
              "--chat printed \"%.*s\", the library's chat completion is \"%.*s\" (bare prompt: \"%.*s\")", (int)len,
              text, (int)cc->text_len, cc->text, (int)bare->text_len, bare->text);
    /* the chat encoding mattered: the bare prompt's completion differs (else this would not tell them apart) */
    CHECK(bare->n_tokens != cc->n_tokens || memcmp(bare->token_ids, cc->token_ids, sizeof(int32_t) * cc->n_tokens));
    deepinfer_outputs_free(lib, 2);
    deepinfer_engine_close(e);
    free(text), free(log);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* The example's prompts and sampling (examples/offline_inference.c). */
static const char *const EXAMPLE_PROMPTS[] = {"Hello, my name is", "The president of the United States is",
                                              "The capital of France is", "The future of AI is"};

TEST(example_offline_inference_prints_the_library_outputs) {
    char exe[PATH_MAX + 64], cmd[PATH_MAX * 3];
    CHECK(di_test_sibling("examples/offline_inference", exe, sizeof exe));
    char dir[] = "/tmp/di_ex_XXXXXX";
    CHECK(mkdtemp(dir));
    char out[256];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    const char *model = di_test_data(ENGINE_GOLDEN), *tok = di_test_data("engine/tokenizer.json");
    snprintf(cmd, sizeof cmd, "'%s' %s %s >%s", exe, model, tok, out);
    CHECK_EQ_INT(sh(cmd), 0);
    char *text = NULL;
    size_t len = 0;
    CHECK(di_read_file(out, 0, &text, &len, NULL) == DEEPINFER_OK);
    /* the same requests through the library, with the example's engine and sampling configuration */
    deepinfer_engine_config cfg;
    deepinfer_engine_config_init(&cfg);
    cfg.model = model, cfg.tokenizer = tok;
    deepinfer_engine *e = NULL;
    char msg[1024];
    CHECK_MSG(deepinfer_engine_open(&cfg, &e, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.temperature = 0.8f, sp.top_p = 0.95f, sp.max_tokens = 32, sp.has_seed = 1, sp.seed = 0;
    enum { N = sizeof EXAMPLE_PROMPTS / sizeof EXAMPLE_PROMPTS[0] };
    deepinfer_prompt pr[N];
    for (int i = 0; i < N; i++) pr[i] = (deepinfer_prompt){.text = EXAMPLE_PROMPTS[i]};
    deepinfer_request_output **lib = NULL;
    CHECK(deepinfer_generate(e, pr, N, &sp, 1, &lib) == DEEPINFER_OK);
    CHECK_MSG(!strstr(text, "Error:"), "the example reports an error:\n%s", text);
    const char *p = text;
    for (int i = 0; i < N; i++) {
        CHECK(lib[i]->status == DEEPINFER_OK && lib[i]->n_choices == 1);
        char want[4096];
        snprintf(want, sizeof want, "Prompt:    \"%s\"\nOutput:    \"%.*s\"\n", EXAMPLE_PROMPTS[i],
                 (int)lib[i]->choices[0].text_len, lib[i]->choices[0].text);
        const char *at = strstr(p, want);
        CHECK_MSG(at, "request %d: the example's output lacks\n%s(its output:\n%s)", i, want, text);
        p = at + strlen(want);
    }
    deepinfer_outputs_free(lib, N);
    deepinfer_engine_close(e);
    free(text);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}
