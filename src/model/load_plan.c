/* load_plan.c — the load's memory plan and fit check (load_plan.h). The
 * sizes mirror what the binders and initialisers allocate: weights.c and
 * weights_v41.c (bind paths), ops/cpu/wmat.c (panels), core.c / workspace.c
 * (di_core_sizes), dsv4.c (hbuf), engram.c, dspark.c, src/ops/cuda/cu_exec.c. */
#include "model/load_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/core.h"
#include "model/dsv4.h"
#include "model/moe_ep.h"
#include "ops/backend.h"
#include "ops/cpu/threadpool.h"
#include "ops/ops.h"
#include "util/sysmem.h"

static int ends(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !memcmp(s + a - b, suffix, b);
}

static uint64_t u64max(uint64_t a, uint64_t b) { return a > b ? a : b; }

static double gb(uint64_t b) { return (double)b / 1e9; }

static uint64_t mats_of(const di_load_plan *p) {
    uint64_t s = 0;
    for (int f = 0; f < 4; f++) s += p->mat[f] + p->scale[f];
    return s;
}

/* A linear of `fmt` with n rows of k inputs (k counts values: FP4 holds two per byte), FP8
 * blocks of B: the checkpoint form on a device (alloc_raw), the panels on the CPU (alloc_wmat). */
static void add_linear(di_load_plan *p, di_wfmt fmt, uint64_t n, uint64_t k, uint64_t B) {
    uint64_t w = 0, s = 0;
    if (p->on_device) {
        switch (fmt) {
        case DI_WFMT_BF16: w = n * k * 2; break;
        case DI_WFMT_F32: w = n * k * 4; break;
        case DI_WFMT_FP8: w = n * k, s = (n + B - 1) / B * (k / B); break;
        case DI_WFMT_FP4: w = n * k / 2, s = n * (k / 32); break;
        }
    } else {
        uint64_t rows = (n + 15) / 16 * 16;
        switch (fmt) {
        case DI_WFMT_BF16: w = rows * k * 2; break;
        case DI_WFMT_F32: w = rows * k * 4; break;
        case DI_WFMT_FP8: w = rows * k, s = ((n + B - 1) / B + 1) * (k / B) * 4; break;
        case DI_WFMT_FP4: w = rows * k / 2, s = rows * (k / 32) * 4; break;
        }
    }
    p->mat[fmt] += w;
    p->scale[fmt] += s;
}

/* The tensor plus its scale when the loader must hold a host copy (a generated checkpoint on
 * the CPU: wload.c di_wload_view). */
static uint64_t view_copy(const di_load_plan *p, const di_tensor *t, const di_tensor *s) {
    if (p->on_device) return 0;
    return (di_st_mapped(t) ? 0 : t->nbytes) + (s && !di_st_mapped(s) ? s->nbytes : 0);
}

static const di_tensor *scale_of(const di_weight_spec *spec, const char *wname) {
    char sn[512];
    size_t l = strlen(wname);
    if (l < 7 || l - 7 + 7 >= sizeof sn) return NULL;
    snprintf(sn, sizeof sn, "%.*s.scale", (int)(l - 7), wname); /* X.weight -> X.scale */
    return di_spec_get(spec, "%s", sn);
}

/* wo_a (weights.c bind_wo_a): per group FP8 bytes + block scales on a device when the groups hold
 * whole blocks, else BF16 (dequantised on the host, 6 bytes per value while converting). */
static void add_wo_a(di_load_plan *p, const di_model_config *c, const di_tensor *t, const di_tensor *s,
                     uint64_t *transient) {
    uint64_t G = (uint64_t)c->o_groups, R = (uint64_t)c->o_lora_rank, K = (uint64_t)t->shape[1];
    uint64_t B = (uint64_t)c->fp8_block_in;
    int fp8 = c->fp8_block_out == c->fp8_block_in && B > 0 && B % 16 == 0 && R % B == 0 && K % B == 0;
    if (p->on_device && fp8) {
        p->mat[DI_WFMT_FP8] += G * R * K;
        p->scale[DI_WFMT_FP8] += G * (R / B) * (K / B);
        return;
    }
    uint64_t rows = p->on_device ? R : (R + 15) / 16 * 16;
    p->mat[DI_WFMT_BF16] += G * rows * K * 2;
    uint64_t nk = (uint64_t)t->shape[0] * K;
    *transient = u64max(*transient, nk * 6 + view_copy(p, t, s) + (p->on_device ? t->nbytes + s->nbytes : 0));
}

/* A routed expert's tensor ("layers.3.ffn.experts.17.w1.weight", a drafter stage's likewise)
 * that another rank of the layout owns (moe_ep.h: expert e of E on rank e / (E / size)). */
static int other_ranks_expert(const di_load_plan *p, const di_model_config *c, const char *nm) {
    if (p->ep_size <= 1) return 0;
    const char *x = strstr(nm, ".ffn.experts.");
    if (!x) return 0;
    long e = strtol(x + 13, NULL, 10);
    int64_t E = !strncmp(nm, "layers.", 7) || c->stage_n_routed_experts <= 0 ? c->n_routed_experts
                                                                             : c->stage_n_routed_experts;
    int64_t per = E / p->ep_size;
    return per > 0 && e / per != p->ep_rank;
}

static int is_routed_expert(const char *nm) { return strstr(nm, ".ffn.experts.") != NULL; }

static void add_tensor(di_load_plan *p, const di_model_config *c, const di_weight_spec *spec, const di_tensor_spec *e,
                       const di_tensor *t, uint64_t *transient) {
    const char *nm = e->name;
    uint64_t B = (uint64_t)c->fp8_block_in;
    if (other_ranks_expert(p, c, nm)) return;
    switch (e->kind) {
    case DI_TK_FP8_WEIGHT:
    case DI_TK_FP4_WEIGHT: {
        const di_tensor *s = scale_of(spec, nm);
        if (ends(nm, "attn.wo_a.weight")) {
            if (s) add_wo_a(p, c, t, s, transient);
            return;
        }
        int fp4 = e->kind == DI_TK_FP4_WEIGHT;
        uint64_t before = mats_of(p);
        add_linear(p, fp4 ? DI_WFMT_FP4 : DI_WFMT_FP8, (uint64_t)t->shape[0], (uint64_t)t->shape[1] * (fp4 ? 2 : 1), B);
        if (is_routed_expert(nm)) p->experts += mats_of(p) - before;
        *transient = u64max(*transient, view_copy(p, t, s));
        return;
    }
    case DI_TK_FP8_SCALE:
    case DI_TK_FP4_SCALE: return; /* with its weight */
    case DI_TK_ENGRAM_TABLE:
    case DI_TK_ENGRAM_SCALE: /* read in place from a mapping on the CPU, else a copy in backend memory */
        if (p->engram_host) p->host_engram += t->nbytes; /* the mapping (a generated checkpoint: a host copy) */
        else if (p->on_device || !di_st_mapped(t)) p->engram += t->nbytes;
        return;
    case DI_TK_PLAIN: break;
    }
    uint64_t n = t->numel;
    if (ends(nm, ".engram.q_weight") || ends(nm, ".engram.k_weight")) { /* fp32 on the host (engram.c reads them) */
        p->host_tables += n * 4;
        if (ends(nm, "q_weight")) { /* the layer's q*k: host, and a device copy */
            p->host_tables += n * 4;
            if (p->on_device) p->engram += n * 4;
        }
        return;
    }
    if (ends(nm, "embed.weight")) { /* BF16 tables as stored */
        p->embed += t->nbytes;
        return;
    }
    if (ends(nm, "tid2eid")) { /* int64 -> int32, converted on the host */
        p->vectors += n * 4;
        *transient = u64max(*transient, n * 12);
        return;
    }
    if (ends(nm, "_fn")) { /* hc mixing matrices: F32 rows */
        add_linear(p, DI_WFMT_F32, (uint64_t)t->shape[0], (uint64_t)t->shape[1], 0);
        return;
    }
    if (ends(nm, "_base") && strstr(nm, "hc_")) { /* di_hc_w: base[24] and scale[3] copied to backend memory */
        p->vectors += 24 * sizeof(float);
        return;
    }
    if (ends(nm, "_scale") && strstr(nm, "hc_")) {
        p->vectors += 3 * sizeof(float);
        return;
    }
    if (e->ndim == 2 && !ends(nm, ".ape")) { /* BF16 / F32 linears */
        add_linear(p, t->dtype == DI_DTYPE_F32 ? DI_WFMT_F32 : DI_WFMT_BF16, (uint64_t)t->shape[0],
                   (uint64_t)t->shape[1], 0);
        *transient = u64max(*transient, view_copy(p, t, NULL));
        return;
    }
    p->vectors += n * 4; /* norms, biases, sinks, ape: fp32 */
}

/* Model-specific buffers after the core's: V4's MTP hidden buffer (dsv4.c) and drafting scratch
 * (mtp.c di_v4_mtp_init), V4.1's Engram workspace (engram.c di_engram_workspace_init) and DSpark
 * scratch (dspark.c). */
static void add_model_buffers(di_load_plan *p, const di_model_config *c, const di_weight_spec *spec) {
    uint64_t M = (uint64_t)p->max_rows, d = (uint64_t)c->hidden_size, hcd = (uint64_t)c->hc_mult * d;
    uint64_t dev = 0, host = 0, V = (uint64_t)c->vocab_size, ptr = sizeof(void *);
    if (c->arch == DI_ARCH_V4) {
        dev += M * hcd * 2;
        if (c->drafter == DI_DRAFTER_MTP && c->n_stages > 0) {
            uint64_t G = M < 8 ? M : 8, slots = G * DI_MTP_MAX_DRAFT;
            dev += G * 4 + M * 4 + G * V * 4 + G * hcd * 2 + slots * (uint64_t)c->head_dim * 2;
            host += M * (4 + 8 + 2 * ptr + 4) + G * 4 + (p->on_device ? G * V * 4 : 0) + slots * ptr;
        }
    } else {
        if (c->n_engram_layer_ids > 0) {
            uint64_t k = (uint64_t)c->engram_cols * (uint64_t)c->engram_head_dim, n = ((uint64_t)c->hc_mult + 1) * d;
            dev += M * k * 2 + M * n * 2 + n * 4 + d * 4;
            host += M * 8;
            if (p->on_device && p->engram_host) host += M * k * 2; /* gathered rows before their copy */
            if (!p->engram_host) { /* the ops' hash (dsv41.c setup_engram_ops): token map (the vocabulary's ids)
                                    * and per layer multipliers, primes and offsets, in backend memory */
                uint64_t b = V * 4 + (uint64_t)c->n_engram_layer_ids *
                                         ((uint64_t)c->engram_max_ngram_size + 2 * (uint64_t)c->engram_cols) * 8;
                if (p->on_device) dev += b;
                else host += b;
            }
        }
        if (c->drafter == DI_DRAFTER_DSPARK && c->n_stages > 0 && c->dspark_block_size > 0) {
            uint64_t Bk = (uint64_t)c->dspark_block_size, R = (uint64_t)c->dspark_markov_rank;
            uint64_t dm = M / Bk < 8 ? M / Bk : 8, rows = dm * Bk;
            host += rows * 4 + dm * 4 + rows * 8 + rows * ptr + rows * 8 + M * (8 + 2 * ptr) +
                    (p->on_device ? dm * V * 4 : 0);
            dev += rows * V * 4 + dm * V * 4 + rows * d * 2 + dm * R * 2 + dm * (d + R) * 2 + (rows + dm) * 4 + rows * 8;
        }
    }
    if (p->ep_size > 1) { /* moe_ep.c: the step scratch of max_rows * top-k entries, the layers' maps */
        int64_t k = c->num_experts_per_tok > c->stage_num_experts_per_tok ? c->num_experts_per_tok
                                                                          : c->stage_num_experts_per_tok;
        uint64_t cap = M * (uint64_t)k, E = (uint64_t)c->n_routed_experts;
        uint64_t Emax = E > (uint64_t)c->stage_n_routed_experts ? E : (uint64_t)c->stage_n_routed_experts;
        uint64_t nl = (uint64_t)(c->n_layers + c->n_stages), S = (uint64_t)p->ep_size;
        /* backend memory: send / receive rows (the receive side with room for S * 64 more), 5 index lists,
         * 2 weight lists, the dispatch's offsets; per layer the device plan's replica table and counters
         * (moe_ep.c: ncopies, copies, local slots, load, replica entries) */
        uint64_t bufs = 2 * cap * d * 2 + S * 64 * d * 2 + 7 * cap * 4 + (Emax + 2) * 4 + 16;
        bufs += nl * (E * (4 + 4 * DI_EP_MAX_COPIES + 4 + 8) + 8);
        uint64_t maps = nl * E * (3 * 4 + 8 + 4 * DI_EP_MAX_COPIES + 8) + 4 * S * 8 + nl * (E + 1) * 8;
        if (p->on_device) dev += bufs;
        else host += bufs;
        host += cap * 7 * 4 + maps; /* the host's lists, the counters pulled between steps */
    }
    (void)spec;
    p->step += dev;
    p->host_tables += host;
}

deepinfer_status di_load_plan_compute(const di_model_config *cfg, const di_weight_spec *spec,
                                      const di_load_plan_opts *o, di_load_plan *p, di_error *err) {
    memset(p, 0, sizeof *p);
    if (!cfg || !spec || !o) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "load plan: missing arguments");
    p->on_device = o->on_device != 0;
    p->ep_size = o->ep_size > 1 ? o->ep_size : 1;
    p->ep_rank = p->ep_size > 1 ? o->ep_rank : 0;
    if (p->ep_rank < 0 || p->ep_rank >= p->ep_size)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "load plan: rank %d is outside --ep %d", o->ep_rank,
                            p->ep_size);
    p->engram_host = o->engram_host && p->on_device;
    di_v4_options lim = {.max_rows = o->max_rows, .max_context = o->max_context};
    di_core_limits(&lim, &p->max_rows, &p->max_context);
    uint64_t transient = 0;
    for (size_t i = 0; i < di_spec_count(spec); i++) {
        const di_tensor_spec *e = di_spec_at(spec, i);
        const di_tensor *t = di_spec_tensor(e);
        if (!t || (e->flags & (DI_SPEC_OPTIONAL | DI_SPEC_UNVERIFIED))) continue; /* never bound */
        add_tensor(p, cfg, spec, e, t, &transient);
    }
    for (int f = 0; f < 4; f++) p->weights += p->mat[f] + p->scale[f];
    p->weights += p->vectors + p->embed + p->engram;

    di_core_size cs;
    di_core_sizes(cfg, p->max_rows, p->max_context, o->nthreads > 0 ? o->nthreads : 1, p->on_device, &cs);
    p->workspace = cs.ws_dev;
    p->step = cs.step_dev;
    p->host_tables += cs.ws_host + cs.exec_scratch + cs.step_host;
    add_model_buffers(p, cfg, spec);
    if (p->on_device) { /* cu_exec.c ctx_new for the model's exec; the load's staging ring */
        uint64_t lines = (uint64_t)cs.exec_scratch * (DI_EXEC_BRANCHES + 1);
        p->backend = u64max(lines, DI_PLAN_DEV_MIN_SCRATCH) + DI_PLAN_DEV_TAB_BYTES;
        p->host_tables += DI_PLAN_DEV_TAB_BYTES;
        p->host_staging = DI_PLAN_DEV_STAGING;
    }
    p->host_transient = transient;
    p->reserve_device = o->reserve_device;
    p->reserve_host = o->reserve_host;
    p->budget = o->budget;
    uint64_t model = p->weights + p->workspace + p->step + p->backend;
    if (p->on_device) {
        p->device_need = model + p->reserve_device;
        p->host_need = p->host_tables + p->host_staging + p->host_transient + p->host_engram + p->reserve_host;
    } else { /* one memory: the caller's device reserve lands on the host too */
        p->host_need = model + p->host_tables + p->host_transient + p->reserve_device + p->reserve_host;
    }
    return DEEPINFER_OK;
}

deepinfer_status di_load_plan_for_load(const di_model_config *cfg, const di_weight_spec *spec,
                                       const di_v4_options *opt, di_error *err) {
    di_threadpool *tp = di_threadpool_global();
    di_load_plan_opts o = {.max_rows = opt ? opt->max_rows : 0,
                           .max_context = opt ? opt->max_context : 0,
                           .on_device = !di_allocator_is_host(),
                           .nthreads = tp ? di_threadpool_size(tp) : 1,
                           .reserve_device = opt ? opt->reserve_device : 0,
                           .reserve_host = opt ? opt->reserve_host : 0,
                           .budget = opt ? opt->budget : 0,
                           .ep_rank = opt ? opt->ep_rank : 0,
                           .ep_size = opt ? opt->ep_size : 0,
                           .engram_host = opt ? opt->engram_host : 0};
    di_load_plan p;
    deepinfer_status st = di_load_plan_compute(cfg, spec, &o, &p, err);
    if (st) return st;
    if (opt && opt->plan_out) *opt->plan_out = p;
    st = di_load_plan_fit(&p, err);
    size_t fb = 0, tb = 0;
    if (st != DEEPINFER_ERR_OUT_OF_MEMORY || !p.on_device || di_backend_mem_info(&fb, &tb) || !tb) return st;
    /* the device is too small for this layout: name the smallest that fits devices like it */
    uint64_t margin = DI_PLAN_DEV_MARGIN_FIXED + (uint64_t)fb / 100 * DI_PLAN_DEV_MARGIN_PCT;
    if (p.device_need <= (fb > margin ? fb - margin : 0)) return st; /* refused for the host or the budget */
    di_plan_layout best;
    di_error se = {0};
    char why[DI_ERROR_MSG_MAX];
    snprintf(why, sizeof why, "%s", err ? err->msg : "");
    if (di_plan_smallest_layout(cfg, spec, &o, (uint64_t)tb, 64, &best, &se) == DEEPINFER_OK)
        return di_error_set(err, st, "%.700s; %s needs >= %d x %.0f GB devices (ep_size %d)%s", why,
                            di_arch_name(cfg->arch), best.ep_size, gb(tb), best.ep_size,
                            best.engram_host ? " with Engram in host memory (engram_host)" : "");
    return di_error_set(err, st, "%.700s; %.250s", why, se.msg);
}

deepinfer_status di_load_plan_check(const di_load_plan *p, uint64_t dev_free, uint64_t host_avail, di_error *err) {
    const char *hint = "use fewer layers, a smaller max_model_len / max_num_seqs, or more memory";
    if (p->on_device) {
        uint64_t margin = DI_PLAN_DEV_MARGIN_FIXED + dev_free / 100 * DI_PLAN_DEV_MARGIN_PCT;
        uint64_t usable = dev_free > margin ? dev_free - margin : 0;
        if (p->device_need > usable)
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY,
                                "the model needs %.2f GB of device memory (weights %.2f GB, workspace and step "
                                "buffers %.2f GB, backend contexts %.2f GB, states and other reserves %.2f GB) but "
                                "%.2f GB is free (%.2f GB after a %.2f GB margin); %s",
                                gb(p->device_need), gb(p->weights), gb(p->workspace + p->step), gb(p->backend),
                                gb(p->reserve_device), gb(dev_free), gb(usable), gb(margin), hint);
    }
    if (host_avail) {
        uint64_t usable = host_avail / 100 * DI_PLAN_HOST_PCT;
        if (p->host_need > usable) {
            if (p->on_device)
                return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY,
                                    "the load needs %.2f GB of host memory (tables and scratch %.2f GB, staging %.2f "
                                    "GB, largest tensor copy %.2f GB, reserves %.2f GB) but %.2f GB is available "
                                    "(%d %% of it planned: %.2f GB); %s",
                                    gb(p->host_need), gb(p->host_tables), gb(p->host_staging), gb(p->host_transient),
                                    gb(p->reserve_host), gb(host_avail), DI_PLAN_HOST_PCT, gb(usable), hint);
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY,
                                "the model needs %.2f GB of host memory on the CPU backend (packed weights %.2f GB, "
                                "workspace and step buffers %.2f GB, tables and scratch %.2f GB, largest tensor copy "
                                "%.2f GB, states and other reserves %.2f GB) but %.2f GB is available (%d %% of it "
                                "planned: %.2f GB); %s",
                                gb(p->host_need), gb(p->weights), gb(p->workspace + p->step), gb(p->host_tables),
                                gb(p->host_transient), gb(p->reserve_device + p->reserve_host), gb(host_avail),
                                DI_PLAN_HOST_PCT, gb(usable), hint);
        }
    }
    uint64_t total = p->device_need + p->host_need;
    if (p->budget && total > p->budget)
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY,
                            "the model needs %.2f GB (%llu bytes: weights %.2f GB, workspace and step buffers %.2f GB, "
                            "states and other reserves %.2f GB, host tables %.2f GB) but the memory_budget is %.2f GB "
                            "(%llu bytes); %s",
                            gb(total), (unsigned long long)total, gb(p->weights), gb(p->workspace + p->step),
                            gb(p->reserve_device + p->reserve_host), gb(p->host_tables), gb(p->budget),
                            (unsigned long long)p->budget, hint);
    return DEEPINFER_OK;
}

deepinfer_status di_load_plan_fit(const di_load_plan *p, di_error *err) {
    size_t fb = 0, tb = 0;
    uint64_t dev_free = (uint64_t)1 << 62; /* no device numbers (e.g. a test's host-memory allocator): not checked */
    if (p->on_device && di_backend_mem_info(&fb, &tb) == 0) dev_free = (uint64_t)fb;
    return di_load_plan_check(p, dev_free, di_sys_mem_available(), err);
}

void di_load_plan_format(const di_load_plan *p, const char *indent, char *buf, size_t n) {
    static const char *fn[4] = {"BF16", "F32", "FP8", "FP4"};
    char fm[256] = "";
    size_t o = 0;
    for (int f = 0; f < 4; f++) {
        if (!p->mat[f] && !p->scale[f]) continue;
        int k = snprintf(fm + o, sizeof fm - o, "%s %s %.2f", o ? "," : "", fn[f], gb(p->mat[f]));
        if (k > 0 && (size_t)k < sizeof fm - o) o += (size_t)k;
        if (p->scale[f] && o < sizeof fm) {
            k = snprintf(fm + o, sizeof fm - o, " (+ scales %.3f)", gb(p->scale[f]));
            if (k > 0 && (size_t)k < sizeof fm - o) o += (size_t)k;
        }
    }
    int w = snprintf(buf, n,
                     "%sweights      %.2f GB in %s memory:%s, vectors %.3f, embeddings %.2f, Engram %.2f GB\n",
                     indent, gb(p->weights), p->on_device ? "device" : "host", fm, gb(p->vectors), gb(p->embed),
                     gb(p->engram));
    if (w < 0 || (size_t)w >= n) return;
    buf += w, n -= (size_t)w;
    if (p->ep_size > 1 || p->host_engram) {
        w = snprintf(buf, n, "%slayout       rank %d of %d: routed experts %.2f GB (%s)%s", indent, p->ep_rank,
                     p->ep_size, gb(p->experts), p->ep_size > 1 ? "its share" : "all of them",
                     p->host_engram ? ", Engram tables in host memory " : "\n");
        if (w < 0 || (size_t)w >= n) return;
        buf += w, n -= (size_t)w;
        if (p->host_engram) {
            w = snprintf(buf, n, "%.2f GB (mapped from the checkpoint, rows copied per step)\n", gb(p->host_engram));
            if (w < 0 || (size_t)w >= n) return;
            buf += w, n -= (size_t)w;
        }
    }
    if (p->on_device)
        snprintf(buf, n,
                 "%sdevice       %.2f GB = weights %.2f + workspace %.2f + step buffers %.2f + backend contexts "
                 "%.2f + reserved %.2f (%d rows per pass, context %lld)\n"
                 "%shost         %.2f GB = tables and scratch %.2f + staging ring %.2f + largest tensor copy %.2f + "
                 "Engram tables %.2f + reserved %.2f\n",
                 indent, gb(p->device_need), gb(p->weights), gb(p->workspace), gb(p->step), gb(p->backend),
                 gb(p->reserve_device), p->max_rows, (long long)p->max_context, indent, gb(p->host_need),
                 gb(p->host_tables), gb(p->host_staging), gb(p->host_transient), gb(p->host_engram),
                 gb(p->reserve_host));
    else
        snprintf(buf, n,
                 "%shost         %.2f GB = weights %.2f + workspace %.2f + step buffers %.2f + tables and scratch "
                 "%.2f + largest tensor copy %.2f + reserved %.2f (%d rows per pass, context %lld)\n",
                 indent, gb(p->host_need), gb(p->weights), gb(p->workspace), gb(p->step), gb(p->host_tables),
                 gb(p->host_transient), gb(p->reserve_device + p->reserve_host), p->max_rows,
                 (long long)p->max_context);
}
