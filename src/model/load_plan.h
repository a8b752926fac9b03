/*
 * load_plan.h — what loading a model will allocate, computed before any
 * large allocation, and the check that it fits (docs/loading.md "plan
 * first, then allocate").
 *
 * The plan is computed from the config, the validated tensor spec (shapes
 * and dtypes of the checkpoint's tensors, bound by di_spec_check) and the
 * load options, for the backend in place (di_allocator_is_host): the
 * weights in the form the binder keeps them (weights.c: a device backend
 * keeps each tensor in its checkpoint form, the CPU packs panels of 16 rows
 * with fp32 scales, wmat.c), the step workspace and buffers (di_core_sizes,
 * the V4 MTP buffer, the V4.1 Engram and DSpark scratch), a device
 * backend's own contexts and staging ring, and what the caller declares
 * on top (the engine's state pools, a benchmark's sequences).
 *
 * di_load_plan_check is a pure function of the plan and the free numbers,
 * so the refusal is testable; the loaders (di_v4_load, di_v41_load) call
 * di_load_plan_fit, which asks the OS and the backend, after di_spec_check
 * and before binding.
 */
#ifndef DI_MODEL_LOAD_PLAN_H
#define DI_MODEL_LOAD_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/tensor_spec.h"
#include "ops/backend.h"
#include "util/error.h"

/* Margins of the fit check. Device: 1 GiB + 2 % of the free memory stay
 * free for what the plan does not size: the CUDA context's own growth
 * (module loads, cuBLASLt workspaces), CUDA graphs of recorded steps and
 * the allocator's rounding. Host: at most 90 % of MemAvailable is planned,
 * leaving the page cache the streaming reader needs and the rest of the
 * process (tokenizer, libraries). */
#define DI_PLAN_DEV_MARGIN_FIXED ((uint64_t)1 << 30)
#define DI_PLAN_DEV_MARGIN_PCT 2
#define DI_PLAN_HOST_PCT 90

/* A device backend's fixed costs: ops/backend.h DI_DEV_EXEC_* and DI_DEV_STAGE_*. */
#define DI_PLAN_DEV_MIN_SCRATCH ((uint64_t)DI_DEV_EXEC_MIN_SCRATCH)
#define DI_PLAN_DEV_TAB_BYTES ((uint64_t)DI_DEV_EXEC_TAB_BYTES)
#define DI_PLAN_DEV_STAGING ((uint64_t)DI_DEV_STAGE_COUNT * (uint64_t)DI_DEV_STAGE_BYTES)

typedef struct di_load_plan_opts {
    int max_rows;            /* rows per pass (0: the loader's default) */
    int64_t max_context;     /* 0: the loader's default */
    int on_device;           /* 1: weights and buffers in device memory (a backend allocator installed) */
    int nthreads;            /* the CPU pool's size (the workspace's per-thread scratch) */
    uint64_t reserve_device; /* the caller's further needs in backend memory (device backends) */
    uint64_t reserve_host;   /* ... in host memory (on the CPU backend: everything the caller adds) */
    uint64_t budget;         /* a total the caller allows (the engine's memory_budget); 0: none */
    /* Expert parallelism (moe_ep.h): the plan of rank ep_rank of ep_size (0 = 1): its routed
     * experts only (expert e of a layer of E on rank e / (E / ep_size)), every other weight
     * replicated, plus its EP step scratch. */
    int ep_rank, ep_size;
    /* Engram tables in host memory on a device backend (di_v4_options.engram_host): the
     * checkpoint's mapped bytes, rows gathered per step into a host staging buffer and copied
     * to the device; host_engram counts them (one copy per host: ranks of one machine map the
     * same file pages). */
    int engram_host;
} di_load_plan_opts;

/* Bytes by where they live. Weights are in backend memory: the device's on
 * a device backend, the host's on the CPU (packed panels). */
typedef struct di_load_plan {
    int on_device;
    /* weights by format (index: di_wfmt BF16, F32, FP8, FP4): matrices and their scales */
    uint64_t mat[4], scale[4];
    uint64_t vectors;   /* norms, biases, sinks, ape, hc bases and scales, tid2eid (fp32 / int32) */
    uint64_t embed;     /* BF16 embedding tables (embed, DSpark markov embed) */
    uint64_t engram;    /* Engram tables + scales, and each layer's q*k vector on a device */
    uint64_t weights;   /* the sum of the above */
    uint64_t workspace; /* the step workspace (backend memory) */
    uint64_t step;      /* step buffers: R, device logits, V4 MTP buffer, V4.1 Engram / DSpark scratch */
    uint64_t backend;   /* a device backend's exec context (scratch lines + op tables); 0 on the CPU */
    uint64_t reserve_device;
    uint64_t device_need; /* weights + workspace + step + backend + reserve_device; 0 on the CPU */
    /* host */
    uint64_t host_tables;  /* workspace tables, exec scratch, segment table, Engram q/k, DSpark ids */
    uint64_t host_staging; /* the load's staging ring (device backends) */
    uint64_t host_transient; /* the largest tensor a load holds at once (a generated checkpoint's copy) */
    uint64_t reserve_host;
    uint64_t host_need;    /* on the CPU: everything (weights included); else the host part */
    uint64_t budget;       /* opts.budget */
    uint64_t experts;      /* routed-expert matrices and scales this rank holds (part of mat / scale) */
    uint64_t host_engram;  /* Engram tables kept in host memory (engram_host; part of host_need) */
    int ep_rank, ep_size;  /* the layout the plan is for (ep_size >= 1) */
    int engram_host;
    int max_rows;
    int64_t max_context;
} di_load_plan;

/* The plan for `cfg` and its checked `spec` (di_spec_check done). */
deepinfer_status di_load_plan_compute(const di_model_config *cfg, const di_weight_spec *spec,
                                      const di_load_plan_opts *o, di_load_plan *p, di_error *err);

/* The fit check against `dev_free` bytes free on the device (ignored on the
 * CPU) and `host_avail` bytes available on the host (0: unknown, not
 * checked), with the margins above, and against p->budget when set.
 * DEEPINFER_ERR_OUT_OF_MEMORY with a message naming the need, its parts and
 * the free memory. */
deepinfer_status di_load_plan_check(const di_load_plan *p, uint64_t dev_free, uint64_t host_avail, di_error *err);

/* di_load_plan_check with the numbers the backend and the OS report now. */
deepinfer_status di_load_plan_fit(const di_load_plan *p, di_error *err);

/* The load's step (dsv4.c, dsv41.c, after di_spec_check): the plan for
 * opt (may be NULL) on the backend in place, copied to opt->plan_out, and
 * di_load_plan_fit. */
struct di_v4_options;
deepinfer_status di_load_plan_for_load(const di_model_config *cfg, const di_weight_spec *spec,
                                       const struct di_v4_options *opt, di_error *err);

/* ---- plans per rank (load_plan_ranks.c) ----
 * A layout: ep_size ranks, one device each, Engram tables on the device or on the host. */
typedef struct di_plan_layout {
    int ep_size;
    int engram_host;
} di_plan_layout;

/* The EP settings of a layout, checked before anything is computed or allocated: ep_size >= 1,
 * the routed experts (and a drafter's) divisible by it, and no more ranks than `gpus` devices
 * (gpus < 0: not checked, e.g. the CPU loopback communicator, which runs any size). */
deepinfer_status di_plan_layout_check(const di_model_config *cfg, int ep_size, int gpus, di_error *err);

/* The plan of every rank of layout `lay` (`plans` has lay->ep_size entries), from the options
 * `o` (its ep_rank, ep_size and engram_host are replaced per rank). */
deepinfer_status di_load_plan_ranks(const di_model_config *cfg, const di_weight_spec *spec,
                                    const di_load_plan_opts *o, const di_plan_layout *lay, di_load_plan *plans,
                                    di_error *err);

/* The fewest ranks (divisors of the expert count, at most max_ranks) at which every rank's
 * device need fits `dev_bytes` after the margin (load_plan.h), Engram on the device preferred
 * at equal size; *out = that layout. DEEPINFER_ERR_NOT_FOUND when none does. */
deepinfer_status di_plan_smallest_layout(const di_model_config *cfg, const di_weight_spec *spec,
                                         const di_load_plan_opts *o, uint64_t dev_bytes, int max_ranks,
                                         di_plan_layout *out, di_error *err);

/* Layout `lay` on devices of `dev_bytes` each (`gpus` visible, < 0 unchecked): the checks of
 * di_plan_layout_check, every rank's plan into `plans` (lay->ep_size entries), and the fit of
 * each against dev_bytes (di_load_plan_check). A layout that does not fit is refused with
 * DEEPINFER_ERR_OUT_OF_MEMORY naming the largest rank's need, the device's usable bytes and the
 * smallest layout that fits ("needs >= 4 x 141 GB devices (--ep 4) with Engram in host memory
 * (--engram-host)"), or that none of up to max_ranks does. */
deepinfer_status di_load_plan_layout_fit(const di_model_config *cfg, const di_weight_spec *spec,
                                         const di_load_plan_opts *o, const di_plan_layout *lay, uint64_t dev_bytes,
                                         int gpus, int max_ranks, di_load_plan *plans, di_error *err);

/* The plan as a few lines ("load plan ..."), each starting with `indent`. */
void di_load_plan_format(const di_load_plan *p, const char *indent, char *buf, size_t n);

#endif
