/*
 * Batch and chunk invariance of V4.1 scoring (docs/determinism.md) on the
 * golden tiny checkpoint: a request's logits are bitwise identical alone,
 * alongside 7 unrelated requests, with chunked prefill, and with a small
 * workspace (sub-batched steps) — through the library and through the
 * `deepinfer score` binary; with the released-index-k option too (batching
 * does not change a row). Also the state-checking errors (text-only).
 */
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden/golden_util.h"
#include "score/score.h"

#define GDIR "golden/v41-tiny-a"

static int32_t *prompt_of(int *n) {
    di_json_doc *man = golden_manifest(di_test_data(GDIR));
    if (!man) return NULL;
    int32_t *p = golden_ints(man->root, "prompt_token_ids", NULL, n);
    di_json_free(man);
    return p;
}

static di_v41_model *load(int released, int max_rows, int64_t max_context) {
    char hash[4096];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(GDIR));
    di_v4_options opt = {.released_index_k = released, .engram_hash = hash, .max_rows = max_rows,
                         .max_context = max_context};
    di_v41_model *m = NULL;
    di_error err = {0};
    if (di_v41_load(di_test_data(GDIR), &opt, &m, &err)) fprintf(stderr, "load: %s\n", err.msg);
    return m;
}

TEST(v41_score_alone_vs_batch_with_7_vs_chunked_vs_sub_batched) {
    int n = 0;
    int32_t *prompt = prompt_of(&n);
    CHECK(prompt);
    di_error err = {0};
    /* 120 tokens cross the window (32), the top-k (16) and the candidate blocks (6 x 8 rows) */
    int np = 120, steps = 12;
    di_score_req base = {.prompt = prompt, .n_prompt = np, .all_positions = 1, .steps = steps};
    for (int released = 0; released < 2; released++) {
        di_v41_model *m = load(released, 0, 0), *small = load(released, 16, 0);
        CHECK(m && small);
        int V = (int)di_v41_config(m)->vocab_size;
        di_score_result alone, with7, chunked, both, sub;
        CHECK(di_v41_score(m, &base, &alone, &err) == DEEPINFER_OK);
        di_score_req r2 = base;
        r2.batch_with = 7;
        CHECK(di_v41_score(m, &r2, &with7, &err) == DEEPINFER_OK);
        di_score_req r3 = base;
        r3.chunk = 7;
        CHECK(di_v41_score(m, &r3, &chunked, &err) == DEEPINFER_OK);
        di_score_req r4 = base;
        r4.chunk = 5;
        r4.batch_with = 7;
        CHECK(di_v41_score(m, &r4, &both, &err) == DEEPINFER_OK);
        di_score_req r5 = base;
        r5.batch_with = 7; /* a 16-row workspace: every step runs as sub-batches */
        CHECK(di_v41_score(small, &r5, &sub, &err) == DEEPINFER_OK);
        size_t bytes = sizeof(float) * (size_t)alone.n_rows * V;
        CHECK(alone.n_rows == np + steps && with7.n_rows == alone.n_rows);
        CHECK_MSG(!memcmp(alone.logits, with7.logits, bytes), "--batch-with 7 changed the logits");
        CHECK_MSG(!memcmp(alone.logits, sub.logits, bytes), "sub-batched steps changed the logits");
        if (!released) { /* with the option, a prefill chunk of one row is a (stale) decode step */
            CHECK_MSG(!memcmp(alone.logits, chunked.logits, bytes), "--chunk 7 changed the logits");
            CHECK_MSG(!memcmp(alone.logits, both.logits, bytes), "--chunk 5 --batch-with 7 changed the logits");
        }
        fprintf(stderr, "    %s: %d rows bitwise identical: alone, --batch-with 7, 16-row sub-batches%s\n",
                released ? "released-index-k" : "fixed", alone.n_rows,
                released ? "" : ", --chunk 7, --chunk 5 --batch-with 7");
        /* teacher forcing reproduces the greedy path's logits */
        di_score_req r6 = {.prompt = prompt, .n_prompt = np, .all_positions = 1, .force_ids = alone.argmax + np - 1,
                           .n_force = steps};
        di_score_result forced;
        CHECK(di_v41_score(m, &r6, &forced, &err) == DEEPINFER_OK);
        CHECK(!memcmp(alone.logits, forced.logits, bytes));
        di_score_result_free(&alone), di_score_result_free(&with7), di_score_result_free(&chunked);
        di_score_result_free(&both), di_score_result_free(&sub), di_score_result_free(&forced);
        di_v41_free(m);
        di_v41_free(small);
    }
    free(prompt);
}

TEST(v41_forward_rejects_bad_batches_before_changing_state) {
    di_v41_model *m = load(0, 0, 40);
    CHECK(m);
    di_error err = {0};
    const di_model_config *c = di_v41_config(m);
    di_seq_state *a = NULL;
    CHECK(di_v41_seq_new(m, &a, &err) == DEEPINFER_OK);
    int32_t tok[4] = {1, 2, 3, 4};
    int64_t pos[4] = {0, 1, 2, 3};
    di_seq_state *seq[4] = {a, a, a, a};
    di_v4_batch bt = {.n = 4, .tokens = tok, .pos = pos, .seq = seq};
    /* text-only: the image token is refused with a clear error */
    tok[2] = (int32_t)c->image_token_id;
    CHECK(di_v41_forward(m, &bt, &err) == DEEPINFER_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "image token") != NULL && strstr(err.msg, "text-only") != NULL);
    tok[2] = 3;
    pos[2] = 5;
    CHECK(di_v41_forward(m, &bt, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    pos[2] = 2;
    tok[3] = 5000;
    CHECK(di_v41_forward(m, &bt, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    tok[3] = 4;
    CHECK(a->n_tokens == 0 && a->engram.len == 0);
    CHECK(di_v41_forward(m, &bt, &err) == DEEPINFER_OK);
    CHECK(a->n_tokens == 4 && a->engram.len == 4);
    int32_t many[40] = {0};
    int64_t mp[40];
    di_seq_state *ms[40];
    for (int i = 0; i < 40; i++) mp[i] = 4 + i, ms[i] = a;
    di_v4_batch big = {.n = 40, .tokens = many, .pos = mp, .seq = ms};
    CHECK(di_v41_forward(m, &big, &err) == DEEPINFER_ERR_LIMIT);
    CHECK(a->n_tokens == 4 && a->engram.len == 4);
    /* DSpark: drafting needs the rings fed up to the anchor's position */
    int64_t p = 3;
    int32_t anchor = 7, ids[8];
    di_v41_draft d = {.n = 1, .seq = &a, .pos = &p, .anchor = &anchor, .ids = ids};
    CHECK(di_v41_dspark_draft(m, &d, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.msg, "feed") != NULL);
    di_seq_destroy(a);
    di_v41_free(m);
}

/* Run the deepinfer binary next to the test runner; returns its exit status. */
static int run_cli(const char *args) {
    char exe[PATH_MAX], cmd[PATH_MAX + 65536];
    if (!di_test_sibling("deepinfer", exe, sizeof exe)) return -1;
    snprintf(cmd, sizeof cmd, "'%s' score %s", exe, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(v41_cli_score_invariance_and_released_option) {
    int n = 0;
    int32_t *prompt = prompt_of(&n);
    CHECK(prompt);
    char ids[8192] = "";
    size_t at = 0;
    for (int i = 0; i < n; i++) at += (size_t)snprintf(ids + at, sizeof ids - at, "%s%d", i ? "," : "", prompt[i]);
    char dir[] = "/tmp/di_score41_XXXXXX";
    CHECK(mkdtemp(dir));
    char hash[4096], args[16384];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(GDIR));
    const char *variant[4] = {"", "--chunk 64 --batch-with 7", "--released-index-k",
                              "--released-index-k --batch-with 7"};
    float *l[4];
    size_t nl[4];
    for (int v = 0; v < 4; v++) {
        snprintf(args, sizeof args, "--model %s --engram-hash %s --prompt-ids %s --steps 8 --logits-out %s/%d.bin %s",
                 di_test_data(GDIR), hash, ids, dir, v, variant[v]);
        CHECK_EQ_INT(run_cli(args), 0);
        char p[64];
        snprintf(p, sizeof p, "%s/%d.bin", dir, v);
        l[v] = golden_read_f32(p, &nl[v]);
        CHECK(l[v] && nl[v] == 9 * 1024);
    }
    CHECK_MSG(!memcmp(l[0], l[1], nl[0] * 4), "CLI: --chunk 64 --batch-with 7 changed the logits");
    CHECK_MSG(!memcmp(l[2], l[3], nl[0] * 4), "CLI: --batch-with 7 changed the released-option logits");
    CHECK_MSG(!memcmp(l[0], l[2], 1024 * 4), "the option changed the prefill row");
    CHECK_MSG(memcmp(l[0], l[2], nl[0] * 4), "the option changed no decode row");
    /* without the hash constants of this non-released model, loading fails clearly */
    snprintf(args, sizeof args, "--model %s --prompt-ids 1,2 --logits-out %s/x.bin 2>/dev/null", di_test_data(GDIR), dir);
    CHECK(run_cli(args) == 1);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    for (int v = 0; v < 4; v++) free(l[v]);
    free(prompt);
}
