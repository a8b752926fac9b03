/*
 * Batch invariance of V4 scoring (docs/determinism.md): a request's logits
 * are bitwise identical alone, alongside 7 unrelated requests, and with
 * chunked prefill — through the library (di_v4_score) and through the
 * `deepinfer score` CLI binary. Also checks the state-checking errors.
 */
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden/golden_util.h"
#include "score/score.h"

#define GDIR "golden/v4-tiny-a"

static int32_t *prompt_of(int *n) {
    di_json_doc *man = golden_manifest(di_test_data(GDIR));
    if (!man) return NULL;
    int32_t *p = golden_ints(man->root, "prompt_token_ids", NULL, n);
    di_json_free(man);
    return p;
}

TEST(v4_score_alone_vs_batch_with_7_vs_chunked) {
    int n = 0;
    int32_t *prompt = prompt_of(&n);
    CHECK(prompt);
    di_v4_model *m = NULL;
    di_error err = {0};
    CHECK(di_v4_load(di_test_data(GDIR), NULL, &m, &err) == DEEPINFER_OK);
    int V = (int)di_v4_config(m)->vocab_size;
    /* a shorter prompt keeps the test quick; 90 tokens cross the window (32)
     * and the indexer's top-k (visible rows > 16) */
    int np = 90, steps = 12;
    di_score_req base = {.prompt = prompt, .n_prompt = np, .all_positions = 1, .steps = steps};
    di_score_result alone, with7, chunked, both;
    CHECK(di_v4_score(m, &base, &alone, &err) == DEEPINFER_OK);
    di_score_req r2 = base;
    r2.batch_with = 7;
    CHECK(di_v4_score(m, &r2, &with7, &err) == DEEPINFER_OK);
    di_score_req r3 = base;
    r3.chunk = 7;
    CHECK(di_v4_score(m, &r3, &chunked, &err) == DEEPINFER_OK);
    di_score_req r4 = base;
    r4.chunk = 5;
    r4.batch_with = 7;
    CHECK(di_v4_score(m, &r4, &both, &err) == DEEPINFER_OK);
    size_t bytes = sizeof(float) * (size_t)alone.n_rows * V;
    CHECK(alone.n_rows == np + steps && with7.n_rows == alone.n_rows);
    CHECK_MSG(!memcmp(alone.logits, with7.logits, bytes), "--batch-with 7 changed the logits");
    CHECK_MSG(!memcmp(alone.logits, chunked.logits, bytes), "--chunk 7 changed the logits");
    CHECK_MSG(!memcmp(alone.logits, both.logits, bytes), "--chunk 5 --batch-with 7 changed the logits");
    fprintf(stderr, "    %d rows bitwise identical: alone, --batch-with 7, --chunk 7, --chunk 5 --batch-with 7\n", alone.n_rows);
    /* teacher forcing reproduces the greedy path's logits */
    di_score_req r5 = {.prompt = prompt, .n_prompt = np, .all_positions = 1, .force_ids = alone.argmax + np - 1,
                       .n_force = steps};
    di_score_result forced;
    CHECK(di_v4_score(m, &r5, &forced, &err) == DEEPINFER_OK);
    CHECK(!memcmp(alone.logits, forced.logits, bytes));
    di_score_result_free(&alone), di_score_result_free(&with7), di_score_result_free(&chunked);
    di_score_result_free(&both), di_score_result_free(&forced);
    di_v4_free(m);
    free(prompt);
}

TEST(v4_forward_rejects_bad_batches_before_changing_state) {
    di_v4_model *m = NULL;
    di_error err = {0};
    di_v4_options opt = {.max_context = 40};
    CHECK(di_v4_load(di_test_data(GDIR), &opt, &m, &err) == DEEPINFER_OK);
    di_seq_state *a = NULL, *b = NULL;
    CHECK(di_v4_seq_new(m, &a, &err) == DEEPINFER_OK && di_v4_seq_new(m, &b, &err) == DEEPINFER_OK);
    int32_t tok[4] = {1, 2, 3, 4};
    int64_t pos[4] = {0, 1, 2, 3};
    di_seq_state *seq[4] = {a, a, a, a};
    di_v4_batch bt = {.n = 4, .tokens = tok, .pos = pos, .seq = seq};
    /* wrong position */
    pos[2] = 5;
    CHECK(di_v4_forward(m, &bt, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.msg, "position 5") != NULL);
    pos[2] = 2;
    /* a sequence split in two runs */
    seq[1] = b;
    pos[1] = 0;
    CHECK(di_v4_forward(m, &bt, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.msg, "contiguous") != NULL);
    seq[1] = a;
    pos[1] = 1;
    /* token out of range */
    tok[3] = 5000;
    CHECK(di_v4_forward(m, &bt, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    tok[3] = 4;
    CHECK(a->n_tokens == 0);
    CHECK(di_v4_forward(m, &bt, &err) == DEEPINFER_OK);
    CHECK(a->n_tokens == 4);
    /* beyond max_context */
    int32_t many[40] = {0};
    int64_t mp[40];
    di_seq_state *ms[40];
    for (int i = 0; i < 40; i++) mp[i] = 4 + i, ms[i] = a;
    di_v4_batch big = {.n = 40, .tokens = many, .pos = mp, .seq = ms};
    CHECK(di_v4_forward(m, &big, &err) == DEEPINFER_ERR_LIMIT);
    CHECK(a->n_tokens == 4);
    di_seq_destroy(a);
    di_seq_destroy(b);
    di_v4_free(m);
}

/* Run the deepinfer binary next to the test runner; returns its exit status. */
static int run_cli(const char *args) {
    char exe[PATH_MAX], cmd[PATH_MAX + 65536];
    if (!di_test_sibling("deepinfer", exe, sizeof exe)) return -1;
    snprintf(cmd, sizeof cmd, "'%s' score %s", exe, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(v4_cli_score_golden_and_invariance) {
    int n = 0;
    int32_t *prompt = prompt_of(&n);
    CHECK(prompt);
    char ids[8192] = "";
    size_t at = 0;
    for (int i = 0; i < n; i++) at += (size_t)snprintf(ids + at, sizeof ids - at, "%s%d", i ? "," : "", prompt[i]);
    char dir[] = "/tmp/di_score_XXXXXX";
    CHECK(mkdtemp(dir));
    char args[16384];
    snprintf(args, sizeof args, "--model %s --prompt-ids %s --steps 24 --logits-out %s/a.bin --ids-out %s/a.txt",
             di_test_data(GDIR), ids, dir, dir);
    CHECK_EQ_INT(run_cli(args), 0);
    snprintf(args, sizeof args,
             "--model %s --prompt-ids %s --steps 24 --logits-out %s/b.bin --ids-out %s/b.txt --chunk 64 --batch-with 7",
             di_test_data(GDIR), ids, dir, dir);
    CHECK_EQ_INT(run_cli(args), 0);
    char pa[64], pb[64];
    snprintf(pa, sizeof pa, "%s/a.bin", dir);
    snprintf(pb, sizeof pb, "%s/b.bin", dir);
    size_t na = 0, nb = 0;
    float *la = golden_read_f32(pa, &na), *lb = golden_read_f32(pb, &nb);
    CHECK(la && lb && na == 25 * 1024 && nb == na);
    CHECK_MSG(!memcmp(la, lb, na * 4), "CLI: --chunk 64 --batch-with 7 changed the logits");
    /* the greedy ids are the reference's trajectory */
    di_json_doc *man = golden_manifest(di_test_data(GDIR));
    int no = 0;
    int32_t *want = golden_ints(man->root, "decode", "input_tokens", &no);
    char pt[64];
    snprintf(pt, sizeof pt, "%s/a.txt", dir);
    FILE *f = fopen(pt, "r");
    CHECK(f);
    for (int i = 0; i < no; i++) {
        int v = -1;
        CHECK(fscanf(f, "%d", &v) == 1);
        CHECK_MSG(v == want[i], "row %d: argmax %d, reference input token %d", i, v, want[i]);
    }
    fclose(f);
    /* a bad option fails cleanly */
    snprintf(args, sizeof args, "--model %s --prompt-ids 1,x --logits-out %s/c.bin 2>/dev/null", di_test_data(GDIR), dir);
    CHECK(run_cli(args) == 2);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(la), free(lb), free(want), free(prompt);
    di_json_free(man);
}
