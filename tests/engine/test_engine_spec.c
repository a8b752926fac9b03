/*
 * Speculative decoding in the engine (docs/speculative.md): outputs with the
 * drafter on equal outputs with it off, bitwise — tokens, logprobs, top
 * logprobs, text, finish reasons — for mixed workloads (greedy, seeded
 * sampling with top-k / top-p / min-p, penalties, n > 1, stop ids,
 * min_tokens, max_tokens inside accepted runs), with fixed and
 * confidence-scheduled draft lengths, with prefill chunks of 13 and with
 * preemption forced by a shrunk page pool; on the V4 golden checkpoint (MTP
 * chained), the V4.1 golden checkpoint (DSpark) and the demo model. And the
 * demo model's mean accepted length on the recipe's protocol.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine_internal.h"
#include "engine/engine_util.h"
#include "dummy/dummy.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"

#define V4 "golden/v4-tiny-a"
#define V41 "golden/v41-tiny-a"
#define DEMO "../../models/deepinfer-demo-v41"
#define NREQ 20

typedef struct spec_cfg {
    const char *what;
    int varlen, nextn, chunk;
    int64_t pages;
    int page_rows;
} spec_cfg;

static deepinfer_engine *open_spec(const char *model, const spec_cfg *s, int max_seqs, char *msg, size_t cap) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = model;
    c.max_model_len = 1024;
    c.chunk_size = s->chunk;
    c.max_num_seqs = max_seqs;
    c.num_pages = s->pages;
    c.page_rows = s->page_rows;
    c.mtp_varlen = s->varlen;
    c.nextn_decode = s->nextn;
    deepinfer_engine *e = NULL;
    /* confidence-scheduled lengths: a fixed step-cost table where a verified row costs a tenth of a
     * step, so that which drafts pay depends on the confidences and not on this machine's timing */
    static const di_spec_cost flat = {.n = 2, .rows = {1, 1024}, .sec = {1e-3, 1e-3 + 1023 * 1e-4},
                                      .nd = 2, .reqs = {1, 8}, .dsec = {1e-4, 8e-4}};
    const di_engine_options opt = {.spec_cost = s->varlen == 1 ? &flat : NULL};
    di_error err = {0};
    if (di_engine_open_opts(&c, &opt, &e, &err)) {
        snprintf(msg, cap, "%s", err.msg);
        fprintf(stderr, "    open %s: %s\n", s->what, msg);
    } else if (cap) {
        msg[0] = '\0';
    }
    return e;
}

/* Run the workload with every configuration; all must equal the first (speculation off). */
static int same_under(const char *model, int n, const deepinfer_prompt *prompts, const deepinfer_sampling_params *sp,
                      const spec_cfg *cfgs, int ncfg, int max_seqs) {
    deepinfer_request_output **ref = NULL;
    int ok = 1;
    for (int k = 0; k < ncfg && ok; k++) {
        char msg[1024];
        deepinfer_engine *e = open_spec(model, &cfgs[k], max_seqs, msg, sizeof msg);
        if (!e) return 0;
        deepinfer_request_output **out = NULL;
        if (deepinfer_generate(e, prompts, (size_t)n, sp, (size_t)n, &out)) {
            fprintf(stderr, "    %s: %s\n", cfgs[k].what, deepinfer_engine_last_error(e));
            deepinfer_engine_close(e);
            ok = 0;
            break;
        }
        deepinfer_engine_stats st;
        deepinfer_engine_get_stats(e, &st);
        int same = 1;
        long tokens = 0;
        int64_t drafted = 0, accepted = 0;
        for (int i = 0; i < n; i++) {
            if (out[i]->status) {
                fprintf(stderr, "    %s request %d: %s\n", cfgs[k].what, i, out[i]->error);
                same = 0;
            }
            if (ref) same &= eng_same_output(ref[i], out[i], i);
            for (size_t j = 0; j < out[i]->n_choices; j++) tokens += (long)out[i]->choices[j].n_tokens;
            drafted += out[i]->metrics.spec_drafted;
            accepted += out[i]->metrics.spec_accepted;
        }
        fprintf(stderr, "    %-34s %s: %ld tokens, %lld steps, %lld verify steps, drafts %lld/%lld accepted, "
                        "%lld preemptions\n",
                cfgs[k].what, !ref ? "reference" : same ? "identical" : "DIFFERENT", tokens, (long long)st.steps,
                (long long)st.spec_steps, (long long)st.spec_accepted, (long long)st.spec_drafted,
                (long long)st.preemptions);
        /* the per-request counts add up to the engine's; speculation on means drafts were verified */
        if (drafted != st.spec_drafted || accepted != st.spec_accepted || accepted > drafted) same = 0;
        if (cfgs[k].nextn != 0 && k > 0 && st.spec_steps == 0) {
            fprintf(stderr, "    %s: no step verified a draft\n", cfgs[k].what);
            same = 0;
        }
        if (cfgs[k].pages && !st.preemptions) {
            fprintf(stderr, "    %s: the shrunk pool preempted nothing\n", cfgs[k].what);
            same = 0;
        }
        deepinfer_engine_close(e);
        if (!ref) ref = out;
        else deepinfer_outputs_free(out, (size_t)n);
        ok &= same;
    }
    if (ref) deepinfer_outputs_free(ref, (size_t)n);
    return ok;
}

typedef struct workload {
    int32_t ids[NREQ * 320];
    deepinfer_prompt prompts[NREQ];
    deepinfer_sampling_params sp[NREQ];
} workload;

TEST(spec_v4_mtp_outputs_equal_speculation_off) {
    workload *w = calloc(1, sizeof *w);
    eng_workload(NREQ, 1024, w->ids, w->prompts, w->sp);
    for (int i = 0; i < NREQ; i++) w->sp[i].max_tokens += 12; /* long enough for verify runs */
    const spec_cfg cfgs[] = {
        {"off", 0, 0, 64, 0, 0},
        {"MTP fixed 3 (chained)", 0, 3, 64, 0, 0},
        {"MTP confidence-scheduled", 1, 2, 64, 0, 0},
        {"MTP fixed 3, chunk 13", 0, 3, 13, 0, 0},
        {"MTP fixed 2, shrunk pool", 0, 2, 64, 40, 0},
    };
    int ok = same_under(di_test_data(V4), NREQ, w->prompts, w->sp, cfgs, 5, 16);
    free(w);
    CHECK(ok);
}

TEST(spec_v41_dspark_outputs_equal_speculation_off) {
    char dir[64];
    CHECK(eng_golden_v41_dir(dir, sizeof dir));
    workload *w = calloc(1, sizeof *w);
    eng_workload_avoid(NREQ, 1024, 1008, w->ids, w->prompts, w->sp); /* the image token is never prompted */
    for (int i = 0; i < NREQ; i++) w->sp[i].max_tokens += 12;
    const spec_cfg cfgs[] = {
        {"off", 0, 0, 64, 0, 0},
        {"DSpark fixed 5", 0, 5, 64, 0, 0},
        {"DSpark confidence-scheduled", 1, -1, 64, 0, 0},
        {"DSpark fixed 5, chunk 13", 0, 5, 13, 0, 0},
        {"DSpark fixed 5, shrunk pool", 0, 5, 64, 24, 0},
    };
    int ok = same_under(dir, NREQ, w->prompts, w->sp, cfgs, 5, 16);
    free(w);
    eng_rm_dir(dir);
    CHECK(ok);
}

/* The demo model: text prompts, greedy and seeded temperature 0.8 / top-p 0.95, logprobs, mixed
 * in one batch; the drafter here is trained, so long accepted runs (and EOS / max_tokens inside
 * them) happen. */
TEST(spec_demo_outputs_equal_speculation_off) {
    static const char *texts[] = {"In the beginning God created", "And Jesus said unto them,",
                                  "CYNIC, n. A blackguard whose", "The LORD is my shepherd;",
                                  "Blessed are the peacemakers:", "Now the serpent was more subtil",
                                  "ABSURDITY, n. A statement", "And it came to pass"};
    deepinfer_prompt p[16];
    deepinfer_sampling_params sp[16];
    for (int i = 0; i < 16; i++) {
        p[i] = (deepinfer_prompt){.text = texts[i % 8]};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].max_tokens = 16 + (i * 7) % 23;
        sp[i].logprobs = i % 3 == 0 ? 3 : -1;
        if (i % 2) {
            sp[i].temperature = 0.8f, sp[i].top_p = 0.95f, sp[i].has_seed = 1, sp[i].seed = 77 + (uint64_t)i;
        } else {
            sp[i].temperature = 0;
        }
        if (i == 6) sp[i].min_tokens = 30, sp[i].repetition_penalty = 1.2f;
        if (i == 10) sp[i].n = 2;
    }
    const spec_cfg cfgs[] = {
        {"off", 0, 0, 512, 0, 0},
        {"DSpark fixed 5", 0, 5, 512, 0, 0},
        {"DSpark confidence-scheduled", 1, -1, 512, 0, 0},
        {"DSpark fixed 3, chunk 13", 0, 3, 13, 0, 0},
        {"DSpark fixed 5, shrunk pool (4-row pages)", 0, 5, 512, 60, 4},
    };
    CHECK(same_under(di_test_data(DEMO), 16, p, sp, cfgs, 5, 16));
}

/* torch.linspace(0, end, 8) in float32, as the recipe's evaluate.py picks its prompt starts:
 * the first half start + i * step, the second end - (7 - i) * step. */
static int64_t recipe_start(int64_t end, int i) {
    float step = (float)end / 7.0f;
    float v = i < 4 ? (float)i * step : (float)end - (float)(7 - i) * step;
    return (int64_t)v;
}

/* The recipe's DSpark protocol (tools/reference/evaluate.py dspark_acceptance; README: tau 2.91):
 * 8 held-out prompts of 64 tokens (BOS + 63 of the held-out token stream), 96 greedy tokens, blocks
 * of 5 verified whole — here through the engine, the drafts verified by the target itself. */
TEST(spec_demo_tau_matches_recipe) {
    size_t len = 0;
    char *text = NULL;
    di_error err = {0};
    CHECK(di_read_file(di_test_data("../../eval/demo/heldout.txt"), 0, &text, &len, &err) == DEEPINFER_OK);
    di_tokenizer *tok = NULL;
    char tp[PATH_MAX];
    snprintf(tp, sizeof tp, "%s/tokenizer.json", di_test_data(DEMO));
    CHECK(di_tokenizer_load(tp, &tok, &err) == DEEPINFER_OK);
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    CHECK(di_tokenizer_encode(tok, text, len, &ids, &n, &cap, &err) == DEEPINFER_OK);
    free(text);
    di_tokenizer_free(tok);
    CHECK(n > 1000);
    int32_t prompts[8][64];
    deepinfer_prompt p[8];
    deepinfer_sampling_params sp[8];
    for (int i = 0; i < 8; i++) {
        int64_t s = recipe_start((int64_t)n - 128, i);
        prompts[i][0] = 0; /* BOS */
        memcpy(prompts[i] + 1, ids + s, sizeof(int32_t) * 63);
        p[i] = (deepinfer_prompt){.token_ids = prompts[i], .n_token_ids = 64};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].temperature = 0, sp[i].max_tokens = 96, sp[i].ignore_eos = 1;
    }
    free(ids);
    char msg[1024];
    spec_cfg c = {"DSpark fixed 5", 0, 5, 512, 0, 0};
    deepinfer_engine *e = open_spec(di_test_data(DEMO), &c, 8, msg, sizeof msg);
    CHECK(e != NULL);
    deepinfer_request_output **out = NULL;
    CHECK(deepinfer_generate(e, p, 8, sp, 8, &out) == DEEPINFER_OK);
    deepinfer_engine_stats st;
    deepinfer_engine_get_stats(e, &st);
    double tau = (double)(st.spec_steps + st.spec_accepted) / (double)st.spec_steps;
    fprintf(stderr, "    tau %.3f over %lld verify steps (recipe 2.91 over 254); acceptance by position:", tau,
            (long long)st.spec_steps);
    for (int j = 0; j < 5; j++)
        fprintf(stderr, " %.3f", st.spec_drafted_at[j] ? (double)st.spec_accepted_at[j] / st.spec_drafted_at[j] : 0);
    fputc('\n', stderr);
    for (int i = 0; i < 8; i++) CHECK(out[i]->status == DEEPINFER_OK && out[i]->choices[0].n_tokens == 96);
    deepinfer_outputs_free(out, 8);
    deepinfer_engine_close(e);
    /* the recipe's figure, within the bound; its steps verify whole blocks of 5 while the
     * engine's last step of each request verifies what max_tokens leaves */
    CHECK(fabs(tau - 2.91) <= 0.1);
}

TEST(spec_bad_configuration_is_refused_at_open) {
    char msg[1024];
    spec_cfg big = {"nextn 6 > block 5", 0, 6, 512, 0, 0};
    CHECK(open_spec(di_test_data(DEMO), &big, 4, msg, sizeof msg) == NULL);
    CHECK(strstr(msg, "nextn_decode") && strstr(msg, "block"));
    spec_cfg neg = {"nextn -2", 0, -2, 512, 0, 0};
    CHECK(open_spec(di_test_data(DEMO), &neg, 4, msg, sizeof msg) == NULL);
    CHECK(strstr(msg, "nextn_decode"));
    spec_cfg vl = {"mtp_varlen 2", 2, -1, 512, 0, 0};
    CHECK(open_spec(di_test_data(DEMO), &vl, 4, msg, sizeof msg) == NULL);
    CHECK(strstr(msg, "mtp_varlen"));
    const char *bad[] = {"-1", "x", "5x", ""};
    for (int i = 0; i < 3; i++) {
        setenv("DEEPINFER_USE_NEXTN_DECODE", bad[i], 1);
        spec_cfg d = {"env", 0, -1, 512, 0, 0};
        deepinfer_engine *e = open_spec(di_test_data(DEMO), &d, 4, msg, sizeof msg);
        unsetenv("DEEPINFER_USE_NEXTN_DECODE");
        CHECK(e == NULL);
        CHECK(strstr(msg, "DEEPINFER_USE_NEXTN_DECODE"));
    }
    setenv("DEEPINFER_ENABLE_MTP_VARLEN", "yes", 1);
    spec_cfg d = {"env", -1, -1, 512, 0, 0};
    deepinfer_engine *e = open_spec(di_test_data(DEMO), &d, 4, msg, sizeof msg);
    unsetenv("DEEPINFER_ENABLE_MTP_VARLEN");
    CHECK(e == NULL);
    CHECK(strstr(msg, "DEEPINFER_ENABLE_MTP_VARLEN"));
    /* the environment turns it on: the plan says so */
    setenv("DEEPINFER_ENABLE_MTP_VARLEN", "1", 1);
    e = open_spec(di_test_data(DEMO), &d, 4, msg, sizeof msg);
    unsetenv("DEEPINFER_ENABLE_MTP_VARLEN");
    CHECK(e != NULL);
    CHECK(strstr(deepinfer_engine_plan_text(e), "speculation  dspark drafter, drafts of up to 5"));
    CHECK(strstr(deepinfer_engine_plan_text(e), "verify cost"));
    deepinfer_engine_close(e);
}

/* Structured outputs with speculation: drafts the grammar rejects end the draft, accepted runs
 * advance the matcher as single tokens would; outputs (text, tokens, finish) are the same. */
TEST(spec_structured_outputs_equal_speculation_off) {
    enum { N = 8 };
    deepinfer_prompt p[N];
    deepinfer_sampling_params sp[N];
    static const char *texts[] = {"And God said,", "The answer is", "In the beginning", "Q: yes or no? A:"};
    for (int i = 0; i < N; i++) {
        p[i] = (deepinfer_prompt){.text = texts[i % 4]};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].max_tokens = 40;
        sp[i].has_seed = 1, sp[i].seed = 5 + (uint64_t)i;
        sp[i].temperature = i % 2 ? 0.9f : 0;
    }
    for (int i = 0; i < 3; i++) sp[i].so_schema_type = "regex", sp[i].so_schema = "( ?[a-z]+)+ END";
    for (int i = 3; i < 5; i++) sp[i].so_schema_type = "json", sp[i].so_schema = "{\"enum\": [\"yes\", \"no\", \"maybe\"]}";
    sp[5].so_schema_type = "json",
    sp[5].so_schema = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}}, \"required\": [\"name\"]}";
    sp[6].so_schema_type = "regex", sp[6].so_schema = "(the|and|of| )+", sp[6].top_p = 0.8f; /* the full-mask path */
    /* 7: unconstrained beside them */
    const spec_cfg cfgs[] = {{"off", 0, 0, 512, 0, 0}, {"DSpark fixed 5", 0, 5, 512, 0, 0}, {"DSpark fixed 2", 0, 2, 512, 0, 0}};
    CHECK(same_under(di_test_data(DEMO), N, p, sp, cfgs, 3, 8));
}

/* A checkpoint without drafter tensors runs without speculation and the plan says why: the V4
 * golden config with no MTP layer (num_nextn_predict_layers 0), written as a random checkpoint by
 * tools/dummy, opened with speculation asked for. */
TEST(spec_model_without_drafter_runs_without_speculation) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/di_nodraft_XXXXXX");
    CHECK(mkdtemp(dir));
    /* tools' dummy writer makes a real checkpoint from a config with the drafter removed */
    char cfgpath[PATH_MAX + 32];
    snprintf(cfgpath, sizeof cfgpath, "%s/in.json", dir);
    FILE *f = fopen(cfgpath, "w");
    CHECK(f);
    size_t len = 0;
    char *text = NULL;
    di_error err = {0};
    char src[PATH_MAX + 32];
    snprintf(src, sizeof src, "%s/config.json", di_test_data(V4));
    CHECK(di_read_file(src, 0, &text, &len, &err) == DEEPINFER_OK);
    char *k = strstr(text, "\"num_nextn_predict_layers\"");
    CHECK(k);
    char *colon = strchr(k, ':');
    CHECK(colon);
    fwrite(text, 1, (size_t)(colon + 1 - text), f);
    fputs(" 0", f);
    char *rest = colon + 1;
    while (*rest == ' ' || (*rest >= '0' && *rest <= '9')) rest++;
    /* and compress_ratios loses its MTP entry (the last) */
    char *cr = strstr(text, "\"compress_ratios\"");
    CHECK(cr);
    char *close = strchr(cr, ']'), *comma = close;
    while (comma > cr && *comma != ',') comma--;
    CHECK(comma > cr);
    if (cr < rest) { /* compress_ratios after the nextn key is the usual order; handle both */
        fclose(f);
        CHECK_MSG(0, "unexpected key order in %s", src);
    }
    fwrite(rest, 1, (size_t)(comma - rest), f);
    fputs(close, f);
    fclose(f);
    free(text);
    char model[PATH_MAX + 32], msg[1024];
    snprintf(model, sizeof model, "%s/ckpt", dir);
    CHECK(mkdir(model, 0700) == 0);
    di_model_config mc;
    CHECK(di_dummy_write_dir(cfgpath, 2, model, NULL, &err) == DEEPINFER_OK);
    CHECK_MSG(di_config_load(model, &mc, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(mc.drafter == DI_DRAFTER_NONE);
    CHECK(di_dummy_write_checkpoint(&mc, 1, model, (uint64_t)1 << 30, &err) == DEEPINFER_OK);
    spec_cfg c = {"MTP asked for", 1, -1, 64, 0, 0};
    deepinfer_engine *e = open_spec(model, &c, 4, msg, sizeof msg);
    CHECK(e);
    CHECK(strstr(deepinfer_engine_plan_text(e), "speculation  off: this checkpoint has no drafter tensors"));
    int32_t ids[5] = {1, 2, 3, 4, 5};
    deepinfer_prompt pr = {.token_ids = ids, .n_token_ids = 5};
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.temperature = 0, sp.max_tokens = 8, sp.ignore_eos = 1;
    deepinfer_request_output **out = NULL;
    CHECK(deepinfer_generate(e, &pr, 1, &sp, 1, &out) == DEEPINFER_OK);
    CHECK(out[0]->status == DEEPINFER_OK && out[0]->choices[0].n_tokens == 8 && out[0]->metrics.spec_drafted == 0);
    deepinfer_outputs_free(out, 1);
    deepinfer_engine_close(e);
    eng_rm_dir(dir);
}
