/*
 * The engine's acceptance test (docs/determinism.md §6 T1/T2): 64 requests of
 * mixed lengths and mixed sampling parameters, run together, give outputs
 * bitwise identical (tokens, logprobs, top logprobs) to each run alone —
 * also with the state pools shrunk until preemption happens, with prefill
 * chunks of 16 and 512, and with async scheduling.
 */
#include "engine/engine_util.h"

#define NREQ DI_TEST_SIZE(64, 24) /* 24 in the sanitizer build (test.h) */

typedef struct workload {
    int32_t ids[NREQ * 320];
    deepinfer_prompt prompts[NREQ];
    deepinfer_sampling_params sp[NREQ];
    deepinfer_request_output **alone;
} workload;

static workload *make_workload(void) {
    workload *w = calloc(1, sizeof *w);
    eng_workload(NREQ, 1024, w->ids, w->prompts, w->sp);
    return w;
}

/* Each request alone: one at a time through one engine. */
static int run_alone(workload *w) {
    eng_opts o = {.chunk = 64};
    deepinfer_engine *e = eng_open(&o);
    if (!e) return 0;
    w->alone = calloc(NREQ, sizeof *w->alone);
    for (int i = 0; i < NREQ; i++) {
        deepinfer_request_output **out = NULL;
        if (deepinfer_generate(e, &w->prompts[i], 1, &w->sp[i], 1, &out)) return 0;
        w->alone[i] = out[0];
        free(out);
        if (w->alone[i]->status) {
            fprintf(stderr, "    request %d: %s\n", i, w->alone[i]->error);
            return 0;
        }
    }
    deepinfer_engine_close(e);
    return 1;
}

static int run_together(workload *w, const eng_opts *o, const char *what, deepinfer_engine_stats *st) {
    deepinfer_engine *e = eng_open(o);
    if (!e) return 0;
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, w->prompts, NREQ, w->sp, NREQ, &out)) {
        fprintf(stderr, "    %s: %s\n", what, deepinfer_engine_last_error(e));
        return 0;
    }
    deepinfer_engine_get_stats(e, st);
    int same = 1;
    long tokens = 0;
    for (int i = 0; i < NREQ; i++) {
        same &= eng_same_output(w->alone[i], out[i], i);
        for (size_t j = 0; j < out[i]->n_choices; j++) tokens += (long)out[i]->choices[j].n_tokens;
    }
    fprintf(stderr, "    %-36s %s: %ld tokens, %lld steps, %lld rows, %lld preemptions, peak %lld/%lld pages, %.2fs\n",
            what, same ? "identical" : "DIFFERENT", tokens, (long long)st->steps,
            (long long)(st->prefill_rows + st->decode_rows), (long long)st->preemptions, (long long)st->pages_peak,
            (long long)st->num_pages, st->busy_s);
    deepinfer_outputs_free(out, NREQ);
    deepinfer_engine_close(e);
    return same;
}

static void free_workload(workload *w) {
    if (w->alone) deepinfer_outputs_free(w->alone, NREQ);
    free(w);
}

TEST(engine_64_requests_together_equal_alone) {
    workload *w = make_workload();
    CHECK(w && run_alone(w));
    deepinfer_engine_stats st;
    int ok = 1;
    eng_opts big = {.chunk = 64, .max_seqs = 32};
    ok &= run_together(w, &big, "together (32 slots, chunk 64)", &st);
    eng_opts c16 = {.chunk = 16, .max_seqs = 64};
    ok &= run_together(w, &c16, "together, chunk 16", &st);
    eng_opts c512 = {.chunk = 512, .max_seqs = 64};
    ok &= run_together(w, &c512, "together, chunk 512", &st);
    eng_opts async = {.chunk = 64, .max_seqs = 32, .async = 1};
    ok &= run_together(w, &async, "together, async scheduling", &st);
    /* 16-row pages, 48 of them: a 300-token prompt alone needs ~25 */
    eng_opts tight = {.chunk = 64, .max_seqs = 32, .page_rows = 16, .pages = 48};
    ok &= run_together(w, &tight, "together, pool shrunk to 48 pages", &st);
    CHECK_MSG(st.preemptions > 0, "the shrunk pool caused no preemption");
    long long pre = st.preemptions;
    eng_opts tight_async = {.chunk = 16, .max_seqs = 32, .page_rows = 16, .pages = 48, .async = 1};
    ok &= run_together(w, &tight_async, "shrunk pool, chunk 16, async", &st);
    CHECK_MSG(st.preemptions > 0, "the shrunk pool caused no preemption (async)");
    CHECK(ok);
    fprintf(stderr, "    preemptions with the shrunk pool: %lld (sync), %lld (async, chunk 16)\n", pre,
            (long long)st.preemptions);
    free_workload(w);
}
