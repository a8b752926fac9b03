/*
 * Plans per rank (model/load_plan.h, load_plan_ranks.c) on the real configs
 * (bench/configs/), at full depth, from the checkpoint's tensor list (a
 * generated header: nothing the size of the model is made); pure
 * computations, devices of 141 GB (an H200) with the load plan's margin:
 *  - V4-Flash (43 layers, 256 experts): one device does not hold it, EP2 does;
 *    each rank holds exactly half the routed-expert bytes and everything
 *    else whole;
 *  - V4.1-Flash (40 layers, 384 experts, two Engram tables): EP4 with the
 *    tables on the device does not fit, EP4 with them in host memory does,
 *    and that is the smallest layout; the refusal of EP2 names the rank's
 *    need, the usable bytes and "needs >= 4 x 141 GB devices (--ep 4) with
 *    Engram in host memory";
 *  - the named errors before anything is computed: experts not divisible,
 *    more ranks than GPUs (unchecked when the count is unknown: loopback);
 *  - a rank's real load (v4-tiny-a, --ep 2 over the loopback communicator)
 *    keeps its promise: on the CPU its planned packed matrices are the bytes
 *    it bound (its experts only), and under a device-like allocator (host
 *    memory behind a non-host allocator: the device paths) every byte it
 *    allocates, its EP buffers included, is in its plan.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dummy/dummy.h"
#include "model/dsv4_internal.h"
#include "model/weights.h"
#include "ops/ops.h"
#include "parallel/comm.h"
#include "model/config.h"
#include "model/load_plan.h"
#include "model/tensor_spec.h"
#include "counting_alloc.h"
#include "test.h"

#define H200 141000000000ull

typedef struct full_model {
    di_model_config cfg;
    di_weight_spec *spec;
    di_safetensors *st;
} full_model;

/* The config at full depth (copied as is) and its checked spec over a generated header. */
static deepinfer_status open_full(const char *config, full_model *m, di_error *err) {
    memset(m, 0, sizeof *m);
    char dir[] = "/tmp/di-planr-XXXXXX", dst[4200];
    if (!mkdtemp(dir)) return di_error_set(err, DEEPINFER_ERR_IO, "mkdtemp");
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    FILE *in = fopen(config, "rb"), *out = in ? fopen(dst, "wb") : NULL;
    char buf[65536];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in) fclose(in);
    if (out) fclose(out);
    deepinfer_status st = ok ? di_config_load(dir, &m->cfg, err) : di_error_set(err, DEEPINFER_ERR_IO, "copy");
    unlink(dst), rmdir(dir);
    if (!st) st = di_spec_build(&m->cfg, &m->spec, err);
    if (!st) st = di_dummy_weights(&m->cfg, 1, &m->st, err);
    if (!st) st = di_spec_check(m->spec, m->st, NULL, err);
    return st;
}

static void close_full(full_model *m) {
    di_spec_free(m->spec);
    di_st_close(m->st);
}

static const di_load_plan_opts DEV = {.max_rows = 1024, .max_context = 4096, .on_device = 1, .nthreads = 1};

TEST(plan_ranks_v4_flash_fits_ep2_on_two_h200_and_not_one) {
    di_error err = {0};
    full_model m;
    CHECK_MSG(!open_full("bench/configs/v4-flash.json", &m, &err), "%s", err.msg);
    CHECK_EQ_INT(m.cfg.n_layers, 43);
    CHECK_EQ_INT(m.cfg.n_routed_experts, 256);
    di_load_plan one, two[2];
    di_plan_layout l1 = {.ep_size = 1}, l2 = {.ep_size = 2};
    deepinfer_status s1 = di_load_plan_layout_fit(&m.cfg, m.spec, &DEV, &l1, H200, -1, 64, &one, &err);
    CHECK_MSG(s1 == DEEPINFER_ERR_OUT_OF_MEMORY && strstr(err.msg, "needs >= 2 x 141 GB devices (--ep 2)"), "%d %s",
              s1, err.msg);
    CHECK_MSG(!di_load_plan_layout_fit(&m.cfg, m.spec, &DEV, &l2, H200, -1, 64, two, &err), "%s", err.msg);
    /* each rank: half the experts, every other byte whole */
    CHECK(one.experts > 140000000000ull);
    for (int r = 0; r < 2; r++) {
        CHECK(two[r].ep_rank == r && two[r].ep_size == 2);
        CHECK(two[r].experts * 2 == one.experts);
        CHECK(one.weights - two[r].weights == one.experts / 2);
        CHECK(two[r].device_need == two[0].device_need);
        CHECK(two[r].device_need < H200 - DI_PLAN_DEV_MARGIN_FIXED - H200 / 100 * DI_PLAN_DEV_MARGIN_PCT);
        CHECK(two[r].step > one.step); /* the EP send / receive buffers */
    }
    di_plan_layout best;
    CHECK(!di_plan_smallest_layout(&m.cfg, m.spec, &DEV, H200, 64, &best, &err));
    CHECK(best.ep_size == 2 && !best.engram_host);
    close_full(&m);
}

TEST(plan_ranks_v41_flash_needs_ep4_with_engram_in_host_memory) {
    di_error err = {0};
    full_model m;
    CHECK_MSG(!open_full("bench/configs/v41-flash.json", &m, &err), "%s", err.msg);
    CHECK_EQ_INT(m.cfg.n_layers, 40);
    CHECK_EQ_INT(m.cfg.n_routed_experts, 384);
    CHECK(m.cfg.n_engram_layer_ids == 2);
    di_load_plan dev4[4], host4[4], two[2];
    di_plan_layout d4 = {.ep_size = 4}, h4 = {.ep_size = 4, .engram_host = 1}, d2 = {.ep_size = 2};
    deepinfer_status s = di_load_plan_layout_fit(&m.cfg, m.spec, &DEV, &d4, H200, -1, 64, dev4, &err);
    CHECK_MSG(s == DEEPINFER_ERR_OUT_OF_MEMORY, "%d %s", s, err.msg);
    CHECK_MSG(!di_load_plan_layout_fit(&m.cfg, m.spec, &DEV, &h4, H200, -1, 64, host4, &err), "%s", err.msg);
    /* the tables (~183 GiB) move to the host: one copy, the bytes of the two tensors pairs */
    uint64_t tables = 0;
    for (int i = 0; i < m.cfg.n_engram_layer_ids; i++) {
        int l = m.cfg.engram_layer_ids[i];
        const di_tensor *t = di_spec_get(m.spec, "layers.%d.engram.embed.weight", l);
        const di_tensor *sc = di_spec_get(m.spec, "layers.%d.engram.embed.scale", l);
        CHECK(t && sc);
        tables += t->nbytes + sc->nbytes;
    }
    CHECK(tables > (uint64_t)183 << 30);
    for (int r = 0; r < 4; r++) {
        CHECK(host4[r].host_engram == tables);
        CHECK(dev4[r].engram - host4[r].engram == tables); /* what stays: each layer's q*k */
        /* and the device hash's token map and constants (ops.h di_engram_hash_rows; host tables hash on the host) */
        uint64_t hash = (uint64_t)m.cfg.vocab_size * 4 +
                        (uint64_t)m.cfg.n_engram_layer_ids * (uint64_t)(m.cfg.engram_max_ngram_size + 2 * m.cfg.engram_cols) * 8;
        CHECK(dev4[r].device_need - host4[r].device_need == tables + hash);
        CHECK(host4[r].host_need >= tables);
    }
    s = di_load_plan_layout_fit(&m.cfg, m.spec, &DEV, &d2, H200, -1, 64, two, &err);
    CHECK_MSG(s == DEEPINFER_ERR_OUT_OF_MEMORY, "%d %s", s, err.msg);
    char need[64];
    snprintf(need, sizeof need, "rank 0 needs %.2f GB of device memory", two[0].device_need / 1e9);
    CHECK_MSG(strstr(err.msg, need) && strstr(err.msg, "allows 137.11 GB after its 3.89 GB margin") &&
                  strstr(err.msg, "needs >= 4 x 141 GB devices (--ep 4) with Engram in host memory (--engram-host)"),
              "%s (want '%s')", err.msg, need);
    di_plan_layout best;
    CHECK(!di_plan_smallest_layout(&m.cfg, m.spec, &DEV, H200, 64, &best, &err));
    CHECK(best.ep_size == 4 && best.engram_host);
    close_full(&m);
}

TEST(plan_ranks_named_errors_before_any_plan) {
    di_error err = {0};
    full_model m;
    CHECK_MSG(!open_full("bench/configs/v4-flash.json", &m, &err), "%s", err.msg);
    di_load_plan p[8];
    di_plan_layout l3 = {.ep_size = 3}, l2 = {.ep_size = 2}, l8 = {.ep_size = 8};
    memset(p, 0x5a, sizeof p);
    CHECK(di_load_plan_layout_fit(&m.cfg, m.spec, &DEV, &l3, H200, -1, 64, p, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "256 experts are not divisible by --ep 3"), "%s", err.msg);
    CHECK(p[0].ep_size == 0x5a5a5a5a); /* refused before any plan */
    CHECK(di_load_plan_layout_fit(&m.cfg, m.spec, &DEV, &l2, H200, 1, 64, p, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "--ep 2 needs 2 GPUs (one per rank) but 1 is visible"), "%s", err.msg);
    CHECK(di_load_plan_layout_fit(&m.cfg, m.spec, &DEV, &l8, H200, 4, 64, p, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "but 4 are visible"), "%s", err.msg);
    /* an unknown count (the CPU loopback communicator): any size plans */
    CHECK_MSG(!di_load_plan_layout_fit(&m.cfg, m.spec, &DEV, &l8, H200, -1, 64, p, &err), "%s", err.msg);
    CHECK(p[7].ep_rank == 7 && p[7].experts == p[0].experts && p[0].experts > 0);
    CHECK(di_plan_layout_check(&m.cfg, 0, -1, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    /* a layout that no count of devices holds: the nearest message */
    di_plan_layout l1 = {.ep_size = 1};
    deepinfer_status s = di_load_plan_layout_fit(&m.cfg, m.spec, &DEV, &l1, 2000000000ull, -1, 64, p, &err);
    CHECK_MSG(s == DEEPINFER_ERR_OUT_OF_MEMORY && strstr(err.msg, "no layout of up to 64 ranks fits 2 GB devices"),
              "%s", err.msg);
    close_full(&m);
}

/* ---- a rank's real load ---- */

static uint64_t plan_mats(const di_load_plan *p) {
    uint64_t s = 0;
    for (int f = 0; f < 4; f++) s += p->mat[f] + p->scale[f];
    return s;
}

static uint64_t bound_mats(const di_v4_model *m) {
    uint64_t got = m->w.head.bytes + m->w.hc_head.fn.bytes;
    for (int l = 0; l < m->w.n_layers; l++)
        got += di_block_bytes(&m->w.layers[l]) + m->w.layers[l].hc_attn.fn.bytes + m->w.layers[l].hc_ffn.fn.bytes;
    for (int s = 0; s < m->w.n_mtp; s++) {
        const di_block_w *b = &m->w.mtp[s].blk;
        got += di_block_bytes(b) + b->hc_attn.fn.bytes + b->hc_ffn.fn.bytes + m->w.mtp[s].e_proj.bytes +
               m->w.mtp[s].h_proj.bytes + m->w.mtp[s].hc_head.fn.bytes;
    }
    return got;
}

TEST(plan_ranks_cpu_rank_load_binds_its_plan) {
    di_comm *comm[2] = {0};
    di_error err = {0};
    CHECK(di_comm_loopback_group(2, comm, &err) == DEEPINFER_OK);
    di_load_plan whole, rank[2];
    di_v4_options o = {.max_rows = 32, .max_context = 1024, .plan_out = &whole};
    di_v4_model *m = NULL;
    CHECK_MSG(di_v4_load(di_test_data("golden/v4-tiny-a"), &o, &m, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(plan_mats(&whole) == bound_mats(m));
    di_v4_free(m);
    for (int r = 0; r < 2; r++) {
        di_v4_options ro = {.max_rows = 32, .max_context = 1024, .plan_out = &rank[r], .ep_rank = r, .ep_size = 2,
                            .comm = comm[r]};
        m = NULL;
        CHECK_MSG(di_v4_load(di_test_data("golden/v4-tiny-a"), &ro, &m, &err) == DEEPINFER_OK, "%s", err.msg);
        CHECK(rank[r].ep_size == 2 && rank[r].ep_rank == r);
        CHECK_MSG(plan_mats(&rank[r]) == bound_mats(m), "rank %d: planned %llu, bound %llu", r,
                  (unsigned long long)plan_mats(&rank[r]), (unsigned long long)bound_mats(m));
        CHECK(rank[r].experts * 2 == whole.experts && whole.experts > 0);
        CHECK(whole.weights - rank[r].weights == whole.experts / 2);
        di_v4_free(m);
    }
    for (int r = 0; r < 2; r++) di_comm_free(comm[r]);
}

TEST(plan_ranks_device_like_rank_load_allocates_its_plan) {
    di_comm *comm[2] = {0};
    di_error err = {0};
    CHECK(di_comm_loopback_group(2, comm, &err) == DEEPINFER_OK);
    di_allocator a = COUNTING_ALLOCATOR;
    for (int r = 0; r < 2; r++) {
        di_set_allocator(&a);
        counting_alloc_live = 0;
        di_load_plan p;
        di_v4_options o = {.max_rows = 32, .max_context = 2048, .plan_out = &p, .ep_rank = r, .ep_size = 2,
                           .comm = comm[r]};
        di_v4_model *m = NULL;
        deepinfer_status st = di_v4_load(di_test_data("golden/v4-tiny-a"), &o, &m, &err);
        uint64_t live = counting_alloc_live;
        int64_t V = st ? 0 : m->core.cfg.vocab_size;
        di_v4_free(m);
        uint64_t left = counting_alloc_live;
        di_set_allocator(NULL);
        CHECK_MSG(st == DEEPINFER_OK, "%s", err.msg);
        CHECK(p.on_device && p.ep_size == 2 && left == 0);
        uint64_t want = p.device_need - p.backend - (uint64_t)p.max_rows * (uint64_t)V * 4;
        CHECK_MSG(live == want, "rank %d allocated %llu bytes through the allocator, planned %llu", r,
                  (unsigned long long)live, (unsigned long long)want);
    }
    for (int r = 0; r < 2; r++) di_comm_free(comm[r]);
}
