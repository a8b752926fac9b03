/*
 * The confidence logits' online calibration (src/engine/spec_calib.h): Platt scaling per draft
 * position from verified drafts, checked against a double-precision maximum-likelihood fit of the
 * raw outcomes.
 */
#include <math.h>
#include <stdint.h>

#include "engine/spec_calib.h"
#include "test.h"

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}
static double unit(uint64_t *s) { return (double)lcg(s) / 9007199254740992.0; } /* [0, 1) */
static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

enum { N_OUT = 4000 };

/* Unbinned, unregularised logistic regression by Newton's method, in double. */
static void reference_fit(const double *c, const int *y, int n, double *a, double *b) {
    *a = 1.0, *b = 0.0;
    for (int it = 0; it < 50; it++) {
        double ga = 0, gb = 0, haa = 0, hab = 0, hbb = 0;
        for (int i = 0; i < n; i++) {
            double p = sigmoid(*a * c[i] + *b), r = p - y[i], w = p * (1 - p);
            ga += r * c[i], gb += r, haa += w * c[i] * c[i], hab += w * c[i], hbb += w;
        }
        double det = haa * hbb - hab * hab;
        *a -= (hbb * ga - hab * gb) / det;
        *b -= (haa * gb - hab * ga) / det;
    }
}

TEST(spec_calib_matches_the_maximum_likelihood_fit_of_its_outcomes) {
    static di_spec_calib cal;
    static double c[N_OUT];
    static int y[N_OUT];
    uint64_t s = 7;
    /* a head reading too low and too flat: the truth is sigmoid(0.5 c + 1) */
    for (int i = 0; i < N_OUT; i++) {
        c[i] = -4.0 + 8.0 * unit(&s);
        y[i] = unit(&s) < sigmoid(0.5 * c[i] + 1.0);
        float cf = (float)c[i];
        di_spec_calib_add(&cal, &cf, 1, y[i]);
    }
    di_spec_calib_fit(&cal);
    double ra, rb;
    reference_fit(c, y, N_OUT, &ra, &rb);
    CHECK_NEAR(cal.a[0], ra, 0.03); /* bins of 0.5 and the prior's weight of a few outcomes */
    CHECK_NEAR(cal.b[0], rb, 0.03);
    CHECK_NEAR(ra, 0.5, 0.1);
    CHECK_NEAR(rb, 1.0, 0.15);
    for (double x = -4; x <= 4; x += 0.5)
        CHECK_NEAR(di_spec_calib_prob(&cal, 0, (float)x), sigmoid(ra * x + rb), 0.01);
}

TEST(spec_calib_reads_the_head_until_outcomes_move_it) {
    static di_spec_calib cal;
    for (double x = -6; x <= 6; x += 1.5) CHECK_NEAR(di_spec_calib_prob(&cal, 2, (float)x), sigmoid(x), 1e-6);
    di_spec_calib_fit(&cal); /* nothing added: still the head */
    CHECK(!cal.fitted);
    const float conf[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    di_spec_calib_add(&cal, conf, 5, 5); /* one step, all accepted at a reading of 1/2 */
    di_spec_calib_fit(&cal);
    double p = di_spec_calib_prob(&cal, 0, 0.0f);
    CHECK_MSG(p > 0.5 && p < 0.65, "one outcome moved P(accept | c = 0) to %.3f", p);
}

TEST(spec_calib_observes_positions_up_to_the_first_rejection) {
    static di_spec_calib cal;
    const float conf[5] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    di_spec_calib_add(&cal, conf, 5, 1); /* draft 1 accepted, draft 2 rejected, 3..5 unknown */
    CHECK_NEAR(cal.obs[0], 1.0, 0);
    CHECK_NEAR(cal.obs[1], 1.0, 0);
    CHECK_NEAR(cal.obs[2], 0.0, 0);
    double acc1 = 0, rej1 = 0;
    for (int i = 0; i < DI_SPEC_CALIB_BINS; i++) acc1 += cal.acc[1][i], rej1 += cal.rej[1][i];
    CHECK(acc1 == 0 && rej1 == 1);
    di_spec_calib_add(&cal, conf, 3, 3); /* all three accepted: positions 0..2, none past the drafts */
    CHECK_NEAR(cal.obs[2], 1.0, 0);
    CHECK_NEAR(cal.obs[3], 0.0, 0);
    const float none[2] = {NAN, NAN}; /* a drafter without a confidence head records nothing */
    di_spec_calib_add(&cal, none, 2, 2);
    CHECK_NEAR(cal.obs[0], 2.0, 0);
}

TEST(spec_calib_unreached_positions_borrow_the_fit_before_and_old_outcomes_fade) {
    static di_spec_calib cal;
    uint64_t s = 11;
    /* position 0 accepted far more often than its reading says; later positions never reached */
    for (int i = 0; i < 3 * (int)DI_SPEC_CALIB_HORIZON; i++) {
        float c = (float)(-3.0 + 6.0 * unit(&s));
        di_spec_calib_add(&cal, &c, 1, unit(&s) < sigmoid(c + 2.0));
    }
    CHECK_MSG(cal.obs[0] <= DI_SPEC_CALIB_HORIZON, "%.0f outcomes kept at position 0", cal.obs[0]);
    di_spec_calib_fit(&cal);
    CHECK_NEAR(di_spec_calib_prob(&cal, 0, 0.0f), sigmoid(2.0), 0.03);
    for (int j = 1; j < DEEPINFER_MAX_DRAFT; j++)
        CHECK_NEAR(di_spec_calib_prob(&cal, j, 0.0f), di_spec_calib_prob(&cal, 0, 0.0f), 1e-4);
}

/* Through the engine: the demo model's confidence-scheduled run feeds every verified draft's outcome to
 * the calibration, and the fit predicts the acceptance the verifier measured. */
#include "engine/engine_internal.h"

TEST(spec_calib_engine_fit_predicts_the_measured_acceptance) {
    static const char *texts[] = {"In the beginning God created", "And Jesus said unto them,",
                                  "CYNIC, n. A blackguard whose", "The LORD is my shepherd;"};
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data("../../models/deepinfer-demo-v41");
    c.max_model_len = 512;
    c.max_num_seqs = 4;
    c.mtp_varlen = 1;
    /* a fixed table where a verified row costs a tenth of a step and the drafter little: drafts pay at
     * moderate survival, so many are verified whatever this machine's timing */
    static const di_spec_cost flat = {.n = 2, .rows = {1, 1024}, .sec = {1e-3, 1e-3 + 1023 * 1e-4},
                                      .nd = 2, .reqs = {1, 8}, .dsec = {1e-4, 8e-4}};
    const di_engine_options opt = {.spec_cost = &flat};
    deepinfer_engine *e = NULL;
    di_error err = {0};
    CHECK_MSG(di_engine_open_opts(&c, &opt, &e, &err) == DEEPINFER_OK, "%s", err.msg);
    deepinfer_prompt p[4];
    deepinfer_sampling_params sp[4];
    for (int i = 0; i < 4; i++) {
        p[i] = (deepinfer_prompt){.text = texts[i]};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].temperature = 0;
        sp[i].max_tokens = 96;
        sp[i].ignore_eos = 1;
    }
    deepinfer_request_output **out = NULL;
    deepinfer_status st = deepinfer_generate(e, p, 4, sp, 4, &out);
    deepinfer_engine_stats s;
    deepinfer_engine_get_stats(e, &s);
    const di_spec_calib *cal = &e->spec_cost.cal;
    double n = 0, acc = 0, pred = 0;
    for (int i = 0; i < DI_SPEC_CALIB_BINS; i++) {
        double ni = cal->acc[0][i] + cal->rej[0][i];
        if (ni <= 0) continue;
        n += ni, acc += cal->acc[0][i];
        pred += ni * di_spec_calib_prob(cal, 0, (float)(cal->csum[0][i] / ni));
    }
    fprintf(stderr, "    %lld first drafts verified, %.0f outcomes, accepted %.3f, predicted %.3f, fit a %.2f b %.2f\n",
            (long long)s.spec_drafted_at[0], cal->obs[0], n > 0 ? acc / n : 0, n > 0 ? pred / n : 0, cal->a[0],
            cal->b[0]);
    const double obs0 = cal->obs[0];
    const int fitted = cal->fitted;
    if (out) deepinfer_outputs_free(out, 4);
    deepinfer_engine_close(e);
    CHECK(st == DEEPINFER_OK);
    CHECK_MSG(s.spec_drafted_at[0] >= 32, "%lld first drafts verified", (long long)s.spec_drafted_at[0]);
    CHECK_NEAR(obs0, (double)s.spec_drafted_at[0], 0); /* every verified draft, none twice */
    CHECK(fitted);
    CHECK_NEAR(pred / n, acc / n, 0.03);
}
