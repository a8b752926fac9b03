/* scheduler.c — continuous batching, admission and preemption (scheduler.h). */
#include "engine/scheduler.h"

#include <math.h>
#include <stdlib.h>

#include "engine/spec_cost.h"
#include <string.h>

deepinfer_status di_sched_init(di_scheduler *s, const di_sched_config *cfg, di_state_pool *pool, di_error *err) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->pool = pool;
    int m = cfg->max_num_seqs;
    s->running = malloc(sizeof(di_choice *) * (size_t)m);
    /* a pass holds at most one item per slot acquisition: 2x slots bounds it */
    s->plan.items = malloc(sizeof(di_plan_item) * (size_t)(2 * m));
    s->plan.ops = malloc(sizeof(di_state_op) * (size_t)(2 * m));
    s->spec_item = malloc(sizeof(int) * (size_t)m);
    s->spec_kmax = malloc(sizeof(int) * (size_t)m);
    s->spec_k = malloc(sizeof(int) * (size_t)m);
    s->spec_conf = malloc(sizeof(float *) * (size_t)m);
    s->spec_cand = malloc(sizeof(di_spec_cand) * (size_t)m * DEEPINFER_MAX_DRAFT);
    if (!s->running || !s->plan.items || !s->plan.ops || !s->spec_item || !s->spec_kmax || !s->spec_k ||
        !s->spec_conf || !s->spec_cand) {
        di_sched_free(s);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the scheduler");
    }
    return DEEPINFER_OK;
}

void di_sched_free(di_scheduler *s) {
    free(s->waiting);
    free(s->running);
    free(s->plan.items);
    free(s->plan.ops);
    free(s->spec_item), free(s->spec_kmax), free(s->spec_k), free(s->spec_conf), free(s->spec_cand);
    memset(s, 0, sizeof *s);
}

deepinfer_status di_sched_reserve(di_scheduler *s, int n, di_error *err) {
    /* every choice can be waiting at once: waiting + running choices + n */
    int need = s->n_waiting + s->n_running + n;
    if (need <= s->cap_waiting) return DEEPINFER_OK;
    int cap = s->cap_waiting ? s->cap_waiting : 64;
    while (cap < need) cap *= 2;
    di_choice **w = realloc(s->waiting, sizeof *w * (size_t)cap);
    if (!w) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory queueing a request");
    s->waiting = w;
    s->cap_waiting = cap;
    return DEEPINFER_OK;
}

/* ---- queues (kept in FCFS order) ------------------------------------------ */

static void insert_sorted(di_choice **a, int *n, di_choice *c) {
    int i = *n;
    while (i > 0 && a[i - 1]->prio > c->prio) {
        a[i] = a[i - 1];
        i--;
    }
    a[i] = c;
    (*n)++;
}

static void remove_from(di_choice **a, int *n, di_choice *c) {
    for (int i = 0; i < *n; i++)
        if (a[i] == c) {
            memmove(a + i, a + i + 1, sizeof *a * (size_t)(*n - i - 1));
            (*n)--;
            return;
        }
}

void di_sched_add(di_scheduler *s, di_request *r) {
    for (int i = 0; i < r->n_choices; i++) {
        di_choice *c = &r->choices[i];
        c->state = DI_CHOICE_WAITING;
        c->fork_wait = i > 0 && r->n_prompt >= 2;
        s->waiting[s->n_waiting++] = c; /* ids only grow: appending keeps the order */
    }
}

static int64_t total_tokens(const di_choice *c) { return (int64_t)c->req->n_prompt + c->n_out + c->n_pending; }
static int64_t remaining(const di_choice *c) { return total_tokens(c) - c->n_sched; }

int di_sched_can_run(const di_scheduler *s, const di_choice *c) {
    return c->state != DI_CHOICE_FINISHED && c->n_out + c->n_pending < c->req->params.max_tokens &&
           total_tokens(c) < s->cfg.max_model_len;
}

/* Choice 0 of an n > 1 request stops its prefill before the last prompt
 * token while siblings wait to be forked from it. */
static int fork_waiters(const di_choice *c) {
    if (c->index != 0) return 0;
    int n = 0;
    for (int j = 1; j < c->req->n_choices; j++) n += c->req->choices[j].fork_wait;
    return n;
}

static int has_fork_waiters(const di_choice *c) { return fork_waiters(c) > 0; }

void di_sched_remove(di_scheduler *s, di_choice *c) {
    if (c->state == DI_CHOICE_RUNNING) {
        di_pool_slot_release(s->pool, c->slot);
        remove_from(s->running, &s->n_running, c);
    } else if (c->state == DI_CHOICE_WAITING) {
        remove_from(s->waiting, &s->n_waiting, c);
    }
    c->slot = -1;
    c->fork_wait = 0;
    c->state = DI_CHOICE_FINISHED;
}

/* ---- one pass --------------------------------------------------------------- */

typedef struct pass {
    di_scheduler *s;
    int budget;
    int plp_budget;       /* prompt-logprob rows left in this step (cfg.prompt_lp_rows) */
} pass;

/* Prompt logprobs: rows [n_sched, n_sched + k) of c that need logits are the prompt positions from
 * the request's plp_sched up to n_prompt - 2 (the last prompt row samples). Cut k so that the step
 * holds at most plp_budget of them (0: the chunk waits for a later step) and take them. */
static int64_t plp_cut(pass *p, const di_choice *c, int64_t k) {
    const di_request *q = c->req;
    if (q->params.prompt_logprobs < 0) return k;
    int64_t from = c->n_sched > q->plp_sched ? c->n_sched : q->plp_sched, end = q->n_prompt - 1;
    if (from >= end || from >= c->n_sched + k) return k;
    int64_t want = (c->n_sched + k < end ? c->n_sched + k : end) - from;
    if (want > p->plp_budget) {
        k = from + p->plp_budget - c->n_sched;
        want = p->plp_budget;
    }
    p->plp_budget -= (int)want;
    return k;
}

static void add_item(pass *p, di_choice *c, int n) {
    di_plan *pl = &p->s->plan;
    c->plan_item = pl->n_items;
    int sample = c->n_sched + n == total_tokens(c);
    pl->items[pl->n_items++] = (di_plan_item){.c = c, .pos0 = c->n_sched, .n = n, .sample = sample,
                                              .draft_next = sample && p->s->cfg.spec_n > 0};
    p->budget -= n;
}

static void add_op(pass *p, di_state_op_kind kind, int dst, int src) {
    di_plan *pl = &p->s->plan;
    pl->ops[pl->n_ops++] = (di_state_op){.kind = kind, .dst = dst, .src = src};
}

static void preempt(pass *p, di_choice *v) {
    di_scheduler *s = p->s;
    if (v->plan_item >= 0) { /* planned earlier in this pass: drop it */
        p->budget += s->plan.items[v->plan_item].n;
        s->plan.items[v->plan_item].c = NULL;
        v->plan_item = -1;
    }
    if (v->plan_op >= 0) { /* forked in this pass: the copy is moot */
        s->plan.ops[v->plan_op].kind = DI_OP_NONE;
        v->plan_op = -1;
    }
    if (v->index == 0) /* siblings forked from it in this pass cannot be copied from a released slot */
        for (int j = 1; j < v->req->n_choices; j++) {
            di_choice *sib = &v->req->choices[j];
            if (sib->plan_op >= 0 && sib->state == DI_CHOICE_RUNNING) preempt(p, sib);
        }
    di_pool_slot_release(s->pool, v->slot);
    remove_from(s->running, &s->n_running, v);
    v->slot = -1;
    v->n_sched = 0;
    v->n_draft = 0; /* its drafter state is gone; the recompute's last row drafts anew */
    v->state = DI_CHOICE_WAITING;
    v->num_preemptions++;
    insert_sorted(s->waiting, &s->n_waiting, v);
    if (v->index == 0) /* siblings can no longer be forked from it */
        for (int j = 1; j < v->req->n_choices; j++) v->req->choices[j].fork_wait = 0;
    s->preemptions++;
    s->plan.n_preempted++;
}

/* Give c's slot pages for `target` positions, preempting later sequences
 * while needed. 0 on success; -1 when even that does not suffice. */
static int grow_or_preempt(pass *p, di_choice *c, int64_t target) {
    di_scheduler *s = p->s;
    while (di_pool_grow(s->pool, c->slot, target) != 0) {
        di_choice *v = s->n_running ? s->running[s->n_running - 1] : NULL;
        if (!v || v == c || v->prio < c->prio) return -1;
        preempt(p, v);
    }
    return 0;
}

/* Fork the siblings of `lead` (at its last prompt token) into free slots. */
static void fork_siblings(pass *p, di_choice *lead) {
    di_scheduler *s = p->s;
    for (int j = 1; j < lead->req->n_choices; j++) {
        di_choice *c = &lead->req->choices[j];
        if (!c->fork_wait || c->state != DI_CHOICE_WAITING) continue;
        c->fork_wait = 0; /* forked now, or recomputes the prompt later */
        int slot = di_pool_slot_acquire(s->pool);
        if (slot < 0) continue;
        if (di_pool_grow(s->pool, slot, lead->n_sched + 1)) {
            di_pool_slot_release(s->pool, slot);
            continue;
        }
        c->plan_op = p->s->plan.n_ops;
        add_op(p, DI_OP_COPY, slot, lead->slot);
        c->slot = slot;
        c->n_sched = lead->n_sched;
        c->state = DI_CHOICE_RUNNING;
        remove_from(s->waiting, &s->n_waiting, c);
        insert_sorted(s->running, &s->n_running, c);
    }
}

/* 1. Sequences with one row left: decode tokens (and last prompt tokens). */
static void schedule_decodes(pass *p) {
    di_scheduler *s = p->s;
    for (int i = 0; i < s->n_running && p->budget > 0;) {
        di_choice *c = s->running[i];
        if (c->plan_item >= 0 || remaining(c) != 1 || !di_sched_can_run(s, c)) {
            i++;
            continue;
        }
        if (has_fork_waiters(c)) fork_siblings(p, c); /* they land right after c and are visited next */
        if (grow_or_preempt(p, c, c->n_sched + 1)) {
            preempt(p, c); /* the last sequence and still no page: give way */
            continue;
        }
        add_item(p, c, 1);
        i++;
    }
}

/* The drafts a decoding choice can verify now: its drafts within max_tokens (every verified row
 * samples one more output) and the context. */
static int draft_room(const di_scheduler *s, const di_choice *c) {
    if (c->n_pending || c->n_draft <= 0) return 0;
    /* drafts held by the queue serve only the step right after the one that made them */
    if (c->draft_held && c->draft_held + 1 != s->next_seq) return 0;
    int64_t k = c->n_draft < s->cfg.spec_n ? c->n_draft : s->cfg.spec_n;
    int64_t out_left = (int64_t)c->req->params.max_tokens - c->n_out - 1;
    int64_t ctx_left = s->cfg.max_model_len - total_tokens(c) - 1;
    if (k > out_left) k = out_left;
    if (k > ctx_left) k = ctx_left;
    return k > 0 ? (int)k : 0;
}

static void promised(const di_scheduler *s, int64_t *pages, int *slots);

/* Confidence scheduling's probes: a choice not drafting drafts again at the steps whose number is a multiple of
 * SPEC_PROBE_STEPS << backoff, the backoff growing by one after each probe whose drafts were not taken (up to
 * SPEC_PROBE_MAX). Every choice's interval is a multiple of SPEC_PROBE_STEPS counted on the scheduler's one step
 * clock, so the probes of all choices fall in the same steps and the steps between them stay plain (the
 * asynchronous, recorded path): staggered probes would make almost every step a synchronous speculative one. */
#define SPEC_PROBE_STEPS 16
#define SPEC_PROBE_MAX 4

/* Would n_probe sequences' drafts pay in a step of base_rows rows, at the engine's measured acceptance
 * by position (no confidence read yet; optimistic while exploring)? */
static int probe_can_pay(di_scheduler *s, int base_rows, int commit_rows, int n_probe, int exploring) {
    static const float measured[DEEPINFER_MAX_DRAFT] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    if (n_probe > s->cfg.max_num_seqs) n_probe = s->cfg.max_num_seqs;
    for (int q = 0; q < n_probe; q++) {
        s->spec_kmax[q] = s->cfg.spec_n;
        s->spec_conf[q] = measured;
    }
    di_spec_choose(s->cfg.spec_cost, base_rows, commit_rows, n_probe, s->spec_kmax, s->spec_conf,
                   s->cfg.spec_accepted_at, s->cfg.spec_drafted_at, exploring, s->spec_k, s->spec_cand);
    for (int q = 0; q < n_probe; q++)
        if (s->spec_k[q] > 0) return 1;
    return 0;
}

/* 1b. Speculative decoding: drafts as extra rows of the decode items planned in 1. */
static void schedule_drafts(pass *p) {
    di_scheduler *s = p->s;
    di_plan *pl = &s->plan;
    int n = 0, base = 0, n_commit = 0;
    for (int i = 0; i < pl->n_items; i++) {
        di_plan_item *it = &pl->items[i];
        if (!it->c) continue;
        base += it->n;
        if (!it->sample || it->n != 1 || it->pos0 < it->c->req->n_prompt) continue; /* decode rows only */
        n_commit++;
        int k = draft_room(s, it->c);
        if (!k) continue;
        s->spec_item[n] = i;
        s->spec_kmax[n] = k;
        s->spec_conf[n] = it->c->draft_conf;
        n++;
    }
    const di_spec_cost *cost = s->cfg.spec_cost;
    const int exploring = cost && di_spec_cost_exploring(s->cfg.spec_drafted_at);
    if (cost)
        di_spec_choose(cost, base, n_commit, n, s->spec_kmax, s->spec_conf, s->cfg.spec_accepted_at,
                       s->cfg.spec_drafted_at, exploring, s->spec_k, s->spec_cand);
    else memcpy(s->spec_k, s->spec_kmax, sizeof(int) * (size_t)n);
    /* drafts never preempt and never take pages owed to others: only free pages beyond what the running
     * sequences' known rows still need (prefill chunks, recomputes, forks: promised()) and the watermark */
    int64_t owed = 0;
    int owed_slots = 0;
    if (n) promised(s, &owed, &owed_slots);
    int64_t room = di_pool_pages_free(s->pool) - owed - s->cfg.watermark_pages;
    for (int q = 0; q < n; q++) {
        di_plan_item *it = &pl->items[s->spec_item[q]];
        di_choice *c = it->c;
        int64_t k = s->spec_k[q] < p->budget ? s->spec_k[q] : p->budget;
        while (k > 0 && di_pool_pages_short(s->pool, c->slot, c->n_sched + 1 + k) > room) k--;
        if (k > 0) {
            room -= di_pool_pages_short(s->pool, c->slot, c->n_sched + 1 + k);
            if (di_pool_grow(s->pool, c->slot, c->n_sched + 1 + k)) k = 0; /* cannot happen: room <= free */
        }
        if (k < 0) k = 0;
        it->n += (int)k;
        it->draft = (int)k;
        p->budget -= (int)k;
    }
    if (!cost) return;
    s->spec_clock++;
    int n_probe = 0;
    for (int i = 0; i < pl->n_items; i++) { /* who drafts after this step */
        di_plan_item *it = &pl->items[i];
        if (!it->c || !it->sample) continue;
        di_choice *c = it->c;
        int prompt_end = it->pos0 + it->n == c->req->n_prompt;
        /* drafts offered and none taken: the choice's probe interval doubles; taken: it resets */
        if (it->draft > 0) c->spec_backoff = 0;
        else if (draft_room(s, c) > 0 && c->spec_backoff < SPEC_PROBE_MAX) c->spec_backoff++;
        const int64_t interval = (int64_t)SPEC_PROBE_STEPS << c->spec_backoff;
        it->draft_next = it->draft > 0;
        if (!it->draft_next && (prompt_end || s->spec_clock % interval == 0)) {
            it->draft_next = 2; /* a probe (below) */
            n_probe++;
        }
    }
    /* a probe runs the drafter only to read its confidences; where drafts at the measured acceptance
     * (while exploring, the optimistic one) would not pay at this batch, confidences would rarely make
     * them pay, and the probe (a drafter call and a synchronous step) is skipped */
    if (n_probe && !probe_can_pay(s, base, n_commit, n_probe, exploring))
        for (int i = 0; i < pl->n_items; i++)
            if (pl->items[i].draft_next == 2) pl->items[i].draft_next = 0;
    for (int i = 0; i < pl->n_items; i++) {
        di_plan_item *it = &pl->items[i];
        if (!it->c || !it->sample) continue;
        if (it->draft_next) it->draft_next = 1;
        /* drafts not verified now are for positions this step passes: a later step must not offer them */
        else it->c->n_draft = 0;
    }
}

/* 2. Running sequences with more rows left: prefill / recompute chunks. */
static void schedule_chunks(pass *p) {
    di_scheduler *s = p->s;
    for (int i = 0; i < s->n_running && p->budget > 0;) {
        di_choice *c = s->running[i];
        int64_t rem = remaining(c);
        if (c->plan_item >= 0 || rem <= 1 || !di_sched_can_run(s, c)) {
            i++;
            continue;
        }
        int64_t k = rem < s->cfg.chunk_size ? rem : s->cfg.chunk_size;
        if (k > p->budget) k = p->budget;
        if (has_fork_waiters(c) && k > c->req->n_prompt - 1 - c->n_sched) k = c->req->n_prompt - 1 - c->n_sched;
        if ((k = plp_cut(p, c, k)) <= 0) {
            i++;
            continue;
        }
        if (grow_or_preempt(p, c, c->n_sched + k)) {
            k = di_pool_fit(s->pool, c->slot, c->n_sched, k, 0);
            if (k == 0) {
                preempt(p, c);
                continue;
            }
            di_pool_grow(s->pool, c->slot, c->n_sched + k);
        }
        add_item(p, c, (int)k);
        i++;
    }
}

/* What running sequences are owed: pages for their known rows, and for
 * choice 0s still to fork their siblings, a slot and the prompt's pages per
 * sibling. Admission leaves both alone. */
static void promised(const di_scheduler *s, int64_t *pages, int *slots) {
    *pages = 0;
    *slots = 0;
    for (int i = 0; i < s->n_running; i++) {
        const di_choice *c = s->running[i];
        int w = fork_waiters(c);
        *pages += di_pool_pages_short(s->pool, c->slot, total_tokens(c)) +
                  w * di_pool_geom_pages_for(s->pool->cfg, &s->pool->g, c->req->n_prompt);
        *slots += w;
    }
}

/* 3. Admit waiting sequences, FCFS, while slots and budget last and the
 * free pages cover the newcomer's whole prompt (plus recomputed outputs) —
 * and for a choice 0 with siblings to fork, their slots and pages — on top
 * of what the running sequences are owed, with the watermark spare. */
static void admit(pass *p) {
    di_scheduler *s = p->s;
    int64_t owed_pages;
    int owed_slots;
    promised(s, &owed_pages, &owed_slots);
    for (int w = 0; w < s->n_waiting && p->budget > 0;) {
        di_choice *c = s->waiting[w];
        if (c->fork_wait || !di_sched_can_run(s, c)) { /* not ready: waits for its fork / its result in flight */
            w++;
            continue;
        }
        int64_t rem = remaining(c);
        int64_t k = rem < s->cfg.chunk_size ? rem : s->cfg.chunk_size;
        if (k > p->budget) k = p->budget;
        if (has_fork_waiters(c) && k > c->req->n_prompt - 1) k = c->req->n_prompt - 1;
        int forks = fork_waiters(c);
        int64_t need = di_pool_geom_pages_for(s->pool->cfg, &s->pool->g, total_tokens(c));
        int64_t need_forks = forks * di_pool_geom_pages_for(s->pool->cfg, &s->pool->g, c->req->n_prompt);
        if (forks && (1 + forks > s->pool->n_slots || need + need_forks > s->pool->n_pages)) {
            /* the choices could never be resident together: each recomputes the prompt instead */
            for (int j = 1; j < c->req->n_choices; j++) c->req->choices[j].fork_wait = 0;
            forks = 0;
            need_forks = 0;
            k = rem < s->cfg.chunk_size ? rem : s->cfg.chunk_size;
            if (k > p->budget) k = p->budget;
        }
        int64_t spare = s->n_running ? s->cfg.watermark_pages : 0;
        /* strict FCFS: when the head does not fit, nobody overtakes it */
        if (di_pool_slots_free(s->pool) - owed_slots < 1 + forks) break;
        if (di_pool_pages_free(s->pool) - owed_pages - spare < need + need_forks) break;
        if ((k = plp_cut(p, c, k)) <= 0) break; /* its first rows need prompt logits this step has no room for */
        int slot = di_pool_slot_acquire(s->pool);
        di_pool_grow(s->pool, slot, k);
        owed_pages += need + need_forks - s->pool->slot_pages[slot];
        owed_slots += forks;
        add_op(p, DI_OP_RESET, slot, -1);
        c->slot = slot;
        c->n_sched = 0;
        c->state = DI_CHOICE_RUNNING;
        memmove(s->waiting + w, s->waiting + w + 1, sizeof *s->waiting * (size_t)(s->n_waiting - w - 1));
        s->n_waiting--;
        insert_sorted(s->running, &s->n_running, c);
        add_item(p, c, (int)k);
    }
}

void di_sched_schedule(di_scheduler *s) {
    s->plan.n_items = s->plan.n_ops = s->plan.n_rows = s->plan.n_samples = s->plan.n_preempted = 0;
    pass p = {.s = s, .budget = s->cfg.max_num_batched_tokens, .plp_budget = s->cfg.prompt_lp_rows};
    for (int i = 0; i < s->n_running; i++) s->running[i]->plan_op = -1;
    schedule_decodes(&p);
    if (s->cfg.spec_n > 0) schedule_drafts(&p);
    schedule_chunks(&p);
    if (!s->plan.n_preempted) admit(&p);
}
