/*
 * State pools and sequence state: n > 1 choices forked after a shared
 * prefill equal choices that recompute the prompt; snapshot/rollback of
 * draft tokens is invisible; the memory plan adds up and a budget sizes the
 * page pool.
 */
#include "engine/seq_snapshot.h"
#include "engine/state_pool.h"
#include "engine/engine_util.h"
#include "model/dsv4.h"

static deepinfer_request_output *run_one(const eng_opts *o, const deepinfer_prompt *p, const deepinfer_sampling_params *sp,
                                         deepinfer_engine_stats *st) {
    deepinfer_engine *e = eng_open(o);
    if (!e) return NULL;
    deepinfer_request_output **out = NULL, *r = NULL;
    if (!deepinfer_generate(e, p, 1, sp, 1, &out)) {
        r = out[0];
        free(out);
    }
    deepinfer_engine_get_stats(e, st);
    deepinfer_engine_close(e);
    return r;
}

TEST(engine_n_choices_fork_equals_recompute_and_streams_differ) {
    int32_t ids[150];
    for (int i = 0; i < 150; i++) ids[i] = (int32_t)((i * 131 + 7) % 1024);
    deepinfer_prompt p = {.token_ids = ids, .n_token_ids = 150};
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.n = 4;
    sp.max_tokens = 10;
    sp.temperature = 1.0f;
    sp.has_seed = 1;
    sp.seed = 4242;
    sp.logprobs = 3;
    sp.ignore_eos = 1;
    deepinfer_engine_stats fork_st, solo_st;
    eng_opts forking = {.chunk = 64, .max_seqs = 8};
    eng_opts one_slot = {.chunk = 64, .max_seqs = 1}; /* no free slot to fork into: every choice prefills itself */
    deepinfer_request_output *a = run_one(&forking, &p, &sp, &fork_st), *b = run_one(&one_slot, &p, &sp, &solo_st);
    CHECK(a && b && a->n_choices == 4);
    CHECK(eng_same_output(a, b, 0));
    /* forking ran the shared prompt once: 149 rows + 4 last-prompt rows + decode rows */
    CHECK_MSG(fork_st.prefill_rows == 149 + 4, "forked prefill rows %lld", (long long)fork_st.prefill_rows);
    CHECK_MSG(solo_st.prefill_rows == 4 * 150, "recomputed prefill rows %lld", (long long)solo_st.prefill_rows);
    int distinct = 0;
    for (int i = 1; i < 4; i++)
        distinct += memcmp(a->choices[0].token_ids, a->choices[i].token_ids, 10 * sizeof(int32_t)) != 0;
    CHECK_MSG(distinct == 3, "only %d of 3 choices differ from choice 0", distinct);
    /* each choice's first logprob comes from the same last-prompt logits row */
    for (int i = 1; i < 4; i++) CHECK(!memcmp(a->choices[0].top_logprobs, a->choices[i].top_logprobs, 3 * sizeof(float)));
    fprintf(stderr, "    n=4: forked (%lld prefill rows) = recomputed (%lld rows), 4 distinct streams\n",
            (long long)fork_st.prefill_rows, (long long)solo_st.prefill_rows);
    deepinfer_output_free(a);
    deepinfer_output_free(b);
}

/* Logits of one row fed to `s` at its current position. */
static int feed(di_v4_model *m, di_seq_state *s, int32_t tok, float *logits) {
    int64_t pos = s->n_tokens;
    int row = 0;
    di_v4_batch b = {.n = 1, .tokens = &tok, .pos = &pos, .seq = &s, .n_logits = 1, .logit_rows = &row, .logits = logits};
    return di_v4_forward(m, &b, NULL) == DEEPINFER_OK;
}

TEST(seq_snapshot_rollback_is_invisible_and_copy_is_exact) {
    di_v4_model *m = NULL;
    di_v4_options o = {.max_draft = 8}; /* the compressor buffers protect up to 8 discarded rows */
    CHECK(di_v4_load(di_test_data(ENGINE_GOLDEN), &o, &m, NULL) == DEEPINFER_OK);
    const di_model_config *cfg = di_v4_config(m);
    int V = (int)cfg->vocab_size;
    di_pool_geom g;
    CHECK(di_pool_geom_compute(cfg, 16, 1024, 8, &g, NULL) == DEEPINFER_OK);
    di_state_pool pool;
    CHECK(di_pool_init(&pool, cfg, &g, 3, 200, NULL) == DEEPINFER_OK);
    int sa = di_pool_slot_acquire(&pool), sb = di_pool_slot_acquire(&pool), sc = di_pool_slot_acquire(&pool);
    CHECK(sa >= 0 && sb >= 0 && sc >= 0 && di_pool_slot_acquire(&pool) == -1);
    di_seq_state *A = di_pool_seq(&pool, sa), *B = di_pool_seq(&pool, sb), *C = di_pool_seq(&pool, sc);
    CHECK(!di_pool_grow(&pool, sa, 400) && !di_pool_grow(&pool, sb, 400) && !di_pool_grow(&pool, sc, 400));
    di_seq_reset(A, cfg), di_seq_reset(B, cfg);
    float *la = malloc(sizeof(float) * (size_t)V), *lb = malloc(sizeof(float) * (size_t)V);
    /* both sequences see 250 tokens (crossing window 32, ratio-4 groups and 16-row pages) */
    for (int t = 0; t < 250; t++) CHECK(feed(m, A, (t * 7 + 3) % V, la) && feed(m, B, (t * 7 + 3) % V, lb));
    int ok = 1;
    for (int round = 0; round < 6; round++) {
        int k = 1 + round; /* draft k tokens on A, roll back, feed the real token on both */
        di_seq_snapshot_take(A, cfg, k, di_pool_snapshot_room(&pool, sa));
        for (int j = 0; j < k; j++) CHECK(feed(m, A, (round * 31 + j * 17 + 5) % V, la));
        CHECK(di_seq_snapshot_restore(A, cfg, di_pool_snapshot_room(&pool, sa), NULL) == DEEPINFER_OK);
        int32_t real = (round * 13 + 1) % V;
        CHECK(feed(m, A, real, la) && feed(m, B, real, lb));
        ok &= !memcmp(la, lb, sizeof(float) * (size_t)V);
    }
    CHECK_MSG(ok, "a rolled-back draft changed the logits");
    for (int round = 0; round < 12; round++) {
        /* partial rollback: A runs k drafts and keeps the first j, B runs only those j */
        int k = 1 + round % 6, j = (round * 5) % (k + 1);
        int32_t d[6];
        for (int i = 0; i < k; i++) d[i] = (round * 29 + i * 11 + 3) % V;
        int64_t P = A->n_tokens;
        di_seq_snapshot_take(A, cfg, k, di_pool_snapshot_room(&pool, sa));
        for (int i = 0; i < k; i++) CHECK(feed(m, A, d[i], la));
        CHECK(di_seq_snapshot_restore_to(A, cfg, di_pool_snapshot_room(&pool, sa), P + j, NULL) == DEEPINFER_OK);
        for (int i = 0; i < j; i++) CHECK(feed(m, B, d[i], lb));
        int32_t real = (round * 17 + 9) % V;
        CHECK(feed(m, A, real, la) && feed(m, B, real, lb));
        ok &= !memcmp(la, lb, sizeof(float) * (size_t)V);
    }
    CHECK_MSG(ok, "a partial rollback (restore_to) changed the logits");
    /* a copy continues exactly like its source */
    CHECK(di_seq_copy(C, B, cfg, NULL) == DEEPINFER_OK);
    for (int t = 0; t < 40; t++) {
        CHECK(feed(m, B, (t * 5 + 2) % V, lb) && feed(m, C, (t * 5 + 2) % V, la));
        ok &= !memcmp(la, lb, sizeof(float) * (size_t)V);
    }
    CHECK_MSG(ok, "a copied state diverged from its source");
    /* a target without pages is refused before anything is written */
    di_pool_slot_release(&pool, sc);
    sc = di_pool_slot_acquire(&pool);
    CHECK(di_seq_copy(di_pool_seq(&pool, sc), B, cfg, NULL) == DEEPINFER_ERR_LIMIT);
    fprintf(stderr, "    6 drafts of 1..6 tokens rolled back: bitwise invisible; 12 partly kept: like the kept tokens "
                    "alone; a forked copy tracks its source for 40 tokens\n");
    free(la), free(lb);
    di_pool_free(&pool);
    di_v4_free(m);
}

TEST(state_pool_pages_come_back_and_fit_is_exact) {
    di_v4_model *m = NULL;
    CHECK(di_v4_load(di_test_data(ENGINE_GOLDEN), NULL, &m, NULL) == DEEPINFER_OK);
    const di_model_config *cfg = di_v4_config(m);
    di_pool_geom g;
    CHECK(di_pool_geom_compute(cfg, 16, 2048, 0, &g, NULL) == DEEPINFER_OK);
    /* layers 2 and 4 (ratio 4) own KV + index rows, layer 3 (ratio 128) KV rows */
    /* 16 rows per page: a ratio-4 store fills a page every 64 tokens, the ratio-128 store every 2048 */
    CHECK_EQ_INT(di_pool_geom_pages_for(cfg, &g, 3), 0);
    CHECK_EQ_INT(di_pool_geom_pages_for(cfg, &g, 4), 4);
    CHECK_EQ_INT(di_pool_geom_pages_for(cfg, &g, 67), 4);
    CHECK_EQ_INT(di_pool_geom_pages_for(cfg, &g, 68), 8);
    CHECK_EQ_INT(di_pool_geom_pages_for(cfg, &g, 127), 8);
    CHECK_EQ_INT(di_pool_geom_pages_for(cfg, &g, 128), 9); /* + the first ratio-128 row */
    CHECK_EQ_INT(di_pool_geom_pages_for(cfg, &g, 131), 9);
    CHECK_EQ_INT(di_pool_geom_pages_for(cfg, &g, 132), 13); /* row 32 of a ratio-4 store opens its 3rd page */
    di_state_pool pool;
    CHECK(di_pool_init(&pool, cfg, &g, 4, 10, NULL) == DEEPINFER_OK);
    int s = di_pool_slot_acquire(&pool);
    CHECK_EQ_INT(di_pool_fit(&pool, s, 0, 1000, 0), 131); /* 13 pages would be needed at 132 */
    CHECK_EQ_INT(di_pool_fit(&pool, s, 0, 1000, 2), 127);
    CHECK_EQ_INT(di_pool_fit(&pool, s, 0, 100, 0), 100);
    CHECK(di_pool_grow(&pool, s, 100) == 0 && di_pool_pages_free(&pool) == 2);
    CHECK_EQ_INT(di_pool_fit(&pool, s, 100, 1000, 0), 31); /* from 100 with 2 more pages: up to 131 */
    CHECK(di_pool_grow(&pool, s, 131) == 0 && di_pool_pages_free(&pool) == 1);
    CHECK(di_pool_grow(&pool, s, 1000) == -1 && di_pool_pages_free(&pool) == 1); /* nothing changed */
    di_pool_slot_release(&pool, s);
    CHECK(di_pool_pages_free(&pool) == 10 && di_pool_slots_free(&pool) == 4 && pool.pages_peak == 9);
    di_pool_free(&pool);
    di_v4_free(m);
}

TEST(engine_memory_plan_adds_up) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data(ENGINE_GOLDEN);
    c.max_model_len = 4096;
    c.max_num_seqs = 8;
    c.memory_budget = 64u << 20;
    deepinfer_engine *e = NULL;
    char msg[512];
    CHECK_MSG(deepinfer_engine_open(&c, &e, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    deepinfer_memory_plan p;
    deepinfer_engine_plan(e, &p);
    uint64_t used = p.weight_bytes + p.workspace_bytes + (uint64_t)p.num_slots * p.slot_bytes + (uint64_t)p.num_pages * p.page_bytes;
    CHECK(p.budget == 64u << 20 && used <= p.budget && p.budget - used < p.page_bytes);
    CHECK(p.num_slots == 8 && p.max_model_len == 4096 && p.tokens_per_sequence_max == 4096);
    CHECK(!strcmp(p.arch, "deepseek_v4") && !strcmp(p.accelerator, "cpu") && p.batch_invariant == 1);
    CHECK(strstr(deepinfer_engine_plan_text(e), "pages") && strstr(deepinfer_engine_plan_text(e), "weights"));
    deepinfer_engine_close(e);
}
