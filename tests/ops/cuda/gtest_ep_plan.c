/* gtest_ep_plan.c — the device expert-parallel exchange plan and row gather with holes
 * (dic_model.h dic_ep_plan, dic_gather_rows_bf16) against the CPU ops (src/ops/cpu/ep_plan.c),
 * bitwise, over the shared cases (tests/ops/ep_plan_cases.h: replicas, uneven slices, M < ranks,
 * rows with a repeated expert), every rank of each; outputs poisoned with 0xFF bytes, counters
 * started from non-zero values (they accumulate). The plan is run twice per case, so the
 * counters' second sums check accumulation on the device too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/dic_model.h"
#include "ops/cuda/gpu_util.h"
#include "ops/ep_plan_cases.h"
#include "ops/ops.h"
#include "test.h"

enum { NOUT = 8 }; /* exec, sel_loc, off, rows, inv, pack, cinv, unpack */

static int first_diff(const int *a, const int *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return -1;
}

TEST(gpu_ep_plan_equals_cpu) {
    static const char *names[NOUT] = {"exec", "sel_loc", "off", "rows", "inv", "pack", "cinv", "unpack"};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    int cases = 0;
    for (int t = 0; t < EPC_NSHAPES; t++)
        for (int r = 0; r < epc_shapes[t][3]; r++) {
            epc_case pc;
            epc_make(&pc, t, r, 23);
            int n = pc.M * pc.k, msk = (epc_lo(&pc, r + 1) - epc_lo(&pc, r)) * pc.k;
            int len[NOUT] = {n, n, pc.nloc + 2, n, n, n, msk, msk};
            int *h[NOUT], *d[NOUT];
            for (int o = 0; o < NOUT; o++) {
                h[o] = malloc(sizeof(int) * (size_t)(len[o] + 1));
                d[o] = gt_dev_poison(sizeof(int) * (size_t)(len[o] + 1));
                CHECK(h[o] && d[o]);
                memset(h[o], 0xFF, sizeof(int) * (size_t)(len[o] + 1));
            }
            int64_t *load = malloc(8 * (size_t)pc.E), rep = 3;
            for (int e = 0; e < pc.E; e++) load[e] = 100 + e;
            int64_t *dload = gt_to_dev(load, 8 * (size_t)pc.E), *drep = gt_to_dev(&rep, 8);
            int *dsel = gt_to_dev(pc.sel, sizeof(int) * (size_t)n);
            int *dnc = gt_to_dev(pc.ncopies, sizeof(int) * (size_t)pc.E);
            int *dcp = gt_to_dev(pc.copies, sizeof(int) * (size_t)pc.E * EPC_MAXC);
            int *dloc = gt_to_dev(pc.local, sizeof(int) * (size_t)pc.E);
            CHECK(dload && drep && dsel && dnc && dcp && dloc);
            di_ep_plan_args ha = {.M = pc.M, .k = pc.k, .E = pc.E, .sel = pc.sel, .ncopies = pc.ncopies,
                                  .copies = pc.copies, .maxc = EPC_MAXC, .local = pc.local, .nloc = pc.nloc,
                                  .rank = r, .size = pc.S, .exec = h[0], .sel_loc = h[1], .off = h[2],
                                  .rows = h[3], .inv = h[4], .pack = h[5], .cinv = h[6], .unpack = h[7],
                                  .load = load, .replica = &rep};
            di_ep_plan_args da = ha;
            da.sel = dsel, da.ncopies = dnc, da.copies = dcp, da.local = dloc;
            da.exec = d[0], da.sel_loc = d[1], da.off = d[2], da.rows = d[3], da.inv = d[4], da.pack = d[5];
            da.cinv = d[6], da.unpack = d[7], da.load = dload, da.replica = drep;
            for (int pass = 0; pass < 2; pass++) {
                di_ep_plan(NULL, &ha);
                CUDA_SYNC_CHECK(dic_ep_plan(&c, &da));
            }
            for (int o = 0; o < NOUT; o++) {
                int *g = gt_d2h(d[o], sizeof(int) * (size_t)len[o]);
                CHECK(g);
                int at = first_diff(g, h[o], len[o]);
                CHECK_MSG(at < 0, "shape %d (M=%d k=%d E=%d S=%d) rank %d: %s[%d] = %d, CPU %d", t, pc.M, pc.k, pc.E,
                          pc.S, r, names[o], at, at < 0 ? 0 : g[at], at < 0 ? 0 : h[o][at]);
                free(g);
            }
            int64_t *gl = gt_d2h(dload, 8 * (size_t)pc.E), *gr = gt_d2h(drep, 8);
            CHECK(gl && gr);
            CHECK_MSG(memcmp(gl, load, 8 * (size_t)pc.E) == 0, "shape %d rank %d: load counters", t, r);
            CHECK_MSG(*gr == rep, "shape %d rank %d: replica entries %lld, CPU %lld", t, r, (long long)*gr,
                      (long long)rep);
            free(gl), free(gr);
            for (int o = 0; o < NOUT; o++) free(h[o]), cudaFree(d[o]);
            cudaFree(dload), cudaFree(drep), cudaFree(dsel), cudaFree(dnc), cudaFree(dcp), cudaFree(dloc);
            free(load);
            epc_free(&pc);
            cases++;
        }
    CHECK(cases > 20);
}

TEST(gpu_gather_rows_bf16_equals_cpu) {
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    static const int shapes[][3] = {/* n, d, ld */ {9, 13, 16}, {300, 4096, 4096}, {64, 7168, 7168}, {1, 8, 8}};
    uint64_t s = 99;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int n = shapes[t][0], d = shapes[t][1], ld = shapes[t][2], R = n + 3;
        uint16_t *src = malloc(2 * (size_t)R * ld), *dst = malloc(2 * (size_t)n * ld);
        int *idx = malloc(4 * (size_t)n);
        gt_fill_bf16(src, (size_t)R * ld, 1.0f, &s);
        for (int j = 0; j < n; j++) idx[j] = gt_rand_u64(&s) % 3 == 0 ? -1 : (int)(gt_rand_u64(&s) % (uint64_t)R);
        memset(dst, 0xFF, 2 * (size_t)n * ld);
        uint16_t *dsrc = gt_to_dev(src, 2 * (size_t)R * ld), *ddst = gt_dev_poison(2 * (size_t)n * ld);
        int *didx = gt_to_dev(idx, 4 * (size_t)n);
        CHECK(dsrc && ddst && didx);
        di_gather_rows_bf16(NULL, n, idx, src, (size_t)ld, d, dst, (size_t)ld);
        CUDA_SYNC_CHECK(dic_gather_rows_bf16(&c, n, didx, dsrc, (size_t)ld, d, ddst, (size_t)ld));
        uint16_t *g = gt_d2h(ddst, 2 * (size_t)n * ld);
        CHECK(g);
        CHECK_MSG(memcmp(g, dst, 2 * (size_t)n * ld) == 0, "gather n=%d d=%d: differs from the CPU", n, d);
        free(g), free(src), free(dst), free(idx);
        cudaFree(dsrc), cudaFree(ddst), cudaFree(didx);
    }
}
