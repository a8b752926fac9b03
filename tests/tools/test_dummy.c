/*
 * Dummy models (tools/dummy/dummy.h) from the golden tiny configs: the reduced
 * config validates, the generated checkpoint written as sharded files
 * (di_dummy_write_checkpoint) opens with di_st_open and holds the same
 * bytes, and the model loads through the normal loader and scores one
 * prefill + one decode step on the CPU: finite logits of the measured
 * spread, the greedy input its row's argmax, and the same bits with the
 * prompt in chunks and the decode input teacher-forced.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/dsv41.h"
#include "model/dsv4.h"
#include "dummy/dummy.h"
#include "score/score.h"
#include "model/tensor_spec.h"
#include "test.h"

/* The generated checkpoint written as files (several shards) opens with
 * di_st_open and holds the same tensors, in the same order, with the same
 * bytes; the files are removed again. */
static void same_as_file(const di_safetensors *st, const di_model_config *cfg, const char *dir) {
    di_error err = {0};
    uint64_t total = di_st_get_totals(st)->total_bytes;
    CHECK_MSG(di_dummy_write_checkpoint(cfg, 7, dir, total / 3 + 1, &err) == DEEPINFER_OK, "%s", err.msg);
    di_safetensors *ft = NULL;
    CHECK_MSG(di_st_open(dir, &ft, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(di_st_shard_count(ft) >= 3);
    CHECK_EQ_INT((int)di_st_count(ft), (int)di_st_count(st));
    CHECK(di_st_get_totals(ft)->total_bytes == total);
    CHECK(di_st_index_total_size(ft) == (int64_t)total);
    size_t cap = 0, bad = 0;
    unsigned char *a = NULL, *b = NULL;
    for (size_t i = 0; i < di_st_count(st); i++) {
        const di_tensor *g = di_st_at(st, i), *f = di_st_find(ft, g->name);
        CHECK_MSG(f && f->dtype == g->dtype && f->nbytes == g->nbytes && f->ndim == g->ndim, "tensor %s", g->name);
        if (!f) continue;
        if (g->nbytes > cap) {
            cap = (size_t)g->nbytes;
            free(a), free(b);
            a = malloc(cap), b = malloc(cap);
        }
        CHECK(a && b);
        CHECK(di_st_read(g, 0, a, (size_t)g->nbytes, &err) == DEEPINFER_OK);
        CHECK(di_st_read(f, 0, b, (size_t)f->nbytes, &err) == DEEPINFER_OK);
        bad += memcmp(a, b, (size_t)g->nbytes) != 0;
    }
    CHECK_MSG(bad == 0, "%zu tensors differ between the generated handle and its files", bad);
    free(a), free(b);
    char p[600];
    for (size_t j = 0; j < di_st_shard_count(ft); j++) unlink(di_st_shard(ft, j)->path);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    unlink(p);
    di_st_close(ft);
}

static void run_one(const char *golden, int layers, int v41, const double want_std[2]) {
    char dir[] = "/tmp/di-dummy-test-XXXXXX";
    CHECK(mkdtemp(dir));
    char cfgp[512];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", di_test_data(golden));
    di_error err = {0};
    di_dummy_info info;
    CHECK_MSG(di_dummy_write_dir(cfgp, layers, dir, &info, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(info.n_layers == layers);
    di_model_config cfg;
    CHECK_MSG(di_config_load(dir, &cfg, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(cfg.n_layers == layers);
    di_safetensors *st = NULL;
    CHECK_MSG(di_dummy_weights(&cfg, 7, &st, &err) == DEEPINFER_OK, "%s", err.msg);
    same_as_file(st, &cfg, dir);
    di_weight_spec *spec = NULL;
    CHECK(di_spec_build(&cfg, &spec, &err) == DEEPINFER_OK);
    CHECK_MSG(di_spec_check(spec, st, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
    di_spec_free(spec);

    di_v4_options opt = {.weights = st, .max_context = 256};
    di_v4_model *m4 = NULL;
    di_v41_model *m41 = NULL;
    di_score_model sm;
    if (v41) {
        CHECK_MSG(di_v41_load(dir, &opt, &m41, &err) == DEEPINFER_OK, "%s", err.msg);
        sm = di_score_model_v41(m41);
    } else {
        CHECK_MSG(di_v4_load(dir, &opt, &m4, &err) == DEEPINFER_OK, "%s", err.msg);
        sm = di_score_model_v4(m4);
    }
    int V = (int)cfg.vocab_size, n = 40;
    int32_t prompt[40];
    for (int i = 0; i < n; i++) prompt[i] = 3 + (i * 37) % (V - 20);
    di_score_req req = {.prompt = prompt, .n_prompt = n, .steps = 1};
    di_score_result res = {0};
    CHECK_MSG(di_score_run(&sm, &req, &res, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(res.n_rows == 2);
    int finite = 1;
    for (size_t i = 0; i < (size_t)res.n_rows * (size_t)V; i++) finite &= isfinite(res.logits[i]);
    CHECK(finite);
    /* the logits carry the model, not a constant: each row's standard deviation within a factor 2
     * of the value measured for these weights (seed 7) */
    for (int r = 0; r < res.n_rows; r++) {
        const float *row = res.logits + (size_t)r * V;
        double s1 = 0, s2 = 0;
        int am = 0;
        for (int i = 0; i < V; i++) s1 += row[i], s2 += (double)row[i] * row[i], am = row[i] > row[am] ? i : am;
        double sd = sqrt(fmax(s2 / V - (s1 / V) * (s1 / V), 0));
        fprintf(stderr, "    %s row %d: logit std %.4f, argmax %d\n", golden, r, sd, am);
        CHECK_MSG(sd >= want_std[r] / 2 && sd <= want_std[r] * 2, "row %d: logit std %.4f, measured %.4f", r, sd, want_std[r]);
        CHECK_EQ_INT(res.argmax[r], am); /* the greedy step fed the row's argmax */
    }
    /* the same scores with the prompt in chunks of 7 and the decode input teacher-forced: bit for bit */
    di_score_req rc = {.prompt = prompt, .n_prompt = n, .force_ids = res.argmax, .n_force = 1, .chunk = 7};
    di_score_result res2 = {0};
    CHECK_MSG(di_score_run(&sm, &rc, &res2, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK_EQ_INT(res2.n_rows, 2);
    CHECK_MSG(!memcmp(res.logits, res2.logits, sizeof(float) * 2 * (size_t)V), "chunked / teacher-forced scores differ");
    di_score_result_free(&res2);
    di_score_result_free(&res);
    di_v4_free(m4);
    di_v41_free(m41);
    di_st_close(st);
    char p[600];
    const char *files[] = {"config.json", "engram_token_map.json", "engram_hash.json"};
    for (int i = 0; i < 3; i++) snprintf(p, sizeof p, "%s/%s", dir, files[i]), unlink(p);
    rmdir(dir);
}

/* logit standard deviation of the prompt's last row and the decode row, as measured */
TEST(dummy_v4_from_golden_config_loads_and_scores) { run_one("golden/v4-tiny-a", 4, 0, (const double[2]){1.014, 0.984}); }

TEST(dummy_v41_from_golden_config_loads_and_scores) { run_one("golden/v41-tiny-a", 4, 1, (const double[2]){0.958, 1.008}); }
