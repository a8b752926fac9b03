/*
 * Streaming with async scheduling: the caller steps the engine itself and
 * takes every request the moment it is reported finished. With async
 * scheduling a finished choice still has a row in the step in flight, which
 * writes into the request's output arrays, so deepinfer_take_output finishes
 * that step before it hands the request over (engine.c drain_for), and the
 * updates of the finished step stay visible to the next read. The outputs
 * must equal deepinfer_generate's, and every request must be reported
 * finished exactly once (ASan checks the hand-over).
 */
#include "engine/engine_util.h"

#define NSTREAM 24

static deepinfer_request_output **generate_all(const eng_opts *o, const deepinfer_prompt *pr,
                                               const deepinfer_sampling_params *sp) {
    deepinfer_engine *e = eng_open(o);
    if (!e) return NULL;
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, pr, NSTREAM, sp, NSTREAM, &out)) out = NULL;
    deepinfer_engine_close(e);
    return out;
}

/* Steps the engine; takes each request when it is first reported finished. */
static int stream_all(const eng_opts *o, const deepinfer_prompt *pr, const deepinfer_sampling_params *sp,
                      deepinfer_request_output **out, int *taken_early) {
    deepinfer_engine *e = eng_open(o);
    if (!e) return 0;
    uint64_t first = 0, id;
    int ok = 1;
    for (int i = 0; i < NSTREAM && ok; i++) {
        ok = deepinfer_add_request(e, &pr[i], &sp[i], &id) == DEEPINFER_OK;
        if (!i) first = id;
    }
    *taken_early = 0;
    while (ok && deepinfer_has_unfinished(e)) {
        ok = deepinfer_step(e, NULL) == DEEPINFER_OK;
        const deepinfer_request_output *const *u;
        size_t nu;
        deepinfer_read_outputs(e, &u, &nu);
        uint64_t fin[NSTREAM];
        int nf = 0;
        for (size_t i = 0; i < nu; i++)
            if (u[i]->finished && nf < NSTREAM) fin[nf++] = u[i]->request_id; /* copied: taking changes the list */
        for (int i = 0; i < nf && ok; i++) {
            uint64_t k = fin[i] - first;
            ok = k < NSTREAM && !out[k] && deepinfer_take_output(e, fin[i], &out[k]) == DEEPINFER_OK;
            *taken_early += ok && deepinfer_has_unfinished(e);
        }
    }
    for (int i = 0; i < NSTREAM && ok; i++)
        if (!out[i]) {
            fprintf(stderr, "    request %d finished without being reported\n", i);
            ok = 0;
        }
    deepinfer_engine_close(e);
    return ok;
}

TEST(engine_async_stream_take_at_once_equals_generate) {
    static int32_t ids[NSTREAM * 320];
    deepinfer_prompt pr[NSTREAM];
    deepinfer_sampling_params sp[NSTREAM];
    eng_workload(NSTREAM, 1024, ids, pr, sp);
    for (int async = 0; async < 2; async++) {
        eng_opts o = {.chunk = 64, .max_seqs = NSTREAM, .async = async};
        deepinfer_request_output **ref = generate_all(&o, pr, sp);
        CHECK(ref != NULL);
        if (!ref) return;
        deepinfer_request_output *got[NSTREAM] = {0};
        int early = 0;
        int ok = stream_all(&o, pr, sp, got, &early);
        CHECK(ok);
        int same = ok;
        for (int i = 0; ok && i < NSTREAM; i++) same &= eng_same_output(ref[i], got[i], i);
        fprintf(stderr, "    async %d: streamed %s generate; %d requests taken while others ran\n", async,
                same ? "==" : "DIFFERS FROM", early);
        CHECK_MSG(same, "async %d: streamed outputs differ from deepinfer_generate's", async);
        CHECK_MSG(early > 0, "async %d: no request was taken while the engine still ran", async);
        for (int i = 0; i < NSTREAM; i++) deepinfer_output_free(got[i]);
        deepinfer_outputs_free(ref, NSTREAM);
    }
}
