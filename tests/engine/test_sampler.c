/* Deterministic sampler: Philox known answers, statistics, filters, penalties. */
#include <math.h>
#include <stdlib.h>

#include "engine/philox.h"
#include "engine/sampler.h"
#include "test.h"

TEST(philox_known_answers) {
    /* Known-answer vectors of Philox4x32-10 (Random123 kat_vectors). */
    const uint32_t ctr[3][4] = {{0, 0, 0, 0}, {~0u, ~0u, ~0u, ~0u}, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}};
    const uint32_t key[3][2] = {{0, 0}, {~0u, ~0u}, {0xa4093822, 0x299f31d0}};
    const uint32_t want[3][4] = {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
                                 {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
                                 {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        di_philox4x32_10(ctr[i], key[i], out);
        for (int j = 0; j < 4; j++) CHECK_MSG(out[j] == want[i][j], "vector %d word %d: %08x", i, j, out[j]);
    }
}

TEST(deterministic_log_accuracy) {
    double worst = 0;
    for (int i = 1; i < 300000; i++) {
        float x = (float)i * (1.0f / 300000.0f) * (float)(1 + i % 9);
        double l = log((double)x);
        double e = fabs((double)di_log_det(x) - l) / fmax(1.0, fabs(l)); /* relative for |log| > 1 */
        if (e > worst) worst = e;
    }
    CHECK_MSG(worst < 3.6e-7, "max error %g (3 ulp)", worst);
    CHECK(isfinite(di_gumbel_from_bits(0)) && isfinite(di_gumbel_from_bits(~0u)));
    CHECK(di_gumbel_from_bits(0) < -2.0f && di_gumbel_from_bits(~0u) > 15.0f);
}

TEST(gumbel_row_matches_point_lookup) {
    float row[37];
    di_gumbel_row(42, 3, 1000, DI_NOISE_TARGET, 37, row);
    for (uint32_t v = 0; v < 37; v++) CHECK(row[v] == di_gumbel_at(42, 3, 1000, DI_NOISE_TARGET, v));
    CHECK(di_gumbel_at(42, 3, 1000, DI_NOISE_DRAFT, 5) != row[5]);
    CHECK(di_gumbel_at(42, 4, 1000, DI_NOISE_TARGET, 5) != row[5]);
    CHECK(di_gumbel_at(43, 3, 1000, DI_NOISE_TARGET, 5) != row[5]);
}

static di_sample_context ctx_at(uint64_t seed, uint64_t pos) {
    di_sample_context c;
    memset(&c, 0, sizeof c);
    c.seed = seed;
    c.position = pos;
    c.eos_id = -1;
    return c;
}

/* Chi-square of sampled frequencies against expected probabilities. */
static double chi2(const long *counts, const double *expect, int k, long total) {
    double x = 0;
    for (int i = 0; i < k; i++) {
        double e = expect[i] * (double)total;
        if (e > 0) x += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
    }
    return x;
}

static void softmax(const float *z, const int *keep, int k, double t, double *p) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < k; i++)
        if (keep[i] && z[i] / t > m) m = z[i] / t;
    for (int i = 0; i < k; i++) s += keep[i] ? exp(z[i] / t - m) : 0;
    for (int i = 0; i < k; i++) p[i] = keep[i] ? exp(z[i] / t - m) / s : 0;
}

TEST(sampled_frequencies_match_softmax_chi_square) {
    enum { V = 8 };
    const float logits[V] = {1.5f, 0.2f, -1.0f, 2.0f, 0.0f, 0.7f, -0.5f, 1.9f};
    di_sampler_scratch s;
    CHECK(di_sampler_scratch_init(&s, V, NULL) == DEEPINFER_OK);
    struct {
        float t, top_p, min_p;
        int top_k;
    } cases[] = {{1.0f, 1.0f, 0.0f, 0}, {0.7f, 1.0f, 0.0f, 0}, {1.0f, 1.0f, 0.0f, 3}, {1.0f, 0.8f, 0.0f, 0}, {1.3f, 1.0f, 0.3f, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        di_sampling_params p;
        di_sampling_params_default(&p);
        p.temperature = cases[c].t;
        p.top_k = cases[c].top_k;
        p.top_p = cases[c].top_p;
        p.min_p = cases[c].min_p;
        int keep[V];
        for (int i = 0; i < V; i++) keep[i] = 1;
        double prob[V];
        softmax(logits, keep, V, p.temperature, prob);
        if (p.top_k) { /* keep the 3 largest: ids 3, 7, 0 */
            for (int i = 0; i < V; i++) keep[i] = (i == 3 || i == 7 || i == 0);
        }
        if (p.top_p < 1) { /* smallest prefix by prob reaching 0.8 */
            int order[V] = {3, 7, 0, 5, 1, 4, 6, 2};
            double mass = 0;
            for (int i = 0; i < V; i++) keep[i] = 0;
            for (int i = 0; i < V && mass < 0.8; i++) {
                keep[order[i]] = 1;
                mass += prob[order[i]];
            }
        }
        if (p.min_p > 0) {
            double pmax = 0;
            for (int i = 0; i < V; i++) pmax = fmax(pmax, prob[i]);
            for (int i = 0; i < V; i++) keep[i] = prob[i] >= p.min_p * pmax;
        }
        softmax(logits, keep, V, p.temperature, prob);
        long counts[V] = {0};
        const long N = 200000;
        for (long i = 0; i < N; i++) {
            di_sample_context cx = ctx_at(777, (uint64_t)i);
            di_sample_result r;
            CHECK(di_sample_row(logits, &p, &cx, &s, &r, NULL) == DEEPINFER_OK);
            counts[r.token]++;
        }
        for (int i = 0; i < V; i++) CHECK_MSG(keep[i] || counts[i] == 0, "case %zu: filtered id %d sampled", c, i);
        int df = -1;
        for (int i = 0; i < V; i++) df += keep[i];
        double x = chi2(counts, prob, V, N);
        /* 99.99% quantiles of chi-square for df 1..7 */
        const double crit[8] = {0, 15.1, 18.4, 21.1, 23.5, 25.7, 27.9, 29.9};
        CHECK_MSG(x < crit[df], "case %zu: chi2 %.2f with df %d", c, x, df);
    }
    di_sampler_scratch_free(&s);
}

TEST(same_seed_same_token_independent_of_neighbours) {
    enum { V = 5000 };
    float *rows = malloc(sizeof(float) * V * 3);
    CHECK(rows);
    srand(5);
    for (int i = 0; i < V * 3; i++) rows[i] = (float)(rand() % 1000) / 100.0f;
    di_sampler_scratch s;
    CHECK(di_sampler_scratch_init(&s, V, NULL) == DEEPINFER_OK);
    di_sampling_params p;
    di_sampling_params_default(&p);
    p.top_p = 0.9f;
    di_sample_context c = ctx_at(1234, 77);
    di_sample_result a, b, other;
    CHECK(di_sample_row(rows, &p, &c, &s, &a, NULL) == DEEPINFER_OK);
    /* sample other rows with other params in between: no state may leak */
    di_sampling_params q = p;
    q.top_k = 3;
    q.repetition_penalty = 1.3f;
    int32_t hist[3] = {1, 2, 3};
    di_sample_context c2 = ctx_at(99, 5);
    c2.output_ids = hist;
    c2.n_output = 3;
    CHECK(di_sample_row(rows + V, &q, &c2, &s, &other, NULL) == DEEPINFER_OK);
    CHECK(di_sample_row(rows, &p, &c, &s, &b, NULL) == DEEPINFER_OK);
    CHECK_EQ_INT(a.token, b.token);
    /* a different seed or position changes the stream */
    int differ = 0;
    for (uint64_t pos = 0; pos < 20; pos++) {
        di_sample_context c3 = ctx_at(1234, pos), c4 = ctx_at(1235, pos);
        di_sample_result r3, r4;
        CHECK(di_sample_row(rows + 2 * V, &p, &c3, &s, &r3, NULL) == DEEPINFER_OK);
        CHECK(di_sample_row(rows + 2 * V, &p, &c4, &s, &r4, NULL) == DEEPINFER_OK);
        differ += r3.token != r4.token;
    }
    CHECK(differ > 10);
    di_sampler_scratch_free(&s);
    free(rows);
}

TEST(greedy_ties_go_to_lowest_id_and_logprobs) {
    const float logits[6] = {1.0f, 3.0f, 3.0f, -INFINITY, 2.0f, 3.0f};
    di_sampler_scratch s;
    CHECK(di_sampler_scratch_init(&s, 6, NULL) == DEEPINFER_OK);
    di_sampling_params p;
    di_sampling_params_default(&p);
    p.temperature = 0.0f;
    p.logprobs = 4;
    di_sample_context c = ctx_at(0, 0);
    di_sample_result r;
    CHECK(di_sample_row(logits, &p, &c, &s, &r, NULL) == DEEPINFER_OK);
    CHECK_EQ_INT(r.token, 1);
    double lse = log(exp(1.0) + 3 * exp(3.0) + exp(2.0));
    CHECK_NEAR(r.logprob, 3.0 - lse, 1e-6);
    CHECK_EQ_INT(r.n_top, 4);
    CHECK_EQ_INT(r.top_ids[0], 1);
    CHECK_EQ_INT(r.top_ids[1], 2);
    CHECK_EQ_INT(r.top_ids[2], 5);
    CHECK_EQ_INT(r.top_ids[3], 4);
    CHECK_NEAR(r.top_logprobs[3], 2.0 - lse, 1e-6);
    /* Gumbel-max ties: equal scores can only come from equal z and equal noise,
     * so test the rule through top_k with tied logits instead. */
    p.temperature = 1.0f;
    p.top_k = 2;
    long cnt[6] = {0};
    for (uint64_t i = 0; i < 2000; i++) {
        di_sample_context ci = ctx_at(9, i);
        CHECK(di_sample_row(logits, &p, &ci, &s, &r, NULL) == DEEPINFER_OK);
        cnt[r.token]++;
    }
    CHECK(cnt[1] > 0 && cnt[2] > 0 && cnt[5] == 0); /* top-2 of three tied ids: the two lowest */
    di_sampler_scratch_free(&s);
}

TEST(penalties_min_tokens_and_masks) {
    enum { V = 6 };
    const float logits[V] = {2.0f, 1.0f, -1.0f, 0.5f, 1.9f, 0.0f};
    di_sampler_scratch s;
    CHECK(di_sampler_scratch_init(&s, V, NULL) == DEEPINFER_OK);
    di_sampling_params p;
    di_sampling_params_default(&p);
    p.temperature = 0.0f;
    di_sample_context c = ctx_at(0, 0);
    di_sample_result r;
    /* repetition penalty divides positive logits of seen tokens (prompt or output) */
    int32_t prompt[1] = {0};
    c.prompt_ids = prompt;
    c.n_prompt = 1;
    p.repetition_penalty = 1.1f; /* 2.0/1.1 = 1.82 < 1.9 */
    CHECK(di_sample_row(logits, &p, &c, &s, &r, NULL) == DEEPINFER_OK);
    CHECK_EQ_INT(r.token, 4);
    /* frequency: output token 4 seen twice, -0.1 each -> 1.7 < 2.0 */
    p.repetition_penalty = 1.0f;
    int32_t out[2] = {4, 4};
    c.output_ids = out;
    c.n_output = 2;
    p.frequency_penalty = 0.1f;
    CHECK(di_sample_row(logits, &p, &c, &s, &r, NULL) == DEEPINFER_OK);
    CHECK_EQ_INT(r.token, 0);
    /* presence on token 0 is not applied (only output tokens): still 0 */
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 1.0f;
    CHECK(di_sample_row(logits, &p, &c, &s, &r, NULL) == DEEPINFER_OK);
    CHECK_EQ_INT(r.token, 0);
    /* min_tokens masks EOS (id 0 here) until enough output exists */
    p.presence_penalty = 0.0f;
    p.max_tokens = 10;
    p.min_tokens = 3;
    c.eos_id = 0;
    CHECK(di_sample_row(logits, &p, &c, &s, &r, NULL) == DEEPINFER_OK);
    CHECK_EQ_INT(r.token, 4);
    c.n_output = 2;
    p.min_tokens = 2;
    CHECK(di_sample_row(logits, &p, &c, &s, &r, NULL) == DEEPINFER_OK);
    CHECK_EQ_INT(r.token, 0);
    /* allow mask: only ids 2 and 5 */
    uint32_t mask = (1u << 2) | (1u << 5);
    c.allow_mask = &mask;
    CHECK(di_sample_row(logits, &p, &c, &s, &r, NULL) == DEEPINFER_OK);
    CHECK_EQ_INT(r.token, 5);
    mask = 0;
    di_error e = {0};
    CHECK(di_sample_row(logits, &p, &c, &s, &r, &e) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(e.msg, "no token can be sampled"));
    di_sampler_scratch_free(&s);
}

TEST(top_p_matches_brute_force_on_random_rows) {
    enum { V = 300 };
    float logits[V];
    di_sampler_scratch s;
    CHECK(di_sampler_scratch_init(&s, V, NULL) == DEEPINFER_OK);
    srand(11);
    for (int trial = 0; trial < 50; trial++) {
        for (int i = 0; i < V; i++) logits[i] = (float)(rand() % 200) / 40.0f; /* many ties */
        di_sampling_params p;
        di_sampling_params_default(&p);
        p.top_p = 0.05f + 0.9f * (float)(rand() % 100) / 100.0f;
        p.temperature = 0.8f;
        /* brute force allowed set: sort ids by (z desc, id asc) */
        int order[V];
        for (int i = 0; i < V; i++) order[i] = i;
        for (int i = 0; i < V; i++)
            for (int j = i + 1; j < V; j++) {
                int a = order[i], b = order[j];
                if (logits[b] > logits[a] || (logits[b] == logits[a] && b < a)) {
                    order[i] = b;
                    order[j] = a;
                }
            }
        double zmax = logits[order[0]] / 0.8, tot = 0, mass = 0;
        for (int i = 0; i < V; i++) tot += exp((double)(logits[i] / 0.8f) - zmax);
        int keep[V] = {0};
        for (int i = 0; i < V; i++) {
            keep[order[i]] = 1;
            mass += exp((double)(logits[order[i]] / 0.8f) - zmax);
            if (mass >= p.top_p * tot) break;
        }
        for (uint64_t pos = 0; pos < 200; pos++) {
            di_sample_context c = ctx_at(3, pos);
            di_sample_result r;
            CHECK(di_sample_row(logits, &p, &c, &s, &r, NULL) == DEEPINFER_OK);
            CHECK_MSG(keep[r.token], "trial %d: id %d outside the top-p set", trial, r.token);
        }
    }
    di_sampler_scratch_free(&s);
}

TEST(invalid_params_name_the_field) {
    di_sampling_params p;
    di_error e;
#define BAD(stmt, field)                                                                        \
    do {                                                                                        \
        di_sampling_params_default(&p);                                                         \
        stmt;                                                                                   \
        memset(&e, 0, sizeof e);                                                                \
        CHECK(di_sampling_params_validate(&p, 100, &e) == DEEPINFER_ERR_INVALID_ARGUMENT);      \
        CHECK_MSG(strstr(e.msg, field), "message '%s' should name %s", e.msg, field);           \
    } while (0)
    BAD(p.temperature = -1, "temperature");
    BAD(p.temperature = NAN, "temperature");
    BAD(p.top_p = 0, "top_p");
    BAD(p.top_p = 1.5f, "top_p");
    BAD(p.top_k = -5, "top_k");
    BAD(p.min_p = 2, "min_p");
    BAD(p.repetition_penalty = 0, "repetition_penalty");
    BAD(p.presence_penalty = 3, "presence_penalty");
    BAD(p.frequency_penalty = -3, "frequency_penalty");
    BAD(p.max_tokens = 0, "max_tokens");
    BAD(p.min_tokens = 50, "min_tokens");
    BAD(p.n = 0, "n must");
    BAD(p.logprobs = 99, "logprobs");
    BAD((p.n_stop_ids = 1, p.stop_ids[0] = 100), "stop_token_ids[0]");
    BAD((p.n_stop = 1, p.stop[0] = ""), "stop[0]");
    BAD((p.so_schema_type = "yaml", p.so_schema = "x"), "so_args.schema_type");
#undef BAD
    di_sampling_params_default(&p);
    CHECK(di_sampling_params_validate(&p, 100, NULL) == DEEPINFER_OK);
}
