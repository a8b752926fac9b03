/*
 * Speculative decoding's pipelined order (docs/speculative.md "One step"):
 * where every drafting request picks greedily and the draft length is fixed,
 * the drafter's drafts are held by the queue for the next step, which is
 * planned before they reach the host (its draft rows' tokens, comparisons
 * and history filled in by the queue); on the CPU the queue holds them after
 * its synchronous drafter, so the host side of the order (the runner's held
 * draft rows, the scheduler's one-step validity, the queue's fill before
 * acceptance) is proven here. Outputs with the pipelined order equal the
 * synchronous order's and speculation off, bitwise; the same drafts are
 * verified and accepted at every position as in the synchronous order; held
 * drafts that a step does not plan (a small token budget, preemption) are
 * dropped without changing an output; and requests that cannot hold (sampled,
 * logprobs) keep the synchronous order beside greedy ones.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/engine_util.h"

#define DEMO "../../models/deepinfer-demo-v41"
#define V4 "golden/v4-tiny-a"

typedef struct pipe_cfg {
    const char *what;
    int nextn, sync, chunk, budget, seqs;
    int64_t pages;
    int page_rows;
} pipe_cfg;

typedef struct pipe_run {
    deepinfer_request_output **out;
    deepinfer_engine_stats st;
    int64_t held;               /* drafter steps whose drafts the queue held */
} pipe_run;

static int run_cfg(const char *model, const pipe_cfg *c, int n, const deepinfer_prompt *pr,
                   const deepinfer_sampling_params *sp, pipe_run *r) {
    deepinfer_engine_config cfg;
    deepinfer_engine_config_init(&cfg);
    cfg.model = model;
    cfg.max_model_len = 1024;
    cfg.chunk_size = c->chunk ? c->chunk : 512;
    cfg.max_num_seqs = c->seqs ? c->seqs : 8;
    cfg.max_num_batched_tokens = c->budget;
    cfg.num_pages = c->pages;
    cfg.page_rows = c->page_rows;
    cfg.mtp_varlen = 0;
    cfg.nextn_decode = c->nextn;
    const di_engine_options opt = {.spec_sync = c->sync};
    deepinfer_engine *e = NULL;
    di_error err = {0};
    memset(r, 0, sizeof *r);
    if (di_engine_open_opts(&cfg, &opt, &e, &err)) {
        fprintf(stderr, "    open %s: %s\n", c->what, err.msg);
        return 0;
    }
    int ok = deepinfer_generate(e, pr, (size_t)n, sp, (size_t)n, &r->out) == DEEPINFER_OK;
    if (!ok) fprintf(stderr, "    %s: %s\n", c->what, deepinfer_engine_last_error(e));
    deepinfer_engine_get_stats(e, &r->st);
    r->held = e->dq->spec_held;
    deepinfer_engine_close(e);
    return ok;
}

/* Every configuration against the first (speculation off). want_held: 1 = the pipelined order must
 * have held drafts (cfg.sync 0), and a synchronous one never; same_drafts: configurations of the
 * same nextn verify the same drafts at every position whatever the order (no draft dropped). */
static int same_under(const char *model, int n, const deepinfer_prompt *pr, const deepinfer_sampling_params *sp,
                      const pipe_cfg *cfgs, int ncfg, int want_held, int same_drafts) {
    pipe_run ref, prev = {0};
    if (!run_cfg(model, &cfgs[0], n, pr, sp, &ref)) return 0;
    int ok = 1;
    for (int k = 1; k < ncfg && ok; k++) {
        pipe_run r;
        if (!run_cfg(model, &cfgs[k], n, pr, sp, &r)) {
            ok = 0;
            break;
        }
        int same = 1;
        for (int i = 0; i < n; i++) {
            if (r.out[i]->status) fprintf(stderr, "    %s request %d: %s\n", cfgs[k].what, i, r.out[i]->error), same = 0;
            same &= eng_same_output(ref.out[i], r.out[i], i);
        }
        fprintf(stderr, "    %-36s %s: %lld steps, %lld verify groups, drafts %lld/%lld accepted, %lld held, %lld preemptions\n",
                cfgs[k].what, same ? "identical" : "DIFFERENT", (long long)r.st.steps, (long long)r.st.spec_steps,
                (long long)r.st.spec_accepted, (long long)r.st.spec_drafted, (long long)r.held,
                (long long)r.st.preemptions);
        if (r.st.spec_steps == 0) fprintf(stderr, "    %s: no draft verified\n", cfgs[k].what), same = 0;
        if (want_held && !cfgs[k].sync && r.held == 0) fprintf(stderr, "    %s: nothing held\n", cfgs[k].what), same = 0;
        if (cfgs[k].sync && r.held != 0) fprintf(stderr, "    %s: held drafts in the synchronous order\n", cfgs[k].what), same = 0;
        if (cfgs[k].pages && !r.st.preemptions) fprintf(stderr, "    %s: nothing preempted\n", cfgs[k].what), same = 0;
        const pipe_cfg *a = &cfgs[k - 1], *b = &cfgs[k]; /* the same settings but the order */
        if (same_drafts && prev.out && a->nextn == b->nextn && a->chunk == b->chunk && a->budget == b->budget &&
            a->pages == b->pages &&
            (memcmp(prev.st.spec_drafted_at, r.st.spec_drafted_at, sizeof r.st.spec_drafted_at) ||
             memcmp(prev.st.spec_accepted_at, r.st.spec_accepted_at, sizeof r.st.spec_accepted_at))) {
            fprintf(stderr, "    %s: other drafts verified than in %s (%lld vs %lld accepted)\n", cfgs[k].what,
                    cfgs[k - 1].what, (long long)r.st.spec_accepted, (long long)prev.st.spec_accepted);
            same = 0;
        }
        if (prev.out) deepinfer_outputs_free(prev.out, (size_t)n);
        prev = r;
        ok &= same;
    }
    if (prev.out) deepinfer_outputs_free(prev.out, (size_t)n);
    deepinfer_outputs_free(ref.out, (size_t)n);
    return ok;
}

static const char *TEXTS[8] = {"In the beginning God created", "And Jesus said unto them,", "The LORD is my shepherd;",
                               "And it came to pass", "Blessed are the meek:", "For God so loved the world,",
                               "Then the king answered and said", "Now the serpent was more subtil"};

/* n greedy text requests of different lengths; some end on EOS or a stop id inside accepted runs. */
static void greedy_texts(int n, deepinfer_prompt *p, deepinfer_sampling_params *sp) {
    for (int i = 0; i < n; i++) {
        p[i] = (deepinfer_prompt){.text = TEXTS[i % 8]};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].temperature = 0;
        sp[i].max_tokens = 24 + (i * 11) % 29;
        sp[i].ignore_eos = i % 3 != 0;
        if (i % 4 == 1) sp[i].stop_ids[0] = 13, sp[i].stop_ids[1] = 11, sp[i].n_stop_ids = 2;
    }
}

TEST(spec_pipeline_demo_greedy_b1_equals_sync_and_off) {
    deepinfer_prompt p[1];
    deepinfer_sampling_params sp[1];
    greedy_texts(1, p, sp);
    sp[0].max_tokens = 80, sp[0].ignore_eos = 1;
    const pipe_cfg cfgs[] = {{"off", 0, 0, 0, 0, 1, 0, 0},
                             {"fixed 5, synchronous", 5, 1, 0, 0, 1, 0, 0},
                             {"fixed 5, pipelined", 5, 0, 0, 0, 1, 0, 0},
                             {"fixed 2, synchronous", 2, 1, 0, 0, 1, 0, 0},
                             {"fixed 2, pipelined", 2, 0, 0, 0, 1, 0, 0}};
    CHECK(same_under(di_test_data(DEMO), 1, p, sp, cfgs, 5, 1, 1));
}

TEST(spec_pipeline_demo_greedy_b8_equals_sync_and_off) {
    deepinfer_prompt p[8];
    deepinfer_sampling_params sp[8];
    greedy_texts(8, p, sp);
    const pipe_cfg cfgs[] = {{"off", 0, 0, 0, 0, 8, 0, 0},
                             {"fixed 5, synchronous", 5, 1, 0, 0, 8, 0, 0},
                             {"fixed 5, pipelined", 5, 0, 0, 0, 8, 0, 0},
                             {"fixed 5, chunk 13, synchronous", 5, 1, 13, 0, 8, 0, 0},
                             {"fixed 5, chunk 13, pipelined", 5, 0, 13, 0, 8, 0, 0}};
    CHECK(same_under(di_test_data(DEMO), 8, p, sp, cfgs, 5, 1, 1));
}

/* 16 requests over 8 slots (admissions and prefill chunks beside verify groups), token budgets that
 * cut the held drafts a step verifies, or leave some decoding requests out of a step (their held
 * drafts are then dropped: the step after drafts anew),
 * and a shrunk pool that preempts requests whose drafts are held. */
TEST(spec_pipeline_demo_dropped_held_drafts_change_nothing) {
    deepinfer_prompt p[16];
    deepinfer_sampling_params sp[16];
    greedy_texts(16, p, sp);
    const pipe_cfg cfgs[] = {{"off", 0, 0, 0, 0, 8, 0, 0},
                             {"fixed 5, budget 20, pipelined", 5, 0, 0, 20, 8, 0, 0},
                             {"fixed 5, budget 20, chunk 7, pipelined", 5, 0, 7, 20, 8, 0, 0},
                             {"fixed 5, budget 6 (< decoding requests)", 5, 0, 6, 6, 8, 0, 0},
                             {"fixed 5, shrunk pool, pipelined", 5, 0, 0, 0, 8, 80, 4}};
    CHECK(same_under(di_test_data(DEMO), 16, p, sp, cfgs, 5, 1, 0));
}

/* Requests that cannot hold (seeded sampling, logprobs, a penalty) beside greedy ones: a drafter
 * step with any of them keeps the synchronous order; the steps without them hold. */
TEST(spec_pipeline_demo_mixed_requests_fall_back) {
    deepinfer_prompt p[8];
    deepinfer_sampling_params sp[8];
    greedy_texts(8, p, sp);
    sp[2].temperature = 0.8f, sp[2].top_p = 0.95f, sp[2].has_seed = 1, sp[2].seed = 99, sp[2].max_tokens = 12;
    sp[5].logprobs = 2, sp[5].max_tokens = 10;
    sp[6].repetition_penalty = 1.3f, sp[6].max_tokens = 14;
    const pipe_cfg cfgs[] = {{"off", 0, 0, 0, 0, 8, 0, 0},
                             {"fixed 5, synchronous", 5, 1, 0, 0, 8, 0, 0},
                             {"fixed 5, pipelined", 5, 0, 0, 0, 8, 0, 0}};
    CHECK(same_under(di_test_data(DEMO), 8, p, sp, cfgs, 3, 1, 1));
}

/* Every request sampled: nothing is held, the order is the synchronous one. */
TEST(spec_pipeline_sampled_requests_never_hold) {
    deepinfer_prompt p[4];
    deepinfer_sampling_params sp[4];
    greedy_texts(4, p, sp);
    for (int i = 0; i < 4; i++) sp[i].temperature = 0.7f, sp[i].has_seed = 1, sp[i].seed = 3 + (uint64_t)i;
    pipe_cfg c = {"fixed 5, pipelined, sampled", 5, 0, 0, 0, 4, 0, 0};
    pipe_run r;
    CHECK(run_cfg(di_test_data(DEMO), &c, 4, p, sp, &r));
    CHECK(r.st.spec_steps > 0);
    CHECK(r.held == 0);
    deepinfer_outputs_free(r.out, 4);
}

/* V4's MTP block (chained drafts, every fed position reads its next token: the held drafts' tokens
 * reach the drafter's feed through the queue's fill) on the golden checkpoint. */
TEST(spec_pipeline_v4_mtp_greedy_equals_sync_and_off) {
    enum { N = 8 };
    static int32_t ids[N * 320];
    deepinfer_prompt p[N];
    deepinfer_sampling_params sp[N];
    eng_workload(N, 1024, ids, p, sp);
    for (int i = 0; i < N; i++) {
        sp[i].temperature = 0, sp[i].top_p = 1, sp[i].top_k = 0, sp[i].min_p = 0, sp[i].min_tokens = 0;
        sp[i].repetition_penalty = 1, sp[i].presence_penalty = 0, sp[i].frequency_penalty = 0;
        sp[i].logprobs = -1, sp[i].prompt_logprobs = -1, sp[i].n = 1, sp[i].max_tokens += 12;
    }
    const pipe_cfg cfgs[] = {{"off", 0, 0, 64, 0, 8, 0, 0},
                             {"MTP fixed 3, synchronous", 3, 1, 64, 0, 8, 0, 0},
                             {"MTP fixed 3, pipelined", 3, 0, 64, 0, 8, 0, 0},
                             {"MTP fixed 3, chunk 13, pipelined", 3, 0, 13, 0, 8, 0, 0}};
    CHECK(same_under(di_test_data(V4), N, p, sp, cfgs, 4, 1, 1));
}
