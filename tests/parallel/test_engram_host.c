/*
 * Engram tables in host memory on a device backend (engram.h tables_host,
 * di_v4_options.engram_host). A device-like allocator (host memory behind a
 * non-host allocator, so the layer takes the device paths: tables copied
 * into "device" memory, or kept on the host and their rows gathered on the
 * host and copied with di_copy_h2d) on the CPU exec:
 *  - a layer with host tables gives bitwise the residual rows and gates of
 *    one with device tables (whole passes and masked tokens, several
 *    passes of a small workspace), reads the tables in place and allocates
 *    none of their bytes through the allocator;
 *  - a whole V4.1 load (the golden v41-tiny-a checkpoint and the demo
 *    model) with engram_host allocates exactly its plan through the
 *    allocator, the plan's tables counted on the host.
 * The GPU test of the same contract is tests/ops/cuda/gtest_ep_nccl.c.
 */
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "model/dsv41_internal.h"
#include "model/engram.h"
#include "model/load_plan.h"
#include "ops/ops.h"
#include "counting_alloc.h"
#include "test.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}
static uint8_t rnd_e4m3(void) {
    uint8_t b;
    do b = (uint8_t)rnd(); while ((b & 0x7F) == 0x7F);
    return b;
}

static const di_allocator DEVICE_LIKE = COUNTING_ALLOCATOR;

enum { DIM = 64, HC = 4, NCOL = 6, HD = 64, ROWS = 300, NTOK = 11, WS_ROWS = 4 };

TEST(engram_host_tables_equal_device_tables_bitwise) {
    const int k = NCOL * HD, n = (HC + 1) * DIM;
    uint8_t *table = malloc((size_t)ROWS * HD), *tscale = malloc((size_t)ROWS * (HD / 32));
    uint8_t *wkv = malloc((size_t)n * k), *wscale = malloc((size_t)((n + 31) / 32) * (k / 32));
    float *qw = malloc(sizeof(float) * HC * DIM), *kw = malloc(sizeof(float) * HC * DIM);
    for (int i = 0; i < ROWS * HD; i++) table[i] = rnd_e4m3();
    for (int i = 0; i < ROWS * (HD / 32); i++) tscale[i] = (uint8_t)(118 + rnd() % 7);
    for (int i = 0; i < n * k; i++) wkv[i] = rnd_e4m3();
    for (int i = 0; i < ((n + 31) / 32) * (k / 32); i++) wscale[i] = (uint8_t)(112 + rnd() % 7);
    for (int i = 0; i < HC * DIM; i++) qw[i] = 0.5f + (float)(rnd() % 1000) / 1000.0f, kw[i] = 1.0f;
    di_wmat W;
    di_exec x;
    di_error err = {0};
    CHECK(di_wmat_pack(&W, DI_WFMT_FP8, wkv, wscale, n, k, 32, &err) == DEEPINFER_OK);
    CHECK(di_exec_init(&x, di_gemm_scratch_per_row(k) * 64, &err) == DEEPINFER_OK);
    int64_t ids[NTOK * NCOL];
    for (int i = 0; i < NTOK * NCOL; i++) ids[i] = rnd() % ROWS;
    uint8_t mask[NTOK];
    for (int t = 0; t < NTOK; t++) mask[t] = t % 3 != 1;
    size_t rn = (size_t)NTOK * HC * DIM;
    uint16_t *R0 = malloc(rn * 2), *R[2][2];
    for (size_t i = 0; i < rn; i++) R0[i] = di_f32_to_bf16((float)((int)(rnd() % 2001) - 1000) / 500.0f);
    float gates[2][2][NTOK * HC];

    di_set_allocator(&DEVICE_LIKE);
    counting_alloc_live = 0;
    di_engram_layer l[2];
    di_engram_workspace ws[2];
    uint64_t bytes[2];
    for (int h = 0; h < 2; h++) {
        uint64_t before = counting_alloc_live;
        di_engram_layer_desc d = {.dim = DIM, .hc = HC, .n_cols = NCOL, .head_dim = HD, .rows = ROWS, .eps = 1e-20f,
                                  .act_block = 32, .table = table, .table_scale = tscale, .wkv = &W, .q_weight = qw,
                                  .k_weight = kw, .qk_f32 = 1, .tables_host = h};
        CHECK_MSG(di_engram_layer_init(&l[h], &d, &err) == DEEPINFER_OK, "%s", err.msg);
        CHECK_MSG(di_engram_workspace_init(&ws[h], &l[h], WS_ROWS, &err) == DEEPINFER_OK, "%s", err.msg);
        bytes[h] = counting_alloc_live - before;
        for (int mk = 0; mk < 2; mk++) {
            R[h][mk] = di_dev_alloc(rn * 2);
            memcpy(R[h][mk], R0, rn * 2);
            CHECK_MSG(di_engram_forward(&x, &l[h], &ws[h], R[h][mk], NTOK, ids, NCOL, mk ? mask : NULL,
                                        gates[h][mk], &err) == DEEPINFER_OK, "%s", err.msg);
        }
    }
    CHECK(l[1].host_tables && !l[0].host_tables && l[0].dev_tables);
    CHECK(l[1].d.table == table && l[0].d.table != table); /* read in place / copied */
    CHECK(ws[1].e_host && !ws[0].e_host);
    CHECK_MSG(bytes[0] - bytes[1] == (uint64_t)ROWS * HD + (uint64_t)ROWS * (HD / 32),
              "device tables allocated %llu bytes, host tables %llu", (unsigned long long)bytes[0],
              (unsigned long long)bytes[1]);
    for (int mk = 0; mk < 2; mk++) {
        CHECK_MSG(!memcmp(R[0][mk], R[1][mk], rn * 2), "%s: residual rows differ", mk ? "masked" : "whole passes");
        CHECK(!memcmp(gates[0][mk], gates[1][mk], sizeof gates[0][mk]));
        CHECK(memcmp(R[0][mk], R0, rn * 2)); /* the block did change the rows */
    }
    for (int h = 0; h < 2; h++) {
        for (int mk = 0; mk < 2; mk++) di_dev_free(R[h][mk]);
        di_engram_workspace_free(&ws[h]);
        di_engram_layer_free(&l[h]);
    }
    CHECK(counting_alloc_live == 0);
    di_set_allocator(NULL);
    di_exec_free(&x);
    di_wmat_free(&W);
    free(table), free(tscale), free(wkv), free(wscale), free(qw), free(kw), free(R0);
}

/* A device-like V4.1 load with engram_host: what goes through the allocator is the plan's device
 * total less what only a real device exec adds (its contexts and device logits). */
static void load_engram_host(const char *dir, const char *engram_hash) {
    di_set_allocator(&DEVICE_LIKE);
    counting_alloc_live = 0;
    di_error err = {0};
    di_load_plan p, pd;
    di_v4_options o = {.max_rows = 32, .max_context = 2048, .plan_out = &p, .engram_hash = engram_hash,
                       .engram_host = 1};
    di_v41_model *m = NULL;
    deepinfer_status st = di_v41_load(dir, &o, &m, &err);
    uint64_t live = counting_alloc_live;
    int64_t V = st ? 0 : m->core.cfg.vocab_size;
    size_t tables = st ? 0 : m->w.engram_table_bytes;
    int host = !st && m->w.n_engram > 0 && m->w.engram[0].host_tables;
    /* device tables add the device hash's token map and constants (ops.h di_engram_hash_rows); host tables
     * hash on the host */
    const di_model_config *c = st ? NULL : &m->core.cfg;
    uint64_t hash = c ? (uint64_t)V * 4 + (uint64_t)c->n_engram_layer_ids *
                                              (uint64_t)(c->engram_max_ngram_size + 2 * c->engram_cols) * 8
                      : 0;
    int host_hash = !st && !m->eng_ops && !m->eng_dmap;
    di_v41_free(m);
    uint64_t left = counting_alloc_live;
    o.engram_host = 0, o.plan_out = &pd, o.plan_only = 1;
    deepinfer_status st2 = st ? st : di_v41_load(dir, &o, &m, &err);
    di_set_allocator(NULL);
    CHECK_MSG(st == DEEPINFER_OK && st2 == DEEPINFER_OK, "%s", err.msg);
    CHECK(host && host_hash && tables > 0 && left == 0);
    CHECK(p.on_device && p.engram_host && p.host_engram == tables);
    CHECK(pd.engram - p.engram == tables && pd.device_need - p.device_need == tables + hash);
    uint64_t want = p.device_need - p.backend - (uint64_t)p.max_rows * (uint64_t)V * 4;
    CHECK_MSG(live == want, "allocated %llu bytes through the allocator, planned %llu", (unsigned long long)live,
              (unsigned long long)want);
}

TEST(engram_host_load_allocates_its_plan_golden_v41) {
    char manifest[4200];
    snprintf(manifest, sizeof manifest, "%s/expected/manifest.json", di_test_data("golden/v41-tiny-a"));
    load_engram_host(di_test_data("golden/v41-tiny-a"), manifest);
}
TEST(engram_host_load_allocates_its_plan_demo_v41) {
    load_engram_host(di_test_data("../../models/deepinfer-demo-v41"), NULL);
}
