/*
 * Lanes (src/model/lanes.h): a V4.1 step split into lanes of whole
 * sequences, each run on its own workspace, gives logits and final hidden
 * states bitwise identical to the op-parallel path, for any lane count.
 * Nine sequences of different prompt lengths decode four steps of 1-3 rows
 * each (draft-verify shaped pieces) with 1 (no split), 2, 3, 5 and 64 lanes;
 * V4.1 and V4 golden checkpoints.
 */
#include <stdlib.h>

#include "model/dsv41_internal.h"
#include "model/dsv4_internal.h"
#include "test.h"

#define NS 9
#define STEPS 4

/* One model behind the calls the test needs. */
typedef struct model_ops {
    void *m;
    const di_model_config *cfg;
    deepinfer_status (*seq_new)(const void *m, di_seq_state **out, di_error *err);
    deepinfer_status (*forward)(void *m, const di_v4_batch *b, di_error *err);
    void (*set_lanes)(void *m, int n);
} model_ops;

static deepinfer_status seq41(const void *m, di_seq_state **o, di_error *e) { return di_v41_seq_new(m, o, e); }
static deepinfer_status fwd41(void *m, const di_v4_batch *b, di_error *e) { return di_v41_forward(m, b, e); }
static void lanes41(void *m, int n) { di_v41_set_lanes(m, n); }
static deepinfer_status seq4(const void *m, di_seq_state **o, di_error *e) { return di_v4_seq_new(m, o, e); }
static deepinfer_status fwd4(void *m, const di_v4_batch *b, di_error *e) { return di_v4_forward(m, b, e); }
static void lanes4(void *m, int n) { di_v4_set_lanes(m, n); }

/* All logits and hidden rows of the decode steps with at most `lanes` lanes. */
static int run(const model_ops *mo, int lanes, float *logits, uint16_t *hidden) {
    const di_model_config *c = mo->cfg;
    int V = (int)c->vocab_size, hcd = (int)(c->hc_mult * c->hidden_size);
    di_seq_state *seq[NS];
    int32_t tok[NS * 64];
    int64_t pos[NS * 64];
    di_seq_state *rs[NS * 64];
    int rows[NS * 64];
    di_error err = {0};
    int ok = 1;
    for (int s = 0; s < NS; s++)
        if (mo->seq_new(mo->m, &seq[s], &err)) return 0;
    mo->set_lanes(mo->m, lanes);
    int n = 0; /* prefill: every prompt in one step (pieces > 16 rows: op-parallel) */
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < 20 + 7 * s; i++, n++) {
            tok[n] = 3 + (i * 31 + s * 17) % (V - 3);
            pos[n] = i;
            rs[n] = seq[s];
        }
    di_v4_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = rs};
    if (mo->forward(mo->m, &b, &err)) ok = 0;
    size_t lo = 0, ho = 0;
    for (int step = 0; ok && step < STEPS; step++) {
        n = 0;
        for (int s = 0; s < NS; s++)
            for (int k = 0; k < 1 + (s + step) % 3; k++, n++) {
                tok[n] = 3 + (step * 53 + s * 11 + k) % (V - 3);
                pos[n] = seq[s]->n_tokens + k;
                rs[n] = seq[s];
                rows[n] = n;
            }
        b = (di_v4_batch){.n = n, .tokens = tok, .pos = pos, .seq = rs, .n_logits = n, .logit_rows = rows,
                          .logits = logits + lo, .hidden = hidden + ho};
        if (mo->forward(mo->m, &b, &err)) ok = 0;
        lo += (size_t)n * V;
        ho += (size_t)n * hcd;
    }
    if (!ok) di_test_fail(__FILE__, __LINE__, "forward with %d lanes: %s", lanes, err.msg);
    for (int s = 0; s < NS; s++) di_seq_destroy(seq[s]);
    return ok;
}

/* Every lane count against the op-parallel path, bitwise. */
static void check_lanes(const model_ops *mo) {
    const di_model_config *c = mo->cfg;
    size_t nl = (size_t)NS * 3 * STEPS * (size_t)c->vocab_size, nh = (size_t)NS * 3 * STEPS * (size_t)(c->hc_mult * c->hidden_size);
    float *ref = calloc(nl, 4), *got = calloc(nl, 4);
    uint16_t *href = calloc(nh, 2), *hgot = calloc(nh, 2);
    int ok = ref && got && href && hgot && run(mo, 1, ref, href);
    CHECK_MSG(ok, "reference run");
    const int lanes[] = {2, 3, 5, 64};
    for (size_t i = 0; ok && i < sizeof lanes / sizeof lanes[0]; i++) {
        memset(got, 0, nl * 4);
        memset(hgot, 0, nh * 2);
        ok = run(mo, lanes[i], got, hgot);
        CHECK_MSG(ok, "run with %d lanes", lanes[i]);
        CHECK_MSG(!memcmp(ref, got, nl * 4), "logits with %d lanes differ from the op-parallel path", lanes[i]);
        CHECK_MSG(!memcmp(href, hgot, nh * 2), "hidden rows with %d lanes differ from the op-parallel path", lanes[i]);
    }
    free(ref);
    free(got);
    free(href);
    free(hgot);
}

TEST(v41_lanes_equal_op_parallel_bitwise) {
    char hash[4096];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data("golden/v41-tiny-a"));
    di_v4_options opt = {.engram_hash = hash};
    di_v41_model *m = NULL;
    di_error err = {0};
    if (di_v41_load(di_test_data("golden/v41-tiny-a"), &opt, &m, &err)) {
        di_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return;
    }
    model_ops mo = {m, di_v41_config(m), seq41, fwd41, lanes41};
    check_lanes(&mo);
    di_v41_free(m);
}

TEST(v4_lanes_equal_op_parallel_bitwise) {
    di_v4_model *m = NULL;
    di_error err = {0};
    if (di_v4_load(di_test_data("golden/v4-tiny-a"), NULL, &m, &err)) {
        di_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return;
    }
    model_ops mo = {m, di_v4_config(m), seq4, fwd4, lanes4};
    check_lanes(&mo);
    di_v4_free(m);
}
