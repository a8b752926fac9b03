/*
 * Confidence scheduling's probes (scheduler.c schedule_drafts, docs/speculative.md): where drafts never
 * pay, choices that probe (draft once to see their confidence) at staggered moments would make almost every
 * step a synchronous speculative step. The probes of every choice must fall in the same steps (multiples of
 * the probe interval on the scheduler's one clock), so the steps between them are plain; and drafts a step
 * does not verify are dropped, never offered again at a later, wrong position.
 */
#include <stdio.h>
#include <string.h>

#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/spec_cost.h"
#include "engine/state_pool.h"
#include "model/config.h"
#include "test.h"

enum { NSEQ = 6, SPEC_N = 5, PROMPT = 12, STEPS = 200 };

TEST(sched_probes_of_all_choices_fall_in_the_same_plain_free_steps) {
    di_model_config cfg;
    di_pool_geom g;
    di_state_pool pool;
    di_scheduler s;
    di_request r[NSEQ];
    di_choice c[NSEQ];
    static int32_t out[NSEQ][STEPS + 8];
    di_error e = {0};
    CHECK_MSG(di_config_load(di_test_data("golden/v4-tiny-a"), &cfg, &e) == DEEPINFER_OK, "%s", e.msg);
    cfg.max_draft = SPEC_N;
    CHECK(di_pool_geom_compute(&cfg, 16, 1024, SPEC_N, &g, &e) == DEEPINFER_OK);
    const int64_t per = di_pool_geom_pages_for(&cfg, &g, PROMPT + STEPS + SPEC_N + 2);
    CHECK(di_pool_init(&pool, &cfg, &g, NSEQ, per * NSEQ, NULL) == DEEPINFER_OK);
    /* a step's first row costs 5 ms, each further row 0.1 ms, the drafter 0.2 ms per sequence. At the
     * measured acceptance (100 verified per position, cumulative 0.6, 0.36, ...) one sequence's drafts
     * pay, so the probes run; at the drafts' own confidence (sigmoid(-2) = 0.12, the head uncalibrated)
     * they do not, so no probe's drafts are taken */
    static const di_spec_cost cost = {.n = 2, .rows = {1, 1001}, .sec = {5e-3, 0.105}, .nd = 1, .reqs = {1},
                                      .dsec = {2e-4}};
    static const int64_t drafted_at[DEEPINFER_MAX_DRAFT] = {100, 100, 100, 100, 100};
    static const int64_t accepted_at[DEEPINFER_MAX_DRAFT] = {59, 35, 21, 12, 7};
    di_sched_config sc = {.max_num_batched_tokens = 512, .max_num_seqs = NSEQ, .chunk_size = 256,
                          .max_model_len = 1024, .spec_n = SPEC_N, .spec_cost = &cost, .prompt_lp_rows = 1,
                          .spec_accepted_at = accepted_at, .spec_drafted_at = drafted_at};
    CHECK(di_sched_init(&s, &sc, &pool, NULL) == DEEPINFER_OK);
    memset(r, 0, sizeof r), memset(c, 0, sizeof c);
    for (int i = 0; i < NSEQ; i++) {
        di_sampling_params_default(&r[i].params);
        r[i].params.max_tokens = STEPS + 4;
        r[i].id = (uint64_t)i + 1, r[i].n_prompt = PROMPT, r[i].n_choices = 1, r[i].choices = &c[i];
        c[i].req = &r[i];
        c[i].prio = (uint64_t)(i + 1) << 8;
        c[i].state = DI_CHOICE_RUNNING;
        c[i].slot = di_pool_slot_acquire(&pool);
        c[i].plan_item = c[i].plan_op = -1;
        c[i].out_ids = out[i];
        /* decoding, each at another point of its probe cycle: outputs so far and backoffs differ */
        c[i].n_out = 1 + i;
        c[i].n_sched = PROMPT + c[i].n_out - 1;
        c[i].spec_backoff = i % 3;
        c[i].n_draft = i % 2 ? SPEC_N : 0;
        for (int j = 0; j < SPEC_N; j++) c[i].draft_conf[j] = -2.0f;
        CHECK(di_pool_grow(&pool, c[i].slot, c[i].n_sched) == 0);
        s.running[s.n_running++] = &c[i];
    }
    int probe_steps = 0, misaligned = 0, taken = 0, stale = 0, first_probe = -1;
    for (int step = 1; step <= STEPS; step++) {
        di_sched_schedule(&s);
        int probes = 0;
        for (int q = 0; q < s.plan.n_items; q++) {
            const di_plan_item *it = &s.plan.items[q];
            if (!it->c || !it->sample) continue;
            di_choice *ch = it->c;
            ch->plan_item = -1;
            taken += it->draft;
            /* the step ran: its drafts were rejected, its own token sampled */
            ch->n_sched += it->n - it->draft;
            ch->out_ids[ch->n_out++] = 7;
            if (it->draft_next) {
                probes++;
                ch->n_draft = SPEC_N; /* fresh drafts for the next step */
            } else if (ch->n_draft) stale++;
        }
        if (probes) {
            probe_steps++;
            if (first_probe < 0) first_probe = step;
            if (step % 16) misaligned++;
        }
    }
    CHECK_MSG(taken == 0, "%d drafts verified where none pays at its confidence", taken);
    CHECK_MSG(stale == 0, "%d choices kept drafts a step had passed", stale);
    CHECK_MSG(misaligned == 0, "%d probe steps off the common clock", misaligned);
    CHECK_MSG(probe_steps > 0 && probe_steps <= STEPS / 16, "%d probe steps in %d (at most %d)", probe_steps, STEPS,
              STEPS / 16);
    /* after a probe whose drafts were not taken every choice backs off: no probes at every 16th step late on */
    int late = 0;
    for (int i = 0; i < NSEQ; i++) late += c[i].spec_backoff == 4;
    CHECK_MSG(late == NSEQ, "%d of %d choices at the longest probe interval", late, NSEQ);
    di_sched_free(&s);
    di_pool_free(&pool);
}
