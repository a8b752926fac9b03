/*
 * The scheduler's drafts (scheduler.c schedule_drafts, docs/speculative.md
 * "Confidence-scheduled lengths"): drafts take only free pages nobody is
 * owed. A decoding sequence with drafts beside a running sequence mid-prefill
 * whose remaining prompt needs exactly the free pages: the prefill gets its
 * whole chunk, nothing is preempted, and the drafts stop where they would
 * need a new page; with more pages the drafts are full length.
 */
#include <stdio.h>
#include <string.h>

#include "engine/scheduler.h"
#include "engine/state_pool.h"
#include "engine/request.h"
#include "model/config.h"
#include "test.h"

enum { SPEC_N = 5, B_PROMPT = 100, B_DONE = 16 };

typedef struct two_seqs {
    di_model_config cfg;
    di_pool_geom g;
    di_state_pool pool;
    di_scheduler s;
    di_request ra, rb;
    di_choice ca, cb;
    int32_t out[4];
} two_seqs;

/* A: prompt la, one output, its decode row next, SPEC_N drafts ready; B: B_DONE of B_PROMPT prompt rows done.
 * The pool: A's pages with its decode row, B's whole prompt, and `extra` pages. */
static int setup(two_seqs *t, int la, int64_t extra) {
    memset(t, 0, sizeof *t);
    di_error e = {0};
    if (di_config_load(di_test_data("golden/v4-tiny-a"), &t->cfg, &e)) {
        fprintf(stderr, "    %s\n", e.msg);
        return 0;
    }
    t->cfg.max_draft = SPEC_N; /* the load option a speculating engine sets */
    if (di_pool_geom_compute(&t->cfg, 16, 1024, SPEC_N, &t->g, &e)) {
        fprintf(stderr, "    %s\n", e.msg);
        return 0;
    }
    int64_t pages = di_pool_geom_pages_for(&t->cfg, &t->g, la + 1) + di_pool_geom_pages_for(&t->cfg, &t->g, B_PROMPT);
    if (di_pool_init(&t->pool, &t->cfg, &t->g, 2, pages + extra, NULL)) return 0;
    di_sched_config sc = {.max_num_batched_tokens = 512, .max_num_seqs = 2, .chunk_size = 256, .max_model_len = 1024,
                          .spec_n = SPEC_N, .prompt_lp_rows = 1};
    if (di_sched_init(&t->s, &sc, &t->pool, NULL)) return 0;
    di_request *r[2] = {&t->ra, &t->rb};
    di_choice *c[2] = {&t->ca, &t->cb};
    int np[2] = {la, B_PROMPT};
    for (int i = 0; i < 2; i++) {
        di_sampling_params_default(&r[i]->params);
        r[i]->params.max_tokens = 64;
        r[i]->id = (uint64_t)i + 1;
        r[i]->n_prompt = np[i];
        r[i]->n_choices = 1;
        r[i]->choices = c[i];
        c[i]->req = r[i];
        c[i]->prio = (uint64_t)(i + 1) << 8;
        c[i]->state = DI_CHOICE_RUNNING;
        c[i]->slot = di_pool_slot_acquire(&t->pool);
        c[i]->plan_item = c[i]->plan_op = -1;
        c[i]->out_ids = t->out + 2 * i;
        t->s.running[t->s.n_running++] = c[i];
    }
    t->ca.n_out = 1;
    t->ca.n_sched = la;
    t->ca.n_draft = SPEC_N;
    t->cb.n_sched = B_DONE;
    return di_pool_grow(&t->pool, t->ca.slot, la) == 0 && di_pool_grow(&t->pool, t->cb.slot, B_DONE) == 0;
}

static void teardown(two_seqs *t) {
    di_sched_free(&t->s);
    di_pool_free(&t->pool);
}

static const di_plan_item *item_of(const di_scheduler *s, const di_choice *c) {
    for (int i = 0; i < s->plan.n_items; i++)
        if (s->plan.items[i].c == c) return &s->plan.items[i];
    return NULL;
}

TEST(sched_drafts_take_no_pages_owed_to_a_prefill) {
    two_seqs t;
    /* A's length: its decode row fits its pages, its SPEC_N drafts need one more page */
    int la = 0;
    CHECK(setup(&t, 2, 0));
    for (int l = 2; l < 400 && !la; l++)
        if (di_pool_geom_pages_for(&t.cfg, &t.g, l + 1 + SPEC_N) > di_pool_geom_pages_for(&t.cfg, &t.g, l + 1)) la = l;
    teardown(&t);
    CHECK(la > 0);
    CHECK(setup(&t, la, 0));
    di_sched_schedule(&t.s);
    const di_plan_item *a = item_of(&t.s, &t.ca), *b = item_of(&t.s, &t.cb);
    CHECK(a != NULL && b != NULL);
    CHECK_MSG(b->n == B_PROMPT - B_DONE, "the prefill got %d of its %d rows", b ? b->n : -1, B_PROMPT - B_DONE);
    CHECK(t.s.plan.n_preempted == 0 && t.s.preemptions == 0);
    CHECK_MSG(a->draft < SPEC_N, "A verifies %d drafts with pages owed to B", a->draft);
    CHECK(di_pool_pages_short(&t.pool, t.ca.slot, la + 1 + a->draft) == 0);
    CHECK(di_pool_pages_short(&t.pool, t.cb.slot, B_PROMPT) == 0);
    teardown(&t);
    /* pages beyond what B is owed: the drafts take them */
    CHECK(setup(&t, la, 8));
    di_sched_schedule(&t.s);
    a = item_of(&t.s, &t.ca), b = item_of(&t.s, &t.cb);
    CHECK(a != NULL && b != NULL);
    CHECK(a->draft == SPEC_N && a->n == 1 + SPEC_N);
    CHECK(b->n == B_PROMPT - B_DONE && t.s.preemptions == 0);
    teardown(&t);
}
