/*
 * Dummy models (tools/dummy/dummy.h) from the golden tiny configs: the reduced
 * config validates, the in-memory safetensors image passes the same checks
 * as the same bytes read from a file (di_st_open), a corrupted image is
 * refused, and the model loads through the normal loader and scores one
 * prefill + one decode step on the CPU: finite logits of the measured
 * spread, the greedy input its row's argmax, and the same bits with the
 * prompt in chunks and the decode input teacher-forced.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/dsv41.h"
#include "model/dsv4.h"
#include "dummy/dummy.h"
#include "score/score.h"
#include "model/tensor_spec.h"
#include "test.h"

/* The image's bytes written to a file open like the image itself. */
static void same_as_file(const di_safetensors *st, const char *dir) {
    const di_st_shard_info *sh = di_st_shard(st, 0);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(sh->data, 1, sh->size, f) == sh->size && !fclose(f));
    di_safetensors *ft = NULL;
    di_error err = {0};
    CHECK_MSG(di_st_open(path, &ft, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(di_st_count(ft) == di_st_count(st));
    CHECK(di_st_get_totals(ft)->total_bytes == di_st_get_totals(st)->total_bytes);
    di_st_close(ft);
    unlink(path);
    /* a header length past the end is refused, as for a file */
    void *bad = mmap(NULL, sh->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(bad != MAP_FAILED);
    memcpy(bad, sh->data, sh->size);
    ((unsigned char *)bad)[7] = 0x7F;
    di_safetensors *bt = NULL;
    CHECK(di_st_open_memory(bad, sh->size, "bad", &bt, &err) != DEEPINFER_OK && !bt);
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
    same_as_file(st, dir);
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
TEST(dummy_v4_from_golden_config_loads_and_scores) { run_one("golden/v4-tiny-a", 4, 0, (const double[2]){0.998, 0.955}); }

TEST(dummy_v41_from_golden_config_loads_and_scores) { run_one("golden/v41-tiny-a", 4, 1, (const double[2]){0.983, 0.997}); }
