/*
 * The load plan (model/load_plan.h) is a promise:
 *  - on the CPU, the planned packed-weight bytes equal the bound weights'
 *    bytes (every di_wmat of the model) and the planned workspace what the
 *    core allocated, for a V4 checkpoint and the V4.1 demo model;
 *  - on a device-like allocator (host memory behind a non-host allocator,
 *    so the binders take the device paths: checkpoint forms, no panels),
 *    every byte allocated through it during the load equals the plan's
 *    device total less what only a real device exec adds (its contexts and
 *    device logits);
 *  - the pure fit check refuses with both numbers (device, host, budget)
 *    and accepts what fits;
 *  - a full-depth V4-Flash checkpoint (a generated image: the header of
 *    every tensor, bytes made on demand) is refused on the CPU by
 *    di_model_load before any weight is allocated, naming both numbers;
 *  - an engine whose states cannot fit its memory_budget is refused by the
 *    load's plan, before the weights are allocated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deepinfer.h"
#include "dummy/dummy.h"
#include "io/dtype.h"
#include "model/dsv41_internal.h"
#include "model/dsv4_internal.h"
#include "model/load_plan.h"
#include "model/model.h"
#include "model/tensor_spec.h"
#include "ops/ops.h"
#include "counting_alloc.h"
#include "test.h"
#include "util/sysmem.h"

#define V4_DIR "golden/v4-tiny-a"
#define V41_DIR "../../models/deepinfer-demo-v41"

static uint64_t mats(const di_load_plan *p) {
    uint64_t s = 0;
    for (int f = 0; f < 4; f++) s += p->mat[f] + p->scale[f];
    return s;
}

static uint64_t block_mats(const di_block_w *b) {
    return di_block_bytes(b) + b->hc_attn.fn.bytes + b->hc_ffn.fn.bytes;
}

TEST(load_plan_cpu_weights_and_workspace_are_what_v4_allocates) {
    di_error err = {0};
    di_load_plan p;
    di_v4_options o = {.max_rows = 48, .max_context = 4096, .plan_out = &p};
    di_v4_model *m = NULL;
    CHECK_MSG(di_v4_load(di_test_data(V4_DIR), &o, &m, &err) == DEEPINFER_OK, "%s", err.msg);
    uint64_t got = m->w.head.bytes + m->w.hc_head.fn.bytes;
    for (int l = 0; l < m->w.n_layers; l++) got += block_mats(&m->w.layers[l]);
    for (int s = 0; s < m->w.n_mtp; s++)
        got += block_mats(&m->w.mtp[s].blk) + m->w.mtp[s].e_proj.bytes + m->w.mtp[s].h_proj.bytes +
               m->w.mtp[s].hc_head.fn.bytes;
    const di_model_config *c = &m->core.cfg;
    CHECK(!p.on_device);
    CHECK_MSG(mats(&p) == got, "planned packed matrices %llu, bound %llu", (unsigned long long)mats(&p),
              (unsigned long long)got);
    CHECK(p.embed == (uint64_t)(c->vocab_size * c->hidden_size * 2));
    size_t dws, hws;
    di_ws_sizes(c, 48, 4096, m->core.ws.nthreads, &dws, &hws);
    CHECK_MSG(p.workspace == dws && dws + hws == m->core.ws.bytes, "planned workspace %llu, allocated %zu",
              (unsigned long long)p.workspace, m->core.ws.bytes - hws);
    CHECK(p.host_need >= p.weights + p.workspace + p.step);
    di_v4_free(m);
}

TEST(load_plan_cpu_weights_are_what_v41_allocates) {
    di_error err = {0};
    di_load_plan p;
    di_v4_options o = {.max_rows = 64, .plan_out = &p};
    di_v41_model *m = NULL;
    CHECK_MSG(di_v41_load(di_test_data(V41_DIR), &o, &m, &err) == DEEPINFER_OK, "%s", err.msg);
    const di_v41_weights *w = &m->w;
    uint64_t got = w->head.bytes;
    for (int l = 0; l < w->n_layers; l++) got += block_mats(&w->layers[l]);
    for (int i = 0; i < w->n_engram; i++) got += w->engram_wkv[i].bytes;
    for (int s = 0; s < w->n_stages; s++)
        got += block_mats(&w->stages[s].blk) + w->stages[s].main_proj.bytes + w->stages[s].markov_head.bytes +
               w->stages[s].conf.bytes;
    CHECK_MSG(mats(&p) == got, "planned packed matrices %llu, bound %llu", (unsigned long long)mats(&p),
              (unsigned long long)got);
    CHECK(p.workspace + 0 > 0 && p.max_rows == 64 && p.max_context == m->core.max_context);
    di_v41_free(m);
}

/* ---- a device-like allocator (counting_alloc.h): host memory, counted, not the host allocator ---- */

static void device_like_load(const char *dir, int v41) {
    di_allocator a = COUNTING_ALLOCATOR;
    di_set_allocator(&a);
    counting_alloc_live = 0;
    di_error err = {0};
    di_load_plan p;
    di_v4_options o = {.max_rows = 32, .max_context = 2048, .plan_out = &p};
    di_v4_model *m4 = NULL;
    di_v41_model *m41 = NULL;
    deepinfer_status st = v41 ? di_v41_load(dir, &o, &m41, &err) : di_v4_load(dir, &o, &m4, &err);
    uint64_t live = counting_alloc_live;
    int64_t V = st ? 0 : (v41 ? m41->core.cfg.vocab_size : m4->core.cfg.vocab_size);
    di_v4_free(m4);
    di_v41_free(m41);
    uint64_t left = counting_alloc_live;
    di_set_allocator(NULL);
    CHECK_MSG(st == DEEPINFER_OK, "%s", err.msg);
    CHECK(p.on_device && left == 0);
    /* the exec is not on a device here: no device contexts, no device logits */
    uint64_t want = p.device_need - p.backend - (uint64_t)p.max_rows * (uint64_t)V * 4;
    CHECK_MSG(live == want, "allocated %llu bytes through the allocator, planned %llu (weights %llu, workspace %llu, "
              "step %llu)", (unsigned long long)live, (unsigned long long)want, (unsigned long long)p.weights,
              (unsigned long long)p.workspace, (unsigned long long)p.step);
}

TEST(load_plan_device_bytes_are_what_a_device_load_allocates_v4) { device_like_load(di_test_data(V4_DIR), 0); }
TEST(load_plan_device_bytes_are_what_a_device_load_allocates_v41) { device_like_load(di_test_data(V41_DIR), 1); }

/* ---- the pure fit check ---- */

TEST(load_plan_check_refuses_with_both_numbers_and_accepts_a_fit) {
    di_error err = {0};
    di_load_plan p = {.on_device = 1, .weights = 160200000000ull, .workspace = 9100000000ull,
                      .reserve_device = 2000000000ull, .host_tables = 500000000ull, .host_staging = 134217728ull};
    p.device_need = p.weights + p.workspace + p.reserve_device;
    p.host_need = p.host_tables + p.host_staging;
    CHECK(di_load_plan_check(&p, 139400000000ull, 100000000000ull, &err) == DEEPINFER_ERR_OUT_OF_MEMORY);
    CHECK_MSG(strstr(err.msg, "171.30 GB of device memory") && strstr(err.msg, "139.40 GB is free") &&
              strstr(err.msg, "weights 160.20 GB"), "%s", err.msg);
    CHECK(di_load_plan_check(&p, 200000000000ull, 100000000000ull, &err) == DEEPINFER_OK);
    /* just above the margin (1 GiB + 2 %) refuses, inside it fits */
    uint64_t free_b = (p.device_need + DI_PLAN_DEV_MARGIN_FIXED) / 98 * 100; /* usable = 98 % of free - 1 GiB */
    CHECK(di_load_plan_check(&p, free_b + 1000000, 0, &err) == DEEPINFER_OK);
    CHECK(di_load_plan_check(&p, free_b - 1000000, 0, &err) == DEEPINFER_ERR_OUT_OF_MEMORY);
    CHECK(di_load_plan_check(&p, p.device_need + DI_PLAN_DEV_MARGIN_FIXED, 0, &err) == DEEPINFER_ERR_OUT_OF_MEMORY);
    /* host: the device side fits, the host side does not */
    CHECK(di_load_plan_check(&p, 200000000000ull, 600000000ull, &err) == DEEPINFER_ERR_OUT_OF_MEMORY);
    CHECK_MSG(strstr(err.msg, "0.63 GB of host memory") && strstr(err.msg, "0.60 GB is available"), "%s", err.msg);
    /* the CPU backend: everything is host memory */
    di_load_plan c = {.on_device = 0, .weights = 510000000000ull, .host_need = 512000000000ull};
    CHECK(di_load_plan_check(&c, 0, 100000000000ull, &err) == DEEPINFER_ERR_OUT_OF_MEMORY);
    CHECK_MSG(strstr(err.msg, "512.00 GB of host memory") && strstr(err.msg, "packed weights 510.00 GB") &&
              strstr(err.msg, "100.00 GB is available"), "%s", err.msg);
    CHECK(di_load_plan_check(&c, 0, 600000000000ull, &err) == DEEPINFER_OK);
    /* a budget */
    c.budget = 400000000000ull;
    CHECK(di_load_plan_check(&c, 0, 0, &err) == DEEPINFER_ERR_OUT_OF_MEMORY);
    CHECK_MSG(strstr(err.msg, "512.00 GB") && strstr(err.msg, "memory_budget is 400.00 GB"), "%s", err.msg);
    char buf[2048];
    di_load_plan_format(&p, "  ", buf, sizeof buf);
    CHECK_MSG(strstr(buf, "weights      160.20 GB in device memory") && strstr(buf, "device       171.30 GB"), "%s", buf);
}

/* ---- a full-depth V4-Flash checkpoint on the CPU: refused before allocating ---- */

static deepinfer_status zero_gen(void *ctx, const di_tensor *t, uint64_t off, void *dst, size_t n, di_error *err) {
    (void)ctx, (void)t, (void)off, (void)err;
    memset(dst, 0, n);
    return DEEPINFER_OK;
}

/* A generated checkpoint with every required tensor of dir's config (zero bytes). */
static deepinfer_status open_zero_checkpoint(const char *dir, di_safetensors **out, uint64_t *bytes, di_error *err) {
    di_model_config cfg;
    di_weight_spec *spec = NULL;
    deepinfer_status st = di_config_load(dir, &cfg, err);
    if (!st) st = di_spec_build(&cfg, &spec, err);
    if (st) return st;
    size_t cap = di_spec_count(spec) * 160 + 64, len = 0;
    char *h = malloc(cap);
    if (!h) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    uint64_t off = 0;
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (size_t i = 0; i < di_spec_count(spec); i++) {
        const di_tensor_spec *e = di_spec_at(spec, i);
        if (e->flags & (DI_SPEC_OPTIONAL | DI_SPEC_UNVERIFIED)) continue;
        uint64_t n = (uint64_t)e->shape[0] * (uint64_t)(e->ndim == 2 ? e->shape[1] : 1) * di_dtype_size(e->dtype);
        len += (size_t)snprintf(h + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld", len > 1 ? "," : "",
                                e->name, di_dtype_name(e->dtype), (long long)e->shape[0]);
        if (e->ndim == 2) len += (size_t)snprintf(h + len, cap - len, ",%lld", (long long)e->shape[1]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + n));
        off += n;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    di_spec_free(spec);
    *bytes = off;
    st = di_st_open_generated(h, len, off, zero_gen, NULL, NULL, "zero checkpoint", out, err);
    free(h);
    return st;
}

TEST(load_plan_cpu_refuses_a_checkpoint_larger_than_host_memory_before_allocating) {
    char dir[] = "/tmp/di-plan-XXXXXX";
    CHECK(mkdtemp(dir));
    di_error err = {0};
    di_dummy_info info;
    deepinfer_status st = di_dummy_write_dir("bench/configs/v4-flash.json", 43, dir, &info, &err);
    di_safetensors *w = NULL;
    uint64_t bytes = 0;
    if (!st) st = open_zero_checkpoint(dir, &w, &bytes, &err);
    di_load_plan p;
    memset(&p, 0, sizeof p);
    di_model *m = NULL;
    di_model_options o = {.weights = w, .plan_out = &p};
    uint64_t rss0 = di_proc_rss();
    deepinfer_status ls = st ? st : di_model_load(dir, &o, &m, &err);
    uint64_t rss1 = di_proc_rss();
    di_model_free(m);
    di_st_close(w);
    char cp[4200];
    snprintf(cp, sizeof cp, "%s/config.json", dir), unlink(cp);
    rmdir(dir);
    CHECK_MSG(!st, "%s", err.msg);
    uint64_t avail = di_sys_mem_available();
    if (avail && p.host_need < avail / 10 * 9) SKIP("this machine has %.0f GB available: the model fits", avail / 1e9);
    CHECK_MSG(ls == DEEPINFER_ERR_OUT_OF_MEMORY, "status %d: %s", ls, err.msg);
    CHECK(bytes > 150000000000ull && p.weights > 150000000000ull);
    char need[32], have[32];
    snprintf(need, sizeof need, "%.2f GB of host memory", p.host_need / 1e9);
    snprintf(have, sizeof have, "%.2f GB is available", avail / 1e9);
    CHECK_MSG(strstr(err.msg, need) && strstr(err.msg, "GB is available"), "%s (want '%s', about '%s')", err.msg, need,
              have);
    CHECK_MSG(rss1 < rss0 + ((uint64_t)512 << 20), "RSS grew by %.1f MB before the refusal", (rss1 - rss0) / 1e6);
}

/* ---- the engine: states declared before the load ---- */

TEST(load_plan_engine_refuses_states_beyond_its_budget_before_the_load) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data(V4_DIR);
    c.accelerator = "cpu";
    c.max_num_seqs = 4;
    c.memory_budget = 4u << 20; /* 4 MiB: below weights + one sequence */
    deepinfer_engine *e = NULL;
    char msg[1024];
    CHECK(deepinfer_engine_open(&c, &e, msg, sizeof msg) == DEEPINFER_ERR_OUT_OF_MEMORY && !e);
    CHECK_MSG(strstr(msg, "memory_budget is 0.00 GB (4194304 bytes)") && strstr(msg, "states and other reserves"),
              "%s", msg);
    c.memory_budget = 0;
    CHECK_MSG(deepinfer_engine_open(&c, &e, msg, sizeof msg) == DEEPINFER_OK, "%s", msg);
    const char *t = deepinfer_engine_plan_text(e);
    CHECK_MSG(strstr(t, "load plan (before the load") && strstr(t, "GB in host memory"), "%s", t);
    deepinfer_engine_close(e);
}
