/* load_plan_ranks.c — plans per rank of an expert-parallel layout and the search for the
 * smallest layout that fits (load_plan.h "plans per rank"; docs/loading.md "Plans per rank").
 * Pure computations on the config and the checked spec: nothing is allocated for the model. */
#include <stdio.h>
#include <string.h>

#include "model/load_plan.h"

static double gb(uint64_t b) { return (double)b / 1e9; }

deepinfer_status di_plan_layout_check(const di_model_config *cfg, int ep_size, int gpus, di_error *err) {
    const deepinfer_status E = DEEPINFER_ERR_INVALID_ARGUMENT;
    if (ep_size < 1) return di_error_set(err, E, "--ep %d: the expert-parallel size must be at least 1", ep_size);
    if (cfg->n_routed_experts % ep_size)
        return di_error_set(err, E, "%lld experts are not divisible by --ep %d", (long long)cfg->n_routed_experts,
                            ep_size);
    if (cfg->n_stages > 0 && cfg->stage_n_routed_experts > 0 && cfg->stage_n_routed_experts % ep_size)
        return di_error_set(err, E, "the drafter's %lld experts are not divisible by --ep %d",
                            (long long)cfg->stage_n_routed_experts, ep_size);
    if (gpus >= 0 && ep_size > gpus)
        return di_error_set(err, E, "--ep %d needs %d GPUs (one per rank) but %d %s visible", ep_size, ep_size, gpus,
                            gpus == 1 ? "is" : "are");
    return DEEPINFER_OK;
}

deepinfer_status di_load_plan_ranks(const di_model_config *cfg, const di_weight_spec *spec,
                                    const di_load_plan_opts *o, const di_plan_layout *lay, di_load_plan *plans,
                                    di_error *err) {
    for (int r = 0; r < lay->ep_size; r++) {
        di_load_plan_opts ro = *o;
        ro.ep_rank = r, ro.ep_size = lay->ep_size, ro.engram_host = lay->engram_host;
        deepinfer_status st = di_load_plan_compute(cfg, spec, &ro, &plans[r], err);
        if (st) return st;
    }
    return DEEPINFER_OK;
}

/* The largest device need of the layout's ranks (they differ only in which experts they hold). */
static deepinfer_status worst_rank(const di_model_config *cfg, const di_weight_spec *spec, const di_load_plan_opts *o,
                                   const di_plan_layout *lay, di_load_plan *worst, di_error *err) {
    memset(worst, 0, sizeof *worst);
    for (int r = 0; r < lay->ep_size; r++) {
        di_load_plan_opts ro = *o;
        ro.ep_rank = r, ro.ep_size = lay->ep_size, ro.engram_host = lay->engram_host;
        di_load_plan p;
        deepinfer_status st = di_load_plan_compute(cfg, spec, &ro, &p, err);
        if (st) return st;
        if (r == 0 || p.device_need > worst->device_need) *worst = p;
    }
    return DEEPINFER_OK;
}

static int fits(const di_load_plan *p, uint64_t dev_bytes) {
    di_error e = {0};
    return di_load_plan_check(p, dev_bytes, 0, &e) == DEEPINFER_OK;
}

deepinfer_status di_plan_smallest_layout(const di_model_config *cfg, const di_weight_spec *spec,
                                         const di_load_plan_opts *o, uint64_t dev_bytes, int max_ranks,
                                         di_plan_layout *out, di_error *err) {
    int engram = cfg->n_engram_layer_ids > 0 && o->on_device;
    for (int n = 1; n <= max_ranks; n++) {
        if (di_plan_layout_check(cfg, n, -1, NULL)) continue;
        for (int h = 0; h <= engram; h++) {
            di_plan_layout lay = {.ep_size = n, .engram_host = h};
            di_load_plan w;
            deepinfer_status st = worst_rank(cfg, spec, o, &lay, &w, err);
            if (st) return st;
            if (fits(&w, dev_bytes)) {
                *out = lay;
                return DEEPINFER_OK;
            }
        }
    }
    return di_error_set(err, DEEPINFER_ERR_NOT_FOUND, "no layout of up to %d ranks fits %.0f GB devices", max_ranks,
                        gb(dev_bytes));
}

deepinfer_status di_load_plan_layout_fit(const di_model_config *cfg, const di_weight_spec *spec,
                                         const di_load_plan_opts *o, const di_plan_layout *lay, uint64_t dev_bytes,
                                         int gpus, int max_ranks, di_load_plan *plans, di_error *err) {
    deepinfer_status st = di_plan_layout_check(cfg, lay->ep_size, gpus, err);
    if (st) return st;
    if ((st = di_load_plan_ranks(cfg, spec, o, lay, plans, err))) return st;
    if (!o->on_device) return DEEPINFER_OK; /* the CPU: the host check of the load itself */
    int bad = -1;
    for (int r = 0; r < lay->ep_size; r++)
        if (!fits(&plans[r], dev_bytes) && (bad < 0 || plans[r].device_need > plans[bad].device_need)) bad = r;
    if (bad < 0) return DEEPINFER_OK;
    const di_load_plan *p = &plans[bad];
    uint64_t margin = DI_PLAN_DEV_MARGIN_FIXED + dev_bytes / 100 * DI_PLAN_DEV_MARGIN_PCT;
    uint64_t usable = dev_bytes > margin ? dev_bytes - margin : 0;
    char what[160];
    snprintf(what, sizeof what, "%d x %.0f GB device%s (--ep %d)%s", lay->ep_size, gb(dev_bytes),
             lay->ep_size > 1 ? "s" : "", lay->ep_size, lay->engram_host ? " with Engram in host memory" : "");
    di_plan_layout best;
    di_error se = {0};
    char hint[200];
    if (di_plan_smallest_layout(cfg, spec, o, dev_bytes, max_ranks, &best, &se) == DEEPINFER_OK)
        snprintf(hint, sizeof hint, "%s needs >= %d x %.0f GB devices (--ep %d)%s", di_arch_name(cfg->arch),
                 best.ep_size, gb(dev_bytes), best.ep_size,
                 best.engram_host ? " with Engram in host memory (--engram-host)" : "");
    else
        snprintf(hint, sizeof hint, "%.190s", se.msg);
    return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY,
                        "%s does not fit: rank %d needs %.2f GB of device memory (weights %.2f GB of which routed "
                        "experts %.2f GB, Engram %.2f GB; workspace and step buffers %.2f GB; backend contexts %.2f "
                        "GB; reserves %.2f GB) but a %.0f GB device allows %.2f GB after its %.2f GB margin; %s",
                        what, bad, gb(p->device_need), gb(p->weights), gb(p->experts), gb(p->engram),
                        gb(p->workspace + p->step), gb(p->backend), gb(p->reserve_device), gb(dev_bytes), gb(usable),
                        gb(margin), hint);
}
