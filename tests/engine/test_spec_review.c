/*
 * Speculative decoding edge cases (docs/speculative.md): what the engine
 * counts when a request ends inside an accepted run, the confidence
 * scheduler's measured survival, and the memory plan of a speculating engine.
 */
#include <math.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "engine/devq.h"
#include "engine/engine_util.h"
#include "engine/spec_cost.h"
#include "model/config.h"
#include "util/file.h"

#define DEMO "../../models/deepinfer-demo-v41"
#define NQ 16

static deepinfer_engine *open_demo(int nextn, int max_seqs) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data(DEMO);
    c.max_model_len = 1024;
    c.max_num_seqs = max_seqs;
    c.nextn_decode = nextn;
    deepinfer_engine *e = NULL;
    char msg[1024];
    if (deepinfer_engine_open(&c, &e, msg, sizeof msg)) fprintf(stderr, "    open: %s\n", msg);
    return e;
}

/* A stop id inside an accepted run ends the request there: the drafts accepted after it were never
 * committed, so per request spec_accepted + spec_steps (committed tokens of verify steps) stays
 * within the output tokens, and the outputs equal speculation off. */
TEST(spec_stop_inside_accepted_run_counts_committed_only) {
    static const char *texts[] = {"In the beginning God created", "And Jesus said unto them,",
                                  "The LORD is my shepherd;", "And it came to pass"};
    deepinfer_prompt p[NQ];
    deepinfer_sampling_params sp[NQ];
    for (int i = 0; i < NQ; i++) {
        p[i] = (deepinfer_prompt){.text = texts[i % 4]};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].temperature = 0, sp[i].max_tokens = 48, sp[i].ignore_eos = 1;
    }
    deepinfer_engine *e = open_demo(0, NQ);
    CHECK(e != NULL);
    deepinfer_request_output **ref = NULL;
    CHECK(deepinfer_generate(e, p, NQ, sp, NQ, &ref) == DEEPINFER_OK);
    deepinfer_engine_close(e);
    /* each request stops at the first occurrence of its output token at position 4 + 2 * (i / 4) */
    int32_t stop[NQ];
    for (int i = 0; i < NQ; i++) {
        CHECK(ref[i]->choices[0].n_tokens == 48);
        stop[i] = ref[i]->choices[0].token_ids[4 + 2 * (i / 4) + i % 4];
        sp[i].stop_ids[0] = stop[i];
        sp[i].n_stop_ids = 1;
    }
    deepinfer_outputs_free(ref, NQ);
    deepinfer_request_output **out[2] = {NULL, NULL};
    int64_t accepted = 0;
    for (int k = 0; k < 2; k++) {
        e = open_demo(k ? 5 : 0, NQ);
        CHECK(e != NULL);
        CHECK(deepinfer_generate(e, p, NQ, sp, NQ, &out[k]) == DEEPINFER_OK);
        deepinfer_engine_stats st;
        deepinfer_engine_get_stats(e, &st);
        int64_t a = 0, d = 0, at = 0;
        for (int i = 0; i < NQ; i++) {
            const deepinfer_request_metrics *m = &out[k][i]->metrics;
            CHECK(out[k][i]->status == DEEPINFER_OK);
            CHECK(out[k][i]->choices[0].finish_reason == DEEPINFER_FINISH_STOP);
            if (m->spec_accepted + m->spec_steps > m->output_tokens)
                fprintf(stderr, "    request %d: %lld accepted over %lld verify steps, %lld tokens\n", i,
                        (long long)m->spec_accepted, (long long)m->spec_steps, (long long)m->output_tokens);
            CHECK(m->spec_accepted + m->spec_steps <= m->output_tokens);
            CHECK(m->spec_accepted <= m->spec_drafted);
            a += m->spec_accepted, d += m->spec_drafted;
            if (k) CHECK(eng_same_output(out[0][i], out[k][i], i));
        }
        for (int j = 0; j < DEEPINFER_MAX_DRAFT; j++) at += st.spec_accepted_at[j];
        CHECK(a == st.spec_accepted && d == st.spec_drafted && at == st.spec_accepted);
        if (k) accepted = a;
        deepinfer_engine_close(e);
    }
    CHECK(accepted > 0); /* speculation accepted drafts, so the bound was exercised */
    deepinfer_outputs_free(out[0], NQ);
    deepinfer_outputs_free(out[1], NQ);
}

/* Without a confidence head the survival of drafts 1..j+1 is the engine's measured rate at j; where a
 * later position has fewer measurements its rate can be above an earlier one's, but surviving to
 * j + 1 can never be likelier than surviving to j (spec_cost.h: S is non-increasing in j). */
TEST(spec_choose_measured_survival_never_rises) {
    /* one row 1 s, each further row 0.1 s, drafting free: a draft pays when its survival beats ~0.1 */
    di_spec_cost c = {.n = 2, .rows = {1, 3}, .sec = {1.0, 1.2}, .nd = 1, .reqs = {1}, .dsec = {0.0}};
    const float nan_conf[2] = {NAN, NAN};
    const float *conf[1] = {nan_conf};
    int kmax[1] = {2}, k[1] = {-1};
    di_spec_cand cand[DEEPINFER_MAX_DRAFT];
    int64_t accepted_at[DEEPINFER_MAX_DRAFT] = {0}, drafted_at[DEEPINFER_MAX_DRAFT] = {0};
    drafted_at[0] = 1000, accepted_at[0] = 1; /* position 0 almost never accepted; position 1 unmeasured */
    di_spec_choose(&c, 1, 1, 1, kmax, conf, accepted_at, drafted_at, 0, k, cand);
    CHECK(k[0] == 0);
    /* measured survival high at both: both drafts pay */
    accepted_at[0] = 990, drafted_at[1] = 990, accepted_at[1] = 980;
    di_spec_choose(&c, 1, 1, 1, kmax, conf, accepted_at, drafted_at, 0, k, cand);
    CHECK(k[0] == 2);
    /* a confidence of +inf / -inf: certain / impossible */
    const float inf_conf[2] = {INFINITY, -INFINITY};
    conf[0] = inf_conf;
    di_spec_choose(&c, 1, 1, 1, kmax, conf, accepted_at, drafted_at, 0, k, cand);
    CHECK(k[0] == 1);
}

/* The memory plan of a speculating engine counts what speculation allocates: the drafter input of
 * every batch row (DSpark: n_dspark_target_layer_ids x hidden bf16 values, backend memory), the
 * logits rows of verify groups and the runner's sample specs for them. */
TEST(spec_memory_plan_counts_the_drafter_buffers) {
    di_model_config cfg;
    di_error err = {0};
    CHECK(di_config_load(di_test_data(DEMO), &cfg, &err) == DEEPINFER_OK);
    CHECK(cfg.drafter == DI_DRAFTER_DSPARK);
    deepinfer_memory_plan plan[2];
    for (int k = 0; k < 2; k++) {
        deepinfer_engine *e = open_demo(k ? 5 : 0, 4);
        CHECK(e != NULL);
        deepinfer_engine_plan(e, &plan[k]);
        deepinfer_engine_close(e);
    }
    uint64_t rows = (uint64_t)plan[0].max_num_batched_tokens, seqs = 4;
    uint64_t hid = rows * (uint64_t)cfg.n_dspark_target_layer_ids * (uint64_t)cfg.hidden_size * 2;
    uint64_t logits = seqs * 6 * (uint64_t)cfg.vocab_size * 4; /* (1 + 5) more rows per sequence */
    uint64_t specs = 2 * 2 * seqs * 5 * sizeof(di_sample_spec);
    fprintf(stderr, "    workspace %llu -> %llu bytes (drafter input %llu, logits %llu, sample specs %llu)\n",
            (unsigned long long)plan[0].workspace_bytes, (unsigned long long)plan[1].workspace_bytes,
            (unsigned long long)hid, (unsigned long long)logits, (unsigned long long)specs);
    CHECK(plan[1].workspace_bytes >= plan[0].workspace_bytes + hid + logits + specs);
}

/* 1 if the "N:ms" pairs after `key` in the plan text rise (never fall) and there are at least two. */
static int table_rises(const char *text, const char *key) {
    const char *p = strstr(text, key);
    if (!p) return 0;
    p += strlen(key);
    double prev = -1;
    int n = 0;
    for (;;) {
        int rows, used = 0;
        double ms;
        if (sscanf(p, " %d:%lf%n", &rows, &ms, &used) != 2) break;
        if (ms < prev) {
            fprintf(stderr, "    %s %d:%.3f after %.3f\n", key, rows, ms, prev);
            return 0;
        }
        prev = ms;
        p += used;
        n++;
    }
    return n >= 2;
}

/* The step-cost table measured at open never gets cheaper with more rows or more drafting requests
 * (spec_cost.h interpolates it; a dip would make drafts look free). Timing noise on a loaded machine
 * makes raw measurements dip; several opens make that likely. */
TEST(spec_measured_cost_table_never_falls) {
    for (int k = 0; k < 3; k++) {
        deepinfer_engine_config c;
        deepinfer_engine_config_init(&c);
        c.model = di_test_data(DEMO);
        c.max_model_len = 1024;
        c.max_num_seqs = 16;
        c.mtp_varlen = 1;
        deepinfer_engine *e = NULL;
        char msg[1024];
        CHECK_MSG(deepinfer_engine_open(&c, &e, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
        const char *t = deepinfer_engine_plan_text(e);
        CHECK(table_rises(t, "verify cost  rows:ms"));
        CHECK(table_rises(t, "drafter requests:ms"));
        deepinfer_engine_close(e);
    }
}

/* A DSpark block longer than the engine's longest draft (DEEPINFER_MAX_DRAFT): confidence scheduling's
 * default length is the longest draft, not the block (which open used to refuse with "use 1..block"),
 * an explicit length above it is refused naming the bound, and the engine's drafter calls (the cost
 * profile at open included) hold the block's [n][block] ids. The demo checkpoint with its config's
 * dspark_block_size raised to 16 (a directory of symbolic links). */
TEST(spec_dspark_block_above_the_longest_draft) {
    char src[PATH_MAX], dir[] = "/tmp/di_blk16_XXXXXX", a[PATH_MAX + 64], b[PATH_MAX + 64];
    CHECK(realpath(di_test_data(DEMO), src) != NULL);
    CHECK(mkdtemp(dir) != NULL);
    const char *files[] = {"engram_hash.json", "engram_token_map.json", "model-00001-of-00003.safetensors",
                           "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
                           "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        CHECK(symlink(a, b) == 0);
    }
    char *text = NULL;
    size_t len = 0;
    di_error err = {0};
    snprintf(a, sizeof a, "%s/config.json", src);
    CHECK(di_read_file(a, 0, &text, &len, &err) == DEEPINFER_OK);
    char *at = strstr(text, "\"dspark_block_size\": 5,");
    CHECK(at != NULL);
    at[strlen("\"dspark_block_size\": ")] = ' '; /* "5," -> " 16," below */
    snprintf(b, sizeof b, "%s/config.json", dir);
    FILE *f = fopen(b, "w");
    CHECK(f != NULL);
    fprintf(f, "%.*s16,%s", (int)(at - text) + (int)strlen("\"dspark_block_size\": "), text,
            at + strlen("\"dspark_block_size\": 5,"));
    fclose(f);
    free(text);
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = dir;
    c.max_model_len = 1024;
    c.max_num_seqs = 8;
    c.nextn_decode = 9;
    deepinfer_engine *e = NULL;
    char msg[1024];
    CHECK(deepinfer_engine_open(&c, &e, msg, sizeof msg) != DEEPINFER_OK);
    CHECK(strstr(msg, "nextn_decode") && strstr(msg, "use 1..8"));
    deepinfer_request_output **out[2] = {NULL, NULL};
    deepinfer_prompt p[8];
    deepinfer_sampling_params sp[8];
    for (int i = 0; i < 8; i++) {
        p[i] = (deepinfer_prompt){.text = i % 2 ? "And it came to pass" : "In the beginning God created"};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].temperature = 0, sp[i].max_tokens = 12 + i, sp[i].ignore_eos = 1;
    }
    for (int k = 0; k < 2; k++) {
        c.nextn_decode = -1;
        c.mtp_varlen = k;
        CHECK_MSG(deepinfer_engine_open(&c, &e, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
        if (k) CHECK(strstr(deepinfer_engine_plan_text(e), "drafts of up to 8 tokens") != NULL);
        CHECK(deepinfer_generate(e, p, 8, sp, 8, &out[k]) == DEEPINFER_OK);
        deepinfer_engine_close(e);
    }
    for (int i = 0; i < 8; i++) CHECK(eng_same_output(out[0][i], out[1][i], i));
    deepinfer_outputs_free(out[0], 8);
    deepinfer_outputs_free(out[1], 8);
    snprintf(a, sizeof a, "rm -rf '%s'", dir);
    CHECK(system(a) == 0);
}

/* Stop strings that span tokens of an accepted run, with n = 2 choices and logprobs: the request ends
 * where it ends without speculation (text, tokens, logprobs, finish reason), and the counts take
 * committed drafts only. Each stop string is 6 bytes of the reference output from a third in. */
TEST(spec_stop_string_inside_accepted_run) {
    static const char *texts[] = {"In the beginning God created", "And Jesus said unto them,",
                                  "The LORD is my shepherd;", "And it came to pass"};
    deepinfer_prompt p[8];
    deepinfer_sampling_params sp[8];
    for (int i = 0; i < 8; i++) {
        p[i] = (deepinfer_prompt){.text = texts[i % 4]};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].max_tokens = 40, sp[i].ignore_eos = 1, sp[i].logprobs = 2;
        if (i >= 4) sp[i].temperature = 0.7f, sp[i].has_seed = 1, sp[i].seed = 5 + (uint64_t)i, sp[i].n = 2;
        else sp[i].temperature = 0;
    }
    deepinfer_engine *e = open_demo(0, 16);
    CHECK(e != NULL);
    deepinfer_request_output **ref = NULL;
    CHECK(deepinfer_generate(e, p, 8, sp, 8, &ref) == DEEPINFER_OK);
    deepinfer_engine_close(e);
    char stops[8][8];
    for (int i = 0; i < 8; i++) {
        const deepinfer_completion *c = &ref[i]->choices[0];
        CHECK(c->text_len > 24);
        size_t at = c->text_len / 3;
        while (at < c->text_len && ((unsigned char)c->text[at] & 0xC0) == 0x80) at++; /* a whole character */
        size_t n = 0;
        while (n < 6 && at + n < c->text_len) n++;
        while (at + n < c->text_len && ((unsigned char)c->text[at + n] & 0xC0) == 0x80) n--;
        memcpy(stops[i], c->text + at, n);
        stops[i][n] = '\0';
        sp[i].stop[0] = stops[i];
        sp[i].n_stop = 1;
    }
    deepinfer_outputs_free(ref, 8);
    deepinfer_request_output **out[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        e = open_demo(k ? 5 : 0, 16);
        CHECK(e != NULL);
        CHECK(deepinfer_generate(e, p, 8, sp, 8, &out[k]) == DEEPINFER_OK);
        deepinfer_engine_stats st;
        deepinfer_engine_get_stats(e, &st);
        for (int i = 0; i < 8; i++) {
            const deepinfer_request_metrics *m = &out[k][i]->metrics;
            CHECK(out[k][i]->status == DEEPINFER_OK);
            CHECK(out[k][i]->choices[0].finish_reason == DEEPINFER_FINISH_STOP);
            CHECK(m->spec_accepted + m->spec_steps <= m->output_tokens);
            if (k) CHECK(eng_same_output(out[0][i], out[k][i], i));
        }
        if (k) CHECK(st.spec_accepted > 0);
        deepinfer_engine_close(e);
    }
    deepinfer_outputs_free(out[0], 8);
    deepinfer_outputs_free(out[1], 8);
}
