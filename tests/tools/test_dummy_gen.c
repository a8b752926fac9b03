/*
 * The dummy generator (tools/dummy/dummy.h step 2) on a golden tiny config:
 * every tensor's bytes read in one call equal the same bytes read in
 * odd-sized pieces in reverse order (range independence); the same seed gives
 * the same bytes and another seed others; e4m3 weights are never NaN
 * (0x7F / 0xFF) and e8m0 scales never 0xFF; --experts reduces the routed
 * experts (and the V4.1 drafter's, which has its own) and the reduced model
 * loads and runs one forward on the CPU.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dummy/dummy.h"
#include "model/tensor_spec.h"
#include "score/score.h"
#include "test.h"

static void rm_dir(const char *dir) {
    const char *files[] = {"config.json", "engram_token_map.json", "engram_hash.json"};
    char p[600];
    for (int i = 0; i < 3; i++) snprintf(p, sizeof p, "%s/%s", dir, files[i]), unlink(p);
    rmdir(dir);
}

/* The reduced config of `golden` with `layers` layers and `experts` routed experts in a new temp dir. */
static int make_cfg(const char *golden, int layers, int experts, char *dir, di_model_config *cfg,
                    di_dummy_info *info) {
    char cfgp[512];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", di_test_data(golden));
    di_error err = {0};
    if (!mkdtemp(dir)) return -1;
    if (di_dummy_write_dir_ex(cfgp, layers, experts, dir, info, &err) || di_config_load(dir, cfg, &err)) {
        fprintf(stderr, "    %s\n", err.msg);
        return -1;
    }
    return 0;
}

TEST(dummy_generator_is_range_independent_deterministic_and_never_nan) {
    char dir[] = "/tmp/di-dummy-gen-XXXXXX";
    di_model_config cfg;
    CHECK(make_cfg("golden/v41-tiny-a", 4, 0, dir, &cfg, NULL) == 0);
    di_error err = {0};
    di_safetensors *a = NULL, *b = NULL, *c = NULL;
    CHECK_MSG(di_dummy_weights(&cfg, 11, &a, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK_MSG(di_dummy_weights(&cfg, 11, &b, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK_MSG(di_dummy_weights(&cfg, 12, &c, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(di_st_count(a) == di_st_count(c) && di_st_count(a) > 10);
    di_weight_spec *spec = NULL;
    CHECK(di_spec_build(&cfg, &spec, &err) == DEEPINFER_OK);
    size_t cap = 0, pieces_bad = 0, seed_bad = 0, seed_same = 0, random_tensors = 0, nan = 0, checked = 0;
    unsigned char *one = NULL, *rev = NULL, *oth = NULL;
    for (size_t i = 0; i < di_st_count(a); i++) {
        const di_tensor *t = di_st_at(a, i), *tb = di_st_find(b, t->name), *tc = di_st_find(c, t->name);
        CHECK(tb && tc && !di_st_mapped(t) && !t->data);
        size_t n = (size_t)t->nbytes;
        if (n > cap) {
            free(one), free(rev), free(oth);
            cap = n, one = malloc(n), rev = malloc(n), oth = malloc(n);
            CHECK(one && rev && oth);
        }
        CHECK(di_st_read(t, 0, one, n, &err) == DEEPINFER_OK);
        /* reverse order, odd piece sizes (1, 3, 5, ..., then a large one) */
        memset(rev, 0xA5, n);
        size_t end = n, k = 1;
        while (end) {
            size_t m = k < end ? k : end;
            CHECK(di_st_read(t, end - m, rev + end - m, m, &err) == DEEPINFER_OK);
            end -= m;
            k = k < 64 ? k + 2 : k * 3 + 1;
        }
        pieces_bad += memcmp(one, rev, n) != 0;
        CHECK(di_st_read(tb, 0, rev, n, &err) == DEEPINFER_OK);
        pieces_bad += memcmp(one, rev, n) != 0;
        CHECK(di_st_read(tc, 0, oth, n, &err) == DEEPINFER_OK);
        const di_tensor_spec *e = di_spec_find(spec, t->name);
        CHECK_MSG(e != NULL, "%s not in the spec", t->name);
        if (!e) continue;
        int random = e->kind == DI_TK_FP8_WEIGHT || e->kind == DI_TK_FP4_WEIGHT || e->kind == DI_TK_ENGRAM_TABLE;
        if (random && n >= 64) {
            random_tensors++;
            seed_same += !memcmp(one, oth, n);
        } else if (e->kind == DI_TK_FP8_SCALE || e->kind == DI_TK_FP4_SCALE) {
            seed_bad += memcmp(one, oth, n) != 0; /* constant per kind: the same for any seed */
        }
        if (e->kind == DI_TK_FP8_WEIGHT || e->kind == DI_TK_ENGRAM_TABLE || e->kind == DI_TK_FP8_SCALE ||
            e->kind == DI_TK_FP4_SCALE || e->kind == DI_TK_ENGRAM_SCALE) {
            int e4m3 = e->kind == DI_TK_FP8_WEIGHT || e->kind == DI_TK_ENGRAM_TABLE;
            for (size_t j = 0; j < n; j++) nan += e4m3 ? (one[j] & 0x7F) == 0x7F : one[j] == 0xFF;
            checked++;
        }
    }
    CHECK_MSG(pieces_bad == 0, "%zu reads differ from the one-call read", pieces_bad);
    CHECK(random_tensors > 5);
    CHECK_MSG(seed_same == 0, "%zu random tensors are the same for seeds 11 and 12", seed_same);
    CHECK_MSG(seed_bad == 0, "%zu scale tensors depend on the seed", seed_bad);
    CHECK(checked > 5);
    CHECK_MSG(nan == 0, "%zu NaN e4m3 / e8m0 bytes", nan);
    /* a range outside a tensor is refused */
    const di_tensor *t0 = di_st_at(a, 0);
    CHECK(di_st_read(t0, t0->nbytes - 1, one, 2, &err) != DEEPINFER_OK);
    /* a large range (filled on the pool) equals the same bytes read serially in small pieces */
    const di_tensor *big = NULL;
    for (size_t i = 0; i < di_st_count(a); i++)
        if (!big || di_st_at(a, i)->nbytes > big->nbytes) big = di_st_at(a, i);
    fprintf(stderr, "    largest tensor %s: %llu bytes\n", big->name, (unsigned long long)big->nbytes);
    free(one), free(rev), free(oth);
    di_spec_free(spec);
    di_st_close(a), di_st_close(b), di_st_close(c);
    rm_dir(dir);
}

/* Reads of 1 MB and more are filled on the pool: a few MB tensors of the
 * released V4-Flash config (one layer, 8 experts; only the header exists)
 * read whole equal the same bytes read in 4093-byte pieces, and their first
 * and last MB read alone. */
TEST(dummy_generator_parallel_fill_matches_pieces) {
    const char *full = di_test_data("../../bench/configs/v4-flash.json");
    if (access(full, R_OK)) {
        di_test_skip("%s not found", full);
        return;
    }
    char dir[] = "/tmp/di-dummy-gen-XXXXXX";
    CHECK(mkdtemp(dir));
    di_error err = {0};
    di_model_config cfg;
    CHECK_MSG(di_dummy_write_dir_ex(full, 1, 8, dir, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK_MSG(di_config_load(dir, &cfg, &err) == DEEPINFER_OK, "%s", err.msg);
    di_safetensors *a = NULL;
    CHECK_MSG(di_dummy_weights(&cfg, 5, &a, &err) == DEEPINFER_OK, "%s", err.msg);
    int tested = 0, seen[DI_DTYPE_COUNT] = {0};
    size_t cap = (size_t)40 << 20, mb = (size_t)1 << 20;
    unsigned char *p = malloc(cap), *q = malloc(cap);
    CHECK(p && q);
    for (size_t i = 0; i < di_st_count(a); i++) { /* one tensor of each dtype of 2..40 MB */
        const di_tensor *t = di_st_at(a, i);
        size_t n = (size_t)t->nbytes;
        if (n < 2 * mb || n > cap || seen[t->dtype]) continue;
        seen[t->dtype] = 1;
        CHECK(di_st_read(t, 0, p, n, &err) == DEEPINFER_OK);
        for (size_t off = 0; off < n; off += 4093) {
            size_t m = n - off < 4093 ? n - off : 4093;
            CHECK(di_st_read(t, off, q + off, m, &err) == DEEPINFER_OK);
        }
        CHECK_MSG(!memcmp(p, q, n), "%s: the whole read differs from 4093-byte pieces", t->name);
        CHECK(di_st_read(t, 3, q, mb + 5, &err) == DEEPINFER_OK);
        CHECK_MSG(!memcmp(p + 3, q, mb + 5), "%s: an unaligned 1 MB read differs", t->name);
        CHECK(di_st_read(t, n - mb - 7, q, mb + 7, &err) == DEEPINFER_OK);
        CHECK_MSG(!memcmp(p + n - mb - 7, q, mb + 7), "%s: the last MB differs", t->name);
        fprintf(stderr, "    %s (%s, %.1f MB): whole == pieces\n", t->name, di_dtype_name(t->dtype), n / 1e6);
        tested++;
    }
    CHECK(tested >= 2);
    free(p), free(q);
    di_st_close(a);
    rm_dir(dir);
}

TEST(dummy_experts_reduction_loads_and_runs_a_forward) {
    for (int v41 = 0; v41 < 2; v41++) {
        char dir[] = "/tmp/di-dummy-exp-XXXXXX";
        di_model_config full, cfg;
        di_dummy_info info;
        const char *golden = v41 ? "golden/v41-tiny-a" : "golden/v4-tiny-a";
        CHECK(make_cfg(golden, 2, 0, dir, &full, NULL) == 0);
        rm_dir(dir);
        memcpy(dir + strlen(dir) - 6, "XXXXXX", 6);
        int E = (int)full.num_experts_per_tok + 1;
        CHECK(make_cfg(golden, 2, E, dir, &cfg, &info) == 0);
        CHECK_EQ_INT((int)cfg.n_routed_experts, E);
        CHECK_EQ_INT((int)info.n_experts, E);
        CHECK(cfg.n_routed_experts < full.n_routed_experts);
        CHECK(cfg.num_experts_per_tok == full.num_experts_per_tok);
        CHECK(cfg.stage_n_routed_experts <= E && cfg.stage_n_routed_experts >= cfg.stage_num_experts_per_tok);
        /* too few experts for the top-k: refused with a message */
        char d2[] = "/tmp/di-dummy-exp-XXXXXX", cfgp[512];
        CHECK(mkdtemp(d2));
        snprintf(cfgp, sizeof cfgp, "%s/config.json", di_test_data(golden));
        di_error err = {0};
        CHECK(di_dummy_write_dir_ex(cfgp, 2, (int)full.num_experts_per_tok - 1, d2, NULL, &err) != DEEPINFER_OK);
        CHECK(strstr(err.msg, "num_experts_per_tok") != NULL);
        rmdir(d2);

        di_safetensors *st = NULL;
        CHECK_MSG(di_dummy_weights(&cfg, 3, &st, &err) == DEEPINFER_OK, "%s", err.msg);
        di_v4_options opt = {.weights = st, .max_context = 64};
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
        int32_t prompt[6] = {3, 5, 7, 11, 13, 17};
        di_score_req req = {.prompt = prompt, .n_prompt = 6, .steps = 0};
        di_score_result res = {0};
        CHECK_MSG(di_score_run(&sm, &req, &res, &err) == DEEPINFER_OK, "%s", err.msg);
        CHECK(res.n_rows >= 1);
        int finite = 1;
        double s2 = 0;
        for (size_t i = 0; i < (size_t)cfg.vocab_size; i++) finite &= isfinite(res.logits[i]), s2 += res.logits[i] * res.logits[i];
        CHECK(finite && s2 > 0);
        di_score_result_free(&res);
        di_v4_free(m4);
        di_v41_free(m41);
        di_st_close(st);
        rm_dir(dir);
    }
}

/* `deepinfer dummy` writes a model directory that `deepinfer bench --load`
 * loads, runs and measures (the table's rows present, the load counted the
 * checkpoint's bytes); bad arguments are refused. */
TEST(cli_dummy_writes_a_directory_bench_load_measures) {
    char exe[PATH_MAX], cmd[3 * PATH_MAX], dir[] = "/tmp/di-cli-dummy-XXXXXX", outf[] = "/tmp/di-cli-dummy-out-XXXXXX";
    if (!di_test_sibling("deepinfer", exe, sizeof exe)) {
        di_test_skip("CLI not built: %s", exe);
        return;
    }
    CHECK(mkdtemp(dir));
    int fd = mkstemp(outf);
    CHECK(fd >= 0);
    close(fd);
    const char *cfg = di_test_data("golden/v4-tiny-a/config.json");
    snprintf(cmd, sizeof cmd, "DEEPINFER_THREADS=2 '%s' dummy '%s' --layers 2 --experts 3 --out '%s' --shard-gb 0.0004 "
             "--seed 9 >/dev/null 2>&1", exe, cfg, dir);
    CHECK_EQ_INT(system(cmd), 0);
    di_safetensors *st = NULL;
    di_error err = {0};
    CHECK_MSG(di_st_open(dir, &st, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(di_st_shard_count(st) >= 2);
    di_st_close(st);
    snprintf(cmd, sizeof cmd, "DEEPINFER_THREADS=2 '%s' bench --load '%s' --prompt 4 >%s 2>/dev/null", exe, dir, outf);
    CHECK_EQ_INT(system(cmd), 0);
    FILE *f = fopen(outf, "r");
    char out[8192] = {0};
    CHECK(f && fread(out, 1, sizeof out - 1, f) > 0);
    if (f) fclose(f);
    const char *rows[] = {"storage read", "load / read", "peak host RSS", "first token", "3 routed experts"};
    for (int i = 0; i < 5; i++) CHECK_MSG(strstr(out, rows[i]) != NULL, "no '%s' in:\n%s", rows[i], out);
    /* bad arguments: too few experts, no --out */
    snprintf(cmd, sizeof cmd, "'%s' dummy '%s' --layers 2 --experts 1 --out '%s' >/dev/null 2>&1", exe, cfg, dir);
    CHECK(system(cmd) != 0);
    snprintf(cmd, sizeof cmd, "'%s' dummy '%s' --layers 2 >/dev/null 2>&1", exe, cfg);
    CHECK(system(cmd) != 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, outf);
    CHECK_EQ_INT(system(cmd), 0);
}
