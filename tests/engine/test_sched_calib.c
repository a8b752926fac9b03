/*
 * Confidence scheduling with a miscalibrated head (scheduler.c schedule_drafts, spec_calib.h,
 * docs/speculative.md "Confidence-scheduled lengths"): the scheduler, fed the verify outcomes as the
 * engine feeds them, must learn to draft where drafts pay though the head reads too low; and where
 * drafts at the measured acceptance cannot pay, it must stop probing (running the drafter just to
 * read confidences) once the calibration is learnt.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/spec_cost.h"
#include "engine/state_pool.h"
#include "model/config.h"
#include "test.h"

enum { MAXSEQ = 8, SPEC_N = 5, PROMPT = 12, STEPS = 240, MAX_OUT = STEPS * (SPEC_N + 1) + 8, CTX = 2048 };

typedef struct sim {
    di_model_config cfg;
    di_pool_geom g;
    di_state_pool pool;
    di_scheduler s;
    di_request r[MAXSEQ];
    di_choice c[MAXSEQ];
    int32_t out[MAXSEQ][MAX_OUT];
    int64_t accepted_at[DEEPINFER_MAX_DRAFT], drafted_at[DEEPINFER_MAX_DRAFT];
    di_spec_cost cost;
    uint64_t rng;
    /* per step: drafts verified, probes (drafter runs with nothing verified) */
    int taken[STEPS + 1], probes[STEPS + 1];
} sim;

static int sim_init(sim *m, int nseq, const di_spec_cost *cost) {
    di_error e = {0};
    memset(m, 0, sizeof *m);
    m->cost = *cost;
    m->rng = 5;
    if (di_config_load(di_test_data("golden/v4-tiny-a"), &m->cfg, &e)) return 1;
    m->cfg.max_draft = SPEC_N;
    if (di_pool_geom_compute(&m->cfg, 16, CTX, SPEC_N, &m->g, &e)) return 1;
    const int64_t per = di_pool_geom_pages_for(&m->cfg, &m->g, PROMPT + MAX_OUT + SPEC_N + 2);
    if (di_pool_init(&m->pool, &m->cfg, &m->g, nseq, per * nseq, NULL)) return 1;
    di_sched_config sc = {.max_num_batched_tokens = 512, .max_num_seqs = nseq, .chunk_size = 256,
                          .max_model_len = CTX, .spec_n = SPEC_N, .spec_cost = &m->cost, .prompt_lp_rows = 1,
                          .spec_accepted_at = m->accepted_at, .spec_drafted_at = m->drafted_at};
    if (di_sched_init(&m->s, &sc, &m->pool, NULL)) return 1;
    for (int i = 0; i < nseq; i++) {
        di_sampling_params_default(&m->r[i].params);
        m->r[i].params.max_tokens = MAX_OUT - 8;
        m->r[i].id = (uint64_t)i + 1, m->r[i].n_prompt = PROMPT, m->r[i].n_choices = 1, m->r[i].choices = &m->c[i];
        di_choice *c = &m->c[i];
        c->req = &m->r[i];
        c->prio = (uint64_t)(i + 1) << 8;
        c->state = DI_CHOICE_RUNNING;
        c->slot = di_pool_slot_acquire(&m->pool);
        c->plan_item = c->plan_op = -1;
        c->out_ids = m->out[i];
        c->n_out = 1; /* the prompt's last row ran and drafted: drafts on offer */
        c->n_sched = PROMPT;
        c->n_draft = SPEC_N;
        if (di_pool_grow(&m->pool, c->slot, c->n_sched)) return 1;
        m->s.running[m->s.n_running++] = c;
    }
    return 0;
}

static double sim_unit(uint64_t *s) { /* [0, 1) */
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* Run the scheduler STEPS steps as the engine would: verified drafts are accepted, position by
 * position, with probability p_true; the head reads every draft at logit `reading`. */
static void sim_run(sim *m, double p_true, float reading) {
    for (int i = 0; i < m->s.n_running; i++) /* the drafts on offer at the start */
        for (int j = 0; j < SPEC_N; j++) m->s.running[i]->draft_conf[j] = reading;
    for (int step = 1; step <= STEPS; step++) {
        di_sched_schedule(&m->s);
        for (int q = 0; q < m->s.plan.n_items; q++) {
            const di_plan_item *it = &m->s.plan.items[q];
            if (!it->c || !it->sample) continue;
            di_choice *ch = it->c;
            ch->plan_item = -1;
            int acc = 0;
            if (it->draft > 0) {
                while (acc < it->draft && sim_unit(&m->rng) < p_true) acc++;
                for (int j = 0; j < it->draft; j++) m->drafted_at[j]++, m->accepted_at[j] += j < acc;
                di_spec_calib_add(&m->cost.cal, ch->draft_conf, it->draft, acc);
                m->taken[step] += it->draft;
            }
            ch->n_sched += it->n - (it->draft - acc);
            for (int t = 0; t <= acc && ch->n_out < MAX_OUT; t++) ch->out_ids[ch->n_out++] = 7;
            if (it->draft_next) {
                if (!it->draft) m->probes[step]++;
                ch->n_draft = SPEC_N;
                for (int j = 0; j < SPEC_N; j++) ch->draft_conf[j] = reading;
            }
        }
        di_spec_calib_fit(&m->cost.cal);
    }
}

static void sim_free(sim *m) {
    di_sched_free(&m->s);
    di_pool_free(&m->pool);
}

TEST(sched_learns_to_draft_where_the_head_reads_too_low) {
    static sim m;
    /* one row 1 ms, each further row 0.1 ms, the drafter 0.3 ms. Drafts are accepted with 0.8 each,
     * but the head reads sigmoid(-1) = 0.27: as read, 1 + 0.27 + 0.07 + ... tokens for 1.4 ms, below a plain
     * step's 1 per ms; as accepted, 3.7 tokens for 1.8 ms */
    const di_spec_cost cost = {.n = 2, .rows = {1, 1001}, .sec = {1e-3, 0.101}, .nd = 1, .reqs = {1}, .dsec = {3e-4}};
    CHECK(sim_init(&m, 1, &cost) == 0);
    sim_run(&m, 0.8, -1.0f);
    int late_taken = 0, late_steps = 0;
    for (int step = STEPS - 99; step <= STEPS; step++) late_taken += m.taken[step], late_steps += m.taken[step] > 0;
    CHECK_MSG(late_steps >= 95, "%d of the last 100 steps verified drafts", late_steps);
    CHECK_MSG(late_taken >= 4 * late_steps, "%d drafts in %d steps: the calibrated lengths stay short", late_taken,
              late_steps);
    CHECK_NEAR(di_spec_calib_prob(&m.cost.cal, 0, -1.0f), 0.8, 0.05);
    sim_free(&m);
}

TEST(sched_stops_probing_once_measured_drafts_cannot_pay) {
    static sim m;
    /* 8 sequences; 8 rows cost 8 ms, each further row 0.1 ms, the drafter 1 ms per sequence: a sequence's
     * drafts pay if they bring more than ~1.5 tokens. Drafts accepted with 0.3 each bring 0.43, but the
     * head reads sigmoid(1.4) = 0.8 (too high): exploring verifies some, then the scheduler must see that
     * drafts do not pay and stop running the drafter to probe */
    const di_spec_cost cost = {.n = 2, .rows = {8, 1008}, .sec = {8e-3, 0.108}, .nd = 1, .reqs = {1}, .dsec = {1e-3}};
    CHECK(sim_init(&m, MAXSEQ, &cost) == 0);
    sim_run(&m, 0.3, 1.4f);
    int late_taken = 0, late_probes = 0;
    for (int step = 65; step <= STEPS; step++) late_taken += m.taken[step], late_probes += m.probes[step];
    CHECK_MSG(m.drafted_at[0] >= DI_SPEC_EXPLORE_OUTCOMES, "%lld first drafts verified: no exploring",
              (long long)m.drafted_at[0]);
    CHECK_MSG(late_taken == 0, "%d drafts verified after step 64 where none pays", late_taken);
    CHECK_MSG(late_probes == 0, "%d drafter runs for probes after step 64", late_probes);
    /* the head's reading corrected towards what was accepted */
    const double seen = (double)m.accepted_at[0] / (double)m.drafted_at[0];
    CHECK_NEAR(di_spec_calib_prob(&m.cost.cal, 0, 1.4f), seen, 0.1);
    sim_free(&m);
}

TEST(sched_never_probes_where_even_certain_drafts_cannot_pay) {
    static sim m;
    /* every row 1 ms and the drafter 50 ms: not even drafts certain to be accepted pay for the drafter */
    const di_spec_cost cost = {.n = 2, .rows = {1, 1024}, .sec = {1e-3, 1.024}, .nd = 1, .reqs = {1}, .dsec = {0.05}};
    CHECK(sim_init(&m, MAXSEQ, &cost) == 0);
    sim_run(&m, 0.8, 1.4f);
    int taken = 0, probes = 0;
    for (int step = 1; step <= STEPS; step++) taken += m.taken[step], probes += m.probes[step];
    CHECK_MSG(taken == 0 && probes == 0, "%d drafts verified and %d probes where no draft can pay", taken, probes);
    sim_free(&m);
}

TEST(sched_keeps_probing_where_measured_drafts_pay) {
    static sim m;
    /* 8 sequences; a step's first row 1 ms, each further row 0.02 ms, the drafter 0.1 ms per sequence; the
     * head reads sigmoid(-4) = 0.02 while 0.8 are accepted: as read, no draft pays; as accepted, all do.
     * The calibration reads them right and the scheduler drafts, then keeps drafting */
    const di_spec_cost cost = {.n = 2, .rows = {1, 1001}, .sec = {1e-3, 0.021}, .nd = 1, .reqs = {1}, .dsec = {1e-4}};
    CHECK(sim_init(&m, MAXSEQ, &cost) == 0);
    sim_run(&m, 0.8, -4.0f);
    int late_steps = 0;
    for (int step = STEPS - 99; step <= STEPS; step++) late_steps += m.taken[step] > 0;
    CHECK_MSG(late_steps >= 95, "%d of the last 100 steps verified drafts", late_steps);
    sim_free(&m);
}
