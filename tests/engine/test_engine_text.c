/*
 * Text through the engine (golden V4 checkpoint + the 1024-id test tokenizer
 * tests/data/engine/tokenizer.json): incremental detokenization equals whole
 * decoding and is always valid UTF-8, stop strings straddling token
 * boundaries cut the text exactly, streaming deltas add up to the final
 * output, chat messages are rendered with the V4 encoding.
 */
#include "engine/engine_util.h"
#include "tokenizer/tokenizer.h"

static int valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        int k = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
        if (k < 0 || i + (size_t)k >= n + (k ? 0 : 1)) return 0;
        for (int j = 1; j <= k; j++)
            if (i + (size_t)j >= n || ((unsigned char)s[i + j] & 0xC0) != 0x80) return 0;
        i += (size_t)k + 1;
    }
    return 1;
}

static deepinfer_engine *open_text(int async) {
    eng_opts o = {.chunk = 32, .tokenizer = di_test_data("engine/tokenizer.json"), .async = async};
    return eng_open(&o);
}

static void hot(deepinfer_sampling_params *p, uint64_t seed, int max_tokens) {
    deepinfer_sampling_params_init(p);
    p->temperature = 1.5f; /* many single-byte tokens: broken UTF-8 all over */
    p->max_tokens = max_tokens;
    p->ignore_eos = 1;
    p->has_seed = 1;
    p->seed = seed;
}

TEST(engine_text_is_incremental_decode_and_valid_utf8) {
    deepinfer_engine *e = open_text(0);
    CHECK(e);
    di_tokenizer *tok = NULL;
    CHECK(di_tokenizer_load(di_test_data("engine/tokenizer.json"), &tok, NULL) == DEEPINFER_OK);
    enum { N = 12 };
    deepinfer_prompt pr[N];
    deepinfer_sampling_params sp[N];
    for (int i = 0; i < N; i++) {
        pr[i] = (deepinfer_prompt){.text = i % 2 ? "hello world, the end" : "é中文 and the stop"};
        hot(&sp[i], 77 + (uint64_t)i, 40);
        sp[i].skip_special_tokens = i % 3 != 0;
    }
    deepinfer_request_output **out = NULL;
    CHECK(deepinfer_generate(e, pr, N, sp, N, &out) == DEEPINFER_OK);
    int broken = 0;
    for (int i = 0; i < N; i++) {
        const deepinfer_completion *c = &out[i]->choices[0];
        CHECK_MSG(out[i]->status == DEEPINFER_OK, "%s", out[i]->error);
        CHECK(c->n_tokens == 40 && strlen(c->text) == c->text_len);
        CHECK_MSG(valid_utf8(c->text, c->text_len), "request %d: text is not valid UTF-8", i);
        char *whole = NULL;
        size_t wl = 0;
        CHECK(di_tokenizer_decode(tok, c->token_ids, c->n_tokens, sp[i].skip_special_tokens, &whole, &wl, NULL) == 0);
        CHECK_MSG(wl == c->text_len && !memcmp(whole, c->text, wl), "request %d: incremental text differs from decode", i);
        broken += strstr(whole, "\xEF\xBF\xBD") != NULL;
        free(whole);
    }
    fprintf(stderr, "    %d outputs: incremental text = whole decode, valid UTF-8 (%d hold U+FFFD repairs)\n", N, broken);
    deepinfer_outputs_free(out, N);
    di_tokenizer_free(tok);
    deepinfer_engine_close(e);
}

/* Byte offset where token k's text starts in the output text (no stops). */
static size_t token_text_start(di_tokenizer *tok, const int32_t *ids, size_t k) {
    char *t = NULL;
    size_t n = 0;
    if (di_tokenizer_decode(tok, ids, k, 1, &t, &n, NULL)) return 0;
    free(t);
    return n;
}

TEST(engine_stop_strings_straddling_tokens_cut_the_text) {
    deepinfer_engine *e = open_text(0);
    CHECK(e);
    di_tokenizer *tok = NULL;
    CHECK(di_tokenizer_load(di_test_data("engine/tokenizer.json"), &tok, NULL) == DEEPINFER_OK);
    deepinfer_prompt pr = {.text = "hello world"};
    deepinfer_sampling_params sp;
    hot(&sp, 5, 48);
    sp.temperature = 0.9f;
    deepinfer_request_output **base = NULL;
    CHECK(deepinfer_generate(e, &pr, 1, &sp, 1, &base) == DEEPINFER_OK);
    const deepinfer_completion *b = &base[0]->choices[0];
    /* a stop string from the middle of one token's text into a later token's, ASCII-safe */
    int tested = 0;
    for (size_t k = 4; k + 3 < b->n_tokens && tested < 4; k += 5) {
        size_t s0 = token_text_start(tok, b->token_ids, k), s1 = token_text_start(tok, b->token_ids, k + 2);
        if (s1 <= s0 + 1 || s1 >= b->text_len) continue;
        size_t from = s0 + 1, len = s1 - from + 1; /* ends one byte into token k+2 */
        char stop[64];
        if (len >= sizeof stop) continue;
        memcpy(stop, b->text + from, len);
        stop[len] = '\0';
        if (!valid_utf8(stop, len) || strlen(stop) != len) continue;
        const char *first = strstr(b->text, stop);
        size_t cut = (size_t)(first - b->text);
        sp.stop[0] = "never-appears-zz";
        sp.stop[1] = stop;
        sp.n_stop = 2;
        deepinfer_request_output **o = NULL;
        CHECK(deepinfer_generate(e, &pr, 1, &sp, 1, &o) == DEEPINFER_OK);
        const deepinfer_completion *c = &o[0]->choices[0];
        CHECK_MSG(c->finish_reason == DEEPINFER_FINISH_STOP && c->stop_str && !strcmp(c->stop_str, stop),
                  "stop \"%s\" did not fire", stop);
        CHECK_MSG(c->text_len == cut && !memcmp(c->text, b->text, cut), "stop \"%s\": text %zu bytes, want %zu", stop,
                  c->text_len, cut);
        CHECK(c->n_tokens <= b->n_tokens && !memcmp(c->token_ids, b->token_ids, c->n_tokens * sizeof(int32_t)));
        /* the token that completed the match is the last one */
        CHECK(token_text_start(tok, c->token_ids, c->n_tokens) >= cut + len);
        CHECK(token_text_start(tok, c->token_ids, c->n_tokens - 1) < cut + len);
        /* min_tokens reached exactly at the token that completes the match: the stop string
         * straddles the boundary (it began in text output before stop strings were checked)
         * and must still fire, with the same cut (vLLM's semantics) */
        deepinfer_sampling_params sm = sp;
        sm.min_tokens = (int32_t)(k + 3);
        deepinfer_request_output **om = NULL;
        CHECK(deepinfer_generate(e, &pr, 1, &sm, 1, &om) == DEEPINFER_OK);
        const deepinfer_completion *cm = &om[0]->choices[0];
        if ((size_t)(first - b->text) >= s0) { /* the first occurrence is the one we built */
            CHECK_MSG(cm->finish_reason == DEEPINFER_FINISH_STOP && cm->text_len == cut,
                      "stop \"%s\" straddling min_tokens=%d: %s, text %zu bytes, want %zu", stop, sm.min_tokens,
                      deepinfer_finish_reason_name(cm->finish_reason), cm->text_len, cut);
            CHECK(cm->n_tokens == c->n_tokens);
        }
        deepinfer_outputs_free(om, 1);
        deepinfer_outputs_free(o, 1);
        tested++;
    }
    CHECK_MSG(tested >= 2, "only %d stop strings could be tested", tested);
    fprintf(stderr, "    %d stop strings spanning token boundaries: text cut before the match, tokens kept up to it\n",
            tested);
    deepinfer_outputs_free(base, 1);
    di_tokenizer_free(tok);
    deepinfer_engine_close(e);
}

TEST(engine_streaming_deltas_add_up_and_abort) {
    for (int async = 0; async < 2; async++) {
        deepinfer_engine *e = open_text(async);
        CHECK(e);
        deepinfer_prompt pr = {.text = "the and the"};
        deepinfer_sampling_params sp;
        hot(&sp, 9, 30);
        uint64_t ids[3];
        for (int i = 0; i < 3; i++) CHECK(deepinfer_add_request(e, &pr, &sp, &ids[i]) == DEEPINFER_OK);
        CHECK(ids[1] == ids[0] + 1 && ids[2] == ids[1] + 1);
        deepinfer_request_output *early = NULL;
        CHECK(deepinfer_take_output(e, ids[0], &early) == DEEPINFER_ERR_INVALID_ARGUMENT); /* still running */
        char acc[3][4096];
        size_t acc_len[3] = {0, 0, 0}, acc_tok[3] = {0, 0, 0};
        int steps = 0;
        while (deepinfer_has_unfinished(e)) {
            CHECK(deepinfer_step(e, NULL) == DEEPINFER_OK);
            if (++steps == 6) CHECK(deepinfer_abort(e, ids[2]) == DEEPINFER_OK);
            const deepinfer_request_output *const *outs;
            size_t n;
            deepinfer_read_outputs(e, &outs, &n);
            for (size_t i = 0; i < n; i++) {
                int k = (int)(outs[i]->request_id - ids[0]);
                const deepinfer_completion *c = &outs[i]->choices[0];
                CHECK(c->n_prev_tokens == acc_tok[k] && c->prev_text_len == acc_len[k]);
                memcpy(acc[k] + acc_len[k], c->text + c->prev_text_len, c->text_len - c->prev_text_len);
                acc_len[k] = c->text_len;
                acc_tok[k] = c->n_tokens;
            }
        }
        deepinfer_request_output *o[3];
        for (int i = 0; i < 3; i++) CHECK(deepinfer_take_output(e, ids[i], &o[i]) == DEEPINFER_OK);
        CHECK(deepinfer_take_output(e, ids[0], &early) == DEEPINFER_ERR_NOT_FOUND);
        CHECK(deepinfer_abort(e, 999) == DEEPINFER_ERR_NOT_FOUND);
        for (int i = 0; i < 2; i++) {
            CHECK(o[i]->choices[0].finish_reason == DEEPINFER_FINISH_LENGTH && o[i]->choices[0].n_tokens == 30);
            CHECK(acc_len[i] == o[i]->choices[0].text_len && !memcmp(acc[i], o[i]->choices[0].text, acc_len[i]));
            CHECK(acc_tok[i] == 30);
        }
        /* same prompt and seed: the same tokens */
        CHECK(!memcmp(o[0]->choices[0].token_ids, o[1]->choices[0].token_ids, 30 * sizeof(int32_t)));
        CHECK(o[2]->choices[0].finish_reason == DEEPINFER_FINISH_ABORT && o[2]->finished);
        CHECK(o[2]->choices[0].n_tokens < 30 && !memcmp(o[2]->choices[0].token_ids, o[0]->choices[0].token_ids,
                                                        o[2]->choices[0].n_tokens * sizeof(int32_t)));
        CHECK(o[0]->metrics.ttft_s > 0 && o[0]->metrics.tpot_s > 0 && o[0]->metrics.e2e_s >= o[0]->metrics.ttft_s);
        CHECK(o[0]->metrics.output_tokens == 30 && o[0]->metrics.prompt_tokens == (int64_t)o[0]->n_prompt);
        for (int i = 0; i < 3; i++) deepinfer_output_free(o[i]);
        deepinfer_engine_stats st;
        deepinfer_engine_get_stats(e, &st);
        CHECK(st.pages_in_use == 0);
        deepinfer_engine_close(e);
    }
}

TEST(engine_chat_messages_use_the_v4_encoding) {
    deepinfer_engine *e = open_text(0);
    CHECK(e);
    deepinfer_prompt pr = {.messages = "[{\"role\": \"user\", \"content\": \"hello world\"}]"};
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.temperature = 0;
    sp.max_tokens = 4;
    deepinfer_request_output **o = NULL;
    CHECK(deepinfer_generate(e, &pr, 1, &sp, 1, &o) == DEEPINFER_OK);
    CHECK_MSG(o[0]->status == DEEPINFER_OK, "%s", o[0]->error);
    const int32_t *p = o[0]->prompt_ids;
    size_t n = o[0]->n_prompt;
    /* <｜begin▁of▁sentence｜><｜User｜>hello world<｜Assistant｜></think> */
    CHECK(n >= 5 && p[0] == 0 && p[1] == 2 && p[n - 2] == 3 && p[n - 1] == 5);
    deepinfer_outputs_free(o, 1);
    deepinfer_engine_close(e);
}

/* Full match of a POSIX ERE (anchored). */
#include <regex.h>
static int full_match(const char *ere, const char *text) {
    regex_t re;
    if (regcomp(&re, ere, REG_EXTENDED | REG_NOSUB)) return 0;
    int ok = regexec(&re, text, 0, NULL, 0) == 0;
    regfree(&re);
    return ok;
}

TEST(engine_structured_outputs_match_and_are_invariant) {
    enum { N = 10 };
    deepinfer_prompt pr[N];
    deepinfer_sampling_params sp[N];
    for (int i = 0; i < N; i++) {
        pr[i] = (deepinfer_prompt){.text = i % 2 ? "hello" : "the world"};
        hot(&sp[i], 100 + (uint64_t)i, 40);
        sp[i].ignore_eos = 0;
        sp[i].temperature = 1.0f;
    }
    /* 0-3: a regex that ends by itself; 4-5: one that may end with EOS; 6-7: a JSON enum; 8: a bad
     * schema; 9: top_p (the full-mask path) */
    for (int i = 0; i < 4; i++) sp[i].so_schema_type = "regex", sp[i].so_schema = "(ab|xy)+ END";
    sp[2].n = 2;
    sp[3].temperature = 0;
    for (int i = 4; i < 6; i++) sp[i].so_schema_type = "regex", sp[i].so_schema = "(ab)+";
    for (int i = 6; i < 8; i++) sp[i].so_schema_type = "json", sp[i].so_schema = "{\"enum\": [\"yes\", \"no\", \"maybe\"]}";
    sp[8].so_schema_type = "json", sp[8].so_schema = "{\"type\": \"object\", \"properties\": 3}";
    sp[9].so_schema_type = "regex", sp[9].so_schema = "[a-z]+( [a-z]+)* END", sp[9].top_p = 0.8f, sp[9].top_k = 40;
    deepinfer_request_output **together[2] = {NULL, NULL};
    for (int async = 0; async < 2; async++) {
        deepinfer_engine *e = open_text(async);
        CHECK(e);
        CHECK(deepinfer_generate(e, pr, N, sp, N, &together[async]) == DEEPINFER_OK);
        deepinfer_engine_close(e);
    }
    deepinfer_request_output **out = together[0];
    CHECK(out[8]->status != DEEPINFER_OK && strstr(out[8]->error, "so_args"));
    int ended = 0;
    for (int i = 0; i < N; i++) {
        if (i == 8) continue;
        CHECK_MSG(out[i]->status == DEEPINFER_OK, "%d: %s", i, out[i]->error);
        CHECK(eng_same_output(out[i], together[1][i], i)); /* async scheduling changes nothing */
        for (size_t j = 0; j < out[i]->n_choices; j++) {
            const deepinfer_completion *c = &out[i]->choices[j];
            const char *ere = i < 4 ? "^(ab|xy)+ END$" : i < 6 ? "^(ab)+$" : i < 8 ? "^\"(yes|no|maybe)\"$" : "^[a-z]+( [a-z]+)* END$";
            if (c->finish_reason == DEEPINFER_FINISH_LENGTH) continue; /* a prefix: checked by the matcher anyway */
            ended++;
            CHECK_MSG(full_match(ere, c->text), "request %d: \"%s\" does not match %s (%s)", i, c->text, ere,
                      deepinfer_finish_reason_name(c->finish_reason));
            /* EOS only once the text is a complete match; otherwise the grammar ended it */
            CHECK(c->finish_reason == DEEPINFER_FINISH_STOP || c->finish_reason == DEEPINFER_FINISH_EOS);
        }
    }
    CHECK_MSG(ended >= 6, "only %d constrained outputs ended before max_tokens", ended);
    /* each request alone gives the same bits */
    deepinfer_engine *e = open_text(0);
    CHECK(e);
    for (int i = 0; i < N; i++) {
        deepinfer_request_output **alone = NULL;
        CHECK(deepinfer_generate(e, &pr[i], 1, &sp[i], 1, &alone) == DEEPINFER_OK);
        CHECK(eng_same_output(alone[0], out[i], i));
        deepinfer_outputs_free(alone, 1);
    }
    deepinfer_engine_close(e);
    fprintf(stderr, "    %d constrained outputs ended as full matches; alone = together = async\n", ended);
    deepinfer_outputs_free(together[0], N);
    deepinfer_outputs_free(together[1], N);
}
