/*
 * Confidence scheduling's decisions at saturation (docs/speculative.md
 * "Confidence-scheduled lengths"; spec_cost.c, scheduler.c schedule_drafts):
 *   - a draft is worth its survival over every decode row of the step, not over
 *     the drafting sequences' rows alone (hand-computed values of the table);
 *   - di_spec_drafts_may_pay is the bound of di_spec_choose over any confidences;
 *   - where it says drafting cannot pay, the scheduler plans a quiet step: no
 *     probe, no drafts after the step, nothing left to offer the next one;
 *     where it can, a choice idle for the probe interval drafts after the step;
 *   - drafts are offered in the step right after the one that made them only;
 *   - drafts wait for the first measured plain step of the batch's size;
 *   - the confidences are calibrated by the drafts seen accepted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/spec_cost.h"
#include "engine/state_pool.h"
#include "model/config.h"
#include "test.h"

/* rows cost 1 s + 0.1 s per further row; the drafter 0.1 s per request */
static const di_spec_cost TENTH = {.n = 2, .rows = {1, 101}, .sec = {1.0, 11.0}, .nd = 2, .reqs = {1, 11},
                                   .dsec = {0.1, 1.1}};

TEST(spec_choose_values_drafts_over_every_decode_row) {
    di_spec_cand cand[DEEPINFER_MAX_DRAFT * 2];
    di_spec_cost c = TENTH;
    c.plain[0] = 1.0, c.plain[3] = 1.7; /* plain steps of 1 and 8 rows measured at the table's times */
    const float conf_half[1] = {0.0f}; /* sigmoid(0) = 1/2 */
    const float *conf[1] = {conf_half};
    int kmax[1] = {1}, k[1] = {-1};
    /* batch 1: (1 + 0.5) / (1.1 + 0.1) = 1.25 tokens/s beats 1 / 1.0 */
    di_spec_choose(&c, 1, 1, 1, kmax, conf, NULL, NULL, k, cand);
    CHECK_MSG(k[0] == 1, "batch 1 took %d drafts", k[0]);
    /* 8 decode rows, one of them with the draft: (8 + 0.5) / (1.8 + 0.1) = 4.47 < 8 / 1.7 = 4.71: not
     * taken (valued over the drafting row alone it would be, (1 + 0.5) / 1.9 > 1 / 1.7) */
    di_spec_choose(&c, 8, 8, 1, kmax, conf, NULL, NULL, k, cand);
    CHECK_MSG(k[0] == 0, "batch 8 took %d drafts for one sequence", k[0]);
    /* a certain draft at batch 8: (8 + 1) / 1.9 = 4.74 > 4.71 */
    const float conf_sure[1] = {INFINITY};
    conf[0] = conf_sure;
    di_spec_choose(&c, 8, 8, 1, kmax, conf, NULL, NULL, k, cand);
    CHECK(k[0] == 1);
}

TEST(spec_may_pay_bounds_every_choice) {
    di_spec_cost c = TENTH;
    /* batch 8, drafts of up to 5: certain drafts pay (13 / 2.3 = 5.65 > 8 / 1.7 = 4.71) */
    CHECK(di_spec_drafts_may_pay(&c, 8, 8, 5, NULL, NULL));
    /* a measured plain step of 0.5 s: 8 / 0.5 = 16 tokens/s, certain drafts at most (8 + p) / (1.7 + 0.1 p
     * + 0.1 ceil(p / 5)) < 10 */
    c.plain[3] = 0.5; /* the log2 bucket of 8 rows */
    CHECK(!di_spec_drafts_may_pay(&c, 8, 8, 5, NULL, NULL));
    /* then no confidence makes di_spec_choose take a draft */
    di_spec_cand cand[8 * DEEPINFER_MAX_DRAFT];
    float sure[8][DEEPINFER_MAX_DRAFT];
    const float *conf[8];
    int kmax[8], k[8];
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < DEEPINFER_MAX_DRAFT; j++) sure[i][j] = INFINITY;
        conf[i] = sure[i];
        kmax[i] = 5;
    }
    di_spec_choose(&c, 8, 8, 8, kmax, conf, NULL, NULL, k, cand);
    int taken = 0;
    for (int i = 0; i < 8; i++) taken += k[i];
    CHECK_MSG(taken == 0, "%d certain drafts taken where none can pay", taken);
    /* a plain step of 1.6 s (below the table's 1.7): (8 + 5) / 2.3 = 5.65 > 8 / 1.6 = 5: may pay, and
     * certain drafts are taken */
    c.plain[3] = 1.6;
    CHECK(di_spec_drafts_may_pay(&c, 8, 8, 5, NULL, NULL));
    di_spec_choose(&c, 8, 8, 8, kmax, conf, NULL, NULL, k, cand);
    taken = 0;
    for (int i = 0; i < 8; i++) taken += k[i];
    CHECK(taken > 0);
    CHECK(!di_spec_drafts_may_pay(&c, 8, 0, 5, NULL, NULL)); /* nobody decodes: nothing to draft */
    /* drafts seen accepted at 0.2 (then 0.1, ...) from DI_SPEC_PROBE_SEEN verifications on: at most
     * (8 + d (0.2 + 0.1 + ...)) / (1.7 + 0.1 d j + 0.1 d) < 8 / 1.6 = 5 for every d and j */
    int64_t acc[DEEPINFER_MAX_DRAFT] = {0}, dr[DEEPINFER_MAX_DRAFT] = {0};
    for (int j = 0; j < 5; j++) dr[j] = DI_SPEC_PROBE_SEEN, acc[j] = DI_SPEC_PROBE_SEEN / (5 * (j + 1));
    CHECK(!di_spec_drafts_may_pay(&c, 8, 8, 5, acc, dr));
    /* fewer verifications than that: still certain */
    for (int j = 0; j < 5; j++) dr[j] = DI_SPEC_PROBE_SEEN - 1;
    CHECK(di_spec_drafts_may_pay(&c, 8, 8, 5, acc, dr));
    /* seen surviving to every position at 0.9: (8 + 0.9) / (1.8 + 0.1) = 4.68 < 5 for one draft, but
     * (8 + 5 x 0.9) / 2.3 = 5.43 > 5 for five */
    for (int j = 0; j < 5; j++) dr[j] = 1000, acc[j] = 900;
    CHECK(di_spec_drafts_may_pay(&c, 8, 8, 5, acc, dr));
}

/* ---- the scheduler ------------------------------------------------------------------------ */

enum { NSEQ = 4, SPEC_N = 5, PROMPT = 8 };

typedef struct sched_fix {
    di_model_config cfg;
    di_pool_geom g;
    di_state_pool pool;
    di_scheduler s;
    di_spec_cost cost;
    di_request r[NSEQ];
    di_choice c[NSEQ];
    int32_t out[NSEQ][64];
    int64_t acc_at[DEEPINFER_MAX_DRAFT], dr_at[DEEPINFER_MAX_DRAFT];
} sched_fix;

/* NSEQ sequences decoding (prompt PROMPT, one output each), every one idle since `idle` steps. */
static int fix_setup(sched_fix *t, const di_spec_cost *cost, int idle) {
    memset(t, 0, sizeof *t);
    di_error e = {0};
    if (di_config_load(di_test_data("golden/v4-tiny-a"), &t->cfg, &e)) {
        fprintf(stderr, "    %s\n", e.msg);
        return 0;
    }
    t->cfg.max_draft = SPEC_N;
    if (di_pool_geom_compute(&t->cfg, 16, 1024, SPEC_N, &t->g, &e)) return 0;
    if (di_pool_init(&t->pool, &t->cfg, &t->g, NSEQ, 64, NULL)) return 0;
    t->cost = *cost;
    di_sched_config sc = {.max_num_batched_tokens = 512, .max_num_seqs = NSEQ, .chunk_size = 256,
                          .max_model_len = 1024, .spec_n = SPEC_N, .spec_cost = &t->cost,
                          .spec_accepted_at = t->acc_at, .spec_drafted_at = t->dr_at, .prompt_lp_rows = 1};
    if (di_sched_init(&t->s, &sc, &t->pool, NULL)) return 0;
    for (int i = 0; i < NSEQ; i++) {
        di_request *r = &t->r[i];
        di_choice *c = &t->c[i];
        di_sampling_params_default(&r->params);
        r->params.max_tokens = 64;
        r->id = (uint64_t)i + 1;
        r->n_prompt = PROMPT;
        r->n_choices = 1;
        r->choices = c;
        c->req = r;
        c->prio = (uint64_t)(i + 1) << 8;
        c->state = DI_CHOICE_RUNNING;
        c->slot = di_pool_slot_acquire(&t->pool);
        c->plan_item = c->plan_op = -1;
        c->out_ids = t->out[i];
        c->n_out = 1;
        c->n_sched = PROMPT;
        c->spec_idle = idle;
        t->s.running[t->s.n_running++] = c;
        if (di_pool_grow(&t->pool, c->slot, PROMPT)) return 0;
    }
    return 1;
}

static void fix_free(sched_fix *t) {
    di_sched_free(&t->s);
    di_pool_free(&t->pool);
}

/* After a planned step: every row committed, as the engine's outputs path does. */
static void commit(sched_fix *t) {
    for (int i = 0; i < t->s.plan.n_items; i++) {
        di_plan_item *it = &t->s.plan.items[i];
        if (!it->c) continue;
        it->c->n_sched = it->pos0 + it->n - it->draft;
        it->c->n_out++;
        it->c->plan_item = -1;
    }
}

static int drafting_after(const sched_fix *t) {
    int n = 0;
    for (int i = 0; i < t->s.plan.n_items; i++) n += t->s.plan.items[i].c && t->s.plan.items[i].draft_next;
    return n;
}

TEST(spec_probe_none_where_drafting_cannot_pay) {
    sched_fix *t = calloc(1, sizeof *t);
    di_spec_cost never = TENTH;
    never.plain[2] = 0.1; /* 4 rows: a plain step at 0.1 s, 40 tokens/s; certain drafts at most 24 / 6.5 */
    CHECK(fix_setup(t, &never, 1000)); /* long idle: a probe is due */
    for (int step = 0; step < 40; step++) {
        di_sched_schedule(&t->s);
        CHECK_MSG(t->s.plan.spec_quiet, "step %d is not quiet", step);
        CHECK_MSG(drafting_after(t) == 0, "step %d: %d sequences draft after it", step, drafting_after(t));
        CHECK(t->s.plan.n_items == NSEQ);
        for (int i = 0; i < t->s.plan.n_items; i++) CHECK(t->s.plan.items[i].n == 1 && !t->s.plan.items[i].draft);
        commit(t);
    }
    fix_free(t);
    /* the same sequences where drafting may pay: the due probe runs, in the first step */
    CHECK(fix_setup(t, &TENTH, 1000));
    di_sched_schedule(&t->s);
    CHECK(!t->s.plan.spec_quiet);
    CHECK_MSG(drafting_after(t) == NSEQ, "%d of %d due probes", drafting_after(t), NSEQ);
    fix_free(t);
    free(t);
}

/* TENTH with its plain step of 4 rows measured at the table's time */
static di_spec_cost tenth_measured(void) {
    di_spec_cost c = TENTH;
    c.plain[2] = 1.3;
    return c;
}

TEST(spec_drafts_offered_only_in_the_next_step) {
    sched_fix *t = calloc(1, sizeof *t);
    di_spec_cost measured = tenth_measured();
    CHECK(fix_setup(t, &measured, 0));
    /* sequence 0 drafted after the last step with confidence logits -4 (S = 0.018, ...): at batch 4
     * the table does not take them, (4 + 0.018) / (1.4 + 0.1) = 2.68 < 4 / 1.3 = 3.08 */
    di_choice *c = &t->c[0];
    c->n_draft = SPEC_N;
    for (int j = 0; j < SPEC_N; j++) c->draft[j] = 3, c->draft_conf[j] = -4.0f;
    di_sched_schedule(&t->s);
    CHECK(t->s.plan.items[0].c == c && t->s.plan.items[0].draft == 0);
    CHECK_MSG(c->n_draft == 0, "drafts not verified now are still offered (%d)", c->n_draft);
    CHECK(c->spec_backoff == 1); /* a probe not taken: the interval doubles, once */
    commit(t);
    di_sched_schedule(&t->s);
    CHECK(t->s.plan.items[0].draft == 0 && c->spec_backoff == 1);
    commit(t);
    fix_free(t);
    /* confident drafts are taken in the next step */
    CHECK(fix_setup(t, &measured, 0));
    c = &t->c[0];
    c->n_draft = SPEC_N;
    for (int j = 0; j < SPEC_N; j++) c->draft[j] = 3, c->draft_conf[j] = 12.0f;
    di_sched_schedule(&t->s);
    CHECK_MSG(t->s.plan.items[0].draft > 0, "confident drafts not taken");
    CHECK(t->s.plan.items[0].draft_next && c->spec_backoff == 0);
    fix_free(t);
    free(t);
}

/* The confidences' calibration (spec_cost.h di_spec_cost_observe_drafts): drafts valued at the
 * survival they were actually seen to have. At batch 1 in TENTH a draft pays when its survival is
 * above 0.2 ((1 + S) / 1.2 > 1). */
TEST(spec_choose_calibrates_the_confidences) {
    di_spec_cand cand[DEEPINFER_MAX_DRAFT];
    int kmax[1] = {1}, k[1] = {-1};
    di_spec_cost c = TENTH;
    c.plain[0] = 1.0;
    /* confidence 0 (S = 1/2) taken, until such drafts are seen never to be accepted */
    const float half[1] = {0.0f};
    const float *conf[1] = {half};
    di_spec_choose(&c, 1, 1, 1, kmax, conf, NULL, NULL, k, cand);
    CHECK(k[0] == 1);
    for (int i = 0; i < 50; i++) di_spec_cost_observe_drafts(&c, half, 1, 0);
    di_spec_choose(&c, 1, 1, 1, kmax, conf, NULL, NULL, k, cand);
    CHECK_MSG(k[0] == 0, "an overconfident draft still taken (calibration %.3f)",
              (c.surv_seen + 1) / (c.surv_predicted + 1));
    /* confidence -2 (S = 0.12) not taken, until such drafts are seen always accepted */
    c = TENTH;
    c.plain[0] = 1.0;
    const float low[1] = {-2.0f};
    conf[0] = low;
    di_spec_choose(&c, 1, 1, 1, kmax, conf, NULL, NULL, k, cand);
    CHECK(k[0] == 0);
    for (int i = 0; i < 50; i++) di_spec_cost_observe_drafts(&c, low, 1, 1);
    di_spec_choose(&c, 1, 1, 1, kmax, conf, NULL, NULL, k, cand);
    CHECK(k[0] == 1);
    /* no confidence head (NaN): nothing recorded */
    c = TENTH;
    const float none[1] = {NAN};
    di_spec_cost_observe_drafts(&c, none, 1, 1);
    CHECK(c.surv_seen == 0 && c.surv_predicted == 0);
}

/* Until a plain step of the batch's size was measured, drafts are refused (the table's eager forwards
 * overvalue it) without doubling the probe interval, and the choice probes SPEC_PROBE_SOON (3) steps
 * later, when the steady state's plain step has been measured. */
TEST(spec_drafts_wait_for_the_plain_step) {
    sched_fix *t = calloc(1, sizeof *t);
    CHECK(fix_setup(t, &TENTH, 0));
    di_choice *c = &t->c[0];
    c->n_draft = SPEC_N;
    for (int j = 0; j < SPEC_N; j++) c->draft[j] = 3, c->draft_conf[j] = 12.0f; /* certain */
    di_sched_schedule(&t->s);
    CHECK_MSG(t->s.plan.items[0].draft == 0, "%d drafts taken before a plain step was measured",
              t->s.plan.items[0].draft);
    CHECK(c->spec_backoff == 0 && c->n_draft == 0);
    int probe_at = -1;
    for (int step = 1; step <= 5 && probe_at < 0; step++) {
        commit(t);
        di_sched_schedule(&t->s);
        if (t->s.plan.items[0].draft_next) probe_at = step;
    }
    CHECK_MSG(probe_at == 3, "probed %d steps later", probe_at);
    /* the plain step measured: the same drafts are taken */
    fix_free(t);
    di_spec_cost measured = tenth_measured();
    CHECK(fix_setup(t, &measured, 0));
    c = &t->c[0];
    c->n_draft = SPEC_N;
    for (int j = 0; j < SPEC_N; j++) c->draft[j] = 3, c->draft_conf[j] = 12.0f;
    di_sched_schedule(&t->s);
    CHECK(t->s.plan.items[0].draft == SPEC_N);
    fix_free(t);
    free(t);
}

/* Where certain drafts would pay but drafts as likely as those seen so far would not: the step is
 * quiet (no drafts at a prompt's end, no prompt window fed) and probes run only at the longest
 * interval (16 << 4 steps), however long the probe interval of the choice itself. */
TEST(spec_probe_rare_where_seen_drafts_do_not_pay) {
    sched_fix *t = calloc(1, sizeof *t);
    di_spec_cost measured = tenth_measured();
    CHECK(fix_setup(t, &measured, 100));
    for (int j = 0; j < SPEC_N; j++) t->dr_at[j] = DI_SPEC_PROBE_SEEN, t->acc_at[j] = 1;
    di_sched_schedule(&t->s);
    CHECK(t->s.plan.spec_quiet);
    CHECK_MSG(drafting_after(t) == 0, "%d probes at 101 idle steps", drafting_after(t));
    commit(t);
    for (int i = 0; i < NSEQ; i++) t->c[i].spec_idle = (16 << 4) - 1;
    di_sched_schedule(&t->s);
    CHECK_MSG(drafting_after(t) == NSEQ, "%d of %d probes at the longest interval", drafting_after(t), NSEQ);
    commit(t);
    /* acceptance seen high: not quiet, probes at the choice's own interval (16 after its last) */
    for (int j = 0; j < SPEC_N; j++) t->acc_at[j] = DI_SPEC_PROBE_SEEN;
    for (int i = 0; i < NSEQ; i++) t->c[i].spec_idle = 15;
    di_sched_schedule(&t->s);
    CHECK(!t->s.plan.spec_quiet && drafting_after(t) == NSEQ);
    fix_free(t);
    free(t);
}
