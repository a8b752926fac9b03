/*
 * Compact prefill (V4.1 bounded replay, architecture.md §6.5) on the demo
 * model: bad configurations are named errors at open; compact mode is
 * chunk- and batch-invariant (a request alone with chunk 512 equals it
 * chunked at 13 and batched with two others, bitwise); preemption (a
 * shrunk page pool) recomputes the same rows (the prompt tail, then the
 * outputs so far) and changes no output bit.
 */
#include <stdlib.h>

#include "engine/engine_util.h"

#define DEMO "../../models/deepinfer-demo-v41"

static deepinfer_status open_compact_pool(const char *model, int chunk, int64_t keep, int page_rows, int64_t pages,
                                          deepinfer_engine **e, char *msg, size_t n) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.page_rows = page_rows;
    c.num_pages = pages;
    c.model = model;
    c.accelerator = "cpu";
    c.max_model_len = 1024;
    c.max_num_seqs = 4;
    c.chunk_size = chunk;
    c.yoco_compact = 1;
    c.yoco_keep_tokens = keep;
    return deepinfer_engine_open(&c, e, msg, n);
}

static deepinfer_status open_compact(const char *model, int chunk, int64_t keep, deepinfer_engine **e, char *msg,
                                     size_t n) {
    return open_compact_pool(model, chunk, keep, 0, 0, e, msg, n);
}

TEST(engine_compact_bad_input) {
    deepinfer_engine *e = NULL;
    char msg[1024];
    CHECK(open_compact(di_test_data(DEMO), 512, 60, &e, msg, sizeof msg) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(msg, "KEEP_TOKENS 60") && strstr(msg, "sliding_window"), "%s", msg);
    CHECK(open_compact(di_test_data(ENGINE_GOLDEN), 512, 0, &e, msg, sizeof msg) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(msg, "deepseek_v41"), "%s", msg);
    setenv("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS", "12x", 1);
    CHECK(open_compact(di_test_data(DEMO), 512, 0, &e, msg, sizeof msg) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(msg, "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS"), "%s", msg);
    unsetenv("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS");
    setenv("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE", "fast", 1);
    CHECK(open_compact(di_test_data(DEMO), 512, 0, &e, msg, sizeof msg) == DEEPINFER_ERR_INVALID_ARGUMENT);
    unsetenv("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE");
    CHECK(e == NULL);
}

TEST(engine_compact_chunk_batch_invariant) {
    enum { N = 3, LEN = 300 };
    static int32_t ids[N][LEN];
    uint32_t x = 7;
    for (int i = 0; i < N; i++)
        for (int t = 0; t < LEN - i * 50; t++) x = x * 1664525u + 1013904223u, ids[i][t] = 10 + (int32_t)((x >> 10) % 3000);
    deepinfer_prompt p[N];
    deepinfer_sampling_params sp[N];
    for (int i = 0; i < N; i++) {
        p[i] = (deepinfer_prompt){.token_ids = ids[i], .n_token_ids = (size_t)(LEN - i * 50)};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].temperature = 0;
        sp[i].max_tokens = 8;
        sp[i].ignore_eos = 1;
        sp[i].logprobs = 2;
    }
    char msg[1024];
    deepinfer_engine *a = NULL, *b = NULL;
    CHECK_MSG(open_compact(di_test_data(DEMO), 512, 0, &a, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    CHECK_MSG(open_compact(di_test_data(DEMO), 13, 0, &b, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    deepinfer_request_output **alone = NULL, **mixed = NULL;
    CHECK(deepinfer_generate(a, p, 1, sp, 1, &alone) == DEEPINFER_OK);
    CHECK(deepinfer_generate(b, p, N, sp, N, &mixed) == DEEPINFER_OK);
    CHECK_MSG(alone[0]->status == DEEPINFER_OK, "%s", alone[0]->error);
    CHECK(eng_same_output(alone[0], mixed[0], 0));
    deepinfer_outputs_free(alone, 1);
    deepinfer_outputs_free(mixed, N);
    deepinfer_engine_close(a);
    deepinfer_engine_close(b);
}

TEST(engine_compact_preemption_recomputes_the_same_rows) {
    enum { N = 4, LEN = 220, OUT = 100 };
    static int32_t ids[N][LEN];
    uint32_t x = 11;
    for (int i = 0; i < N; i++)
        for (int t = 0; t < LEN; t++) x = x * 1664525u + 1013904223u, ids[i][t] = 10 + (int32_t)((x >> 10) % 3000);
    deepinfer_prompt p[N];
    deepinfer_sampling_params sp[N];
    for (int i = 0; i < N; i++) {
        p[i] = (deepinfer_prompt){.token_ids = ids[i], .n_token_ids = (size_t)(LEN - i * 10)};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].temperature = i % 2 ? 0.8f : 0;
        sp[i].has_seed = 1;
        sp[i].seed = 100 + (uint64_t)i;
        sp[i].max_tokens = OUT;
        sp[i].ignore_eos = 1;
        sp[i].logprobs = 2;
    }
    char msg[1024];
    deepinfer_engine *roomy = NULL, *tight = NULL;
    CHECK_MSG(open_compact_pool(di_test_data(DEMO), 64, 0, 16, 0, &roomy, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    /* 16-row pages: one request needs ~80 pages at its end, ~57 for its prompt; 140 pages admit two prompts
     * whose decode then outgrows the pool */
    CHECK_MSG(open_compact_pool(di_test_data(DEMO), 64, 0, 16, 140, &tight, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    deepinfer_request_output **ref = NULL, **pre = NULL;
    CHECK(deepinfer_generate(roomy, p, N, sp, N, &ref) == DEEPINFER_OK);
    CHECK_MSG(deepinfer_generate(tight, p, N, sp, N, &pre) == DEEPINFER_OK, "%s", deepinfer_engine_last_error(tight));
    deepinfer_engine_stats a, b;
    deepinfer_engine_get_stats(roomy, &a);
    deepinfer_engine_get_stats(tight, &b);
    for (int i = 0; i < N; i++) CHECK_MSG(pre[i]->status == DEEPINFER_OK, "request %d: %s", i, pre[i]->error);
    CHECK_MSG(a.preemptions == 0, "the roomy pool preempted %lld times", (long long)a.preemptions);
    CHECK_MSG(b.preemptions > 0, "the shrunk pool (%lld pages, peak %lld) caused no preemption", (long long)b.num_pages,
              (long long)b.pages_peak);
    fprintf(stderr, "    compact with the shrunk pool: %lld preemptions, peak %lld/%lld pages\n", (long long)b.preemptions,
            (long long)b.pages_peak, (long long)b.num_pages);
    for (int i = 0; i < N; i++) {
        CHECK_MSG(ref[i]->status == DEEPINFER_OK, "%s", ref[i]->error);
        CHECK(eng_same_output(ref[i], pre[i], i));
    }
    deepinfer_outputs_free(ref, N);
    deepinfer_outputs_free(pre, N);
    deepinfer_engine_close(roomy);
    deepinfer_engine_close(tight);
}
