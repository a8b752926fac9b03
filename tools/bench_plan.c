/* bench_plan.c — `deepinfer bench --dummy CONFIG --plan --ep N [--engram-host] [--device-gb G]`
 * (bench_dummy.h): the memory plan of every rank of an expert-parallel layout, computed from the
 * config and the checkpoint's tensor list (a generated header: nothing the size of the model is
 * made), before anything would be uploaded (docs/loading.md "Plans per rank").
 *
 * The model is the config at its full depth (every layer, every expert, the real Engram tables)
 * unless --layers or --experts reduce it (tools/dummy/dummy.h). The devices are --device-gb G GB
 * each, else the visible GPU's memory on --backend cuda, else 141 GB (an H200); the load plan's
 * device margin (load_plan.h) applies. The states of the benchmark's sequences (--batch, --prompt)
 * are every rank's reserve: under EP with dp = 1 every rank holds every sequence's attention
 * state. On --backend cuda more ranks than visible GPUs are refused; with --backend cpu (the
 * loopback communicator) any count is planned. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_dummy.h"
#include "bench_floor.h"
#include "dummy/dummy.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/load_plan.h"
#include "model/tensor_spec.h"
#include "ops/backend.h"
#include "util/error.h"

enum { PLAN_MAX_RANKS = 64 };

/* The config file copied as dir/config.json (the full model, nothing reduced). */
static deepinfer_status copy_config(const char *src, const char *dir, di_error *err) {
    char dst[4200];
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    FILE *in = fopen(src, "rb"), *out = in ? fopen(dst, "wb") : NULL;
    int ok = in && out;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in) fclose(in);
    if (out && fclose(out)) ok = 0;
    return ok ? DEEPINFER_OK : di_error_set(err, DEEPINFER_ERR_IO, "cannot copy %s into %s", src, dir);
}

static void rm_dir(const char *dir) {
    const char *files[] = {"config.json", "engram_token_map.json", "engram_hash.json"};
    char p[4200];
    for (int i = 0; i < 3; i++) snprintf(p, sizeof p, "%s/%s", dir, files[i]), unlink(p);
    rmdir(dir);
}

int bench_plan_run(const bench_dummy_args *a) {
    di_error err = {0};
    char dir[] = "/tmp/deepinfer-plan-XXXXXX";
    if (!mkdtemp(dir)) return fprintf(stderr, "deepinfer bench: cannot create a temp directory\n"), 1;
    di_model_config cfg;
    di_weight_spec *spec = NULL;
    di_safetensors *st = NULL;
    di_load_plan *plans = NULL;
    int rc = 1, cuda = a->backend && !strcmp(a->backend, "cuda");
    deepinfer_status s = a->layers_set || a->experts
                             ? di_dummy_write_dir_ex(a->config, a->layers, a->experts, dir, NULL, &err)
                             : copy_config(a->config, dir, &err);
    if (!s) s = di_config_load(dir, &cfg, &err);
    rm_dir(dir);
    int gpus = -1;
    uint64_t dev = (uint64_t)(a->device_gb * 1e9);
    const char *dev_from = "--device-gb";
    if (cuda) {
        di_cuda_info ci;
        di_backend_cuda_info(&ci);
        gpus = ci.device_count;
        if (!dev && gpus > 0) dev = (uint64_t)ci.total_mem, dev_from = ci.name;
    }
    if (!dev) dev = 141000000000ull, dev_from = "assumed: an H200";
    int ep = a->ep > 0 ? a->ep : 1;
    /* the layout's named errors first: nothing is computed for a layout that cannot run */
    if (!s) s = di_plan_layout_check(&cfg, ep, gpus, &err);
    if (!s && a->dp > 1 && a->dp != ep) /* the engine's rule (src/engine/ranks.h) */
        s = di_error_set(&err, DEEPINFER_ERR_INVALID_ARGUMENT, "--dp %d --ep %d: --ep must equal --dp (or use --dp 1)",
                         a->dp, ep);
    if (!s) s = di_spec_build(&cfg, &spec, &err);
    if (!s) s = di_dummy_weights(&cfg, a->seed, &st, &err);
    if (!s) s = di_spec_check(spec, st, NULL, &err);
    if (s) goto out;
    int maxb = 1, maxl = a->prompt;
    for (int i = 0; i < a->nb; i++) maxb = a->batches[i] > maxb ? a->batches[i] : maxb;
    for (int i = 0; i < a->np; i++) maxl = a->prefill[i] > maxl ? a->prefill[i] : maxl;
    int64_t ctx = (int64_t)(a->prompt + a->decode + 8 > maxl ? a->prompt + a->decode + 8 : maxl);
    int rows = a->rows > maxb ? a->rows : maxb;
    double state_seq = bench_state_bytes(&cfg, ctx), states = state_seq * (maxb + 1);
    di_load_plan_opts o = {.max_rows = rows, .max_context = ctx, .on_device = 1, .nthreads = 1,
                           .reserve_device = (uint64_t)states};
    di_plan_layout lay = {.ep_size = ep, .engram_host = a->engram_host};
    plans = calloc((size_t)ep, sizeof *plans);
    if (!plans) {
        s = di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    char dps[96] = "";
    if (a->dp > 1) snprintf(dps, sizeof dps, " --dp %d (the same plan: every rank holds the attention weights)", a->dp);
    printf("# memory plan per rank: %s (%s, %d layers, %lld routed experts%s), --ep %d%s%s, devices of %.0f GB (%s)\n",
           a->config, di_arch_name(cfg.arch), (int)cfg.n_layers, (long long)cfg.n_routed_experts,
           cfg.n_engram_layer_ids ? ", Engram" : "", ep, dps, a->engram_host ? " --engram-host" : "",
           (double)dev / 1e9, dev_from);
    printf("# states: %d decode sequences + 1 prefill at %lld tokens, %.3f GB each, %.2f GB on every rank "
           "(reserved); %d rows per pass\n", maxb, (long long)ctx, state_seq / 1e9, states / 1e9, rows);
    s = di_load_plan_layout_fit(&cfg, spec, &o, &lay, dev, gpus, PLAN_MAX_RANKS, plans, &err);
    if (s == DEEPINFER_OK || s == DEEPINFER_ERR_OUT_OF_MEMORY) {
        for (int r = 0; r < ep; r++) {
            char txt[2048] = "";
            di_load_plan_format(&plans[r], "  ", txt, sizeof txt);
            printf("rank %d:\n%s", r, txt);
        }
    }
    if (s) goto out;
    uint64_t margin = DI_PLAN_DEV_MARGIN_FIXED + dev / 100 * DI_PLAN_DEV_MARGIN_PCT, worst = 0;
    for (int r = 0; r < ep; r++) worst = plans[r].device_need > worst ? plans[r].device_need : worst;
    printf("fits: every rank needs at most %.2f GB of the %.2f GB a %.0f GB device allows after its %.2f GB margin",
           (double)worst / 1e9, (double)(dev - margin) / 1e9, (double)dev / 1e9, (double)margin / 1e9);
    if (plans[0].host_engram) printf("; host: Engram tables %.2f GB (one copy per host)", plans[0].host_engram / 1e9);
    printf("\n");
    di_plan_layout best;
    if (!di_plan_smallest_layout(&cfg, spec, &o, dev, PLAN_MAX_RANKS, &best, &err))
        printf("smallest layout that fits: --ep %d%s\n", best.ep_size, best.engram_host ? " --engram-host" : "");
    rc = 0;
out:
    if (s) fprintf(stderr, "deepinfer bench: %s\n", err.msg);
    free(plans);
    di_spec_free(spec);
    di_st_close(st);
    return rc;
}
